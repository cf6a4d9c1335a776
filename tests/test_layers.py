"""Statistical and behavioural tests of the privatization layers."""

import math

import keras
import numpy as np
import pytest
from scipy import stats

from tfdptext import layers
from tfdptext import privacy
from tfdptext.errors import ArgumentError
from tfdptext.privacy import dropout as dropout_lib

# Kolmogorov-Smirnov: reject only at p < 1e-4 (a correct sampler fails one
# run in 10,000); with these sample sizes a wrong scale by 5% gives p ~ 0.


def _ks_pvalue(samples, cdf):
    return stats.kstest(np.ravel(samples), cdf).pvalue


def test_laplace_per_coordinate_scale_ks():
    x = np.full((400, 256), 0.5, np.float32)
    noise = layers.LaplaceNoise(epsilon=0.5)(x).numpy() - 0.5
    assert _ks_pvalue(noise, stats.laplace(scale=2.0).cdf) > 1e-4
    # A 10% wrong scale must be detected at this sample size.
    assert _ks_pvalue(noise, stats.laplace(scale=2.2).cdf) < 1e-4


def test_laplace_vector_mode_scale():
    x = np.full((2000, 16), 0.5, np.float32)
    layer = layers.LaplaceNoise(epsilon=4.0, sensitivity="vector")
    noise = layer(x).numpy() - 0.5
    assert layer.scale == pytest.approx(4.0)  # b = k / eps = 16 / 4
    assert _ks_pvalue(noise, stats.laplace(scale=4.0).cdf) > 1e-4
    assert layer.guarantee().unit == "per_representation"


def test_laplace_noise_is_independent_across_coordinates():
    # The DPNR authors' public code drew ONE scalar per example: after
    # min-max normalisation the clean vector has min 0, so subtracting the
    # released minimum removed the noise. Per-coordinate noise must not
    # allow that.
    rng = np.random.default_rng(0)
    clean = layers.MinMaxNormalize()(rng.normal(size=(500, 64))).numpy()
    released = layers.LaplaceNoise(epsilon=1.0)(clean).numpy()
    recovered = released - released.min(axis=1, keepdims=True)
    assert np.abs(recovered - clean).mean() > 0.5

    broken = clean + rng.laplace(size=(500, 1))  # the defect, for contrast
    broken_recovered = broken - broken.min(axis=1, keepdims=True)
    assert np.abs(broken_recovered - clean).max() < 1e-6

    noise = layers.LaplaceNoise(epsilon=1.0)(
        np.full((20000, 8), 0.5, np.float32)).numpy()
    corr = np.corrcoef(noise, rowvar=False)
    off_diagonal = corr[~np.eye(8, dtype=bool)]
    assert np.abs(off_diagonal).max() < 0.04  # 5.6 standard errors


def test_laplace_clips_inputs_and_never_returns_nonfinite():
    layer = layers.LaplaceNoise(epsilon=100.0, noise=False)
    out = layer(np.array([[-3.0, 0.5, 7.0]], np.float32)).numpy()
    np.testing.assert_allclose(out, [[0.0, 0.5, 1.0]])
    noisy = layers.LaplaceNoise(epsilon=1e-3)(
        np.full((1000, 384), 0.5, np.float32)).numpy()
    assert np.isfinite(noisy).all()


def test_min_max_normalize_range_and_constant_vectors():
    layer = layers.MinMaxNormalize()
    x = np.random.default_rng(1).normal(size=(50, 10)).astype(np.float32)
    out = layer(x).numpy()
    assert out.min() == 0.0 and out.max() == 1.0
    np.testing.assert_allclose(out.min(axis=1), 0.0)
    np.testing.assert_allclose(out.max(axis=1), 1.0)
    constant = layer(np.full((2, 5), 3.0, np.float32)).numpy()
    assert np.isfinite(constant).all() and (constant == 0).all()


def test_dchi_radius_gamma_and_mean():
    eta, n = 10.0, 16
    noise = layers.DChiNoise(eta=eta)(np.zeros((20000, n), np.float32)).numpy()
    radius = np.linalg.norm(noise, axis=1)
    assert _ks_pvalue(radius, stats.gamma(a=n, scale=1 / eta).cdf) > 1e-4
    # mean n / eta, standard error sqrt(n) / eta / sqrt(N) = 0.0028
    assert radius.mean() == pytest.approx(n / eta, abs=0.015)


