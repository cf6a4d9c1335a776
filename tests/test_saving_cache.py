"""saving_cache: Keras' saving and loading reuse each type's attribute skip
set (the cache Keras reads but never fills), and write and read the same
files as without it."""

import hashlib

import keras
import numpy as np
import pytest
from keras.src.saving import saving_lib

from tfdptext.training import saving_cache


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
    x = np.arange(32, dtype="float32").reshape(8, 4) / 32.0
    model.fit(x, np.ones((8, 2)), verbose=0)
    return model


def test_cached_saves_and_loads_build_no_reference_object(fitted, tmp_path,
                                                           monkeypatch):
    plain = str(tmp_path / "plain.weights.h5")
    counter = _ReferenceObjects(monkeypatch)
    fitted.save_weights(plain)
    # The Keras bug the module works around: every visited layer builds
    # one (if a Keras release fills its cache, this fails and the module
    # can go).
    assert counter.count > 2
    fresh = {t: saving_lib.get_attr_skipset(t)
             for t in saving_cache.OBJECT_TYPES}
    assert saving_cache.cache_skipsets() == len(saving_cache.OBJECT_TYPES)
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
