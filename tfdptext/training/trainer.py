"""Training a split model with Keras `fit`, resumable, with a metrics file.

`train` runs five named steps: build (tokenizer, encoder, split and, in
mode adv, the adversarial model), compile (AdamW on the warm-up/decay
schedule, losses, metrics), fit (backup, best checkpoint, TensorBoard),
save (user and server sides, vocabulary, split.json) and measure
(accuracy, macro-F1, metrics.json).

Where the training texts come from users (modes token_rep, text_to_text,
seq_rep) and `training_release` is once (their default), the frozen user
side releases every train and dev text ONCE from os.urandom before the
first step (`tfdptext.training.user_release`, recorded in the run) and
fit trains the server alone on that release, every epoch; per_epoch
trains the whole split model, privatizing inside fit at every pass.

The run directory's files, and their atomic writes, belong to
tfdptext.rundir (its module docstring lists them): a run killed at any
instant (SIGKILL included) holds complete files. Re-running the same
command resumes an interrupted run from its last finished epoch (the
optimizer's state, and so the learning-rate schedule, included) and says
that a finished run (metrics.json present) has nothing left to do.
"""

import dataclasses
import platform
import shutil
import time

import keras
import numpy as np
import tensorflow as tf

from tfdptext import data as data_lib
from tfdptext import metrics as metrics_lib
from tfdptext import models
from tfdptext import rundir
from tfdptext import seeding
from tfdptext.errors import TfdptextError
from tfdptext.models import saving_cache
from tfdptext.training import builder
from tfdptext.training import callbacks as callbacks_lib
from tfdptext.training import devices
from tfdptext.training import label_privacy
from tfdptext.training import losses
from tfdptext.training import pipeline
from tfdptext.training import prebuild
from tfdptext.training import schedules
from tfdptext.training import user_release
from tfdptext.training.builder import build_split
from tfdptext.training.config import TrainConfig
from tfdptext.training.optimizer import SharedTermsAdamW
from tfdptext.version import __version__

# check_output_dir's verdicts.
NEW, RESUME, FINISHED = rundir.NEW, rundir.RESUME, rundir.FINISHED


class RunDirectoryError(TfdptextError):
    """The output directory holds a different run, or a run file in it is
    unreadable (the message names the file)."""


class TrainingError(TfdptextError):
    """Training ran but produced no usable model (e.g. no finite dev
    loss)."""


def run_dir(output_dir):
    """The RunDir of `output_dir`, raising RunDirectoryError."""
    return rundir.RunDir(output_dir, RunDirectoryError)


def _identity_of(data):
    """The run identity of a config.json object (TypeError/ValueError when
    it is not a training config)."""
    return TrainConfig.from_dict(data).run_identity()


def check_output_dir(output_dir, config):
    """NEW, RESUME or FINISHED for `config` in `output_dir`; writes nothing
    (see rundir.RunDir.training_state). Raises RunDirectoryError when the
    directory holds another run or an unreadable run file."""
    return run_dir(output_dir).training_state(config.run_identity(),
                                              config.epochs, _identity_of)


def read_metrics(output_dir):
    """metrics.json of a finished run (clear RunDirectoryError if bad)."""
    return run_dir(output_dir).read(rundir.METRICS, required=("epochs",))


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


def _train_size(config, dataset):
    return min(len(dataset.splits["train"]),
               config.max_train_examples or 10**12)


def _dev_size(config, dataset):
    return min(len(dataset.splits["dev"]), config.max_dev_examples or 10**12)


@dataclasses.dataclass
class _Built:
    """What the build step makes.

    model: what fit trains (split.model, the code release's training
    model, or mode adv's model with attacker heads); loss: its Keras loss
    (one per output in mode adv); monitor: the dev loss that picks
    best.weights.h5.
    """

    tokenizer: object
    split: object
    model: object
    adv_attributes: list | None
    monitor: str
    loss: object


