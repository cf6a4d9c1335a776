"""TruncatedGumbel (Carvalho et al. 2021): the math against independent
forms (Poisson sizes, logistic differences, the truncated Gumbel CDF), the
layer, the offline privatizer and the phone model against the exact
output distribution on a 2-D toy table, the guarantee, float safety and
argument checks."""

import math

import keras
import numpy as np
import pytest
from scipy import stats

import substitution_checks as checks
from tfdptext import layers
from tfdptext import mechanisms
from tfdptext.offline import TruncatedGumbelCorpusPrivatizer
from tfdptext.privacy import guarantee as g_lib
from tfdptext.substitution import backend
from tfdptext.substitution import race
from tfdptext.substitution import truncated_gumbel as tg

SCALE = 0.8
V = len(checks.TABLE)
CANDIDATES = V - 1
DRAWS = 20000


def _layer(max_candidates=CANDIDATES, **kwargs):
    return layers.TruncatedGumbelTextPrivatizer(
        1.0, checks.TABLE, scale=SCALE, max_candidates=max_candidates,
        special_token_ids=checks.SPECIAL,
        passthrough_token_ids=checks.PASSTHROUGH, **kwargs)


def _exact(layer, word):
    return tg.distribution_matrix(
        checks.TABLE, [word], np.arange(1, V), layer.max_candidates,
        layer.size_probabilities(), layer.scale, layer.max_distance)[0]


def test_sizes_are_the_truncated_poisson_exactly_in_integers():
    mu = tg.poisson_mean(30000)
    assert mu == pytest.approx(math.log(29999))
    probs = tg.size_probabilities(mu, 32)
    expected = stats.poisson.pmf(np.arange(33), mu)
    expected /= expected.sum()
    assert probs[0] == pytest.approx(expected[0] + expected[1])
    assert np.allclose(probs[1:], expected[2:], rtol=1e-9, atol=1e-300)
    thresholds = tg.size_thresholds(mu, 32)
    implemented = tg.implemented_size_probabilities(thresholds)
    assert (implemented > 0).all() and implemented.sum() == 1.0
    assert np.abs(implemented - probs).max() <= 2.0 / tg.SCALE
    # Every 23-bit integer gives K = 1 + #(thresholds <= it).
    cells = np.arange(0, tg.SCALE, 997, dtype=np.float64)
    u = (cells + 0.5) / tg.SCALE
    sizes = tg.draw_sizes(u, thresholds, backend.NUMPY)
    assert np.array_equal(sizes, 1 + np.searchsorted(thresholds, cells,
                                                     side="right"))


def test_two_candidates_win_by_the_logistic_law_without_truncation():
    # Gumbel differences are logistic: P(d1 + G1 < d2 + G2) = 1 / (1 +
    # exp(-(d2 - d1) / b)); a bound of 60 b truncates nothing visible.
    for gap in (0.0, 0.3, 2.0):
        p = tg.win_probabilities([1.0, 1.0 + gap], 1.0, 60.0)
        assert p.sum() == pytest.approx(1.0, abs=1e-10)
        assert p[0] == pytest.approx(1.0 / (1.0 + math.exp(-gap)), rel=1e-8)


def test_noise_follows_the_truncated_gumbel_and_stays_finite():
    b, bound = 0.7, 1.5
    u = race.numpy_uniforms((200000,))
    g = tg.truncated_gumbel(u, b, bound, backend.NUMPY)
    assert np.abs(g).max() <= bound

    def cdf(x):
        f = stats.gumbel_r(scale=b).cdf
        return (f(x) - f(-bound)) / (f(bound) - f(-bound))
    assert stats.kstest(g, cdf).pvalue > 1e-4
    # At the float-safety limit every cell midpoint gives finite noise.
    cells = np.concatenate([np.arange(0, 2**23, 4099), [2**23 - 1]])
    for b in (bound / tg.MAX_RATIO, 100.0):
        g = np.asarray(tg.truncated_gumbel((cells + 0.5) / 2**23, b, bound,
                                           backend.TENSORFLOW))
        assert np.isfinite(g).all() and np.abs(g).max() <= bound
    with pytest.raises(ValueError, match="`scale` must be at least"):
        tg.check_scale(bound / tg.MAX_RATIO / 2, bound)


