"""Training modes on a tiny backbone and the synthetic corpus (CPU, fast)."""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from tfdptext import data
from tfdptext import rundir
from tfdptext import training
from tfdptext.layers import base as layers_base
from tfdptext.models import split_spec
from tfdptext.training import trainer

import eager_training

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def corpus():
    return data.load_synthetic(num_examples=320)


def _config(preset, **kwargs):
    defaults = dict(preset=preset, max_length=16, batch_size=32, epochs=3,
                    learning_rate=3e-3)
    defaults.update(kwargs)
    return training.TrainConfig(**defaults)


class _Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
            raise KeyboardInterrupt("simulated kill")


class _StartingStep(keras.callbacks.Callback):
    """The optimizer's iteration count when training (re)starts."""

    def on_train_batch_begin(self, batch, logs=None):
        if not hasattr(self, "step"):
            self.step = int(self.model.optimizer.iterations.numpy())


class _EpochLosses(keras.callbacks.Callback):
    """The training loss of every epoch run while it is attached, by epoch
    (across an interrupted session and its resumption)."""

    def __init__(self):
        super().__init__()
        self.losses = {}

    def on_epoch_end(self, epoch, logs=None):
        self.losses[epoch] = logs["loss"]


def _imbalanced(corpus, keep_positive=40):
    """The synthetic corpus with most positive training texts removed."""
    train = corpus.splits["train"]
    positive = np.flatnonzero(train.labels == 1)[:keep_positive]
    keep = np.sort(np.concatenate([np.flatnonzero(train.labels == 0),
                                   positive]))
    return data.TextDataset(
        "imbalanced", dict(corpus.splits, train=train.subset(keep)),
        corpus.num_classes, corpus.private_attributes,
        label_names=corpus.label_names)


@pytest.fixture(scope="module")
def none_run(tiny_preset, corpus, tmp_path_factory):
    """One mode-none run serves the mode's training, the balanced class
    weights and the run directory's refusals (a training run costs ~10
    CPU-s, mostly tracing): 3 epochs with class_weight=balanced on a
    corpus with most positive training texts removed."""
    dataset = _imbalanced(corpus)
    out = str(tmp_path_factory.mktemp("none") / "run")
    metrics = training.train(
        _config(tiny_preset, mode="none", class_weight="balanced"), out,
        dataset=dataset, verbose=0)
    return dict(out=out, dataset=dataset, metrics=metrics)


ADV_TRAIN_EXAMPLES = 64


@pytest.fixture(scope="module")
def adv_run(tiny_preset, corpus, tmp_path_factory):
    """One mode-adv run serves adversarial training and resuming (mode
    adv's monitor is its task's dev loss, not val_loss): 2 epochs of the
    first 64 training texts (2 steps each: resuming needs an epoch's
    steps, not many), killed before its second epoch and resumed."""
    out = str(tmp_path_factory.mktemp("adv") / "run")
    config = _config(tiny_preset, mode="adv", adv_lambda=1.0, epochs=2,
                     max_train_examples=ADV_TRAIN_EXAMPLES)
    losses = _EpochLosses()
    # The killed session's one epoch runs eagerly (tests/eager_training.
    # py): it only leaves the backup; the resumed session traces fit's
    # graph as the product runs it.
    with pytest.raises(KeyboardInterrupt), eager_training.eager_fit():
        training.train(config, out, dataset=corpus, verbose=0,
                       extra_callbacks=[_Interrupt(), losses])
    run = trainer.run_dir(out)
    interrupted = {"backup": os.path.isdir(os.path.join(out, "backup")),
                   "best": run.read_best(),
                   "record": run.read(rundir.BEST_RECORD)}
    start = _StartingStep()
    metrics = training.train(
        _config(tiny_preset, mode="adv", adv_lambda=1.0, epochs=2,
                max_train_examples=ADV_TRAIN_EXAMPLES), out,
        dataset=corpus, verbose=0, extra_callbacks=[start, losses])
    return dict(out=out, metrics=metrics, interrupted=interrupted,
                start_step=start.step,
                losses=[losses.losses[e] for e in sorted(losses.losses)])


# The other modes' runs, each trained once for the tests that read it.
MODE_PARAMS = {
    "robust": {"epsilon": 5.0, "dropout_rate": 0.1},
    # Only the classifier trains on a frozen random encoder: a faster rate
    # and more epochs make the decrease reliable.
    "seq_rep": {"eta": 200.0, "learning_rate": 3e-2, "epochs": 5},
    "token_rep": {"eta": 500.0},
    "text_to_text": {"eta": 1000.0},
}


