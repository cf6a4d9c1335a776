"""The random-words checks, in the graph (TFLite builtin ops only).

`words_look_random(words)` is what a phone model (and `SecureUserSide`)
runs on its `random_words` input before releasing anything: the eight
per-row statistics of `tfdptext.privacy.word_statistics` against their
limits for the row length W, and the two duplicate counts over the whole
call (the batch flattened into one buffer). One verdict for the whole
call: when any row, or the call, fails, every row's release is unusable.

Ops: FLOOR_MOD, RIGHT_SHIFT, SUB, MINIMUM, CAST, MUL, SUM, RESHAPE, PAD,
UNSORTED_SEGMENT_SUM (bucket counts), TOPK_V2 (one sort of the call's
words, carrying their positions) and GATHER (each sorted word's
successor), LOG for the duplicate limits, which depend on the number of
words in the call and so are computed in the graph.

Sums of many float32 terms are taken per block of 128 and then over the
blocks (`_blocked_mean`), so that rounding stays far below the limits'
margins even for 98,304 words.
"""

import math

import tensorflow as tf

from tfdptext.privacy import word_statistics as ws

_LOW = 2**ws.LOW_BITS


def words_look_random(words):
    """(batch, 1) booleans, all equal: whether the call's words pass.

    Args:
        words: int32 (batch, W), W >= `ws.MIN_WORDS` (static).
    """
    words = tf.cast(words, tf.int32)
    ok = tf.logical_and(_rows_pass(words), call_passes(words))
    return tf.logical_and(tf.equal(tf.zeros_like(words[:, :1]), 0), ok)


def _rows_pass(words):
    """A scalar: whether every row passes its per-row checks."""
    return _all(tf.stack(list(row_verdicts(words).values()), axis=-1))


def row_verdicts(words, limits=None):
    """{check name: (batch,) booleans, True where the row passes}."""
    num_words = _num_words(words)
    limits = limits or ws.row_limits(num_words)
    stats = row_statistics(words)
    out = {}
    for name in ws.ROW_TESTS:
        if name == "near_equal":
            out[name] = stats[name] < float(limits.near_equal)
            continue
        low, high = getattr(limits, name)
        ok = tf.ones_like(stats[name], tf.bool)
        if low is not None:
            ok = tf.logical_and(ok, stats[name] > float(low))
        if high is not None:
            ok = tf.logical_and(ok, stats[name] < float(high))
        out[name] = ok
    return out


def row_statistics(words):
    """{check name: (batch,) float32}: the per-row statistics
    (`tfdptext.privacy.word_statistics`, checks 1 to 8)."""
    num_words = _num_words(words)
    words = tf.cast(words, tf.int32)
    low24 = tf.math.floormod(words, _LOW)
    high = _high_byte(words)
    step = tf.math.floormod(low24[:, :-1] - low24[:, 1:], _LOW)
    distance = tf.minimum(step, _LOW - step)
    spread = tf.cast(distance, tf.float32) * 2.0**-ws.LOW_BITS
    stats = {
        "mean_low": _blocked_mean(tf.cast(low24, tf.float32)
                                  * 2.0**-ws.LOW_BITS),
        "mean_high": _blocked_mean((tf.cast(high, tf.float32) + 0.5)
                                   / ws.BYTE_VALUES),
        "serial": _blocked_mean(spread * spread),
        "near_equal": tf.reduce_sum(tf.cast(
            distance < ws.NEAR_DISTANCE, tf.float32), axis=-1),
    }
    blocks = num_words // ws.BLOCK
    blocked = tf.reshape(words[:, :blocks * ws.BLOCK], [-1, ws.BLOCK])
    for name, values in (("low_byte", tf.math.floormod(blocked,
                                                        ws.BYTE_VALUES)),
                         ("high_byte", _high_byte(blocked))):
        steps = tf.math.floormod(values[:, :-1] - values[:, 1:],
                                 ws.BYTE_VALUES)
        for suffix, part in (("collisions", values),
                             ("step_collisions", steps)):
            pairs = tf.minimum(_pairs_per_block(part),
                               float(ws.COLLISION_CAP))
            stats[f"{name}_{suffix}"] = tf.reduce_sum(
                tf.reshape(pairs, [-1, blocks]), axis=-1)
    return stats


def call_passes(words):
    """A scalar: whether the call's words, all rows together, pass the
    duplicate checks (`word_repeats`, `pair_repeats`)."""
    counts = duplicate_counts(tf.reshape(tf.cast(words, tf.int32), [1, -1]))
    return _all(duplicate_verdicts(counts, tf.size(words)))


def _successors(words, positions):
    """words[row, positions + 1 mod N] for int32 (rows, N) tensors (one
    row: a plain GATHER; several: with batch_dims)."""
    n = tf.shape(words)[-1]
    following = tf.math.floormod(positions + 1, n)
    if words.shape[0] == 1:
        return tf.gather(words[0], following)
    return tf.gather(words, following, batch_dims=1)


