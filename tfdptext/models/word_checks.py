"""Random words in the graph: extraction and checks (TFLite builtins only).

A phone model (and `SecureUserSide`) takes N = g C int32 `random_words`
per row and does two things with them before releasing anything:

- `extract(words, consumed)`: the C words its mechanism reads, each the
  sum modulo 2^32 of the g words of its group, one per block of C, the
  blocks rotated by public shifts (`tfdptext.privacy.extraction`): a
  release is exact whenever every group holds one fresh word independent
  of the bad ones, so a few bad words, the first or last (g - 1) C, or
  every word of one parity, cannot choose it.
- `words_look_random(words, consumed)`: the checks of
  `tfdptext.privacy.word_statistics`: on a fixed sample of each row (the
  32 bit counts and the four byte-collision counts of the sampled words;
  the sampled words equal to their partner half a buffer later and the
  bit counts of the pairs' sums; the bit counts of the XOR of sampled
  words 16 and 24 apart; the zeros among the sums of the words C
  apart), on every word through the zeros of the consumed words and the
  aligned word pairs equal to one of 4 pairs among the first 8 words
  (tiled pools), and the repeated
  sampled words over the whole call: one verdict for the whole call; when any
  row, or the call, fails, every row's release is unusable.

Ops: SPLIT, CONCATENATION and ADD (g = 2) or GATHER and SUM (g > 2) for
the extraction, which TFLite computes modulo 2^32 like TensorFlow
(tested, `tests/test_extraction.py`); GATHER (the sample), BITCAST (the
words' bytes; the words' int64 pairs for tiled pools), FLOOR_MOD and SUB (byte steps), UNSORTED_SEGMENT_SUM (byte
histograms, bucket counts), a small matrix product (bit counts from the
byte histograms), BITWISE_XOR (neighbours), EQUAL (zeros), TOPK_V2 (one
sort of the call's sampled words); with a dynamic batch (SecureUserSide)
also LOG for the repeat limit, which then depends on the number of rows.
Every sub-range of a tensor is a SPLIT_V (`_part`), never a
STRIDED_SLICE, which TFLite copies element by element: with the
extraction's rotation in the same SPLIT_V, this took the mixing and
checks of a 16-token d_chi phone model from 0.210 to 0.129 ms (one loaded
run, docs/benchmarks.md).
"""

import math

import numpy as np
import tensorflow as tf

from tfdptext.privacy import extraction
from tfdptext.privacy import word_statistics as ws

_PLANE_SHIFTS = (0, 8, 16, 24)
# BITS[v, b] = bit b of the byte value v: byte histograms -> bit counts.
_BITS = np.array([[(v >> b) & 1 for b in range(8)]
                  for v in range(ws.BYTE_VALUES)], np.float32)
# The collision kinds, in the order of `ws.COLLISION_TESTS`.
_KINDS = len(ws.COLLISION_TESTS)


def extract(words, consumed):
    """(rows, C) int32: the words a mechanism reads, from (rows, N) int32
    random words with N = `extraction.layout(C).words`: word j is the sum
    modulo 2^32 of the words p(0, j), ..., p(g - 1, j) of its group
    (`extraction.Layout.order`).

    Raises ValueError when the static row length is not N.
    """
    lay = extraction.layout(consumed)
    width = words.shape[-1]
    if width is None or int(width) != lay.words:
        raise ValueError(f"`words` must have {lay.words} words per row for "
                         f"{consumed} consumed words, received shape "
                         f"{tuple(words.shape)}.")
    words = tf.cast(words, tf.int32)
    c = lay.consumed
    if lay.group == 2:
        # SPLIT + ADD; for C even (shift -1: word j pairs with C + j - 1,
        # word 0 with the last) one SPLIT_V into [w_0], [w_1, w_C-1],
        # [w_C, w_2C-2], [w_2C-1], two ADDs and a CONCATENATION of the
        # sums: a strided slice or a GATHER of a long buffer costs 5-10
        # times as much in TFLite (docs/benchmarks.md), and rotating the
        # second half first would copy it once more.
        if not lay.shifts[1]:
            first, second = tf.split(words, 2, axis=-1)
            return first + second
        head, first, second, last = tf.split(words, [1, c - 1, c - 1, 1],
                                             axis=-1)
        return tf.concat([head + last, first + second], axis=-1)
    if any(lay.shifts):
        # At most 256 words (g > 2 means C < 64): one GATHER.
        words = tf.gather(words, lay.order.reshape(-1).astype(np.int32),
                          axis=1)
    return tf.reduce_sum(tf.reshape(words, [-1, lay.group, c]), axis=1)