def _build(config, dataset, adv_attributes):
    """Step 1, inside the strategy's scope: tokenizer, encoder, split and
    (mode adv) the adversarial model, with `config.seed` for the initial
    weights only.

    The privacy noise ops are traced later, during fit, and must not
    inherit a global seed: scoped_seed leaves none set.
    """
    with seeding.scoped_seed(config.seed):
        tokenizer = models.load_tokenizer(config.preset, config.max_length)
        backbone = models.load_backbone(config.preset)
        split = build_split(config, backbone, tokenizer, dataset.num_classes,
                            class_prior=_class_prior(config, dataset))
        if adv_attributes is None:
            # Released once: fit trains the server on the recorded release
            # (the user side is frozen and outside the fit), through a
            # model of its own layers, so that server_side.keras is saved
            # without the optimizer (as it is inside split.model).
            model = (keras.Model(split.server.input, split.server.output,
                                 name="server_training_model")
                     if _released_once(config)
                     else split.training_model or split.model)
            return _Built(tokenizer, split, model, None, "val_loss",
                          _task_loss(config, split, dataset.num_classes))
        # One model, one fit: total loss = task loss + the attacker heads'
        # losses (unweighted; the gradient reversal's adv_lambda sets how
        # hard the encoder fights them).
        model = builder.adversarial_model(
            split, {n: dataset.private_attributes[n] for n in adv_attributes},
            config.adv_lambda)
    # The best checkpoint is chosen by the MAIN TASK's dev loss
    # ("val_label_loss"), not the total: a low total would favour epochs
    # where the attackers win, i.e. where more private information leaks.
    return _Built(tokenizer, split, model, adv_attributes,
                  f"val_{builder.LABEL_OUTPUT}_loss",
                  {name: _loss() for name in model.output})


def _class_prior(config, dataset):
    """The class frequencies of the training labels the run uses."""
    labels = pipeline.train_labels(dataset, config.max_train_examples)
    return np.bincount(labels, minlength=dataset.num_classes) / len(labels)


def _loss():
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _user_draws(config):
    """The run-directory files that hold this run's draws of what users
    send (each drawn once, by the chief of a multi-worker run)."""
    names = []
    if config.label_epsilon is not None:
        names.append(rundir.RANDOMIZED_LABELS)
    if _released_once(config):
        names.append(rundir.TRAINING_RELEASE)
    return names


def _released_once(config):
    """Whether the run trains on a once-drawn release of its texts."""
    return config.training_release == user_release.ONCE


def _task_loss(config, split, num_classes):
    """The loss of what fit trains: the split's own (the code release's
    expected loss over its channel), the forward-corrected cross-entropy
    for randomized labels (--label_epsilon), else the cross-entropy."""
    if split.training_loss is not None:
        return split.training_loss
    if config.label_epsilon is not None:
        return losses.ForwardCorrectedCrossentropy(
            label_privacy.transition(config, num_classes))
    return _loss()


def _compile(model, config, *, steps_per_epoch, loss):
    """Step 2, inside the strategy's scope: AdamW on the run's learning-rate
    schedule, `loss`, accuracy per output. Returns the schedule."""
    schedule = schedules.run_schedule(config, steps_per_epoch)
    optimizer = SharedTermsAdamW(schedule)
    if isinstance(model.output, dict):  # mode adv
        metrics = {name: ["accuracy"] for name in model.output}
    else:
        metrics = ["accuracy"]
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics)
    return schedule


def _fit(model, run, config, train_batches, dev_batches, *, monitor,
         verbose, extra_callbacks, validation_steps=None):
    """Step 3: fit from the backup's epoch (if any) to `config.epochs`
    (`validation_steps`: dev batches per epoch, for endless dev batches).

    Returns (history, throughput callback, wall seconds). Raises
    TrainingError when no epoch gave a finite `monitor`.
    """
    throughput = callbacks_lib.Throughput(config.batch_size)
    callbacks = [
        # Best first: an epoch is backed up (and so never run again) only
        # once its checkpoint decision is on disk.
        callbacks_lib.BestCheckpoint(run, monitor),
        callbacks_lib.Backup(run, RunDirectoryError),
        keras.callbacks.TensorBoard(run.file(rundir.LOGS)),
        throughput,
        *extra_callbacks,
    ]
    prebuild.build_before_fit(model, train_batches)
    start = time.perf_counter()
    # The batches shuffle themselves every epoch (pipeline.batches); Keras'
    # own shuffle does not apply to a tf.data.Dataset.
    history = model.fit(train_batches, validation_data=dev_batches,
                        epochs=config.epochs, callbacks=callbacks,
                        verbose=verbose, shuffle=False,
                        validation_steps=validation_steps)
    wall = time.perf_counter() - start
    if not run.exists(rundir.BEST_WEIGHTS):
        raise TrainingError(
            f"No epoch gave a finite {monitor}, so {rundir.BEST_WEIGHTS} was "
            "never written; lower --learning_rate or check the data.")
    return history, throughput, wall


