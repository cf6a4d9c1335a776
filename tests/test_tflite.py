"""Every layer converts to TFLite with builtins only and unseeded noise."""

import contextlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from scipy import stats
from tensorflow.lite.tools import flatbuffer_utils

from tfdptext import export
from tfdptext import layers
from tfdptext.export import tflite

TABLE = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)


def _models():
    x = keras.Input((16,), name="x")
    bits = keras.Input((16,), name="x")
    emb = keras.Input((4, 16), name="x")
    ids = keras.Input((6,), dtype="int32", name="token_ids")
    mask = keras.Input((6,), dtype="int32", name="padding_mask")
    tok = keras.Input((6,), dtype="int32", name="x")
    dropout = layers.WordDropout(0.5, mask_token_id=3, special_token_ids=[1])
    return {
        "laplace": keras.Model(
            x, layers.LaplaceNoise(1.0)(layers.MinMaxNormalize()(x))),
        "dchi": keras.Model(emb, layers.DChiNoise(5.0)(emb)),
        "rr": keras.Model(bits, layers.RandomizedResponse(1.0)(bits)),
        "word_dropout": keras.Model(
            {"token_ids": ids, "padding_mask": mask},
            dropout({"token_ids": ids, "padding_mask": mask})["token_ids"]),
        "text_to_text": keras.Model(tok, layers.DChiTextPrivatizer(
            2.0, TABLE, special_token_ids=[0, 1],
            passthrough_token_ids=[0, 1])(tok)),
    }


@pytest.fixture(scope="module")
def converted():
    """Each of `_models` converted once, and "laplace" also with
    batch_size=1 (as "laplace_batch_1": how tfdptext-export converts the
    phone model)."""
    models = _models()
    out = {name: export.convert(model) for name, model in models.items()}
    out["laplace_batch_1"] = export.convert(models["laplace"], batch_size=1)
    return out


def _runner(tflite_bytes):
    interpreter = Interpreter(model_content=tflite_bytes)
    return interpreter.get_signature_runner()


def _feed(name):
    if name == "word_dropout":
        return {"token_ids": np.array([[1, 5, 6, 7, 8, 0]], np.int32),
                "padding_mask": np.array([[1, 1, 1, 1, 1, 0]], np.int32)}
    if name == "text_to_text":
        return {"x": np.array([[0, 1, 5, 6, 7, 8]], np.int32)}
    if name == "dchi":
        return {"x": np.zeros((1, 4, 16), np.float32)}
    return {"x": np.full((1, 16), 0.7, np.float32)}


@pytest.mark.parametrize("name", ["laplace", "dchi", "rr", "word_dropout",
                                  "text_to_text"])
def test_builtins_only_unseeded_and_runs(converted, name):
    ops = export.check_unseeded_builtins(converted[name])
    random_ops = [op for op in ops if op.name.startswith("RANDOM")]
    assert random_ops, "noise must be sampled inside the model"
    assert all(op.seed == 0 and op.seed2 == 0 for op in random_ops)
    out = _runner(converted[name])(**_feed(name))
    assert all(np.isfinite(v).all() for v in out.values())


def test_text_to_text_keeps_special_tokens(converted):
    out = list(_runner(converted["text_to_text"])(**_feed("text_to_text"))
               .values())[0]
    assert out[0, 0] == 0 and out[0, 1] == 1


def test_two_interpreters_and_invokes_differ(converted):
    feed = _feed("laplace")
    a = list(_runner(converted["laplace"])(**feed).values())[0]
    runner = _runner(converted["laplace"])
    b = list(runner(**feed).values())[0]
    c = list(runner(**feed).values())[0]
    assert not np.array_equal(a, b)
    assert not np.array_equal(b, c)


@pytest.mark.parametrize("name", ["laplace", "laplace_batch_1"])
def test_two_processes_differ(converted, name, tmp_path):
    path = tmp_path / "laplace.tflite"
    path.write_bytes(converted[name])
    code = (
        "import numpy as np, sys\n"
        "from ai_edge_litert.interpreter import Interpreter\n"
        f"r = Interpreter(model_path={str(path)!r}).get_signature_runner()\n"
        "out = list(r(x=np.full((1, 16), 0.7, np.float32)).values())[0]\n"
        "print(','.join(repr(float(v)) for v in out.ravel()))\n")
    outputs = [subprocess.run([sys.executable, "-c", code], check=True,
                              capture_output=True, text=True).stdout
               for _ in range(2)]
    assert outputs[0] and outputs[0] != outputs[1]