def words_look_random(words, consumed, used=None):
    """A scalar boolean: whether the call's words pass (one verdict for
    every row of the call; it broadcasts against a batch of releases).

    Args:
        words: int32 (batch, N), N = `extraction.layout(consumed).words`
            (static).
        consumed: C, the words the mechanism reads.
        used: `extract(words, consumed)` when the caller has it (else it
            is computed again).

    Each statistic passes when low < value < high; the margins
    min(value - low, high - value) of every statistic of every row and
    the repeat count's (limit - repeats) are reduced to one minimum, so
    the verdict costs a handful of ops.
    """
    words = tf.cast(words, tf.int32)
    sample = sampled_words(words, consumed)
    values, lows, highs = _row_statistics(sample, consumed)
    extra, extra_lows, extra_highs = _buffer_statistics(
        words, consumed, sample, used)
    values = tf.concat([values, extra], axis=-1)
    lows = np.concatenate([lows, extra_lows])
    highs = np.concatenate([highs, extra_highs])
    margin = tf.reduce_min(tf.minimum(values - lows, highs - values))
    return tf.minimum(margin, _repeat_margin(sample)) > 0.0


def _buffer_columns(consumed):
    """{check name: its column in `_buffer_statistics`' values}."""
    return {"strided_sum_zeros": [0], "consumed_zeros": [1],
            "tile_repeats": [2]}


def _buffer_statistics(words, consumed, sample, used=None):
    """((batch, 2) float32, lows, highs): the zero counts of issue 38, in
    `_buffer_columns` order (`tfdptext.privacy.word_statistics`):

    - `strided_sum_zeros`: the zeros among the sums of the words C apart
      (g = 2: of the sampled pairs; the extraction before issue 38, which
      apps could have cancelled with checksums or a negated half);
    - `consumed_zeros`: the zeros among all C consumed words (groups
      cancelled by checksums; a buffer mostly zero anywhere);
    - `tile_repeats`: the aligned word pairs after the first 8 words
      equal to one of 4 anchor pairs among them (a pool of any size up
      to N - 8 tiled from the first word, or after a header of up to 3
      words: `_tile_repeats`).

    Ops: EQUAL and SUM (SUM over g words C apart when g > 2); the words'
    int64 pairs, EQUAL against each of 4 anchor pairs, MAXIMUM and SUM.
    """
    limits = ws.row_limits(consumed)
    lay = extraction.layout(consumed)
    if used is None:
        used = extract(words, consumed)
    if lay.group == 2:
        first, second = tf.split(sample, 2, axis=-1)
        strided = first + second
    else:
        strided = tf.reduce_sum(tf.reshape(words, [-1, lay.group, consumed]),
                                axis=1)
    values = tf.concat([_zeros(strided), _zeros(used),
                        _tile_repeats(words)], axis=-1)
    highs = np.array([limits.strided_sum_zeros[1],
                      limits.consumed_zeros[1], limits.tile_repeats[1]],
                     np.float32)
    return values, np.full(3, -1.0, np.float32), highs


def _tile_repeats(words):
    """(batch, 1) float32: the aligned word pairs (w_2m, w_2m+1), m >= 4
    (the words after the first 8), equal to one of the anchor pairs
    (w_s, w_s+1), s in `ws.TILE_ANCHOR_STARTS`: a pool of up to N - 8
    words tiled from the first word, or after a header of up to 3 words,
    repeats two of them (`ws.tile_repeat_limit`).

    Ops: the words viewed as N / 2 int64 pairs (RESHAPE, BITCAST); per
    anchor one EQUAL against it, CAST and a MAXIMUM into the hits; a SUM;
    the same on the first 4 pairs (the anchors' own words), subtracted.
    Half as many elements as words, 4 anchors: the 8-anchor form over
    every word (one EQUAL per anchor and word) cost 22.4 ms of 28.7 in the
    128-token d_chi phone model (docs/benchmarks.md). A SPLIT of the
    pairs (SPLIT on int64 is not a TFLite builtin) or LOGICAL_OR of the
    hits would cost more.
    """
    head = _part(words, 0, 2 * ws.TILE_FIRST_PAIR)
    anchors = [_pairs(_part(head, s, s + 2))
               for s in ws.TILE_ANCHOR_STARTS]
    return _pair_hits(_pairs(words), anchors) - _pair_hits(_pairs(head),
                                                            anchors)


