"""The limit as a linear program over LDP channels
(tfdptext.privacy.identification, tfdptext.privacy.limit): closed forms
(uniform prior; K = 2 by the vertices of its polygon), the examples of
docs/mechanisms.md section 4, the certificate, and the reference limit.
Pure numpy and SciPy: fast."""

import itertools
import math

import numpy as np
import pytest

from tfdptext.errors import ArgumentError
from tfdptext.privacy import categorical
from tfdptext.privacy import identification
from tfdptext.privacy import limit

AG_PRIOR = [0.58, 0.371, 0.007, 0.042]


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
def test_uniform_prior_is_the_closed_form(k, epsilon):
    value = identification.identification_limit(np.ones(k), epsilon)
    assert value == pytest.approx(math.exp(epsilon) / (math.exp(epsilon)
                                                       + k - 1), abs=1e-9)
    # With delta: never above the closed-form bound (its proof holds for
    # every decoder), and equal for K = 2.
    with_delta = identification.identification_limit(np.ones(k), epsilon,
                                                      0.02)
    closed = limit.identification_bound(epsilon, k, 0.02)
    assert with_delta <= closed + 1e-9
    if k == 2:
        assert with_delta == pytest.approx(closed, abs=1e-9)


def _two_class_optimum(prior, epsilon, delta):
    """max pi0 a + pi1 b over the polygon of (a, b) = (Q(0|0), Q(1|1)) of
    binary (eps, delta)-LDP channels, by enumerating its vertices (every
    intersection of two of its edges' lines)."""
    r = math.exp(epsilon)
    # Rows (u, v, c): u a + v b <= c.
    lines = [(1, r, r + delta), (r, 1, r + delta), (-1, -r, delta - 1),
             (-r, -1, delta - 1), (-1, 0, 0), (0, -1, 0), (1, 0, 1),
             (0, 1, 1)]
    best = -1.0
    for (u1, v1, c1), (u2, v2, c2) in itertools.combinations(lines, 2):
        det = u1 * v2 - u2 * v1
        if abs(det) < 1e-12:
            continue
        a = (c1 * v2 - c2 * v1) / det
        b = (u1 * c2 - u2 * c1) / det
        if all(u * a + v * b <= c + 1e-12 for u, v, c in lines):
            best = max(best, prior[0] * a + prior[1] * b)
    return best


@pytest.mark.parametrize("prior", [[0.9, 0.1], [0.6, 0.4], [0.99, 0.01]])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("delta", [0.0, 0.01, 0.1])
def test_two_classes_match_the_vertices_of_the_polygon(prior, epsilon,
                                                       delta):
    value = identification.identification_limit(prior, epsilon, delta)
    assert value == pytest.approx(_two_class_optimum(prior, epsilon, delta),
                                  abs=1e-9)
    if delta == 0.0:  # K = 2: randomized response, Bayes-decoded
        assert value == pytest.approx(
            limit.rr_limit(epsilon, 2, 1.0, prior), abs=1e-9)


def test_the_examples_of_the_issue():
    # AG's prior: the program, against K-ary randomized response.
    assert [round(limit.bound(e, 4, AG_PRIOR), 3) for e in (0.5, 1, 2)] \
        == [0.592, 0.695, 0.838]
    assert [round(limit.rr_limit(e, 4, 1.0, AG_PRIOR), 3)
            for e in (0.5, 1, 2)] == [0.587, 0.655, 0.788]
    # At eps 1 the optimum is binary randomized response between the two
    # big classes: only guesses 0 and 1 are ever made.
    weights = np.diag(AG_PRIOR)
    optimum = identification.best_channel(weights, 1.0)
    assert optimum.used_guesses(weights) == [0, 1]
    # K = 2 with delta: above randomized response (0.9000).
    assert round(limit.bound(1.0, 2, [0.9, 0.1], 0.01), 4) == 0.9010
    assert limit.rr_limit(1.0, 2, 1.0, [0.9, 0.1], 0.01) == \
        pytest.approx(0.9, abs=1e-4)


