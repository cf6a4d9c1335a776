"""TFLite's internal noise is a function of one 32-bit number.

Checks the NumPy replay of the chain (`tfdptext.audit.seed_chain`) against
the C++ standard library and the real TFLite kernels bit for bit, and the
seed-recovery attack against a real release of the DPNR privatizer.

The unseeded kernels read `std::random_device`, which a test cannot set
from Python. A child process gets it fixed instead: a tiny C shim, loaded
with LD_PRELOAD, answers libstdc++'s `random_device::_M_getval`. Those
tests skip, saying why, without a C compiler or where the shim is not
called (a TFLite build with libstdc++ linked in statically).
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from tfdptext import export
from tfdptext import layers
from tfdptext.audit import seed_chain
from tfdptext.audit import seed_recovery

_U64 = 2**64
# tf.random ops with an op seed and no global seed get this graph seed.
_TF_DEFAULT_GRAPH_SEED = 87654321


def _runner(tflite_bytes):
    return Interpreter(model_content=tflite_bytes).get_signature_runner()


def _run(runner, x):
    return list(runner(x=x).values())[0]


def _sign_extend_32(value):
    """What the kernel makes of a seed: int32 field -> int64 -> uint64."""
    low = value % 2**32
    return (low - 2**32 if low >= 2**31 else low) % _U64


# --- mt19937_64 -----------------------------------------------------------


def test_mt19937_64_standard_check_value():
    # C++ [rand.predef]: the 10000th output of a default-constructed
    # std::mt19937_64 (seed 5489) is 9981545732273789042.
    assert seed_chain.mt19937_64(5489, 1, skip=9999)[0] == \
        9981545732273789042
    assert seed_chain.mt19937_64(5489, 10000)[-1] == 9981545732273789042


def test_mt19937_64_short_path_equals_full_state():
    seeds = np.array([0, 1, 5489, 2**32 - 1], np.uint64)
    full = seed_chain.mt19937_64(seeds, 700)
    assert np.array_equal(seed_chain.mt19937_64(seeds, 6), full[:, :6])
    assert np.array_equal(seed_chain.mt19937_64(seeds, 4, skip=150),
                          full[:, 150:154])
    assert np.array_equal(seed_chain.mt19937_64(seeds, 90, skip=600),
                          full[:, 600:690])
    assert seed_chain.mt19937_64(int(seeds[2]), 3).tolist() == \
        full[2, :3].tolist()


_CPP_SOURCE = r"""
#include <cstdio>
#include <cstdlib>
#include <random>
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::mt19937_64 gen(std::strtoul(argv[i], nullptr, 10));
    for (int k = 0; k < 6; ++k)
      std::printf("%llu ", (unsigned long long)gen());
    std::printf("\n");
  }
}
"""


def test_mt19937_64_matches_cpp(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the C++ cross-check needs it "
                    "(the standard's check value above still runs).")
    source = tmp_path / "mt.cc"
    source.write_text(_CPP_SOURCE)
    binary = tmp_path / "mt"
    subprocess.run(["g++", "-O1", "-o", str(binary), str(source)],
                   check=True, capture_output=True)
    seeds = [0, 1, 5489, 123456789, 2**31, 2**32 - 1]
    lines = subprocess.run([str(binary)] + [str(s) for s in seeds],
                           check=True, capture_output=True,
                           text=True).stdout.splitlines()
    expected = np.array([[int(w) for w in line.split()] for line in lines],
                        np.uint64)
    assert np.array_equal(seed_chain.mt19937_64(np.array(seeds), 6),
                          expected)


# --- Philox and the float conversions -------------------------------------


def test_philox_known_answers():
    # Random123's published philox4x32_10 known-answer vectors.
    zero = seed_chain.philox_4x32_10(np.zeros(4, np.uint32),
                                     np.zeros(2, np.uint32))
    ones = seed_chain.philox_4x32_10(np.full(4, 2**32 - 1, np.uint32),
                                     np.full(2, 2**32 - 1, np.uint32))
    assert zero.tolist() == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert ones.tolist() == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def test_philox_counter_layout_and_stream_position():
    seed, seed2 = 0x1122334455667788, 0x99AABBCCDDEEFF00
    words = seed_chain.philox_words(seed, seed2, 3)
    counter = [2, 0, 0xDDEEFF00, 0x99AABBCC]   # call 3: low word = 2
    key = [0x55667788, 0x11223344]
    assert seed_chain.philox_4x32_10(np.array(counter, np.uint32),
                                     np.array(key, np.uint32)).tolist() == \
        words[8:12].tolist()
    assert np.array_equal(seed_chain.philox_words(seed, seed2, 1, 2),
                          words[8:])
    # The 64-bit call counter carries into seed2 like the 128-bit counter.
    carried = seed_chain.philox_words(seed, 5, 1, first_block=2**64 + 3)
    assert np.array_equal(carried,
                          seed_chain.philox_words(seed, 6, 1, first_block=3))


def test_uint32_to_float_is_the_mantissa_trick():
    words = np.array([0, 1, 0x7FFFFF, 0x800000, 2**32 - 1], np.uint32)
    got = seed_chain.uint32_to_float(words)
    assert got.dtype == np.float32
    assert got.tolist() == [0.0, 2.0**-23, 1 - 2.0**-23, 0.0, 1 - 2.0**-23]


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="seeds"):
        seed_chain.mt19937_64(-1, 2)
    with pytest.raises(ValueError, match="count"):
        seed_chain.mt19937_64(1, 2.5)
    with pytest.raises(ValueError, match="device_seed"):
        seed_chain.op_seeds(2**32, 1)
    with pytest.raises(ValueError, match="num_ops"):
        seed_chain.op_seeds(1, 0)
    with pytest.raises(ValueError, match="seed2"):
        seed_chain.PhiloxStream(1, _U64)
    with pytest.raises(ValueError, match="words"):
        seed_chain.uint32_to_float(np.array([0.5]))
    with pytest.raises(ValueError, match="scale"):
        seed_recovery.LaplacePrivatizer(8, 0.0)
    with pytest.raises(ValueError, match="positive_op"):
        seed_recovery.LaplacePrivatizer(8, 1.0, positive_op=2)
    with pytest.raises(ValueError, match="release"):
        seed_recovery.recover(np.zeros(7), seed_recovery.LaplacePrivatizer(
            8, 1.0), 0, 4)
    with pytest.raises(ValueError, match="stop"):
        seed_recovery.recover(np.zeros(8), seed_recovery.LaplacePrivatizer(
            8, 1.0), 0, 2**32 + 1)


# --- the real kernels, seeded through the model ---------------------------


class _SeededDraws(keras.layers.Layer):
    """10 uniforms (op seed 7) then 10 normals (op seed 9), fixed shapes."""

    def call(self, x):
        draws = tf.concat([tf.random.uniform((1, 10), seed=7),
                           tf.random.normal((1, 10), seed=9)], axis=1)
        return draws + 0.0 * x[:, :1]


@pytest.fixture(scope="module")
def seeded_model():
    x = keras.Input((1,), name="x")
    return export.convert(keras.Model(x, _SeededDraws()(x)), batch_size=1)


def _expected_draws(tflite_bytes, pairs, invokes):
    """Reference outputs for `invokes` invokes; pairs in Prepare order."""
    names = [op.name for op in export.operators(tflite_bytes)
             if op.name.startswith("RANDOM")]
    streams = dict(zip(names, (seed_chain.PhiloxStream(*p) for p in pairs)))
    return [np.concatenate(
        [streams["RANDOM_UNIFORM"].uniform(10),
         streams["RANDOM_STANDARD_NORMAL"].standard_normal(10)])
        for _ in range(invokes)]


def test_converter_keeps_op_seeds(seeded_model):
    seeds = {op.name: (op.seed, op.seed2)
             for op in export.operators(seeded_model) if op.seed is not None}
    assert seeds == {"RANDOM_UNIFORM": (_TF_DEFAULT_GRAPH_SEED, 7),
                     "RANDOM_STANDARD_NORMAL": (_TF_DEFAULT_GRAPH_SEED, 9)}


def test_seeded_kernels_bit_exact_over_invokes(seeded_model):
    pairs = [(op.seed, op.seed2) for op in export.operators(seeded_model)
             if op.seed is not None]
    runner = _runner(seeded_model)
    got = [_run(runner, np.zeros((1, 1), np.float32))[0] for _ in range(3)]
    for out, ref in zip(got, _expected_draws(seeded_model, pairs, 3)):
        assert out.dtype == np.float32 and np.array_equal(out, ref)
    assert not np.array_equal(got[0], got[1])  # the stream moved on


def test_model_seed_fields_are_32_bit(seeded_model):
    # TfLiteRandomParams holds `int seed, seed2`: a patched 64-bit value
    # (what mt19937_64 hands the unseeded path) keeps only its low 32 bits,
    # sign-extended. So the flatbuffer cannot replay the unseeded chain;
    # the fixed random_device below does.
    pairs = seed_chain.op_seeds(3_000_000_123, 2)
    patched = seed_recovery.set_op_seeds(seeded_model, pairs)
    got = _run(_runner(patched), np.zeros((1, 1), np.float32))[0]
    truncated = [tuple(_sign_extend_32(s) for s in p) for p in pairs]
    assert any(_sign_extend_32(s) != s for p in pairs for s in p)
    assert np.array_equal(got, _expected_draws(patched, truncated, 1)[0])
    assert not np.array_equal(got, _expected_draws(patched, pairs, 1)[0])


# --- the unseeded chain, with std::random_device fixed in a child ---------


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    try:
        return seed_recovery.build_random_device_shim(
            str(tmp_path_factory.mktemp("shim")))
    except RuntimeError as err:
        pytest.skip(f"Cannot fix std::random_device without a C compiler: "
                    f"{err}")


_CHILD = r"""
import json, sys
import numpy as np
import ctypes
from ai_edge_litert.interpreter import Interpreter
path, plan = sys.argv[1], json.loads(sys.argv[2])
interpreters, outputs = [], []
for step in plan:
    if step[0] == "new":
        interpreter = Interpreter(model_path=path)
        interpreters.append(interpreter.get_signature_runner())
    else:
        runner = interpreters[step[1]]
        x = np.array(step[2], np.float32)
        outputs.append(list(runner(x=x).values())[0].tolist())
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
used = libc.getenv(sys.argv[3].encode()) is not None
print(json.dumps({"outputs": outputs, "shim_used": used}))
"""


def _child(shim_path, device_seed, tflite_bytes, plan, tmp_path):
    """Runs `plan` in a fresh process whose random_device is fixed."""
    path = tmp_path / f"model_{abs(hash(tflite_bytes))}.tflite"
    path.write_bytes(tflite_bytes)
    env = dict(os.environ, LD_PRELOAD=shim_path)
    env[seed_recovery.SHIM_VARIABLE] = str(device_seed)
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), json.dumps(plan),
         seed_recovery.SHIM_USED_VARIABLE],
        env=env, capture_output=True, text=True, check=True)
    report = json.loads(result.stdout)
    if not report["shim_used"]:
        pytest.skip("The LD_PRELOAD shim was not called (TFLite does not "
                    "use a shared libstdc++ here): random_device stays "
                    "unknown.")
    return [np.array(o, np.float32) for o in report["outputs"]]


class _UnseededDraws(keras.layers.Layer):
    """Unseeded uniforms then normals, both of the input's (dynamic) shape."""

    def call(self, x):
        return tf.stack([tf.random.uniform(tf.shape(x)),
                         tf.random.normal(tf.shape(x))])


