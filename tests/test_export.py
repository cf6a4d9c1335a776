"""Export: TFLite user model + SavedModel server, checks and round trip."""

import contextlib
import functools
import json
import os
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from tfdptext import data
from tfdptext import errors
from tfdptext import rundir
from tfdptext import runfiles
from tfdptext import serving
from tfdptext import training
from tfdptext.export import exporter
from tfdptext.export import tflite
from tfdptext.export.local import ExportedPipeline
from tfdptext.privacy import extraction
import eager_training
import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The runs a test trains for its own export: what they release is asserted,
# not how well they learned (one training batch, half a dev batch).
SMALL_RUN = dict(epochs=1, max_train_examples=32, max_dev_examples=16)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_preset):
    """Two tiny trained runs: non-private (parity, and int8 labels that
    agree with Keras', which wants a run that learned) and robust (noise,
    whose tests assert what it releases, not how well it learned). The
    robust run, of one step, trains eagerly (tests/eager_training.py); the
    non-private run's 20 steps and 4 validation steps cost less with fit's
    traced graph, as the product runs it (6.5 against 11.2 CPU-s, one
    process on the shared 2-core machine)."""
    base = tmp_path_factory.mktemp("export")
    preset = tiny_preset
    corpus = data.load_synthetic(num_examples=400)
    out = {}
    for mode, kwargs, eager in (
            ("none", {"epochs": 2}, False),
            ("robust", {"epsilon": 2.0, **SMALL_RUN}, True)):
        config = training.TrainConfig(mode=mode, preset=preset, max_length=16,
                                      batch_size=32, learning_rate=3e-3,
                                      **kwargs)
        out[mode] = str(base / mode)
        with (eager_training.eager_fit() if eager
              else contextlib.nullcontext()):
            training.train(config, out[mode], dataset=corpus, verbose=0)
    out["base"] = base
    out["corpus"] = corpus
    return out


# The exports the module's tests share, each made once (`exported`): the
# non-private run in float32 at lengths 4, 8 and 16 (its max_length) with
# the string-in model too, and the robust run in float32 with the app's
# random words (the default) and with the model's own noise. Only int8
# tests export in int8.
NONE_F32 = dict(quantization="float32", tokenizer_in_graph=True,
                lengths=[8, 4])
ROBUST_INPUT = dict(quantization="float32")
ROBUST_INTERNAL = dict(quantization="float32", noise_source="internal")


@pytest.fixture(scope="module")
def exported(runs):
    """export(run, **options): (directory, manifest) of runs[run] exported
    with `options`, made once per module for each run and options."""
    done = {}

    def export(run, **options):
        key = (run, repr(sorted(options.items())))
        if key not in done:
            out = str(runs["base"] / f"exp_{run}_{len(done)}")
            done[key] = out, exporter.export_run(runs[run], out, **options)
        return done[key]

    return export


@functools.cache
def _reference_models(run_dir):
    """(tokenizer, user side, server side) of a run, loaded once per
    process (each test's reference then reuses their traced predict)."""
    import keras

    from tfdptext import models

    config = json.load(open(os.path.join(run_dir, "config.json")))
    return (models.load_tokenizer(config["preset"], config["max_length"]),
            keras.models.load_model(os.path.join(run_dir,
                                                 "user_side.keras")),
            keras.models.load_model(os.path.join(run_dir,
                                                 "server_side.keras")))


def _keras_reference(run_dir, texts):
    tokenizer, user, server = _reference_models(run_dir)
    released = user.predict(tokenizer(texts), verbose=0)
    return (released["private_representation"],
            server.predict(released, verbose=0).argmax(axis=1))


def _cosine(a, b):
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1)
                              * np.linalg.norm(b, axis=-1))


def test_float32_parity_with_keras(runs, exported):
    out, _ = exported("none", **NONE_F32)
    texts = runs["corpus"].splits["dev"].texts
    pipeline = ExportedPipeline(out)
    released = pipeline.privatize(texts)["private_representation"]
    reference, labels = _keras_reference(runs["none"], texts)
    assert _cosine(released, reference).min() >= 0.9999
    np.testing.assert_array_equal(pipeline.serve(
        {"private_representation": released})["label"], labels)


def test_int8_labels_agree(runs, exported):
    out, manifest = exported("none")
    assert manifest["user"]["quantization"] == "int8"
    # Every split's texts (400): at 99%, the dev split's 40 alone would
    # fail on one text near the decision boundary.
    texts = [t for split in ("train", "dev", "test")
             for t in runs["corpus"].splits[split].texts]
    labels = ExportedPipeline(out).predict(texts)["label"]
    _, reference = _keras_reference(runs["none"], texts)
    assert (labels == reference).mean() >= 0.99


