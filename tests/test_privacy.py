"""Closed-form checks of the accounting functions."""

import json
import math

import numpy as np
import pytest
from scipy.spatial import distance

from tfdptext import privacy
from tfdptext.privacy import dropout
from tfdptext.privacy import guarantee as g_lib
from tfdptext.privacy import laplace


def test_dropout_epsilon_matches_paper_example():
    assert privacy.dropout_epsilon(1.0, 0.5) == pytest.approx(0.6201, abs=1e-4)
    assert round(privacy.dropout_epsilon(1.0, 0.5), 2) == 0.62


@pytest.mark.parametrize("eps,mu", [(0.1, 0.1), (1.0, 0.3), (5.0, 0.8),
                                    (0.05, 0.0)])
def test_dropout_epsilon_closed_form(eps, mu):
    expected = math.log((1 - mu) * math.exp(eps) + mu)
    assert privacy.dropout_epsilon(eps, mu) == pytest.approx(expected)


def test_dropout_epsilon_limits_and_large_epsilon():
    assert privacy.dropout_epsilon(2.0, 0.0) == pytest.approx(2.0)
    assert privacy.dropout_epsilon(2.0, 1.0) == pytest.approx(0.0)
    # ln(0.5 e^1000 + 0.5) = 1000 + ln 0.5, no overflow.
    assert privacy.dropout_epsilon(1000.0, 0.5) == pytest.approx(
        1000 + math.log(0.5))


def test_effective_dropout_rate_counts():
    assert dropout.num_dropped(4, 0.5) == 2
    assert dropout.num_dropped(3, 0.5) == 2  # half rounds up
    assert dropout.num_dropped(1, 0.3) == 0
    assert privacy.effective_dropout_rate(3, 0.5) == pytest.approx(2 / 3)
    assert dropout.worst_case_rate(0.5, 1, 10) == pytest.approx(0.5)
    assert dropout.worst_case_rate(0.3, 1, 10) == 0.0


def test_laplace_scale_and_vector_conversion():
    assert privacy.laplace_scale(0.5) == 2.0
    assert privacy.laplace_scale(0.5, sensitivity=384) == 768.0
    assert privacy.vector_epsilon(0.05, 384) == pytest.approx(19.2)
    assert privacy.per_coordinate_epsilon(19.2, 384) == pytest.approx(0.05)
    assert laplace.noise_scale(1.0, 384, "vector") == 384.0
    assert laplace.noise_scale(1.0, 384, "per_coordinate") == 1.0


def test_laplace_guarantee_states_unit_and_vector_epsilon():
    g = privacy.laplace_guarantee(0.05, 384)
    assert g.unit == g_lib.PER_COORDINATE
    assert g.details["representation_epsilon"] == pytest.approx(19.2)
    # delta on TensorFlow's 23-bit grid (the default when the randomness is
    # not known): 2.0e-4 since the grid is modelled (4.8e-5 before, for
    # continuous exponentials); 3.7e-7 from random words (56-bit grid).
    assert "per coordinate" in str(g) and "(19.2, 0.0002)-LDP" in str(g)
    words = privacy.laplace_guarantee(0.05, 384, uniform_bits=56)
    assert f"{words.details['representation_delta']:.2g}" == "3.7e-07"
    whole = privacy.to_representation_level(g)
    assert whole.unit == g_lib.PER_REPRESENTATION
    assert whole.value == pytest.approx(19.2)
    vec = privacy.laplace_guarantee(1.0, 384, "vector")
    assert vec.unit == g_lib.PER_REPRESENTATION and vec.value == 1.0


def test_with_dropout_requires_representation_level():
    per_coord = privacy.laplace_guarantee(1.0, 4)
    with pytest.raises(ValueError, match="per-representation"):
        privacy.with_dropout(per_coord, 0.5)
    whole = privacy.laplace_guarantee(1.0, 4, "vector")
    g = privacy.with_dropout(whole, 0.5, min_tokens=2, max_tokens=20)
    assert g.unit == g_lib.PER_TOKEN_SUBSTITUTION
    # Worst effective rate over d in [2, 20] for mu = 0.5 is 0.5 (even d).
    assert g.value == pytest.approx(privacy.dropout_epsilon(1.0, 0.5))


