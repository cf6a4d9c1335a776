"""CusText and CusText+ (Chen et al. 2023): the output sets against a
brute-force reference, the exact integer sampler, the layer, the offline
privatizer and the phone model against the closed form."""

import math

import keras
import numpy as np
import pytest

import substitution_checks as checks
from tfdptext import layers
from tfdptext import mechanisms
from tfdptext.substitution import custext

EPSILON = 3.0
TOP_K = 4
DRAWS = 20000
# 13 rows in 2-D: id 0 special, 12 candidates in three clusters.
TABLE = np.array([[9.0, 9.0],
                  [0.0, 0.0], [0.3, 0.1], [0.1, 0.5], [0.6, 0.4],
                  [4.0, 0.0], [4.5, 0.2], [4.2, 0.9], [3.7, 0.4],
                  [0.0, 4.0], [0.2, 4.6], [0.9, 4.1], [0.5, 3.3]],
                 np.float32)
V = len(TABLE)


def reference_sets(table, candidates, k):
    """The conservative mapping by brute force."""
    free = list(candidates)
    sets = {}
    for word in candidates:
        if word not in free:
            continue
        near = sorted(free, key=lambda y: (y != word, float(np.linalg.norm(
            table[y] - table[word])), free.index(y)))[:k]
        for y in near:
            free.remove(y)
            sets[y] = tuple(near)
    return sets


def closed_form(word, sets):
    group = np.array(sets[word])
    d = np.linalg.norm(TABLE[group].astype(np.float64) - TABLE[word], axis=1)
    u = -(d - d.min()) / (d.max() - d.min())
    w = np.exp(EPSILON * u / 2)
    probs = np.zeros(V)
    probs[group] = w / w.sum()
    return probs


def _layer(**kwargs):
    kwargs = {"top_k": TOP_K, **kwargs}
    return layers.CusTextTextPrivatizer(EPSILON, TABLE,
                                        special_token_ids=[0],
                                        passthrough_token_ids=[0], **kwargs)


def test_output_sets_partition_the_vocabulary_as_the_reference():
    sets = reference_sets(TABLE, range(1, V), TOP_K)
    groups, group_of = custext.output_sets(TABLE, np.arange(1, V), TOP_K)
    assert sorted(np.concatenate(groups).tolist()) == list(range(1, V))
    for word, expected in sets.items():
        assert tuple(groups[group_of[word]].tolist()) == expected
    # 5 candidates in sets of 2: the last set has one word.
    groups, _ = custext.output_sets(TABLE[:6], np.arange(1, 6), 2)
    assert [len(g) for g in groups] == [2, 2, 1]


def _tables_word_by_word(table, special, top_k, epsilon):
    """`custext.tables` as its definition reads: each word's set, then
    `probabilities` and `integer_counts` word by word."""
    candidates = np.setdiff1d(np.arange(len(table)), special)
    groups, group_of = custext.output_sets(table, candidates, top_k)
    nearest = custext.nearest_candidates(table, special, candidates)
    members = np.zeros((len(table), top_k), np.int32)
    thresholds = np.full((len(table), top_k - 1), custext.SCALE, np.int32)
    for word in range(len(table)):
        own = dict(zip(special, nearest)).get(word, word)
        group = groups[group_of[int(own)]]
        counts = custext.integer_counts(custext.probabilities(
            table, word, group, epsilon))
        members[word] = np.concatenate(
            [group, np.full(top_k - len(group), group[0])])
        thresholds[word, :len(group) - 1] = np.cumsum(counts)[:-1]
    return members, thresholds


@pytest.mark.parametrize("epsilon", [0.5, 8.0, 60.0])
def test_tables_equal_the_word_by_word_construction(epsilon):
    """The tables are built one output set at a time: bit for bit the
    word-by-word construction, on a table with duplicate rows (sets whose
    members are all at distance 0), a last set of one word, specials and
    epsilons where some counts are floored to 0 and raised to 1."""
    rng = np.random.default_rng(5)
    table = rng.normal(size=(602, 8)).astype(np.float32)
    table[300:340] = table[200]  # duplicates: zero spreads
    table[400:420] = np.round(table[400:420])
    special = [0, 7, 301]
    members, thresholds, _ = custext.tables(table, special, 6, epsilon)
    want_members, want_thresholds = _tables_word_by_word(
        np.asarray(table, np.float64), special, 6, epsilon)
    np.testing.assert_array_equal(members, want_members)
    np.testing.assert_array_equal(thresholds, want_thresholds)


def test_nearest_candidates_is_an_exhaustive_search_with_ties_to_lower_id():
    rng = np.random.default_rng(3)
    table = rng.normal(size=(600, 12))
    table[40:45] = table[7]  # exact ties for the words near row 7
    table[300] = table[301] + 1e-13  # a near tie
    words = np.array([7, 301, 2, 599] + list(rng.choice(600, 40, False)))
    candidates = np.setdiff1d(np.arange(600), words)
    want = [candidates[np.argmin(np.linalg.norm(table[candidates] - table[w],
                                                axis=1))] for w in words]
    got = custext.nearest_candidates(table, words, candidates, block=16)
    np.testing.assert_array_equal(got, want)
    assert got[0] == 40  # row 7's duplicates: the lowest id wins


