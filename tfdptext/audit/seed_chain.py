"""A NumPy model of how TFLite's unseeded random ops make their numbers.

TFLite's RANDOM_UNIFORM and RANDOM_STANDARD_NORMAL kernels
(tensorflow/lite/kernels/random_ops.cc) seed themselves in Prepare when the
op's (seed, seed2) are both 0:

1. One process-wide `std::mt19937_64`, created on first use and seeded with
   ONE 32-bit value of `std::random_device`, hands out
   seed = next(), seed2 = next() to every op each time the op is prepared.
2. The op keeps a Philox-4x32-10 generator keyed as tsl's
   `PhiloxRandom(seed_lo=seed, seed_hi=seed2)`: key = the two 32-bit halves
   of seed, counter = [0, 0, low(seed2), high(seed2)].
3. Every Eval calls the generator ceil(size / 4) times; each call encrypts
   the 128-bit counter (ten Philox rounds), returns 4 uint32 and adds 1 to
   the counter. Unused words of the last call are dropped.
4. A uint32 x becomes the float32 (1 + (x & 0x7fffff) * 2**-23) - 1, a
   multiple of 2**-23 in [0, 1); normals come from pairs by Box-Muller.

So everything an app's noise depends on is a 32-bit number: this module
replays the chain for any such number, vectorised over many of them at once
(what a seed search needs). Everything is unsigned modular arithmetic on
NumPy uint32/uint64 arrays, which wrap silently.

Example:
>>> from tfdptext.audit import seed_chain
>>> words = seed_chain.mt19937_64(5489, 3)          # std::mt19937_64()
>>> (seed, seed2), = seed_chain.op_seeds(1234, num_ops=1)
>>> stream = seed_chain.PhiloxStream(seed, seed2)
>>> u = stream.uniform(8)                           # first Eval's output
>>> z = stream.standard_normal(4)                   # the counter moved on
"""

import ctypes
import ctypes.util
import numbers

import numpy as np

# std::mt19937_64 parameters (C++ [rand.predef]).
_MT_N = 312
_MT_M = 156
_MT_INIT_MULT = np.uint64(6364136223846793005)
_MT_MATRIX_A = np.uint64(0xB5026F5AA96619E9)
_MT_UPPER = np.uint64(0xFFFFFFFF80000000)
_MT_LOWER = np.uint64(0x7FFFFFFF)
_MT_DEFAULT_SEED = 5489

# Philox-4x32-10 constants (Salmon et al. 2011, as in tsl).
_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = np.uint32(0x9E3779B9)
_PHILOX_W1 = np.uint32(0xBB67AE85)
_PHILOX_ROUNDS = 10

_U64 = 2**64
_LOW32 = np.uint64(0xFFFFFFFF)
_MANTISSA = np.uint32(0x7FFFFF)
_ONE_BITS = np.uint32(0x3F800000)
# tsl's BoxMullerFloat clamps u1 below at this before taking its log.
_BOX_MULLER_EPSILON = np.float32(1.0e-7)


def _as_uint64(name, value):
    """`value` (an int or integer array) as uint64, or a ValueError."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if not 0 <= int(value) < _U64:
            raise ValueError(f"`{name}` must be in [0, 2**64), got {value}.")
        return np.uint64(int(value))
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise ValueError(f"`{name}` must be an integer or an integer array, "
                         f"got {array.dtype} {value!r:.80}.")
    if array.dtype.kind == "i" and array.size and array.min() < 0:
        raise ValueError(f"`{name}` must be non-negative.")
    return array.astype(np.uint64)


def _check_count(name, value, minimum=0):
    if (not isinstance(value, numbers.Integral) or isinstance(value, bool)
            or value < minimum):
        raise ValueError(f"`{name}` must be an integer >= {minimum}, "
                         f"got {value!r}.")
    return int(value)


def _temper(y):
    """mt19937_64's output transform of one state word (vectorised)."""
    y = y ^ ((y >> np.uint64(29)) & np.uint64(0x5555555555555555))
    y = y ^ ((y << np.uint64(17)) & np.uint64(0x71D67FFFEDA60000))
    y = y ^ ((y << np.uint64(37)) & np.uint64(0xFFF7EEE000000000))
    return y ^ (y >> np.uint64(43))


