"""The run directory and the export directory: the one owner of their files.

Every file name of the two on-disk formats is spelled here and nowhere
else; training, export, evaluation, sweeps and the benchmarks go through
`RunDir` and `ExportDir` to find, read, validate and write them.

A run directory (written by `tfdptext-train`)::

    config.json          the TrainConfig (written once data and encoder load)
    backup/              resumable state while training (removed when done)
    best.weights.h5      best dev-loss weights so far, with best.json
                         (removed when done: the .keras files hold them)
    user_side.keras      the user side (what runs on the phone)
    server_side.keras    the server side
    vocab.txt            the WordPiece vocabulary
    split.json           split point, guarantee, tokenizer, label names
    randomized_labels.json  with --label_epsilon: the users' randomized
                         train and dev labels, drawn once (read on resume)
    training_release.npz with --training_release=once (modes token_rep,
                         text_to_text, seq_rep): the user side's release
                         of every train and dev text, drawn once (read on
                         resume); layout in `RunDir.write_training_release`
    run.json             the run's identity (a random run id, written when
                         the run directory is created) and the SHA-256 of
                         each draw of what users send (the two files
                         above), recorded when drawn and checked on every
                         read (`RunDir.write_draw`, `RunDir.check_draw`)
    metrics.json         written LAST: the run's "finished" marker; it holds
                         the tfdptext version and `run_format`
    logs/                TensorBoard
    eval/                tfdptext-eval's output (eval.json, report.md, plots)

An export directory (written by `tfdptext-export`)::

    manifest.json        mechanism, guarantee, specs, label names, sizes and
                         SHA-256 of every file
    user/privatizer.tflite, user/vocab.txt, user/tokenizer.json
                         (the .tflite holds one signature per input length,
                         listed in the manifest's user.models)
    server/<model name>/<version>/   TF Serving SavedModel

`RunDir` also owns a run's training state: `training_state` says whether a
directory holds a NEW run, one to RESUME or a FINISHED one; `save_best` /
`read_best` and `save_backup` / `read_backup` write and read the best
checkpoint and the resumable backup.

Writes are atomic (a temporary name in the same directory, then a rename),
so a process killed at any instant leaves either the old file or the new
one. Reads turn a missing, truncated or foreign file into a
`tfdptext.errors.TfdptextError` subclass (chosen by the caller) that names
the file.

Python and numpy (no TensorFlow import).
"""

import hashlib
import json
import os
import re
import secrets
import shutil
import zipfile

import numpy as np

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
EVAL_PREDICTIONS = "predictions.npz"
SWEEP_STATE = "sweep.json"
# Label privacy (--label_epsilon): the randomized train and dev labels,
# drawn once and read back on resume.
RANDOMIZED_LABELS = "randomized_labels.json"
# --training_release=once: the users' released train and dev inputs.
TRAINING_RELEASE = "training_release.npz"
# Its layout version (meta["format"]). 2: meta names the run id.
TRAINING_RELEASE_FORMAT = 2
# The run's identity and the digests of its draws of what users send.
RUN_RECORD = "run.json"
# What a run draws once from what users send (never again: see
# RunDir.check_may_draw).
USER_DRAWS = (RANDOMIZED_LABELS, TRAINING_RELEASE)

# What shows that a run made progress: a directory holding config.json and
# none of these is a run whose start failed, and is treated as new.
PROGRESS = (BACKUP, BEST_WEIGHTS, BEST_RECORD, METRICS)
# A finished run holds all of these.
FINISHED_FILES = (CONFIG, SPLIT, METRICS, VOCAB, USER, SERVER)
# What only resuming needs; removed when the run finishes.
CHECKPOINT_FILES = (BACKUP, BEST_WEIGHTS, BEST_RECORD)
# The keys each JSON file of a finished run must hold.
REQUIRED_KEYS = {
    CONFIG: ("mode", "mechanism", "max_length", "dataset"),
    RUN_RECORD: ("run_id", "draws"),
    SPLIT: ("split_point", "guarantee", "tokenizer"),
    METRICS: ("versions", "parameters", "epochs"),
}

# RunDir.training_state's verdicts: a new run (nothing to keep), an
# interrupted run to resume, or a finished run (nothing to do).
NEW, RESUME, FINISHED = "new", "resume", "finished"


