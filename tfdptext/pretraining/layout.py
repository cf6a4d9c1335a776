"""The pretraining output directory: the one owner of its file names.

Every file name of a `tfdptext-pretrain` output directory is spelled here
and nowhere else::

    pretrain_config.json   the PretrainConfig (a different run is refused)
    start_eval.json        held-out MLM loss and accuracy before training
    heldout_curve.json     held-out MLM loss and accuracy every
                           --eval_every steps ({"points": [{"step": ...}]})
    checkpoint/            model and optimizer state while training (resume)
        state.json         {"step": n, "weights": "step-<n>.weights.h5"}
        step-<n>.weights.h5
    logs/                  TensorBoard
    preset/                the pretrained encoder as a keras-hub preset,
                           with vocab.txt (for `--preset=<output_dir>/preset`)
    metrics.json           written LAST: the run's "finished" marker

Writes are atomic (a temporary name in the same directory, then a rename),
so a process killed at any instant (SIGKILL included) leaves complete files;
the preset is written into a temporary directory renamed into place.
Reading a missing, truncated or foreign file raises
`PretrainDirectoryError` naming it.

Pure Python (no TensorFlow import).
"""

import os
import shutil

from tfdptext import rundir
from tfdptext import runfiles
from tfdptext.errors import TfdptextError

CONFIG = "pretrain_config.json"
START_EVAL = "start_eval.json"
HELDOUT_CURVE = "heldout_curve.json"
CHECKPOINT = "checkpoint"
CHECKPOINT_STATE = "state.json"
LOGS = "logs"
# The TensorBoard run of the held-out curve, under LOGS (beside Keras'
# train/).
HELDOUT_LOGS = "heldout"
PRESET = "preset"
METRICS = "metrics.json"
# The vocabulary beside the preset's own files: what
# `tfdptext.models.load_tokenizer(<preset>)` reads first.
PRESET_VOCAB = "vocab.txt"

# What shows that a run made progress: a directory holding the config and
# none of these is a run whose start failed, and is treated as new.
PROGRESS = (CHECKPOINT, START_EVAL, METRICS)
# The keys each JSON file must hold.
REQUIRED_KEYS = {
    CONFIG: ("objective", "mode", "eta", "preset"),
    START_EVAL: ("mlm_loss", "target_accuracy", "original_accuracy"),
    HELDOUT_CURVE: ("points",),
    CHECKPOINT_STATE: ("step", "weights"),
    METRICS: ("objective", "steps", "guarantee"),
}

# PretrainDir.state's verdicts.
NEW, RESUME, FINISHED = "new", "resume", "finished"


class PretrainDirectoryError(TfdptextError):
    """The output directory holds another run or other files, or one of its
    files is unreadable (the message names it)."""


def checkpoint_weights_name(step):
    """The checkpoint's weights file after `step` optimizer steps."""
    return f"step-{step}.weights.h5"


