"""The laws of the random-words checks under good words, and their limits.

A phone model takes N int32 `random_words` per release, mixes them into
the C words its mechanism reads (`tfdptext.privacy.extraction`: a sum of
g words per consumed word, exact whenever each group holds one fresh
word), and refuses to release (NaN, or token id -1) when the buffer, or
the whole batch of buffers, shows a defect that extraction cannot undo: a
defect shared by most of the buffer (`tfdptext.models.word_checks` runs
the checks in the graph). This module says, for each check, what its
statistic follows when every word is uniform and independent, and where
it stops: each limit is set so that a good buffer crosses it with
probability at most its share of the false alarm, and their union stays
under 2^-40 per call.

What is looked at: a fixed sample of each row (`Sample`). A buffer of
at most SAMPLE_WORDS = 512 words (g >= 2, C <= 256) is read whole. A
longer one has g = 2 (C > 256): the checks read the groups of
`CONSUMED_BLOCKS` blocks of 128 consumed words spread over [0, C) (the
first at 0, the last ending at C): the block's words in the first half
of the buffer and their partners C later, 2 x 128 x CONSUMED_BLOCKS raw
words in all; the second block starts at the largest power of two 2^k
with 2^k + 128 <= C, so that a pool of a power-of-two size up to 2^k
words tiled over the buffer (a 4 KiB pool: 1,024 words) repeats the
first block's words there. The sampled checks' cost is then fixed,
whatever N (docs/benchmarks.md). What a fixed sample cannot see (issue
38: a buffer 98% zeros outside it) shows in the zeros of the consumed
words, which every word reaches (11 below: one cheap pass over C words),
and a pool of any other size tiled over the buffer in the word pairs
equal to one of 4 pairs among its first 8 words (12 below: one pass over
the N / 2 pairs against 4).

The checks (the low and high bytes are w mod 256 and (w >> 24) mod 256):

Per row, on its sampled words:

1. `bits`: for each bit position k = 0..31, the number of sampled words
   with bit k set: Binomial(S, 1/2) for good words; two-sided, exact
   binomial limits. Catches a stuck bit anywhere (all even or all odd
   words, multiples of 4, the top bit always set, bytes of ASCII text with
   bit 7 clear, 24-bit values, one byte per word, zeros, a constant), and
   a buffer left mostly unfilled (more than about a third of the words
   zero: an app that filled bytes instead of words).
2. `low_byte_collisions`: the sample in blocks of 128; in each, the pairs
   of equal low bytes, capped at 128, summed over the blocks; two-sided
   Chernoff bounds with the exact law of one block
   (`block_collision_law`). Too FEW repeats fail too: the low byte of a
   counter, a Weyl sequence i * s or a 32-bit LCG runs through its values
   evenly (128 distinct values in a block, where chance gives about 32
   repeats); too many: even steps, a constant byte.
3. `low_byte_step_collisions`: the same on the 127 circular differences
   (b_i - b_{i+1}) mod 256 of the low bytes within each block (i.i.d.
   uniform for good words: the map from a block's bytes to (differences,
   last byte) is a bijection): a serial test on the low bits. A counter
   or Weyl sequence has one difference; an LCG's low byte a b + c has
   only 64 (a = 1 mod 4).
4. `high_byte_collisions`, 5. `high_byte_step_collisions`: 2 and 3 on
   the high bytes.

Per row, on the sampled pairs (j, j + N/2) (N/2 = C when g = 2):

6. `partner_repeats`: sampled positions j whose word equals its partner
   w_{j+N/2}. For good words each pair is equal with probability 2^-32
   independently, so P(R >= r) <= C(P, r) 2^{-32 r} for P sampled
   pairs; fails from the smallest r with that bound below the share (2
   for P <= 512). Catches the second half of the buffer copied from the
   first, even in a few words.
7. `half_sum_bits`: 1 on the sums w_j + w_{j+N/2} mod 2^32 of the
   sampled pairs. A defect that ties the halves (the second half the
   first negated, complemented, or equal to it plus a constant) shows
   here, where each half alone looks random.

Per row, the checks of issue 38 (`BUFFER_TESTS`):

9. `neighbour_bits`: 1 on the XOR of sampled words 16 apart, and on
   the XOR of sampled words 24 apart (`NEIGHBOUR_LAGS`), S - 24 of each
   (from the same byte histograms as 1; for good words i.i.d. uniform:
   the map from the words to (the first L, the XORs L apart) is a
   bijection). A bit that is a function of the position modulo 2, 3, 4,
   6, 8, 12, 16 or 24 (the low bit following the parity; a pattern of
   period 4 or 8, which an extraction group of g = 4 or 8 words sums
   over a whole period, so that every consumed word's low bit is fixed)
   survives every sum (the low bit of a sum is the XOR of the low bits)
   and can pass 1 (half the words have it set); here it is stuck (the
   few pairs across the sample's blocks aside). A fixed pattern of
   another period looks like random bits: as undetectable as a
   predictable generator. Before, the lags were 1 and 2 (periods 2 and
   4 only; issue 38's first version).
10. `strided_sum_zeros`: the zeros among the sums of the words C apart
   (the extraction's groups before issue 38, which an app could have
   cancelled by checksums or a negated half; for g = 2 the sampled
   pairs' sums). Fails from the smallest r with C(n, r) 2^{-32 r} below
   the share (`partner_repeat_limit`: 2 for n <= 512).
11. `consumed_zeros`: the same on all C consumed words (r = 2 for
   C <= 256, 3 up to about 2^17). Catches groups cancelled by a checksum
   per group, and a buffer mostly zero anywhere (a consumed word is 0
   when its group's words are). Costlier alternatives measured and left
   out (docs/benchmarks.md): the empty buckets of all words' low bits
   (catches any tile and any mostly constant buffer), whose
   UNSORTED_SEGMENT_SUM over the words costs several times the whole
   check in TFLite.
12. `tile_repeats`: the aligned word pairs (w_2m, w_2m+1), m = 4 ..
   N/2 - 1 (the words after the first 8), equal to one of the 4 anchor
   pairs (w_s, w_s+1), s in `TILE_ANCHOR_STARTS` = (4, 6, 3, 5) (the
   pairs as int64: one EQUAL of every pair against each anchor, a MAX
   over them and a SUM). Given the anchors, each good pair after them is
   one of at most 4 values with probability at most 4 / 2^64,
   independently, so P(R >= r) <= C(N/2 - 4, r) (2^-62)^r; fails from
   the smallest r with that bound below the share (`tile_repeat_limit`:
   1 up to 131,080 words, 2 above). A pool of P <= N - 8 words tiled
   from the first word, or after a header of h <= 3 words, makes w_i =
   w_{i+kP} for every i >= h: take k with 5 <= kP <= N - 8 (k = 1 when
   P >= 5); if kP is even the anchors at 4 and 6 repeat as aligned pairs
   at kP + 4 and kP + 6, if odd those at 3 and 5 at kP + 3 and kP + 5:
   2 pairs, whatever P (not only a power of two, and not only inside the
   sample). A pool of more than N - 8 words (at most the last 7 words
   copies of the first) is not caught. Before, every word after the
   first 8 was compared with each of the 8 (3 to 5 matches failed): the
   same guarantee for tiled pools, at 4 EQUALs over N / 2 int64 pairs
   instead of 8 over N words (docs/benchmarks.md); single words equal to
   one of the first 8 outside the sample, which that form also counted
   and the contract never claimed, now pass (a nonzero constant outside
   the sample is `not_detectable` either way).

Over the whole call (every row's sample flattened into one list of M
words: a batch whose rows share words must fail):

8. `word_repeats`: sampled words equal to an earlier sampled word
   (sorting). For good words, P(R >= r) <= C(M, r) ((M - 1) / 2^32)^r <=
   (M (M - 1) / 2^32)^r / r!: for a fixed set of r positions, each in
   turn equals one of the at most M - 1 earlier words with probability at
   most (M - 1) / 2^32 given all the words before it. Fails when that
   bound at the observed R is below the share (`word_repeat_log_bound`).
   Catches a buffer of few distinct words (one byte of randomness
   replicated, a short array tiled, every word written twice) and rows of
   a batch that share their words.

Checks dropped with extraction (issue 27): the mean of the low 24 bits
and of the high bytes (the 32 bit counts say more), the serial and
near-equal tests on consecutive words and the repeated 2-word blocks
over the whole buffer (they guarded a Laplace pair taken twice or
near-equal: extraction mixes every consumed word with its partner half a
buffer away, so a local repetition no longer reaches the noise; the
partner tests see the one alignment that does).

False alarm (union bound): `bits` gets 2^-42 (2^-48 for each side of
each of the 32 counts), each of the four collision tests 2^-44,
`partner_repeats` and `half_sum_bits` 2^-44 each, each of 9 to 12
2^-46, and `word_repeats` 2^-42: one call of one row fails with
probability at most 3.75 x 2^-42 < 2^-40, a batch of B rows at most
(2.75 B + 1) 2^-42. The limits use the exact law of each statistic (binomial tails
summed exactly, the collision law by dynamic programming), not a normal
approximation. Checked by simulation in `benchmarks/random_words_check.py`
(docs/benchmarks.md).

What no check can see: a generator whose output looks uniform but is
predictable. java.util.Random seeded with the time, xorshift, a buffer
from an earlier call: each passes every check, and an attacker who can
guess the seed (or saw the earlier release) removes the noise
(`tfdptext.audit.java_random`). The checks catch broken filling, not
weak generators; the app must use the platform's secure generator.

Pure Python and numpy.
"""

