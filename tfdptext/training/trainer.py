"""Training a split model with Keras `fit`, resumable, with a metrics file.

Output directory layout:
    config.json          the TrainConfig (a different run here is refused;
                         written once the encoder has loaded)
    backup/              checkpoint state while training (resume); removed
                         once metrics.json is written
    best.weights.h5      weights of the epoch with the lowest dev loss (of
                         the main task; mode adv: of the label output)
    best.json            that loss and epoch (kept across a resume)
    logs/                TensorBoard
    user_side.keras      the on-device model (privatization layer inside)
    server_side.keras    the server model (input: the release only)
    split.json           split point, guarantee, tokenizer settings, label
                         names
    vocab.txt            the tokenizer's vocabulary
    metrics.json         accuracies, sizes, speed, guarantee, versions;
                         written last, atomically: the "finished" marker

Every file is written under a temporary name and renamed, so a run killed
at any instant (SIGKILL included) holds complete files. Re-running the same
command resumes an interrupted run from its last finished epoch and says
that a finished run (metrics.json present) has nothing left to do.
"""

import json
import os
import platform
import shutil
import time

import keras
import numpy as np
import tensorflow as tf

from tfdptext import data as data_lib
from tfdptext import models
from tfdptext import runfiles
from tfdptext import seeding
from tfdptext.errors import TfdptextError
from tfdptext.training import builder
from tfdptext.training.builder import build_split
from tfdptext.training.config import TrainConfig
from tfdptext.version import __version__

CONFIG = "config.json"
METRICS = "metrics.json"
SPLIT = "split.json"
USER = "user_side.keras"
SERVER = "server_side.keras"
BEST = "best.weights.h5"
BEST_RECORD = "best.json"
VOCAB = "vocab.txt"
CPU_BATCH_SIZE = 32
GPU_BATCH_SIZE = 128


class RunDirectoryError(TfdptextError):
    """The output directory holds a different run, or a run file in it is
    unreadable (the message names the file)."""


class TrainingError(TfdptextError):
    """Training ran but produced no usable model (e.g. no finite dev
    loss)."""


BACKUP = "backup"
# What shows that a run made progress: a directory holding config.json and
# none of these is a run whose start failed, and is treated as new.
PROGRESS = (BACKUP, BEST, BEST_RECORD, METRICS)
# check_output_dir's verdicts.
NEW, RESUME, FINISHED = "new", "resume", "finished"


def prepare_output_dir(output_dir, config):
    """Creates the directory, or checks that it holds this same run."""
    check_output_dir(output_dir, config)
    _write_config(output_dir, config)


def has_progress(output_dir):
    """Whether the run directory holds any training progress."""
    return any(os.path.exists(os.path.join(output_dir, name))
               for name in PROGRESS)


def read_metrics(output_dir):
    """metrics.json of a finished run (clear RunDirectoryError if bad)."""
    return runfiles.read_json(os.path.join(output_dir, METRICS),
                              RunDirectoryError, required=("epochs",))


def check_output_dir(output_dir, config):
    """Checks the run directory for `config`; writes nothing.

    Returns NEW (absent or empty directory, or one whose earlier start
    failed before any progress: config.json but no checkpoint), RESUME
    (this same run, interrupted) or FINISHED (this same run, metrics.json
    written: nothing to do). Raises RunDirectoryError when `output_dir` is
    a file, holds a different run or another directory's files, or when
    its config.json or metrics.json is unreadable (naming the file).
    """
    runfiles.check_output_path(output_dir, error=RunDirectoryError)
    path = os.path.join(output_dir, CONFIG)
    if os.path.exists(path):
        data = runfiles.read_json(path, RunDirectoryError)
        try:
            previous = TrainConfig.from_dict(data)
            identity = previous.run_identity()
        except (TypeError, ValueError) as err:
            raise RunDirectoryError(
                f"{path} is not a tfdptext training config ({err}).") from None
        progress = has_progress(output_dir)
        if identity != config.run_identity():
            if not progress:
                return NEW  # its start failed: nothing to keep
            changed = sorted(k for k, v in config.run_identity().items()
                             if identity.get(k) != v)
            raise RunDirectoryError(
                f"{output_dir} holds a different run (fields that differ: "
                f"{changed}); choose another --output_dir or remove it.")
        if os.path.exists(os.path.join(output_dir, METRICS)):
            done = read_metrics(output_dir)["epochs"]
            if done != config.epochs:
                raise RunDirectoryError(
                    f"{output_dir} holds this run, finished after {done} "
                    f"epochs; it cannot be continued to {config.epochs} "
                    "(its checkpoint was removed when it finished). Use "
                    f"--epochs={done} to keep it, or another --output_dir.")
            return FINISHED
        read_backup(os.path.join(output_dir, BACKUP))  # clear error if bad
        read_best(os.path.join(output_dir, BEST_RECORD))
        return RESUME if progress else NEW
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        raise RunDirectoryError(
            f"{output_dir} is not empty and holds no tfdptext run; choose "
            "another --output_dir.")
    return NEW


