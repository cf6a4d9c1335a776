"""The exponential race (tfdptext.substitution.race) and its delta
(tfdptext.privacy.exponential): the distribution against the closed form,
the float budgets measured on TensorFlow's and TFLite's kernels, and the
total-variation bound against the exact distribution of a coarse grid."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from tfdptext.substitution import backend
from tfdptext.substitution import race
from tfdptext.privacy import exponential

DRAWS = 40000
# Log-weights over 200 nats, and two candidates that are never output.
LOG_WEIGHTS = np.array([0.0, -0.5, -1.0, -2.0, -3.0, -200.0, -np.inf,
                        -np.inf, 1.5], np.float64)


def _softmax(s):
    s = np.asarray(s, np.float64)
    w = np.exp(s - s.max())
    return w / w.sum()


def _pvalue(counts, probs):
    expected = probs * counts.sum()
    keep = expected > 5
    assert counts[expected == 0].sum() == 0, "an impossible output was drawn"
    rest = counts[~keep].sum(), expected[~keep].sum()
    observed = np.append(counts[keep], rest[0])
    expected = np.append(expected[keep], rest[1])
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    return stats.chisquare(observed, expected).pvalue


def _tf_race(s, uniforms, two_stage=False):
    import tensorflow as tf

    fn = race.two_stage_race if two_stage else race.race
    return fn(tf.constant(s, tf.float32), tf.constant(uniforms, tf.float32),
              backend.TENSORFLOW).numpy()


def _tf_uniforms(shape):
    """float32 uniforms on the 2^-24 grid, as random words give them."""
    words = np.frombuffer(np.random.bytes(4 * int(np.prod(shape))),
                          np.uint32).reshape(shape)
    return ((words >> 8).astype(np.float64) * 2.0**-24).astype(np.float32)


@pytest.mark.parametrize("name", ["numpy", "tensorflow"])
def test_race_matches_the_softmax(name):
    s = np.tile(LOG_WEIGHTS, (DRAWS, 1))
    if name == "numpy":
        out = race.race(s, race.numpy_uniforms(s.shape), backend.NUMPY)
    else:
        out = _tf_race(s, _tf_uniforms(s.shape))
    counts = np.bincount(out, minlength=len(LOG_WEIGHTS))
    assert counts[6] == counts[7] == 0
    assert _pvalue(counts, _softmax(LOG_WEIGHTS)) > 1e-4


@pytest.mark.parametrize("name", ["numpy", "tensorflow"])
def test_two_stage_race_matches_the_softmax(name):
    rng = np.random.default_rng(5)
    s = rng.normal(0.0, 1.5, 40)
    s[[3, 17, 18, 19, 20, 21, 39]] = -np.inf  # a whole block among them
    rows = np.tile(s, (DRAWS, 1))
    width = race.two_stage_uniforms(40)
    assert width == 7 + 6
    if name == "numpy":
        out = race.two_stage_race(rows, race.numpy_uniforms((DRAWS, width)),
                                  backend.NUMPY)
    else:
        out = _tf_race(rows, _tf_uniforms((DRAWS, width)), two_stage=True)
    counts = np.bincount(out, minlength=40)
    assert _pvalue(counts, _softmax(s)) > 1e-4


def test_race_is_float_safe_at_the_extremes():
    """The largest and smallest uniforms give finite keys; weights 1e300
    apart, or all -inf but one, give the right winner and no NaN."""
    import tensorflow as tf

    edges = np.array([[0.0, 1.0 - 2.0**-24]], np.float32)
    centred = race.centred_uniforms(tf.constant(edges), backend.TENSORFLOW)
    assert 0.0 < float(centred[0, 0]) and float(centred[0, 1]) < 1.0
    keys = race.race_keys(tf.constant([[0.0, -1e30, -np.inf]], tf.float32),
                          tf.constant(edges[:, [1, 0, 0]]),
                          backend.TENSORFLOW).numpy()
    assert np.isfinite(keys[0, 0]) and keys[0, 0] > 0
    assert keys[0, 1] == keys[0, 2] == np.inf
    one = np.full((100, 9), -np.inf)
    one[:, 4] = -7.0
    assert (race.race(one, race.numpy_uniforms(one.shape), backend.NUMPY)
            == 4).all()
    u = race.numpy_uniforms((100000,))
    assert (u > 0).all() and (u < 1).all()


def _grid():
    k = np.arange(2**23, dtype=np.float64)
    return (k + 0.5) * 2.0**-23


def test_float32_budgets_hold_for_tensorflow_kernels():
    """E = -log U over the whole float32 grid within 7 units of 2^-24
    (the key budget 2^-21 = 8 units keeps one for the product), EXP within
    theta = 2^-16."""
    import tensorflow as tf

    u = _grid()
    e = backend.TENSORFLOW.neg_log_uniform(tf.constant(u, tf.float32))
    relative = np.abs(e.numpy().astype(np.float64) + np.log(u)) / -np.log(u)
    assert relative.max() <= 7 * 2.0**-24
    assert exponential.FLOAT32.key_error == 8 * 2.0**-24
    gaps = np.linspace(0.0, 88.0, 200001).astype(np.float32)
    exact = np.exp(gaps.astype(np.float64))
    got = tf.exp(tf.constant(gaps)).numpy().astype(np.float64)
    assert (np.abs(got - exact) / exact).max() <= \
        exponential.FLOAT32.weight_error


def test_float32_budgets_hold_for_tflite_kernels():
    """The same with TFLite's kernels, which are less accurate: its LOG
    has an absolute error near 1 (the reason for the series in
    neg_log_uniform) and its EXP about 65 units."""
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    class Kernels(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32),
                                      tf.TensorSpec([None], tf.float32),
                                      tf.TensorSpec([None], tf.float32)])
        def run(self, u, gap, total):
            return {"e": backend.TENSORFLOW.neg_log_uniform(u),
                    "w": tf.exp(gap), "log": tf.math.log(total)}

    module = Kernels()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.run.get_concrete_function()], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    runner = Interpreter(model_content=converter.convert()
                         ).get_signature_runner()
    u = _grid()
    gaps = np.linspace(0.0, 88.0, u.size).astype(np.float32)
    totals = np.linspace(1.0, 200.0, u.size).astype(np.float32)
    out = runner(u=u.astype(np.float32), gap=gaps, total=totals)
    e = out["e"].astype(np.float64)
    assert (np.abs(e + np.log(u)) / -np.log(u)).max() <= 7 * 2.0**-24
    exact = np.exp(gaps.astype(np.float64))
    assert (np.abs(out["w"] - exact) / exact).max() <= \
        exponential.FLOAT32.weight_error
    assert np.abs(out["log"] - np.log(totals.astype(np.float64))).max() \
        <= exponential.FLOAT32.log_error


def _discrete_race(s, bits):
    """The exact output distribution of the race whose uniforms are the
    midpoints of 2^bits cells (float64, ties to the lowest index), by
    enumerating every tuple of cells."""
    e = -np.log((np.arange(2**bits) + 0.5) * 2.0**-bits)
    w = np.exp(np.max(s) - np.asarray(s))
    keys = np.stack(np.meshgrid(*[e * wi for wi in w], indexing="ij"),
                    axis=-1).reshape(-1, len(s))
    return np.bincount(np.argmin(keys, axis=1), minlength=len(s)) / len(keys)


def test_total_variation_bound_holds_and_is_not_vacuous():
    """On a coarse grid (2^6 cells) the grid part of the bound, k * 2 *
    2^-B, covers the exact discrete race, and is within a factor 40 of
    the real total variation."""
    bits = 6
    precision = exponential.Precision("coarse", bits, 0.0, 0.0, 0.0, 0.0)
    worst = 0.0
    for s in ([0.0, 0.0, 0.0], [0.0, -1.0, -3.0], [0.0, -4.0, -4.5],
              [0.0, -0.2, -6.0]):
        tv = 0.5 * np.abs(_discrete_race(s, bits) - _softmax(s)).sum()
        bound = exponential.race_total_variation(3, precision)
        assert tv <= bound
        worst = max(worst, tv)
    assert worst >= bound / 40


def test_delta_bound_covers_the_exact_hockey_stick_divergence():
    """Two neighbouring log-weight vectors of an exponential mechanism
    with log-ratio bound L: the discrete race's hockey-stick divergence
    at e^L is at most hockey_stick_delta(TV bound, L)."""
    bits = 6
    precision = exponential.Precision("coarse", bits, 0.0, 0.0, 0.0, 0.0)
    tv = exponential.race_total_variation(3, precision)
    x = np.array([0.0, -1.0, -5.0])
    x_prime = np.array([-0.5, -0.5, -5.5])  # each moves by <= 0.5
    ratio = 2 * 0.5
    p, q = _discrete_race(x, bits), _discrete_race(x_prime, bits)
    assert _softmax(x).max() / _softmax(x_prime).max() <= math.exp(ratio)
    for a, b in ((p, q), (q, p)):
        divergence = np.maximum(a - math.exp(ratio) * b, 0.0).sum()
        assert divergence <= exponential.hockey_stick_delta(tv, ratio)


def test_stated_values():
    assert exponential.key_flip_probability() == pytest.approx(5.89e-7,
                                                               rel=1e-3)
    assert exponential.two_stage_total_variation(30522) < 4e-4
    assert exponential.two_stage_total_variation(
        30522, exponential.FLOAT64) < 1e-12
    assert exponential.hockey_stick_delta(0.5, 800.0) == 1.0
    with pytest.raises(ValueError, match="num_keys"):
        exponential.race_total_variation(0)
    with pytest.raises(ValueError, match="total_variation"):
        exponential.hockey_stick_delta(1.5)


def test_two_stage_race_converts_to_tflite_builtins():
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import tflite

    n = 30
    width = race.two_stage_uniforms(n)

    class Sampler(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, n], tf.float32),
                                      tf.TensorSpec([None, width],
                                                    tf.float32)])
        def run(self, s, u):
            return {"i": race.two_stage_race(s, u, backend.TENSORFLOW)}

    module = Sampler()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.run.get_concrete_function()], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    flat = converter.convert()
    tflite.check_unseeded_builtins(flat)
    runner = Interpreter(model_content=flat).get_signature_runner()
    s = np.random.default_rng(2).normal(0, 1, n)
    s[[0, 29]] = -np.inf
    rows = np.tile(s, (DRAWS, 1)).astype(np.float32)
    out = runner(s=rows, u=_tf_uniforms((DRAWS, width)))["i"]
    counts = np.bincount(out, minlength=n)
    assert _pvalue(counts, _softmax(s)) > 1e-4