@pytest.mark.parametrize("word", checks.WORDS)
def test_layer_and_offline_match_the_exact_distribution(word):
    layer = _layer()
    probs = _exact(layer, word)
    assert probs.sum() == pytest.approx(1.0, abs=1e-9)
    assert (probs[1:] > 0).all() and probs[0] == 0
    counts = checks.layer_counts(layer, word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4
    counts = checks.offline_counts(layer.corpus_privatizer(), word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4


def test_few_candidates_only_reach_the_nearest_words():
    layer = _layer(max_candidates=2)
    for word in checks.WORDS:
        probs = _exact(layer, word)
        d = np.linalg.norm(checks.TABLE[1:] - checks.TABLE[word], axis=1)
        reach = 1 + np.argsort(d, kind="stable")[:2]
        assert set(np.flatnonzero(probs)) == set(reach)
        counts = checks.offline_counts(layer.corpus_privatizer(), word,
                                       DRAWS, V)
        assert set(np.flatnonzero(counts)) <= set(reach)
        assert checks.chi_square_pvalue(counts, probs) > 1e-4


def test_phone_model_takes_random_words_and_matches():
    layer = _layer()
    checks.check_phone_model(layer, [1, 4],
                             [_exact(layer, 1), _exact(layer, 4)],
                             draws=10000)


def test_guarantee_is_none_for_the_grid_that_runs():
    """Every word within reach: the continuous noise's largest log-ratio
    is computed (kept in the details), but the noise runs on a grid whose
    own log-ratios are not computed, so no epsilon is claimed."""
    layer = _layer()
    g = layer.guarantee()
    assert not g.is_private and g.mechanism == \
        "truncated_gumbel_text_to_text"
    assert "grid" in g.conditions[0] and "2^-23" in g.conditions[0]
    matrix = tg.distribution_matrix(
        checks.TABLE, range(1, V), np.arange(1, V), CANDIDATES,
        layer.size_probabilities(), SCALE, layer.max_distance)
    worst = max(tg.log_ratio(matrix[a], matrix[b])
                for a in range(CANDIDATES) for b in range(CANDIDATES))
    continuous = g.details["continuous_noise_epsilon"]
    assert continuous == pytest.approx(worst, rel=1e-5)
    assert continuous >= worst
    assert layer.pair_bound(1, 4)[0] <= continuous
    assert layer.pair_bound(1, 4)[0] == pytest.approx(
        tg.log_ratio(_exact(layer, 1), _exact(layer, 4)))
    assert g.details["paper_epsilon"] == 1.0
    offline = layer.corpus_privatizer().guarantee()
    assert not offline.is_private and "2^-52" in offline.conditions[0]
    assert offline.details["continuous_noise_epsilon"] == continuous
    # Not every word within reach: no guarantee either, and why.
    short = _layer(max_candidates=3)
    g = short.guarantee()
    assert not g.is_private and "nearest" in g.conditions[0]
    assert g.details["continuous_noise_epsilon"] is None
    assert short.pair_bound(1, 4)[0] == math.inf


def test_paper_calibration_and_its_domain():
    low, high = tg.distance_range(checks.TABLE[1:])
    d = np.linalg.norm(checks.TABLE[1:, None] - checks.TABLE[None, 1:],
                       axis=-1)
    assert low == pytest.approx(d[d > 0].min())
    assert high == pytest.approx(d.max())
    n, eps = 6, 40.0
    a = (eps - 2 * (1 + math.log(n)) / low) / 3
    w = tg.lambert_w(2 * a * high)
    assert w * math.exp(w) == pytest.approx(2 * a * high)
    assert tg.paper_scale(eps, n, low, high) == pytest.approx(
        2 * high / min(w, math.log(a * low)))
    layer = layers.TruncatedGumbelTextPrivatizer(
        eps, checks.TABLE, special_token_ids=checks.SPECIAL)
    assert layer.scale == pytest.approx(tg.paper_scale(eps, n, low, high))
    with pytest.raises(ValueError, match="`epsilon` must exceed"):
        layers.TruncatedGumbelTextPrivatizer(
            3.0, checks.TABLE, special_token_ids=checks.SPECIAL)


def _pairwise(rows):
    """Every distance between two different rows, from differences."""
    d = np.linalg.norm(rows[:, None] - rows[None], axis=-1)
    np.fill_diagonal(d, np.nan)
    return d


def test_distance_range_never_counts_a_row_with_itself():
    # Rows of MiniLM's scale (coordinates ~0.05), where |x|^2 + |x|^2 -
    # 2 x.x rounds to ~1e-17, above the 1e-9 "non-zero" floor: counted as
    # a distance, it made Delta_min 7e-9 on MiniLM's table (true: 0.2225)
    # and the paper's calibration refused every epsilon. A duplicate row
    # and a pair 1e-8 apart (above the floor) are in the table too.
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((700, 24)) * 0.05
    rows[10] = rows[20]
    rows[30] = rows[40] + 1e-8 / np.sqrt(24)
    d = _pairwise(rows)
    high = np.nanmax(d)
    low = d[d > 1e-9 * max(1.0, high)].min()
    assert low == pytest.approx(1e-8, rel=1e-4)
    for block in (64, 700, 1000):  # blocks that split pairs, and none
        got = tg.distance_range(rows, block=block)
        assert got[0] == pytest.approx(low, rel=1e-9), block
        assert got[1] == pytest.approx(high, rel=1e-12), block
    # Without the near pair: the smallest of the others.
    rows[30] = rng.standard_normal(24) * 0.05
    d = _pairwise(rows)
    assert tg.distance_range(rows, block=128)[0] == pytest.approx(
        d[d > 1e-9].min(), rel=1e-12)
    with pytest.raises(ValueError, match="two distinct"):
        tg.distance_range(np.ones((5, 3)))


def test_expansion_error_bound_holds_under_cancellation():
    # Pairs of nearly equal rows of large norm: the expansion's error is
    # of the order of its bound, and never above it.
    rng = np.random.default_rng(4)
    for dim in (2, 16, 300):
        x = rng.standard_normal((2000, dim)) * rng.uniform(
            0.01, 100.0, (2000, 1))
        y = x + rng.standard_normal(x.shape) * 1e-7 * np.abs(x)
        nx, ny = np.sum(x * x, axis=1), np.sum(y * y, axis=1)
        expanded = nx + ny - 2.0 * np.einsum("ij,ij->i", x, y)
        exact = np.sum((x - y) ** 2, axis=1)
        bound = tg.expansion_error_bound(dim, nx + ny)
        assert np.all(np.abs(expanded - exact) <= bound), dim
        # and the bound is not vacuous: within 1e4 of the errors seen
        assert np.max(np.abs(expanded - exact) / bound) > 1e-4, dim


def test_serialization_round_trip(tmp_path):
    layer = _layer()
    inputs = keras.Input((2,), dtype="int32")
    model = keras.Model(inputs, layer(inputs))
    path = str(tmp_path / "tg.keras")
    model.save(path)
    loaded = keras.models.load_model(path).layers[-1]
    assert loaded.get_config() == layer.get_config()
    assert np.array_equal(loaded.public_table(), checks.TABLE)
    assert loaded.guarantee().value == layer.guarantee().value


@pytest.mark.parametrize("make, message", [
    (lambda: _layer(max_candidates=0), "`max_candidates`"),
    (lambda: layers.TruncatedGumbelTextPrivatizer(
        0.0, checks.TABLE, scale=1.0), "`epsilon`"),
    (lambda: layers.TruncatedGumbelTextPrivatizer(
        1.0, checks.TABLE, scale=-1.0), "`scale`"),
    (lambda: layers.TruncatedGumbelTextPrivatizer(
        1.0, checks.TABLE, scale=1e-3), "`scale` must be at least"),
    (lambda: layers.TruncatedGumbelTextPrivatizer(
        1.0, vocabulary_size=7, embedding_dim=2, scale=1.0),
     "`min_distance` and `max_distance`"),
    (lambda: TruncatedGumbelCorpusPrivatizer(
        checks.TABLE, 1.0, scale=1.0, min_distance=-1.0), "`min_distance`"),
])
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_registry_entry():
    entry = mechanisms.get("truncated_gumbel")
    assert entry.parameter == "epsilon"
    assert entry.parse_options(None) == {"scale": None, "max_candidates": 32}
    options = entry.parse_options(["scale=0.8", "max_candidates=6"])
    settings = mechanisms.Settings(1.0, options, checks.TABLE,
                                   checks.SPECIAL, checks.PASSTHROUGH, "toy")
    layer, offline = entry.layer(settings), entry.offline(settings)
    assert (layer.scale, layer.max_candidates) == (0.8, 6)
    assert (offline.scale, offline.max_candidates) == (0.8, 6)
    assert layer.guarantee().value == pytest.approx(
        offline.guarantee().value)
    with pytest.raises(ValueError, match="`max_candidates`"):
        entry.parse_options(["max_candidates=0"])


def test_the_nearest_table_is_the_exhaustive_search():
    """The FAISS shortlist (float32) re-ranked in float64 gives every id
    the same nearest candidates as the exhaustive float64 search, ties
    (duplicate rows) to the lower id included."""
    from tfdptext.offline import TruncatedGumbelCorpusPrivatizer

    rng = np.random.default_rng(4)
    table = rng.standard_normal((600, 5)).astype(np.float32)
    table[40] = table[41] = table[42]  # a three-way tie
    table[7] = table[8] + 1e-6
    privatizer = TruncatedGumbelCorpusPrivatizer(
        table, 1.0, scale=0.5, max_candidates=8, special_token_ids=(0, 3))
    assert 2 * 8 + 8 < privatizer.num_candidates  # the shortlist path
    ids = np.arange(len(table))
    members, distances = privatizer.nearest(ids)
    np.testing.assert_array_equal(privatizer._members, members)
    np.testing.assert_allclose(privatizer._distances, distances, rtol=0,
                               atol=1e-7)
    assert not np.isin(privatizer._members, (0, 3)).any()