def test_robust_export_builtins_unseeded_fresh_noise(exported):
    out, manifest = exported("robust", **ROBUST_INTERNAL)
    path = os.path.join(out, "user", "privatizer.tflite")
    ops = tflite.check_unseeded_builtins(open(path, "rb").read())
    assert any(op.name == "RANDOM_UNIFORM" for op in ops)
    assert manifest["guarantee"]["unit"] == "per_coordinate"
    feed = {"token_ids": np.array([[101, 2307, 2326, 102] + [0] * 12],
                                  np.int32),
            "padding_mask": np.array([[1] * 4 + [0] * 12], np.int32)}
    outputs = []
    for _ in range(2):  # two interpreters, plain (no Flex delegate)
        runner = Interpreter(model_path=path).get_signature_runner()
        outputs.append(runner(**feed)["private_representation"])
    assert not np.array_equal(outputs[0], outputs[1])
    for name, info in manifest["files"].items():
        assert os.path.getsize(os.path.join(out, name)) == info["bytes"]
    assert manifest["files"][rundir.PHONE_MODEL]["sha256"] == \
        runfiles.sha256_file(path)


def test_server_signature_names_and_shape_check(exported):
    out, manifest = exported("robust", **ROBUST_INPUT)
    loaded = tf.saved_model.load(os.path.join(out,
                                              manifest["server"]["path"]))
    signature = loaded.signatures["serving_default"]
    _, inputs = signature.structured_input_signature
    assert list(inputs) == ["private_representation"]
    assert inputs["private_representation"].shape.as_list() == [None, 16]
    assert inputs["private_representation"].dtype == tf.float32
    outputs = signature.structured_outputs
    assert set(outputs) == {"probabilities", "label", "label_name"}
    assert outputs["label"].dtype == tf.int32
    result = signature(private_representation=tf.zeros((3, 16)))
    assert result["probabilities"].shape == (3, 2)
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
        signature(private_representation=tf.zeros((3, 15)))


def test_bad_inputs_write_nothing(runs, exported, tmp_path, monkeypatch):
    existing = tmp_path / "exists"
    existing.mkdir()
    with pytest.raises(exporter.ExportError, match="exists"):
        exporter.export_run(runs["none"], str(existing))
    with pytest.raises(exporter.ExportError,
                       match="not a finished tfdptext run"):
        exporter.export_run(str(tmp_path), str(tmp_path / "a"))
    old = tmp_path / "old_run"
    shutil.copytree(runs["none"], old)
    metrics = json.load(open(old / "metrics.json"))
    metrics["versions"]["tfdptext"] = "0.0.1"
    json.dump(metrics, open(old / "metrics.json", "w"))
    with pytest.raises(exporter.ExportError, match="0.0.1"):
        exporter.export_run(str(old), str(tmp_path / "b"))
    for name in ("../../escape", "a/b", ".hidden", "bad name"):
        with pytest.raises(exporter.ExportError, match="model_name"):
            exporter.export_run(runs["none"], str(tmp_path / "d"),
                                model_name=name)

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    # A failure after the phone model, tokenizer and vocabulary are
    # written (the phone model is the shared export's bytes: converting
    # it again would test the converter, not the clean-up).
    single, _ = exported("none", **NONE_F32)
    phone = open(os.path.join(single, rundir.PHONE_MODEL), "rb").read()
    monkeypatch.setattr(exporter.tflite, "convert_signatures",
                        lambda *args, **kwargs: phone)
    monkeypatch.setattr(exporter, "_write_server", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        exporter.export_run(runs["none"], str(tmp_path / "c"),
                            quantization="float32")
    assert sorted(os.listdir(tmp_path)) == ["exists", "old_run"]


def test_serving_requests_round_trip():
    release = {"private_representation": np.ones((2, 4), np.float32)}
    body = serving.rest_request(release)
    assert body["signature_name"] == "serving_default"
    assert body["inputs"]["private_representation"] == [[1.0] * 4] * 2
    assert serving.rest_url("localhost", "ag", 3) == \
        "http://localhost:8501/v1/models/ag/versions/3:predict"
    parsed = serving.parse_rest_response(json.dumps(
        {"outputs": {"label": [1, 0], "probabilities": [[.2, .8], [.9, .1]]}}))
    np.testing.assert_array_equal(parsed["label"], [1, 0])
    request = serving.grpc_request(release, "ag", version=3)
    assert request.model_spec.name == "ag"
    assert request.model_spec.version.value == 3
    assert tf.make_ndarray(
        request.inputs["private_representation"]).shape == (2, 4)
    from tensorflow_serving.apis import predict_pb2

    response = predict_pb2.PredictResponse()
    response.outputs["label"].CopyFrom(tf.make_tensor_proto(
        np.array([1, 0], np.int32)))
    np.testing.assert_array_equal(
        serving.parse_grpc_response(response)["label"], [1, 0])
    with pytest.raises(ValueError, match="NaN"):
        serving.rest_request({"x": np.array([np.nan])})
    with pytest.raises(RuntimeError, match="TF Serving error"):
        serving.parse_rest_response({"error": "bad shape"})


def test_predict_program(exported):
    out, _ = exported("robust", **ROBUST_INPUT)
    result = zygote.run(
        [sys.executable, os.path.join(ROOT, "export", "tfdptext-predict"),
         f"--export_dir={out}", "the staff was friendly"],
        capture_output=True, text=True, timeout=300, check=True)
    assert "label" in result.stdout and "per coordinate" in result.stdout


FEED = {"token_ids": np.array([[101, 2307, 2326, 102] + [0] * 12], np.int32),
        "padding_mask": np.array([[1] * 4 + [0] * 12], np.int32)}


@functools.cache
def _clean_release(run_dir):
    """The run's user side with its noise off, on FEED (computed once per
    process for each run)."""
    import keras

    from tfdptext.models import secure

    user = keras.models.load_model(os.path.join(run_dir, "user_side.keras"))
    for layer in secure.find_layers(user):
        if layer is not None:
            layer.noise = False
    clean = np.asarray(user({**FEED, "segment_ids": np.zeros_like(
        FEED["token_ids"])})["private_representation"])
    clean.setflags(write=False)
    return clean


def test_a_replaced_or_escaping_file_is_refused(exported, tmp_path):
    from tfdptext.export.local import ExportDirError

    out, _ = exported("robust", **ROBUST_INPUT)
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    path = copy / "user" / "privatizer.tflite"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size, other content
    path.write_bytes(bytes(data))
    with pytest.raises(ExportDirError, match="SHA-256"):
        ExportedPipeline(str(copy))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["server"]["path"] = "../../elsewhere"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ExportDirError, match="outside"):
        ExportedPipeline(str(copy))