def test_fixed_batch_conversion_shape_and_bad_batch_size(converted):
    runner = _runner(converted["laplace_batch_1"])
    assert runner.get_input_details()["x"]["shape_signature"].tolist() == \
        [1, 16]
    with pytest.raises(ValueError, match="batch_size"):
        export.convert(_models()["laplace"], batch_size=0)


def test_tflite_laplace_distribution_matches_layer():
    x = keras.Input((64,), name="x")
    model = keras.Model(x, layers.LaplaceNoise(0.5)(x))
    runner = _runner(export.convert(model))
    feed = np.full((500, 64), 0.5, np.float32)
    noise = list(runner(x=feed).values())[0] - 0.5
    assert stats.kstest(noise.ravel(), stats.laplace(scale=2.0).cdf
                        ).pvalue > 1e-4


def test_tflite_dchi_radius_matches():
    x = keras.Input((16,), name="x")
    runner = _runner(export.convert(keras.Model(x, layers.DChiNoise(4.0)(x))))
    noise = list(runner(x=np.zeros((5000, 16), np.float32)).values())[0]
    radius = np.linalg.norm(noise, axis=1)
    assert stats.kstest(radius, stats.gamma(a=16, scale=0.25).cdf
                        ).pvalue > 1e-4


class _SeededNoise(keras.layers.Layer):
    def call(self, x):
        return x + tf.random.uniform(tf.shape(x), seed=7)


def test_seeded_random_op_is_refused():
    x = keras.Input((4,), name="x")
    tflite_bytes = export.convert(keras.Model(x, _SeededNoise()(x)))
    with pytest.raises(export.ConversionError, match="seeded"):
        export.check_unseeded_builtins(tflite_bytes)


def _length_models(table):
    """Two models, input lengths 4 and 8, sharing one 2000 x 32 table."""
    shared = keras.layers.Embedding(2000, 32, name="shared_table")
    shared.build((None, None))
    shared.embeddings.assign(table)
    models = {}
    for length in (4, 8):
        ids = keras.Input((length,), dtype="int32", name="token_ids")
        models[length] = keras.Model(
            ids, {"mean": keras.ops.mean(shared(ids), axis=1)})
    return models


def test_signatures_share_weights_and_match_keras(monkeypatch):
    table = np.random.default_rng(1).normal(size=(2000, 32)).astype(
        np.float32)
    models = _length_models(table)
    one = export.convert(models[8], batch_size=1)
    by_key = {"length_4": models[4], "serving_default": models[8]}
    traced = []
    endpoint = tflite._endpoint

    def counted(model):
        call = endpoint(model)
        return lambda inputs: traced.append(model) or call(inputs)

    monkeypatch.setattr(tflite, "_endpoint", counted)
    both = export.convert_signatures(by_key, batch_size=1)
    # Each endpoint is traced once (Keras' archive traces it twice).
    assert sorted(m.name for m in traced) == sorted(
        m.name for m in by_key.values())
    monkeypatch.undo()
    # The models are not `track`ed (a walk that traces them again); what
    # is converted is what the tracking archive did.
    assert _without_tensor_names(both) == _without_tensor_names(
        _tracked_conversion(by_key))
    assert sorted(export.signature_keys(both)) == ["length_4",
                                                   "serving_default"]
    # The 256 KB table is stored once, not once per signature.
    assert len(one) > 2000 * 32 * 4 and len(both) < 1.2 * len(one)
    interpreter = Interpreter(model_content=both)
    ids = np.array([[5, 17, 1999, 0, 3, 3, 8, 1]], np.int32)
    for key, length in (("length_4", 4), ("serving_default", 8)):
        out = interpreter.get_signature_runner(key)(
            token_ids=ids[:, :length])["mean"]
        np.testing.assert_allclose(out, table[ids[0, :length]].mean(0)[None],
                                   rtol=1e-5, atol=1e-6)
    export.check_unseeded_builtins(both)
    with pytest.raises(ValueError, match="at least one"):
        export.convert_signatures({})