def test_unseeded_chain_bit_exact_and_prepare_count(shim, tmp_path):
    x = keras.Input((6,), name="x")
    model = export.convert(keras.Model(x, _UnseededDraws()(x)))
    kinds = [op.name for op in export.operators(model)
             if op.name.startswith("RANDOM")]
    assert kinds == ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"]
    one, two = np.zeros((1, 6)).tolist(), np.zeros((2, 6)).tolist()
    plan = [["new"], ["run", 0, one], ["run", 0, one],   # interpreter A
            ["new"], ["run", 1, one],                     # interpreter B
            ["run", 0, two], ["run", 0, two],             # A, resized
            ["run", 0, one]]                              # A, back to 1 row
    device_seed = 2_718_281_828
    got = _child(shim, device_seed, model, plan, tmp_path)

    # One Prepare per random op per AllocateTensors (interpreter creation,
    # signature runner and XNNPACK included) and per resize; a fresh
    # process starts at the first mt19937_64 output.
    def streams(draws_before):
        pairs = seed_chain.op_seeds(device_seed, 2, draws_before)
        return [seed_chain.PhiloxStream(*p) for p in pairs]

    def draw(ops, size):
        return np.stack([ops[0].uniform(size),
                         ops[1].standard_normal(size)])

    a, b = streams(0), streams(4)
    expected = [draw(a, 6), draw(a, 6), draw(b, 6)]
    a = streams(8)
    expected += [draw(a, 12), draw(a, 12), draw(streams(12), 6)]
    assert len(got) == len(expected)
    for out, ref in zip(got, expected):
        assert np.array_equal(out.reshape(ref.shape), ref)


