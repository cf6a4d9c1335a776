"""Secure randomness by default, failing closed, and exact guarantees.

Random words in (their checks and their false-alarm bounds), the Python
user side fed by os.urandom, non-finite inputs, [UNK] in text-to-text, and
the guarantees' units and delta.
"""

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from tfdptext import layers
from tfdptext import models
from tfdptext import offline
from tfdptext import privacy
from tfdptext.audit import word_generators
from tfdptext.errors import ArgumentError
from tfdptext.models import secure
from tfdptext.models import word_checks
from tfdptext.privacy import guarantee as g_lib
from tfdptext.privacy import extraction
from tfdptext.privacy import randomness
from tfdptext.privacy import word_statistics as ws

TABLE = np.random.default_rng(0).normal(size=(60, 8)).astype(np.float32)
SPECIAL = (0, 1, 2, 3, 4)      # [PAD] [UNK] [CLS] [SEP] [MASK]
PASSTHROUGH = (0, 2, 3)        # [PAD] [CLS] [SEP]
UNK = 1


# --- The checks' limits: exact laws and false alarms. ----------------------

def test_mean_tolerance_is_hoeffding():
    for w in (1, 768, 98304):
        t = randomness.mean_tolerance(w)
        assert math.isclose(2 * math.exp(-2 * w * t * t), 2.0**-40)