def test_default_export_takes_random_words_and_adds_laplace(runs,
                                                           exported):
    from scipy import stats

    from tfdptext.models import secure

    out, manifest = exported("robust", **ROBUST_INPUT)
    assert manifest["user"]["noise_source"] == "input"
    # 4 words per coordinate (64 for 16 dims), each mixed from g = 2
    # words: the checks' minimum of 128.
    assert manifest["user"]["inputs"]["random_words"] == [
        1, secure.MIN_RANDOM_WORDS, "int32"]
    assert manifest["user"]["randomness"]["bytes"] == \
        4 * secure.MIN_RANDOM_WORDS
    assert manifest["guarantee"]["randomness"] == "app_secure_rng"
    assert "secure generator" in manifest["guarantee_text"]
    path = os.path.join(out, "user", "privatizer.tflite")
    ops = tflite.check_unseeded_builtins(open(path, "rb").read())
    assert not any(op.name.startswith("RANDOM") for op in ops)
    runner = Interpreter(model_path=path).get_signature_runner()
    width = secure.MIN_RANDOM_WORDS
    words = secure.os_random_words([1, width])
    a = runner(**FEED, random_words=words)["private_representation"]
    b = runner(**FEED, random_words=words)["private_representation"]
    np.testing.assert_array_equal(a, b)  # the noise is a function of words
    clean = _clean_release(runs["robust"])
    samples = np.concatenate([
        runner(**FEED, random_words=secure.os_random_words([1, width]))
        ["private_representation"] - clean for _ in range(400)])
    # epsilon 2 per coordinate: Lap(0.5).
    assert stats.kstest(samples.ravel(), stats.laplace(scale=0.5).cdf
                        ).pvalue > 1e-4
    labels = ExportedPipeline(out).predict(["the staff was friendly"])
    assert labels["label"].shape == (1,)


def _bad_words(rng, width):
    """Random-word buffers an app gets wrong, each must fail closed."""
    good = rng.integers(-2**31, 2**31, size=(1, width), dtype=np.int64
                        ).astype(np.int32)
    half = good.copy()
    half[:, width // 2:] = half[:, :width // 2]
    pairs = good.copy()
    pairs[:, 1::2] = pairs[:, 0::2]  # each Laplace pair from one number
    low_bytes = (good & 0xFF).astype(np.int32)  # only bytes written
    needed_only = good.copy()
    needed_only[:, 32:] = 0  # only the words the noise reads are filled
    return {"zeros": np.zeros((1, width), np.int32),
            "constant": np.full((1, width), 123456789, np.int32),
            "minus_one": np.full((1, width), -1, np.int32),
            "half_repeated": half, "pair_reused": pairs,
            "low_bytes_only": low_bytes, "needed_words_only": needed_only}


def test_bad_random_words_fail_closed_on_phone_and_server(exported):
    out, _ = exported("robust", **ROBUST_INPUT)
    runner = Interpreter(model_path=os.path.join(
        out, "user", "privatizer.tflite")).get_signature_runner()
    pipeline = ExportedPipeline(out)
    width = pipeline.models[-1].random_words
    for name, words in _bad_words(np.random.default_rng(0), width).items():
        released = runner(**FEED, random_words=words)
        assert np.isnan(released["private_representation"]).all(), name
        assert int(released["input_status"][0]) == 0  # the words failed
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"refused release \(a vector\)"):
            pipeline.serve({"private_representation":
                            released["private_representation"]})


def _options(options):
    """A flatbuffer object's fields as plain values (arrays as lists)."""
    if options is None:
        return None
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v)
            for k, v in vars(options).items()}


