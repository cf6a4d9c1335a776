"""A predictable generator that passes every check: java.util.Random.

An app that fills `random_words` with `new Random(System.currentTimeMillis())
.nextInt()` sends words that look random to every statistical test
(`tfdptext.privacy.word_statistics`): java.util.Random is a 48-bit linear
congruential generator whose outputs are its top 32 bits, and it passes
the phone model's checks. But its whole output is a function of the seed,
and a seed taken from the clock is known to within seconds. An attacker
with the public model and ONE release tries every millisecond of a window
(120,001 seeds for +-60 s), replays the noise each seed gives, and keeps
the seed for which release - noise is a possible clean representation:
the noise of that release, and of every later release the app makes from
the same generator, is gone (`recover_seed`).

No check inside the model can catch this: a predictable generator is a
property of where the words come from, not of how they look. Nor does the
model's extraction help (`tfdptext.privacy.extraction`: each word the
mechanism reads is a sum of g words, one per block of C): the attacker
replays the sums too, jumping the generator to each block (`jump`). The contract
is the platform's cryptographically secure generator.

The generator (java.util.Random, OpenJDK): the seed is scrambled as
(seed ^ 0x5DEECE66D) mod 2^48; each next(32) sets
state = (state * 0x5DEECE66D + 0xB) mod 2^48 and returns state >> 16,
which nextInt() returns as a signed int.

Example:
>>> words = java_words(1700000000000, 768)     # what the app sent
>>> found = recover_seed(release, scale=1.0, start=1700000000000 - 60000,
...                      stop=1700000000000 + 60001)
>>> found.seeds
(1700000000000,)
"""

import functools
import time

import numpy as np

from tfdptext.audit import seed_recovery

MULTIPLIER = 0x5DEECE66D
ADDEND = 0xB
MASK = (1 << 48) - 1


def scrambled(seeds):
    """The initial states of `new Random(seed)` (uint64 array)."""
    seeds = np.asarray(seeds).astype(np.int64).astype(np.uint64)
    return (seeds ^ np.uint64(MULTIPLIER)) & np.uint64(MASK)