@pytest.fixture(scope="module")
def mode_runs(tiny_preset, corpus, tmp_path_factory):
    """mode -> (run directory, metrics, seeds before and after), trained
    on first use."""
    from keras.src.utils import rng_utils
    from tensorflow.python.eager import context

    runs = {}

    def get(mode):
        if mode not in runs:
            out = str(tmp_path_factory.mktemp(mode) / "run")
            seeds = {"keras_before": rng_utils.get_random_seed()}
            metrics = training.train(
                _config(tiny_preset, mode=mode, **MODE_PARAMS[mode]), out,
                dataset=corpus, verbose=0)
            seeds.update(keras_after=rng_utils.get_random_seed(),
                         tf_global_after=context.global_seed())
            runs[mode] = (out, metrics, seeds)
        return runs[mode]

    return get


@pytest.mark.parametrize("mode", ["none", *MODE_PARAMS])
def test_each_mode_trains_and_loss_decreases(none_run, mode_runs, mode):
    if mode == "none":
        out, loss = none_run["out"], none_run["metrics"]["history"]["loss"]
        assert len(loss) == 3
    else:
        out, metrics, _ = mode_runs(mode)
        loss = metrics["history"]["loss"]
    assert loss[-1] < loss[0], loss
    for name in ("user_side.keras", "server_side.keras", "split.json",
                 "metrics.json", "config.json"):
        assert os.path.exists(os.path.join(out, name)), name
    # Only resuming needed the checkpoints: a finished run drops them.
    assert not os.path.exists(os.path.join(out, "best.weights.h5"))
    saved = json.loads(open(os.path.join(out, "metrics.json")).read())
    for key in ("mode", "mechanism", "guarantee", "dataset", "sizes",
                "dev_accuracy", "test_accuracy", "epochs",
                "train_examples_per_second", "wall_time_seconds",
                "versions"):
        assert key in saved, key
    assert saved["versions"]["tfdptext"]
    assert saved["mode"] == mode
    assert (saved["guarantee"]["unit"] == "none") == (mode == "none")


def test_user_side_noise_on_at_inference_after_loading(tiny_preset,
                                                       mode_runs):
    out, _, seeds = mode_runs("robust")
    assert seeds["tf_global_after"] is None  # --seed never seeds the noise
    # nor keras.random
    assert seeds["keras_after"] == seeds["keras_before"]
    user = keras.models.load_model(os.path.join(out, "user_side.keras"))
    _, privatizer = layers_base.privatization_layers(user)
    assert isinstance(privatizer, layers_base.PrivatizationLayer)
    from tfdptext import models

    features = models.load_tokenizer(tiny_preset, 16)(["good service"] * 2)
    release = split_spec.get(split_spec.SEQUENCE).release
    a = user.predict(features, verbose=0)[release]
    b = user.predict(features, verbose=0)[release]
    assert not np.array_equal(a, b) and not np.array_equal(a[0], a[1])


def test_frozen_user_side_does_not_change(tiny_preset, corpus):
    from tfdptext import models

    config = _config(tiny_preset, mode="token_rep", eta=50.0).validate()
    tokenizer = models.load_tokenizer(tiny_preset, 16)
    backbone = models.load_backbone(tiny_preset)
    split = training.build_split(config, backbone, tokenizer, 2)
    before = [w.numpy().copy() for w in split.user.weights]
    assert before and not split.user.trainable_weights
    # Eager steps: two of them cost less than tracing fit's graph.
    split.model.compile(keras.optimizers.Adam(1e-2),
                        keras.losses.SparseCategoricalCrossentropy(True),
                        run_eagerly=True)
    batches = tokenizer.encode_dataset(corpus.tf_dataset("train"), 32).map(
        lambda f, y, p: (f, y)).take(2)
    server_before = [w.numpy().copy() for w in split.server.trainable_weights]
    split.model.fit(batches, epochs=1, verbose=0, shuffle=False)
    for old, new in zip(before, split.user.weights):
        np.testing.assert_array_equal(old, new.numpy())
    assert any(not np.array_equal(o, n.numpy()) for o, n in
               zip(server_before, split.server.trainable_weights))