def test_int4_rewrite_changes_only_the_weights(exported):
    """The float32 DPNR export rewritten with 4-bit weights (every
    FULLY_CONNECTED weight and GATHER table here, min_elements=1): every
    operator is the float32 model's with the same options, outputs and
    inputs but for the weight, whose INT4 values and per-row scales are
    `quantize_rows` of the float32 weight; every other tensor and buffer is
    byte for byte the float32 model's, so the ops after the encoder (the
    min-max, the noise from the words, the words' checks) are unchanged;
    and run, the two models' releases differ by the same vector whatever
    the words (the noise is the same function of them), and bad words are
    refused."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    from tfdptext.export import int4
    from tfdptext.models import secure

    out, _ = exported("robust", **ROBUST_INPUT)
    path = os.path.join(out, "user", "privatizer.tflite")
    f32 = open(path, "rb").read()
    q_bytes, record = int4.rewrite(f32, min_elements=1)
    assert record["fully_connected"] >= 4 and record["gather"] >= 1
    tflite.check_unseeded_builtins(q_bytes)
    a, b = (flatbuffer_utils.convert_bytearray_to_object(bytearray(x))
            for x in (f32, q_bytes))
    names = {v: k for k, v in vars(schema.BuiltinOperator).items()}

    def name(model, op):
        code = model.operatorCodes[op.opcodeIndex]
        return names[max(code.builtinCode, code.deprecatedBuiltinCode)]

    def data(model, tensor):
        raw = model.buffers[tensor.buffer].data
        return None if raw is None else bytes(raw)

    rewritten = 0
    for ga, gb in zip(a.subgraphs, b.subgraphs, strict=True):
        old = len(ga.tensors)
        made = {op.outputs[0]: op for op in gb.operators
                if op.outputs[0] >= old}  # the DEQUANTIZE ops added
        assert {name(b, op) for op in made.values()} == {"DEQUANTIZE"}
        kept = [op for op in gb.operators if op.outputs[0] < old]
        for x, y in zip(ga.operators, kept, strict=True):
            assert name(a, x) == name(b, y)
            assert list(x.outputs) == list(y.outputs)
            assert _options(x.builtinOptions) == _options(y.builtinOptions)
            for slot, (i, j) in enumerate(zip(x.inputs, y.inputs,
                                              strict=True)):
                if i == j:
                    continue
                assert (name(a, x), slot) in {("FULLY_CONNECTED", 1),
                                              ("GATHER", 0)}
                if j in made:  # GATHER reads DEQUANTIZE(INT4 table)
                    [j] = made[j].inputs
                weight, q = ga.tensors[i], gb.tensors[j]
                assert q.type == schema.TensorType.INT4
                values = np.frombuffer(data(a, weight), "<f4").reshape(
                    list(weight.shape))
                levels, scale = int4.quantize_rows(values)
                np.testing.assert_array_equal(
                    np.array(q.quantization.scale, np.float32), scale)
                assert list(q.quantization.zeroPoint) == [0] * len(scale)
                assert q.quantization.quantizedDimension == 0
                np.testing.assert_array_equal(int4.unpack(
                    np.frombuffer(data(b, q), np.uint8), levels.size),
                    levels.reshape(-1))
                rewritten += 1
        # Every tensor the rewritten graph reads or writes that the float32
        # graph had: same type, shape, quantization and bytes.
        for op in gb.operators:
            for i in [*op.inputs, *op.outputs]:
                if 0 <= i < old:
                    x, y = ga.tensors[i], gb.tensors[i]
                    assert (x.type, list(x.shape), data(a, x)) == \
                        (y.type, list(y.shape), data(b, y))
                    assert _options(x.quantization) == \
                        _options(y.quantization)
        # The privatization (min-max, the noise from the words, the words'
        # checks) is among the ops compared above.
        compared = {name(a, op) for op in ga.operators}
        assert {"REDUCE_MIN", "REDUCE_MAX", "LOG"} <= compared, compared
    assert rewritten > 0
    runners = [Interpreter(model_content=m).get_signature_runner()
               for m in (f32, q_bytes)]
    width = secure.MIN_RANDOM_WORDS
    gaps = []
    for _ in range(3):
        words = secure.os_random_words([1, width])
        f, q = (r(**FEED, random_words=words)["private_representation"]
                for r in runners)
        gaps.append(q - f)
    assert np.abs(gaps[0]).max() > 0  # the weights did change
    for gap in gaps[1:]:
        np.testing.assert_allclose(gap, gaps[0], atol=1e-5)
    for label, words in _bad_words(np.random.default_rng(1), width).items():
        assert np.isnan(runners[1](**FEED, random_words=words)[
            "private_representation"]).all(), label


def test_int4_is_refused_with_the_string_in_model(runs, tmp_path):
    """int4 with the string-in model: an ExportError naming both flags,
    before any work (token-level runs: test_token_level_export_round_trip);
    the sequence and code splits pass the split check."""
    with pytest.raises(exporter.ExportError, match=(
            r"--quantization=int4\) rewrites the token-id phone model only; "
            r"--tokenizer_in_graph needs")):
        exporter.export_run(runs["robust"], str(tmp_path / "x"),
                            quantization="int4", tokenizer_in_graph=True)
    assert not os.listdir(tmp_path)
    options = exporter.ExportOptions("int4")
    for split in exporter.INT4_SPLITS:
        assert options.check_split(split) is options


def test_word_dropout_exports_with_random_words(runs, tmp_path):
    from tfdptext.models import secure

    config = json.load(open(os.path.join(runs["robust"], "config.json")))
    config.update(dropout_rate=0.5)
    dropout_run = str(tmp_path / "dropout_run")
    with eager_training.eager_fit():
        training.train(training.TrainConfig(**{**config, **SMALL_RUN}),
                       dropout_run, dataset=runs["corpus"], verbose=0)
    out = str(tmp_path / "x")
    manifest = exporter.export_run(dropout_run, out, quantization="float32",
                                   lengths=[8])
    # The length-L model reads L words for the dropped positions and 64
    # for the Laplace noise (16 coordinates, 4 each), each mixed from g = 2
    # words (`extraction.layout`): 2 x 80 at max_length 16, 2 x 72 at 8.
    width = extraction.layout(16 + 64).words
    assert (width, extraction.layout(8 + 64).words) == (160, 144)
    assert manifest["user"]["inputs"]["random_words"] == [1, width, "int32"]
    assert [(m["length"], m["inputs"]["random_words"][1],
             m["randomness"]["bytes"]) for m in manifest["user"]["models"]
            ] == [(8, 144, 576), (16, width, 4 * width)]
    assert manifest["user"]["randomness"]["extraction"]["consumed"] == 80
    assert manifest["guarantee"]["unit"] == "per_token_substitution"
    runner = Interpreter(model_path=os.path.join(
        out, "user", "privatizer.tflite")).get_signature_runner(
            "serving_default")
    words = secure.os_random_words([1, width])
    a = runner(**FEED, random_words=words)["private_representation"]
    np.testing.assert_array_equal(
        a, runner(**FEED, random_words=words)["private_representation"])
    # The same noise words with other dropout words: one of the two real
    # tokens is dropped, which one follows the first 16 consumed words.
    used = extraction.extract(words, 80)

    def other_dropout():
        fresh = used.copy()
        fresh[:, :16] = secure.os_random_words([1, 16])
        return extraction.buffer_for(fresh, secure.os_random_words(
            [1, width - 80]))

    outputs = {runner(**FEED, random_words=w)["private_representation"]
               .tobytes() for w in [words] + [other_dropout()
                                              for _ in range(20)]}
    assert len(outputs) >= 2
    pipeline = ExportedPipeline(out)
    assert pipeline.lengths_for(["the staff was friendly"]) == [8]
    assert pipeline.predict(["the staff was friendly"])["label"].shape == (1,)


def test_internal_noise_is_opt_in_and_says_so(exported):
    out, manifest = exported("robust", **ROBUST_INTERNAL)
    assert "random_words" not in manifest["user"]["inputs"]
    assert manifest["guarantee"]["randomness"] == "tflite_internal"
    assert "2^32" in manifest["guarantee_text"]
    ops = tflite.operators(open(os.path.join(
        out, "user", "privatizer.tflite"), "rb").read())
    assert any(op.name == "RANDOM_UNIFORM" for op in ops)


def test_tokenizer_in_graph_matches_ids_model(exported):
    import tensorflow_text as tf_text
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    out, manifest = exported("none", **NONE_F32)
    assert manifest["user"]["text_in"]["custom_ops"]
    text_model = InterpreterWithCustomOps(
        model_path=os.path.join(out, "user", "privatizer_text_in.tflite"),
        custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS)
    runner = text_model.get_signature_runner()
    pipeline = ExportedPipeline(out)
    texts = ("Mary's café in Zürich was excellent.", "the " * 40)
    # The string-in model is the max_length model's: so are the ids'.
    assert pipeline.lengths_for(list(texts)) == [16, 16]
    for text in texts:
        from_text = runner(text=np.array([text]))["private_representation"]
        from_ids = pipeline.privatize([text])["private_representation"]
        np.testing.assert_allclose(from_text, from_ids, rtol=1e-5, atol=1e-6)


def test_exported_internal_noise_matches_laplace(runs, exported):
    from scipy import stats

    out, _ = exported("robust", **ROBUST_INTERNAL)
    runner = Interpreter(model_path=os.path.join(
        out, "user", "privatizer.tflite")).get_signature_runner()
    clean = _clean_release(runs["robust"])
    noise = np.concatenate([runner(**FEED)["private_representation"] - clean
                            for _ in range(400)])
    # epsilon = 2 per coordinate: Lap(0.5), 6,400 draws.
    assert stats.kstest(noise.ravel(), stats.laplace(scale=0.5).cdf
                        ).pvalue > 1e-4


@pytest.mark.parametrize("mode", ["token_rep", "text_to_text"])
def test_token_level_export_round_trip(runs, tmp_path, mode):
    """A token-level run exports with random words at lengths 8 and 16;
    the pipeline sends the release with the padding mask, as the spec
    says, at the shortest fitting length, and the length-polymorphic
    server answers releases of either length (and refuses longer ones)."""
    from tfdptext.models import split_spec

    config = json.load(open(os.path.join(runs["none"], "config.json")))
    config.update(mode=mode, mechanism=None, eta=20.0, **SMALL_RUN)
    run = str(tmp_path / mode)
    with eager_training.eager_fit():
        training.train(training.TrainConfig(**config), run,
                       dataset=runs["corpus"], verbose=0)
    # 4-bit weights would change the rows the privatizer reads: refused.
    with pytest.raises(exporter.ExportError, match=(
            r"--quantization=int4\) is allowed for the split points "
            r"\['sequence_representation', 'code'\] only .* split point is "
            f"'{'token_representation' if mode == 'token_rep' else mode}'")):
        exporter.export_run(run, str(tmp_path / "int4"), quantization="int4")
    out = str(tmp_path / "export")
    manifest = exporter.export_run(run, out, quantization="float32",
                                   lengths=[8])
    spec = split_spec.get(manifest["split_point"])
    dim = None if not spec.feature_axis else 16
    assert list(manifest["server"]["inputs"]) == [
        info.name for info in spec.signature_inputs(16, dim)]
    assert manifest["server"]["inputs"][spec.release][:2] == [None, None]
    assert manifest["server"]["max_length"] == 16
    assert list(manifest["user"]["outputs"]) == [spec.release,
                                                 "input_status"]
    assert "random_words" in manifest["user"]["inputs"]
    words = {m["length"]: m["inputs"]["random_words"][1]
             for m in manifest["user"]["models"]}
    assert words[16] == 2 * words[8]  # d_chi draws per token
    pipeline = ExportedPipeline(out)
    texts = ["the staff was friendly", "terrible delivery"]
    released = pipeline.privatize(texts)
    assert sorted(released) == sorted(manifest["server"]["inputs"])
    assert released[spec.release].dtype.name == spec.release_dtype
    assert released[spec.release].shape[1] == 8  # both fit 8 positions
    answer = pipeline.serve(released)
    assert answer["probabilities"].shape == (2, 2)
    np.testing.assert_allclose(answer["probabilities"].sum(axis=1), 1.0,
                               rtol=1e-5)
    _check_lengths_agree(pipeline, spec)
    _check_server_lengths(pipeline, spec)
    _check_table_that_ships(run, out, manifest, quantized=False)
    if mode == "token_rep":  # the int8 table (BRR's: tests/test_brr.py)
        out8 = str(tmp_path / "export_int8")
        manifest8 = exporter.export_run(run, out8, lengths=[16])
        _check_table_that_ships(run, out8, manifest8, quantized=True)


def _check_table_that_ships(run, out, manifest, quantized):
    """The guarantee is over the table the phone model holds, read back
    out of the .tflite: int8 exports quantize it (the record and the
    guarantee say so, with its SHA-256), and the phone privatizes those
    rows (token_rep: the release moves from the Keras one by exactly the
    rows' change, the noise being the same words' noise)."""
    import keras

    from tfdptext.export import tables
    from tfdptext.models import secure
    from tfdptext.models import split as split_lib

    user = keras.models.load_model(os.path.join(run, "user_side.keras"))
    trained = split_lib.release_embedding_table(user)
    path = os.path.join(out, "user", "privatizer.tflite")
    held = tables.read_table(open(path, "rb").read(), trained.shape)
    record = manifest["user"]["privatizer_table"]
    assert record["sha256_float32"] == held.sha256
    assert manifest["guarantee"]["details"]["table"] == record
    np.testing.assert_array_equal(tables.read_export_table(out), held.values)
    condition = manifest["guarantee"]["conditions"][-1]
    assert held.sha256[:16] in condition
    if not quantized:
        assert held.dtype == "float32" and record["max_abs_change"] == 0.0
        assert "as trained" in condition
        return
    assert held.dtype == "int8" and 0 < record["max_abs_change"] < 0.1
    assert "dequantized" in manifest["guarantee"]["metric"]
    assert "not over the trained table" in condition
    if manifest["split_point"] != "token_representation":
        return
    # The export's shortest phone model (int8: its only one, max_length).
    [length, signature] = [manifest["user"]["models"][0][k]
                           for k in ("length", "signature")]
    ids = np.array([[101, 2307, 2326, 2001, 5379, 102]
                    + [0] * (length - 6)], np.int32)
    mask = (ids != 0).astype(np.int32)
    model = secure.secure_user_model(user, "token_representation", length)
    words = secure.os_random_words(
        [1, int(model.input[secure.RANDOM_WORDS].shape[-1])])
    keras_release = np.asarray(model({"token_ids": ids, "padding_mask": mask,
                                      "random_words": words})
                               ["token_embeddings"])
    runner = Interpreter(model_path=path).get_signature_runner(signature)
    phone = runner(token_ids=ids, padding_mask=mask,
                   random_words=words)["token_embeddings"]
    np.testing.assert_allclose(phone - keras_release,
                               held.values[ids] - trained[ids], atol=2e-4)


def _check_lengths_agree(pipeline, spec):
    """The length-8 model computes what the length-16 model does on the
    first 8 positions, given the same random words per position (the
    words are laid out token after token)."""
    from tfdptext.models import secure

    ids = np.array([[101, 2307, 2326, 2001, 5379, 102] + [0] * 10],
                   np.int32)
    mask = (ids != 0).astype(np.int32)
    short, full = pipeline.model_for(6), pipeline.model_for(16)
    assert (short.length, full.length) == (8, 16)
    # The consumed words of the length-16 model, and the first half of
    # them for the length-8 model, each in a buffer of its own
    # (`extraction.buffer_for`: the partner words are fresh).
    full_used = full.random_words // 2
    used = secure.os_random_words([1, full_used])
    words = extraction.buffer_for(used, secure.os_random_words(
        [1, full.random_words - full_used]))
    short_used = short.random_words // 2
    short_words = extraction.buffer_for(
        used[:, :short_used], secure.os_random_words(
            [1, short.random_words - short_used]))
    a = pipeline.runners[8](token_ids=ids[:, :8], padding_mask=mask[:, :8],
                            random_words=short_words)
    b = pipeline.runners[16](token_ids=ids, padding_mask=mask,
                             random_words=words)
    np.testing.assert_allclose(a[spec.release], b[spec.release][:, :8],
                               rtol=1e-5, atol=1e-5)


def _check_server_lengths(pipeline, spec):
    """Releases of length 8 and 16 are served; a batch of a short text
    padded to a long one's length answers as the short one alone; a
    release longer than max_length, or with a mask of another length, is
    refused."""
    released = pipeline.privatize(["good", "the staff was friendly and the "
                                   "room was clean and quiet all week"])
    assert released[spec.release].shape[1] == 16
    assert pipeline.lengths_for(["good"]) == [8]
    together = pipeline.serve(released)["probabilities"][0]
    alone = pipeline.serve({k: v[:1, :8] for k, v in released.items()})
    np.testing.assert_allclose(alone["probabilities"][0], together,
                               atol=1e-5)
    too_long = {k: np.concatenate([v, v[:, :1] * 0], axis=1)
                for k, v in released.items()}
    mismatched = {**released, "padding_mask":
                  released["padding_mask"][:, :8]}
    for bad in (too_long, mismatched):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="refused release"):
            pipeline.serve(bad)


SHORT_TEXTS = ["good", "the staff was friendly",
               "the staff was friendly and the room was clean and quiet "
               "every single night of the week"]


@pytest.fixture(scope="module")
def lengths_export(exported):
    """runs["none"] exported at lengths 4, 8 (and 16, its max_length)."""
    return exported("none", **NONE_F32)


def test_lengths_are_signatures_of_one_file_in_the_manifest(
        exported, lengths_export):
    out, manifest = lengths_export
    user = manifest["user"]
    assert user["lengths"] == [4, 8, 16]
    assert (user["file"], user["signature"], user["length"]) == (
        rundir.PHONE_MODEL, "serving_default", 16)
    assert [(m["length"], m["file"], m["signature"]) for m in
            user["models"]] == [(4, rundir.PHONE_MODEL, "length_4"),
                                (8, rundir.PHONE_MODEL, "length_8"),
                                (16, rundir.PHONE_MODEL, "serving_default")]
    for model in user["models"]:
        length = model["length"]
        assert model["inputs"]["token_ids"] == [1, length, "int32"]
        assert model["inputs"]["padding_mask"] == [1, length, "int32"]
        assert model["outputs"] == {"private_representation":
                                    [1, 16, "float32"],
                                    "input_status": [1, "int32"]}
        assert "random_words" not in model["inputs"]  # mode none
    path = os.path.join(out, rundir.PHONE_MODEL)
    assert manifest["files"][rundir.PHONE_MODEL] == {
        "bytes": os.path.getsize(path), "sha256": runfiles.sha256_file(path)}
    tflite_bytes = open(path, "rb").read()
    assert sorted(tflite.signature_keys(tflite_bytes)) == [
        "length_4", "length_8", "serving_default"]
    # The weights are stored once: three lengths cost little more than one
    # (the robust run's phone model: the same encoder, float32, at its
    # max_length only).
    single, single_manifest = exported("robust", **ROBUST_INPUT)
    assert single_manifest["user"]["lengths"] == [16]
    assert len(tflite_bytes) < 1.3 * os.path.getsize(
        os.path.join(single, rundir.PHONE_MODEL))


class _Recording:
    """A signature runner that records (its length, the fed length)."""

    def __init__(self, length, runner, calls):
        self.length, self.runner, self.calls = length, runner, calls

    def __call__(self, **feed):
        self.calls.append((self.length, feed["token_ids"].shape[1]))
        return self.runner(**feed)


def test_pipeline_runs_the_shortest_fitting_length(runs, lengths_export):
    out, _ = lengths_export
    pipeline = ExportedPipeline(out)
    assert pipeline.lengths == [4, 8, 16]
    # [CLS] good [SEP]: 3 tokens; 6; more than 16 (truncated).
    assert pipeline.lengths_for(SHORT_TEXTS) == [4, 8, 16]
    assert [pipeline.length_for(n) for n in (1, 3, 4, 5, 8, 9, 16, 17)] == \
        [4, 4, 4, 8, 8, 16, 16, 16]
    ran = []
    for length, runner in list(pipeline.runners.items()):
        pipeline.runners[length] = _Recording(length, runner, ran)
    released = pipeline.privatize(SHORT_TEXTS)["private_representation"]
    assert ran == [(4, 4), (8, 8), (16, 16)]
    reference, labels = _keras_reference(runs["none"], SHORT_TEXTS)
    assert _cosine(released, reference).min() >= 0.9999
    np.testing.assert_array_equal(pipeline.predict(SHORT_TEXTS)["label"],
                                  labels)


def test_short_model_releases_what_the_max_length_model_does(lengths_export):
    """Mode none: a short text's release from each short model equals the
    max_length model's (attention and pooling ignore padded positions)."""
    out, _ = lengths_export
    pipeline = ExportedPipeline(out)
    features = pipeline.tokenizer(["good"])
    ids = features["token_ids"].numpy()
    mask = features["padding_mask"].numpy()
    full = pipeline.runners[16](token_ids=ids, padding_mask=mask)
    for length in (4, 8):
        short = pipeline.runners[length](token_ids=ids[:, :length],
                                         padding_mask=mask[:, :length])
        np.testing.assert_allclose(short["private_representation"],
                                   full["private_representation"],
                                   rtol=1e-5, atol=1e-6)