def backup_weights_name(epoch):
    """The backup's weights file after `epoch` epochs (inside BACKUP)."""
    return f"epoch-{epoch}.weights.h5"


# What older backups' training_metadata.json named when it named nothing.
LEGACY_BACKUP_WEIGHTS = "latest.weights.h5"

MANIFEST = "manifest.json"
USER_DIR = "user"
PHONE_MODEL = "user/privatizer.tflite"
TEXT_PHONE_MODEL = "user/privatizer_text_in.tflite"
EXPORT_VOCAB = "user/vocab.txt"
TOKENIZER = "user/tokenizer.json"
# Strings and their ids (tfdptext.data.tokenizer_vectors).
TOKENIZER_VECTORS = "user/tokenizer_vectors.json"
SERVER_DIR = "server"
# What an export's readers take from manifest.json.
MANIFEST_KEYS = ("split_point", "guarantee", "user.file", "user.tokenizer",
                 "user.inputs", "server.path", "server.signature")


# Temporary files of atomic writes: ".tmp-<pid>-<name>" (models, weights)
# and ".<name>.tmp-<pid>" (JSON and text).
TEMPORARY_PREFIX = ".tmp-"
_TEMPORARY = re.compile(r"^\.(?:tmp-(\d+)[-.].+|.+\.tmp-(\d+))$")


def temporary_owner(name):
    """The process id in a temporary file's name, or None for any other
    name."""
    match = _TEMPORARY.match(name)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


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


