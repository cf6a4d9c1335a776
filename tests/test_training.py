"""Training modes on a tiny backbone and the synthetic corpus (CPU, fast)."""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from tfdptext import data
from tfdptext import training
from tfdptext.layers import base as layers_base
from tfdptext.training import trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory, tiny_backbone):
    """A local keras-hub preset directory: tiny BERT + MiniLM vocabulary."""
    from tfdptext import models

    path = str(tmp_path_factory.mktemp("preset") / "tiny")
    tiny_backbone.save_to_preset(path)
    shutil.copy(os.path.join(models.minilm_directory(), "vocab.txt"), path)
    return path


@pytest.fixture(scope="module")
def corpus():
    return data.load_synthetic(num_examples=320)


def _config(preset, **kwargs):
    defaults = dict(preset=preset, max_length=16, batch_size=32, epochs=3,
                    learning_rate=3e-3)
    defaults.update(kwargs)
    return training.TrainConfig(**defaults)


@pytest.mark.parametrize("mode,params", [
    ("none", {}),
    ("robust", {"epsilon": 5.0, "dropout_rate": 0.1}),
    # Only the classifier trains on a frozen random encoder: a faster rate
    # and more epochs make the decrease reliable.
    ("seq_rep", {"eta": 200.0, "learning_rate": 3e-2, "epochs": 5}),
    ("token_rep", {"eta": 500.0}),
    ("text_to_text", {"eta": 1000.0}),
])
def test_each_mode_trains_and_loss_decreases(tiny_preset, corpus, tmp_path,
                                             mode, params):
    config = _config(tiny_preset, mode=mode, **params)
    metrics = training.train(config, str(tmp_path / mode), dataset=corpus,
                             verbose=0)
    loss = metrics["history"]["loss"]
    assert loss[-1] < loss[0], loss
    for name in ("user_side.keras", "server_side.keras", "split.json",
                 "metrics.json", "config.json", "best.weights.h5"):
        assert os.path.exists(tmp_path / mode / name), name
    saved = json.loads((tmp_path / mode / "metrics.json").read_text())
    for key in ("mode", "mechanism", "guarantee", "dataset", "sizes",
                "dev_accuracy", "test_accuracy", "epochs",
                "train_examples_per_second", "wall_time_seconds",
                "versions"):
        assert key in saved, key
    assert saved["versions"]["tfdptext"]
    assert (saved["guarantee"]["unit"] == "none") == (mode == "none")


def test_user_side_noise_on_at_inference_after_loading(tiny_preset, corpus,
                                                       tmp_path):
    config = _config(tiny_preset, mode="robust", epsilon=1.0, epochs=1)
    training.train(config, str(tmp_path / "r"), dataset=corpus, verbose=0)
    from tensorflow.python.eager import context

    assert context.global_seed() is None  # --seed never seeds the noise
    user = keras.models.load_model(str(tmp_path / "r" / "user_side.keras"))
    assert any(isinstance(l, layers_base.PrivatizationLayer)
               for l in user._flatten_layers())
    from tfdptext import models

    features = models.load_tokenizer(tiny_preset, 16)(["good service"] * 2)
    a = user.predict(features, verbose=0)
    b = user.predict(features, verbose=0)
    assert not np.array_equal(a, b) and not np.array_equal(a[0], a[1])


def test_frozen_user_side_does_not_change(tiny_preset, corpus):
    from tfdptext import models

    config = _config(tiny_preset, mode="token_rep", eta=50.0).validate()
    tokenizer = models.load_tokenizer(tiny_preset, 16)
    backbone = models.load_backbone(tiny_preset)
    split = training.build_split(config, backbone, tokenizer, 2)
    before = [w.numpy().copy() for w in split.user.weights]
    assert before and not split.user.trainable_weights
    split.model.compile(keras.optimizers.Adam(1e-2),
                        keras.losses.SparseCategoricalCrossentropy(True))
    batches = tokenizer.encode_dataset(corpus.tf_dataset("train"), 32).map(
        lambda f, y, p: (f, y))
    server_before = [w.numpy().copy() for w in split.server.trainable_weights]
    split.model.fit(batches, epochs=1, verbose=0)
    for old, new in zip(before, split.user.weights):
        np.testing.assert_array_equal(old, new.numpy())
    assert any(not np.array_equal(o, n.numpy()) for o, n in
               zip(server_before, split.server.trainable_weights))


class _Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
            raise KeyboardInterrupt("simulated kill")


def test_resume_after_interrupt(tiny_preset, corpus, tmp_path):
    config = _config(tiny_preset, mode="none", epochs=3)
    out = str(tmp_path / "resume")
    with pytest.raises(KeyboardInterrupt):
        training.train(config, out, dataset=corpus, verbose=0,
                       extra_callbacks=[_Interrupt()])
    assert os.path.isdir(os.path.join(out, "backup"))
    first_best = trainer.read_best(os.path.join(out, trainer.BEST_RECORD))
    assert first_best is not None
    metrics = training.train(_config(tiny_preset, mode="none", epochs=3),
                             out, dataset=corpus, verbose=0)
    assert metrics["epochs_run_this_session"] == 2  # epoch 1 was kept
    best = trainer.read_best(os.path.join(out, trainer.BEST_RECORD))
    assert best == pytest.approx(
        min([first_best] + metrics["history"]["val_loss"]))


def test_different_run_in_same_dir_refused(tiny_preset, corpus, tmp_path):
    out = str(tmp_path / "run")
    training.train(_config(tiny_preset, mode="none", epochs=1), out,
                   dataset=corpus, verbose=0)
    with pytest.raises(training.RunDirectoryError, match="mode"):
        training.train(_config(tiny_preset, mode="robust", epsilon=1.0),
                       out, dataset=corpus, verbose=0)
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


def test_adv_mode_trains_resumes_and_saves_plain_split(tiny_preset, corpus,
                                                        tmp_path):
    out = str(tmp_path / "adv")
    config = _config(tiny_preset, mode="adv", adv_lambda=1.0, epochs=2)
    with pytest.raises(KeyboardInterrupt):
        training.train(config, out, dataset=corpus, verbose=0,
                       extra_callbacks=[_Interrupt()])
    record = json.loads(open(os.path.join(out, trainer.BEST_RECORD)).read())
    assert record["monitor"] == "val_label_loss"  # the main task's dev loss
    metrics = training.train(
        _config(tiny_preset, mode="adv", adv_lambda=1.0, epochs=2), out,
        dataset=corpus, verbose=0)
    assert metrics["epochs_run_this_session"] == 1  # epoch 0 was kept
    history = metrics["history"]
    for key in ("loss", "label_loss", "adv_age_loss", "adv_gender_loss",
                "val_label_loss", "val_adv_gender_loss"):
        assert key in history and np.all(np.isfinite(history[key])), key
    for name in ("user_side.keras", "server_side.keras", "split.json",
                 "metrics.json", "config.json", "best.weights.h5"):
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
    names = {l.name for m in (user, server) for l in m._flatten_layers()}
    assert not any(n.startswith("adv_") or "reversal" in n for n in names)
    from tfdptext import models

    features = models.load_tokenizer(tiny_preset, 16)(["good service"] * 2)
    representation = user.predict(features, verbose=0)
    np.testing.assert_array_equal(representation,
                                  user.predict(features, verbose=0))
    assert server.predict(representation, verbose=0).shape == (2, 2)


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