def _write_config(output_dir, config):
    path = os.path.join(output_dir, CONFIG)
    os.makedirs(output_dir, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(config.to_json())
    os.replace(tmp, path)


def load_config_dataset(config):
    """The dataset a TrainConfig names (its files and columns included)."""
    return data_lib.load_dataset(config.dataset, data_dir=config.data_dir,
                                 **config.dataset_options())


def label_names_of(dataset):
    """The dataset's label names (strings), "0".."K-1" when it has none."""
    names = getattr(dataset, "label_names", None)
    if not names:
        names = range(dataset.num_classes)
    return [str(n) for n in names]


def _batches(tokenizer, dataset, split, batch_size, shuffle, seed,
             max_examples=None, adv_attributes=None):
    """(features, label) batches; with `adv_attributes` (mode adv) the
    target is a dict {"label": label, "adv_<attribute>": private label}
    matching the adversarial training model's outputs."""
    ds = dataset.tf_dataset(split)
    if max_examples:
        ds = ds.take(max_examples)
    if shuffle:
        ds = ds.shuffle(10000, seed=seed, reshuffle_each_iteration=True)

    def prepare(features, label, private):
        features = _trim_padding(features)
        if adv_attributes is None:
            return features, label
        targets = {builder.LABEL_OUTPUT: label}
        for name in adv_attributes:
            targets[builder.adv_output_name(name)] = private[name]
        return features, targets

    return tokenizer.encode_dataset(ds, batch_size).map(prepare).prefetch(
        tf.data.AUTOTUNE)


def _trim_padding(features):
    """Cuts a batch to its longest real sequence (results are unchanged:
    pooling and attention are masked; short texts train much faster)."""
    length = tf.reduce_max(tf.reduce_sum(features["padding_mask"], axis=1))
    return {k: v[:, :length] for k, v in features.items()}


def adv_attributes_for(config, dataset):
    """The private attributes mode adv trains attacker heads for.

    Raises DataError (a ValueError) naming them when the dataset lacks any
    of `config.adv_attributes`, or has no private attribute at all.
    """
    if not dataset.private_attributes:
        raise data_lib.DataError(
            f"Mode adv needs private attributes, but dataset "
            f"{dataset.name!r} has none; use a dataset with private "
            "attributes (e.g. synthetic, ag_dpnr, trustpilot).")
    names = list(config.adv_attributes or sorted(dataset.private_attributes))
    try:
        dataset.require_private(names)
    except data_lib.DataError as err:
        raise data_lib.DataError(f"`adv_attributes`: {err}") from None
    return names


class _Throughput(keras.callbacks.Callback):
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


class _BestCheckpoint(keras.callbacks.Callback):
    """Saves the weights of the epoch with the lowest `monitor` to
    best.weights.h5 and records that loss in best.json, so that a resumed
    run starts from it instead of forgetting it.

    The weights are written under a temporary name and renamed, then
    best.json is renamed into place: a kill at any instant leaves complete
    files. best.json: {"val_loss": the best value of `monitor`, "monitor":
    its log name, "epoch": ...}.
    """

    def __init__(self, output_dir, monitor="val_loss"):
        super().__init__()
        self.weights = os.path.join(output_dir, BEST)
        self.path = os.path.join(output_dir, BEST_RECORD)
        self.monitor = monitor
        self.best = read_best(self.path)
        if self.best is not None and not os.path.exists(self.weights):
            self.best = None  # record without weights: start over

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get(self.monitor)
        if loss is None or not np.isfinite(loss):
            return
        if self.best is None or loss < self.best:
            self.best = float(loss)
            tmp = os.path.join(os.path.dirname(self.weights),
                               f".best-{os.getpid()}.weights.h5")
            self.model.save_weights(tmp, overwrite=True)
            os.replace(tmp, self.weights)
            _write_json_atomically(self.path, {
                "val_loss": self.best, "monitor": self.monitor,
                "epoch": epoch})


# Kept for callers of the old name.
_BestRecord = _BestCheckpoint


def _write_json_atomically(path, value, indent=None):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=indent)
    os.replace(tmp, path)


