"""The code release (m-ary randomized response on a learned code), the
randomized-response limit, and label privacy.

Statistical tests use fixed sample sizes; chi-square tests reject at
p < 1e-4 (a correct sampler fails one run in 10,000)."""

import fractions
import math

import keras
import numpy as np
import pytest
from scipy import stats

from tfdptext import layers
from tfdptext.errors import ArgumentError
from tfdptext.models import code as code_lib
from tfdptext.models import secure
from tfdptext.offline import categorical as offline_rr
from tfdptext.privacy import categorical
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import laplace
from tfdptext.privacy import limit
from tfdptext.privacy import metric
from tfdptext.training import losses

P_REJECT = 1e-4


def _chi_square_p(counts, probabilities):
    counts = np.asarray(counts, np.float64)
    expected = counts.sum() * np.asarray(probabilities, np.float64)
    return stats.chisquare(counts, expected).pvalue


# ---------------------------------------------------------------------------
# Accounting: integer thresholds, exact implemented epsilon.


@pytest.mark.parametrize("num_values", [2, 3, 5, 9])
def test_implemented_epsilon_without_modulo_bias_is_the_closed_form(
        num_values):
    # (m - 1) divides 2^bits: every other value has probability
    # (1 - T/2^b) / (m - 1), so epsilon = ln(T (m - 1) / (2^b - T)).
    for epsilon in (0.3, 1.0, 4.0, 9.0):
        for bits in (23, 24):
            threshold = categorical.keep_threshold(epsilon, num_values, bits)
            exact = math.log(threshold * (num_values - 1)
                             / (2**bits - threshold))
            value = categorical.implemented_epsilon(epsilon, num_values, bits)
            assert exact <= value <= exact + 1e-9
            # The threshold rounds the keep probability down.
            assert value <= epsilon + 1e-9
            assert value == pytest.approx(epsilon, abs=2e-5 * math.exp(
                epsilon))


def test_implemented_epsilon_is_the_largest_ratio_of_the_matrix():
    # m - 1 = 3 does not divide 2^8: the modulo bias makes one other value
    # likelier. Brute force over the exact matrix (Fractions) at 8 bits.
    for epsilon, m in ((1.0, 4), (0.5, 7), (3.0, 12)):
        scale = 2**8
        threshold = categorical.keep_threshold(epsilon, m, 8)
        keep = fractions.Fraction(threshold, scale)
        counts = [sum(1 for k in range(scale) if k % (m - 1) == j)
                  for j in range(m - 1)]
        row = [keep] + [(1 - keep) * fractions.Fraction(c, scale)
                        for c in counts]
        matrix = [row[-i:] + row[:-i] for i in range(m)]
        worst = max(matrix[i][y] / matrix[j][y] for y in range(m)
                    for i in range(m) for j in range(m))
        exact = math.log(worst.numerator) - math.log(worst.denominator)
        value = categorical.implemented_epsilon(epsilon, m, 8)
        assert exact <= value <= exact + 1e-9
        np.testing.assert_allclose(
            categorical.transition_matrix(epsilon, m, 8),
            np.array(matrix, np.float64), rtol=1e-12)


@pytest.mark.filterwarnings(
    "ignore::tfdptext.privacy.guarantee.EpsilonMismatchWarning")
def test_stated_epsilon_is_never_below_either_grid():
    for epsilon in (0.05, 1.0, 7.5, 20.0):
        for m in (2, 4, 65536):
            stated = categorical.code_guarantee(epsilon, m).value
            for bits in categorical.GRIDS:
                assert stated >= categorical.implemented_epsilon(
                    epsilon, m, bits)


def test_huge_epsilon_is_stated_as_implemented_not_as_asked():
    # The keep threshold stops at 2^bits - 1: epsilon 50 runs as ~16.6,
    # and the user is told.
    with pytest.warns(guarantee_lib.EpsilonMismatchWarning, match="below"):
        g = categorical.code_guarantee(50.0, 2)
    assert 15.0 < g.value < 17.0
    assert g.details["requested_epsilon"] == 50.0