def test_resume_after_interrupt(adv_run, corpus):
    out, metrics = adv_run["out"], adv_run["metrics"]
    assert adv_run["interrupted"]["backup"]
    first_best = adv_run["interrupted"]["best"]
    assert first_best is not None
    # Mode adv picks its best epoch by the main task's dev loss.
    assert adv_run["interrupted"]["record"]["monitor"] == "val_label_loss"
    assert metrics["epochs_run_this_session"] == 1  # epoch 0 was kept
    # The loss of each epoch, over both sessions.
    assert len(adv_run["losses"]) == 2
    # The optimizer's step count came back with the backup: the schedule
    # continues after the first epoch's steps instead of warming up again.
    steps = int(np.ceil(ADV_TRAIN_EXAMPLES / 32))
    assert steps < len(corpus.splits["train"]) / 32  # not the whole split
    assert adv_run["start_step"] == steps
    assert metrics["sizes"]["train"] == ADV_TRAIN_EXAMPLES
    assert metrics["learning_rate_schedule"]["total_steps"] == 2 * steps
    # The best dev loss over both sessions; the finished run keeps it in
    # metrics.json and drops the checkpoints that only served resuming.
    assert metrics["best_val_label_loss"] == pytest.approx(
        min([first_best] + metrics["history"]["val_label_loss"]))
    assert trainer.run_dir(out).read_best() is None
    assert not os.path.exists(os.path.join(out, "backup"))


def test_different_run_in_same_dir_refused(tiny_preset, corpus, none_run,
                                           tmp_path):
    out = none_run["out"]
    before = sorted(os.listdir(out))
    with pytest.raises(training.RunDirectoryError, match="mode"):
        training.train(_config(tiny_preset, mode="robust", epsilon=1.0),
                       out, dataset=corpus, verbose=0)
    assert sorted(os.listdir(out)) == before  # refused before any work
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("x")
    with pytest.raises(training.RunDirectoryError, match="not empty"):
        training.train(_config(tiny_preset, mode="none"),
                       str(tmp_path / "other"), dataset=corpus, verbose=0)


@pytest.mark.parametrize("kwargs,message", [
    ({"mode": "token_rep", "mechanism": "laplace", "epsilon": 1.0},
     "makes no sense"),
    ({"mode": "robust"}, "epsilon"),
    ({"mode": "robust", "epsilon": -1.0}, "epsilon"),
    ({"mode": "token_rep", "eta": 0.0}, "eta"),
    ({"mode": "text_to_text", "eta": 5.0, "dropout_rate": 0.2},
     "dropout_rate"),
    ({"mode": "robust", "epsilon": 1.0, "dropout_rate": 1.0},
     "dropout_rate"),
    ({"mode": "teleport"}, "mode"),
    ({"mode": "robust", "epsilon": 1.0, "private_dim": 1}, "private_dim"),
    ({"mode": "seq_rep", "epsilon": 1.0, "private_dim": 8},
     "private_dim.*seq_rep"),
    ({"mode": "token_rep", "eta": 5.0, "private_dim": 8}, "private_dim"),
    ({"mode": "robust", "epsilon": 1.0, "normalization": "sigmoid"},
     "private_dim"),
    ({"mode": "robust", "epsilon": 1.0, "normalization": "tanh"},
     "normalization"),
])
def test_bad_configs_fail_before_training(kwargs, message):
    with pytest.raises(ValueError, match=message):
        training.TrainConfig(**kwargs).validate()


def test_program_help_and_usage_error(tmp_path):
    program = os.path.join(ROOT, "train", "tfdptext-train")
    result = subprocess.run([sys.executable, program, "--help"],
                            capture_output=True, text=True, timeout=120)
    assert "--epsilon" in result.stdout and "--mode" in result.stdout
    result = subprocess.run(
        [sys.executable, program, "--mode=token_rep", "--epsilon=1",
         f"--output_dir={tmp_path / 'x'}"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "makes no sense" in result.stderr
    assert "Traceback" not in result.stderr


# Adversarial training (mode adv, DPNR's ADV baseline).


@pytest.mark.parametrize("lambda_", [0.5, 1.0, 2.75])
def test_gradient_reversal_identity_forward_reversed_gradient(lambda_):
    import tensorflow as tf

    from tfdptext.models import GradientReversal

    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(4, 7)).astype(np.float32))
    upstream = rng.normal(size=(4, 7)).astype(np.float32)
    layer = GradientReversal(lambda_)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    grad = tape.gradient(y, x, output_gradients=tf.constant(upstream))
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    np.testing.assert_array_equal(grad.numpy(),
                                  np.float32(-lambda_) * upstream)