def test_dchi_radius_mean_in_384_dims():
    eta = 20.0
    noise = layers.DChiNoise(eta=eta)(np.zeros((50, 40, 384), np.float32))
    radius = np.linalg.norm(noise.numpy(), axis=-1)
    # E = 19.2, sd of one radius = sqrt(384) / 20 = 0.98; SE over 2000 = 0.022
    assert radius.mean() == pytest.approx(384 / eta, abs=0.12)


def test_dchi_direction_uniform():
    n, count = 3, 30000
    noise = layers.DChiNoise(eta=1.0)(np.zeros((count, n), np.float32)).numpy()
    direction = noise / np.linalg.norm(noise, axis=1, keepdims=True)
    # Uniform on the sphere: mean 0 (SE = sqrt(1/3/N) = 0.0033) and
    # E[p_i^2] = 1/n; each coordinate of a uniform point on S^2 is U(-1, 1).
    assert np.abs(direction.mean(axis=0)).max() < 0.016
    np.testing.assert_allclose((direction**2).mean(axis=0), 1 / n, atol=0.01)
    assert _ks_pvalue(direction[:, 0], stats.uniform(-1, 2).cdf) > 1e-4


def test_randomized_response_flip_rate():
    eps = 1.0
    expected = 1 / (1 + math.e)
    layer = layers.RandomizedResponse(epsilon=eps)
    ones = layer(np.ones((1000, 200), np.float32)).numpy()
    zeros = layer(np.zeros((1000, 200), np.float32)).numpy()
    # 200,000 bits each: SE = 0.001, tolerance 5 SE.
    assert 1 - ones.mean() == pytest.approx(expected, abs=0.005)
    assert zeros.mean() == pytest.approx(expected, abs=0.005)
    assert set(np.unique(ones)) <= {0.0, 1.0}


def test_randomized_response_thresholds_input():
    layer = layers.RandomizedResponse(epsilon=5.0, noise=False)
    out = layer(np.array([[0.2, 0.7, -4.0, 9.0]], np.float32)).numpy()
    np.testing.assert_array_equal(out, [[0, 1, 0, 1]])


def _features(lengths, max_length=12, cls=101, sep=102):
    ids = np.zeros((len(lengths), max_length), np.int32)
    mask = np.zeros_like(ids)
    for row, d in enumerate(lengths):
        ids[row, 0] = cls
        ids[row, 1:d + 1] = np.arange(1000, 1000 + d)
        ids[row, d + 1] = sep
        mask[row, :d + 2] = 1
    return {"token_ids": ids, "padding_mask": mask}


def test_word_dropout_exact_count_never_special_or_padding():
    lengths = [1, 2, 3, 5, 7, 10]
    layer = layers.WordDropout(0.5, mask_token_id=103,
                               special_token_ids=(101, 102))
    inputs = _features(lengths)
    for _ in range(20):
        out = layer(inputs)["token_ids"].numpy()
        dropped = out == 103
        for row, d in enumerate(lengths):
            assert dropped[row].sum() == math.floor(d * 0.5 + 0.5)
        assert not dropped[:, 0].any()  # [CLS]
        assert (out[inputs["token_ids"] == 102] == 102).all()
        assert (out[inputs["padding_mask"] == 0] == 0).all()


def test_word_dropout_positions_uniform():
    # d = 5, rate 0.4: 2 of 5 masked; each of the 10 pairs equally likely.
    layer = layers.WordDropout(0.4, mask_token_id=103,
                               special_token_ids=(101, 102))
    inputs = _features([5] * 20000, max_length=7)
    dropped = layer(inputs)["token_ids"].numpy()[:, 1:6] == 103
    assert (dropped.sum(axis=1) == 2).all()
    codes = (dropped * (2 ** np.arange(5))).sum(axis=1)
    counts = np.bincount(codes)
    counts = counts[counts > 0]
    assert len(counts) == 10
    assert stats.chisquare(counts).pvalue > 1e-4