def test_implemented_epsilon_above_the_request_warns():
    # A tiny epsilon over 2^16 values: the modulo bias and the 23-bit grid
    # give 0.0078 for 0.001 asked; the guarantee states it, with a warning.
    with pytest.warns(guarantee_lib.EpsilonMismatchWarning,
                      match="times the 0.001"):
        g = categorical.code_guarantee(1e-3, 2**16)
    assert g.value == pytest.approx(0.00778, rel=1e-3)
    with pytest.warns(guarantee_lib.EpsilonMismatchWarning):
        categorical.label_guarantee(1e-3, 2**16)
    import warnings

    with warnings.catch_warnings():  # within 1%: silent
        warnings.simplefilter("error")
        categorical.code_guarantee(1.0, 4)
        categorical.code_guarantee(1e-3, 2)


@pytest.mark.parametrize("bad", [1, 0, 65537, 2.5, True, "4"])
def test_num_values_range(bad):
    with pytest.raises(ArgumentError, match="num_codes"):
        layers.CodeRandomizedResponse(1.0, bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_epsilon_range(bad):
    with pytest.raises(ArgumentError, match="epsilon"):
        layers.CodeRandomizedResponse(bad, 4)


# ---------------------------------------------------------------------------
# The layer and the offline sampler: one arithmetic.


def test_layer_with_words_equals_offline_sampler_word_for_word():
    m, n = 5, 20000
    codes = np.random.default_rng(0).integers(0, m, n)
    words = offline_rr.os_words(n)
    layer = layers.CodeRandomizedResponse(1.5, m)
    uniforms = secure.uniforms_from_words(words.view(np.int32))
    from_layer = layer.apply(codes.astype(np.int32), uniforms).numpy()
    from_numpy = offline_rr.randomized_response(codes, m, 1.5, words)
    np.testing.assert_array_equal(from_layer, from_numpy)


@pytest.mark.parametrize("source", ["words", "internal"])
def test_layer_output_distribution_is_the_transition_matrix(source):
    m, n, epsilon = 4, 200000, 1.0
    layer = layers.CodeRandomizedResponse(epsilon, m)
    codes = np.full(n, 2, np.int32)
    if source == "words":
        released = layer.apply(codes, secure.uniforms_from_words(
            secure.os_random_words((n, 2)))).numpy()
        bits = 24
    else:
        released = layer(codes).numpy()
        bits = 23
    row = categorical.transition_matrix(epsilon, m, bits)[2]
    counts = np.bincount(released, minlength=m)
    assert _chi_square_p(counts, row) > P_REJECT
    # A keep probability for another epsilon is detected at this size.
    wrong = categorical.transition_matrix(1.1 * epsilon, m, bits)[2]
    assert _chi_square_p(counts, wrong) < P_REJECT


def test_offline_sampler_distribution_and_bad_inputs():
    n = 100000
    released = offline_rr.randomized_response(np.zeros(n, np.int64), 3, 2.0)
    row = categorical.transition_matrix(2.0, 3)[0]
    assert _chi_square_p(np.bincount(released, minlength=3), row) > P_REJECT
    with pytest.raises(ArgumentError, match="values"):
        offline_rr.randomized_response(np.array([0, 3]), 3, 1.0)
    with pytest.raises(ArgumentError, match="words"):
        offline_rr.randomized_response(np.array([0, 1]), 3, 1.0,
                                       np.zeros((2, 1), np.uint32))


def test_out_of_range_codes_raise_eagerly_and_release_minus_one_in_graph():
    layer = layers.CodeRandomizedResponse(1.0, 4)
    with pytest.raises(ArgumentError, match=r"\[0, 4\)"):
        layer(np.array([0, 4], np.int32))
    inputs = keras.Input((), dtype="int32")
    model = keras.Model(inputs, layer(inputs))
    out = np.asarray(model.predict(np.array([1, 7, -2], np.int32),
                                   verbose=0))
    assert out[1] == -1 and out[2] == -1 and 0 <= out[0] < 4


def test_noise_off_is_identity_and_says_none():
    layer = layers.CodeRandomizedResponse(1.0, 3, noise=False)
    codes = np.array([0, 1, 2, 2], np.int32)
    np.testing.assert_array_equal(layer(codes).numpy(), codes)
    np.testing.assert_array_equal(layer.transition_matrix(), np.eye(3))
    assert not layer.guarantee().is_private


def test_config_round_trip():
    layer = layers.CodeRandomizedResponse(2.5, 6)
    clone = type(layer).from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    decoder = code_lib.CodeDecoder(6, 3)
    assert type(decoder).from_config(decoder.get_config()).get_config() == \
        decoder.get_config()


# ---------------------------------------------------------------------------
# Model pieces and losses.


def test_argmax_code_and_non_finite_rows():
    logits = np.array([[0.1, 2.0, -1.0], [5.0, 5.0, 1.0],
                       [np.nan, 0.0, 0.0], [np.inf, 0.0, 0.0]], np.float32)
    np.testing.assert_array_equal(code_lib.ArgmaxCode()(logits).numpy(),
                                  [1, 0, -1, -1])


def test_decoder_initial_table_and_out_of_range_codes():
    np.testing.assert_array_equal(
        code_lib.initial_table(5, 2).argmax(axis=1), [0, 1, 0, 1, 0])
    decoder = code_lib.CodeDecoder(5, 2)
    out = decoder(np.array([0, 3, 5, -1], np.int32)).numpy()
    assert np.isfinite(out[:2]).all() and np.isnan(out[2:]).all()


def test_expected_loss_is_the_closed_form():
    rng = np.random.default_rng(1)
    m, k, batch = 4, 3, 6
    logits = rng.normal(size=(batch, m)).astype(np.float32)
    labels = rng.integers(0, k, batch)
    transition = categorical.transition_matrix(1.0, m).astype(np.float32)
    decoder = code_lib.CodeDecoder(m, k)
    decoder.build((None,))
    table = rng.normal(size=(m, k)).astype(np.float32)
    decoder.table.assign(table)
    q = code_lib.CodeChannel(transition)(logits).numpy()
    expected = decoder(q).numpy()
    # By hand: q = softmax(z) T, loss = -sum_c q_c log softmax(table_c)_y.
    soft = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    log_p = table - np.log(np.exp(table).sum(1, keepdims=True))
    q_hand = soft @ transition
    np.testing.assert_allclose(q, q_hand, rtol=1e-5)
    loss = code_lib.ExpectedNegativeLogLikelihood(reduction=None)(
        labels, expected).numpy()
    np.testing.assert_allclose(
        loss, -(q_hand * log_p[:, labels].T).sum(1), rtol=1e-4)


def test_forward_corrected_loss_is_the_closed_form():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(5, 3)).astype(np.float32)
    labels = rng.integers(0, 3, 5)
    transition = categorical.transition_matrix(0.7, 3)
    loss = losses.ForwardCorrectedCrossentropy(transition, reduction=None)(
        labels, logits).numpy()
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    noisy = p @ transition
    np.testing.assert_allclose(loss, -np.log(noisy[np.arange(5), labels]),
                               rtol=1e-5)
    with pytest.raises(ArgumentError, match="transition"):
        losses.ForwardCorrectedCrossentropy(np.eye(3))