def test_gradient_reversal_config_round_trip_and_bad_lambda():
    from tfdptext.models import GradientReversal

    layer = GradientReversal(0.3, name="rev")
    again = GradientReversal.from_config(layer.get_config())
    assert again.lambda_ == 0.3 and again.name == "rev"
    restored = keras.layers.deserialize(keras.layers.serialize(layer))
    assert isinstance(restored, GradientReversal)
    assert restored.get_config() == layer.get_config()
    for bad in (-1.0, float("nan"), float("inf"), "1"):
        with pytest.raises(ValueError, match="lambda_"):
            GradientReversal(bad)


def test_adv_mode_trains_and_saves_plain_split(tiny_preset, adv_run):
    out, metrics = adv_run["out"], adv_run["metrics"]
    history = metrics["history"]
    for key in ("loss", "label_loss", "adv_age_loss", "adv_gender_loss",
                "val_label_loss", "val_adv_gender_loss"):
        assert key in history and np.all(np.isfinite(history[key])), key
    for name in ("user_side.keras", "server_side.keras", "split.json",
                 "metrics.json", "config.json"):
        assert os.path.exists(os.path.join(out, name)), name
    saved = json.loads(open(os.path.join(out, "metrics.json")).read())
    assert saved["mode"] == "adv" and saved["mechanism"] == "none"
    assert saved["guarantee"]["unit"] == "none"
    assert any("no differential privacy" in c
               for c in saved["guarantee"]["conditions"])
    assert saved["parameters"]["adv_lambda"] == 1.0
    assert saved["parameters"]["adv_attributes"] == ["age", "gender"]
    assert 0.0 <= saved["test_accuracy"] <= 1.0
    split_json = json.loads(open(os.path.join(out, "split.json")).read())
    assert split_json["guarantee"]["unit"] == "none"
    # The attacker heads are training-only: the saved halves are mode none's.
    user = keras.models.load_model(os.path.join(out, "user_side.keras"))
    server = keras.models.load_model(os.path.join(out, "server_side.keras"))
    names = {l.name for m in (user, server) for l in m.layers}
    assert not any(n.startswith("adv_") or "reversal" in n for n in names)
    from tfdptext import models

    features = models.load_tokenizer(tiny_preset, 16)(["good service"] * 2)
    released = user.predict(features, verbose=0)  # {release name: array}
    again = user.predict(features, verbose=0)
    assert released.keys() == again.keys()
    for name in released:  # no noise: the release is deterministic
        np.testing.assert_array_equal(released[name], again[name])
    assert server.predict(released, verbose=0).shape == (2, 2)


def test_adv_attributes_default_subset_and_missing(corpus):
    config = training.TrainConfig(mode="adv", adv_lambda=1.0).validate()
    assert trainer.adv_attributes_for(config, corpus) == ["age", "gender"]
    config = training.TrainConfig(mode="adv", adv_lambda=1.0,
                                  adv_attributes=("gender",)).validate()
    assert config.adv_attributes == ["gender"]  # as config.json reads back
    assert trainer.adv_attributes_for(config, corpus) == ["gender"]
    config = training.TrainConfig(mode="adv", adv_lambda=1.0,
                                  adv_attributes=["nationality"]).validate()
    with pytest.raises(data.DataError, match="nationality"):
        trainer.adv_attributes_for(config, corpus)


@pytest.mark.parametrize("kwargs,message", [
    ({"mode": "adv"}, "adv_lambda"),
    ({"mode": "adv", "adv_lambda": 0.0}, r"adv_lambda.*\(0, inf\)"),
    ({"mode": "adv", "adv_lambda": -1.0}, r"adv_lambda.*\(0, inf\)"),
    ({"mode": "robust", "epsilon": 1.0, "adv_lambda": 1.0},
     "adv_lambda.*mode adv only"),
    ({"mode": "none", "adv_attributes": ["gender"]},
     "adv_attributes.*mode adv only"),
    ({"mode": "adv", "adv_lambda": 1.0, "epsilon": 1.0}, "makes no sense"),
    ({"mode": "adv", "adv_lambda": 1.0, "mechanism": "dchi", "eta": 5.0},
     "makes no sense"),
    ({"mode": "adv", "adv_lambda": 1.0, "adv_attributes": []},
     "adv_attributes"),
    ({"mode": "adv", "adv_lambda": 1.0, "adv_attributes": ["age", "age"]},
     "adv_attributes"),
])
def test_adv_bad_configs_fail_before_training(kwargs, message):
    with pytest.raises(ValueError, match=message):
        training.TrainConfig(**kwargs).validate()


