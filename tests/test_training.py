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
    ("seq_rep", {"eta": 200.0}),
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