def next_ints(states, count):
    """(new states, int32 array shape + (count,)): `count` successive
    nextInt() values of generators in `states` (uint64; the products wrap
    modulo 2^64, and 2^48 divides 2^64, so the mask gives them modulo
    2^48 exactly). The i-th state is A_i x + B_i (`_step_maps`), computed
    for a block of steps at once (the same integers as stepping one at a
    time)."""
    states = np.array(states, dtype=np.uint64, copy=True)
    out = np.empty(states.shape + (count,), np.uint32)
    if count == 0:
        return states, out.view(np.int32)
    mult, add = _step_maps(count)
    block = max(1, _BLOCK_ELEMENTS // max(1, states.size))
    with np.errstate(over="ignore"):
        for start in range(0, count, block):
            stop = min(count, start + block)
            seq = (states[..., None] * mult[start:stop] + add[start:stop]) \
                & np.uint64(MASK)
            out[..., start:stop] = (seq >> np.uint64(16)).astype(np.uint32)
        states = (states * mult[-1] + add[-1]) & np.uint64(MASK)
    return states, out.view(np.int32)


# States x steps computed at once by `next_ints` (32 MiB of uint64).
_BLOCK_ELEMENTS = 1 << 22


def step_maps(multiplier, increment, mask, count):
    """(A, B), uint64 arrays of `count`: the map of i + 1 steps of the LCG
    x -> (multiplier x + increment) mod 2^k (`mask` = 2^k - 1, k <= 48:
    uint64 products wrap modulo 2^64, which 2^k divides) is
    x -> A[i] x + B[i] mod 2^k, built by doubling (the map of n + j steps
    is the j-step map after the n-step one: A_{n+j} = A_j A_n,
    B_{n+j} = A_j B_n + B_j)."""
    mask = np.uint64(mask)
    mult = np.array([multiplier], np.uint64) & mask
    add = np.array([increment], np.uint64) & mask
    with np.errstate(over="ignore"):
        while len(mult) < count:
            last_mult, last_add = mult[-1], add[-1]
            mult, add = (np.concatenate([mult, (mult * last_mult) & mask]),
                         np.concatenate([add, (mult * last_add + add)
                                         & mask]))
    return mult[:count], add[:count]


@functools.lru_cache(maxsize=16)
def _step_maps(count):
    """`step_maps` of nextInt()'s LCG (mod 2^48), read-only."""
    mult, add = step_maps(MULTIPLIER, ADDEND, MASK, count)
    mult.flags.writeable = add.flags.writeable = False
    return mult, add


def jump(states, steps):
    """The states `steps` nextInt() calls later (uint64 array), in
    O(log steps): the LCG's n-step map is x -> A x + B mod 2^48 with A =
    a^n and B = c (a^(n-1) + ... + 1), built by repeated squaring."""
    mult, add = 1, 0            # the map so far: x -> mult x + add
    step_mult, step_add = MULTIPLIER, ADDEND
    n = int(steps)
    while n:
        if n & 1:
            mult, add = (mult * step_mult) & MASK, \
                (add * step_mult + step_add) & MASK
        step_mult, step_add = (step_mult * step_mult) & MASK, \
            (step_add * step_mult + step_add) & MASK
        n >>= 1
    states = np.asarray(states, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return (states * np.uint64(mult) + np.uint64(add)) & np.uint64(MASK)


def consumed_ints(states, count, layout=None):
    """The first `count` words a phone model's mechanism reads when the
    app fills `random_words` from generators at `states`: with `layout`
    (a `tfdptext.privacy.extraction.Layout`), word j is the sum modulo
    2^32 of the buffer words of its group, p(i, j) = i C + ((j + s_i)
    mod C) (`Layout.order`); without, the buffer's own words. Returns
    (states after the first `count` buffer words, int32 array shape +
    (count,)).

    Each block's words for j < count are at most two runs of the block
    (from s_i, then from the block's start after it wraps): the generator
    is jumped to each run's start, so the cost grows with `count`, not C.
    """
    after, out = next_ints(states, count)
    if layout is None or layout.group == 1:
        return after, out
    c = layout.consumed
    total = np.zeros(np.shape(states) + (count,), np.uint64)
    for i, shift in enumerate(layout.shifts):
        taken = min(count, c - shift)
        _, head = next_ints(jump(states, i * c + shift), taken)
        part = head.view(np.uint32).astype(np.uint64)
        if taken < count:
            _, tail = next_ints(jump(states, i * c), count - taken)
            part = np.concatenate(
                [part, tail.view(np.uint32).astype(np.uint64)], axis=-1)
        total += part
    return after, (total & np.uint64(0xFFFFFFFF)).astype(
        np.uint32).view(np.int32)


def java_words(seed, count):
    """The first `count` nextInt() values of `new Random(seed)`, as the
    int32 words an app would put in `random_words`."""
    return next_ints(scrambled(seed), count)[1]


def exponentials(words):
    """E = -log(V) from int32 word pairs (..., 2) as the phone model
    computes it, in float32
    (`tfdptext.layers.sampling.complements_from_word_pairs`)."""
    words = np.asarray(words, np.int32)
    value = words[..., 0].astype(np.float32)
    high = np.where(value < 0, -value, np.float32(4294967296.0) - value)
    low = ((words[..., 1] >> 8) % 2**24).astype(np.float32)
    complement = (high - low * np.float32(2.0**-24)) * np.float32(2.0**-32)
    return -np.log(complement)


def laplace_noise(words, scale):
    """The noise b (E1 - E2) of a Laplace release from its 4k words (two
    words per exponential, two exponentials per coordinate), float32,
    shape (..., k)."""
    words = np.asarray(words, np.int32)
    e = exponentials(words.reshape(words.shape[:-1] + (-1, 2, 2)))
    return np.float32(scale) * (e[..., 0] - e[..., 1])


def recover_seed(release, scale, start, stop, offset=0, screen=8,
                 chunk=2**16, normalized=True, tolerance=1e-4, layout=None):
    """Searches java.util.Random seeds in [start, stop) that explain a
    Laplace release made from their words.

    Args:
        release: the released vector (k,): x + b (E1 - E2) with x in [0,
            1]^k (min-max normalised when `normalized`).
        scale: the Laplace scale b.
        start, stop: the seeds to try (e.g. milliseconds since the epoch
            within a minute of the release).
        offset: words the model reads before the noise's (word dropout's).
        screen: coordinates checked for every candidate before the whole
            vector.
        chunk: candidates per vectorised step.
        normalized: the clean vector has minimum 0 and maximum 1.
        tolerance: float slack on the [0, 1] bounds.
        layout: the phone model's `tfdptext.privacy.extraction.Layout`
            (None: the mechanism read the buffer's words as they are).

    Returns:
        A `tfdptext.audit.seed_recovery.SeedRecovery`: the seeds found, the
        clean vectors they give, and the search's time.
    """
    release = np.asarray(release, np.float32).reshape(-1)
    k = release.size
    screen = min(screen, k)
    began = time.perf_counter()
    seeds, clean = [], []
    for low in range(start, stop, chunk):
        candidates = np.arange(low, min(low + chunk, stop), dtype=np.int64)
        initial = scrambled(candidates)
        _, head = consumed_ints(initial, offset + 4 * screen, layout)
        noise = laplace_noise(head[:, offset:], scale)
        residual = release[:screen] - noise
        keep = np.all((residual >= -tolerance)
                      & (residual <= 1 + tolerance), axis=1)
        if not keep.any():
            continue
        # The survivors' words, all of them (few survivors).
        _, words = consumed_ints(initial[keep], offset + 4 * k, layout)
        words = words[:, offset:]
        full = release - laplace_noise(words, scale)
        ok = np.all((full >= -tolerance) & (full <= 1 + tolerance), axis=1)
        if normalized:
            ok &= np.abs(full.min(axis=1)) <= tolerance
            ok &= np.abs(full.max(axis=1) - 1) <= tolerance
        for index in np.flatnonzero(ok):
            seeds.append(int(candidates[keep][index]))
            clean.append(np.clip(full[index], 0.0, 1.0).astype(np.float32))
    return seed_recovery.SeedRecovery(tuple(seeds), tuple(clean),
                                      stop - start,
                                      time.perf_counter() - began)