# --- the attack on the DPNR privatizer ------------------------------------

_DIMENSION = 32
_EPSILON = 1.0


@pytest.fixture(scope="module", params=[1, None], ids=["batch1", "dynamic"])
def privatizer(request):
    x = keras.Input((_DIMENSION,), name="x")
    model = keras.Model(x, layers.LaplaceNoise(_EPSILON)(
        layers.MinMaxNormalize()(x)))
    return export.convert(model, batch_size=request.param)


def test_attack_recovers_seed_and_clean_vector(shim, privatizer, tmp_path):
    # The public structure: two RANDOM_UNIFORM ops, and which one is E1.
    assert [op.name for op in export.operators(privatizer)
            if op.name.startswith("RANDOM")] == ["RANDOM_UNIFORM"] * 2
    positive = seed_recovery.find_positive_op(privatizer, _DIMENSION,
                                              1.0 / _EPSILON)
    embedding = np.random.default_rng(3).normal(size=(1, _DIMENSION))
    clean = ((embedding - embedding.min())
             / (embedding.max() - embedding.min()))[0].astype(np.float32)
    s_true = 3_141_592_653
    release, = _child(shim, s_true, privatizer,
                      [["new"], ["run", 0, embedding.tolist()]], tmp_path)
    spec = seed_recovery.LaplacePrivatizer(_DIMENSION, 1.0 / _EPSILON,
                                           positive_op=positive)
    start = s_true - 40_000
    found = seed_recovery.recover(release[0], spec, start, start + 2**16)
    assert found.seeds == (s_true,)          # and no wrong candidate
    np.testing.assert_allclose(found.clean[0], clean, rtol=0, atol=1e-5)
    assert found.seconds < 30.0