import dataclasses
import functools
import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import extraction
from tfdptext.privacy import randomness
from tfdptext.privacy import validation

FALSE_ALARM = randomness.FALSE_ALARM
# Shares of the false alarm (module docstring).
BITS_FALSE_ALARM = FALSE_ALARM / 4
COLLISION_FALSE_ALARM = FALSE_ALARM / 16
PARTNER_FALSE_ALARM = FALSE_ALARM / 16
WORD_REPEATS_FALSE_ALARM = FALSE_ALARM / 4
# Each of the four whole-buffer checks (issue 38).
BUFFER_FALSE_ALARM = FALSE_ALARM / 64
NUM_BITS = 32

COLLISION_TESTS = ("low_byte_collisions", "low_byte_step_collisions",
                   "high_byte_collisions", "high_byte_step_collisions")
PARTNER_TESTS = ("partner_repeats", "half_sum_bits")
BUFFER_TESTS = ("neighbour_bits", "strided_sum_zeros", "consumed_zeros",
                "tile_repeats")
ROW_TESTS = ("bits",) + COLLISION_TESTS + PARTNER_TESTS + BUFFER_TESTS
CALL_TESTS = ("word_repeats",)
TESTS = ROW_TESTS + CALL_TESTS

BLOCK = 128
BYTE_VALUES = 256
# Pairs of equal bytes counted per block at most (the mean is about 32).
COLLISION_CAP = 128
# The fewest words per row (`tfdptext.privacy.extraction`): one block.
MIN_WORDS = extraction.MIN_WORDS
# Rows of at most this many words are read whole.
SAMPLE_WORDS = 4 * BLOCK
# Blocks of consumed words whose groups a longer row's sample holds.
CONSUMED_BLOCKS = 2
# `neighbour_bits` reads the XOR of sampled words this many apart: a bit
# that is a function of the position modulo any divisor of 16 or of 24
# (2, 3, 4, 6, 8, 12) is stuck in it.
NEIGHBOUR_LAGS = (16, 24)
# `tile_repeats` compares the aligned word pairs (w_2m, w_2m+1) after
# the first TILE_FIRST_PAIR with the pairs (w_s, w_s+1) starting at these
# positions: a tile of even period repeats those at 4 and 6 aligned, one
# of odd period those at 3 and 5 (module docstring, 12).
TILE_ANCHOR_STARTS = (4, 6, 3, 5)
TILE_FIRST_PAIR = 4
# The most words one call (a batch) may carry: SecureUserSide splits
# larger batches; the phone models take one row.
MAX_WORDS_PER_CALL = 2**21