def _save(run, config, built, dataset, *, calibration_batches):
    """Step 4: the best weights into the model, the split's closed-form
    calibration if it has one (on `calibration_batches()`, the training
    data: built only then), then the user and server sides, the
    vocabulary and split.json (each atomically). Returns the run's privacy
    guarantee."""
    if not run.holds_best(built.model):
        built.model.load_weights(run.file(rundir.BEST_WEIGHTS))
    split = built.split
    if split.calibrate is not None:
        split.calibrate(calibration_batches())
    run.save_model(rundir.USER, split.user)
    run.save_model(rundir.SERVER, split.server)
    run.write_with(rundir.VOCAB, built.tokenizer.save_vocabulary)
    guarantee = builder.run_guarantee(config, split,
                                      max_tokens=config.max_length - 2)
    run.write(rundir.SPLIT, {
        "split_point": split.split_point,
        "guarantee": guarantee.to_dict(),
        "tokenizer": built.tokenizer.config(),
        "frozen_user_side": config.frozen_user_side,
        "label_names": label_names_of(dataset)})
    return guarantee


def _released_batches(built, released, data, name, config, class_weights,
                      shuffle=False):
    """Batches of the recorded release of split `name`, with the labels of
    `data` (the randomized ones for fit, the clean ones to measure)."""
    part = released[name]
    return user_release.batches(
        part, built.split.spec, data.splits[name].labels[:len(part)],
        batch_size=config.batch_size, pad_id=built.tokenizer.pad_id,
        shuffle=shuffle, seed=config.seed, class_weights=class_weights)


def _predictions(model, batches):
    """(true labels, predicted labels) of the main task over `batches`
    (fit's batches too: mode adv's targets, sample weights ignored)."""
    predicted, labels = [], []
    for features, label, *_ in batches:
        if isinstance(label, dict):  # mode adv: the task label only
            label = label[builder.LABEL_OUTPUT]
        logits = model(features, training=False)
        predicted.append(np.asarray(logits).argmax(axis=1))
        labels.append(label.numpy())
    return np.concatenate(labels), np.concatenate(predicted)


def _scores(model, batches, num_classes):
    """{"accuracy", "macro_f1", "confusion"} of `model` (features -> task
    logits); confusion: (K, K) counts, row the true class."""
    y_true, y_pred = _predictions(model, batches)
    return _scores_of(y_true, y_pred, num_classes)


def _scores_of(y_true, y_pred, num_classes):
    """_scores' dict from labels and predictions."""
    from tfdptext.privacy import limit

    return {"accuracy": metrics_lib.accuracy(y_true, y_pred),
            "macro_f1": metrics_lib.macro_f1(y_true, y_pred),
            "confusion": limit.confusion_matrix(y_true, y_pred,
                                                num_classes).tolist()}


def _versions():
    import keras_hub

    return {"tfdptext": __version__, "tensorflow": tf.__version__,
            "keras": keras.__version__, "keras_hub": keras_hub.__version__,
            "python": platform.python_version()}


@dataclasses.dataclass
class _Session:
    """What this session's fit produced, for metrics.json."""

    history: object
    throughput: object
    wall: float
    schedule: object
    class_weights: object
    replicas: int
    gpu: bool


def _limit(guarantee, accuracy, dataset):
    """The randomized-response limit beside the test accuracy (a perfect
    classifier's; tfdptext-eval adds the non-private reference's), with the
    test split's class frequencies as the prior."""
    from tfdptext.privacy import limit

    labels = dataset.splits["test"].labels
    prior = np.bincount(labels, minlength=dataset.num_classes)
    return limit.limit_report(guarantee, accuracy, dataset.num_classes,
                              prior=prior, num_texts=len(labels))