def test_attack_needs_the_right_seed():
    # Replayed from the verified chain (no child process): the search
    # finds nothing where the true seed is outside the range, and finds it
    # after earlier interpreters and invokes when the spec says so.
    spec = seed_recovery.LaplacePrivatizer(_DIMENSION, 1.0, draws_before=8,
                                           invokes_before=2)
    clean = np.linspace(0.0, 1.0, _DIMENSION, dtype=np.float32)
    s_true = 4_000_000_000
    release = clean + seed_recovery.laplace_noise(s_true, spec)
    assert seed_recovery.recover(release, spec, s_true - 5000,
                                 s_true).seeds == ()
    found = seed_recovery.recover(release, spec, s_true - 5000, s_true + 5000)
    assert found.seeds == (s_true,)
    np.testing.assert_allclose(found.clean[0], clean, rtol=0, atol=1e-5)
    stale = dataclasses.replace(spec, draws_before=0)
    assert seed_recovery.recover(release, stale, s_true - 5000,
                                 s_true + 5000).seeds == ()



def test_attack_at_large_epsilon_uses_the_min_max_structure():
    # b = 0.05: a wrong candidate's small noise keeps most residuals inside
    # [0, 1], so the range test alone accepts many; asking for minimum 0
    # and maximum 1 (MinMaxNormalize) leaves only the true seed.
    spec = seed_recovery.LaplacePrivatizer(_DIMENSION, 0.05)
    clean = np.random.default_rng(5).random(_DIMENSION).astype(np.float32)
    clean = (clean - clean.min()) / (clean.max() - clean.min())
    s_true = 77_777
    release = clean + seed_recovery.laplace_noise(s_true, spec)
    loose = dataclasses.replace(spec, normalized=False)
    start, stop = s_true - 2000, s_true + 2000
    assert len(seed_recovery.recover(release, loose, start, stop).seeds) > 1
    found = seed_recovery.recover(release, spec, start, stop)
    assert found.seeds == (s_true,)
    np.testing.assert_allclose(found.clean[0], clean, rtol=0, atol=1e-5)