class PretrainDir(rundir.Directory):
    """A pretraining output directory (see the module docstring).

    Example:
    >>> run = PretrainDir("runs/pretrain_denoising_eta80")
    >>> run.state(identity, steps=1000, identity_of=identity_fn)
    'new'
    >>> run.file(PRESET)
    'runs/pretrain_denoising_eta80/preset'
    """

    required_keys = REQUIRED_KEYS

    def __init__(self, path):
        super().__init__(path, PretrainDirectoryError)

    def state(self, identity, steps, identity_of):
        """NEW, RESUME or FINISHED for the run `identity` of `steps` steps;
        writes nothing.

        NEW: absent or empty directory, or one whose earlier start failed
        before any progress. RESUME: this same run, interrupted. FINISHED:
        this same run, metrics.json written. Raises PretrainDirectoryError
        when the path is a file, holds a different run or other files, or a
        run file is unreadable.

        Args:
            identity: what must match to resume (PretrainConfig.identity()).
            steps: the steps asked for.
            identity_of: the config file's object -> its identity; raises
                TypeError or ValueError when it is not a pretraining config.
        """
        runfiles.check_output_path(self.path, error=PretrainDirectoryError)
        if not self.exists(CONFIG):
            if os.path.isdir(self.path) and os.listdir(self.path):
                raise PretrainDirectoryError(
                    f"`output_dir` {self.path} is not empty and holds no "
                    f"tfdptext pretraining run (no {CONFIG}); choose another "
                    "--output_dir.")
            return NEW
        try:
            previous = identity_of(self.read(CONFIG))
        except (TypeError, ValueError) as err:
            raise PretrainDirectoryError(
                f"{self.file(CONFIG)} is not a tfdptext pretraining config "
                f"({err}).") from None
        progress = any(self.exists(name) for name in PROGRESS)
        if previous != identity:
            if not progress:
                return NEW  # its start failed: nothing to keep
            changed = sorted(k for k in set(identity) | set(previous)
                             if previous.get(k) != identity.get(k))
            raise PretrainDirectoryError(
                f"`output_dir` {self.path} holds another pretraining run "
                f"(fields that differ: {changed}); choose another "
                "--output_dir or remove it.")
        if self.exists(METRICS):
            done = self.read(METRICS)["steps"]
            if done != steps:
                raise PretrainDirectoryError(
                    f"`output_dir` {self.path} holds this run, finished "
                    f"after {done} steps; it cannot be continued to {steps} "
                    f"(its checkpoint was removed when it finished). Use "
                    f"--steps={done} to keep it, or another --output_dir.")
            return FINISHED
        self.read_checkpoint()  # a clear error now if it is unreadable
        for name in (START_EVAL, HELDOUT_CURVE):
            if self.exists(name):
                self.read(name)
        return RESUME if progress else NEW

    def read_curve(self, up_to_step):
        """The held-out points saved so far, those after `up_to_step` (the
        checkpoint a resumed run restarts from) left out: that run
        evaluates them again."""
        if not self.exists(HELDOUT_CURVE):
            return []
        return [point for point in self.read(HELDOUT_CURVE)["points"]
                if point["step"] <= up_to_step]

    def read_checkpoint(self):
        """(steps done, weights file) of the checkpoint, or None when there
        is none; raises PretrainDirectoryError when it is unreadable."""
        record_path = os.path.join(self.file(CHECKPOINT), CHECKPOINT_STATE)
        if not os.path.exists(record_path):
            return None
        record = runfiles.read_json(record_path, PretrainDirectoryError,
                                    required=REQUIRED_KEYS[CHECKPOINT_STATE])
        weights = os.path.join(self.file(CHECKPOINT), str(record["weights"]))
        hint = (f"remove {self.file(CHECKPOINT)} to restart the run from "
                "step 0, or choose another --output_dir")
        if not os.path.isfile(weights):
            raise PretrainDirectoryError(
                f"{record_path} names {weights}, which is missing; {hint}.")
        import h5py  # pure HDF5 reader, no TensorFlow

        try:
            with h5py.File(weights, "r"):
                pass
        except OSError as err:
            raise PretrainDirectoryError(
                f"{weights} is unreadable ({err}); {hint}.") from None
        return int(record["step"]), weights

    def save_checkpoint(self, model, step):
        """Saves `model`'s weights and optimizer state after `step` steps,
        SIGKILL-safe: the weights go to a new file (temporary name, then
        renamed), state.json naming it is renamed into place after it,
        older weight files are removed last."""
        directory = self.file(CHECKPOINT)
        os.makedirs(directory, exist_ok=True)
        name = checkpoint_weights_name(step)
        tmp = os.path.join(directory, f".tmp-{os.getpid()}.weights.h5")
        model.save_weights(tmp, overwrite=True)
        os.replace(tmp, os.path.join(directory, name))
        rundir.write_json(os.path.join(directory, CHECKPOINT_STATE),
                          {"step": step, "weights": name}, indent=None)
        for old in os.listdir(directory):
            if old.endswith(".weights.h5") and old != name:
                os.remove(os.path.join(directory, old))

    def write_preset(self, write):
        """Calls `write(directory)` on a fresh temporary directory, then
        renames it to preset/ (replacing an older one): a kill leaves either
        no preset or a complete one. Returns the preset's path."""
        final = self.file(PRESET)
        stale = f".{PRESET}.tmp-"
        for entry in os.listdir(self.path):  # left by a killed process
            if entry.startswith(stale):
                shutil.rmtree(self.file(entry), ignore_errors=True)
        tmp = self.file(f"{stale}{os.getpid()}")
        write(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return final
