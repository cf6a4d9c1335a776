"""Reading run and export files with clear errors, and partial directories.

`read_json` and `check_keras_file` turn a truncated, corrupt or incomplete
file into an error (a `tfdptext.errors.TfdptextError` subclass chosen by the
caller) that names the file and what is wrong with it, instead of a raw
traceback from json, zipfile or Keras.

Partial directories: a program that writes a directory atomically (export,
evaluation) writes into `<parent>/.<name>.partial-<pid>` and renames it to
`<parent>/<name>` when complete. A process killed with SIGKILL leaves its
partial directory behind; `remove_stale_partials` (called by the next
export or evaluation into the same parent) removes every such directory
whose process is no longer alive on this machine. It assumes that the
processes writing into that parent run on this machine: the parent must
not be shared, through a network file system, with writers on other
machines.

Pure Python (no TensorFlow import).
"""

import hashlib
import json
import os
import re
import shutil
import zipfile

from tfdptext.errors import TfdptextError

_PARTIAL = re.compile(r"^\.(?P<name>.+)\.partial-(?P<pid>\d+)$")


def _first_line(err):
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def read_json(path, error=TfdptextError, required=(), what=None):
    """The JSON object in `path`.

    Raises `error` naming the file when it is missing, not a file, not
    UTF-8, not valid JSON (with the line and column), not a JSON object, or
    lacks one of the `required` keys (a key "a.b" means object a holds b).
    """
    label = f"{what} {path}" if what else path
    if not os.path.exists(path):
        raise error(f"{label}: no such file.")
    if not os.path.isfile(path):
        raise error(f"{label} is not a file.")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as err:
        raise error(f"{label} is not UTF-8 text (byte {err.start}); the "
                    "file is corrupt.") from None
    except OSError as err:
        raise error(f"{label} cannot be read: {err.strerror}.") from None
    if not text.strip():
        raise error(f"{label} is empty (truncated: was the program that "
                    "wrote it killed?).")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"{label} is not valid JSON ({err.msg}: line "
                    f"{err.lineno}, column {err.colno}); the file is "
                    "truncated or corrupt.") from None
    if not isinstance(value, dict):
        raise error(f"{label} must hold a JSON object, found a "
                    f"{type(value).__name__}.")
    for key in required:
        node, parts = value, key.split(".")
        for i, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                where = ".".join(parts[:i])
                raise error(f"{label} lacks the key {part!r}"
                            + (f" in {where!r}" if where else "")
                            + "; the file is incomplete or not the one "
                            "tfdptext wrote.")
            node = node[part]
    return value


def check_keras_file(path, error=TfdptextError):
    """Raises `error` unless `path` is a complete .keras archive (a zip
    holding config.json and model.weights.h5, with matching checksums)."""
    if not os.path.isfile(path):
        raise error(f"{path}: no such file.")
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            missing = {"config.json", "model.weights.h5"} - names
            if missing:
                raise error(f"{path} is not a Keras model archive (lacks "
                            f"{sorted(missing)}).")
            bad = archive.testzip()
            if bad is not None:
                raise error(f"{path} is corrupt ({bad} fails its "
                            "checksum).")
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise error(f"{path} is not a complete .keras file ("
                    f"{_first_line(err)}); it is truncated or corrupt "
                    "(was the program that wrote it killed?).") from None


def check_output_path(path, flag="output_dir", error=TfdptextError):
    """Raises `error` when `path` exists and is not a directory."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise error(f"`{flag}` {path} is a file, not a directory; choose "
                    "a directory.")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise error(f"`{flag}` {path}: {parent} is a file, not a "
                    "directory.")


def pid_alive(pid):
    """Whether a process `pid` exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def partial_dir(output_dir):
    """This process's partial directory for `output_dir` (a sibling)."""
    parent = os.path.dirname(os.path.abspath(output_dir))
    name = os.path.basename(os.path.normpath(output_dir))
    return os.path.join(parent, f".{name}.partial-{os.getpid()}")


def remove_stale_partials(parent):
    """Removes the `.<name>.partial-<pid>` directories in `parent` whose
    process is not alive (left by a killed export or evaluation).

    Returns the paths removed.
    """
    removed = []
    if not os.path.isdir(parent):
        return removed
    for entry in os.listdir(parent):
        match = _PARTIAL.match(entry)
        if not match or int(match["pid"]) == os.getpid():
            continue
        if pid_alive(int(match["pid"])):
            continue
        path = os.path.join(parent, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def sha256_file(path):
    """The hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def start_partial(output_dir):
    """Creates this process's partial directory for `output_dir` (after
    removing the stale ones of killed processes in the same parent) and
    returns its path."""
    parent = os.path.dirname(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    remove_stale_partials(parent)
    partial = partial_dir(output_dir)
    os.makedirs(partial)
    return partial