@dataclasses.dataclass(frozen=True)
class Sample:
    """What the checks read of a row of `words` = g `consumed` words.

    Attributes:
        words: N, the row's words.
        consumed: C, the words the mechanism reads.
        positions: the raw words read (numpy int32, increasing; for g = 2
            and N > SAMPLE_WORDS, the groups of `partners[0]`).
        partners: (j, j + N / 2) for the sampled positions j of the
            buffer's first half (two numpy int32 arrays; for g = 2, j + C).
    """

    words: int
    consumed: int
    positions: np.ndarray
    partners: tuple

    @property
    def size(self):
        return len(self.positions)


@functools.lru_cache(maxsize=64)
def sample(consumed):
    """The `Sample` of a row whose mechanism reads `consumed` words
    (module docstring).

    Example:
    >>> s = sample(1536)                   # 384-d Laplace: N = 3072
    >>> s.size, s.positions[[0, 128, 256, 384]].tolist()
    (512, [0, 1024, 1536, 2560])
    """
    lay = extraction.layout(consumed)
    if lay.words <= SAMPLE_WORDS:
        positions = np.arange(lay.words, dtype=np.int32)
        first = np.arange(lay.words // 2, dtype=np.int32)
        return Sample(lay.words, consumed, positions,
                      (first, first + lay.words // 2))
    # The first block, and the block at the largest power of two 2^k
    # with 2^k + 128 <= C: a pool of 2^m <= 2^k words tiled over the
    # buffer repeats the first block there.
    offsets = [0, 2**((consumed - BLOCK).bit_length() - 1)]
    first = np.concatenate([np.arange(o, o + BLOCK) for o in offsets]
                           ).astype(np.int32)
    return Sample(lay.words, consumed,
                  np.concatenate([first, first + consumed]),
                  (first, first + consumed))


@dataclasses.dataclass(frozen=True)
class RowLimits:
    """Where each per-row statistic fails, for rows whose mechanism reads
    `consumed` words.

    A statistic fails when it is <= its `low` limit or >= its `high`
    limit (integer counts). None: that side has no limit (chance alone
    could reach it too often).

    Attributes:
        consumed: C.
        sample: S, how many raw words the checks read.
        blocks: the sample's full blocks of 128.
        bits: (low, high) for each bit position's count of ones.
        low_byte_collisions ... high_byte_step_collisions: (low, high).
        partners: the sampled pairs (j, j + N / 2).
        partner_repeats: (None, high).
        half_sum_bits: (low, high) for the bit counts of the sums
            w_j + w_{j + N/2} of the sampled pairs.
        neighbour_bits: (low, high) for the bit counts of the XOR of
            sampled words 16 apart, and of those 24 apart (S - 24 of
            each: `NEIGHBOUR_LAGS`).
        strided_sum_zeros: (None, high) for the zeros among the sums of
            the words C apart (`strided_sums`: the extraction before
            issue 38).
        consumed_zeros: (None, high) for the zeros among all C consumed
            words.
        tile_repeats: (None, high) for the aligned word pairs after the
            first 8 words equal to one of the anchor pairs
            (`tile_repeat_limit`).
        sampled: whether the checks read a sample (N > 512), not the
            whole buffer.
    """

    consumed: int
    sample: int
    blocks: int
    bits: tuple
    low_byte_collisions: tuple
    low_byte_step_collisions: tuple
    high_byte_collisions: tuple
    high_byte_step_collisions: tuple
    partners: int
    partner_repeats: tuple
    half_sum_bits: tuple
    neighbour_bits: tuple
    strided_sum_zeros: tuple
    consumed_zeros: tuple
    tile_repeats: tuple
    sampled: bool


@functools.lru_cache(maxsize=64)
def row_limits(consumed):
    """The `RowLimits` of rows whose mechanism reads `consumed` words.

    Example:
    >>> limits = row_limits(1536)
    >>> limits.sample, limits.bits, limits.low_byte_collisions
    (512, (168, 344), (55, 249))
    >>> limits.partners, limits.partner_repeats, limits.half_sum_bits
    (256, (None, 2), (65, 191))
    >>> limits.consumed_zeros, limits.sampled
    ((None, 3), True)
    """
    taken = sample(consumed)
    blocks = taken.size // BLOCK
    partners = len(taken.partners[0])
    one_sided = BITS_FALSE_ALARM / (2 * NUM_BITS)
    lag_share = BUFFER_FALSE_ALARM / (2 * 2 * NUM_BITS)
    lay = extraction.layout(consumed)
    strided = partners if lay.group == 2 else consumed
    sampled = taken.size < taken.words
    return RowLimits(
        consumed=consumed, sample=taken.size, blocks=blocks,
        bits=binomial_half_limits(taken.size, one_sided),
        low_byte_collisions=_collision_limits(BLOCK, blocks),
        low_byte_step_collisions=_collision_limits(BLOCK - 1, blocks),
        high_byte_collisions=_collision_limits(BLOCK, blocks),
        high_byte_step_collisions=_collision_limits(BLOCK - 1, blocks),
        partners=partners,
        partner_repeats=(None, partner_repeat_limit(partners)),
        half_sum_bits=binomial_half_limits(
            partners, PARTNER_FALSE_ALARM / (2 * NUM_BITS)),
        neighbour_bits=binomial_half_limits(
            taken.size - max(NEIGHBOUR_LAGS), lag_share),
        strided_sum_zeros=(None, partner_repeat_limit(
            strided, BUFFER_FALSE_ALARM)),
        consumed_zeros=(None, partner_repeat_limit(
            consumed, BUFFER_FALSE_ALARM)),
        tile_repeats=(None, tile_repeat_limit(lay.words)),
        sampled=sampled)


@functools.lru_cache(maxsize=16)
def _collision_limits(balls, blocks):
    """`sum_limits` of `blocks` blocks of `balls` values' collision
    counts (`block_collision_law`) at COLLISION_FALSE_ALARM: the same for
    every layout whose sample has that many blocks (1 to 4)."""
    return sum_limits(block_collision_law(balls), blocks,
                      COLLISION_FALSE_ALARM)


def partner_repeat_limit(pairs, false_alarm=PARTNER_FALSE_ALARM):
    """The fewest of `pairs` independent pairs of good words found equal
    that fail: the smallest r with C(pairs, r) 2^(-32 r) <= false_alarm.

    Where no r <= pairs is rare enough (one pair: 2^-32 is above every
    false-alarm budget here), C(pairs, r) = 0 makes it pairs + 1: a count
    the check can never reach.

    Example:
    >>> partner_repeat_limit(256), partner_repeat_limit(10**6)
    (2, 4)
    >>> partner_repeat_limit(1, 2.0**-40)
    2
    """
    pairs = validation.check_int("pairs", pairs, minimum=1)
    _check_false_alarm(false_alarm)
    r = 1
    while r <= pairs and (
            math.lgamma(pairs + 1) - math.lgamma(r + 1)
            - math.lgamma(pairs - r + 1) - 32 * r * math.log(2.0)) \
            > math.log(false_alarm):
        r += 1
    return r


def tile_repeat_limit(words, anchors=len(TILE_ANCHOR_STARTS),
                      false_alarm=BUFFER_FALSE_ALARM):
    """The fewest of the n = words / 2 - TILE_FIRST_PAIR aligned word
    pairs after the anchors' words equal to one of the `anchors` anchor
    pairs that fail: given the anchors, each good pair after them is
    independently one of at most `anchors` values with probability at
    most anchors / 2^64, so P(R >= r) <= C(n, r) (anchors 2^-64)^r; the
    smallest r with that bound <= false_alarm.

    Example:
    >>> tile_repeat_limit(128), tile_repeat_limit(131080)
    (1, 1)
    >>> tile_repeat_limit(131082), tile_repeat_limit(2**21)
    (2, 2)
    """
    words = validation.check_int("words", words,
                                 minimum=2 * TILE_FIRST_PAIR + 2)
    if words % 2:
        raise ArgumentError(f"`words` must be even (whole pairs), "
                            f"received {words}.")
    _check_false_alarm(false_alarm)
    n = words // 2 - TILE_FIRST_PAIR
    log_p = math.log(anchors) - 64 * math.log(2.0)
    r = 1
    while (math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)
           + r * log_p) > math.log(false_alarm):
        r += 1
    return r


def binomial_half_limits(trials, false_alarm):
    """(low, high): a Binomial(trials, 1/2) count is <= low, and (by
    symmetry) >= high = trials - low, each with probability at most
    `false_alarm`, from the exact tail; low is -1 when no count is that
    rare.

    Example:
    >>> binomial_half_limits(128, 2.0**-48)
    (21, 107)
    """
    trials = validation.check_int("trials", trials, minimum=1)
    _check_false_alarm(false_alarm)
    log_target = math.log(false_alarm)
    log_total = -math.inf
    low = -1
    for k in range(trials + 1):
        term = (math.lgamma(trials + 1) - math.lgamma(k + 1)
                - math.lgamma(trials - k + 1) - trials * math.log(2.0))
        log_total = np.logaddexp(log_total, term)
        if log_total > log_target:
            break
        low = k
    return (low, trials - low)


# ---------------------------------------------------------------------------
# Laws and Chernoff limits.


@dataclasses.dataclass(frozen=True)
class DiscreteLaw:
    """A law on finitely many values (`values`, `probabilities`)."""

    values: np.ndarray
    probabilities: np.ndarray

    @property
    def mean(self):
        return float(np.dot(self.values, self.probabilities))

    @functools.cached_property
    def log_probabilities(self):
        """ln of `probabilities` (-inf where 0), computed once: `rate`
        asks a law for its tilted mean about a hundred times per limit."""
        with np.errstate(divide="ignore"):
            return np.log(self.probabilities)

    def log_mgf(self, theta):
        """ln E[exp(theta X)], computed without overflow."""
        logs = self.log_probabilities + theta * self.values
        top = logs.max()
        return float(top + np.log(np.exp(logs - top).sum()))

    def tilted_mean(self, theta):
        logs = self.log_probabilities + theta * self.values
        weights = np.exp(logs - logs.max())
        return float(np.dot(weights, self.values) / weights.sum())


def rate(law, a):
    """The Chernoff rate sup_theta (theta a - ln E[e^(theta X)]) >= 0:
    P(mean of n draws <= a) <= exp(-n rate(a)) for a below the mean, and
    P(mean >= a) <= exp(-n rate(a)) above it. At the ends of the support,
    -ln P(X = end); beyond them, infinity."""
    low, high = float(law.values.min()), float(law.values.max())
    mean = law.mean
    if a <= low or a >= high:
        end = low if a <= low else high
        if a != end:
            return math.inf
        mass = float(law.probabilities[law.values == end].sum())
        return -math.log(mass) if mass > 0 else math.inf
    if a == mean:
        return 0.0
    sign = 1.0 if a > mean else -1.0
    # The tilted mean moves monotonically from the mean towards the end of
    # the support as |theta| grows: bracket, then bisect.
    bound = 1.0
    while sign * (law.tilted_mean(sign * bound) - a) < 0:
        bound *= 2.0
        if bound > 1e12:
            break
    lo, hi = 0.0, bound
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if sign * (law.tilted_mean(sign * mid) - a) < 0:
            lo = mid
        else:
            hi = mid
    theta = sign * (lo + hi) / 2.0
    return max(theta * a - law.log_mgf(theta), 0.0)


def sum_limits(law, count, false_alarm):
    """(low, high) for the sum of `count` i.i.d. draws of an integer-valued
    `law`: P(sum <= low) and P(sum >= high) are each at most `false_alarm`
    (Chernoff). None for a side that cannot be limited."""
    if count < 1:
        return (None, None)
    target = math.log(1.0 / false_alarm)

    def rare(total):
        return count * rate(law, total / count) >= target

    mean = law.mean * count
    low_end = int(law.values.min()) * count
    high_end = int(law.values.max()) * count
    low = None
    if rare(low_end):
        lo, hi = low_end, int(math.floor(mean))  # rare(lo), not rare(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if rare(mid) else (lo, mid)
        low = lo
    high = None
    if rare(high_end):
        lo, hi = int(math.ceil(mean)), high_end  # not rare(lo), rare(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if rare(mid) else (mid, hi)
        high = hi
    return (low, high)



@functools.lru_cache(maxsize=8)
def block_collision_law(balls, bins=BYTE_VALUES, cap=COLLISION_CAP):
    """The exact law of min(C, cap), C the number of pairs of equal values
    among `balls` independent uniform values on `bins` values.

    Dynamic programming over the bins: the number of balls in bin j,
    given r balls left, is Binomial(r, 1 / (bins - j)); the state is (balls
    left, pairs so far, capped). All terms are positive (no cancellation).

    Example:
    >>> law = block_collision_law(128)
    >>> round(law.mean, 2), f"{law.probabilities[0]:.2g}"
    (31.75, '1.2e-17')
    """
    balls = validation.check_int("balls", balls, minimum=1)
    state = np.zeros((balls + 1, cap + 1))
    state[balls, 0] = 1.0
    log_factorial = np.array([math.lgamma(i + 1) for i in range(balls + 1)])
    # Bins holding at least `full` balls reach the cap on their own.
    full = next(k for k in range(balls + 2)
                if k > balls or k * (k - 1) // 2 >= cap)
    r_all, k_all = np.meshgrid(np.arange(balls + 1), np.arange(balls + 1),
                               indexing="ij")
    below = k_all <= r_all
    for j in range(bins):
        p = 1.0 / (bins - j)
        if p < 1.0:
            with np.errstate(invalid="ignore"):
                log_w = (log_factorial[r_all] - log_factorial[k_all]
                         - log_factorial[np.where(below, r_all - k_all, 0)]
                         + k_all * math.log(p)
                         + (r_all - k_all) * math.log1p(-p))
            weight = np.where(below, np.exp(log_w), 0.0)
        else:  # the last bin takes every ball left
            weight = (k_all == r_all).astype(float)
        new = np.zeros_like(state)
        for k in range(min(full, balls + 1)):
            moved = state[k:] * weight[k:, k][:, None]
            pairs = k * (k - 1) // 2
            target = new[:balls + 1 - k]
            target[:, pairs:cap] += moved[:, :cap - pairs]
            target[:, cap] += moved[:, cap - pairs:].sum(axis=1)
        if full <= balls:
            # k >= full: all of it lands on the cap, at r - k balls left.
            mass = state.sum(axis=1)[:, None] * weight
            r_idx, k_idx = np.nonzero(below & (k_all >= full))
            np.add.at(new[:, cap], r_idx - k_idx, mass[r_idx, k_idx])
        state = new
    probabilities = state[0]
    return DiscreteLaw(np.arange(cap + 1, dtype=float),
                       probabilities / probabilities.sum())




# ---------------------------------------------------------------------------
# The per-call repeat count (its limit also runs in the graph).


def word_repeat_log_bound(num_words, repeats):
    """An upper bound on ln P(R >= repeats), R the words equal to an
    earlier word among `num_words` good words: ln((N (N - 1) / 2^32)^r /
    r!) with ln r! >= r ln r - r + ln(2 pi r) / 2 (Stirling). 0 for r = 0.
    """
    if repeats <= 0:
        return 0.0
    rate_ = num_words * (num_words - 1) / 2.0**32
    return min(0.0, repeats * math.log(rate_ * math.e / repeats)
               - 0.5 * math.log(2 * math.pi * repeats))


def word_repeat_limit(num_words, false_alarm=WORD_REPEATS_FALSE_ALARM):
    """The fewest repeats that fail (`word_repeat_log_bound` <= ln
    false_alarm)."""
    target = math.log(false_alarm)
    r = 1
    while word_repeat_log_bound(num_words, r) > target:
        r += 1
    return r



def _check_false_alarm(false_alarm):
    if not (0.0 < false_alarm < 1.0):
        raise ArgumentError(f"`false_alarm` must be in (0, 1), received "
                            f"{false_alarm!r}.")