def _pairs(words):
    """(batch, n / 2) int64: the words (w_2m, w_2m+1) as one int64 each
    (equal exactly when both words are; the byte order does not
    matter)."""
    n = int(words.shape[-1])
    return tf.bitcast(tf.reshape(words, [-1, n // 2, 2]), tf.int64)


def _pair_hits(pairs, anchors):
    """(batch, 1) float32: the elements of `pairs` equal to one of
    `anchors` ((batch, 1) int64 each)."""
    hits = None
    for anchor in anchors:
        hit = tf.cast(tf.equal(pairs, anchor), tf.float32)
        hits = hit if hits is None else tf.maximum(hits, hit)
    return tf.reduce_sum(hits, axis=-1, keepdims=True)


def _zeros(values):
    """(batch, 1) float32: the zeros of each row."""
    return tf.reduce_sum(tf.cast(tf.equal(values, 0), tf.float32), axis=-1,
                         keepdims=True)


def buffer_statistics(words, consumed, used=None):
    """{check name: float32 (batch, k) or (batch,)}: the values of the
    checks of `_buffer_statistics` (for tests and reports)."""
    words = tf.cast(words, tf.int32)
    sample = sampled_words(words, consumed)
    values, _, _ = _buffer_statistics(words, consumed, sample, used)
    out = {}
    for name, columns in _buffer_columns(consumed).items():
        value = tf.gather(values, columns, axis=1)
        out[name] = value if len(columns) > 1 else value[:, 0]
    return out


def buffer_verdicts(words, consumed, used=None):
    """{check name: (batch,) booleans, True where the row passes} for the
    checks of `_buffer_statistics` (for tests and reports)."""
    words = tf.cast(words, tf.int32)
    sample = sampled_words(words, consumed)
    values, lows, highs = _buffer_statistics(words, consumed, sample, used)
    ok = tf.logical_and(tf.greater(values, lows), tf.less(values, highs))
    return {name: _all_along(tf.gather(ok, columns, axis=1))
            for name, columns in _buffer_columns(consumed).items()}


def sampled_words(words, consumed):
    """(batch, S) int32: the words of each row the checks read
    (`ws.sample`; for g = 2, the sampled groups' first words, then their
    partners)."""
    taken = _check_width(words, consumed)
    words = tf.cast(words, tf.int32)
    if taken.size == taken.words:
        return words
    return tf.gather(words, taken.positions, axis=1)


def row_verdicts(words, consumed, sample=None):
    """{check name: (batch,) booleans, True where the row passes} (for
    tests and reports; the model runs `words_look_random`)."""
    if sample is None:
        sample = sampled_words(words, consumed)
    values, lows, highs = _row_statistics(sample, consumed)
    ok = tf.logical_and(tf.greater(values, lows), tf.less(values, highs))
    out = {}
    for name, columns in _columns(consumed).items():
        out[name] = _all_along(tf.gather(ok, columns, axis=1))
    return out


def row_statistics(words, consumed, sample=None):
    """{check name: float32}: `bits` (batch, 32), the count of ones at
    each bit position among the sampled words; the collision counts
    (batch,); `partner_repeats` (batch,) and `half_sum_bits`
    (batch, 32) (`tfdptext.privacy.word_statistics`)."""
    if sample is None:
        sample = sampled_words(words, consumed)
    values, _, _ = _row_statistics(sample, consumed)
    out = {}
    for name, columns in _columns(consumed).items():
        value = tf.gather(values, columns, axis=1)
        out[name] = value if len(columns) > 1 else value[:, 0]
    return out


def _columns(consumed):
    """{check name: its columns in `_row_statistics`' values}."""
    names = ["bits"] * ws.NUM_BITS
    names += ["half_sum_bits"] * ws.NUM_BITS
    names += ["neighbour_bits"] * (2 * ws.NUM_BITS) + ["partner_repeats"]
    names += list(ws.COLLISION_TESTS)
    out = {}
    for i, name in enumerate(names):
        out.setdefault(name, []).append(i)
    return out


def _limit_vectors(consumed):
    """(lows, highs) float32 numpy vectors, in `_columns` order: a value
    passes when low < value < high (a side without a limit: -1 or
    +inf, which no count crosses)."""
    limits = ws.row_limits(consumed)
    lows, highs = [], []
    for name, columns in _columns(consumed).items():
        low, high = getattr(limits, name)
        lows += [-1.0 if low is None else float(low)] * len(columns)
        highs += [np.inf if high is None else float(high)] * len(columns)
    return np.array(lows, np.float32), np.array(highs, np.float32)


def _row_statistics(sample, consumed):
    """((batch, K) float32 statistics, lows, highs) in `_columns` order.

    The byte histograms behind the bit counts (per row and source: the
    sampled words, and for g = 2 the consumed words of the sampled
    groups) and behind the collision counts (per row, block and kind)
    come from one UNSORTED_SEGMENT_SUM. Each op costs about a microsecond
    in TFLite whatever its size here, so the ops are few: the bytes are a
    BITCAST of the words (little-endian: byte 0 the low byte), and with a
    static batch (phone models) the histogram offsets are one constant.
    """
    taken = ws.sample(consumed)
    blocks = taken.size // ws.BLOCK
    static_rows = sample.shape[0]
    rows = static_rows if static_rows is not None else tf.shape(sample)[0]
    first, second = tf.split(sample, 2, axis=-1)
    # The sampled words, the pairs' sums, and the XOR of sampled words
    # `ws.NEIGHBOUR_LAGS` apart (S - 24 of each): their bit counts come
    # from the same byte histograms.
    size = taken.size
    span = size - max(ws.NEIGHBOUR_LAGS)
    head = _part(sample, 0, span)
    sources = [sample, first + second] + [
        tf.bitwise.bitwise_xor(_part(sample, lag, lag + span), head)
        for lag in ws.NEIGHBOUR_LAGS]
    extra = [tf.reduce_sum(tf.cast(tf.equal(first, second), tf.float32),
                           axis=-1, keepdims=True)]
    widths = [int(x.shape[-1]) for x in sources]
    joined = tf.concat(sources, axis=-1)
    # The four bytes of every word, low byte first: (batch, n, 4).
    planes = tf.cast(tf.bitcast(joined, tf.uint8), tf.int32)
    source_index = np.concatenate([np.full(w, i)
                                   for i, w in enumerate(widths)])
    per_row = 4 * ws.BYTE_VALUES * len(sources)
    plane_offsets = ws.BYTE_VALUES * (np.arange(4)[None, :]
                                      + 4 * source_index[:, None])
    # Low and high bytes of the sampled words in blocks, and their steps;
    # kinds: 0 low bytes, 1 low steps, 2 high bytes, 3 high steps.
    lowhigh = tf.reshape(tf.gather(_part(planes, 0, blocks * ws.BLOCK),
                                   [0, 3], axis=-1),
                         [-1, blocks, ws.BLOCK, 2])
    steps = tf.math.floormod(
        _part(lowhigh, 0, ws.BLOCK - 1, axis=2)
        - _part(lowhigh, 1, ws.BLOCK, axis=2), ws.BYTE_VALUES)
    kind_values = tf.concat([lowhigh, steps], axis=2)  # (b, blocks, 255, 2)
    kind = np.concatenate([np.zeros(ws.BLOCK), np.ones(ws.BLOCK - 1)])[
        :, None] + np.array([0, 2])[None, :]
    block_offsets = ws.BYTE_VALUES * (kind[None] + _KINDS * np.arange(
        blocks)[:, None, None])
    per_row_blocks = _KINDS * ws.BYTE_VALUES * blocks
    if static_rows is not None:
        row = np.arange(static_rows)
        plane_offsets = plane_offsets[None] + per_row * row[:, None, None]
        block_offsets = (per_row * static_rows + block_offsets[None]
                         + per_row_blocks * row[:, None, None, None])
        plane_ids = planes + plane_offsets.astype(np.int32)
        block_ids = kind_values + block_offsets.astype(np.int32)
    else:
        plane_ids = planes + plane_offsets.astype(np.int32) \
            + per_row * tf.reshape(tf.range(rows), [-1, 1, 1])
        block_ids = kind_values + block_offsets.astype(np.int32) \
            + per_row * rows + per_row_blocks * tf.reshape(
                tf.range(rows), [-1, 1, 1, 1])
    ids = tf.concat([tf.reshape(plane_ids, [-1]),
                     tf.reshape(block_ids, [-1])], axis=0)
    counts = tf.reshape(tf.math.unsorted_segment_sum(
        tf.ones_like(ids, tf.float32), ids,
        (per_row + per_row_blocks) * rows), [-1, ws.BYTE_VALUES])
    per_plane, per_kind = tf.split(
        counts, [4 * len(sources) * rows, _KINDS * blocks * rows], axis=0)
    bits = tf.reshape(tf.matmul(per_plane, tf.constant(_BITS)),
                      [-1, 32 * len(sources)])
    pairs = tf.minimum(
        tf.reduce_sum(per_kind * (per_kind - 1.0), axis=-1) * 0.5,
        float(ws.COLLISION_CAP))
    collisions = tf.reduce_sum(tf.reshape(pairs, [-1, blocks, _KINDS]),
                               axis=1)
    values = tf.concat([bits] + extra + [collisions], axis=-1)
    lows, highs = _limit_vectors(consumed)
    return values, lows, highs


def call_passes(sample):
    """A scalar: whether the call's sampled words, all rows together,
    pass `word_repeats`."""
    return _repeat_margin(sample) > 0.0


def _repeat_margin(sample):
    """A float32 scalar, > 0 when the call's sampled words pass
    `word_repeats`: the limit minus the repeats (a constant limit when the
    batch is static, as in a phone model), else +1 / -1 from the bound
    computed in the graph."""
    flat = tf.reshape(tf.cast(sample, tf.int32), [1, -1])
    repeats = tf.reshape(repeat_count(flat), [])
    if flat.shape[-1] is not None:
        return float(ws.word_repeat_limit(int(flat.shape[-1]))) - repeats
    ok = repeat_verdict(repeats, tf.size(sample))
    return tf.where(ok, 1.0, -1.0)


def repeat_count(words):
    """(rows,) float32: words equal to an earlier word in each row of an
    int32 (rows, M) tensor (sort, count equal neighbours)."""
    width = words.shape[-1]
    if width is None:
        width = tf.shape(words)[-1]
    ordered = tf.math.top_k(words, k=width, sorted=True).values
    if isinstance(width, int):
        equal = tf.equal(_part(ordered, 1, width),
                         _part(ordered, 0, width - 1))
    else:
        equal = tf.equal(ordered[:, 1:], ordered[:, :-1])
    return tf.reduce_sum(tf.cast(equal, tf.float32), axis=-1)


def repeat_verdict(repeats, num_words):
    """Booleans, True where `repeats` (float32) repeated words among
    `num_words` (an int tensor or int, known only at run time for a
    batch) pass: ln of the bound (M (M - 1) / 2^32)^r / r! (Stirling)
    above the share (`ws.word_repeat_log_bound`)."""
    n = tf.cast(num_words, tf.float32)
    rate = n * (n - 1.0) * 2.0**-32
    r = tf.maximum(repeats, 1.0)
    log_bound = r * tf.math.log(rate * math.e / r) \
        - 0.5 * tf.math.log(2.0 * math.pi * r)
    fails = tf.logical_and(repeats >= 1.0,
                           log_bound <= math.log(ws.WORD_REPEATS_FALSE_ALARM))
    return tf.logical_not(fails)


def _part(x, begin, end, axis=1):
    """x[begin:end] along `axis` (static bounds, a non-empty part) as a
    SPLIT_V, which TFLite copies in contiguous runs, where its
    STRIDED_SLICE copies element by element (module docstring)."""
    size = int(x.shape[axis])
    if not 0 <= begin < end <= size:
        raise ValueError(f"_part needs 0 <= begin < end <= {size}, "
                         f"received [{begin}, {end}).")
    sizes = [begin, end - begin, size - end]
    if sizes[1] == size:
        return x
    parts = tf.split(x, [n for n in sizes if n], axis=axis)
    return parts[1] if begin else parts[0]


def _all(booleans):
    """A scalar: whether every element is True (REDUCE_ALL is avoided:
    MIN over 0/1 floats is a builtin everywhere)."""
    return tf.reduce_min(tf.cast(booleans, tf.float32)) > 0.5


def _all_along(booleans):
    """(batch,): whether every element of each row is True."""
    return tf.reduce_min(tf.cast(booleans, tf.float32), axis=-1) > 0.5


def _check_width(words, consumed):
    """The `ws.Sample` of rows whose mechanism reads `consumed` words;
    raises ValueError unless the static row length is its N."""
    taken = ws.sample(int(consumed))
    width = words.shape[-1]
    if width is None or int(width) != taken.words:
        raise ValueError(f"`words` must have a static last dimension of "
                         f"{taken.words} ({consumed} consumed words), "
                         f"received shape {tuple(words.shape)}.")
    return taken