def test_bad_lengths_are_refused_before_writing(runs, tmp_path):
    from tfdptext.cli import export as export_cli

    for lengths, message in (([2], r"from 3 .* to 16 .*\[2\]"),
                             ([8, 17], r"to 16 \(the run's max_length\)"),
                             ([], "non-empty list of integers"),
                             (["8"], "list of integers"),
                             ([True], "list of integers"),
                             (8, "list of integers")):
        with pytest.raises(exporter.ExportError, match="`lengths`") as err:
            exporter.export_run(runs["none"], str(tmp_path / "x"),
                                lengths=lengths)
        assert err.match(message)
    assert os.listdir(tmp_path) == []
    with pytest.raises(errors.ArgumentError, match="`lengths` must be "
                       "comma-separated integers"):
        export_cli._parse_lengths(["32", "x"])
    assert export_cli._parse_lengths(["64", "32"]) == [64, 32]
    assert exporter.default_lengths(128) == [16, 32, 64, 128]
    assert exporter.default_lengths(100) == [16, 32, 64, 100]
    assert exporter.default_lengths(16) == [16]
    assert exporter.default_lengths(10) == [10]
    assert exporter.resolve_lengths([64, 32, 32], 128) == [32, 64, 128]
    assert exporter.resolve_lengths(np.array([3, 8]), 16) == [3, 8, 16]


