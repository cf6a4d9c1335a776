"""Training a split model with Keras `fit`, resumable, with a metrics file.

Output directory layout:
    config.json          the TrainConfig (a different run here is refused)
    backup/              BackupAndRestore state while training (resume)
    best.weights.h5      weights of the epoch with the lowest dev loss (of
                         the main task; mode adv: of the label output)
    best.json            that loss and epoch (kept across a resume)
    logs/                TensorBoard
    user_side.keras      the on-device model (privatization layer inside)
    server_side.keras    the server model (input: the release only)
    split.json           split point, guarantee, tokenizer settings
    vocab.txt            the tokenizer's vocabulary
    metrics.json         accuracies, sizes, speed, guarantee, versions
"""

import json
import os
import platform
import time

import keras
import numpy as np
import tensorflow as tf

from tfdptext import data as data_lib
from tfdptext import models
from tfdptext import seeding
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


class RunDirectoryError(ValueError):
    """The output directory holds a different run."""


def prepare_output_dir(output_dir, config):
    """Creates the directory, or checks that it holds this same run."""
    check_output_dir(output_dir, config)
    _write_config(output_dir, config)


def check_output_dir(output_dir, config):
    """Raises RunDirectoryError unless the directory is new, empty or holds
    this same run; writes nothing."""
    path = os.path.join(output_dir, CONFIG)
    if os.path.exists(path):
        with open(path) as f:
            previous = TrainConfig.from_dict(json.load(f))
        if previous.run_identity() != config.run_identity():
            changed = sorted(k for k, v in config.run_identity().items()
                             if previous.run_identity().get(k) != v)
            raise RunDirectoryError(
                f"{output_dir} holds a different run (fields that differ: "
                f"{changed}); choose another --output_dir or remove it.")
    elif os.path.isdir(output_dir) and os.listdir(output_dir):
        raise RunDirectoryError(
            f"{output_dir} is not empty and holds no tfdptext run; choose "
            "another --output_dir.")


def _write_config(output_dir, config):
    path = os.path.join(output_dir, CONFIG)
    os.makedirs(output_dir, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(config.to_json())
    os.replace(tmp, path)


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


class _BestRecord(keras.callbacks.Callback):
    """Keeps the best dev loss in best.json, so that a resumed run's
    ModelCheckpoint starts from it instead of forgetting it.

    best.json: {"val_loss": the best value of `monitor`, "monitor": its
    log name, "epoch": ...}.
    """

    def __init__(self, path, monitor="val_loss"):
        super().__init__()
        self.path = path
        self.monitor = monitor
        self.best = read_best(path)

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get(self.monitor)
        if loss is not None and (self.best is None or loss < self.best):
            self.best = float(loss)
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"val_loss": self.best, "monitor": self.monitor,
                           "epoch": epoch}, f)
            os.replace(tmp, self.path)


def read_best(path):
    """The best dev loss recorded in best.json, or None."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return float(json.load(f)["val_loss"])


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
    check_output_dir(output_dir, config)
    if dataset is None:
        dataset = data_lib.load_dataset(config.dataset,
                                        data_dir=config.data_dir)
    adv_attributes = None
    if config.mode == "adv":  # checked before anything is written
        adv_attributes = adv_attributes_for(config, dataset)
    _write_config(output_dir, config)
    if gpu:
        keras.mixed_precision.set_global_policy("mixed_float16")
    # The seed is for initialisation (and, below, shuffling) only: the
    # privacy noise ops are traced during fit and must not inherit a global
    # seed, so none is left set after the models are built.
    with seeding.scoped_seed(config.seed):
        tokenizer = models.load_tokenizer(config.preset, config.max_length)
        backbone = models.load_backbone(config.preset)
        split = build_split(config, backbone, tokenizer, dataset.num_classes)
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
    best_record = _BestRecord(os.path.join(output_dir, BEST_RECORD), monitor)
    callbacks = [
        keras.callbacks.BackupAndRestore(os.path.join(output_dir, "backup")),
        keras.callbacks.ModelCheckpoint(
            os.path.join(output_dir, BEST), monitor=monitor, mode="min",
            save_best_only=True, save_weights_only=True,
            initial_value_threshold=best_record.best),
        best_record,
        keras.callbacks.TensorBoard(os.path.join(output_dir, "logs")),
        throughput,
        *extra_callbacks,
    ]
    start = time.perf_counter()
    history = model.fit(train_batches, validation_data=dev_batches,
                        epochs=config.epochs, callbacks=callbacks,
                        verbose=verbose)
    wall = time.perf_counter() - start
    model.load_weights(os.path.join(output_dir, BEST))
    split.user.save(os.path.join(output_dir, USER))
    split.server.save(os.path.join(output_dir, SERVER))
    tokenizer.save_vocabulary(os.path.join(output_dir, VOCAB))
    guarantee = builder.run_guarantee(config, split,
                                      max_tokens=config.max_length - 2)
    with open(os.path.join(output_dir, SPLIT), "w") as f:
        json.dump({"split_point": split.split_point,
                   "guarantee": guarantee.to_dict(),
                   "tokenizer": tokenizer.config(),
                   "frozen_user_side": config.frozen_user_side}, f,
                  indent=2)
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
    tmp = os.path.join(output_dir, METRICS + ".tmp")
    with open(tmp, "w") as f:
        json.dump(metrics, f, indent=2)
    os.replace(tmp, os.path.join(output_dir, METRICS))
    return metrics
