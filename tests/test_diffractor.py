"""1-Diffractor (Meisenbacher et al. 2024): the list against a brute-force
greedy walk, the integer sampler against the two-sided geometric, the
layer, the offline privatizer and the phone model against the closed form
(clipped two-sided geometric on list positions), the guarantee and the
argument checks."""

import math

import keras
import numpy as np
import pytest

import substitution_checks as checks
from tfdptext import layers
from tfdptext import mechanisms
from tfdptext.offline import DiffractorCorpusPrivatizer
from tfdptext.privacy import guarantee as g_lib
from tfdptext.substitution import backend
from tfdptext.substitution import diffractor

EPSILON = 1.0
V = len(checks.TABLE)
DRAWS = 20000


def brute_force_walk(rows):
    """Start at row 0, then always the nearest unvisited row: direct
    squared distances over every unvisited row, ties to the lower index."""
    rows = np.asarray(rows, np.float64)
    order, left = [0], set(range(1, len(rows)))
    while left:
        rest = np.array(sorted(left))
        d = np.sum((rows[rest] - rows[order[-1]]) ** 2, axis=1)
        order.append(int(rest[np.flatnonzero(d == d.min())[0]]))
        left.remove(order[-1])
    return np.array(order)


def closed_form(position, length, epsilon=EPSILON, span=400):
    """P(released position) of clip(i + Z, 0, L - 1), P(Z = k) = (1 - q) /
    (1 + q) q^|k|, summed over |k| <= span (the rest is below 1e-170)."""
    q = math.exp(-epsilon)
    k = np.arange(-span, span + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(k)
    probs = np.zeros(length)
    np.add.at(probs, np.clip(position + k, 0, length - 1), pmf)
    return probs


def by_id(layer, word):
    """The closed form over token ids for input `word`."""
    table = layer.list_table_values()
    length = layer.list_length
    probs = np.zeros(V)
    probs[table[:length, 1]] = closed_form(table[word, 0], length)
    return probs


def _layer(**kwargs):
    kwargs = {"special_token_ids": checks.SPECIAL,
              "passthrough_token_ids": checks.PASSTHROUGH, **kwargs}
    return layers.DiffractorTextPrivatizer(EPSILON, checks.TABLE, **kwargs)


@pytest.mark.parametrize("trial", range(6))
def test_walk_is_the_brute_force_greedy_walk(trial):
    rng = np.random.default_rng(trial)
    n, dim = int(rng.integers(30, 120)), int(rng.integers(1, 12))
    rows = rng.standard_normal((n, dim))
    if trial % 2:  # integer rows: many exact ties
        rows = np.round(2 * rows)
    if trial % 3 == 0:  # repeated rows: distance 0 ties
        rows[n // 2:] = rows[:n - n // 2]
    if trial == 5:  # beyond float32's safe scale: the float64 screen
        rows *= 2.0**40
    expected = brute_force_walk(rows)
    # Small shortlists force the exact search of used-up steps.
    for size in (1, 4, diffractor.SHORTLIST):
        assert np.array_equal(diffractor.greedy_order(rows, size, block=7),
                              expected)


def test_list_table_positions_and_special_inputs():
    rng = np.random.default_rng(7)
    table = rng.standard_normal((40, 5)).astype(np.float32)
    special = [0, 3, 17]
    result = diffractor.list_table(table, special)
    candidates = np.array([i for i in range(40) if i not in special])
    order = candidates[brute_force_walk(table[candidates])]
    length = diffractor.list_length(result)
    assert length == 37 and result.dtype == np.int32
    assert np.array_equal(result[:length, 1], order)
    assert (result[length:, 1] == -1).all()
    assert np.array_equal(result[order, 0], np.arange(length))
    for s in special:  # its nearest candidate's position
        d = np.sum((table[candidates].astype(np.float64) - table[s]) ** 2, 1)
        assert result[s, 0] == result[candidates[np.argmin(d)], 0]


@pytest.mark.parametrize("epsilon, length", [(1.0, 8), (0.05, 30000),
                                             (3.0, 5)])
def test_integer_sampler_is_the_capped_two_sided_geometric(epsilon, length):
    for bits in diffractor.BITS:
        counts = diffractor.tail_counts(epsilon, length, bits)
        m = len(counts)
        tail = diffractor.tail_probability(epsilon, np.arange(1, m + 2))
        assert np.array_equal(counts, np.floor(tail[:m] * 2.0**bits))
        assert counts[-1] >= 1 and (m == length - 1
                                    or tail[m] * 2.0**bits < 1)
        limits = diffractor.shift_thresholds(counts, bits)
        assert (np.diff(limits) <= 0).all()
        assert limits.min() >= -2**(bits - 1) and \
            limits.max() < 2**(bits - 1)
        # The draw is the step function of the thresholds: s just below
        # threshold z gives Z >= z, s at it gives Z < z.
        z = np.arange(-m + 1, m + 1)
        for b in (backend.NUMPY, backend.TENSORFLOW):
            above = np.asarray(diffractor.draw_shifts(
                (limits - 1).astype(np.int32), limits, b))
            at = np.asarray(diffractor.draw_shifts(
                limits.astype(np.int32), limits, b))
            assert (above >= z).all() and (at < z).all()
        implemented = diffractor.implemented_shift_probabilities(counts,
                                                                 bits)
        exact = diffractor.exact_shift_probabilities(
            epsilon, length, np.arange(-m, m + 1))
        assert implemented.sum() == pytest.approx(1.0, abs=1e-15)
        # Beyond M the exact law has mass `outside`; Z = +-M takes its
        # share of it.
        outside = 1.0 - exact.sum()
        assert np.abs(implemented - exact).max() <= 2.0**-bits + outside
        tv = diffractor.total_variation(epsilon, length, bits)
        assert tv >= 0.5 * (np.abs(implemented - exact).sum() + outside)
        assert tv <= (2 * m + 2) * 2.0**-bits + outside


def test_every_23_bit_integer_gives_the_implemented_law():
    counts = diffractor.tail_counts(EPSILON, 8, diffractor.UNIFORM_BITS)
    limits = diffractor.shift_thresholds(counts, diffractor.UNIFORM_BITS)
    m = len(counts)
    tally = np.zeros(2 * m + 1, np.int64)
    for start in range(-2**22, 2**22, 2**20):
        s = np.arange(start, start + 2**20, dtype=np.int32)
        tally += np.bincount(diffractor.draw_shifts(s, limits,
                                                    backend.NUMPY) + m,
                             minlength=2 * m + 1)
    assert np.array_equal(
        tally, np.round(diffractor.implemented_shift_probabilities(
            counts, diffractor.UNIFORM_BITS) * 2**23).astype(np.int64))
    # floor(U 2^23) of the uniforms' grid, centred, covers the same range.
    u = (np.arange(0, 2**23, 4099) + 0.5) / 2**23
    s = diffractor.centred_from_uniforms(u, backend.NUMPY)
    assert s.min() >= -2**22 and s.max() < 2**22


@pytest.mark.parametrize("word", checks.WORDS)
def test_layer_and_offline_match_the_closed_form(word):
    layer = _layer()
    probs = by_id(layer, word)
    assert probs[0] == 0 and probs.sum() == pytest.approx(1.0)
    counts = checks.layer_counts(layer, word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4
    counts = checks.offline_counts(layer.corpus_privatizer(), word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4


def test_phone_model_takes_random_words_and_matches_the_closed_form():
    layer = _layer()
    ops = checks.check_phone_model(layer, list(checks.WORDS),
                                   [by_id(layer, w) for w in checks.WORDS],
                                   draws=10000)
    # The sampler is integer only: no EXP, and the only LOG ops are the two
    # of the random-words check (tfdptext.models.word_checks).
    names = [op.name for op in ops]
    assert "EXP" not in names and names.count("LOG") == 2, names


def test_special_inputs_and_passthrough():
    layer = _layer(passthrough_token_ids=())
    table = layer.list_table_values()
    candidates = np.arange(1, V)
    d = np.sum((checks.TABLE[1:].astype(np.float64) - checks.TABLE[0]) ** 2,
               axis=1)
    nearest = candidates[np.argmin(d)]
    assert table[0, 0] == table[nearest, 0]
    counts = checks.layer_counts(layer, 0, DRAWS, V)
    assert checks.chi_square_pvalue(counts, by_id(layer, nearest)) > 1e-4
    kept = _layer()
    assert (np.asarray(kept(np.zeros((50, 2), np.int32))) == 0).all()


def test_guarantee_and_pair_bounds():
    layer = _layer(embedding_description="toy")
    g = layer.guarantee()
    length = V - 1
    assert (g.mechanism, g.parameter, g.value, g.unit) == (
        "diffractor_text_to_text", "epsilon", EPSILON, g_lib.PER_TOKEN)
    assert "positions" in g.metric and "toy" in g.metric
    tv = diffractor.total_variation(EPSILON, length, 23)
    assert g.details["sampler_total_variation"] == tv
    # The stated delta is the closest pairs' (distance 1), and says so.
    assert g.delta == diffractor.pair_deltas(EPSILON, length, 23, [1])[0]
    assert "delta depends on the pair" in " ".join(g.conditions)
    assert g.randomness == "tensorflow_unseeded"
    phone = layer.guarantee("app_secure_rng")
    assert phone.details["sampler_bits"] == 32 and phone.delta < 1e-8
    assert phone.delta < g.delta < 1e-5
    positions = layer.positions()
    a, b = 1, 4
    bound, delta = layer.pair_bound(a, b)
    distance = abs(int(positions[a]) - int(positions[b]))
    assert bound == EPSILON * distance
    assert delta == diffractor.pair_deltas(EPSILON, length, 23,
                                           [distance])[0]
    assert layer.pair_bound(2, 2) == (0.0, 0.0)
    offline = layer.corpus_privatizer()
    assert offline.guarantee().randomness == "os_entropy"
    assert offline.guarantee().delta == phone.delta
    assert offline.pair_bound(a, b)[0] == bound
    # At a huge epsilon nothing is drawn and Z = 0: every word is released
    # as itself, so two words' outputs are disjoint and the guarantee says
    # so (delta 1 from distance 1), whatever the sampler's total variation.
    sure = layers.DiffractorTextPrivatizer(60.0, checks.TABLE,
                                           special_token_ids=[0])
    out = np.asarray(sure(np.arange(1, V)[None].repeat(100, 0)))
    assert (out == np.arange(1, V)).all()
    assert sure.guarantee().details["sampler_total_variation"] < 1e-12
    assert sure.guarantee().delta == 1.0
    assert sure.guarantee().details["pair_deltas"][
        "disjoint_from_distance"] == 1


def _output_law(pmf, position, length):
    """P'(output position) of a word at `position`: shifts clipped."""
    m = len(pmf) // 2
    out = np.zeros(length)
    np.add.at(out, np.clip(position + np.arange(-m, m + 1), 0, length - 1),
              pmf)
    return out


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_pair_delta_per_distance_is_the_hockey_stick_of_the_laws(epsilon):
    """delta(d) against the hockey-stick divergence of two words' clipped
    output laws, built from the integer counts: equal for words away from
    the ends of the list, never below it at the ends; it grows with d and
    is 1 once the outputs are disjoint. At eps 4 the closest pairs' is
    1.02e-8 (the TV bound at log-ratio 1 said 1.37e-9)."""
    length, bits = 30000, 32
    counts = diffractor.tail_counts(epsilon, length, bits)
    pmf = diffractor.implemented_shift_probabilities(counts, bits)
    m = len(counts)
    distances = list(range(1, 2 * m + 3))
    deltas = diffractor.pair_deltas(epsilon, length, bits, distances)
    for d, delta in zip(distances, deltas):
        for i in (5000, 0, 3):  # interior, then at the start of the list
            p = _output_law(pmf, i, length)
            q = _output_law(pmf, i + d, length)
            exact = max(np.maximum(p - math.exp(epsilon * d) * q, 0).sum(),
                        np.maximum(q - math.exp(epsilon * d) * p, 0).sum())
            if i == 5000:
                assert delta == pytest.approx(exact, rel=1e-9, abs=1e-13)
            assert delta >= exact - 1e-15
    assert all(b >= a for a, b in zip(deltas, deltas[1:]))
    assert deltas[2 * m] == 1.0 and deltas[2 * m - 1] < 1.0
    statement = diffractor.delta_statement(epsilon, length, bits)
    assert statement["disjoint_from_distance"] == 2 * m + 1
    if epsilon == 4.0:
        assert deltas[0] == pytest.approx(1.02e-8, rel=0.01)


def test_serialization_round_trip(tmp_path):
    layer = _layer()
    inputs = keras.Input((2,), dtype="int32")
    model = keras.Model(inputs, layer(inputs))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path).layers[-1]
    assert loaded.get_config() == layer.get_config()
    assert np.array_equal(loaded.list_table_values(),
                          layer.list_table_values())
    assert loaded.guarantee() == layer.guarantee()
    clone = layers.DiffractorTextPrivatizer.from_config(layer.get_config())
    assert clone.list_length == layer.list_length


@pytest.mark.parametrize("make, message", [
    (lambda: layers.DiffractorTextPrivatizer(0.0, checks.TABLE),
     "`epsilon` must be finite and > 0"),
    (lambda: layers.DiffractorTextPrivatizer(float("inf"), checks.TABLE),
     "`epsilon`"),
    (lambda: layers.DiffractorTextPrivatizer(1.0, checks.TABLE[0]),
     "`embeddings` must be 2-D"),
    (lambda: layers.DiffractorTextPrivatizer(1.0, None),
     "`vocabulary_size`"),
    (lambda: layers.DiffractorTextPrivatizer(
        1.0, checks.TABLE, special_token_ids=range(6)),
     "fewer than 2 candidate"),
    (lambda: layers.DiffractorTextPrivatizer(
        1.0, checks.TABLE, special_token_ids=[9]), "special_token_ids"),
    (lambda: DiffractorCorpusPrivatizer(checks.TABLE, -1.0), "`epsilon`"),
    (lambda: DiffractorCorpusPrivatizer(checks.TABLE[:1], 1.0),
     "`embeddings`"),
])
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_registry_entry():
    entry = mechanisms.get("diffractor")
    assert entry.parameter == "epsilon" and entry.parse_options(None) == {}
    with pytest.raises(ValueError, match="takes no option 'sensitivity'"):
        entry.parse_options(["sensitivity=2"])
    settings = mechanisms.Settings(2.0, {}, checks.TABLE, checks.SPECIAL,
                                   checks.PASSTHROUGH, "toy")
    layer, offline = entry.layer(settings), entry.offline(settings)
    assert np.array_equal(layer.list_table_values(), offline.list_table())
    assert layer.guarantee("os_entropy").delta == offline.guarantee().delta
    seeded = entry.offline(settings, seed=3)
    again = entry.offline(settings, seed=3)
    ids = np.arange(1, V).repeat(20)
    assert np.array_equal(seeded(ids), again(ids))
    assert seeded.guarantee().randomness == "seeded"