def test_word_dropout_counts_as_the_guarantee_counts():
    # Lengths where float32's round(d * rate) is below the float64 count
    # the guarantee uses (found below: rate 0.105 at d = 300, 0.13 at 450,
    # 0.1325 at 200): the layer must drop exactly the guarantee's count.
    for rate in (0.105, 0.13, 0.1325):
        disagree = [d for d in range(1, 513) if math.floor(
            np.float32(d) * np.float32(rate) + np.float32(0.5)) !=
            dropout_lib.num_dropped(d, rate)]
        assert disagree, rate
        lengths = disagree[:3] + [1, 7, 510]
        layer = layers.WordDropout(rate, mask_token_id=103,
                                   special_token_ids=(101, 102))
        out = layer(_features(lengths, max_length=512))["token_ids"].numpy()
        for row, d in enumerate(lengths):
            assert (out[row] == 103).sum() == \
                dropout_lib.num_dropped(d, rate), (rate, d)
    with pytest.raises(ArgumentError, match="max_tokens.*at most 512"):
        layer.guarantee(privacy.laplace_guarantee(1.0, 8, "vector"),
                        max_tokens=513)


def test_word_dropout_guarantee_needs_base():
    layer = layers.WordDropout(0.5, mask_token_id=103)
    assert not layer.guarantee().is_private
    base = privacy.laplace_guarantee(1.0, 8, "vector")
    g = layer.guarantee(base, min_tokens=2, max_tokens=16)
    assert g.value == pytest.approx(privacy.dropout_epsilon(1.0, 0.5))


def test_fresh_noise_on_every_call_and_in_compiled_model():
    x = np.full((2, 32), 0.5, np.float32)
    for layer in (layers.LaplaceNoise(1.0), layers.DChiNoise(5.0),
                  layers.RandomizedResponse(0.5)):
        a, b = layer(x).numpy(), layer(x).numpy()
        assert not np.array_equal(a, b), layer.name
        inputs = keras.Input((32,))
        model = keras.Model(inputs, layer(inputs))
        p1 = model.predict(x, verbose=0)
        p2 = model.predict(x, verbose=0)
        assert not np.array_equal(p1, p2), layer.name
        assert not np.array_equal(p1[0], p1[1]), layer.name


def test_noise_off_is_identity_and_says_none():
    x = np.random.default_rng(2).random((3, 8)).astype(np.float32)
    for layer in (layers.LaplaceNoise(1.0, noise=False),
                  layers.DChiNoise(5.0, noise=False)):
        np.testing.assert_allclose(layer(x).numpy(), x, rtol=1e-6)
        assert not layer.guarantee().is_private
        assert "noise=False" in str(layer.guarantee())


TABLE = np.random.default_rng(3).normal(size=(60, 8)).astype(np.float32)
SPECIAL = (0, 1, 2, 3)
PASSTHROUGH = (0, 2, 3)  # [PAD], [CLS], [SEP]; 1 plays [UNK]


def test_text_privatizer_special_tokens_pass_and_never_output():
    layer = layers.DChiTextPrivatizer(0.5, TABLE, special_token_ids=SPECIAL,
                                      passthrough_token_ids=PASSTHROUGH)
    ids = np.array([[2, 10, 11, 12, 3, 0, 0]] * 300, np.int32)
    out = layer(ids).numpy()
    np.testing.assert_array_equal(out[:, [0, 4, 5, 6]], ids[:, [0, 4, 5, 6]])
    assert not np.isin(out[:, 1:4], SPECIAL).any()
    assert (out[:, 1:4] != ids[:, 1:4]).mean() > 0.5  # heavy noise changes


def test_text_privatizer_large_eta_keeps_tokens():
    layer = layers.DChiTextPrivatizer(1e5, TABLE, special_token_ids=SPECIAL)
    ids = np.arange(4, 60, dtype=np.int32)[None, :]
    np.testing.assert_array_equal(layer(ids).numpy(), ids)


def test_text_privatizer_first_built_inside_tf_function():
    import tensorflow as tf

    layer = layers.DChiTextPrivatizer(1e5, TABLE, special_token_ids=SPECIAL)
    ids = tf.constant(np.arange(4, 60, dtype=np.int32)[None, :])
    np.testing.assert_array_equal(tf.function(layer)(ids).numpy(),
                                  ids.numpy())