def read_best(path):
    """The best dev loss recorded in best.json, or None (RunDirectoryError
    naming the file when it is unreadable)."""
    if not os.path.exists(path):
        return None
    record = runfiles.read_json(path, RunDirectoryError,
                                required=("val_loss",))
    try:
        return float(record["val_loss"])
    except (TypeError, ValueError):
        raise RunDirectoryError(
            f"{path}: 'val_loss' is {record['val_loss']!r}, not a "
            "number.") from None


_BACKUP_META = "training_metadata.json"


def read_backup(backup_dir):
    """(epochs done, weights file) of the backup in `backup_dir`, or None
    when there is none. Raises RunDirectoryError naming the file when the
    backup is unreadable."""
    meta = os.path.join(backup_dir, _BACKUP_META)
    if not os.path.exists(meta):
        return None
    record = runfiles.read_json(meta, RunDirectoryError, required=("epoch",))
    weights = os.path.join(backup_dir,
                           record.get("weights", "latest.weights.h5"))
    hint = (f"remove {backup_dir} to restart the run from epoch 1, or "
            "choose another --output_dir")
    if not os.path.isfile(weights):
        raise RunDirectoryError(f"{meta} names {weights}, which is "
                                f"missing; {hint}.")
    import h5py

    try:
        with h5py.File(weights, "r"):
            pass
    except OSError as err:
        raise RunDirectoryError(f"{weights} is unreadable ({err}); {hint}."
                                ) from None
    return int(record["epoch"]), weights


class _Backup(keras.callbacks.BackupAndRestore):
    """BackupAndRestore that survives SIGKILL at any instant.

    Each epoch's state goes to a new file epoch-<n>.weights.h5 (written
    under a temporary name, then renamed); training_metadata.json, renamed
    into place after it, names it; older files are removed last. The
    backup is kept when fit ends and removed by `train` once metrics.json
    (the run's "finished" marker) is written, so a kill between the last
    epoch and metrics.json loses no epoch.
    """

    def __init__(self, backup_dir):
        super().__init__(backup_dir, delete_checkpoint=False)

    def on_train_begin(self, logs=None):
        self._load_model()

    def _load_model(self):
        state = read_backup(self.backup_dir)
        if state is None:
            return
        epoch, weights = state
        if self.model.optimizer is not None and \
                not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        try:
            self.model.load_weights(weights)
        except Exception as err:  # noqa: BLE001 (Keras raises several)
            raise RunDirectoryError(
                f"{weights} does not fit this run's model ({err}); remove "
                f"{self.backup_dir} to restart from epoch 1.") from None
        self.model._initial_epoch = epoch

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        name = f"epoch-{self._current_epoch}.weights.h5"
        tmp = os.path.join(self.backup_dir, f".tmp-{os.getpid()}.weights.h5")
        self.model.save_weights(tmp, overwrite=True)
        os.replace(tmp, os.path.join(self.backup_dir, name))
        _write_json_atomically(
            os.path.join(self.backup_dir, _BACKUP_META),
            {"epoch": self._current_epoch, "batch": 0, "weights": name})
        for old in os.listdir(self.backup_dir):
            if old.endswith(".weights.h5") and old != name:
                os.remove(os.path.join(self.backup_dir, old))

    def on_train_end(self, logs=None):
        pass  # removed by `train` after metrics.json


