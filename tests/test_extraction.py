"""Randomness extraction (tfdptext.privacy.extraction): the layout, the
exactness rule, and the sum modulo 2^32 computed alike by numpy,
TensorFlow and TFLite (a runtime that saturated instead of wrapping would
make the consumed words non-uniform, silently)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from scipy import stats

from tfdptext.errors import ArgumentError
from tfdptext.export import tflite
from tfdptext.models import word_checks
from tfdptext.privacy import extraction


@pytest.mark.parametrize("consumed, group", [
    (1, 128), (2, 64), (3, 64), (40, 4), (63, 4), (64, 2), (100, 2),
    (1536, 2), (98304, 2)])
def test_layout_mixes_at_least_two_words_and_fills_128(consumed, group):
    lay = extraction.layout(consumed)
    assert lay.group == group and lay.words == consumed * group
    assert lay.words >= extraction.MIN_WORDS and lay.group >= 2
    assert lay.group & (lay.group - 1) == 0
    # The smallest such power of two.
    assert lay.group == 2 or (lay.group // 2) * consumed < 128
    # Group j holds one word of each block of C: p(i, j) = i C + ((j +
    # s_i) mod C), and the groups cut the buffer into g-word pieces.
    order = lay.order
    assert order.shape == (group, consumed)
    np.testing.assert_array_equal(np.sort(order.ravel()),
                                  np.arange(lay.words))
    np.testing.assert_array_equal(
        order // consumed, np.repeat(np.arange(group)[:, None], consumed, 1))
    last = consumed - 1
    assert lay.positions(last) == [int(p) for p in order[:, last]]


@pytest.mark.parametrize("consumed", [1, 2, 3, 40, 63, 64, 100, 1536,
                                      1552, 12288])
def test_every_group_holds_words_of_both_parities_and_both_halves(
        consumed):
    """Issue 38: with p(i, j) = i C + j, a code release's group 0 was the
    64 even words, and g = 2 with C even paired even words with even
    words: an app whose even words came from a seeded generator chose the
    release. Now no group lies in one parity class, or one half."""
    lay = extraction.layout(consumed)
    positions = np.arange(lay.words)
    for bad in (positions % 2 == 0, positions % 2 == 1,
                positions < lay.words // 2, positions >= lay.words // 2):
        assert extraction.exact_despite(np.nonzero(bad)[0], consumed)
    if consumed == 2:
        # Thue-Morse: every group meets every residue class modulo 2^k,
        # 2^k <= 64, so the words of any one class, the rest bad, keep
        # the release exact.
        for k in range(1, 7):
            for r in range(2**k):
                assert extraction.exact_despite(
                    np.nonzero(positions % 2**k != r)[0], consumed), (k, r)


def test_layout_refuses_bad_counts():
    for bad in (0, -3, 2.5, "8"):
        with pytest.raises(ArgumentError, match="consumed"):
            extraction.layout(bad)


def test_exact_despite_every_short_run_and_any_g_minus_one_words():
    rng = np.random.default_rng(0)
    for consumed, run in ((2, 126), (3, 189), (40, 117), (64, 63),
                          (300, 299), (301, 301)):
        lay = extraction.layout(consumed)
        longest = extraction.longest_harmless_run(consumed)
        assert longest == run
        edge = extraction.longest_harmless_edge(consumed)
        assert edge == lay.words - consumed
        assert extraction.exact_despite(range(edge), consumed)
        assert extraction.exact_despite(range(lay.words - edge, lay.words),
                                        consumed)
        assert not extraction.exact_despite(range(edge + 1), consumed)
        for start in rng.integers(0, lay.words - longest, size=20):
            assert extraction.exact_despite(
                range(start, start + longest), consumed)
        # One more word: some run of that length kills a group.
        assert not all(extraction.exact_despite(range(a, a + longest + 1),
                                                consumed)
                       for a in range(lay.words - longest))
        for _ in range(20):
            bad = rng.choice(lay.words, size=lay.group - 1, replace=False)
            assert extraction.exact_despite(bad, consumed)
        # A whole group bad is not exact.
        assert not extraction.exact_despite(lay.positions(1), consumed)
    with pytest.raises(ArgumentError, match="bad_positions"):
        extraction.exact_despite([128], 2)


def test_buffer_for_inverts_extraction():
    rng = np.random.default_rng(1)
    for consumed in (2, 40, 1536):
        lay = extraction.layout(consumed)
        v = rng.integers(-2**31, 2**31, size=(3, consumed)).astype(np.int32)
        others = rng.integers(-2**31, 2**31, size=(3, lay.words - consumed)
                              ).astype(np.int32)
        words = extraction.buffer_for(v, others)
        np.testing.assert_array_equal(extraction.extract(words, consumed), v)
        # `others` fill blocks 1 .. g - 1 in the groups' order.
        np.testing.assert_array_equal(
            words[:, lay.order[1:].ravel()], others)
    with pytest.raises(ArgumentError, match="others"):
        extraction.buffer_for(np.zeros((1, 2), np.int32),
                              np.zeros((1, 3), np.int32))


def test_one_fresh_word_makes_the_sum_uniform_whatever_the_others():
    """The fact extraction rests on, on the integers modulo 2^32: the
    group's other words fixed to the worst cases (0, -1, the top bit, a
    counter), one fresh word: every byte of the sum uniform (chi-square
    over 40,000 sums), the bits of the sum balanced."""
    rng = np.random.default_rng(2)
    fresh = rng.integers(0, 2**32, size=40000, dtype=np.uint64)
    for fixed in (0, 0xFFFFFFFF, 0x80000000, 0x01020304):
        total = (fresh + np.uint64(fixed)) & np.uint64(0xFFFFFFFF)
        for shift in (0, 8, 16, 24):
            counts = np.bincount(((total >> np.uint64(shift)) & np.uint64(
                255)).astype(np.int64), minlength=256)
            assert stats.chisquare(counts).pvalue > 1e-6, (fixed, shift)


def _overflowing(shape, rng):
    """Words near the int32 ends, so that most sums overflow."""
    ends = np.array([2**31 - 1, -2**31, 2**31 - 7, -2**31 + 3, -1, 1],
                    np.int64)
    values = rng.choice(ends, size=shape) + rng.integers(-5, 5, size=shape)
    return np.clip(values, -2**31, 2**31 - 1).astype(np.int32)


@pytest.mark.parametrize("consumed", [2, 40, 64, 300])
def test_graph_and_tflite_sum_modulo_2_32_like_numpy(consumed):
    rng = np.random.default_rng(consumed)
    lay = extraction.layout(consumed)
    words = _overflowing((4, lay.words), rng)
    expected = extraction.extract(words, consumed)
    eager = word_checks.extract(tf.constant(words), consumed).numpy()
    np.testing.assert_array_equal(eager, expected)
    traced = tf.function(lambda w: word_checks.extract(w, consumed))
    np.testing.assert_array_equal(traced(tf.constant(words)).numpy(),
                                  expected)
    inputs = keras.Input((lay.words,), dtype="int32", name="random_words")
    model = keras.Model(inputs, keras.layers.Lambda(
        lambda w: word_checks.extract(w, consumed))(inputs))
    runner = Interpreter(model_content=tflite.convert(model)
                         ).get_signature_runner()
    out = next(iter(runner(random_words=words).values()))
    np.testing.assert_array_equal(out, expected)


def test_graph_extraction_refuses_a_wrong_width():
    with pytest.raises(ValueError, match="128 words per row"):
        word_checks.extract(tf.zeros((1, 64), tf.int32), 2)