# ---------------------------------------------------------------------------
# The limit.


def test_limit_closed_forms():
    assert limit.identification_bound(1.0, 4) == pytest.approx(
        math.e / (math.e + 3))
    # The examples of docs/mechanisms.md, K = 4, a = 0.85.
    assert [round(limit.rr_limit(e, 4, 0.85), 2) for e in (1, 2, 4, 8)] == \
        [0.43, 0.62, 0.81, 0.85]
    # delta: (e^eps + (K - 1) delta) / (e^eps + K - 1).
    assert limit.identification_bound(2.0, 3, 0.01) == pytest.approx(
        (math.exp(2) + 0.02) / (math.exp(2) + 2))
    # A strong prior: at tiny epsilon the Bayes decoder names the majority.
    assert limit.rr_limit(1e-6, 3, 1.0, [0.7, 0.2, 0.1]) == pytest.approx(
        0.7, abs=1e-5)
    with pytest.raises(ArgumentError, match="prior"):
        limit.rr_limit(1.0, 3, 1.0, [0.5, 0.5])


@pytest.mark.parametrize("k,a,prior", [
    (4, 0.85, None), (2, 0.9, [0.8, 0.2]), (3, 0.7, [0.5, 0.3, 0.2])])
def test_limit_matches_monte_carlo_of_rr_on_predictions(k, a, prior):
    rng = np.random.default_rng(3)
    n, epsilon = 400000, 1.3
    weights = np.full(k, 1.0 / k) if prior is None else np.array(prior)
    y = rng.choice(k, n, p=weights)
    wrong = (y + 1 + rng.integers(0, k - 1, n)) % k
    predicted = np.where(rng.random(n) < a, y, wrong)
    p = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    other = (predicted + 1 + rng.integers(0, k - 1, n)) % k
    released = np.where(rng.random(n) < p, predicted, other)
    # Bayes: for each released value, the class most often behind it
    # (estimated on a first half, scored on the second).
    half = n // 2
    table = np.zeros((k, k))
    np.add.at(table, (released[:half], y[:half]), 1)
    decode = table.argmax(axis=1)
    accuracy = float((decode[released[half:]] == y[half:]).mean())
    expected = limit.rr_limit(epsilon, k, a, prior)
    assert accuracy == pytest.approx(expected, abs=4 * math.sqrt(
        0.25 / half))


