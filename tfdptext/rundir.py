"""The run directory and the export directory: the one owner of their files.

Every file name of the two on-disk formats is spelled here and nowhere
else; training, export, evaluation, sweeps and the benchmarks go through
`RunDir` and `ExportDir` to find, read, validate and write them.

A run directory (written by `tfdptext-train`)::

    config.json          the TrainConfig (written once data and encoder load)
    backup/              resumable state while training (removed when done)
    best.weights.h5      best dev-loss weights so far, with best.json
    user_side.keras      the user side (what runs on the phone)
    server_side.keras    the server side
    vocab.txt            the WordPiece vocabulary
    split.json           split point, guarantee, tokenizer, label names
    metrics.json         written LAST: the run's "finished" marker; it holds
                         the tfdptext version and `run_format`
    logs/                TensorBoard
    eval/                tfdptext-eval's output (eval.json, report.md, plots)

An export directory (written by `tfdptext-export`)::

    manifest.json        mechanism, guarantee, specs, label names, sizes and
                         SHA-256 of every file
    user/privatizer.tflite, user/vocab.txt, user/tokenizer.json
    server/<model name>/<version>/   TF Serving SavedModel

Writes are atomic (a temporary name in the same directory, then a rename),
so a process killed at any instant leaves either the old file or the new
one. Reads turn a missing, truncated or foreign file into a
`tfdptext.errors.TfdptextError` subclass (chosen by the caller) that names
the file.

Pure Python (no TensorFlow import).
"""

import json
import os

from tfdptext import runfiles
from tfdptext.errors import TfdptextError
from tfdptext.version import __version__

# The run directory's layout version, recorded in metrics.json. Runs of
# another layout are refused by the readers with a message saying so.
# 2: the user side returns a dict keyed by the split's release names for
# every split point, and the privatization layer has a fixed name.
RUN_FORMAT = 2

CONFIG = "config.json"
METRICS = "metrics.json"
SPLIT = "split.json"
USER = "user_side.keras"
SERVER = "server_side.keras"
VOCAB = "vocab.txt"
BEST_WEIGHTS = "best.weights.h5"
BEST_RECORD = "best.json"
BACKUP = "backup"
BACKUP_RECORD = "training_metadata.json"
LOGS = "logs"
EVAL = "eval"
EVAL_RESULT = "eval.json"
EVAL_REPORT = "report.md"
SWEEP_STATE = "sweep.json"

# What shows that a run made progress: a directory holding config.json and
# none of these is a run whose start failed, and is treated as new.
PROGRESS = (BACKUP, BEST_WEIGHTS, BEST_RECORD, METRICS)
# A finished run holds all of these.
FINISHED_FILES = (CONFIG, SPLIT, METRICS, VOCAB, USER, SERVER)
# The keys each JSON file of a finished run must hold.
REQUIRED_KEYS = {
    CONFIG: ("mode", "mechanism", "max_length", "dataset"),
    SPLIT: ("split_point", "guarantee", "tokenizer"),
    METRICS: ("versions", "parameters", "epochs"),
}

MANIFEST = "manifest.json"
USER_DIR = "user"
PHONE_MODEL = "user/privatizer.tflite"
TEXT_PHONE_MODEL = "user/privatizer_text_in.tflite"
EXPORT_VOCAB = "user/vocab.txt"
TOKENIZER = "user/tokenizer.json"
SERVER_DIR = "server"
# What an export's readers take from manifest.json.
MANIFEST_KEYS = ("split_point", "guarantee", "user.file", "user.tokenizer",
                 "user.inputs", "server.path", "server.signature")