def _training_data(config, release_record):
    """metrics.json's "training_release" (None where the training texts
    are the server's own) and what the training texts guarantee to the
    users who sent them (the label composed in "label_privacy")."""
    from tfdptext.privacy.guarantee import Guarantee

    if not config.frozen_user_side:
        return None, None
    record = release_record or {"mode": config.training_release}
    drawn = record.get("release_guarantee")
    text = user_release.training_data_guarantee(
        config, None if drawn is None else Guarantee.from_dict(drawn))
    record = {**record, "guarantee": text.to_dict(),
              "guarantee_text": str(text)}
    return record, text


def _measure(config, built, dataset, guarantee, session, *, dev,
             test_batches, labels=None, release_record=None):
    """Step 5: dev and test accuracy and macro-F1 on the CLEAN labels (the
    experimenter's), and the metrics dict (written last as metrics.json by
    `train`). `dev` is (model, batches); `labels` are the randomized
    labels of a --label_epsilon run (dev accuracy on them is added: it is
    what a deployment's server can measure)."""
    dev_model, dev_batches = dev
    dev_labels, dev_predicted = _predictions(dev_model, dev_batches)
    dev = _scores_of(dev_labels, dev_predicted, dataset.num_classes)
    test = _scores(built.split.model, test_batches, dataset.num_classes)
    training_release, text_guarantee = _training_data(config,
                                                      release_record)
    history = session.history.history
    test_labels = dataset.splits["test"].labels
    num_codes, code_plan = None, None
    if config.release == "code":
        plan = builder.code_plan(config, _class_prior(config, dataset))
        num_codes = plan.num_codes
        code_plan = {
            "requested": config.num_codes, "num_codes": plan.num_codes,
            "groups": None if plan.groups is None else list(plan.groups),
            "source": plan.source,
            # On the training labels' prior: what a perfect code head
            # reaches through the channel that runs, and the theorem.
            "perfect_head_accuracy": plan.accuracy,
            "bound": plan.bound}
    return {
        "mode": config.mode,
        "mechanism": config.mechanism,
        "parameters": {"epsilon": config.epsilon, "eta": config.eta,
                       "sensitivity": config.sensitivity,
                       "dropout_rate": config.dropout_rate,
                       "private_dim": config.private_dim,
                       "normalization": config.normalization,
                       "release": config.release, "num_codes": num_codes,
                       "code_plan": code_plan,
                       "label_epsilon": config.label_epsilon,
                       "training_release": config.training_release,
                       "adv_lambda": config.adv_lambda,
                       "adv_attributes": built.adv_attributes,
                       "mechanism_options": config.mechanism_options},
        "guarantee": guarantee.to_dict(),
        "guarantee_text": str(guarantee),
        "limit": _limit(guarantee, test["accuracy"], dataset),
        "training_release": training_release,
        "label_privacy": None if labels is None else label_privacy.summary(
            config, dataset, labels, text_guarantee,
            dev_accuracy_randomized=metrics_lib.accuracy(
                labels["dev"][:len(dev_predicted)], dev_predicted)),
        "dataset": dataset.name,
        "label_names": label_names_of(dataset),
        "sizes": {"train": _train_size(config, dataset),
                  "dev": _dev_size(config, dataset),
                  "test": len(dataset.splits["test"])},
        # The test split's most frequent class, counted on the test split.
        "majority_test_class": int(np.bincount(test_labels).argmax()),
        "majority_test_accuracy": float(
            np.bincount(test_labels).max() / len(test_labels)),
        # On the clean labels (the experimenter's; with --label_epsilon a
        # deployment's server holds only the randomized ones: see
        # "label_privacy").
        "dev_accuracy": dev["accuracy"],
        "test_accuracy": test["accuracy"],
        "dev_macro_f1": dev["macro_f1"],
        "test_macro_f1": test["macro_f1"],
        # Row the true class, column the predicted one (the limit of a
        # private run that names this run as its reference uses it).
        "test_confusion": test["confusion"],
        "epochs": config.epochs,
        "epochs_run_this_session": len(history.get("loss", [])),
        "history": {k: [float(v) for v in vals]
                    for k, vals in history.items()},
        "learning_rate_schedule": session.schedule.get_config(),
        "class_weight": config.class_weight,
        "class_weights": None if session.class_weights is None
        else [float(w) for w in session.class_weights],
        "train_examples_per_second": session.throughput.examples_per_second,
        "wall_time_seconds": session.wall,
        "device": "GPU" if session.gpu else "CPU",
        "mixed_precision": session.gpu,
        "distribute": config.distribute,
        "replicas": session.replicas,
        "preset": config.preset,
        "max_length": config.max_length,
        "batch_size": config.batch_size,
        "run_format": rundir.RUN_FORMAT,
        "versions": _versions(),
    }