def test_reference_from_a_confusion_matrix():
    # Errors spread evenly and a uniform prior: the closed form of rr_limit.
    k, a = 4, 0.85
    even = np.full((k, k), (1 - a) / (k - 1) * 300)
    np.fill_diagonal(even, a * 300)
    for epsilon in (0.5, 1.0, 4.0):
        assert limit.rr_reference(epsilon, even) == pytest.approx(
            limit.rr_limit(epsilon, k, a))
    # A skewed prior (AG-like) and a classifier that never names the
    # rarest class: rr_limit's even-errors model sends some of its errors
    # to that class, which Bayes' rule then decodes to the majority, and
    # puts the limit above anything this classifier allows; its confusion
    # matrix does not.
    skewed = np.array([[600, 100, 0], [80, 170, 0], [30, 20, 0]])
    accuracy = accuracy_of(skewed)
    prior = skewed.sum(axis=1)
    assert limit.rr_limit(8.0, 3, accuracy, prior) > accuracy + 0.03
    assert limit.rr_reference(8.0, skewed) == pytest.approx(accuracy,
                                                            abs=0.002)
    # At a tiny epsilon the release says nothing: the majority class.
    assert limit.rr_reference(1e-9, skewed) == pytest.approx(
        700 / skewed.sum(), abs=1e-6)
    # Monte Carlo: randomized response on those predictions, decoded by
    # the best table (fitted on one half, scored on the other).
    rng = np.random.default_rng(5)
    y = np.repeat(np.repeat(np.arange(3), 3), skewed.ravel())
    predicted = np.tile(np.arange(3), 9)[np.repeat(np.arange(9),
                                                    skewed.ravel())]
    y, predicted = np.tile(y, 400), np.tile(predicted, 400)
    epsilon = 1.5
    p = math.exp(epsilon) / (math.exp(epsilon) + 2)
    other = (predicted + 1 + rng.integers(0, 2, len(y))) % 3
    released = np.where(rng.random(len(y)) < p, predicted, other)
    order = rng.permutation(len(y))
    half = len(y) // 2
    fit, score = order[:half], order[half:]
    table = np.zeros((3, 3))
    np.add.at(table, (released[fit], y[fit]), 1)
    accuracy = float((table.argmax(axis=1)[released[score]]
                      == y[score]).mean())
    assert accuracy == pytest.approx(limit.rr_reference(epsilon, skewed),
                                     abs=4 * math.sqrt(0.25 / half))
    report = limit.limit_report(categorical.code_guarantee(2.0, 3), 0.7, 3,
                                reference_confusion=skewed)
    assert report["reference_model"] == "confusion"
    assert report["reference_accuracy"] == pytest.approx(accuracy_of(
        skewed))
    assert report["limit"] == pytest.approx(limit.reference_limit(
        report["epsilon_per_text"], skewed))
    assert report["randomized_response"] == pytest.approx(
        limit.rr_reference(report["epsilon_per_text"], skewed))
    with pytest.raises(ArgumentError, match="reference_confusion"):
        limit.limit_report(categorical.code_guarantee(2.0, 3), 0.7, 3,
                           reference_confusion=np.eye(2))
    with pytest.raises(ArgumentError, match="confusion"):
        limit.rr_reference(1.0, [[1, -1], [0, 2]])