def test_block_collision_law_is_exact():
    """The dynamic programme's law of the pairs of equal bytes among 128
    (127) values: P(0) is the birthday product, the mean C(n, 2) / 256,
    and 200,000 simulated blocks agree with it (chi-square)."""
    from scipy import stats

    for balls in (128, 127):
        law = ws.block_collision_law(balls)
        birthday = math.prod(1 - i / 256 for i in range(balls))
        assert math.isclose(law.probabilities[0], birthday, rel_tol=1e-9)
        # The cap at 128 moves only a tail of about 2e-15.
        assert law.mean == pytest.approx(balls * (balls - 1) / 512,
                                         rel=1e-9)
    rng = np.random.default_rng(7)
    values = rng.integers(0, 256, size=(200000, 128))
    counts = np.bincount((values + 256 * np.arange(200000)[:, None]).ravel(),
                         minlength=200000 * 256).reshape(200000, 256)
    pairs = np.minimum((counts * (counts - 1) // 2).sum(axis=1), 128)
    law = ws.block_collision_law(128)
    edges = [0, 20, 24, 27, 30, 32, 34, 37, 40, 45, 129]
    observed = [((pairs >= a) & (pairs < b)).sum()
                for a, b in zip(edges[:-1], edges[1:])]
    expected = [law.probabilities[a:b].sum() * 200000
                for a, b in zip(edges[:-1], edges[1:])]
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_limits_hold_at_their_shares():
    """Each limit is crossed by good words with probability at most its
    share, from the exact laws: the bit counts' binomial tail (and one
    count further in is too likely), the collision sums' Chernoff limits
    near the exact tail of one block, the repeat limits' bounds."""
    from scipy import stats

    law = ws.block_collision_law(128)
    alarm = ws.COLLISION_FALSE_ALARM
    low, high = ws.sum_limits(law, 1, alarm)
    cdf = np.cumsum(law.probabilities)
    assert cdf[low] <= alarm and law.probabilities[high:].sum() <= alarm
    assert low >= 1  # 0 repeats (128 distinct low bytes) always fail
    exact_low = int(np.flatnonzero(cdf <= alarm).max())
    assert exact_low - 2 <= low <= exact_low
    one_side = ws.BITS_FALSE_ALARM / 64
    for n in (128, 192, 512):
        low, high = ws.binomial_half_limits(n, one_side)
        assert high == n - low
        assert stats.binom(n, 0.5).cdf(low) <= one_side \
            < stats.binom(n, 0.5).cdf(low + 1)
    for pairs in (64, 256):
        r = ws.partner_repeat_limit(pairs)
        assert math.comb(pairs, r) * 2.0**(-32 * r) <= \
            ws.PARTNER_FALSE_ALARM < math.comb(pairs, r - 1) * 2.0**(
                -32 * (r - 1))
    # One pair: no count is rare enough, so the limit is one past it.
    assert ws.partner_repeat_limit(1, ws.BUFFER_FALSE_ALARM) == 2
    limits = ws.row_limits(1)  # a mechanism that reads one word
    assert limits.consumed_zeros == (None, 2)
    for n in (128, 512, 1024):
        r = ws.word_repeat_limit(n)
        assert ws.word_repeat_log_bound(n, r) <= math.log(
            ws.WORD_REPEATS_FALSE_ALARM) < ws.word_repeat_log_bound(n, r - 1)


def test_cached_limits_and_logs_are_the_laws_own():
    """row_limits takes its collision limits from a cache by (values per
    block, blocks) and a law keeps its ln(probabilities): the same numbers
    as sum_limits, log_mgf and the tilted mean computed afresh."""
    for consumed in (2, 1552):  # one block of 128, four
        limits = ws.row_limits(consumed)
        for balls, fields in ((128, ("low_byte_collisions",
                                     "high_byte_collisions")),
                              (127, ("low_byte_step_collisions",
                                     "high_byte_step_collisions"))):
            fresh = ws.DiscreteLaw(ws.block_collision_law(balls).values,
                                   ws.block_collision_law(balls)
                                   .probabilities.copy())
            want = ws.sum_limits(fresh, limits.blocks,
                                 ws.COLLISION_FALSE_ALARM)
            assert [getattr(limits, f) for f in fields] == [want, want]
    law = ws.block_collision_law(128)
    with np.errstate(divide="ignore"):
        logs = np.log(law.probabilities)
    for theta in (-2.0, 0.0, 0.3):
        t = logs + theta * law.values
        w = np.exp(t - t.max())
        assert law.tilted_mean(theta) == float(np.dot(w, law.values)
                                               / w.sum())
        assert law.log_mgf(theta) == float(t.max() + np.log(w.sum()))


def test_exact_despite_is_the_per_group_rule():
    """One numpy pass: every group keeps a good position, checked group by
    group; an out-of-range position is named (the first one)."""
    rng = np.random.default_rng(4)
    for consumed in (2, 3, 768):
        lay = extraction.layout(consumed)
        for size in (1, lay.group, lay.words // 2, lay.words - 1):
            bad = rng.choice(lay.words, size=size, replace=False)
            taken = set(bad.tolist())
            want = all(any(p not in taken for p in lay.positions(j))
                       for j in range(consumed))
            assert extraction.exact_despite(bad, consumed) == want
            assert extraction.exact_despite(iter(bad.tolist() * 2),
                                            consumed) == want
    with pytest.raises(ArgumentError, match=r"\[0, 128\), received 130"):
        extraction.exact_despite([5, 130, -1], 2)


def test_false_alarm_shares_sum_to_at_most_two_to_the_minus_40():
    total = (ws.BITS_FALSE_ALARM + 4 * ws.COLLISION_FALSE_ALARM
             + 2 * ws.PARTNER_FALSE_ALARM + ws.WORD_REPEATS_FALSE_ALARM
             + len(ws.BUFFER_TESTS) * ws.BUFFER_FALSE_ALARM)
    assert total <= 2.0**-40
    assert set(ws.TESTS) == {"bits", "low_byte_collisions",
                             "low_byte_step_collisions",
                             "high_byte_collisions",
                             "high_byte_step_collisions",
                             "partner_repeats", "half_sum_bits",
                             "neighbour_bits", "strided_sum_zeros",
                             "consumed_zeros", "tile_repeats",
                             "word_repeats"}


def test_tile_repeat_limit_is_the_smallest_count_under_its_share():
    anchors = len(ws.TILE_ANCHOR_STARTS)
    for words in (128, 512, 3072, 24576, 131080, 131082, 196608, 2**21):
        n, p = words // 2 - ws.TILE_FIRST_PAIR, anchors * 2.0**-64
        r = ws.tile_repeat_limit(words)
        assert math.comb(n, r) * p**r <= ws.BUFFER_FALSE_ALARM \
            < math.comb(n, r - 1) * p**(r - 1)
        # A tiled pool repeats 2 anchor pairs (those at 4 and 6, or 3 and
        # 5), after the first 8 words.
        assert r <= 2
    assert ws.TILE_FIRST_PAIR == 4
    assert sorted(s % 2 for s in ws.TILE_ANCHOR_STARTS) == [0, 0, 1, 1]
    assert max(ws.TILE_ANCHOR_STARTS) + 2 <= 2 * ws.TILE_FIRST_PAIR
    assert min(ws.TILE_ANCHOR_STARTS) == 3  # a header of up to 3 words


def test_tile_repeats_counts_aligned_pairs_equal_to_an_anchor_pair():
    """The statistic against a count by hand: anchor pairs (w_s, w_s+1),
    s = 4, 6, 3, 5, copied to aligned pairs after the first 8 words count
    once each (twice the same pair: twice), a copy at an odd position or
    a single word does not, and the anchors' own words do not count."""
    words = secure.os_random_words((2, 3072)).copy()
    w = words[0]
    w[10:12] = w[4:6]      # aligned: counts
    w[20:22] = w[3:5]      # aligned: counts
    w[40:42] = w[3:5]      # the same anchor again: counts
    w[101:103] = w[6:8]    # at an odd position: does not
    w[300] = w[5]          # one word: does not
    w[3000:3002] = w[5:7]  # aligned, near the end: counts
    counts = word_checks.buffer_statistics(tf.constant(words), 1536)[
        "tile_repeats"].numpy()
    np.testing.assert_array_equal(counts, [4, 0])


def test_tiled_pools_of_every_size_and_low_bit_periods_are_refused():
    """Issue 38, round five: a pool of any size P <= N - 8 (not only a
    power of two) tiled from the first word or after a header of up to 3
    words, on a long buffer (only a sample of it read by the other
    checks), and every non-constant low-bit pattern of period 4 (g = 4,
    C = 32) or 8 (g = 8, C = 16 and 31), which fixes every consumed
    word's low bit (at C = 31, 160 of the 254 passed the bit counts and
    the old lags 1 and 2): all fail
    (`tile_repeats`, `neighbour_bits`), one row each, vectorised."""
    consumed = 1536
    width = extraction.layout(consumed).words
    cases = [(p, h) for p in (1, 2, 3, 4, 5, 6, 7, 9, 100, 129, 777, 1000,
                              1500, 1537, 2047, 2500, 3000, width - 9,
                              width - 8) for h in (0, 1, 2, 3)]
    rows = []
    for pool, header in cases:
        words = np.tile(secure.os_random_words((1, pool)),
                        (1, -(-width // pool)))[:, :width - header]
        rows.append(np.concatenate([np.arange(1, header + 1)[None],
                                    words], axis=1))
    rows = tf.constant(np.concatenate(rows).astype(np.int32))
    verdicts = word_checks.buffer_verdicts(rows, consumed)
    assert not verdicts["tile_repeats"].numpy().any()
    # Two anchor pairs repeat at least (those at 4 and 6, or 3 and 5).
    counts = word_checks.buffer_statistics(rows, consumed)["tile_repeats"]
    assert (counts.numpy() >= 2).all()
    for consumed, period in ((32, 4), (16, 8), (31, 8)):
        width = extraction.layout(consumed).words
        assert extraction.layout(consumed).group == period
        patterns = [f for f in itertools.product([0, 1], repeat=period)
                    if 0 < sum(f) < period]
        bits = np.array([np.resize(f, width) for f in patterns], np.int32)
        words = (secure.os_random_words((len(bits), width))
                 & ~np.int32(1)) | bits
        # The harm: every consumed word's low bit is fixed by the pattern.
        low = extraction.extract(words, consumed) & 1
        assert (low == low[:, :1]).all()
        verdicts = word_checks.row_verdicts(tf.constant(words), consumed)
        assert not verdicts["neighbour_bits"].numpy().any(), period
        good = secure.os_random_words((50, width))
        assert word_checks.row_verdicts(tf.constant(good), consumed)[
            "neighbour_bits"].numpy().all()


def test_sample_reads_short_buffers_whole_and_long_ones_by_groups():
    for consumed in (2, 3, 64, 256):
        taken = ws.sample(consumed)
        np.testing.assert_array_equal(taken.positions,
                                      np.arange(taken.words))
    taken = ws.sample(98304)  # d_chi, 128 tokens of 384-d
    assert taken.words == 196608 and taken.size == 512
    first, second = taken.partners
    np.testing.assert_array_equal(second, first + 98304)
    np.testing.assert_array_equal(taken.positions,
                                  np.concatenate([first, second]))
    # The first sampled block starts the buffer, the second starts at the
    # largest power of two that leaves it room (65,536).
    np.testing.assert_array_equal(first, np.concatenate(
        [np.arange(128), 65536 + np.arange(128)]))
    # g = 64: all words read, the pairs are the halves.
    first, second = ws.sample(2).partners
    np.testing.assert_array_equal(second, first + 64)


@pytest.mark.parametrize("consumed", [2, 768, 1536, 98304])
def test_good_words_pass_and_statistics_follow_their_laws(consumed):
    """os.urandom rows all pass, and their statistics sit where the laws
    put them (means within 6 standard errors over the rows)."""
    width = extraction.layout(consumed).words
    rows = {2: 300, 768: 200, 1536: 100, 98304: 6}[consumed]
    words = secure.os_random_words((rows, width))
    ok = secure.words_look_random(tf.constant(words), consumed).numpy()
    assert ok.all()
    stats_ = {k: v.numpy() for k, v in word_checks.row_statistics(
        tf.constant(words), consumed).items()}
    limits = ws.row_limits(consumed)
    n = limits.sample
    laws = {"bits": (n / 2, math.sqrt(n) / 2),
            "low_byte_collisions": (limits.blocks * ws.block_collision_law(
                128).mean, math.sqrt(limits.blocks * 32.0)),
            "high_byte_step_collisions": (limits.blocks *
                                          ws.block_collision_law(127).mean,
                                          math.sqrt(limits.blocks * 31.5))}
    laws["half_sum_bits"] = (limits.partners / 2,
                             math.sqrt(limits.partners) / 2)
    assert (stats_["partner_repeats"] == 0).all()
    extra = {k: v.numpy() for k, v in word_checks.buffer_statistics(
        tf.constant(words), consumed).items()}
    stats_.update(extra)
    pairs = n - max(ws.NEIGHBOUR_LAGS)
    laws["neighbour_bits"] = (pairs / 2, math.sqrt(pairs) / 2)
    assert (extra["strided_sum_zeros"] == 0).all()
    assert (extra["consumed_zeros"] == 0).all()
    assert (extra["tile_repeats"] == 0).all()
    for name, (mean, sd) in laws.items():
        assert np.all(np.abs(stats_[name].mean(axis=0) - mean)
                      < 6 * sd / math.sqrt(rows)), name


# Generators of tfdptext.audit.word_generators, and a check each one must
# fail where it must be refused: the checks catch what they are meant to.
_CAUGHT_BY = {
    "counter": ["low_byte_step_collisions"],
    "weyl": ["low_byte_collisions", "low_byte_step_collisions"],
    "lcg32": ["low_byte_collisions"],
    "low_24_bits_only": ["bits", "high_byte_collisions"],
    "one_byte_per_word": ["bits"],
    "all_even": ["bits"],
    "top_bit_set": ["bits"],
    "ascii_text": ["bits"],
    "bytes_not_words": ["bits"],
    "each_word_twice": ["word_repeats"],
    "byte_replicated": ["word_repeats"],
    "half_repeated": ["partner_repeats", "half_sum_bits"],
    "low_bit_follows_parity": ["neighbour_bits"],
    "second_half_negated": ["strided_sum_zeros", "half_sum_bits"],
    "second_half_complemented": ["half_sum_bits"],
    "group_checksums": ["consumed_zeros"],
    "strided_checksums": ["strided_sum_zeros"],
    "zeros_outside_sample_98": ["consumed_zeros"],
    "pool_4k_tiled": ["word_repeats", "tile_repeats"],
    "pool_tiled_unsampled": ["tile_repeats"],
    "pool_tiled_after_header": ["tile_repeats"],
    "low_bit_period_4": ["neighbour_bits"],
    "low_bit_period_6": ["neighbour_bits"],
    "low_bit_period_8": ["neighbour_bits"],
    "block_of_3_repeated": ["partner_repeats"],
    "rows_identical": ["word_repeats"],
}


@pytest.mark.parametrize("consumed", [2, 768, 1552, 98304])
def test_every_generator_meets_its_expectation(consumed):
    """Every generator of the audit's list on layouts we export (the code
    release; d_chi on one 384-d vector; word dropout at 16 tokens before
    a 384-d Laplace release, 16 + 1536; d_chi on 128 tokens): those that
    must be refused fail, the good one and those no check can see pass,
    and a partly bad buffer whose every group keeps a fresh word may pass
    (extraction makes it exact)."""
    from tfdptext.audit import word_generators as wg

    width = extraction.layout(consumed).words
    rng = np.random.default_rng(consumed)
    for name, generator in wg.GENERATORS.items():
        words = generator.make(rng, generator.rows, width, consumed)
        ok = bool(secure.words_look_random(tf.constant(words),
                                           consumed).numpy().all())
        expected = generator.expectation(width, consumed)
        if expected == wg.REFUSE:
            assert not ok, name
        elif expected == wg.RELEASE:
            assert ok, name
        if name in _CAUGHT_BY and expected == wg.REFUSE:
            row = {k: bool(v.numpy().all()) for k, v in
                   word_checks.row_verdicts(tf.constant(words),
                                            consumed).items()}
            row.update({k: bool(v.numpy().all()) for k, v in
                        word_checks.buffer_verdicts(tf.constant(words),
                                                    consumed).items()})
            sample = word_checks.sampled_words(tf.constant(words), consumed)
            row["word_repeats"] = bool(word_checks.call_passes(sample))
            failed = {k for k, v in row.items() if not v}
            # The partner checks exist only for g = 2 (otherwise every
            # word is read, and the repeats see a copy).
            wanted = set(_CAUGHT_BY[name]) & set(row)
            assert wanted <= failed and failed, (name, failed)


def test_a_batch_is_one_call():
    """Rows are checked together: one bad row fails every row; two good
    rows sharing their sampled words fail."""
    good = secure.os_random_words((3, 1536))
    assert secure.words_look_random(tf.constant(good), 768).numpy().all()
    bad = good.copy()
    bad[1] = np.arange(1536)
    assert not secure.words_look_random(tf.constant(bad), 768).numpy().any()
    shared = good.copy()
    shared[2] = shared[0]
    assert not secure.words_look_random(tf.constant(shared),
                                        768).numpy().any()


def test_uniforms_from_words_are_in_the_unit_interval():
    words = tf.constant([[0, -1, 2**31 - 1, -2**31, 2**24, 2**24 - 1]],
                        tf.int32)
    u = secure.uniforms_from_words(words).numpy()
    assert u.min() == 0.0 and u.max() == 1.0 - 2.0**-24
    np.testing.assert_array_equal(u[0, [0, 3, 4]], 0.0)


# --- The Python user side on os.urandom. -----------------------------------

def _seq_split(dropout=0.0):
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=60, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16)
    drop = layers.WordDropout(dropout, 4, (0, 2, 3)) if dropout else None
    return models.sequence_representation_split(
        backbone, 2, [layers.MinMaxNormalize(), layers.LaplaceNoise(2.0)],
        input_dropout=drop)


FEATURES = {"token_ids": np.array([[2, 7, 8, 9, 3, 0]] * 300, np.int32),
            "padding_mask": np.array([[1, 1, 1, 1, 1, 0]] * 300, np.int32)}


def test_secure_user_side_adds_laplace_from_os_entropy():
    from scipy import stats

    split = _seq_split()
    clean_user = _seq_split()  # reference weights copied below
    clean_user.user.set_weights(split.user.get_weights())
    clean_user.privatizer.noise = False
    segments = np.zeros_like(FEATURES["token_ids"])
    clean = np.asarray(clean_user.user({**FEATURES, "segment_ids": segments})
                       ["private_representation"])
    side = secure.SecureUserSide(split.user, split.split_point)
    released = side(FEATURES)["private_representation"]
    assert released.shape == (300, 8)
    assert stats.kstest((released - clean).ravel(),
                        stats.laplace(scale=0.5).cdf).pvalue > 1e-4
    g = side.guarantee
    assert g.randomness == randomness.OS_ENTROPY and "os.urandom" in str(g)
    assert g.value == 2.0 and g.unit == g_lib.PER_COORDINATE
    # The user side itself is unchanged: called directly it still adds its
    # own noise and says so.
    direct = np.asarray(split.user({**FEATURES, "segment_ids": np.zeros_like(
        FEATURES["token_ids"])})["private_representation"])
    assert np.abs(direct - clean).mean() > 0.1
    assert split.guarantee().randomness == randomness.TENSORFLOW_UNSEEDED


def test_secure_user_side_raises_on_non_finite_representation():
    split = _seq_split()
    side = secure.SecureUserSide(split.user, split.split_point)
    model = side.model(6)
    width = int(model.input[secure.RANDOM_WORDS].shape[-1])
    assert width == secure.MIN_RANDOM_WORDS  # 16 needed (k = 8, Laplace)
    words = secure.os_random_words((1, width))
    good = model({"token_ids": FEATURES["token_ids"][:1],
                  "padding_mask": FEATURES["padding_mask"][:1],
                  "random_words": words})["private_representation"]
    assert np.isfinite(good).all()
    bad = model({"token_ids": FEATURES["token_ids"][:1],
                 "padding_mask": FEATURES["padding_mask"][:1],
                 "random_words": np.zeros_like(words)})
    assert np.isnan(bad["private_representation"]).all()


def test_a_direct_layer_call_states_tensorflow_randomness():
    g = layers.LaplaceNoise(1.0).guarantee()
    assert g.randomness == randomness.TENSORFLOW_UNSEEDED
    assert "32-bit" in str(g)


# --- Non-finite inputs never give a valid-looking release. -----------------

@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rows_become_nan(bad):
    x = np.random.default_rng(0).random((3, 6)).astype(np.float32)
    x[1, 2] = bad
    for layer in (layers.MinMaxNormalize(), layers.LaplaceNoise(1.0),
                  layers.DChiNoise(5.0), layers.RandomizedResponse(1.0)):
        out = np.asarray(layer(x))
        assert np.isnan(out[1]).all(), layer.name
        assert np.isfinite(out[[0, 2]]).all(), layer.name


# --- [UNK] is privatized; structural tokens pass. --------------------------

def test_unk_is_privatized_and_structural_tokens_pass():
    layer = layers.DChiTextPrivatizer(1e4, TABLE, special_token_ids=SPECIAL,
                                      passthrough_token_ids=PASSTHROUGH)
    ids = np.array([[2, UNK, 7, 3, 0]] * 50)
    out = np.asarray(layer(ids))
    np.testing.assert_array_equal(out[:, [0, 3, 4]], ids[:, [0, 3, 4]])
    # [UNK] is never output: it became the candidate nearest to its
    # embedding (eta is large, so always the same one).
    assert not np.isin(out[:, 1], SPECIAL).any()
    nearest = np.argsort(np.linalg.norm(TABLE - TABLE[UNK], axis=1))
    expected = [i for i in nearest if i not in SPECIAL][0]
    assert (out[:, 1] == expected).all()
    corpus = offline.DChiCorpusPrivatizer(
        TABLE, 1e4, SPECIAL, passthrough_token_ids=PASSTHROUGH)
    out = corpus(ids)
    np.testing.assert_array_equal(out[:, [0, 3, 4]], ids[:, [0, 3, 4]])
    assert (out[:, 1] == expected).all()
    assert corpus.guarantee().randomness == randomness.OS_ENTROPY
    assert offline.DChiCorpusPrivatizer(TABLE, 1.0, SPECIAL, seed=0) \
        .guarantee().randomness == randomness.SEEDED
    with pytest.raises(ValueError, match="passthrough_token_ids"):
        layers.DChiTextPrivatizer(1.0, TABLE, special_token_ids=SPECIAL,
                                  passthrough_token_ids=[7])


def test_offline_dchi_hnsw_index_finds_the_nearest_and_keeps_the_guarantee():
    """index="hnsw": on a small table the graph search finds the exact
    nearest candidate (specials still never output, passthrough kept), and
    the guarantee is the exact index's (decoding is post-processing)."""
    exact = offline.DChiCorpusPrivatizer(TABLE, 2.0, SPECIAL,
                                         passthrough_token_ids=PASSTHROUGH)
    approx = offline.DChiCorpusPrivatizer(
        TABLE, 2.0, SPECIAL, passthrough_token_ids=PASSTHROUGH,
        index="hnsw", hnsw_neighbors=8)
    approx.index.hnsw.efSearch = 64
    queries = TABLE[np.arange(5, 60)] + np.random.default_rng(1).normal(
        scale=0.5, size=(55, 8)).astype(np.float32)
    np.testing.assert_array_equal(approx.nearest_tokens(queries),
                                  exact.nearest_tokens(queries))
    ids = np.array([[2, UNK, 7, 3, 0]] * 200)
    out = approx(ids)
    np.testing.assert_array_equal(out[:, [0, 3, 4]], ids[:, [0, 3, 4]])
    assert not np.isin(out[:, 1:3], SPECIAL).any()
    assert approx.guarantee() == exact.guarantee()
    assert 0 < exact.index_bytes() < approx.index_bytes()
    with pytest.raises(ValueError, match="index"):
        offline.DChiCorpusPrivatizer(TABLE, 1.0, SPECIAL, index="ivf")
    with pytest.raises(ValueError, match="hnsw_neighbors"):
        offline.DChiCorpusPrivatizer(TABLE, 1.0, SPECIAL, index="hnsw",
                                     hnsw_neighbors=1)


def test_offline_pq_index_finds_the_exact_nearest_on_noisy_queries():
    table = np.random.default_rng(2).normal(size=(2000, 16)).astype(
        np.float32)
    exact = offline.DChiCorpusPrivatizer(table, 2.0, SPECIAL)
    approx = offline.DChiCorpusPrivatizer(table, 2.0, SPECIAL, index="pq",
                                          pq_refine=64)
    assert approx.index.k_factor == 64
    assert offline.pq_subspaces(16) == 8
    # Noisy queries far from the table (noise norm about 8 vs rows of norm
    # about 4): re-ranking 64 candidates exactly recovers the nearest for
    # (almost) all; one candidate does not.
    queries = (table[np.arange(5, 1005)]
               + offline.dchi_noise(np.random.default_rng(3), 1000, 16, 2.0)
               ).astype(np.float32)
    truth = exact.nearest_tokens(queries)
    assert np.mean(approx.nearest_tokens(queries) == truth) > 0.97
    approx.index.k_factor = 1
    assert np.mean(approx.nearest_tokens(queries) == truth) < 0.9
    assert not np.isin(approx(np.arange(5, 2000)), SPECIAL).any()
    assert approx.guarantee() == exact.guarantee()
    with pytest.raises(ValueError, match="624 candidate tokens"):
        offline.DChiCorpusPrivatizer(TABLE, 1.0, SPECIAL, index="pq")
    with pytest.raises(ValueError, match="pq_refine"):
        offline.DChiCorpusPrivatizer(table, 1.0, SPECIAL, index="pq",
                                     pq_refine=0)


def test_offline_os_noise_norm_is_gamma():
    from scipy import stats

    noise = offline.dchi_noise(None, 4000, 8, 2.0)
    norms = np.linalg.norm(noise, axis=1)
    assert stats.kstest(norms, stats.gamma(a=8, scale=0.5).cdf
                        ).pvalue > 1e-4
    # Directions uniform: the mean direction is near 0 (sd 1/sqrt(8*4000)).
    assert np.abs((noise / norms[:, None]).mean(axis=0)).max() < 0.03


@pytest.mark.parametrize("shape", [1.0, 300.0])
def test_os_gamma_is_gamma(shape):
    from scipy import stats

    draws = offline.os_gamma(shape, 20000)
    assert stats.kstest(draws, stats.gamma(a=shape).cdf).pvalue > 1e-4
    with pytest.raises(ValueError, match="shape"):
        offline.os_gamma(0.5, 10)


def test_os_gamma_fails_closed_when_every_draw_is_rejected(monkeypatch):
    from tfdptext.offline import dchi

    # A stuck source: every normal is -3, so v = (1 + c x)^3 <= 0 at shape
    # 1 and every row is rejected; the sampler must raise, not return.
    monkeypatch.setattr(dchi, "os_normals", lambda count: np.full(count, -3.0))
    with pytest.raises(RuntimeError, match="random source is broken"):
        dchi.os_gamma(1.0, 5)
    with pytest.raises(RuntimeError, match="random source is broken"):
        dchi.dchi_noise(None, 5, 1, 2.0)


# --- Units and delta. ------------------------------------------------------

def test_word_dropout_guarantee_is_per_token_substitution():
    base = privacy.laplace_guarantee(1.0, 1, "vector")
    g = privacy.with_dropout(base, 0.5, 2, 2)
    assert g.unit == g_lib.PER_TOKEN_SUBSTITUTION
    assert math.isclose(g.value, math.log(0.5 * math.e + 0.5))
    assert "WordPiece" in str(g) and "base 1" in str(g)
    assert g.delta == base.delta


def test_pooled_dchi_is_per_sequence():
    layer = layers.DChiNoise(10.0, vectors="sequences")
    layer(np.zeros((1, 4), np.float32))
    assert layer.guarantee().unit == g_lib.PER_SEQUENCE
    restored = layers.DChiNoise.from_config(layer.get_config())
    assert restored.vectors == "sequences"
    with pytest.raises(ValueError, match="vectors"):
        layers.DChiNoise(10.0, vectors="words")


def test_dchi_with_word_dropout_is_refused_before_training():
    from tfdptext import training

    with pytest.raises(ValueError, match="dropout_rate"):
        training.TrainConfig(mode="seq_rep", eta=10.0,
                             dropout_rate=0.3).validate()


def _grid_model_divergence(shift, n, points=1_000_001):
    """delta of the Laplace grid model (E1 on the atoms ln(n / j), E2 ~
    Exp(1), b = 1) by numerical integration of its density, built from
    the atoms: g(v) = sum over atoms >= v of e^-(E1_j - v) / n."""
    atoms = np.log(n / np.arange(1, n + 1))
    v = np.linspace(-6.0, math.log(n) + shift + 0.5, points)

    def density(v):
        # Atoms sorted from the largest: the ones >= v are the first J.
        count = np.searchsorted(-atoms, -v, side="right")
        partial = np.concatenate([[0.0], np.cumsum(np.exp(-atoms))])
        return np.exp(v) * partial[count] / n

    return np.trapezoid(np.maximum(
        density(v - shift) - math.exp(shift) * density(v), 0.0), v)


@pytest.mark.parametrize("bits,shift", [(4, 0.05), (4, 3.0), (6, 0.3),
                                        (8, 0.05), (8, 1.0)])
def test_grid_constant_is_the_divergence_of_the_grid_model(bits, shift):
    """Below 2^16 atoms the constant is summed exactly: it is the
    hockey-stick divergence of the model, to integration accuracy."""
    n = 2**bits
    numeric = _grid_model_divergence(shift, n)
    assert privacy.laplace.grid_constant(shift, bits) / n == pytest.approx(
        numeric, rel=2e-3)


def _binned_discrete_divergence(shift, bits1, bits2, width):
    """delta between the laws of x + E1 - E2 and x + shift + E1 - E2,
    E1 and E2 exactly on their grids (ln(2^bits / j)), with the output
    observed in bins of `width` (shift a multiple of it): exact counts."""
    n1, n2 = 2**bits1, 2**bits2
    top = math.log(n1) + 1.0
    edges = np.arange(-math.log(n2) - 1.0, top + width, width)
    e1 = np.log(n1 / np.arange(1, n1 + 1))
    # P(E1 - E2 < t) = sum over E1 atoms of P(E2 > E1 - t) / n1, and
    # E2 = ln(n2 / i) > c iff i < n2 e^-c: ceil(n2 e^-c) - 1 values.
    c = e1[:, None] - edges[None, :]
    below = np.clip(np.ceil(n2 * np.exp(-c)) - 1.0, 0, n2).sum(0) / (n1 * n2)
    mass = np.diff(below)
    k = int(round(shift / width))
    shifted = np.concatenate([np.zeros(k), mass[:len(mass) - k]])
    return np.maximum(shifted - math.exp(k * width) * mass, 0.0).sum()


def test_the_grid_model_holds_only_where_the_release_cannot_resolve_e2():
    """The sampler itself, both exponentials on their grids, counted
    exactly (no integration), the output observed in bins of 2^-11: with
    E2's grid far finer than the bins everywhere it matters (2^20 values)
    its delta is the grid model's (E2 continuous); with E2 on 2^16 values
    (its spacing e^E2 2^-16 reaches the bins' width for E2 > 3.5) it is
    44% above; with both on the same grid, resolved finely, it is many
    times above. This is why random words feed the Laplace sampler two
    words per exponential (56 bits: coarser than float32 only beyond
    32 ln 2, charged in full) and why the 23-bit internal sampler's delta
    is stated for the grid model only."""
    bits, width = 8, 2.0**-11
    shift = 52 * width  # about 0.025
    model = privacy.laplace.grid_constant(shift, bits) / 2**bits
    coarse = _binned_discrete_divergence(shift, bits, 20, width)
    assert 0.95 * model < coarse <= 1.01 * model
    resolved = _binned_discrete_divergence(shift, bits, 16, width)
    assert resolved > 1.3 * model
    fine = _binned_discrete_divergence(2.0**-4, bits, bits, 2.0**-14)
    assert fine > 10 * privacy.laplace.grid_constant(2.0**-4, bits) / 2**bits


def test_grid_constant_tail_bound_and_monotone():
    """Beyond 2^16 terms the constant bounds the rest: at 20 bits it is
    at least the exact sum over every term and exceeds it by at most the
    stated tail bound; it grows with the shift."""
    from tfdptext.privacy import laplace

    bits, n = 20, 2**20
    for shift in (0.05, 1.0):
        stated = laplace.grid_constant(shift, bits)
        exact = laplace.grid_constant(shift, 16) - float(
            laplace._slice_terms(shift, np.arange(1, 2**16, dtype=float),
                                 2**16).sum())  # the t < 1 part alone
        exact += float(laplace._slice_terms(
            shift, np.arange(1, n, dtype=float), n).sum())
        e_s = math.exp(shift)
        tail = (e_s + 1)**2 * (1 + 2.0**-16)**2 / (8 * e_s) \
            * math.log((n - 1) / 2**16)
        assert exact <= stated <= exact + tail
    for bits in (23, 32):
        values = [laplace.grid_constant(s, bits)
                  for s in np.linspace(0.01, 8.0, 40)]
        assert np.all(np.diff(values) > 0)


def test_laplace_guarantees_state_delta():
    from tfdptext.privacy import laplace

    g = privacy.laplace_guarantee(1.0, 384)
    assert math.isclose(g.delta, laplace.grid_constant(1.0, 23) * 2.0**-23)
    rep = privacy.to_representation_level(g)
    assert math.isclose(rep.delta, 384 * g.delta)
    vec = privacy.laplace_guarantee(19.2, 384, "vector")
    assert math.isclose(vec.delta, 384 * laplace.grid_constant(
        0.05, 23) * 2.0**-23)
    assert "delta" in str(vec)
    # Noise from random words: 56-bit exponentials, whose grid is coarser
    # than float32 only with probability 2^-32 per exponential.
    layer = layers.LaplaceNoise(19.2, sensitivity="vector")
    layer(np.zeros((1, 384), np.float32))
    words = layer.guarantee(randomness.APP_SECURE_RNG)
    assert math.isclose(words.delta, 384 * (1 + math.exp(0.05)) * 2 * 2.0**-32)
    assert words.delta < vec.delta / 100
    assert layer.guarantee().delta == vec.delta


def _dchi_2d_divergence(eta, distance, bits, step=0.01):
    """delta of 2-d d_chi noise whose two radius exponentials are clamped
    at bits ln 2 (the model of `truncation_probability`): the radius law
    has density e^-r (min(r, M) - max(0, r - M)) on [0, 2M] (both
    unclamped) and puts the rest, P(a clamp), on circles; the direction is
    uniform (in 2-d Box-Muller's radius cancels). The circles of x' carry
    mass where x's law has none; the rest by numerical integration."""
    m = bits * math.log(2) / eta
    r_max = 2 * m + distance + 1
    grid = np.arange(-r_max, r_max + step, step)
    zx, zy = np.meshgrid(grid, grid, indexing="ij")

    def density(cx):
        r = np.hypot(zx - cx, zy) * eta
        radial = np.exp(-r) * (np.minimum(r, eta * m)
                               - np.maximum(0.0, r - eta * m))
        radial = np.where(r <= 2 * eta * m, radial, 0.0)
        return eta * eta * radial / (2 * np.pi * np.maximum(r, 1e-12))

    a, b = density(0.0), density(distance)
    continuous = np.maximum(b - math.exp(eta * distance) * a, 0.0).sum() \
        * step * step
    clamp = 1 - (1 - math.exp(-eta * m))**2
    return continuous + clamp


@pytest.mark.parametrize("bits,distance", [(4, 0.5), (4, 2.0), (6, 1.0)])
def test_dchi_delta_bounds_the_clamped_sampler(bits, distance):
    """The d_chi truncation is charged: (1 + e^(eta d)) tau with tau =
    (n + ceil(n / 2)) 2^-bits is at least the divergence of the clamped
    2-d sampler (computed), and within a factor 6 of it (or 1)."""
    from tfdptext.privacy import metric

    eta = 1.0
    exact = _dchi_2d_divergence(eta, distance, bits)
    g = metric.dchi_guarantee(eta, 2, uniform_bits=bits)
    assert g.delta == metric.truncation_probability(2, bits) == 3 * 2.0**-bits
    stated = metric.pair_delta(g, distance)
    assert exact <= stated
    assert stated < 6 * exact or stated == 1.0


def test_dchi_guarantees_state_the_truncation():
    from tfdptext.privacy import metric

    layer = layers.DChiTextPrivatizer(10.0, TABLE, special_token_ids=SPECIAL,
                                      passthrough_token_ids=PASSTHROUGH)
    layer(np.array([[5]]))
    assert layer.guarantee().delta == (8 + 4) * 2.0**-23
    assert layer.guarantee(randomness.APP_SECURE_RNG).delta == \
        (8 + 4) * 2.0**-32
    assert "(1 + exp(eta d)) delta" in layer.guarantee().composition
    corpus = offline.DChiCorpusPrivatizer(TABLE, 10.0, SPECIAL)
    assert corpus.guarantee().delta == (8 + 4) * 2.0**-53
    assert metric.dchi_guarantee(5.0).delta == 1.0  # no dimension: no claim


@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0, True])
def test_guarantee_refuses_non_finite_values(value):
    with pytest.raises(ValueError, match="value"):
        g_lib.Guarantee("laplace", "epsilon", value,
                        g_lib.PER_REPRESENTATION)


def test_guarantee_round_trips_with_randomness():
    g = privacy.laplace_guarantee(1.0, 4).with_randomness(
        randomness.APP_SECURE_RNG)
    back = g_lib.Guarantee.from_json(g.to_json())
    assert back == g
    with pytest.raises(ValueError, match="randomness"):
        g.with_randomness("dev_random")