def _twist_word(upper_from, lower_from, far):
    """One word of the mt19937_64 twist: far ^ A(upper | lower) (vectorised).

    x = (upper_from & 0xFFFFFFFF80000000) | (lower_from & 0x7FFFFFFF);
    A(x) = x >> 1, xor 0xB5026F5AA96619E9 when x is odd.
    """
    x = (upper_from & _MT_UPPER) | (lower_from & _MT_LOWER)
    odd = (x & np.uint64(1)) * _MT_MATRIX_A  # 0 or the matrix row
    return far ^ (x >> np.uint64(1)) ^ odd


def _init_words(seeds, last):
    """Words 0..last of the seeding recurrence, each of shape seeds.shape.

    w[0] = seed; w[i] = 6364136223846793005 * (w[i-1] ^ (w[i-1] >> 62)) + i
    (mod 2**64).
    """
    words = np.empty((last + 1,) + seeds.shape, np.uint64)
    words[0] = seeds
    scratch = np.empty(seeds.shape, np.uint64)
    for i in range(1, last + 1):
        previous, current = words[i - 1, ...], words[i, ...]
        np.right_shift(previous, np.uint64(62), out=scratch)
        np.bitwise_xor(scratch, previous, out=scratch)
        np.multiply(scratch, _MT_INIT_MULT, out=current)
        np.add(current, np.uint64(i), out=current)
    return words


def _full_twist(state):
    """Replaces the 312-word state (axis 0) by its twist, in three slabs."""
    old = state.copy()
    n, m = _MT_N, _MT_M
    # Words 0..155 read only old words.
    state[:n - m] = _twist_word(old[:n - m], old[1:n - m + 1], old[m:])
    # Words 156..310 read the words 0..154 written just above.
    state[n - m:n - 1] = _twist_word(old[n - m:n - 1], old[n - m + 1:],
                                     state[:m - 1])
    # Word 311 wraps to the new word 0 and the new word 155.
    state[n - 1] = _twist_word(old[n - 1], state[0], state[m - 1])


def mt19937_64(seeds, count, skip=0):
    """Outputs skip .. skip + count - 1 of `std::mt19937_64(seed)`.

    Vectorised over `seeds`: one generator per seed. Only the state words
    that the wanted outputs read are computed, so the first 156 outputs
    cost about half a full seeding (what a seed search needs).

    Args:
        seeds: an int in [0, 2**64) or an integer array of them.
        count: how many outputs, an integer >= 0.
        skip: how many outputs to drop first, an integer >= 0.

    Returns:
        uint64 array of shape `np.shape(seeds) + (count,)`.

    Example:
    >>> mt19937_64(5489, 1, skip=9999)[0]   # the C++ standard's check value
    np.uint64(9981545732273789042)
    >>> mt19937_64(np.arange(4), 2).shape
    (4, 2)
    """
    seeds = np.asarray(_as_uint64("seeds", seeds))
    count = _check_count("count", count)
    skip = _check_count("skip", skip)
    end = skip + count
    if end <= _MT_N - _MT_M:
        # Output i (< 156) of the first twist reads words i, i+1, i+156.
        words = _init_words(seeds, end - 1 + _MT_M)
        lo, hi = skip, end
        fresh = _twist_word(words[lo:hi], words[lo + 1:hi + 1],
                            words[lo + _MT_M:hi + _MT_M])
        return np.moveaxis(_temper(fresh), 0, -1)
    state = _init_words(seeds, _MT_N - 1)
    out = np.empty(seeds.shape + (count,), np.uint64)
    produced = 0
    while produced < end:
        _full_twist(state)
        block = np.moveaxis(_temper(state), 0, -1)
        lo = max(skip - produced, 0)
        hi = min(end - produced, _MT_N)
        if hi > lo:
            out[..., produced + lo - skip:produced + hi - skip] = \
                block[..., lo:hi]
        produced += _MT_N
    return out


def op_seeds(device_seed, num_ops, draws_before=0):
    """The (seed, seed2) each unseeded random op gets, in Prepare order.

    Op k takes mt19937_64 outputs draws_before + 2k and draws_before + 2k + 1
    (TFLite's `InitializeOpData`).

    Args:
        device_seed: the 32-bit std::random_device value, int or array.
        num_ops: how many op preparations, an integer >= 1.
        draws_before: mt19937_64 outputs used up before the first of them
            (earlier Prepare calls in the same process).

    Returns:
        For an int seed, a list of (seed, seed2) Python int pairs; for a
        NumPy array, a uint64 array of shape `seeds.shape + (num_ops, 2)`.

    Example:
    >>> op_seeds(7, num_ops=2)   # two ops in one fresh process
    [(..., ...), (..., ...)]
    """
    _check_seed32("device_seed", device_seed)
    num_ops = _check_count("num_ops", num_ops, minimum=1)
    draws_before = _check_count("draws_before", draws_before)
    words = mt19937_64(device_seed, 2 * num_ops, skip=draws_before)
    pairs = words.reshape(words.shape[:-1] + (num_ops, 2))
    if not isinstance(device_seed, np.ndarray):
        return [(int(a), int(b)) for a, b in pairs]
    return pairs