def _versions():
    import keras_hub

    return {"tfdptext": __version__, "tensorflow": tf.__version__,
            "keras": keras.__version__, "keras_hub": keras_hub.__version__,
            "python": platform.python_version()}


def _accuracy(model, batches):
    """Main-task accuracy of `model` (features -> task logits)."""
    logits, labels = [], []
    for features, label in batches:
        if isinstance(label, dict):  # mode adv: the task label only
            label = label[builder.LABEL_OUTPUT]
        logits.append(model(features, training=False).numpy())
        labels.append(label.numpy())
    predicted = np.concatenate(logits).argmax(axis=1)
    return float((predicted == np.concatenate(labels)).mean())


def train(config, output_dir, dataset=None, verbose=1, extra_callbacks=()):
    """Trains `config` into `output_dir`; resumes a killed run there.

    Mode adv (adversarial training, the ADV baseline) trains a model with
    one training-only attacker head per private attribute behind a gradient
    reversal; the user and server sides saved are those of mode none. Its
    guarantee is "none": empirical privacy only, never DP.

    Returns the metrics dict (also written to metrics.json).
    """
    gpu = bool(tf.config.list_physical_devices("GPU"))
    if config.batch_size is None:
        config.batch_size = GPU_BATCH_SIZE if gpu else CPU_BATCH_SIZE
    config.validate()
    state = check_output_dir(output_dir, config)
    if state == FINISHED:
        # metrics.json is written last (atomically): the run is complete.
        shutil.rmtree(os.path.join(output_dir, BACKUP), ignore_errors=True)
        if verbose:
            print(f"{output_dir}: this run has already finished "
                  f"({METRICS} is there); nothing to do. Remove the "
                  "directory to train it again.")
        return read_metrics(output_dir)
    if dataset is None:
        dataset = load_config_dataset(config)
    adv_attributes = None
    if config.mode == "adv":  # checked before anything is written
        adv_attributes = adv_attributes_for(config, dataset)
    if gpu:
        keras.mixed_precision.set_global_policy("mixed_float16")
    # The seed is for initialisation (and, below, shuffling) only: the
    # privacy noise ops are traced during fit and must not inherit a global
    # seed, so none is left set after the models are built.
    # The encoder is loaded before config.json is written: a bad --preset
    # leaves nothing that would refuse the corrected command.
    with seeding.scoped_seed(config.seed):
        tokenizer = models.load_tokenizer(config.preset, config.max_length)
        backbone = models.load_backbone(config.preset)
        split = build_split(config, backbone, tokenizer, dataset.num_classes)
    if state == NEW and os.path.isdir(output_dir):
        # An earlier start that failed before any progress: start afresh.
        shutil.rmtree(os.path.join(output_dir, "logs"), ignore_errors=True)
    _write_config(output_dir, config)
    def loss():
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    # The dev loss that picks best.weights.h5.
    monitor = "val_loss"
    if adv_attributes is None:
        model = split.model
        model.compile(
            optimizer=keras.optimizers.AdamW(config.learning_rate),
            loss=loss(), metrics=["accuracy"])
    else:
        # One model, one fit: total loss = task loss + the attacker heads'
        # losses (unweighted; the gradient reversal's adv_lambda sets how
        # hard the encoder fights them).
        model = builder.adversarial_model(
            split, {n: dataset.private_attributes[n] for n in adv_attributes},
            config.adv_lambda)
        model.compile(
            optimizer=keras.optimizers.AdamW(config.learning_rate),
            loss={name: loss() for name in model.output},
            metrics={name: ["accuracy"] for name in model.output})
        # The best checkpoint is chosen by the MAIN TASK's dev loss
        # ("val_label_loss"), not the total: a low total would favour epochs
        # where the attackers win, i.e. where more private information
        # leaks.
        monitor = f"val_{builder.LABEL_OUTPUT}_loss"
    train_batches = _batches(tokenizer, dataset, "train", config.batch_size,
                             True, config.seed, config.max_train_examples,
                             adv_attributes)
    dev_batches = _batches(tokenizer, dataset, "dev", config.batch_size,
                           False, config.seed, config.max_dev_examples,
                           adv_attributes)
    test_batches = _batches(tokenizer, dataset, "test", config.batch_size,
                            False, config.seed)
    throughput = _Throughput(config.batch_size)
    callbacks = [
        _Backup(os.path.join(output_dir, BACKUP)),
        _BestCheckpoint(output_dir, monitor),
        keras.callbacks.TensorBoard(os.path.join(output_dir, "logs")),
        throughput,
        *extra_callbacks,
    ]
    start = time.perf_counter()
    history = model.fit(train_batches, validation_data=dev_batches,
                        epochs=config.epochs, callbacks=callbacks,
                        verbose=verbose)
    wall = time.perf_counter() - start
    if not os.path.exists(os.path.join(output_dir, BEST)):
        raise TrainingError(
            f"No epoch gave a finite {monitor}, so {BEST} was never "
            "written; lower --learning_rate or check the data.")
    model.load_weights(os.path.join(output_dir, BEST))
    # Each file is written under a temporary name and renamed; metrics.json
    # comes last and marks the run finished.
    for model_file, part in ((USER, split.user), (SERVER, split.server)):
        tmp = os.path.join(output_dir, f".tmp-{os.getpid()}-{model_file}")
        part.save(tmp)
        os.replace(tmp, os.path.join(output_dir, model_file))
    tokenizer.save_vocabulary(os.path.join(output_dir, VOCAB))
    guarantee = builder.run_guarantee(config, split,
                                      max_tokens=config.max_length - 2)
    _write_json_atomically(os.path.join(output_dir, SPLIT), {
        "split_point": split.split_point,
        "guarantee": guarantee.to_dict(),
        "tokenizer": tokenizer.config(),
        "frozen_user_side": config.frozen_user_side,
        "label_names": label_names_of(dataset)}, indent=2)
    metrics = {
        "mode": config.mode,
        "mechanism": config.mechanism,
        "parameters": {"epsilon": config.epsilon, "eta": config.eta,
                       "sensitivity": config.sensitivity,
                       "dropout_rate": config.dropout_rate,
                       "adv_lambda": config.adv_lambda,
                       "adv_attributes": adv_attributes},
        "guarantee": guarantee.to_dict(),
        "guarantee_text": str(guarantee),
        "dataset": dataset.name,
        "label_names": label_names_of(dataset),
        "sizes": {"train": min(len(dataset.splits["train"]),
                               config.max_train_examples or 10**12),
                  "dev": min(len(dataset.splits["dev"]),
                             config.max_dev_examples or 10**12),
                  "test": len(dataset.splits["test"])},
        "majority_test_accuracy": float(np.bincount(
            dataset.splits["test"].labels).max() / len(
                dataset.splits["test"])),
        "dev_accuracy": _accuracy(split.model, dev_batches),
        "test_accuracy": _accuracy(split.model, test_batches),
        "epochs": config.epochs,
        "epochs_run_this_session": len(history.history.get("loss", [])),
        "history": {k: [float(v) for v in vals]
                    for k, vals in history.history.items()},
        "train_examples_per_second": throughput.examples_per_second,
        "wall_time_seconds": wall,
        "device": "GPU" if gpu else "CPU",
        "mixed_precision": gpu,
        "preset": config.preset,
        "max_length": config.max_length,
        "batch_size": config.batch_size,
        "versions": _versions(),
    }
    _write_json_atomically(os.path.join(output_dir, METRICS), metrics,
                           indent=2)
    # Finished: the checkpoint state is no longer needed.
    shutil.rmtree(os.path.join(output_dir, BACKUP), ignore_errors=True)
    return metrics