@pytest.mark.parametrize("delta", [0.0, 0.05])
def test_the_channel_is_ldp_and_the_value_is_certified(delta):
    rng = np.random.default_rng(7)
    for _ in range(5):
        k = int(rng.integers(2, 6))
        weights = rng.random((k, k)) ** 3
        epsilon = float(rng.uniform(0.2, 3.0))
        optimum = identification.best_channel(weights, epsilon, delta)
        assert identification.is_ldp(optimum.channel, epsilon, delta,
                                     tolerance=1e-7)
        np.testing.assert_allclose(optimum.channel.sum(axis=1), 1.0)
        assert optimum.achieved <= optimum.value + 1e-12
        assert optimum.value - optimum.achieved < 1e-6
        # Any LDP channel, e.g. randomized response on a random grouping
        # of the inputs, stays below the certified value.
        for m in range(2, k + 1):
            groups = rng.integers(0, m, k)
            t = categorical.transition_matrix(epsilon, m)
            channel = np.zeros((k, k))
            channel[:, :m] = t[groups]
            assert (weights * channel).sum() <= optimum.value + 1e-12


def test_reference_limit_between_randomized_response_and_the_bound():
    confusion = np.array([[600, 100, 0], [80, 170, 0], [30, 20, 0]])
    prior = confusion.sum(axis=1)
    for epsilon in (0.5, 1.0, 2.0, 4.0):
        value = limit.reference_limit(epsilon, confusion)
        assert limit.rr_reference(epsilon, confusion) <= value + 1e-12
        assert value <= limit.bound(epsilon, 3, prior) + 1e-12
    # Tiny epsilon: nothing passes, the majority class. Large: the best
    # relabelling of the predictions (here the predictions themselves).
    assert limit.reference_limit(1e-6, confusion) == pytest.approx(
        700 / confusion.sum(), abs=1e-5)
    assert limit.reference_limit(40.0, confusion) == pytest.approx(
        770 / confusion.sum())


def test_limit_report_uses_the_programs():
    code = categorical.code_guarantee(1.0, 4)
    skewed = limit.limit_report(code, 0.6, 4, prior=AG_PRIOR)
    assert skewed["kind"] == skewed["bound_kind"] == limit.THEOREM
    assert skewed["limit"] == pytest.approx(limit.bound(code.value, 4,
                                                        AG_PRIOR))
    assert skewed["randomized_response"] < skewed["limit"] - 0.03
    confusion = np.array([[500, 60, 10, 10], [40, 300, 20, 11],
                          [3, 2, 2, 0], [10, 10, 2, 20]])
    report = limit.limit_report(code, 0.6, 4, prior=confusion.sum(axis=1),
                                reference_confusion=confusion)
    assert report["kind"] == limit.REFERENCE
    assert report["limit"] == pytest.approx(limit.reference_limit(
        code.value, confusion))
    assert report["randomized_response"] <= report["limit"] + 1e-12
    assert report["limit"] <= report["bound_any_classifier"] + 1e-12


def test_bad_arguments_and_the_size_limit():
    with pytest.raises(ArgumentError, match="weights"):
        identification.best_channel(np.ones((2, 3)), 1.0)
    with pytest.raises(ArgumentError, match="epsilon"):
        identification.best_channel(np.eye(2), 0.0)
    big = identification.MAX_CLASSES_DELTA + 1
    with pytest.raises(ArgumentError, match="K <="):
        identification.best_channel(np.eye(big), 1.0, 0.01)
    report = limit.limit_report(categorical.code_guarantee(1.0, 40), 0.5,
                                40, prior=np.arange(1, 41))
    assert not report["applies"] and "linear program" in report["reason"]
    # A huge epsilon: the non-private optimum (no overflow).
    assert identification.identification_limit(AG_PRIOR, 500.0) == \
        pytest.approx(1.0)


def test_code_grouping_reaches_the_program_on_ags_prior():
    def transition_of(epsilon):
        return lambda m: categorical.transition_matrix(epsilon, m)

    for epsilon in (0.5, 1.0, 2.0):
        plan = identification.code_grouping(AG_PRIOR, epsilon,
                                            transition_of(epsilon))
        # Two codes: the two big classes, the small ones sharing class 1's.
        assert plan.num_codes == 2 and plan.groups[:2] == (0, 1)
        assert plan.accuracy == pytest.approx(plan.bound, abs=1e-6)
        assert plan.bound == pytest.approx(limit.bound(epsilon, 4,
                                                       AG_PRIOR))
    plan = identification.code_grouping(AG_PRIOR, 8.0, transition_of(8.0))
    assert plan.num_codes == 4 and plan.groups == (0, 1, 2, 3)
    uniform = identification.code_grouping(np.ones(3), 1.0,
                                            transition_of(1.0))
    assert uniform.num_codes == 3
    assert identification.top_m_grouping(AG_PRIOR, 3).tolist() == \
        [0, 1, 0, 2]
