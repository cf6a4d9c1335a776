"""The callbacks of a training run: throughput, best checkpoint, backup.

The checkpoint files and their atomic, SIGKILL-safe writes belong to
tfdptext.rundir.RunDir; these callbacks only say when to write them.
"""

import time

import keras
import numpy as np

from tfdptext import rundir


class Throughput(keras.callbacks.Callback):
    """Examples per second over the training batches (first epoch's first
    batch, which includes tracing, excluded)."""

    def __init__(self, batch_size):
        super().__init__()
        self.batch_size = batch_size
        self.seconds = 0.0
        self.examples = 0
        self._start = None
        self._first = True

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self._first:
            self._first = False
            return
        self.seconds += time.perf_counter() - self._start
        self.examples += self.batch_size

    @property
    def examples_per_second(self):
        return self.examples / self.seconds if self.seconds else None


class BestCheckpoint(keras.callbacks.Callback):
    """Saves the weights of the epoch with the lowest `monitor` (the run's
    best.weights.h5) and records that loss (best.json), so that a resumed
    run starts from it instead of forgetting it.

    best.json: {"val_loss": the best value of `monitor`, "monitor": its log
    name, "epoch": ...}. A record without its weights file is ignored.
    """

    def __init__(self, run, monitor="val_loss"):
        super().__init__()
        self.run = run
        self.monitor = monitor
        self.best = run.read_best()
        if self.best is not None and not run.exists(rundir.BEST_WEIGHTS):
            self.best = None  # record without weights: start over

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get(self.monitor)
        if loss is None or not np.isfinite(loss):
            return
        if self.best is None or loss < self.best:
            self.best = float(loss)
            self.run.save_best(self.model, {
                "val_loss": self.best, "monitor": self.monitor,
                "epoch": epoch})


class Backup(keras.callbacks.BackupAndRestore):
    """BackupAndRestore that survives SIGKILL at any instant.

    After each epoch `RunDir.save_backup` writes the weights and the
    optimizer's state (its iteration count included, so the learning-rate
    schedule continues on resume) to a new file, then the record naming
    it. The backup is kept when fit ends and removed by `train` once
    metrics.json (the run's "finished" marker) is written, so a kill between
    the last epoch and metrics.json loses no epoch.
    """

    def __init__(self, run, error):
        super().__init__(run.file(rundir.BACKUP), delete_checkpoint=False)
        self.run = run
        self.error = error

    def on_train_begin(self, logs=None):
        self._load_model()

    def _load_model(self):
        state = self.run.read_backup()
        if state is None:
            return
        epoch, weights = state
        if self.model.optimizer is not None and \
                not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        try:
            self.model.load_weights(weights)
        except Exception as err:  # noqa: BLE001 (Keras raises several)
            raise self.error(
                f"{weights} does not fit this run's model ({err}); remove "
                f"{self.backup_dir} to restart from epoch 1.") from None
        self.model._initial_epoch = epoch

    def _save_model(self):
        self.run.save_backup(self.model, self._current_epoch)

    def on_train_end(self, logs=None):
        pass  # removed by `train` after metrics.json