def write_json(path, value, indent=2):
    """Writes `value` as JSON to `path` atomically (same directory)."""
    tmp = os.path.join(os.path.dirname(path) or ".",
                       f".{os.path.basename(path)}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=indent)
    os.replace(tmp, path)


def write_text(path, text):
    """Writes `text` to `path` atomically (same directory)."""
    tmp = os.path.join(os.path.dirname(path) or ".",
                       f".{os.path.basename(path)}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def same_minor_version(version):
    """Whether a recorded tfdptext version shares this one's major.minor."""
    return isinstance(version, str) and \
        version.split(".")[:2] == __version__.split(".")[:2]


class RunDir:
    """A training run's directory.

    Example:
    >>> run = RunDir("runs/ag_eps0.05")
    >>> run.is_finished()
    True
    >>> config, split, metrics = run.check_finished()
    >>> run.file(rundir.USER)
    'runs/ag_eps0.05/user_side.keras'
    """

    def __init__(self, path, error=TfdptextError):
        self.path = path
        self.error = error

    def file(self, name):
        """The path of the run file `name` (one of this module's names)."""
        return os.path.join(self.path, name)

    def exists(self, name):
        return os.path.exists(self.file(name))

    def is_finished(self):
        """Whether metrics.json, written last, is there."""
        return self.exists(METRICS)

    def has_progress(self):
        """Whether the directory holds any training progress."""
        return any(self.exists(name) for name in PROGRESS)

    def read(self, name, required=None):
        """The JSON object in run file `name` (error naming it if bad);
        `required` defaults to REQUIRED_KEYS[name]."""
        if required is None:
            required = REQUIRED_KEYS.get(name, ())
        return runfiles.read_json(self.file(name), self.error,
                                  required=required)

    def write(self, name, value, indent=2):
        """Writes run file `name` atomically, creating the directory."""
        os.makedirs(self.path, exist_ok=True)
        write_json(self.file(name), value, indent)

    def write_text(self, name, text):
        os.makedirs(self.path, exist_ok=True)
        write_text(self.file(name), text)

    def save_model(self, name, model):
        """Saves a Keras model as run file `name` atomically."""
        tmp = self.file(f".tmp-{os.getpid()}-{name}")
        model.save(tmp)
        os.replace(tmp, self.file(name))

    def check_version(self, metrics):
        """Raises unless metrics.json comes from this tfdptext's major.minor
        and this run layout."""
        versions = metrics.get("versions")
        version = versions.get("tfdptext") if isinstance(versions, dict) \
            else None
        if not same_minor_version(version):
            raise self.error(
                f"{self.path} was made by tfdptext {version}; this is "
                f"{__version__}. Train it again, or use tfdptext {version}.")
        found = metrics.get("run_format", 1)
        if found != RUN_FORMAT:
            raise self.error(
                f"{self.file(METRICS)}: run layout {found}, this tfdptext "
                f"reads layout {RUN_FORMAT}; train the run again.")

    def check_finished(self, what="run_dir"):
        """(config, split, metrics) of a finished run of this version.

        Checks, before any model is loaded: the directory, every file of a
        finished run, that the JSON files parse and hold their keys, the
        version, that both .keras files are complete archives, and the
        vocabulary. Every error names the file (or `what`, the argument).
        """
        if not os.path.exists(self.path):
            raise self.error(f"`{what}`: no such directory {self.path}.")
        if not os.path.isdir(self.path):
            raise self.error(f"`{what}` {self.path} is a file, not a run "
                             "directory.")
        missing = [f for f in FINISHED_FILES if not self.exists(f)]
        if missing:
            raise self.error(
                f"{self.path} is not a finished tfdptext run (missing "
                f"{missing}); train it with tfdptext-train.")
        config, split, metrics = (self.read(CONFIG), self.read(SPLIT),
                                  self.read(METRICS))
        self.check_version(metrics)
        for name in (USER, SERVER):
            runfiles.check_keras_file(self.file(name), self.error)
        vocab = self.file(VOCAB)
        if not os.path.isfile(vocab) or os.path.getsize(vocab) == 0:
            raise self.error(f"{vocab} is empty or not a file.")
        return config, split, metrics


class ExportDir:
    """An export directory (`tfdptext-export`'s output).

    Example:
    >>> export = ExportDir("exports/ag_eps0.05")
    >>> manifest = export.check()
    >>> export.file(manifest["user"]["file"])
    'exports/ag_eps0.05/user/privatizer.tflite'
    """

    def __init__(self, path, error=TfdptextError):
        self.path = path
        self.error = error

    def file(self, rel):
        return os.path.join(self.path, rel)

    def server_path(self, model_name, version):
        """The SavedModel's path inside the export (relative)."""
        return f"{SERVER_DIR}/{model_name}/{version}"

    def write_manifest(self, manifest):
        write_json(self.file(MANIFEST), manifest)

    def read_manifest(self):
        return runfiles.read_json(self.file(MANIFEST), self.error,
                                  required=MANIFEST_KEYS)

    def file_records(self):
        """{relative path: {"bytes", "sha256"}} of every file in the
        directory (for the manifest)."""
        records = {}
        for root, _, names in os.walk(self.path):
            for name in sorted(names):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, self.path)
                records[rel] = {"bytes": os.path.getsize(path),
                                "sha256": runfiles.sha256_file(path)}
        return records

    def _check_inside(self, manifest):
        root = os.path.realpath(self.path)
        listed = [manifest["server"]["path"], manifest["user"]["file"],
                  *(manifest.get("files") or {})]
        for rel in listed:
            inside = os.path.realpath(self.file(str(rel)))
            if os.path.commonpath([root, inside]) != root:
                raise self.error(
                    f"{self.file(MANIFEST)}: the path {rel!r} points outside "
                    f"{self.path}; the manifest was tampered with.")

    def _check_files(self, manifest):
        for rel, record in sorted((manifest.get("files") or {}).items()):
            file = self.file(rel)
            if not os.path.isfile(file):
                raise self.error(f"{file}: no such file (listed in "
                                 f"{MANIFEST}); the export is incomplete.")
            record = record if isinstance(record, dict) else {}
            size = record.get("bytes")
            if size is not None and os.path.getsize(file) != size:
                raise self.error(
                    f"{file} is {os.path.getsize(file)} bytes, {MANIFEST} "
                    f"says {size}: it was truncated or replaced; export the "
                    "run again.")
            digest = record.get("sha256")
            if digest is not None:
                actual = runfiles.sha256_file(file)
                if actual != digest:
                    raise self.error(
                        f"{file}: SHA-256 {actual[:16]}... differs from "
                        f"{MANIFEST}'s {str(digest)[:16]}...: the file was "
                        "replaced or corrupted; export the run again.")

    def check(self, what="export_dir"):
        """The manifest of a complete export; raises otherwise.

        Checks, before loading anything: the directory, manifest.json (valid
        JSON with the keys used), that no listed path leaves the directory,
        that every file the manifest lists is there with the size and
        SHA-256 it records, the vocabulary and the server SavedModel.
        """
        if not os.path.isdir(self.path):
            raise self.error(f"`{what}`: {self.path} is not a directory.")
        if not os.path.isfile(self.file(MANIFEST)):
            raise self.error(f"`{what}`: {self.path} holds no {MANIFEST}; "
                             "is it a tfdptext export?")
        manifest = self.read_manifest()
        self._check_inside(manifest)
        server_dir = self.file(manifest["server"]["path"])
        if not os.path.isdir(server_dir):
            raise self.error(
                f"{server_dir}: no such directory ({MANIFEST}'s "
                "server.path); the export is incomplete: export the run "
                "again.")
        for rel in (manifest["user"]["file"], EXPORT_VOCAB):
            if not os.path.isfile(self.file(rel)):
                raise self.error(f"{self.file(rel)}: no such file; the "
                                 "export is incomplete.")
        self._check_files(manifest)
        return manifest
