"""What the benchmarks print about the machine they ran on, and the
thread settings they fix before numpy, FAISS or TensorFlow load."""

import importlib.metadata
import json
import os
import platform
import subprocess

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS")


def fix_threads(threads):
    """Every thread pool to `threads`; call before numpy, FAISS or TF load."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)


def cpu_name():
    """The CPU model from /proc/cpuinfo, and the number of cores."""
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f
                     if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else platform.processor()}, " \
           f"{os.cpu_count()} cores"


def versions(packages):
    """{"python": ..., package: installed version or "not installed"}."""
    found = {"python": platform.python_version()}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def write_json(path, result, indent=1):
    """Writes `result` to `path` as JSON, creating its folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=indent)


def git_commit():
    """The repository's HEAD commit, "+dirty" if the tree has changes;
    "unknown" outside git."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root,
                              capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain",
                                "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")
