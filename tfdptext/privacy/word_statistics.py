"""The laws of the random-words checks under good words, and their limits.

A phone model takes W int32 `random_words` per release and refuses to
release (NaN, or token id -1) when the buffer, or the whole batch of
buffers, looks like the output of anything but a good generator
(`tfdptext.models.word_checks` runs the checks in the graph). This module
says, for each check, what its statistic follows when every word is
uniform and independent, and where it stops: each limit is set so that a
good buffer crosses it with probability at most its share of the false
alarm, and their union (below) stays under 2^-40 per call.

The checks, with what a bad buffer shows (k = w mod 2^24 is a word's
24-bit value, the uniforms' and integers' source; the high byte
(w >> 24) mod 256 also feeds the exponentials, which read all 32 bits):

Per row (one release's buffer), with limits for its fixed length W:

1. `mean_low`: mean of k / 2^24, two-sided Hoeffding (an unfilled, zero,
   constant or low-bytes-only buffer).
2. `mean_high`: mean of (high byte + 1/2) / 256, two-sided Hoeffding (a
   buffer of 24-bit values: the exponentials would be near 0, no noise).
3. `serial`: mean of c_i^2 over the W - 1 consecutive pairs, c_i the
   circular distance between k_i and k_{i+1} in units of 2^24 (in [0,
   1/2]); two-sided Chernoff bounds with the exact moment generating
   function of c^2 (c uniform on [0, 1/2]). The differences k_i - k_{i+1}
   mod 2^24 of independent uniform words are themselves independent and
   uniform (the map from (k_0, ..., k_{W-1}) to (differences, k_{W-1}) is
   a bijection), so the W - 1 terms are i.i.d. Catches counters with any
   small step and pairs of near-equal words: consecutive words give
   nearly equal exponentials, and a Laplace pair b (E1 - E2) cancels.
4. `near_equal`: how many consecutive pairs lie within 2^12 / 2^24 of each
   other (circularly): Binomial(W - 1, (2^13 - 1) / 2^24), upper tail
   (a few near-equal Laplace pairs, which the mean of 3 averages away).
5. `low_byte_collisions`: the words in blocks of 128 (the first
   floor(W / 128) blocks); in each, the pairs of equal low bytes, capped
   at 128, summed over the blocks; two-sided Chernoff bounds with the
   exact law of one block (`block_collision_law`). Too FEW repeats fail
   too: the low byte of a counter, a Weyl sequence i * s or a 32-bit LCG
   runs through its values evenly (128 distinct values in a block, where
   chance gives about 32 repeats); too many: even steps, a constant byte.
6. `low_byte_step_collisions`: the same on the 127 circular differences
   (b_i - b_{i+1}) mod 256 of the low bytes within each block (i.i.d.
   uniform for good words, as in 3): a serial test on the low bits. A
   counter or Weyl sequence has one difference; an LCG's low byte
   a b + c has only 64 (a = 1 mod 4).
7. `high_byte_collisions`, 8. `high_byte_step_collisions`: 5 and 6 on the
   high bytes.

Over the whole call (the batch flattened into one buffer of N words: a
batch whose rows share words must fail, and reuse across rows is reuse):

9. `word_repeats`: words equal to an earlier word (N - the number of
   distinct words, counted by sorting). For good words, P(R >= r) <=
   C(N, r) ((N - 1) / 2^32)^r <= (N (N - 1) / 2^32)^r / r!: for a fixed
   set of r positions, each in turn equals one of the at most N - 1
   earlier words with probability at most (N - 1) / 2^32 given all the
   words before it. Fails when that bound at the observed R is below the
   share (`word_repeat_log_bound`). Catches a buffer of few distinct
   words (one byte of randomness replicated, a short array repeated).
10. `pair_repeats`: positions i whose pair (w_i, w_{i+1}) (indices mod N)
    equals another position's, among equal neighbours after sorting: a
    block of two or more words used twice, at any offset, in any rows. For
    good words a given two positions' pairs are equal with probability
    exactly 2^-64, so P(R2 >= 1) <= lambda = C(N, 2) 2^-64; two distinct
    equal-pair events need at least three independent word equalities
    (2^-96) when they overlap, which happens for at most 4 partners of an
    event, and four (2^-128) otherwise, so P(R2 >= 2) <= E[C(X, 2)] <=
    lambda^2 / 2 + 4 lambda 2^-32. The limit is 0 repeats while lambda is
    below the share (N <= 4,096: every reused 2-word block, e.g. a
    Laplace pair taken twice, fails) and 1 repeat above (any reused block
    of 3 or more words gives at least 2). Calls of more than
    `MAX_WORDS_PER_CALL` words are refused outright (the bound for 1
    repeat no longer holds).

False alarm (union bound): `pair_repeats` gets 2^-41 and the nine others
2^-41 / 9 each, so one call of one row fails with probability at most
2^-41 + 9 * 2^-41 / 9 = 2^-40; a batch of B rows at most (B + 1) 2^-41
(the per-row checks run on every row). The limits use the exact law of
each statistic (the serial mean's moment generating function is the
integral of its 2^-24 grid, off by a relative 2^-48, far below the
margins), not a normal approximation. Checked by simulation in
`benchmarks/random_words_check.py` (docs/benchmarks.md).

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
from tfdptext.privacy import randomness
from tfdptext.privacy import validation

FALSE_ALARM = randomness.FALSE_ALARM
# `pair_repeats` gets half of the false alarm, the nine others share half.
PAIR_REPEATS_FALSE_ALARM = FALSE_ALARM / 2
NUM_OTHER_TESTS = 9
TEST_FALSE_ALARM = FALSE_ALARM / 2 / NUM_OTHER_TESTS

ROW_TESTS = ("mean_low", "mean_high", "serial", "near_equal",
             "low_byte_collisions", "low_byte_step_collisions",
             "high_byte_collisions", "high_byte_step_collisions")
CALL_TESTS = ("word_repeats", "pair_repeats")
TESTS = ROW_TESTS + CALL_TESTS

LOW_BITS = 24
BLOCK = 128
BYTE_VALUES = 256
# Pairs of equal bytes counted per block at most (the mean is about 32).
COLLISION_CAP = 128
# Consecutive words closer than this (in units of 2^-24) are near-equal.
NEAR_DISTANCE = 2**12
NEAR_PROBABILITY = (2 * NEAR_DISTANCE - 1) / 2.0**LOW_BITS
# The most words one call may check (`pair_repeats`' bound for 1 repeat
# needs lambda^2 / 2 + 4 lambda 2^-32 <= 2^-41: N <= about 2^21.7).
MAX_WORDS_PER_CALL = 2**21
# The fewest words per row: one block.
MIN_WORDS = BLOCK


@dataclasses.dataclass(frozen=True)
class RowLimits:
    """Where each per-row statistic fails, for rows of `num_words` words.

    A statistic fails when it is <= its `low` limit or >= its `high`
    limit (means: real numbers; counts: integers). None: that side has
    no limit (chance alone could reach it too often).
    """

    num_words: int
    mean_low: tuple
    mean_high: tuple
    serial: tuple
    near_equal: int
    blocks: int
    low_byte_collisions: tuple
    low_byte_step_collisions: tuple
    high_byte_collisions: tuple
    high_byte_step_collisions: tuple


@functools.lru_cache(maxsize=64)
def row_limits(num_words, false_alarm=TEST_FALSE_ALARM):
    """The `RowLimits` of rows of `num_words` words (at least MIN_WORDS),
    each check at `false_alarm`.

    Example:
    >>> limits = row_limits(768)
    >>> limits.near_equal, limits.low_byte_collisions
    (9, (109, 297))
    """
    num_words = validation.check_int("num_words", num_words,
                                     minimum=MIN_WORDS)
    _check_false_alarm(false_alarm)
    mean = randomness.mean_tolerance(num_words, false_alarm)
    blocks = num_words // BLOCK
    values = block_collision_law(BLOCK)
    steps = block_collision_law(BLOCK - 1)
    return RowLimits(
        num_words=num_words,
        mean_low=(0.5 - mean, 0.5 + mean),
        mean_high=(0.5 - mean, 0.5 + mean),
        serial=mean_limits(_serial_law(), num_words - 1, false_alarm),
        near_equal=binomial_upper_limit(num_words - 1, NEAR_PROBABILITY,
                                        false_alarm),
        blocks=blocks,
        low_byte_collisions=sum_limits(values, blocks, false_alarm),
        low_byte_step_collisions=sum_limits(steps, blocks, false_alarm),
        high_byte_collisions=sum_limits(values, blocks, false_alarm),
        high_byte_step_collisions=sum_limits(steps, blocks, false_alarm))


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

    def log_mgf(self, theta):
        """ln E[exp(theta X)], computed without overflow."""
        with np.errstate(divide="ignore"):
            logs = np.log(self.probabilities) + theta * self.values
        top = logs.max()
        return float(top + np.log(np.exp(logs - top).sum()))

    def tilted_mean(self, theta):
        with np.errstate(divide="ignore"):
            logs = np.log(self.probabilities) + theta * self.values
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


def mean_limits(law, count, false_alarm):
    """(low, high): the mean of `count` i.i.d. draws of `law` is <= low,
    or >= high, with probability at most `false_alarm` each (Chernoff)."""
    target = math.log(1.0 / false_alarm)
    low_end, high_end = float(law.values.min()), float(law.values.max())
    out = []
    for end in (low_end, high_end):
        if count * rate(law, end) < target:
            out.append(None)
            continue
        inner, outer = law.mean, end  # rate(inner) = 0, rate(outer) big
        for _ in range(60):
            mid = (inner + outer) / 2.0
            if count * rate(law, mid) >= target:
                outer = mid
            else:
                inner = mid
        out.append(outer)
    return tuple(out)


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


def binomial_upper_limit(trials, probability, false_alarm):
    """The smallest k with P(Binomial(trials, probability) >= k) <=
    `false_alarm`, from the exact tail.

    Example:
    >>> binomial_upper_limit(767, NEAR_PROBABILITY, 2.0**-40)
    9
    """
    log_p, log_q = math.log(probability), math.log1p(-probability)

    def log_pmf(j):
        return (math.lgamma(trials + 1) - math.lgamma(j + 1)
                - math.lgamma(trials - j + 1) + j * log_p
                + (trials - j) * log_q)

    # The tail from k, summed from its largest term (the terms fall
    # geometrically above the mean).
    for k in range(int(trials * probability) + 1, trials + 2):
        if k > trials:
            return k
        total, j = 0.0, k
        first = log_pmf(k)
        while j <= trials:
            term = math.exp(log_pmf(j) - first)
            total += term
            if term < 1e-18 * total:
                break
            j += 1
        if first + math.log(total) <= math.log(false_alarm):
            return k
    return trials + 1


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
    (31.75, '8.2e-18')
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


@functools.lru_cache(maxsize=1)
def _serial_law(nodes=64, pieces=32):
    """c^2 with c uniform on [0, 1/2] (the circular distance of two
    independent uniforms), as Gauss-Legendre nodes and weights: its
    moment generating function, an integral of a smooth function, to
    double precision for the |theta| the limits use."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    edges = np.linspace(0.0, 0.5, pieces + 1)
    values, weights = [], []
    for a, b in zip(edges[:-1], edges[1:]):
        values.append((a + b) / 2 + (b - a) / 2 * x)
        weights.append((b - a) / 2 * w)
    c = np.concatenate(values)
    return DiscreteLaw(c * c, np.concatenate(weights) / 0.5)