def accuracy_of(confusion):
    return np.trace(confusion) / np.sum(confusion)


def test_per_text_epsilon_converts_exactly_or_not_at_all():
    coordinate = laplace.laplace_guarantee(0.5, dimension=8)
    assert limit.per_text_epsilon(coordinate)[0] == pytest.approx(4.0)
    vector = laplace.laplace_guarantee(3.0, 8, "vector")
    assert limit.per_text_epsilon(vector) == (3.0, vector.delta)
    code = categorical.code_guarantee(2.0, 4)
    assert limit.per_text_epsilon(code)[0] == code.value
    assert limit.per_text_epsilon(metric.dchi_guarantee(50.0)) is None
    report = limit.limit_report(metric.dchi_guarantee(50.0), 0.7, 2)
    assert not report["applies"] and "metric" in report["reason"]
    none = guarantee_lib.Guarantee.none("x", "off")
    assert not limit.limit_report(none, 0.9, 2)["applies"]


def test_limit_report_kind_and_share():
    code = categorical.code_guarantee(2.0, 4)
    uniform = limit.limit_report(code, 0.6, 4)
    assert uniform["kind"] == limit.THEOREM
    assert uniform["share_of_limit"] == pytest.approx(
        0.6 / limit.identification_bound(code.value, 4))
    with_reference = limit.limit_report(code, 0.6, 4, 0.85)
    assert with_reference["kind"] == limit.REFERENCE
    assert with_reference["limit"] < uniform["limit"]
    # The bound is a theorem for any prior (the linear program).
    skewed = limit.limit_report(code, 0.6, 4, prior=[5, 1, 1, 1])
    assert skewed["bound_kind"] == skewed["kind"] == limit.THEOREM
    binary = limit.limit_report(categorical.code_guarantee(1.0, 2), 0.6, 2,
                                prior=[5, 1])
    assert binary["kind"] == limit.THEOREM
    # With the test size: the share's 95% interval (binomial), which may
    # reach above 1 (the limit bounds the expected accuracy).
    sized = limit.limit_report(code, 0.6, 4, num_texts=400)
    low, high = sized["share_of_limit_95"]
    half = 1.96 * math.sqrt(0.6 * 0.4 / 400) / sized["limit"]
    assert low == pytest.approx(sized["share_of_limit"] - half)
    assert high == pytest.approx(sized["share_of_limit"] + half)


# ---------------------------------------------------------------------------
# Label privacy accounting.


def test_label_guarantee_composes_with_the_text():
    label = categorical.label_guarantee(1.0, 2)
    text = laplace.laplace_guarantee(2.0, 8, "vector")
    example = categorical.with_label(text, label)
    assert example.unit == guarantee_lib.PER_EXAMPLE
    assert example.value == pytest.approx(text.value + label.value)
    token = metric.dchi_guarantee(80.0)
    combined = categorical.with_label(token, label)
    assert combined.is_metric and combined.value == token.value
    assert f"{label.value:.6g}-LDP" in combined.composition
    assert combined.details["label_epsilon"] == label.value


def test_sweep_summary_draws_accuracy_against_the_limit(tmp_path):
    from tfdptext.evaluation import sweep

    code = categorical.code_guarantee(1.0, 2)
    rows = []
    for eps in (0.5, 1.0, 2.0):
        report = limit.limit_report(categorical.code_guarantee(eps, 2),
                                    0.6, 2, 0.9, [1, 1])
        rows.append({"cell": f"epsilon{eps:g}", "epsilon": eps,
                     "test_accuracy": 0.6, "n_test": 100,
                     "guarantee": str(code),
                     "epsilon_per_text": report["epsilon_per_text"],
                     "limit": report["limit"],
                     "share_of_limit": report["share_of_limit"],
                     "_limit": report})
    sweep.write_summary(rows, str(tmp_path), "epsilon")
    assert (tmp_path / "limit.png").stat().st_size > 1000
    table = (tmp_path / "summary.md").read_text()
    assert "share_of_limit" in table and "| _limit" not in table
    curve = sweep.limit_curve(rows[0]["_limit"], [1.0])
    assert curve[0] == pytest.approx(limit.limit_at(
        1.0, 2, [0.5, 0.5], reference_accuracy=0.9))
    # Two classes, even errors, uniform prior: randomized response on
    # the prediction is the best channel on it.
    assert curve[0] == pytest.approx(limit.rr_limit(1.0, 2, 0.9, [1, 1]))