def test_damaged_length_models_are_caught(lengths_export, tmp_path):
    from tfdptext.export.local import ExportDirError
    from tfdptext.export.local import check_export_dir

    out, _ = lengths_export
    truncated = tmp_path / "truncated"
    shutil.copytree(out, truncated)
    path = truncated / rundir.PHONE_MODEL
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
    with pytest.raises(ExportDirError, match="bytes, manifest.json says"):
        check_export_dir(str(truncated))
    # A length listed with a file the manifest does not vouch for, one
    # outside the export, and a signature the file lacks.
    for name, change, message in (
            ("unrecorded", {"file": "user/privatizer_4.tflite"},
             "no size and SHA-256"),
            ("outside", {"file": "../privatizer_4.tflite"}, "outside"),
            ("no_signature", {"signature": "length_5"}, "signature")):
        copy = tmp_path / name
        shutil.copytree(out, copy)
        shutil.copy(copy / rundir.PHONE_MODEL,
                    copy / "user" / "privatizer_4.tflite")
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["user"]["models"][0].update(change)
        (copy / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(ExportDirError, match=message):
            ExportedPipeline(str(copy))


def test_private_dim_run_exports_its_projection_with_vector_noise(runs,
                                                                  tmp_path):
    """--private_dim=4 with --sensitivity=vector: the projection is on the
    phone, the release has 4 coordinates, the guarantee is epsilon per
    representation and the exported noise is Laplace(4 / epsilon) (KS)."""
    from scipy import stats

    from tfdptext.models import secure

    config = json.load(open(os.path.join(runs["robust"], "config.json")))
    config.update(private_dim=4, sensitivity="vector", epsilon=8.0,
                  **SMALL_RUN)
    run = str(tmp_path / "projected")
    with eager_training.eager_fit():
        training.train(training.TrainConfig(**config), run,
                       dataset=runs["corpus"], verbose=0)
    metrics = json.load(open(os.path.join(run, rundir.METRICS)))
    assert metrics["parameters"]["private_dim"] == 4
    assert metrics["guarantee"]["unit"] == "per_representation"
    assert metrics["guarantee"]["details"]["noise_scale"] == 0.5
    out = str(tmp_path / "exp")
    manifest = exporter.export_run(run, out, quantization="float32")
    # 4 words per coordinate (16), each mixed from g = 8 words: the
    # checks' minimum of 128.
    assert manifest["user"]["inputs"]["random_words"] == [
        1, secure.MIN_RANDOM_WORDS, "int32"]
    assert manifest["guarantee"]["value"] == 8.0
    runner = Interpreter(model_path=os.path.join(
        out, "user", "privatizer.tflite")).get_signature_runner(
            "serving_default")
    clean = _clean_release(run)
    assert clean.shape == (1, 4)
    samples = np.concatenate([
        runner(**FEED, random_words=secure.os_random_words(
            [1, secure.MIN_RANDOM_WORDS]))
        ["private_representation"] - clean for _ in range(500)])
    assert samples.shape == (500, 4)
    assert stats.kstest(samples.ravel(), stats.laplace(scale=0.5).cdf
                        ).pvalue > 1e-4
    pipeline = ExportedPipeline(out)
    assert pipeline.predict(["the staff was friendly"])["label"].shape == (1,)
