"""RunDir's weight files: the best checkpoint and the backup of one epoch
are written once and copied, and a copy is never stale."""

import hashlib
import os

import keras
import numpy as np
import pytest

from tfdptext import rundir


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def fitted():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss="mse")
    x = np.arange(32, dtype="float32").reshape(8, 4) / 32.0
    model.fit(x, np.ones((8, 3)), verbose=0)
    return model, x


class _Counting:
    """Counts model.save_weights calls."""

    def __init__(self, model, monkeypatch):
        self.calls = 0
        save = model.save_weights

        def counted(*args, **kwargs):
            self.calls += 1
            return save(*args, **kwargs)

        monkeypatch.setattr(model, "save_weights", counted)


def test_best_and_backup_of_one_state_serialise_once(fitted, tmp_path,
                                                      monkeypatch):
    model, x = fitted
    reference = str(tmp_path / "reference.weights.h5")
    model.save_weights(reference)
    count = _Counting(model, monkeypatch)
    run = rundir.RunDir(str(tmp_path / "run"))
    os.makedirs(run.path)
    run.save_best(model, {"val_loss": 1.0, "monitor": "val_loss",
                          "epoch": 0})
    run.save_backup(model, 1)
    backup = run.read_backup()[1]
    assert count.calls == 1
    assert _sha(backup) == _sha(run.file(rundir.BEST_WEIGHTS)) == \
        _sha(reference)
    assert not [n for n in os.listdir(run.path)
                if n.startswith(rundir.TEMPORARY_PREFIX)]

    # One more step changes the state: the next file is serialised again
    # and holds the new state, not a copy of the old one.
    model.fit(x, np.zeros((8, 3)), verbose=0)
    run.save_backup(model, 2)
    assert count.calls == 2
    assert _sha(run.read_backup()[1]) != _sha(reference)
    restored = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    restored.compile(optimizer="adam", loss="mse")
    restored.optimizer.build(restored.trainable_variables)
    restored.load_weights(run.read_backup()[1])
    np.testing.assert_array_equal(restored.predict(x, verbose=0),
                                  model.predict(x, verbose=0))


def test_a_changed_file_is_not_copied(fitted, tmp_path, monkeypatch):
    model, _ = fitted
    run = rundir.RunDir(str(tmp_path / "run"))
    os.makedirs(run.path)
    run.save_best(model, {"val_loss": 1.0, "monitor": "val_loss",
                          "epoch": 0})
    with open(run.file(rundir.BEST_WEIGHTS), "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.write(b"tampered")
    count = _Counting(model, monkeypatch)
    run.save_backup(model, 1)
    assert count.calls == 1
    assert not _sha(run.read_backup()[1]) == \
        _sha(run.file(rundir.BEST_WEIGHTS))


def test_state_digest_sees_optimizer_and_weights(fitted):
    model, x = fitted
    before = rundir.state_digest(model)
    assert rundir.state_digest(model) == before
    model.optimizer.iterations.assign_add(1)
    after_step = rundir.state_digest(model)
    assert after_step != before
    kernel = model.layers[0].kernel
    kernel.assign(kernel.numpy() + np.float32(1e-7))
    assert rundir.state_digest(model) != after_step