def _file_identity(path):
    """(inode, size, modification time) of `path`, or None without it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def state_digest(model):
    """A digest of everything `model.save_weights` writes: the model's
    variables and its optimizer's (paths, dtypes, shapes and values). Two
    saves with equal digests write the same bytes (Keras's weights file
    is a deterministic function of that state and the model's structure).
    """
    digest = hashlib.blake2b(digest_size=20)
    optimizer = getattr(model, "optimizer", None)
    for group in (model.variables,
                  getattr(optimizer, "variables", None) or ()):
        digest.update(b"|group|")
        for variable in group:
            value = np.ascontiguousarray(variable.numpy())
            digest.update(f"{variable.path}:{value.dtype.str}:"
                          f"{value.shape};".encode())
            digest.update(value.tobytes())
    return digest.digest()


def same_minor_version(version):
    """Whether a recorded tfdptext version shares this one's major.minor."""
    return isinstance(version, str) and \
        version.split(".")[:2] == __version__.split(".")[:2]


class Directory:
    """A directory of named files, read and written safely: JSON reads
    that name the file when it is missing, truncated or lacks a key
    (`required_keys`), atomic writes, and removal of what killed processes
    left. `RunDir` and the pretraining directory build on it.
    """

    # {file name: keys its JSON object must hold}.
    required_keys = {}

    def __init__(self, path, error=TfdptextError):
        self.path = path
        self.error = error

    def file(self, name):
        """The path of the run file `name` (one of this module's names)."""
        return os.path.join(self.path, name)

    def exists(self, name):
        return os.path.exists(self.file(name))

    def read(self, name, required=None):
        """The JSON object in run file `name` (error naming it if bad);
        `required` defaults to `required_keys[name]`."""
        if required is None:
            required = self.required_keys.get(name, ())
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
        self.write_with(name, model.save)

    def write_with(self, name, write):
        """Writes run file `name` atomically with `write(path)` (which
        writes a file at `path`): a temporary name, then a rename."""
        os.makedirs(self.path, exist_ok=True)
        tmp = self.file(f"{TEMPORARY_PREFIX}{os.getpid()}-{name}")
        write(tmp)
        os.replace(tmp, self.file(name))

    def remove_stale_temporaries(self):
        """Removes the temporary files that killed processes left in the
        directory (a kill during an atomic write); those of live processes
        are kept. Returns the names removed."""
        if not os.path.isdir(self.path):
            return []
        removed = []
        for name in sorted(os.listdir(self.path)):
            pid = temporary_owner(name)
            if pid is not None and not runfiles.pid_alive(pid):
                path = self.file(name)
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)
                removed.append(name)
        return removed

    def remove(self, name):
        """Removes run file or directory `name` if it is there."""
        path = self.file(name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.remove(path)


def _npz_key(split, part):
    return f"{split}_{part}"


class RunDir(Directory):
    """A training run's directory.

    Example:
    >>> run = RunDir("runs/ag_eps0.05")
    >>> run.is_finished()
    True
    >>> config, split, metrics = run.check_finished()
    >>> run.file(rundir.USER)
    'runs/ag_eps0.05/user_side.keras'
    """

    required_keys = REQUIRED_KEYS

    def is_finished(self):
        """Whether metrics.json, written last, is there."""
        return self.exists(METRICS)

    def has_progress(self):
        """Whether the directory holds any training progress."""
        return any(self.exists(name) for name in PROGRESS)

    # Training state: the best checkpoint and the backup (resume).

    def read_best(self):
        """The best dev loss recorded in best.json, or None when there is
        none (or best.weights.h5 is missing: a record without weights)."""
        if not self.exists(BEST_RECORD):
            return None
        record = self.read(BEST_RECORD, required=("val_loss",))
        try:
            return float(record["val_loss"])
        except (TypeError, ValueError):
            raise self.error(
                f"{self.file(BEST_RECORD)}: 'val_loss' is "
                f"{record['val_loss']!r}, not a number.") from None

    def _save_weights(self, model, path):
        """Writes `model`'s weights file to `path` atomically. When the
        model's state is the one this RunDir wrote last (the best
        checkpoint and the backup after the same epoch) and that file is
        still as written, its bytes are copied instead of serialising the
        model again: the same file, for a fraction of the cost."""
        digest = state_digest(model)
        last = getattr(self, "_last_weights", None)
        # The temporary name keeps the .weights.h5 ending Keras requires.
        tmp = os.path.join(os.path.dirname(path),
                           f"{TEMPORARY_PREFIX}{os.getpid()}.weights.h5")
        if last is not None and last[0] == digest and \
                _file_identity(last[1]) == last[2]:
            shutil.copyfile(last[1], tmp)
        else:
            model.save_weights(tmp, overwrite=True)
        os.replace(tmp, path)
        self._last_weights = (digest, path, _file_identity(path))

    def save_best(self, model, record):
        """Saves `model`'s weights as best.weights.h5, then `record` as
        best.json (each atomically: a kill leaves complete files)."""
        self._save_weights(model, self.file(BEST_WEIGHTS))
        self._best_weights = self._last_weights
        self.write(BEST_RECORD, record, indent=None)

    def holds_best(self, model):
        """Whether `model`'s state (its variables and its optimizer's) is
        the one this RunDir last saved as best.weights.h5, and that file
        is still as written: loading it would change nothing (the best
        epoch was the last one)."""
        best = getattr(self, "_best_weights", None)
        return best is not None and \
            _file_identity(self.file(BEST_WEIGHTS)) == best[2] and \
            state_digest(model) == best[0]

    def read_backup(self):
        """(epochs done, weights file) of the backup, or None when there is
        none. Raises `error` naming the file when the backup is
        unreadable."""
        meta = os.path.join(self.file(BACKUP), BACKUP_RECORD)
        if not os.path.exists(meta):
            return None
        record = runfiles.read_json(meta, self.error, required=("epoch",))
        weights = os.path.join(self.file(BACKUP),
                               record.get("weights", LEGACY_BACKUP_WEIGHTS))
        hint = (f"remove {self.file(BACKUP)} to restart the run from epoch "
                "1, or choose another --output_dir")
        if not os.path.isfile(weights):
            raise self.error(f"{meta} names {weights}, which is missing; "
                             f"{hint}.")
        import h5py  # pure HDF5 reader, no TensorFlow

        try:
            with h5py.File(weights, "r"):
                pass
        except OSError as err:
            raise self.error(f"{weights} is unreadable ({err}); {hint}."
                             ) from None
        return int(record["epoch"]), weights

    def save_backup(self, model, epoch):
        """Backs up `model`'s state after `epoch` epochs, SIGKILL-safe.

        The weights go to a new file (temporary name, then renamed);
        training_metadata.json, renamed into place after it, names it;
        older weight files are removed last.
        """
        backup = self.file(BACKUP)
        os.makedirs(backup, exist_ok=True)
        name = backup_weights_name(epoch)
        self._save_weights(model, os.path.join(backup, name))
        write_json(os.path.join(backup, BACKUP_RECORD),
                   {"epoch": epoch, "batch": 0, "weights": name},
                   indent=None)
        for old in os.listdir(backup):
            if old.endswith(".weights.h5") and old != name:
                os.remove(os.path.join(backup, old))

    def training_state(self, identity, epochs, identity_of):
        """NEW, RESUME or FINISHED for the run `identity` of `epochs`
        epochs; writes nothing.

        NEW: absent or empty directory, or one whose earlier start failed
        before any progress (config.json but no checkpoint). RESUME: this
        same run, interrupted. FINISHED: this same run, metrics.json
        written. Raises `error` when the path is a file, or the directory
        holds a different run or other files, or a run file is unreadable
        (naming it).

        Args:
            identity: what must match to resume (TrainConfig.run_identity).
            epochs: the epochs asked for.
            identity_of: config.json's object -> its identity; raises
                TypeError or ValueError when it is not a training config.
        """
        runfiles.check_output_path(self.path, error=self.error)
        if not self.exists(CONFIG):
            if os.path.isdir(self.path) and os.listdir(self.path):
                raise self.error(
                    f"{self.path} is not empty and holds no tfdptext run; "
                    "choose another --output_dir.")
            return NEW
        path = self.file(CONFIG)
        data = runfiles.read_json(path, self.error)
        try:
            previous = identity_of(data)
        except (TypeError, ValueError) as err:
            raise self.error(
                f"{path} is not a tfdptext training config ({err}).") from None
        progress = self.has_progress()
        if previous != identity:
            if not progress:
                return NEW  # its start failed: nothing to keep
            changed = sorted(k for k, v in identity.items()
                             if previous.get(k) != v)
            raise self.error(
                f"{self.path} holds a different run (fields that differ: "
                f"{changed}); choose another --output_dir or remove it.")
        if self.is_finished():
            done = self.read(METRICS, required=("epochs",))["epochs"]
            if done != epochs:
                raise self.error(
                    f"{self.path} holds this run, finished after {done} "
                    f"epochs; it cannot be continued to {epochs} (its "
                    "checkpoint was removed when it finished). Use "
                    f"--epochs={done} to keep it, or another --output_dir.")
            return FINISHED
        self.read_backup()  # clear errors if unreadable
        self.read_best()
        return RESUME if progress else NEW

    # The run's identity and its draws of what users send (RUN_RECORD).

    def run_record(self):
        """RUN_RECORD's object, or None when the run has none yet."""
        if not self.exists(RUN_RECORD):
            return None
        record = self.read(RUN_RECORD)
        if not isinstance(record["draws"], dict):
            raise self.error(f"{self.file(RUN_RECORD)}: 'draws' is not an "
                             "object.")
        return record

    def run_id(self, create=False):
        """The run's random id (RUN_RECORD); with `create`, one is drawn
        (128 bits from os.urandom) and written when the run has none."""
        record = self.run_record()
        if record is None and create:
            record = {"run_id": secrets.token_hex(16), "draws": {}}
            self.write(RUN_RECORD, record)
        return None if record is None else str(record["run_id"])

    def adopt_run_record(self, record):
        """Writes `record` (the chief's RUN_RECORD) as this run's: a
        worker's scratch run checks its copies against the chief's."""
        self.write(RUN_RECORD, record)

    def recorded_draw(self, name):
        """The SHA-256 RUN_RECORD holds for draw `name`, or None."""
        record = self.run_record()
        return None if record is None else record["draws"].get(name)

    def check_may_draw(self, name):
        """Raises `error` unless draw `name` may be drawn now: never in a
        run that has progress (checkpoints or metrics of an epoch) or that
        recorded drawing it, since every text or label it holds was then
        released already (and trained on)."""
        recorded = self.recorded_draw(name)
        if recorded is None and not self.has_progress():
            return
        why = (f"{self.file(RUN_RECORD)} records that it was drawn (SHA-256 "
               f"{recorded[:12]}...)" if recorded else
               "the run has progress (checkpoints or metrics of an epoch), "
               "so it was drawn and trained on")
        raise self.error(
            f"{self.file(name)} is missing, and {why}: what users sent is "
            "released once and never drawn again. Restore the file, or "
            "start over in a new --output_dir (a new run, which draws its "
            "own release once).")

    def write_draw(self, name, write):
        """Writes draw `name` atomically with `write(path)`, its SHA-256
        recorded in RUN_RECORD before the file takes its name (a kill in
        between leaves a recorded draw that is missing: refused, never
        drawn again)."""
        run_id = self.run_id(create=True)
        os.makedirs(self.path, exist_ok=True)
        tmp = self.file(f"{TEMPORARY_PREFIX}{os.getpid()}-{name}")
        write(tmp)
        record = self.run_record()
        record["draws"][name] = runfiles.sha256_file(tmp)
        self.write(RUN_RECORD, record)
        os.replace(tmp, self.file(name))
        return run_id

    def check_draw(self, name):
        """Raises `error` naming draw `name` unless its SHA-256 is the one
        RUN_RECORD recorded when it was drawn (a file edited, damaged, or
        copied from another run, even one of the same config, is
        refused). Returns the digest."""
        path = self.file(name)
        hint = ("what users sent is released once: restore the run's own "
                "file, or start over in a new --output_dir")
        recorded = self.recorded_draw(name)
        if recorded is None:
            raise self.error(
                f"{path} is not recorded in {self.file(RUN_RECORD)}: it "
                "was not drawn by this run (or by a tfdptext from before "
                f"run records), so it cannot be checked; {hint}.")
        actual = runfiles.sha256_file(path)
        if actual != recorded:
            raise self.error(
                f"{path} has SHA-256 {actual[:12]}..., not the "
                f"{recorded[:12]}... recorded when it was drawn "
                f"({self.file(RUN_RECORD)}): it was changed or comes from "
                f"another run; {hint}.")
        return actual

    # The training release (--training_release=once).

    def write_training_release(self, meta, splits):
        """Writes TRAINING_RELEASE atomically: an uncompressed npz holding
        `meta` (a JSON object, stored as the string array "meta", with
        "format" = TRAINING_RELEASE_FORMAT added) and, per split name,
        "<split>_lengths" (int32, one per text: its real tokens) and
        "<split>_values": a per-token release holds only the real
        positions of every text, concatenated in text order (rows =
        sum of lengths), a per-text release one row per text.

        Args:
            meta: JSON-serialisable dict; must name "splits" (their order).
            splits: {split: (values, lengths)} numpy arrays.
        """
        meta = {**meta, "format": TRAINING_RELEASE_FORMAT,
                "run_id": self.run_id(create=True), "splits": list(splits)}
        arrays = {"meta": np.asarray(json.dumps(meta, sort_keys=True))}
        for split, (values, lengths) in splits.items():
            arrays[_npz_key(split, "values")] = np.ascontiguousarray(values)
            arrays[_npz_key(split, "lengths")] = np.asarray(lengths,
                                                            np.int32)

        def write(path):
            with open(path, "wb") as f:
                np.savez(f, **arrays)

        self.write_draw(TRAINING_RELEASE, write)

    def read_training_release(self):
        """(meta, {split: (values, lengths)}) of TRAINING_RELEASE; raises
        `error` naming the file when it is not this run's complete release
        of this layout (its SHA-256 not the one recorded when drawn, its
        run id another run's, unreadable, a key missing, lengths that do
        not add up)."""
        path = self.file(TRAINING_RELEASE)
        hint = ("it holds what the users' devices released, drawn once: "
                "use a new --output_dir to draw again")
        self.check_draw(TRAINING_RELEASE)
        try:
            with np.load(path, allow_pickle=False) as stored:
                meta = json.loads(str(stored["meta"]))
                if meta.get("format") != TRAINING_RELEASE_FORMAT:
                    raise self.error(
                        f"{path}: layout {meta.get('format')!r}, this "
                        f"tfdptext reads {TRAINING_RELEASE_FORMAT}; {hint}.")
                splits = {s: (stored[_npz_key(s, "values")],
                              stored[_npz_key(s, "lengths")])
                          for s in meta["splits"]}
        except (OSError, ValueError, KeyError, TypeError,
                zipfile.BadZipFile) as err:
            raise self.error(f"{path} is not a readable training release "
                             f"({type(err).__name__}: {err}); {hint}."
                             ) from None
        if meta.get("run_id") != self.run_id():
            raise self.error(
                f"{path} was drawn by run {meta.get('run_id')!r}, not this "
                f"run ({self.run_id()!r}, {self.file(RUN_RECORD)}); {hint}.")
        for split, (values, lengths) in splits.items():
            if lengths.dtype.kind not in "iu":
                raise self.error(
                    f"{path}: split {split!r} has lengths of dtype "
                    f"{lengths.dtype}, not integers; the file is damaged; "
                    f"{hint}.")
            rows = int(lengths.sum()) if meta.get("per_token") else len(
                lengths)
            if lengths.ndim != 1 or (lengths < 0).any() or \
                    len(values) != rows:
                raise self.error(
                    f"{path}: split {split!r} holds {len(values)} rows for "
                    f"{len(lengths)} texts of {int(lengths.sum())} tokens; "
                    f"the file is damaged; {hint}.")
        return meta, splits

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


def phone_model_files(manifest, error=TfdptextError):
    """The phone model files an export's manifest lists: user.file and the
    file of every entry of user.models (one per input length; absent in
    exports made before lengths), without repeats. Raises `error` when
    user.models is not a list of records with a string "file"."""
    user = manifest["user"]
    files = [user["file"]]
    models = user.get("models", [])
    if not isinstance(models, list) or any(
            not isinstance(m, dict) or not isinstance(m.get("file"), str)
            for m in models):
        raise error(f"{MANIFEST}: user.models must be a list of records "
                    "each naming its \"file\"; the manifest is damaged: "
                    "export the run again.")
    for model in models:
        if model["file"] not in files:
            files.append(model["file"])
    return files


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
        listed = [manifest["server"]["path"],
                  *phone_model_files(manifest, self.error),
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

    def _check_phone_models_recorded(self, manifest):
        """Every phone model file must have its size and SHA-256 in the
        manifest's `files` (else nothing vouches for it)."""
        files = manifest.get("files") or {}
        for rel in phone_model_files(manifest, self.error):
            if not isinstance(files.get(rel), dict) or \
                    "sha256" not in files[rel]:
                raise self.error(
                    f"{self.file(MANIFEST)}: the phone model {rel!r} has no "
                    "size and SHA-256 under \"files\"; it cannot be "
                    "verified: export the run again.")

    def check(self, what="export_dir"):
        """The manifest of a complete export; raises otherwise.

        Checks, before loading anything: the directory, manifest.json (valid
        JSON with the keys used), that no listed path leaves the directory,
        that every file the manifest lists is there with the size and
        SHA-256 it records (every phone model file, user.file and those of
        user.models, must be recorded), the vocabulary and the server
        SavedModel.
        """
        if not os.path.isdir(self.path):
            raise self.error(f"`{what}`: {self.path} is not a directory.")
        if not os.path.isfile(self.file(MANIFEST)):
            if os.path.isfile(self.file(METRICS)) or os.path.isfile(
                    self.file(CONFIG)):
                raise self.error(
                    f"`{what}`: {self.path} is a training run directory, not "
                    f"an export (it holds no {MANIFEST}); make one with "
                    f"`tfdptext-export --model_dir={self.path} "
                    "--output_dir=<a new directory>`.")
            raise self.error(f"`{what}`: {self.path} holds no {MANIFEST}; "
                             "`tfdptext-export` makes an export directory "
                             "from a training run.")
        manifest = self.read_manifest()
        self._check_inside(manifest)
        server_dir = self.file(manifest["server"]["path"])
        if not os.path.isdir(server_dir):
            raise self.error(
                f"{server_dir}: no such directory ({MANIFEST}'s "
                "server.path); the export is incomplete: export the run "
                "again.")
        for rel in (*phone_model_files(manifest, self.error), EXPORT_VOCAB):
            if not os.path.isfile(self.file(rel)):
                raise self.error(f"{self.file(rel)}: no such file; the "
                                 "export is incomplete.")
        self._check_phone_models_recorded(manifest)
        self._check_files(manifest)
        return manifest