def test_text_privatizer_nearest_matches_faiss_offline():
    from tfdptext import offline

    layer = layers.DChiTextPrivatizer(1.0, TABLE, special_token_ids=SPECIAL)
    corpus = offline.DChiCorpusPrivatizer(TABLE, 1.0, SPECIAL, seed=0)
    queries = np.random.default_rng(4).normal(size=(500, 8)).astype(np.float32)
    layer.build((None,))
    np.testing.assert_array_equal(layer.nearest_tokens(queries).numpy(),
                                  corpus.nearest_tokens(queries))
    brute = np.argmin(((queries[:, None] - TABLE[None]) ** 2).sum(-1)
                      + np.isin(np.arange(60), SPECIAL)[None] * 1e9, axis=1)
    np.testing.assert_array_equal(corpus.nearest_tokens(queries), brute)


def test_offline_privatizer_same_distribution_as_layer():
    # Share of tokens left unchanged must agree between the in-graph layer
    # and the FAISS path (same mechanism): 4000 tokens each, SE < 0.008.
    ids = np.tile(np.arange(4, 60, dtype=np.int32), 72)[None, :4000]
    layer = layers.DChiTextPrivatizer(3.0, TABLE, special_token_ids=SPECIAL)
    from tfdptext import offline

    corpus = offline.DChiCorpusPrivatizer(TABLE, 3.0, SPECIAL)
    same_layer = (layer(ids).numpy() == ids).mean()
    same_faiss = (corpus(ids) == ids).mean()
    assert 0.05 < same_layer < 0.95
    assert abs(same_layer - same_faiss) < 0.05


def test_get_config_round_trip_all_layers(tmp_path):
    originals = [
        layers.MinMaxNormalize(),
        layers.LaplaceNoise(0.3, sensitivity="vector"),
        layers.DChiNoise(12.0, embedding_description="x"),
        layers.RandomizedResponse(2.0, noise=False),
        layers.WordDropout(0.2, mask_token_id=103, special_token_ids=[101]),
        layers.DChiTextPrivatizer(4.0, TABLE, special_token_ids=SPECIAL,
                                  passthrough_token_ids=PASSTHROUGH),
        layers.DChiNoise(3.0, vectors="sequences"),
    ]
    for layer in originals:
        clone = type(layer).from_config(layer.get_config())
        assert clone.get_config() == layer.get_config()


def test_text_privatizer_saves_embeddings_in_keras_file(tmp_path):
    ids = keras.Input((5,), dtype="int32")
    layer = layers.DChiTextPrivatizer(2.0, TABLE, special_token_ids=SPECIAL)
    model = keras.Model(ids, layer(ids))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    restored = [l for l in loaded.layers
                if isinstance(l, layers.DChiTextPrivatizer)][0]
    np.testing.assert_array_equal(restored.embeddings.numpy(), TABLE)
    assert restored.special_token_ids == SPECIAL


@pytest.mark.parametrize("factory,arg", [
    (lambda v: layers.LaplaceNoise(v), "epsilon"),
    (lambda v: layers.DChiNoise(v), "eta"),
    (lambda v: layers.RandomizedResponse(v), "epsilon"),
    (lambda v: layers.DChiTextPrivatizer(v, TABLE), "eta"),
])
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_privacy_parameters(factory, arg, bad):
    with pytest.raises(ValueError, match=arg):
        factory(bad)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan")])
def test_invalid_dropout_rate(bad):
    with pytest.raises(ValueError, match="rate"):
        layers.WordDropout(bad, mask_token_id=103)