# ---------------------------------------------------------------------------
# The per-call duplicate counts (their limits also run in the graph).


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


def word_repeat_limit(num_words, false_alarm=TEST_FALSE_ALARM):
    """The fewest repeats that fail (`word_repeat_log_bound` <= ln
    false_alarm)."""
    target = math.log(false_alarm)
    r = 1
    while word_repeat_log_bound(num_words, r) > target:
        r += 1
    return r


def pair_repeat_limit(num_words, false_alarm=PAIR_REPEATS_FALSE_ALARM):
    """The fewest repeated pairs that fail among `num_words` words (1 or
    2), or None above MAX_WORDS_PER_CALL / when neither bound holds (the
    call is then refused).

    Example:
    >>> pair_repeat_limit(4096), pair_repeat_limit(4097), \\
    ...     pair_repeat_limit(98304)
    (1, 2, 2)
    """
    lam = num_words * (num_words - 1) / 2.0 * 2.0**-64
    if lam <= false_alarm:
        return 1
    if num_words <= MAX_WORDS_PER_CALL and \
            lam * lam / 2 + 4 * lam * 2.0**-32 <= false_alarm:
        return 2
    return None


def _check_false_alarm(false_alarm):
    if not (0.0 < false_alarm < 1.0):
        raise ArgumentError(f"`false_alarm` must be in (0, 1), received "
                            f"{false_alarm!r}.")