def test_integer_sampler_is_exact_and_its_epsilon_computed():
    members, thresholds, _ = custext.tables(TABLE, [0], TOP_K, EPSILON)
    sets = reference_sets(TABLE, range(1, V), TOP_K)
    counts = custext._counts(thresholds)
    for word in range(1, V):
        probs = closed_form(word, sets)
        implemented = np.zeros(V)
        np.add.at(implemented, members[word], counts[word])
        assert implemented.sum() == 2**23
        assert np.abs(implemented / 2**23 - probs).max() <= 2.0**-23
    eps = custext.implemented_epsilon(members, thresholds)
    exact = max(math.log(closed_form(a, sets)[y] / closed_form(b, sets)[y])
                for a in range(1, V) for b in range(1, V)
                if sets[a] == sets[b] for y in sets[a])
    assert exact <= EPSILON
    assert abs(eps - exact) < 1e-4
    # Every output gets at least one count, however small its probability.
    assert custext.integer_counts([1.0 - 1e-12, 1e-12]).tolist() == [
        2**23 - 1, 1]


@pytest.mark.parametrize("word", [1, 7, 12])
def test_layer_and_offline_match_the_closed_form(word):
    sets = reference_sets(TABLE, range(1, V), TOP_K)
    layer = _layer()
    probs = closed_form(word, sets)
    counts = checks.layer_counts(layer, word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4
    counts = checks.offline_counts(layer.corpus_privatizer(), word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4


def test_custext_plus_keeps_its_words_and_special_inputs_draw_from_a_set():
    layer = _layer(keep_token_ids=[2])
    out = np.asarray(layer(np.array([[2, 1, 0]] * 3000, np.int32)))
    assert (out[:, 0] == 2).all() and (out[:, 2] == 0).all()
    assert (out[:, 1] == 2).any()  # a kept word is still an output
    unknown = layers.CusTextTextPrivatizer(EPSILON, TABLE, top_k=TOP_K,
                                           special_token_ids=[0])
    released = np.asarray(unknown(np.zeros((500, 1), np.int32))).ravel()
    # [PAD] draws from the set of its nearest candidate, never itself.
    nearest = 1 + int(np.argmin(np.linalg.norm(TABLE[1:] - TABLE[0],
                                               axis=1)))
    assert set(released) <= set(reference_sets(TABLE, range(1, V),
                                               TOP_K)[nearest])


def test_phone_model_takes_random_words_and_matches_the_closed_form():
    sets = reference_sets(TABLE, range(1, V), TOP_K)
    ops = checks.check_phone_model(_layer(), [1, 7],
                                   [closed_form(1, sets),
                                    closed_form(7, sets)], draws=10000)
    # The sampler is integer only: no EXP, and the only LOG ops are the two
    # of the random-words check's Poisson tail bound
    # (tfdptext.models.word_checks), which every phone model carries.
    names = [op.name for op in ops]
    assert "EXP" not in names and names.count("LOG") == 2, names


def test_guarantee_and_pair_bounds():
    layer = _layer(keep_token_ids=[2])
    g = layer.guarantee()
    assert g.mechanism == "custext_plus_text_to_text"
    assert g.value == layer.implemented_epsilon <= EPSILON + 1e-6
    assert g.delta == 0.0 and g.details["requested_epsilon"] == EPSILON
    assert "infinite between words of different sets" in g.metric
    sets = reference_sets(TABLE, range(1, V), TOP_K)
    exact = max(abs(math.log(closed_form(1, sets)[y]
                             / closed_form(3, sets)[y])) for y in sets[1])
    bound, delta = layer.pair_bound(1, 3)
    assert delta == 0.0 and bound <= layer.implemented_epsilon
    assert abs(bound - exact) < 1e-4
    assert layer.pair_bound(1, 5)[0] == math.inf  # different sets
    assert layer.pair_bound(1, 2)[0] == math.inf  # a kept word
    assert layer.corpus_privatizer().guarantee().randomness == "os_entropy"


def test_serialization_round_trip(tmp_path):
    layer = _layer(keep_token_ids=[2])
    inputs = keras.Input((2,), dtype="int32")
    model = keras.Model(inputs, layer(inputs))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path).layers[-1]
    assert loaded.get_config() == layer.get_config()
    assert np.array_equal(loaded.sets_table(), layer.sets_table())


def test_registry_and_bad_arguments():
    vocabulary = ("[PAD]", "the", "a", "cat", "dog", "of", "sat", "mat",
                  "on", "hat", "bat", "rat", "and")
    entry = mechanisms.get("custext_plus")
    settings = mechanisms.Settings(
        EPSILON, entry.parse_options(["top_k=3"]), TABLE, (0,), (0,), "toy",
        vocabulary)
    layer = entry.layer(settings)
    assert layer.top_k == 3
    assert [vocabulary[i] for i in layer.keep_token_ids] == [
        "the", "a", "of", "on", "and"]
    with pytest.raises(ValueError, match=r"`top_k` must be an integer >= 2"):
        entry.parse_options(["top_k=1"])
    with pytest.raises(ValueError, match="`keep_words`: cannot read"):
        entry.layer(mechanisms.Settings(
            EPSILON, entry.parse_options(["keep_words=/no/such/file"]),
            TABLE, (0,), (0,), "toy", vocabulary))
    for kwargs, message in (({"top_k": 1}, "`top_k`"),
                            ({"keep_token_ids": [0]}, "`keep_token_ids`"),
                            ({"keep_token_ids": [99]}, "`keep_token_ids`")):
        with pytest.raises(ValueError, match=message):
            _layer(**kwargs)