def _finished(run, verbose):
    """A finished run: clears leftover checkpoint state, says so, returns
    its metrics."""
    # metrics.json is written last (atomically): the run is complete.
    _drop_checkpoints(run)
    if verbose:
        print(f"{run.path}: this run has already finished "
              f"({rundir.METRICS} is there); nothing to do. Remove the "
              "directory to train it again.")
    return read_metrics(run.path)


def _drop_checkpoints(run):
    """Finished: the backup and the best checkpoint only served resuming
    (the best weights are in user_side.keras and server_side.keras, which
    export and evaluation read); MiniLM's best.weights.h5 alone is ~270
    MB."""
    for name in rundir.CHECKPOINT_FILES:
        run.remove(name)


def _output_dir_of_worker(config, output_dir):
    """This worker's run directory: `output_dir`, or (a non-chief worker
    of a multi-worker run) its scratch run beside it."""
    if config.distribute != "multi_worker":
        return output_dir
    return devices.worker_output_dir(output_dir, devices.read_tf_config())


def train(config, output_dir, dataset=None, verbose=1, extra_callbacks=(),
          announce=None):
    """Trains `config` into `output_dir`; resumes a killed run there.

    Mode adv (adversarial training, the ADV baseline) trains a model with
    one training-only attacker head per private attribute behind a gradient
    reversal; the user and server sides saved are those of mode none. Its
    guarantee is "none": empirical privacy only, never DP.

    On a GPU the run computes in mixed float16; Keras' global policy is
    restored when `train` returns or raises.

    `announce(guarantee)`, if given, is called once the model is built and
    before the first step, with what the user side's releases guarantee
    (the programs print its epsilon per text first).

    Returns the metrics dict (also written to metrics.json).
    """
    gpu = devices.gpu_available()
    if config.batch_size is None:
        config.batch_size = devices.default_batch_size(gpu)
    config.validate()
    # First of all (TF_CONFIG is checked, and a multi-worker strategy must
    # exist before TensorFlow runs anything else).
    strategy = devices.make_strategy(config.distribute)
    output_dir_given = output_dir
    output_dir = _output_dir_of_worker(config, output_dir)
    run = run_dir(output_dir)
    state = check_output_dir(output_dir, config)
    if state == FINISHED:
        return _finished(run, verbose)
    if dataset is None:
        dataset = load_config_dataset(config)
    adv_attributes = None
    if config.mode == "adv":  # checked before anything is written
        adv_attributes = adv_attributes_for(config, dataset)
    with devices.precision_policy(devices.policy_for(gpu)):
        metrics = _train_in(run, config, dataset, state, strategy,
                            adv_attributes=adv_attributes, gpu=gpu,
                            verbose=verbose, extra_callbacks=extra_callbacks,
                            announce=announce,
                            chief_dir=(None if output_dir == output_dir_given
                                       else output_dir_given))
    if output_dir != output_dir_given:
        # A worker other than the chief: the chief wrote the run; this
        # worker's scratch copy only served resuming a killed run.
        shutil.rmtree(output_dir, ignore_errors=True)
    return metrics


