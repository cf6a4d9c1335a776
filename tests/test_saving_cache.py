"""What a run's saves and loads skip: Keras' saving reuses each type's
attribute skip set (saving_cache: the cache Keras reads but never fills)
and writes and reads the same files as without it; the best weights are
not loaded back into a model that holds them (RunDir.holds_best)."""

import hashlib
import os
import shutil

import keras
import numpy as np
import pytest
from keras.src.saving import saving_lib

from tfdptext import rundir
from tfdptext.models import saving_cache


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class _ReferenceObjects:
    """Counts the reference `Layer()`s Keras builds to list what to skip."""

    def __init__(self, monkeypatch):
        self.count = 0
        init = keras.layers.Layer.__init__

        def counted(layer, *args, **kwargs):
            if type(layer) is keras.layers.Layer:
                self.count += 1
            init(layer, *args, **kwargs)

        monkeypatch.setattr(keras.layers.Layer, "__init__", counted)


X = np.arange(32, dtype="float32").reshape(8, 4) / 32.0
Y = np.ones((8, 2), "float32")


@pytest.fixture
def empty_cache():
    """Keras' skip-set cache emptied (as a new session has it) for the
    test, and put back after it."""
    from keras.src.backend.common import global_state

    keys = [saving_cache._key(t) for t in saving_cache.OBJECT_TYPES]
    before = {k: global_state.get_global_attribute(k) for k in keys}
    for key in keys:
        global_state.set_global_attribute(key, None)
    yield
    for key, value in before.items():
        global_state.set_global_attribute(key, value)


@pytest.fixture
def fitted(empty_cache):
    """A compiled, fitted model, the cache empty."""
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                              keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.AdamW(1e-2), loss="mse",
                  metrics=["mae"])
    model.fit(X, Y, verbose=0)
    return model


def test_cached_saves_and_loads_build_no_reference_object(fitted, tmp_path,
                                                           monkeypatch):
    plain = str(tmp_path / "plain.weights.h5")
    counter = _ReferenceObjects(monkeypatch)
    fitted.save_weights(plain)
    built = counter.count
    from keras.src.backend.common import global_state

    fresh = {t: saving_lib.get_attr_skipset(t)
             for t in saving_cache.OBJECT_TYPES}
    keys = [saving_cache._key(t) for t in saving_cache.OBJECT_TYPES]
    missing = sum(global_state.get_global_attribute(k) is None
                  for k in keys)
    # The Keras bug the module works around (Keras 3.15): every visited
    # layer builds one, and the key Keras reads stays empty. (A Keras
    # that fills its cache builds one per type and leaves less to fill.)
    if built > 2:
        assert missing == len(keys)
    assert saving_cache.cache_skipsets() == missing
    assert saving_cache.cache_skipsets() == 0  # already filled
    for obj_type, skipset in fresh.items():
        assert saving_lib.get_attr_skipset(obj_type) == skipset, obj_type
    counter.count = 0
    cached = str(tmp_path / "cached.weights.h5")
    fitted.save_weights(cached)
    fitted.load_weights(plain)
    fitted.save(str(tmp_path / "model.keras"))
    keras.models.load_model(str(tmp_path / "model.keras"))
    assert counter.count == 0
    # The same bytes as without the cache.
    assert _sha(cached) == _sha(plain)


def _state(model):
    return [v.numpy().copy() for v in
            model.variables + model.optimizer.variables]


def test_holds_best_only_while_the_model_holds_the_saved_best(fitted,
                                                               tmp_path):
    run = rundir.RunDir(str(tmp_path / "run"))
    os.makedirs(run.path)
    assert not run.holds_best(fitted)  # nothing saved
    run.save_best(fitted, {"val_loss": 1.0, "monitor": "val_loss",
                           "epoch": 0})
    run.save_backup(fitted, 1)  # the backup of the same epoch
    assert run.holds_best(fitted)
    # What `train` then skips would change nothing.
    before = _state(fitted)
    fitted.load_weights(run.file(rundir.BEST_WEIGHTS))
    for old, new in zip(before, _state(fitted)):
        np.testing.assert_array_equal(old, new)
    fitted.fit(X, Y, verbose=0)  # a later, worse epoch
    assert not run.holds_best(fitted)
    fitted.load_weights(run.file(rundir.BEST_WEIGHTS))
    assert run.holds_best(fitted)
    # A file rewritten since (same bytes, another file) is loaded again.
    path = run.file(rundir.BEST_WEIGHTS)
    shutil.copyfile(path, path + ".new")
    os.replace(path + ".new", path)
    assert not run.holds_best(fitted)
    # A RunDir that did not write it (a resumed session) loads it.
    assert not rundir.RunDir(run.path).holds_best(fitted)