def test_bayes_table_decodes_by_the_prior_and_the_channel():
    # A weak channel and a skewed prior: every code decodes to the
    # majority class; a strong channel: code c to class c.
    weak = categorical.transition_matrix(0.2, 3)
    table = code_lib.bayes_table([0.7, 0.2, 0.1], weak, 3)
    np.testing.assert_array_equal(table.argmax(axis=1), [0, 0, 0])
    strong = categorical.transition_matrix(6.0, 4)
    table = code_lib.bayes_table([0.5, 0.5], strong, 4)
    np.testing.assert_array_equal(table.argmax(axis=1), [0, 1, 0, 1])
    # Rows are log-probabilities: P(class | code) by Bayes' rule.
    joint = np.array([0.5, 0.5])[:, None] * (
        np.array([[0.5, 0, 0.5, 0], [0, 0.5, 0, 0.5]]) @ strong)
    expected = (joint.T + 0.5) / (joint.T + 0.5).sum(1, keepdims=True)
    np.testing.assert_allclose(np.exp(table), expected, rtol=1e-5)
    # A class absent from the training labels (prior 0) keeps a finite,
    # lowest logit in every row (a small run of a 4-class data set).
    table = code_lib.bayes_table([0.6, 0.4, 0.0, 0.0],
                                 categorical.transition_matrix(1.0, 4), 4)
    assert np.isfinite(table).all()
    assert (table[:, 2:] < table[:, :2].min(axis=1, keepdims=True)).all()


def test_fewer_codes_than_classes_share_codes():
    # m = 2 < K = 4 on AG's prior: classes 1, 2, 3 share code 1.
    prior = [0.58, 0.371, 0.007, 0.042]
    channel = categorical.transition_matrix(2.0, 2)
    table = code_lib.bayes_table(prior, channel, 2, groups=[0, 1, 1, 1])
    np.testing.assert_array_equal(table.argmax(axis=1), [0, 1])
    sent = code_lib.code_assignment(2, np.asarray(prior), [0, 1, 1, 1])
    joint = np.asarray(prior)[:, None] * (sent @ channel)
    pseudo = 0.5 * np.asarray(prior) + 0.125
    expected = (joint.T + pseudo) / (joint.T + pseudo).sum(1, keepdims=True)
    np.testing.assert_allclose(np.exp(table), expected, rtol=1e-5)
    # Without groups, the m most frequent classes own the codes.
    np.testing.assert_array_equal(
        code_lib.code_assignment(3, np.asarray(prior)).argmax(axis=1),
        [0, 1, 0, 2])
    with pytest.raises(ArgumentError, match="groups"):
        code_lib.code_assignment(2, np.asarray(prior), [0, 1, 2, 1])


def test_refit_decoder_is_the_posterior_of_the_released_codes():
    decoder = code_lib.CodeDecoder(3, 2)
    decoder.build((None,))
    transition = categorical.transition_matrix(1.0, 3)
    logits = np.array([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0],
                       [5.0, 0.0, 0.0]], np.float32)
    labels = np.array([0, 1, 1, 0])

    def head(features, training=False):
        return features

    batches = [(logits[:2], labels[:2]), (logits[2:], labels[2:])]
    table = code_lib.refit_decoder(head, decoder, transition, batches,
                                   [0.5, 0.5])
    soft = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    q = soft @ transition
    counts = np.stack([q[labels == k].sum(0) for k in (0, 1)], axis=1)
    counts += 0.5
    np.testing.assert_allclose(
        np.exp(table), counts / counts.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(decoder.table.numpy(), table)