def duplicate_counts(words):
    """(repeated words, repeated pairs) per row of an int32 (rows, N)
    tensor, each (rows,) float32: sort each row (carrying the positions),
    count equal neighbours, and those whose successors (position + 1 mod
    N) are equal too."""
    top = tf.math.top_k(words, k=tf.shape(words)[-1], sorted=True)
    ordered, positions = top.values, top.indices
    equal = tf.equal(ordered[:, 1:], ordered[:, :-1])
    successors = _successors(words, positions)
    pairs = tf.logical_and(equal, tf.equal(successors[:, 1:],
                                           successors[:, :-1]))
    return (tf.reduce_sum(tf.cast(equal, tf.float32), axis=-1),
            tf.reduce_sum(tf.cast(pairs, tf.float32), axis=-1))


def duplicate_verdicts(counts, num_words):
    """(rows, 2) booleans, True where the row passes `word_repeats` and
    `pair_repeats`, for rows of `num_words` words (an int tensor or int:
    the limits are computed in the graph, as the batch size, and so the
    call's word count, may be known only at run time)."""
    words_repeated, pairs_repeated = counts
    n = tf.cast(num_words, tf.float32)
    # word_repeats: ln of the bound (N (N - 1) / 2^32)^r / r!, Stirling.
    rate = n * (n - 1.0) * 2.0**-32
    r = tf.maximum(words_repeated, 1.0)
    log_bound = r * tf.math.log(rate * math.e / r) \
        - 0.5 * tf.math.log(2.0 * math.pi * r)
    words_fail = tf.logical_and(
        words_repeated >= 1.0,
        log_bound <= math.log(ws.TEST_FALSE_ALARM))
    # pair_repeats: 1 repeat fails while lambda <= the share, 2 while the
    # second-moment bound holds; beyond that the call is refused.
    lam = n * (n - 1.0) * 0.5 * 2.0**-64
    alarm = ws.PAIR_REPEATS_FALSE_ALARM
    one = lam <= alarm
    two = tf.logical_and(lam * lam * 0.5 + 4.0 * lam * 2.0**-32 <= alarm,
                         n <= float(ws.MAX_WORDS_PER_CALL))
    pairs_fail = tf.logical_or(
        tf.logical_or(tf.logical_and(one, pairs_repeated >= 1.0),
                      tf.logical_and(two, pairs_repeated >= 2.0)),
        tf.logical_not(tf.logical_or(one, two)))
    return tf.stack([tf.logical_not(words_fail),
                     tf.logical_not(pairs_fail)], axis=-1)


def _all(booleans):
    """A scalar: whether every element is True (REDUCE_ALL is avoided:
    MIN over 0/1 floats is a builtin everywhere)."""
    return tf.reduce_min(tf.cast(booleans, tf.float32)) > 0.5


def _high_byte(words):
    """The unsigned high byte of int32 words: (w >> 24) mod 256
    (RIGHT_SHIFT is arithmetic, so negative words give -128..-1)."""
    return tf.math.floormod(tf.bitwise.right_shift(words, 24),
                            ws.BYTE_VALUES)


def _pairs_per_block(values):
    """(blocks,) float32: pairs of equal values in each row of a (blocks,
    n) int tensor of bytes, sum over the 256 values of c (c - 1) / 2."""
    rows = tf.shape(values)[0]
    ids = tf.reshape(values + tf.range(rows)[:, None] * ws.BYTE_VALUES, [-1])
    counts = tf.math.unsorted_segment_sum(
        tf.ones_like(ids, tf.float32), ids, rows * ws.BYTE_VALUES)
    counts = tf.reshape(counts, [-1, ws.BYTE_VALUES])
    return tf.reduce_sum(counts * (counts - 1.0), axis=-1) * 0.5


def _blocked_mean(values):
    """(batch,) mean over the last axis (static length), summed per block
    of 128 and then over the blocks."""
    length = int(values.shape[-1])
    padded = -(-length // ws.BLOCK) * ws.BLOCK
    values = tf.pad(values, [[0, 0], [0, padded - length]])
    per_block = tf.reduce_sum(tf.reshape(values, [-1, padded // ws.BLOCK,
                                                  ws.BLOCK]), axis=-1)
    return tf.reduce_sum(per_block, axis=-1) / float(length)


def _num_words(words):
    num_words = words.shape[-1]
    if num_words is None or int(num_words) < ws.MIN_WORDS:
        raise ValueError(f"`words` must have a static last dimension of at "
                         f"least {ws.MIN_WORDS}, received shape "
                         f"{tuple(words.shape)}.")
    return int(num_words)