def _tracked_conversion(models):
    """What `convert_signatures` made when its archive `track`ed the models
    (Keras' route for models holding lookup tables): the reference its
    untracked archive must equal but for tensor names."""
    archive = keras.export.ExportArchive()
    for key, model in models.items():
        archive.track(model)
        archive.add_endpoint(key, tflite._endpoint(model),
                             input_signature=tflite._input_signature(model, 1))
    with tflite._saved_model_dir(None) as saved:
        archive.write_out(saved, verbose=False)
        return tflite._convert_saved_model(saved, list(models),
                                           quantize=False, builtins_only=True,
                                           custom_ops=False)


def _without_tensor_names(tflite_bytes):
    """The .tflite with its tensor names cleared (signatures, operators,
    weights and shapes kept): the names hold Keras' per-process counters
    (".../softmax_5/..." then ".../softmax_6/..."), so two conversions of
    one model differ there, and only there."""
    model = flatbuffer_utils.convert_bytearray_to_object(tflite_bytes)
    for subgraph in model.subgraphs:
        for tensor in subgraph.tensors:
            tensor.name = None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def test_convert_walks_for_lookup_tables_only_when_needed(converted,
                                                          monkeypatch):
    """`convert` leaves the model untracked (no walk for lookup tables) and
    makes what the tracking route (`model.export`'s) makes but for tensor
    names; a model holding a lookup table is converted again with the walk,
    which it needs, or walked only where the caller says the table is; a
    bad `track` is refused."""
    model = _models()["laplace"]
    assert _without_tensor_names(converted["laplace"]) == \
        _without_tensor_names(export.convert(model, track=True))
    routes = []
    convert_archive = tflite._convert_archive

    def spy(models, batch_size, **kwargs):
        routes.append(kwargs["track"])
        return convert_archive(models, batch_size, **kwargs)

    monkeypatch.setattr(tflite, "_convert_archive", spy)
    x = keras.Input((4,), dtype="int64", name="x")
    lookup = keras.Model(x, keras.layers.IntegerLookup(
        vocabulary=[5, 7, 9])(x))
    flat = export.convert(lookup, builtins_only=False)
    assert routes == [False, True]
    assert "FlexLookupTableFindV2" in {op.name
                                       for op in tflite.operators(flat)}
    # Walking only the layer that holds the table (what the exporter does
    # for its string-in model) tracks the table, in one conversion: the
    # same operators (the Flex ops' node definitions hold per-process
    # names, so two conversions in one process differ there; the exporter's
    # string-in .tflite was compared byte for byte, each route in a fresh
    # process).
    [table_layer] = [layer for layer in lookup.layers
                     if isinstance(layer, keras.layers.IntegerLookup)]
    routes.clear()
    walked = export.convert(lookup, builtins_only=False, track=[table_layer])
    assert routes == [[table_layer]]
    assert tflite.operators(walked) == tflite.operators(flat)
    for bad in ("yes", [], [model, "x"]):
        with pytest.raises(ValueError, match="`track` must be"):
            export.convert(model, track=bad)


def test_conversion_collects_only_its_own_garbage():
    """The converter's full collection runs with the objects made before
    the conversion frozen (`_older_objects_frozen`), for the same bytes as
    without; the freeze is undone afterwards, and a process that froze
    objects itself keeps its own freeze."""
    import gc

    # A test process may have frozen its imports: tested unfrozen, frozen
    # again afterwards.
    frozen_before = gc.get_freeze_count()
    gc.unfreeze()
    try:
        _check_converter_freeze()
    finally:
        if frozen_before:
            gc.freeze()


def _check_converter_freeze():
    import gc

    model = _models()["laplace"]
    with tflite._saved_model_dir(None) as saved, \
            pytest.MonkeyPatch.context() as patch:
        tflite._write_traced_once({"serving_default": model}, None, saved)

        def convert():
            return tflite._convert_saved_model(
                saved, ["serving_default"], quantize=False,
                builtins_only=True, custom_ops=False)

        counts = []
        collect = gc.collect
        patch.setattr(gc, "collect", lambda *args: counts.append(
            gc.get_freeze_count()) or collect(*args))
        frozen = convert()
        assert counts and all(count > 0 for count in counts)
        assert gc.get_freeze_count() == 0
        patch.setattr(tflite, "_older_objects_frozen",
                      contextlib.nullcontext)
        counts.clear()
        assert frozen == convert()
        assert counts and all(count == 0 for count in counts)
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with tflite._older_objects_frozen():
            made = [object()]
        assert gc.get_freeze_count() == before and made
    finally:
        gc.unfreeze()