def test_adv_missing_attributes_refused_before_training(tiny_preset, corpus,
                                                        tmp_path):
    out = tmp_path / "adv_missing"
    config = _config(tiny_preset, mode="adv", adv_lambda=1.0,
                     adv_attributes=["gender", "nationality"])
    with pytest.raises(data.DataError, match="nationality"):
        training.train(config, str(out), dataset=corpus, verbose=0)
    assert not out.exists()  # nothing written: the same dir can be reused
    no_private = data.TextDataset(
        "plain", {s: data.Examples(e.texts, e.labels)
                  for s, e in corpus.splits.items()}, 2, {})
    with pytest.raises(data.DataError, match="private attributes.*none"):
        training.train(_config(tiny_preset, mode="adv", adv_lambda=1.0),
                       str(out), dataset=no_private, verbose=0)
    assert not out.exists()


def test_program_adv_flags(tmp_path):
    program = os.path.join(ROOT, "train", "tfdptext-train")
    result = subprocess.run(
        [sys.executable, program, "--mode=robust", "--epsilon=1",
         "--adv_lambda=1", "--adv_attributes=gender,age",
         f"--output_dir={tmp_path / 'x'}"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "applies to mode adv only" in result.stderr
    assert "Traceback" not in result.stderr


# The recipe: learning-rate schedule, class weights, macro-F1, run format.


@pytest.mark.parametrize("decay", ["linear", "cosine", "constant"])
def test_schedule_matches_its_closed_form(decay):
    from tfdptext.training import schedules

    peak, total, warmup = 2e-4, 50, 5
    schedule = schedules.WarmupDecay(peak, total_steps=total,
                                     warmup_steps=warmup, decay=decay)
    progress = {25: (25 - 5) / 45, 49: 44 / 45}
    decayed = {
        "linear": lambda p: peak * (1 - p),
        "cosine": lambda p: peak * 0.5 * (1 + np.cos(np.pi * p)),
        "constant": lambda p: peak,
    }[decay]
    expected = {0: peak / 5, 2: 3 * peak / 5, 4: peak, 5: peak,
                25: decayed(progress[25]), 49: decayed(progress[49]),
                50: decayed(1.0), 80: decayed(1.0)}
    for step, value in expected.items():
        # float32: 1 + cos(pi p) near p = 1 keeps ~1e-7 of peak absolute.
        assert float(schedule(step)) == pytest.approx(value, rel=1e-5,
                                                      abs=peak * 1e-6), step
        assert schedules.warmup_decay_rate(step, peak, total, warmup,
                                           decay) == pytest.approx(value)
    assert (float(schedule(total)) == 0.0) == (decay != "constant")
    again = schedules.WarmupDecay.from_config(schedule.get_config())
    assert [float(again(s)) for s in (0, 7, 30)] == \
        [float(schedule(s)) for s in (0, 7, 30)]
    no_warmup = schedules.WarmupDecay(peak, total_steps=10, decay=decay)
    assert float(no_warmup(0)) == pytest.approx(peak)


def test_schedule_is_built_once_per_traced_step_and_follows_the_steps():
    """AdamW asks for the rate once per weight-decayed variable: in a traced
    step the schedule's ops are built once, and every step still updates
    with the closed-form rate of its own iteration (eager and traced)."""
    import tensorflow as tf

    from tfdptext.training import schedules

    peak, total, warmup = 0.1, 6, 2
    schedule = schedules.WarmupDecay(peak, total_steps=total,
                                     warmup_steps=warmup)
    variables = [keras.Variable(np.zeros((2,), "float32"), name=f"v{i}")
                 for i in range(5)]
    optimizer = keras.optimizers.SGD(schedule)  # w -= rate * gradient
    optimizer.build(variables)
    ones = [tf.ones((2,)) for _ in variables]
    builds = []
    rate = schedule._rate

    def counted(step):
        builds.append(tf.executing_eagerly())
        return rate(step)

    schedule._rate = counted

    @tf.function
    def traced_step():
        # Several requests in one graph, as AdamW's weight decay makes.
        first = optimizer.learning_rate
        assert optimizer.learning_rate is first
        optimizer.apply(ones, variables)

    expected = 0.0
    for step in range(total):
        if step % 2:
            traced_step()
        else:
            optimizer.apply(ones, variables)
        expected -= schedules.warmup_decay_rate(step, peak, total, warmup,
                                                "linear")
        for v in variables:
            np.testing.assert_allclose(v.numpy(), [expected] * 2, rtol=1e-5)
    assert int(optimizer.iterations.numpy()) == total
    # One graph build for the traced step; one computation per eager step.
    assert builds.count(False) == 1
    assert builds.count(True) == total // 2


@pytest.mark.parametrize("kwargs,message", [
    ({"total_steps": 0}, "total_steps"),
    ({"total_steps": 10, "warmup_steps": 11}, r"warmup_steps.*\[0, "),
    ({"total_steps": 10, "decay": "step"}, "decay"),
])
def test_schedule_bad_arguments(kwargs, message):
    from tfdptext.errors import ArgumentError
    from tfdptext.training import schedules

    with pytest.raises(ArgumentError, match=message):
        schedules.WarmupDecay(1e-4, **kwargs)


def test_run_schedule_counts_all_epochs_steps():
    from tfdptext.training import schedules

    config = training.TrainConfig(mode="none", epochs=3, learning_rate=1e-3,
                                  warmup_fraction=0.1,
                                  lr_schedule="cosine").validate()
    schedule = schedules.run_schedule(config, steps_per_epoch=40)
    assert schedule.get_config() == {"peak_learning_rate": 1e-3,
                                     "total_steps": 120, "warmup_steps": 12,
                                     "decay": "cosine"}


def test_balanced_class_weights_are_n_over_k_nk():
    from tfdptext.training import pipeline

    labels = np.array([0] * 6 + [1] * 3 + [3] * 1)  # class 2 absent
    weights = pipeline.balanced_class_weights(labels, 4)
    n, k = 10, 3  # three classes present
    np.testing.assert_allclose(weights, [n / (k * 6), n / (k * 3), 0.0,
                                         n / (k * 1)], rtol=1e-6)
    assert weights[labels].sum() == pytest.approx(n)


@pytest.mark.parametrize("kwargs,message", [
    ({"lr_schedule": "step"}, "lr_schedule"),
    ({"warmup_fraction": 1.0}, r"warmup_fraction.*\[0, 1\)"),
    ({"warmup_fraction": -0.1}, "warmup_fraction"),
    ({"class_weight": "inverse"}, "class_weight"),
    ({"distribute": "tpu"}, "distribute"),
    ({"learning_rate": 0.0}, r"learning_rate.*\(0, inf\)"),
])
def test_bad_recipe_configs_fail_before_training(kwargs, message):
    from tfdptext.errors import ArgumentError

    with pytest.raises(ArgumentError, match=message):
        training.TrainConfig(mode="none", **kwargs).validate()


def test_every_field_has_help_and_enums_have_choices():
    import dataclasses

    from tfdptext.training import config as config_lib

    fields = {f.name: f for f in dataclasses.fields(training.TrainConfig)}
    for field in fields.values():
        assert field.metadata["help"].strip(), field.name
    choices = {"mode": config_lib.MODES, "mechanism": config_lib.MECHANISMS,
               "lr_schedule": config_lib.SCHEDULES,
               "class_weight": config_lib.CLASS_WEIGHTS,
               "distribute": config_lib.STRATEGIES,
               "sensitivity": ("per_coordinate", "vector"),
               "pooling": ("mean", "cls"),
               "normalization": config_lib.NORMALIZATIONS,
               "release": config_lib.RELEASES,
               "training_release": config_lib.TRAINING_RELEASES}
    for name, allowed in choices.items():
        assert tuple(fields[name].metadata["choices"]) == tuple(allowed)
    for name in set(fields) - set(choices):
        assert "choices" not in fields[name].metadata, name


def test_legacy_config_json_reads_as_a_constant_rate_run():
    data = training.TrainConfig(mode="none").validate().to_dict()
    for name in ("lr_schedule", "warmup_fraction", "class_weight",
                 "distribute"):
        data.pop(name)
    old = training.TrainConfig.from_dict(data)
    assert (old.lr_schedule, old.warmup_fraction, old.class_weight) == \
        ("constant", 0.0, "none")
    changed = {k for k, v in old.run_identity().items()
               if training.TrainConfig(mode="none").validate()
               .run_identity()[k] != v}
    assert changed == {"lr_schedule", "warmup_fraction"}


def test_balanced_run_records_weights_macro_f1_and_run_format(none_run):
    labels = none_run["dataset"].splits["train"].labels
    out, metrics = none_run["out"], none_run["metrics"]
    saved = json.loads(open(os.path.join(out, "config.json")).read())
    assert saved["class_weight"] == "balanced"
    n, counts = len(labels), np.bincount(labels)
    assert metrics["class_weights"] == pytest.approx(
        [n / (2 * counts[0]), n / (2 * counts[1])])
    on_disk = json.loads(open(os.path.join(out, "metrics.json")).read())
    assert on_disk["run_format"] == rundir.RUN_FORMAT
    assert on_disk["class_weight"] == "balanced"
    for split in ("dev", "test"):
        assert 0.0 <= on_disk[f"{split}_macro_f1"] <= 1.0
    assert on_disk["learning_rate_schedule"]["decay"] == "linear"
    assert on_disk["learning_rate_schedule"]["total_steps"] == 3 * int(
        np.ceil(n / 32))


def test_measured_macro_f1_is_the_evaluation_metric(tiny_preset, corpus):
    from tfdptext import metrics as metrics_lib
    from tfdptext import models

    config = _config(tiny_preset, mode="none").validate()
    tokenizer = models.load_tokenizer(tiny_preset, 16)
    split = training.build_split(config, models.load_backbone(tiny_preset),
                                 tokenizer, 2)
    batches = trainer.pipeline.batches(tokenizer, corpus, "test",
                                       batch_size=32)
    scores = trainer._scores(split.model, batches, 2)
    logits = split.model.predict(batches, verbose=0)
    y_pred = logits.argmax(axis=1)
    y_true = corpus.splits["test"].labels
    assert scores["macro_f1"] == pytest.approx(
        metrics_lib.macro_f1(y_true, y_pred))
    assert scores["accuracy"] == pytest.approx(
        float((y_true == y_pred).mean()))
    # The confusion matrix: row the true class, column the predicted one.
    confusion = np.asarray(scores["confusion"])
    assert confusion.sum() == len(y_true)
    assert confusion[1, 0] == int(((y_true == 1) & (y_pred == 0)).sum())
    assert np.trace(confusion) == int((y_true == y_pred).sum())
    # The run measures its dev split on fit's dev batches where they hold
    # the clean labels: their class weights and mode adv's targets change
    # no prediction and no label.
    weights = np.array([0.5, 2.0], np.float32)
    for fit_batches in (
            trainer.pipeline.batches(tokenizer, corpus, "test",
                                     batch_size=32, class_weights=weights),
            trainer.pipeline.batches(tokenizer, corpus, "test",
                                     batch_size=32,
                                     adv_attributes=["gender"])):
        labels, predicted = trainer._predictions(split.model, fit_batches)
        np.testing.assert_array_equal(labels, y_true)
        np.testing.assert_array_equal(predicted, y_pred)


def test_weighted_batches_carry_each_examples_class_weight(tiny_preset,
                                                           corpus):
    from tfdptext import models

    tokenizer = models.load_tokenizer(tiny_preset, 16)
    weights = np.array([0.25, 4.0], np.float32)
    plain = next(iter(trainer.pipeline.batches(
        tokenizer, corpus, "train", batch_size=8, class_weights=weights)))
    _, label, weight = plain
    np.testing.assert_array_equal(weight.numpy(), weights[label.numpy()])
    adv = next(iter(trainer.pipeline.batches(
        tokenizer, corpus, "train", batch_size=8, class_weights=weights,
        adv_attributes=["gender"])))
    _, targets, weight = adv
    assert set(weight) == {"label", "adv_gender"} == set(targets)
    np.testing.assert_array_equal(weight["label"].numpy(),
                                  weights[targets["label"].numpy()])
    np.testing.assert_array_equal(weight["adv_gender"].numpy(), np.ones(8))


def test_policy_restored_when_train_returns_or_raises(tiny_preset, corpus,
                                                      tmp_path, monkeypatch):
    from tfdptext.training import devices

    assert devices.policy_for(True) == "mixed_float16"
    assert devices.policy_for(False) is None
    before = keras.mixed_precision.global_policy().name
    with pytest.raises(RuntimeError):
        with devices.precision_policy("mixed_float16"):
            assert keras.mixed_precision.global_policy().name == \
                "mixed_float16"
            raise RuntimeError("boom")
    assert keras.mixed_precision.global_policy().name == before
    # The GPU branch of train, forced: the policy is set while models are
    # built, and restored after the run (here: a failing encoder load).
    seen = []
    monkeypatch.setattr(devices, "gpu_available", lambda: True)

    def load_backbone(preset):
        seen.append(keras.mixed_precision.global_policy().name)
        raise ValueError("no such encoder")

    monkeypatch.setattr(trainer.models, "load_backbone", load_backbone)
    with pytest.raises(ValueError, match="no such encoder"):
        training.train(_config(tiny_preset, mode="none", epochs=1),
                       str(tmp_path / "gpu"), dataset=corpus, verbose=0)
    assert seen == ["mixed_float16"]
    assert keras.mixed_precision.global_policy().name == before


def _adamw_pair_model(seed, optimizer_class):
    """A model with an embedding (sparse gradients) and a dense layer,
    initialised from `seed`, its variables' paths the same each time,
    compiled with `optimizer_class` on a warm-up/decay schedule."""
    from tfdptext.training import schedules

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,), dtype="int32"),
                             keras.layers.Embedding(50, 4, name="embed"),
                             keras.layers.Flatten(name="flat"),
                             keras.layers.Dense(2, name="dense")],
                            name="pair")
    model.compile(optimizer=optimizer_class(schedules.WarmupDecay(
        0.05, total_steps=6, warmup_steps=2)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _paths_and_values(model):
    """{path: value} of a model's and its optimizer's variables, the names
    Keras numbers per process ("adam_w_1") read as ADAMW and (mixed
    float16) LOSS_SCALE."""
    optimizer = model.optimizer
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    names = {optimizer.name: "LOSS_SCALE", inner.name: "ADAMW"}
    return {"/".join(names.get(part, part) for part in v.path.split("/")):
            np.array(v.numpy())
            for v in model.weights + optimizer.variables}


def _traced_steps(model, x, y, batch_size=4):
    """Keras' train step without `fit`'s machinery: one trace of the loss,
    its (loss-scaled) gradients (the embedding's sparse) and the compiled
    optimizer's `apply`, run on each batch in order."""
    import tensorflow as tf

    optimizer = model.optimizer

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x, y, model(x, training=True))
            scaled = optimizer.scale_loss(loss)
        optimizer.apply(tape.gradient(scaled, model.trainable_variables),
                        model.trainable_variables)

    for start in range(0, len(x), batch_size):
        step(x[start:start + batch_size], y[start:start + batch_size])


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_shared_terms_adamw_updates_as_keras_adamw(policy, tmp_path):
    """Six traced steps (a warm-up and a decay that change the rate every
    step), then one eager `apply`: the same
    weights and optimizer state, bit for bit, under the same variable
    paths, and a checkpoint of one loads into the other. Mixed float16:
    the policy of a run on a GPU (the loss-scaled optimizer wraps it).
    The trace cost it saves (measured A/B, an optimizer update of the
    tiny BERT's 23 variables traced 8 times each, interleaved, on the
    loaded 2-core machine, 2026-11-28): median 1.10 -> 0.84 CPU-s."""
    from tfdptext.training import devices
    from tfdptext.training.optimizer import SharedTermsAdamW

    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, (24, 3)).astype("int32")
    y = rng.integers(0, 2, 24)
    results = {}
    with devices.precision_policy(None if policy == "float32" else policy):
        for cls in (keras.optimizers.AdamW, SharedTermsAdamW):
            model = _adamw_pair_model(7, cls)
            optimizer = model.optimizer
            _traced_steps(model, x, y)
            inner = getattr(optimizer, "inner_optimizer", optimizer)
            assert isinstance(inner, cls)
            grads = [np.full(v.shape, 0.5, "float32")
                     for v in model.trainable_variables]
            optimizer.apply(grads, model.trainable_variables)
            # Paths with the optimizer's own name as Keras numbers it
            # ("adam_w", "adam_w_1", ...: the same for both classes).
            assert re.fullmatch(r"adam_w(_\d+)?", inner.name), inner.name
            results[cls] = _paths_and_values(model)
            model.save_weights(str(tmp_path / f"{cls.__name__}.weights.h5"))
        # Each optimizer's checkpoint loads into a model compiled with
        # the other (the trainer's resume: `load_weights` with the
        # optimizer's state).
        loaded = {}
        for source, cls in (("AdamW", SharedTermsAdamW),
                            ("SharedTermsAdamW", keras.optimizers.AdamW)):
            model = _adamw_pair_model(8, cls)
            model.optimizer.build(model.trainable_variables)
            model.load_weights(str(tmp_path / f"{source}.weights.h5"))
            loaded[source] = _paths_and_values(model)
            # In the saved order (an optimizer built before `fit` names
            # its slots under the loss scale's scope: Keras' own way).
            for value, saved in zip(loaded[source].values(),
                                    results[keras.optimizers.AdamW].values(),
                                    strict=True):
                np.testing.assert_array_equal(value, saved)
        assert list(loaded["AdamW"]) == list(loaded["SharedTermsAdamW"])
    stock, shared = results.values()
    assert list(stock) == list(shared)
    assert int(stock["ADAMW/iteration"]) == 7
    for path in stock:
        np.testing.assert_array_equal(shared[path], stock[path], path)