def _train_in(run, config, dataset, state, strategy, *, adv_attributes, gpu,
              verbose, extra_callbacks, announce=None, chief_dir=None):
    """`train` once the directory, data and devices are settled.

    `chief_dir`: on a worker other than the chief, the run directory whose
    draws of the users' data (labels, training release) this worker reads.
    """
    steps = pipeline.steps_per_epoch(_train_size(config, dataset),
                                     config.batch_size)
    # Every weights file and model of the run (the encoder's, the
    # checkpoints, the saved sides) saved and loaded at a fraction of the
    # cost (saving_cache's docstring).
    saving_cache.cache_skipsets()
    # The encoder is loaded before config.json is written: a bad --preset
    # leaves nothing that would refuse the corrected command.
    with strategy.scope():
        built = _build(config, dataset, adv_attributes)
        schedule = _compile(built.model, config, steps_per_epoch=steps,
                            loss=built.loss)
    if announce is not None:
        announce(builder.run_guarantee(config, built.split,
                                       max_tokens=config.max_length - 2))
    if state == NEW:
        # An earlier start that failed before any progress: start afresh.
        run.remove(rundir.LOGS)
    run.remove_stale_temporaries()
    run.write_text(rundir.CONFIG, config.to_json())
    labels, fit_data = None, dataset
    if chief_dir is not None:
        # After building the model (whose variables the workers sync), at
        # the point where the chief draws: every worker trains on its draw,
        # checked against the chief's record (digests and run id).
        devices.await_chief_files(chief_dir, run.path, _user_draws(config))
    else:
        # The run's identity, drawn when its directory is created.
        run.run_id(create=True)
    if config.label_epsilon is not None:
        # Drawn once (or read back): what the users' devices released.
        labels = label_privacy.randomized_labels(run, config, dataset,
                                                 RunDirectoryError)
        fit_data = label_privacy.noisy_dataset(dataset, labels)
    class_weights = pipeline.class_weights_for(config, fit_data)
    released, release_record = None, None
    if _released_once(config):
        # Drawn once (or read back): what the users' devices released.
        released, release_record = user_release.released_inputs(
            run, config, built.split, built.tokenizer, dataset,
            RunDirectoryError, log=print if verbose else None)
        train_batches = _released_batches(built, released, fit_data, "train",
                                          config, class_weights, True)
        dev_batches = _released_batches(built, released, fit_data, "dev",
                                        config, class_weights)
    else:
        common = dict(batch_size=config.batch_size, seed=config.seed,
                      adv_attributes=adv_attributes,
                      class_weights=class_weights)
        train_batches = pipeline.batches(
            built.tokenizer, fit_data, "train", shuffle=True,
            max_examples=config.max_train_examples, **common)
        dev_batches = pipeline.batches(
            built.tokenizer, fit_data, "dev",
            max_examples=config.max_dev_examples, **common)
    # Without randomized labels fit's dev batches hold the clean ones: the
    # measurement reads them again (the same texts and labels) instead of
    # tokenizing and building the split's pipeline a second time.
    measure_dev = dev_batches if labels is None else None
    validation_steps = None
    if devices.is_multi_worker(strategy):
        train_batches = devices.per_worker_batches(strategy, train_batches)
        # The dev batches repeat, read validation_steps at a time (from
        # the start each epoch: the same batches as one pass).
        validation_steps = devices.passes_of(dev_batches)
        dev_batches = devices.per_worker_batches(strategy, dev_batches,
                                                 repeat=True)
    history, throughput, wall = _fit(
        built.model, run, config, train_batches, dev_batches,
        monitor=built.monitor, verbose=verbose,
        extra_callbacks=extra_callbacks, validation_steps=validation_steps)
    guarantee = _save(run, config, built, dataset,
                      calibration_batches=lambda: pipeline.batches(
                          built.tokenizer, fit_data, "train",
                          batch_size=config.batch_size,
                          max_examples=config.max_train_examples))
    session = _Session(history, throughput, wall, schedule, class_weights,
                       strategy.num_replicas_in_sync, gpu)
    if released is None:
        dev = (built.split.model, measure_dev if measure_dev is not None
               else pipeline.batches(
                   built.tokenizer, dataset, "dev",
                   batch_size=config.batch_size,
                   max_examples=config.max_dev_examples))
    else:  # the recorded dev release, with the clean labels
        dev = (built.split.server, measure_dev if measure_dev is not None
               else _released_batches(built, released, dataset, "dev",
                                      config, None))
    metrics = _measure(
        config, built, dataset, guarantee, session, dev=dev,
        test_batches=pipeline.batches(
            built.tokenizer, dataset, "test", batch_size=config.batch_size),
        labels=labels, release_record=release_record)
    # The best dev loss over every session (best.json goes with the
    # checkpoints once the run has finished).
    metrics["best_" + built.monitor] = run.read_best()
    run.write(rundir.METRICS, metrics)
    _drop_checkpoints(run)
    return metrics