def test_invalid_sensitivity_and_ranks():
    with pytest.raises(ValueError, match="sensitivity"):
        layers.LaplaceNoise(1.0, sensitivity="l2")
    for layer in (layers.LaplaceNoise(1.0), layers.DChiNoise(1.0),
                  layers.RandomizedResponse(1.0), layers.MinMaxNormalize()):
        with pytest.raises(ValueError, match="rank"):
            layer(np.ones((4,), np.float32))
    with pytest.raises(ValueError, match="token_ids"):
        layers.WordDropout(0.1, mask_token_id=103)(np.ones((2, 3)))
    with pytest.raises(ValueError, match="special_token_ids"):
        layers.DChiTextPrivatizer(1.0, TABLE, special_token_ids=[60])
    with pytest.raises(ValueError, match="embeddings"):
        layers.DChiTextPrivatizer(1.0, np.ones(5))


def test_noise_from_given_uniforms_is_deterministic_and_distributed():
    rng = np.random.default_rng(5)
    x = np.full((3000, 8), 0.5, np.float32)
    layer = layers.LaplaceNoise(epsilon=2.0, noise=False)
    layer.build(x.shape)
    u = rng.random((3000, 8, 2)).astype(np.float32)
    a = layer.apply(x, u).numpy()
    np.testing.assert_array_equal(a, layer.apply(x, u).numpy())
    assert _ks_pvalue(a - 0.5, stats.laplace(scale=0.5).cdf) > 1e-4
    assert layer.uniforms_shape((None, 8)) == (8, 2)

    dchi = layers.DChiNoise(eta=4.0, noise=False)
    dchi.build((None, 16))
    assert dchi.uniforms_shape((None, 16)) == (32,)
    u = rng.random((20000, 32)).astype(np.float32)
    noise = dchi.apply(np.zeros((20000, 16), np.float32), u).numpy()
    radius = np.linalg.norm(noise, axis=1)
    assert _ks_pvalue(radius, stats.gamma(a=16, scale=0.25).cdf) > 1e-4
    direction = noise / radius[:, None]
    # On the unit sphere in R^16, p_1^2 ~ Beta(1/2, 15/2).
    assert _ks_pvalue(direction[:, 0]**2, stats.beta(0.5, 7.5).cdf) > 1e-4
    np.testing.assert_allclose((direction**2).mean(axis=0), 1 / 16,
                               atol=0.004)
    # Extreme uniforms stay finite.
    edge = dchi.apply(np.zeros((2, 16), np.float32),
                      np.array([[0.0] * 32, [1.0] * 32], np.float32))
    assert np.isfinite(edge.numpy()).all()


def test_randomized_response_keeps_exactly_below_the_integer_threshold():
    """Integer thresholds, never a float comparison: with words, bit i is
    kept iff w_i mod 2^24 < T (T = floor(2^24 e^eps / (1 + e^eps))), in
    Keras and in the TFLite conversion, for the bit layer and BRR."""
    from ai_edge_litert.interpreter import Interpreter

    import keras
    import tensorflow as tf

    from tfdptext.export import tflite
    from tfdptext.privacy import randomized_response as rr

    eps = 1.3
    t24 = rr.keep_thresholds(eps)[24]
    k = np.array([0, t24 - 2, t24 - 1, t24, t24 + 1, 2**24 - 1], np.int64)
    # The same low 24 bits under four high bytes (the high byte is unused).
    words = np.concatenate([k + (h << 24) for h in (0, 1, 127, 255)])
    words = words.astype(np.uint32).view(np.int32)[None]
    kept = np.tile(k < t24, 4)[None]
    layer = layers.RandomizedResponse(eps)
    ones = np.ones_like(words, np.float32)
    np.testing.assert_array_equal(layer.apply(ones, words).numpy(),
                                  np.where(kept, 1.0, 0.0))
    inputs = keras.Input((words.shape[1],), name="bits")
    random = keras.Input((words.shape[1],), dtype="int32", name="w")

    class Apply(keras.layers.Layer):
        def call(self, x, w):
            return layer.apply(x, w)

    model = keras.Model({"bits": inputs, "w": random},
                        Apply()(inputs, random))
    runner = Interpreter(model_content=tflite.convert(
        model, batch_size=1)).get_signature_runner()
    out = list(runner(bits=ones, w=words).values())[0]
    np.testing.assert_array_equal(out, np.where(kept, 1.0, 0.0))
    # BRR text-to-text: the code's signs flip where the bits would.
    codes = np.zeros((4, words.shape[1]), np.uint8)
    brr = layers.BRRTextPrivatizer(eps, codes=codes, special_token_ids=[0])
    brr.build((None,))
    rows = tf.gather(brr.signs, [1])
    k_words, _ = layers.sampling.random_integers(None, tf.constant(words))
    noisy = tf.where(k_words < brr.thresholds[24], rows, -rows).numpy()
    np.testing.assert_array_equal(noisy, np.where(kept, -1.0, 1.0))


