"""What the benchmarks print about the machine they ran on, and the
thread settings they fix before numpy, FAISS or TensorFlow load."""

import contextlib
import datetime
import importlib.metadata
import io
import json
import os
import platform
import subprocess
import sys

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS")


def fix_threads(threads):
    """Every thread pool to `threads`; call before numpy, FAISS or TF load."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)


def cpu_name(cpuinfo="/proc/cpuinfo"):
    """The CPU model from /proc/cpuinfo with its family, model and widest
    vector instructions (a VM's "AMD EPYC" has been both an AVX2-only and
    an AVX-512 part, at different speeds), and the number of cores."""
    fields = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    details = []
    if "cpu family" in fields and "model" in fields:
        details.append(f"family {fields['cpu family']}, model "
                       f"{fields['model']}")
    flags = set(fields.get("flags", "").split())
    if flags:
        details.append("AVX-512" if "avx512f" in flags else
                       "AVX2, no AVX-512" if "avx2" in flags else
                       "no AVX2")
    return (f"{name}{' (' + '; '.join(details) + ')' if details else ''}, "
            f"{os.cpu_count()} cores")


def versions(packages):
    """{"python": ..., package: installed version or "not installed"}."""
    found = {"python": platform.python_version()}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


# The committed folder of results (one small JSON per result); runs/ keeps
# only checkpoints and other large outputs.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def git_commit():
    """The checkout's commit (with "+changes" when a tracked file differs
    from it), or None outside a git checkout. The results folder does not
    count: a run that writes several results changes it before its second
    record is written, and the code that ran is still the commit's."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain",
                                "--untracked-files=no", "--", ".",
                                ":(exclude)benchmarks/results"], cwd=ROOT,
                               capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+changes" if dirty else "")


def provenance(argv=None):
    """Where a result comes from: the command with every flag, the commit,
    the machine, the date (UTC) and the load average when it ended."""
    argv = sys.argv if argv is None else argv
    python = os.path.relpath(sys.executable, ROOT)
    if python.startswith(".."):
        python = sys.executable
    return {"provenance": "measured",
            "command": " ".join([python, *argv]),
            "commit": git_commit(), "machine": cpu_name(),
            "date": datetime.datetime.now(datetime.timezone.utc)
            .strftime("%Y-%m-%dT%H:%M:%SZ"),
            "load": [round(x, 2) for x in os.getloadavg()]}


def result_name(argv=None):
    """A result's default name: the script's name (benchmarks/x.py -> x)."""
    argv = sys.argv if argv is None else argv
    return os.path.splitext(os.path.basename(argv[0]))[0]


def _plain(value):
    """A numpy scalar or array as the Python value JSON can hold."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def write_json(path, result, indent=1, name=None, argv=None, table=None):
    """Writes `result` to `path` as JSON (when `path` is given), creating
    its folder, and always to benchmarks/results/<name>.json inside the
    provenance record (`provenance`): the committed copy the docs' tables
    are rendered from. `name` defaults to the script's name; a benchmark
    that writes several results names each. `table` ({"columns", "rows"}
    of strings) is the Markdown table benchmarks/docs_tables.py writes
    into the docs' region of the same name. Returns the results path."""
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(result, f, indent=indent, default=_plain)
    name = name or result_name(argv)
    if not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"name must be letters, digits, '_' or '-': "
                         f"{name!r}")
    record = {"name": name, **provenance(argv), "result": result}
    if table is not None:
        record.update(kind="table", table=table)
    os.makedirs(RESULTS, exist_ok=True)
    target = os.path.join(RESULTS, f"{name}.json")
    with open(target + ".tmp", "w") as f:
        json.dump(record, f, indent=1, sort_keys=True, default=_plain)
        f.write("\n")
    os.replace(target + ".tmp", target)
    return target


def markdown_tables(text):
    """The Markdown tables of `text`, each {"columns", "rows"} of strings."""
    tables, lines = [], text.splitlines()
    for i in range(len(lines) - 1):
        head, rule = lines[i].strip(), lines[i + 1].strip()
        if not (head.startswith("|") and rule.startswith("|---")):
            continue
        cells = lambda line: [c.strip() for c in line.strip()[1:-1]
                              .split(" | ")]
        rows = []
        for line in lines[i + 2:]:
            if not line.strip().startswith("|"):
                break
            rows.append(cells(line))
        tables.append({"columns": cells(head), "rows": rows})
    return tables


class _Tee(io.TextIOBase):
    """Writes to `stream` and keeps a copy."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text):
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


@contextlib.contextmanager
def recording(name=None, argv=None, table_names=()):
    """Prints as usual and, when the block ends without an error, keeps
    what it printed as the result NAME (default: the script's name): its
    Markdown tables ({"columns", "rows"}) and the text, with provenance.
    For benchmarks that print their tables as they measure. Each of
    `table_names` (in the order the tables are printed; "" skips one)
    also gets its table as a docs' table result of that name."""
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        yield tee
    finally:
        sys.stdout = tee.stream
    text = tee.copy.getvalue()
    tables = markdown_tables(text)
    if len(table_names) > len(tables):
        raise ValueError(f"{len(table_names)} table names for the "
                         f"{len(tables)} tables printed")
    write_json(None, {"tables": tables, "printed": text}, name=name,
               argv=argv)
    for table_name, table in zip(table_names, tables):
        if table_name:
            write_json(None, {"from": name or result_name(argv)},
                       name=table_name, argv=argv, table=table)