def test_metric_functions():
    assert privacy.expected_noise_norm(10.0, 384) == pytest.approx(38.4)
    table = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    assert privacy.sequence_distance(table, [0, 1], [1, 2]) == pytest.approx(10)
    assert privacy.sequence_bound(2.0, [5.0, 5.0]) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="token_ids_a"):
        privacy.sequence_distance(table, [0, 1], [1])


def test_randomized_response_probabilities():
    assert privacy.keep_probability(math.log(3)) == pytest.approx(0.75)
    assert privacy.flip_probability(math.log(3)) == pytest.approx(0.25)
    assert privacy.keep_probability(800.0) == pytest.approx(1.0)
    g = privacy.rr_guarantee(1.0, 256)
    assert g.unit == g_lib.PER_BIT and "Hamming" in g.metric
    assert "256-LDP" in g.composition


def _bits(v, n, seed):
    return (np.random.default_rng(seed).random((v, n)) < 0.4).astype(np.uint8)


def test_hamming_average_and_max_exact_match_brute_force():
    bits = _bits(150, 37, 0)
    brute = distance.cdist(bits, bits, "hamming") * bits.shape[1]
    avg = privacy.average_distance(bits, "hamming")
    assert avg.exact and avg.value == pytest.approx(brute.mean())
    mx = privacy.max_distance(bits, "hamming")
    assert mx.exact and mx.value == brute.max()


def test_euclidean_exact_and_sampled_average():
    points = np.random.default_rng(1).normal(size=(300, 8))
    brute = distance.cdist(points, points)
    avg = privacy.average_distance(points, block_size=64)
    assert avg.value == pytest.approx(brute.mean(), rel=1e-9)
    assert privacy.max_distance(points, block_size=64).value == pytest.approx(
        brute.max())
    sampled = privacy.average_distance(points, num_samples=20000, seed=3)
    assert not sampled.exact and sampled.std_error > 0
    assert abs(sampled.value - brute.mean()) < 4.5 * sampled.std_error
    lower = privacy.max_distance(points, num_samples=1000, seed=3)
    assert lower.is_lower_bound and lower.value <= brute.max() + 1e-9


def test_privacy_ratio_and_matched_epsilon():
    assert privacy.privacy_ratio(10.0, 4.0) == 2.5
    assert privacy.matched_epsilon(2.0, 10.0, 4.0) == pytest.approx(5.0)
    # eps_B * P_B == eps_A * P_A
    assert privacy.matched_epsilon(2.0, 10.0, 4.0) * 4.0 == pytest.approx(20)


def test_guarantee_json_round_trip_and_none():
    g = privacy.dchi_guarantee(25.0, 384, "MiniLM token embeddings", True)
    again = privacy.Guarantee.from_json(g.to_json())
    assert again == g
    assert json.loads(g.to_json())["unit"] == "per_token"
    none = privacy.Guarantee.none("x", "noise is off")
    assert not none.is_private and "NO privacy" in str(none)
    assert privacy.Guarantee.from_dict(none.to_dict()) == none
    with pytest.raises(ValueError, match="unit"):
        privacy.Guarantee("m", "epsilon", 1.0, "per_galaxy")


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True,
                                 "1"])
def test_invalid_epsilon_named(bad):
    with pytest.raises(ValueError, match="epsilon"):
        privacy.laplace_scale(bad)
    with pytest.raises(ValueError, match="epsilon"):
        privacy.keep_probability(bad)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_invalid_rate_named(bad):
    with pytest.raises(ValueError, match="rate"):
        privacy.dropout_epsilon(1.0, bad)


def test_invalid_points():
    with pytest.raises(ValueError, match="points"):
        privacy.average_distance(np.array([[0, 2]]), "hamming")
    with pytest.raises(ValueError, match="metric"):
        privacy.average_distance(np.zeros((2, 2)), "cosine")