_PHONE_CHILD = r"""
import json, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter
path, feed = sys.argv[1], json.loads(sys.argv[2])
runner = Interpreter(model_path=path).get_signature_runner()
out = runner(**{k: np.array(v, np.int32) for k, v in feed.items()})
print(json.dumps(out["private_representation"].tolist()))
"""


def test_attack_on_a_whole_internal_noise_dpnr_phone_model(shim, tmp_path):
    """The exporter's phone model with --noise_source=internal (encoder ->
    mean pool -> min-max -> Laplace, a tiny BERT): one release and a 2^16
    seed range give the seed and the clean representation."""
    import keras_hub

    from tfdptext import models
    from tfdptext.export import exporter

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16)
    split = models.sequence_representation_split(
        backbone, 2, [layers.MinMaxNormalize(), layers.LaplaceNoise(1.0)])
    phone = exporter._phone_model(split.user, "sequence_representation", 8,
                                  noise_source="internal")
    model = export.convert(phone, batch_size=1)
    feed = {"token_ids": [[2, 17, 41, 9, 3, 0, 0, 0]],
            "padding_mask": [[1, 1, 1, 1, 1, 0, 0, 0]]}
    positive = seed_recovery.find_positive_op(
        model, 16, 1.0, feed={k: np.array(v, np.int32)
                              for k, v in feed.items()})
    clean = Interpreter(model_content=seed_recovery.set_op_seeds(
        model, [(5, 6), (5, 6)])).get_signature_runner()(
            **{k: np.array(v, np.int32) for k, v in feed.items()}
        )["private_representation"][0]
    path = tmp_path / "phone.tflite"
    path.write_bytes(model)
    s_true = 2_718_281_828
    env = dict(os.environ, LD_PRELOAD=shim)
    env[seed_recovery.SHIM_VARIABLE] = str(s_true)
    release = np.array(json.loads(subprocess.run(
        [sys.executable, "-c", _PHONE_CHILD, str(path), json.dumps(feed)],
        env=env, capture_output=True, text=True, check=True).stdout),
        np.float32)[0]
    assert np.abs(release - clean).max() > 0.5   # the noise is real
    spec = seed_recovery.LaplacePrivatizer(16, 1.0, positive_op=positive)
    start = s_true - 12_345
    found = seed_recovery.recover(release, spec, start, start + 2**16)
    assert found.seeds == (s_true,)
    np.testing.assert_allclose(found.clean[0], clean, rtol=0, atol=1e-5)