def _check_seed32(name, value):
    array = np.asarray(_as_uint64(name, value))
    if array.size and int(array.max()) >= 2**32:
        raise ValueError(f"`{name}` is a std::random_device value: it must "
                         "be in [0, 2**32).")


def philox_4x32_10(counter, key):
    """Philox-4x32-10 of `counter` under `key` (vectorised on leading axes).

    Each of the ten rounds multiplies c0 by 0xD2511F53 and c2 by 0xCD9E8D57
    (64-bit products split into hi:lo), then sets
    (c0, c1, c2, c3) <- (hi2 ^ c1 ^ k0, lo2, hi0 ^ c3 ^ k1, lo0), and the key
    grows by (0x9E3779B9, 0xBB67AE85) between rounds.

    Args:
        counter: uint32-valued array, last axis of length 4.
        key: uint32-valued array, last axis of length 2.

    Returns:
        uint32 array of the broadcast shape, last axis 4.
    """
    counter = np.asarray(counter)
    key = np.asarray(key)
    if counter.shape[-1:] != (4,) or key.shape[-1:] != (2,):
        raise ValueError("`counter` must end in an axis of 4 words and `key` "
                         f"in one of 2, got {counter.shape} and {key.shape}.")
    c0, c1, c2, c3 = (counter[..., i].astype(np.uint64) for i in range(4))
    k0 = key[..., 0].astype(np.uint32)
    k1 = key[..., 1].astype(np.uint32)
    for round_index in range(_PHILOX_ROUNDS):
        if round_index:
            with np.errstate(over="ignore"):  # the key wraps mod 2**32
                k0 = k0 + _PHILOX_W0
                k1 = k1 + _PHILOX_W1
        p0 = c0 * _PHILOX_M0
        p2 = c2 * _PHILOX_M1
        c0, c1, c2, c3 = ((p2 >> np.uint64(32)) ^ c1 ^ k0,
                          p2 & _LOW32,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1,
                          p0 & _LOW32)
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def philox_words(seed, seed2, num_blocks, first_block=0):
    """The uint32 words of tsl `PhiloxRandom(seed, seed2)` calls.

    The generator's 128-bit counter starts at seed2 * 2**64 (words
    [0, 0, low(seed2), high(seed2)]), its key is [low(seed), high(seed)]; call
    j returns Philox(counter + j) and moves the counter on by one.

    Args:
        seed, seed2: the op's seeds, ints in [0, 2**64) or uint64 arrays of a
            common shape (TFLite's int64 seeds are read as unsigned).
        num_blocks: how many calls, an integer >= 0.
        first_block: calls already made (the stream position).

    Returns:
        uint32 array of shape `shape + (4 * num_blocks,)`.
    """
    seed = np.asarray(_as_uint64("seed", seed))
    seed2 = np.asarray(_as_uint64("seed2", seed2))
    num_blocks = _check_count("num_blocks", num_blocks)
    first_block = _check_count("first_block", first_block)
    shape = np.broadcast_shapes(seed.shape, seed2.shape)
    key = np.stack([seed & _LOW32, seed >> np.uint64(32)], axis=-1)
    key = np.broadcast_to(key, shape + (2,))[..., None, :]
    positions = [first_block + j for j in range(num_blocks)]
    low = np.array([p % _U64 for p in positions], np.uint64)
    carry = np.array([p // _U64 for p in positions], np.uint64)
    high = seed2[..., None] + carry  # wraps like the 128-bit counter
    counter = np.stack(np.broadcast_arrays(
        low & _LOW32, low >> np.uint64(32),
        high & _LOW32, high >> np.uint64(32)), axis=-1)
    words = philox_4x32_10(counter, key)
    return words.reshape(words.shape[:-2] + (4 * num_blocks,))


def uint32_to_float(words):
    """tsl `Uint32ToFloat`: the float32 1.m - 1 with m = the low 23 bits.

    The result is (x & 0x7fffff) * 2**-23, exactly, in [0, 1 - 2**-23].
    """
    words = np.asarray(words)
    if words.dtype.kind not in "iu":
        raise ValueError(
            f"`words` must be an integer array, got {words.dtype}.")
    bits = (words.astype(np.uint32) & _MANTISSA) | _ONE_BITS
    return bits.view(np.float32) - np.float32(1.0)


def _libm():
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    lib.logf.restype = ctypes.c_float
    lib.logf.argtypes = [ctypes.c_float]
    lib.sincosf.restype = None
    lib.sincosf.argtypes = [ctypes.c_float, ctypes.POINTER(ctypes.c_float),
                            ctypes.POINTER(ctypes.c_float)]
    return lib


def box_muller_float(x0, x1, use_libm=True):
    """tsl `BoxMullerFloat`: two float32 normals from two uint32 words.

    u1 = max(Uint32ToFloat(x0), 1e-7), v = float32(2 pi * Uint32ToFloat(x1))
    (the product in double), r = sqrt(-2 log u1) in float32, then
    (r sin v, r cos v).

    Args:
        x0, x1: uint32-valued arrays of one shape.
        use_libm: compute logf and sincosf with the C library (ctypes, one
            element at a time), as the TFLite kernel does, for bit-exact
            results; False uses NumPy (fast, may differ by an ulp).

    Returns:
        (f0, f1), float32 arrays of the input shape.
    """
    u1 = np.maximum(uint32_to_float(x0), _BOX_MULLER_EPSILON)
    v = (2.0 * np.pi * uint32_to_float(x1).astype(np.float64)
         ).astype(np.float32)
    lib = _libm() if use_libm else None
    if lib is None:
        log_u1 = np.log(u1)
        sin_v, cos_v = np.sin(v), np.cos(v)
    else:
        log_u1 = np.array([lib.logf(float(a)) for a in u1.ravel()],
                          np.float32).reshape(u1.shape)
        sin_v = np.empty(v.shape, np.float32)
        cos_v = np.empty(v.shape, np.float32)
        s, c = ctypes.c_float(), ctypes.c_float()
        for index, angle in np.ndenumerate(v):
            lib.sincosf(float(angle), ctypes.byref(s), ctypes.byref(c))
            sin_v[index], cos_v[index] = s.value, c.value
    radius = np.sqrt(np.float32(-2.0) * log_u1)
    return sin_v * radius, cos_v * radius


class PhiloxStream:
    """The state of one TFLite random op between Prepare calls.

    Args:
        seed, seed2: the op's seeds (e.g. from `op_seeds`), ints.

    Example:
    >>> stream = PhiloxStream(*op_seeds(99, 1)[0])
    >>> first = stream.uniform(6)    # Eval 1: 2 calls, 2 words dropped
    >>> second = stream.uniform(6)   # Eval 2 starts at call 3
    >>> stream.blocks_used
    4
    """

    def __init__(self, seed, seed2):
        for name, value in (("seed", seed), ("seed2", seed2)):
            if (not isinstance(value, numbers.Integral)
                    or isinstance(value, bool) or not 0 <= value < _U64):
                raise ValueError(f"`{name}` must be an int in [0, 2**64), "
                                 f"got {value!r}.")
        self.seed = int(seed)
        self.seed2 = int(seed2)
        self.blocks_used = 0

    def _words(self, size):
        size = _check_count("size", size)
        blocks = -(-size // 4)
        words = philox_words(self.seed, self.seed2, blocks, self.blocks_used)
        self.blocks_used += blocks
        return words

    def uniform(self, size):
        """What RANDOM_UNIFORM's Eval writes for `size` outputs (float32)."""
        return uint32_to_float(self._words(size)[:size])

    def standard_normal(self, size, use_libm=True):
        """What RANDOM_STANDARD_NORMAL's Eval writes for `size` outputs."""
        words = self._words(size)
        f0, f1 = box_muller_float(words[0::2], words[1::2], use_libm)
        return np.stack([f0, f1], axis=-1).ravel()[:size]


def signed_int64(value):
    """A uint64 seed as the int64 with the same bits (TFLite's seed field).

    Example:
    >>> signed_int64(2**64 - 1)
    -1
    """
    value = int(_as_uint64("value", value))
    return value - _U64 if value >= 2**63 else value