# Most of the 1,999 epsilons are not on the integer grid, so each warns
# that the smaller epsilon runs; the test checks that value itself.
@pytest.mark.filterwarnings(
    "ignore::tfdptext.privacy.guarantee.EpsilonMismatchWarning")
def test_randomized_response_never_flips_less_than_stated():
    """For 1,999 epsilons in (0.01, 20): on both grids the flip
    probability that runs is at least 1 / (1 + e^eps), and the stated
    epsilon is that of the implemented probabilities (at most eps)."""
    from tfdptext.privacy import randomized_response as rr

    for eps in np.linspace(0.01, 20.0, 1999):
        eps = float(eps)
        requested = 1.0 / (1.0 + math.exp(eps))
        for bits, t in rr.keep_thresholds(eps).items():
            assert 1.0 - t / 2**bits >= requested
            assert math.log(t / (2**bits - t)) <= eps + 1e-12
        stated = rr.rr_guarantee(eps).value
        assert stated == rr.implemented_epsilon(eps) <= eps + 1e-9
        assert stated >= max(math.log(t / (2**b - t)) for b, t in
                             rr.keep_thresholds(eps).items())


def test_exponentials_from_words_use_all_32_bits():
    """E = -log((2^32 - w_u) / 2^32): w = 0 gives 0, w = -1 (w_u = 2^32 -
    1) gives 32 ln 2, and random words give float32 values within 2 ulp
    of the float64 formula; Laplace (two words per exponential) and d_chi
    noise from words have their laws."""
    import tensorflow as tf

    from tfdptext.layers import sampling
    from tfdptext.models import secure

    edge = sampling.exponential(None, tf.constant([0, -1, -2, 2**31 - 1],
                                                  tf.int32)).numpy()
    np.testing.assert_allclose(edge, [0.0, 32 * math.log(2),
                                      math.log(2**31), math.log(2)],
                               rtol=1e-6)
    words = secure.os_random_words((200000,))
    got = sampling.exponential(None, tf.constant(words)).numpy()
    unsigned = words.astype(np.int64) % 2**32
    want = -np.log((2.0**32 - unsigned) / 2.0**32)
    np.testing.assert_allclose(got, want, rtol=2.5e-7, atol=1e-7)
    assert _ks_pvalue(got, stats.expon().cdf) > 1e-4
    layer = layers.LaplaceNoise(epsilon=2.0, noise=False)
    x = np.full((4000, 8), 0.5, np.float32)
    layer.build(x.shape)
    assert layer.words_shape((None, 8)) == (8, 2, 2)
    noisy = layer.apply(x, tf.constant(secure.os_random_words(
        (4000, 8, 2, 2))))
    assert _ks_pvalue(noisy.numpy() - 0.5, stats.laplace(scale=0.5).cdf) \
        > 1e-4
    # Two words per Laplace exponential: V = 1 - U56 in [2^-56, 1].
    pairs = tf.constant([[0, 0], [-1, -1], [-1, 0], [-2**31, 0]], tf.int32)
    np.testing.assert_allclose(
        sampling.complements_from_word_pairs(pairs).numpy(),
        [1.0, 2.0**-56, 2.0**-32, 0.5], rtol=1e-6)
    dchi = layers.DChiNoise(eta=4.0, noise=False)
    dchi.build((None, 16))
    noise = dchi.apply(np.zeros((20000, 16), np.float32), tf.constant(
        secure.os_random_words((20000, 32)))).numpy()
    radius = np.linalg.norm(noise, axis=1)
    assert _ks_pvalue(radius, stats.gamma(a=16, scale=0.25).cdf) > 1e-4
    direction = noise / radius[:, None]
    assert _ks_pvalue(direction[:, 0]**2, stats.beta(0.5, 7.5).cdf) > 1e-4
