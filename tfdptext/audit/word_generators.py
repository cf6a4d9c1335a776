"""Buffers of random words as apps fill them, well and badly, and what a
phone model does with each.

Every generator fills an int32 (rows, width) buffer from a numpy Generator
(its own randomness: bases, seeds, steps). What a phone model must do with
it (`expectation`) depends on the generator's kind and on the model's
extraction layout (`tfdptext.privacy.extraction`: each consumed word is
the sum of g words C apart):

- `GOOD`: the contract (os.urandom here): must be released.
- `DEFECT`: a flaw of the whole buffer (a counter, an LCG, a stuck bit,
  zeros, ASCII bytes): extraction cannot undo it; must be refused.
- `PARTIAL`: fresh words except at some positions (`bad`: the first or
  last k words zero, a header word, a counter in the first words, a block
  copied): when every extraction group keeps a fresh word
  (`extraction.exact_despite`), the release must follow the stated
  channel EXACTLY (refusing is allowed too); otherwise it must be refused.
- `UNCATCHABLE`: bad in a way no check inside the model can see (a
  predictable generator such as java.util.Random seeded with the time,
  `tfdptext.audit.java_random`; a buffer reused from an earlier call,
  replayed for real: `previous_call` sends one buffer every call, and
  the channel test shows its releases repeat): the reason the contract
  is the platform's secure generator. Such a buffer ought to be refused
  (its release is predictable, or repeats an earlier one); no model can
  refuse it, so every released one is flagged UNSAFE and is not as
  expected (`Verdict.unsafe`): the audit's exit status is 1 unless told
  to let only what a model can catch decide it
  (`tfdptext-audit --allow_undetectable`).

The generators of issue 38 (`_ISSUE_38`) aim at the groups of the
extraction before it (a parity class from a seeded generator, odd words
even, a low bit following the parity), at words derived from others (a
negated or complemented half, checksums per group or per set of words C
apart), at the checks' sample (zeros outside the old one, or today's)
and at repeats beyond it (a 4 KiB pool tiled, a pool of 5/11 of the
buffer, a pool of N - 8 words after a header), and bit 0 following the position
modulo 4, 6 or 8. Some need the model's
layout (`Generator.layout_aware`, `Generator.make`).

`check_model` runs them against a phone model (any function of the
words) and, with `releases`, also tests every released generator's
output law against the good generator's (a two-sample test per output
position: chi-square on discrete releases, Kolmogorov-Smirnov on
continuous ones; every output position, Bonferroni-corrected): a partly
bad buffer whose release follows another channel is reported, not only a
structured buffer that was released.
`check_tflite` runs a .tflite signature, `check_export` every length of
an export; `tfdptext-audit --random_words` prints the table and exits 1
on any row that is not as expected.

Example:
>>> model, width = laplace_phone_model()
>>> rows = check_tflite(model, {"x": np.random.rand(1, 384).astype("float32")},
...                     width, consumed=4 * 384)
>>> [(r.generator, r.refused) for r in rows][:2]
[('os_urandom', 0), ('counter', 1)]
"""

import dataclasses
import os
import time

import numpy as np

from tfdptext.audit import java_random
from tfdptext.privacy import extraction

# The golden-ratio Weyl step and Numerical Recipes' 32-bit LCG.
WEYL_STEP = 0x9E3779B9
LCG_MULTIPLIER, LCG_INCREMENT = 1664525, 1013904223
# glibc's rand()-style LCG modulo 2^31.
LCG31_MULTIPLIER, LCG31_INCREMENT = 1103515245, 12345
# One token's words for d_chi on 384-d embeddings.
TOKEN_WORDS = 768


GOOD = "good"
DEFECT = "defect"
PARTIAL = "partial"
UNCATCHABLE = "uncatchable"

# What a model must do with a generator's buffers.
RELEASE = "release"
REFUSE = "refuse"
EXACT = "exact or refuse"
# UNCATCHABLE buffers: a release breaks the guarantee, and no check can
# refuse them.
UNSAFE = "refuse (cannot be caught)"


@dataclasses.dataclass(frozen=True)
class Generator:
    """How an app fills the words.

    Attributes:
        name: short name (the report's row).
        description: what it is.
        fill: fill(rng, rows, width) -> int32 (rows, width).
        kind: GOOD, DEFECT, PARTIAL or UNCATCHABLE (module docstring).
        why: for UNCATCHABLE: why no check sees it.
        rows: the rows it needs (2 for a batch whose rows share words:
            phone models take one row, so it runs on Keras models only).
        bad: for PARTIAL, bad(width) -> the positions whose words are not
            fresh (copies count at both ends); bad(width, consumed) when
            `layout_aware`.
        layout_aware: fill(rng, rows, width, consumed) and bad(width,
            consumed) take the model's consumed words too (`make`).
    """

    name: str
    description: str
    fill: object
    kind: str = DEFECT
    why: str = ""
    rows: int = 1
    bad: object = None
    layout_aware: bool = False

    def make(self, rng, rows, width, consumed=None):
        """A buffer (int32 (rows, width)) for a model whose mechanism reads
        `consumed` words (None: width / 2, the least mixing layout)."""
        if not self.layout_aware:
            return self.fill(rng, rows, width)
        return self.fill(rng, rows, width, consumed or width // 2)

    @property
    def good(self):
        return self.kind == GOOD

    @property
    def catchable(self):
        return self.kind in (DEFECT, PARTIAL)

    def expectation(self, width, consumed=None):
        """RELEASE, REFUSE, EXACT or UNSAFE for a model of `width` words
        per row whose mechanism reads `consumed` (None: unknown, so a
        PARTIAL buffer must be refused unless it is exact for every
        layout of that width: g = 2 is the least mixing)."""
        if self.kind == GOOD:
            return RELEASE
        if self.kind == UNCATCHABLE:
            return UNSAFE
        if self.kind == DEFECT:
            return REFUSE
        if consumed is None:
            consumed = width // 2
        if extraction.layout(consumed).words != width:
            raise ValueError(f"`consumed` {consumed} does not give a "
                             f"buffer of {width} words.")
        bad = self.bad(width, consumed) if self.layout_aware \
            else self.bad(width)
        return EXACT if extraction.exact_despite(bad, consumed) else REFUSE


def _random32(rng, shape):
    return rng.integers(0, 2**32, size=shape, dtype=np.uint64)


def _as_words(values):
    return (np.asarray(values, np.uint64) & np.uint64(0xFFFFFFFF)).astype(
        np.uint32).view(np.int32)


def _progression(rng, rows, width, step):
    base = _random32(rng, (rows, 1))
    return _as_words(base + np.uint64(step) * np.arange(width,
                                                        dtype=np.uint64))


def _os_urandom(rng, rows, width):
    del rng
    return np.frombuffer(os.urandom(4 * rows * width), np.int32).reshape(
        rows, width).copy()


def _counter(rng, rows, width):
    return _progression(rng, rows, width, 1)


def _counter_random_step(rng, rows, width):
    return _progression(rng, rows, width, int(rng.integers(1, 2**32)))


def _counter_even_step(rng, rows, width):
    shift = int(rng.integers(1, 24))
    odd = int(rng.integers(0, 2**(32 - shift - 1))) * 2 + 1
    return _progression(rng, rows, width, (odd << shift) % 2**32)


def _weyl(rng, rows, width):
    del rng
    return _as_words(np.arange(width, dtype=np.uint64)[None].repeat(
        rows, 0) * np.uint64(WEYL_STEP))


def _lcg(multiplier, increment, modulus):
    def fill(rng, rows, width):
        state = _random32(rng, (rows,)) % np.uint64(modulus)
        return _as_words(_lcg_outputs(state, width, multiplier, increment,
                                      modulus))
    return fill


def _lcg_outputs(state, count, multiplier, increment, modulus):
    """The `count` states after `state` (uint64 array) of x -> (a x + c)
    mod `modulus`, a power of two <= 2^32 (uint64 products wrap modulo
    2^64, which the modulus divides): uint64 array shape + (count,). The
    i-th is A_i x + B_i, the i + 1 step map (`java_random.step_maps`: the
    same integers as stepping one at a time)."""
    if modulus <= 0 or modulus > 2**32 or modulus & (modulus - 1):
        raise ValueError(f"`modulus` must be a power of two from 1 to 2^32, "
                         f"received {modulus}.")
    mult, add = java_random.step_maps(multiplier, increment, modulus - 1,
                                      count)
    with np.errstate(over="ignore"):
        state = np.asarray(state, np.uint64)
        return (state[..., None] * mult + add) & np.uint64(modulus - 1)


def _java(rng, rows, width):
    now = int(time.time() * 1000) + int(rng.integers(-60000, 60001))
    return np.stack([java_random.java_words(now + r, width)
                     for r in range(rows)])


def _previous_call():
    # An earlier call's buffer, sent again (a true replay: the first call
    # of a width draws a good buffer, every later one sends it again).
    sent = {}

    def fill(rng, rows, width):
        key = (rows, width)
        if key not in sent:
            sent[key] = _os_urandom(rng, rows, width)
        return sent[key].copy()
    return fill


def _half_repeated(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    half = width // 2
    words[:, half:2 * half] = words[:, :half]
    return words


def _one_byte_per_word(rng, rows, width):
    return rng.integers(0, 256, size=(rows, width)).astype(np.int32)


def _byte_replicated(rng, rows, width):
    byte = rng.integers(0, 256, size=(rows, width)).astype(np.uint64)
    return _as_words(byte * np.uint64(0x01010101))


def _low_24_bits(rng, rows, width):
    return (_os_urandom(rng, rows, width) & 0xFFFFFF).astype(np.int32)


def _zeros(rng, rows, width):
    del rng
    return np.zeros((rows, width), np.int32)


def _constant(rng, rows, width):
    return np.full((rows, width), int(rng.integers(-2**31, 2**31)),
                   np.int32)


def _each_word_twice(rng, rows, width):
    return np.repeat(_os_urandom(rng, rows, (width + 1) // 2), 2,
                     axis=1)[:, :width]


def _block_tiled(rng, rows, width):
    return np.tile(_os_urandom(rng, rows, 8), (1, -(-width // 8)))[:, :width]


def _token_block_reused(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    block = min(TOKEN_WORDS, width // 2)
    words[:, block:2 * block] = words[:, :block]
    return words


def _pair_repeated(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    words[:, 2:4] = words[:, 0:2]
    return words


def _block_of_3_repeated(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    words[:, width // 2:width // 2 + 3] = words[:, 0:3]
    return words


def _rows_identical(rng, rows, width):
    return np.repeat(_os_urandom(rng, 1, width), rows, axis=0)


def _set_first(values):
    def fill(rng, rows, width):
        words = _os_urandom(rng, rows, width)
        words[:, :len(values)] = np.asarray(values, np.int64).astype(
            np.uint32).view(np.int32)
        return words
    return fill


def _zero_at(positions):
    def fill(rng, rows, width):
        words = _os_urandom(rng, rows, width)
        words[:, positions(width)] = 0
        return words
    return fill


def _first(k):
    return lambda width: list(range(k))


def _last(k):
    return lambda width: list(range(width - k, width))


def _stuck(transform):
    def fill(rng, rows, width):
        return transform(_os_urandom(rng, rows, width).view(np.uint32)
                         ).astype(np.uint32).view(np.int32)
    return fill


def _ascii_text(rng, rows, width):
    # Printable ASCII (0x20..0x7E), 4 characters per word: bit 7 of every
    # byte is clear.
    chars = rng.integers(0x20, 0x7F, size=(rows, 4 * width), dtype=np.uint8)
    return chars.view("<u4").astype(np.uint32).view(np.int32).reshape(
        rows, width)


def _bytes_not_words(rng, rows, width):
    # The app filled `width` BYTES (width / 4 words) and left the rest 0.
    words = np.zeros((rows, width), np.int32)
    words[:, :width // 4] = _os_urandom(rng, rows, width // 4)
    return words


def _parity(parity):
    return lambda width: list(range(parity, width, 2))


def _seeded_parity(parity, source):
    """Fresh words, those at positions of one parity from a generator
    with a CONSTANT seed (the same words every call)."""
    def fill(rng, rows, width):
        words = _os_urandom(rng, rows, width)
        count = len(range(parity, width, 2))
        words[:, parity::2] = source(count)[None]
        return words
    return fill


def _java_42(count):
    return java_random.java_words(42, count)


def _lcg_constant_seed(count):
    return _as_words(_lcg_outputs(np.uint64(12345), count, LCG_MULTIPLIER,
                                  LCG_INCREMENT, 2**32))


def _odd_words_even(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    words[:, 1::2] &= ~np.int32(1)
    return words


def _low_bit_parity(rng, rows, width):
    words = _os_urandom(rng, rows, width) & ~np.int32(1)
    return words | (np.arange(width, dtype=np.int32) % 2)[None]


def _second_half(transform):
    def fill(rng, rows, width):
        words = _os_urandom(rng, rows, width)
        half = width // 2
        words[:, half:2 * half] = transform(words[:, :half])
        return words
    return fill


def _negate(words):
    return _as_words(np.uint64(2**32) - words.view(np.uint32).astype(
        np.uint64))


def _group_checksums(rng, rows, width, consumed):
    # The last word of every group (`extraction.Layout.order`) set to
    # minus the sum of the others: every group sums to 0.
    lay = extraction.layout(consumed)
    words = _os_urandom(rng, rows, width)
    order = lay.order
    rest = words[:, order[:-1]].view(np.uint32).astype(np.uint64).sum(
        axis=1)
    words[:, order[-1]] = _as_words(np.uint64(2**32) * np.uint64(lay.group)
                                    - rest)
    return words


def _strided_checksums(rng, rows, width, consumed):
    # The last C words set so that the words C apart (the extraction's
    # groups before issue 38) sum to 0: a checksum per old group.
    words = _os_urandom(rng, rows, width)
    parts = words.reshape(rows, -1, consumed).view(np.uint32).astype(
        np.uint64)
    rest = parts[:, :-1].sum(axis=1)
    words[:, width - consumed:] = _as_words(
        np.uint64(2**32) * np.uint64(parts.shape[1]) - rest)
    return words


def _old_sample(width, consumed):
    """The words the checks read before issue 38: all of them up to 512,
    else blocks [0, 128) and [C - 128, C) and their partners C later."""
    if width <= 512:
        return np.arange(width)
    first = np.concatenate([np.arange(128), np.arange(consumed - 128,
                                                      consumed)])
    return np.concatenate([first, first + consumed])


def _zeros_outside_old_sample(share):
    def fill(rng, rows, width, consumed):
        words = _os_urandom(rng, rows, width)
        outside = np.setdiff1d(np.arange(width), _old_sample(width,
                                                             consumed))
        zero = rng.random((rows, len(outside))) < share
        block = words[:, outside]
        block[zero] = 0
        words[:, outside] = block
        return words
    return fill


def _outside_old_sample(width, consumed):
    return np.setdiff1d(np.arange(width), _old_sample(width, consumed))


def _outside_sample(width, consumed):
    from tfdptext.privacy import word_statistics

    return np.setdiff1d(np.arange(width),
                        word_statistics.sample(consumed).positions)


def _zeros_outside_sample(share):
    def fill(rng, rows, width, consumed):
        words = _os_urandom(rng, rows, width)
        outside = _outside_sample(width, consumed)
        block = words[:, outside]
        block[rng.random(block.shape) < share] = 0
        words[:, outside] = block
        return words
    return fill


def _pool_of(size, header=0):
    """Fill: `header` constant words (1, 2, ...), then a pool of size(width)
    fresh words tiled over the rest of the buffer."""
    def fill(rng, rows, width):
        pool = size(width)
        words = np.tile(_os_urandom(rng, rows, pool),
                        (1, -(-width // pool)))[:, :width - header]
        head = np.broadcast_to(np.arange(1, header + 1, dtype=np.int32),
                               (rows, header))
        return np.concatenate([head, words], axis=1)
    return fill


def _low_bit_pattern(pattern):
    """Fill: fresh words whose bit 0 is pattern[position mod its length]."""
    def fill(rng, rows, width):
        bits = np.resize(np.array(pattern, np.int32), width)
        return (_os_urandom(rng, rows, width) & ~np.int32(1)) | bits[None]
    return fill


# Issue 38: the reviewer's buffers, each aimed at a group of the old
# extraction (a parity class, a half) or at the old fixed sample.
_ISSUE_38 = [
    Generator("even_words_java_42", "fresh odd words; the even ones "
              "java.util.Random(42).nextInt() (a constant seed: the same "
              "every call)", _seeded_parity(0, _java_42), kind=PARTIAL,
              bad=_parity(0)),
    Generator("odd_words_java_42", "fresh even words; the odd ones "
              "java.util.Random(42)", _seeded_parity(1, _java_42),
              kind=PARTIAL, bad=_parity(1)),
    Generator("even_words_lcg_constant_seed", "fresh odd words; the even "
              "ones a 32-bit LCG with a constant seed",
              _seeded_parity(0, _lcg_constant_seed), kind=PARTIAL,
              bad=_parity(0)),
    Generator("odd_words_even", "fresh words, those at odd positions with "
              "bit 0 clear", _odd_words_even, kind=PARTIAL, bad=_parity(1)),
    Generator("low_bit_follows_parity", "fresh words whose bit 0 is the "
              "position's parity", _low_bit_parity),
    Generator("second_half_negated", "the second half minus the first",
              _second_half(_negate)),
    Generator("second_half_complemented", "the second half the first's "
              "bitwise complement", _second_half(lambda w: ~w)),
    Generator("group_checksums", "fresh words, the last word of every "
              "extraction group minus the sum of the others (a checksum "
              "per group)", _group_checksums, layout_aware=True),
    Generator("strided_checksums", "fresh words, the last C set so that "
              "the words C apart sum to 0 (checksums for the extraction's "
              "groups before issue 38)", _strided_checksums,
              layout_aware=True),
    Generator("zeros_outside_old_sample_98", "fresh words, 98% of those "
              "outside the checks' old fixed sample set to 0",
              _zeros_outside_old_sample(0.98), kind=PARTIAL,
              layout_aware=True, bad=_outside_old_sample),
    Generator("zeros_outside_old_sample_83", "fresh words, 83% of those "
              "outside the old fixed sample set to 0",
              _zeros_outside_old_sample(0.83), kind=PARTIAL,
              layout_aware=True, bad=_outside_old_sample),
    Generator("zeros_outside_sample_98", "fresh words, 98% of those "
              "outside the checks' sample set to 0",
              _zeros_outside_sample(0.98), kind=PARTIAL, layout_aware=True,
              bad=_outside_sample),
    Generator("pool_4k_tiled", "a pool of 1024 fresh words (4 KiB; half "
              "the buffer when shorter) tiled over the buffer",
              _pool_of(lambda n: min(1024, n // 2))),
    # Issue 38, round five: pools of any size, and bit patterns of the
    # periods an extraction group of g = 4 or 8 words sums over.
    Generator("pool_tiled_unsampled", "a pool of 10/11 of half the buffer "
              "(rounded; 1,396 words of a 3,072-word buffer: not a power "
              "of two, so the sample before round five read none of its "
              "words twice) tiled over the buffer: the consumed words "
              "repeat 1,396 apart", _pool_of(lambda n: round(n * 5 / 11))),
    Generator("pool_tiled_after_header", "3 header words (1, 2, 3), then "
              "a pool of N - 8 fresh words tiled: its first 5 words "
              "repeat at the end (the longest pool the checks refuse "
              "after the longest header)",
              _pool_of(lambda n: n - 8, header=3)),
    Generator("low_bit_period_4", "fresh words whose bit 0 is 1 at "
              "positions 0 mod 4, else 0 (a quarter of the words odd)",
              _low_bit_pattern([1, 0, 0, 0])),
    Generator("low_bit_period_6", "fresh words whose bit 0 follows the "
              "position modulo 6 (0, 0, 1, 0, 1, 1)",
              _low_bit_pattern([0, 0, 1, 0, 1, 1])),
    Generator("low_bit_period_8", "fresh words whose bit 0 follows the "
              "position modulo 8 (0, 0, 0, 1, 0, 1, 1, 1: half the words "
              "odd, and half the neighbours 1 or 2 apart differ, so the "
              "bit counts and the old neighbour lags 1 and 2 passed it "
              "at C = 31, g = 8, whose groups sum over all 8 residues to "
              "a fixed low bit)", _low_bit_pattern([0, 0, 0, 1, 0, 1, 1, 1])),
]


_PARTIAL_RUNS = [
    Generator(f"first_{k}_zero", f"fresh words, the first {k} set to 0",
              _zero_at(_first(k)), kind=PARTIAL, bad=_first(k))
    for k in range(1, 17)] + [
    Generator(f"last_{k}_zero", f"fresh words, the last {k} set to 0",
              _zero_at(_last(k)), kind=PARTIAL, bad=_last(k))
    for k in range(1, 17)]


GENERATORS = {g.name: g for g in [
    Generator("os_urandom", "os.urandom (the contract: the platform's "
              "secure generator)", _os_urandom, kind=GOOD),
    Generator("counter", "a counter base + i from a random base",
              _counter),
    Generator("counter_random_step", "base + i * s, random base and step",
              _counter_random_step),
    Generator("counter_even_step", "base + i * s, s = odd * 2^j, j in "
              "1..23", _counter_even_step),
    Generator("weyl", "i * 0x9E3779B9 (Weyl sequence)", _weyl),
    Generator("lcg32", "consecutive outputs of a 32-bit LCG (1664525 x + "
              "1013904223 mod 2^32), random seed",
              _lcg(LCG_MULTIPLIER, LCG_INCREMENT, 2**32)),
    Generator("lcg31", "consecutive outputs of rand()'s LCG (1103515245 x "
              "+ 12345 mod 2^31)", _lcg(LCG31_MULTIPLIER, LCG31_INCREMENT,
                                        2**31)),
    Generator("java_util_random", "java.util.Random seeded with the time "
              "in ms, nextInt() per word", _java, kind=UNCATCHABLE,
              why="its output looks uniform to every test; it is "
              "predictable from the seed, which the clock gives away "
              "(tfdptext.audit.java_random finds it from one release)"),
    Generator("previous_call", "a good buffer already sent with an earlier "
              "call (the same buffer every call)", _previous_call(),
              kind=UNCATCHABLE,
              why="each call is checked alone: the model keeps no memory "
              "of earlier buffers"),
    Generator("half_repeated", "the first half of the buffer copied into "
              "the second", _half_repeated),
    Generator("one_byte_per_word", "a random byte per word (0..255)",
              _one_byte_per_word),
    Generator("byte_replicated", "a random byte copied into the 4 bytes of "
              "each word", _byte_replicated),
    Generator("low_24_bits_only", "random words with the high byte zero",
              _low_24_bits),
    Generator("zeros", "an unfilled buffer", _zeros),
    Generator("constant", "one random word everywhere", _constant),
    Generator("each_word_twice", "every random word written twice",
              _each_word_twice),
    Generator("block_of_8_tiled", "8 random words repeated over the buffer",
              _block_tiled),
    Generator("all_even", "random words with bit 0 clear (a generator's "
              "stuck low bit)", _stuck(lambda w: w & ~np.uint32(1))),
    Generator("all_odd", "random words with bit 0 set",
              _stuck(lambda w: w | np.uint32(1))),
    Generator("multiples_of_4", "random words with bits 0 and 1 clear",
              _stuck(lambda w: w & ~np.uint32(3))),
    Generator("top_bit_set", "random words with bit 31 set",
              _stuck(lambda w: w | np.uint32(0x80000000))),
    Generator("ascii_text", "bytes of printable ASCII text (bit 7 of every "
              "byte clear)", _ascii_text),
    Generator("bytes_not_words", "only the first quarter filled (the app "
              "filled as many bytes as the buffer has words)",
              _bytes_not_words),
    Generator("first_word_0x12345678", "fresh words, the first 0x12345678 "
              "(a header)", _set_first([0x12345678]), kind=PARTIAL,
              bad=_first(1)),
    Generator("first_word_0xffffffff", "fresh words, the first 0xFFFFFFFF",
              _set_first([0xFFFFFFFF]), kind=PARTIAL, bad=_first(1)),
    Generator("second_word_zero", "fresh words, the second 0",
              _zero_at(lambda width: [1]), kind=PARTIAL,
              bad=lambda width: [1]),
    Generator("counter_in_first_8", "fresh words, the first 8 a counter "
              "0..7", _set_first(range(8)), kind=PARTIAL, bad=_first(8)),
    Generator("words_0_10_20_zero", "fresh words, words 0, 10 and 20 set "
              "to 0", _zero_at(lambda width: [0, 10, 20]), kind=PARTIAL,
              bad=lambda width: [0, 10, 20]),
    Generator("token_block_reused", "one token's 768 words (or half the "
              "buffer) used again for the next token", _token_block_reused,
              kind=PARTIAL, bad=lambda width: list(range(
                  2 * min(TOKEN_WORDS, width // 2)))),
    Generator("pair_repeated", "the first Laplace pair (2 words) used twice",
              _pair_repeated, kind=PARTIAL, bad=_first(4)),
    Generator("block_of_3_repeated", "3 words used again half a buffer "
              "later (aligned with extraction's groups when g = 2)",
              _block_of_3_repeated, kind=PARTIAL,
              bad=lambda width: [0, 1, 2] + [width // 2 + i
                                             for i in range(3)]),
    Generator("rows_identical", "a batch of 2 rows with the same words",
              _rows_identical, rows=2),
] + _ISSUE_38 + _PARTIAL_RUNS}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a model did with one generator's buffers.

    Attributes:
        generator, width, buffers: which, how wide, how many.
        refused: how many of them the model refused.
        expected: RELEASE, REFUSE, EXACT or UNSAFE
            (`Generator.expectation`).
        channel_p: the smallest p-value (Bonferroni-corrected over the
            output positions) of the released outputs against the good
            generator's, or None when not tested (too few released, or
            the good generator itself).
        alpha: below this p-value the channel differs.
        why: for generators no check can see, why.
    """

    generator: str
    width: int
    buffers: int
    refused: int
    expected: str
    channel_p: float = None
    alpha: float = 1e-6
    why: str = ""

    @property
    def wrong_channel(self):
        return self.channel_p is not None and self.channel_p < self.alpha

    @property
    def unsafe(self):
        """Whether buffers no check can see (UNCATCHABLE) were released:
        releases that are predictable or repeat an earlier one."""
        return self.expected == UNSAFE and self.refused < self.buffers

    @property
    def as_expected(self):
        """GOOD: never refused; DEFECT and non-exact PARTIAL buffers, and
        UNCATCHABLE ones (whose releases break the guarantee): always
        refused; exact PARTIAL buffers: refused, or released by the good
        buffers' channel."""
        if self.expected == RELEASE:
            return self.refused == 0
        if self.expected in (REFUSE, UNSAFE):
            return self.refused == self.buffers
        return not self.wrong_channel


def refused(release):
    """Whether a release (numpy) is unusable: NaN / inf, or ids < 0."""
    release = np.asarray(release)
    if np.issubdtype(release.dtype, np.integer):
        return bool((release < 0).any())
    return bool((~np.isfinite(release)).any())


def channel_p_value(reference, releases, max_positions=None):
    """The smallest Bonferroni-corrected p-value of two-sample tests,
    one per output position (every one; the first `max_positions` when
    given), between the
    releases of good buffers (`reference`, (n, ...)) and others
    (`releases`, (m, ...)): chi-square homogeneity on integer releases,
    Kolmogorov-Smirnov on float ones. 1.0 when they agree in law."""
    from scipy import stats

    reference = np.asarray(reference).reshape(len(reference), -1)
    releases = np.asarray(releases).reshape(len(releases), -1)
    positions = reference.shape[1] if max_positions is None else min(
        reference.shape[1], max_positions)
    smallest = 1.0
    for i in range(positions):
        a, b = reference[:, i], releases[:, i]
        if np.issubdtype(a.dtype, np.integer):
            values = np.union1d(a, b)
            table = np.array([[np.sum(a == v) for v in values],
                              [np.sum(b == v) for v in values]])
            if len(values) < 2:
                p = 1.0
            else:
                p = stats.chi2_contingency(table)[1]
        else:
            p = stats.ks_2samp(a, b).pvalue
        smallest = min(smallest, p)
    return min(1.0, smallest * positions)


def check_model(run, width, generators=None, buffers=1, seed=0,
                max_rows=1, consumed=None, releases=0, alpha=1e-6):
    """Feeds each generator's buffers to `run(words) -> release`, counts
    the refusals, and with `releases` tests the released outputs' law.

    Args:
        run: a function of int32 (rows, width) words returning the release
            (numpy) for fixed other inputs.
        width: the model's number of words per row.
        generators: names (default: all that need at most `max_rows` rows).
        buffers: buffers per generator for the refusal count (fresh bases,
            seeds and steps).
        seed: the numpy seed of the generators' own randomness.
        max_rows: the batch the model takes (phone models: 1).
        consumed: the words the model's mechanism reads (None: the least
            mixing layout of `width`, g = 2).
        releases: releases per released generator (and of the good one)
            for the channel test; 0: no test.
        alpha: the channel test's level (Bonferroni over positions).

    Returns:
        A list of `Verdict`.
    """
    rng = np.random.default_rng(seed)
    names = generators or [n for n, g in GENERATORS.items()
                           if g.rows <= max_rows]
    reference = None
    if releases:
        reference = np.stack([np.asarray(run(_os_urandom(rng, 1, width)))
                              for _ in range(releases)])
    out = []
    for name in names:
        generator = GENERATORS[name]
        count = 0
        for _ in range(buffers):
            words = generator.make(rng, generator.rows, width, consumed)
            count += refused(run(words))
        p = None
        if releases and not generator.good and generator.rows == 1:
            outputs = [np.asarray(run(generator.make(rng, 1, width,
                                                     consumed)))
                       for _ in range(releases)]
            kept = [o for o in outputs if not refused(o)]
            if len(kept) >= max(20, releases // 4):
                p = channel_p_value(reference, np.stack(kept))
        out.append(Verdict(name, width, buffers, count,
                           generator.expectation(width, consumed), p, alpha,
                           generator.why))
    return out


def laplace_phone_model(dimension=384, epsilon=1.0):
    """A DPNR-like phone model without an encoder: x (1, dimension) ->
    MinMaxNormalize -> LaplaceNoise(epsilon), noise from `random_words`
    (4 words per coordinate, each the sum of 2: `extraction.layout(4 *
    dimension)`) checked as a phone model checks them, converted to
    TFLite (batch 1). Returns (tflite bytes, number of words)."""
    from tfdptext import layers

    phone = _privatizer_phone(
        layers.LaplaceNoise(epsilon), (dimension,), "float32",
        np.zeros((1, dimension), np.float32),
        before=layers.MinMaxNormalize())
    return phone.tflite, phone.width


@dataclasses.dataclass(frozen=True)
class Phone:
    """A privatizer alone, as a phone model runs it (the same extraction
    and checks), in TFLite: `run(words)` feeds `feed` with the words.

    Attributes:
        name: the mechanism.
        tflite: the .tflite bytes (batch 1).
        feed: its inputs other than `random_words`.
        width: random words per call.
        consumed: the words its mechanism reads.
    """

    name: str
    tflite: bytes
    feed: dict
    width: int
    consumed: int


def _privatizer_phone(privatizer, shape, dtype, x, before=None, name=""):
    from tfdptext.export import tflite
    from tfdptext.models import secure

    model = secure.secure_privatizer_model(privatizer, shape, dtype,
                                           before=before)
    return Phone(name, tflite.convert(model, batch_size=1), {"x": x},
                 int(model.input[secure.RANDOM_WORDS].shape[-1]),
                 secure.phone_consumed_words(model))


# The d_chi and BRR text-to-text entries have no AuditSetting (the audit
# has rows of their own): their phone models here use these.
_TEXT_DEFAULTS = {"dchi": (1.5, (1, 2)), "brr": (1.0, (1, 2))}


def _text_phone(name):
    """A registered text-to-text mechanism on the audit's toy table
    (`tfdptext.audit.mechanisms.text_audit_table`; BRR on 8-bit codes of
    its rows' signs), its setting's pair of ids as a 2-token input."""
    from tfdptext import mechanisms as text_mechanisms
    from tfdptext.audit import mechanisms as audit_mechanisms

    entry = text_mechanisms.get(name)
    table, vocabulary = audit_mechanisms.text_audit_table()
    if entry.audit is not None:
        value, options = entry.audit.value, list(entry.audit.options)
        pair = entry.audit.pair
    else:
        (value, pair), options = _TEXT_DEFAULTS[name], []
    if entry.table == text_mechanisms.CODES:
        # 8 distinct bits per row: the rows' signs against 4 directions.
        directions = np.array([[1, 0], [0, 1], [1, 1], [1, -1]], np.float32)
        projections = table @ directions.T
        table = np.concatenate([projections > 0, projections > 1],
                               axis=1).astype(np.float32)
    settings = text_mechanisms.Settings(
        value, entry.parse_options(options), table, (0,), (0,),
        "the audit's toy table", vocabulary)
    layer = entry.layer(settings)
    ids = np.array([list(pair)], np.int32)
    return _privatizer_phone(layer, (2,), "int32", ids,
                             name=f"{name}_text_to_text")


def mechanism_phones(names=None):
    """{name: Phone} of every kind of phone model we export: the code
    release (3 codes, epsilon 2), 384-d Laplace after min-max (DPNR),
    d_chi on one 384-d vector and on 16 tokens of 384-d, and every
    registered text-to-text mechanism (BRR included) on a toy table. Each
    is converted when asked for (`names`: a subset)."""
    from tfdptext import layers
    from tfdptext import mechanisms as text_mechanisms

    rng = np.random.default_rng(0)
    builders = {
        "code_release": lambda: _privatizer_phone(
            layers.CodeRandomizedResponse(2.0, 3), (), "int32",
            np.zeros((1,), np.int32), name="code_release"),
        "laplace_384": lambda: _privatizer_phone(
            layers.LaplaceNoise(1.0), (384,), "float32",
            rng.random((1, 384)).astype(np.float32),
            before=layers.MinMaxNormalize(), name="laplace_384"),
        "dchi_sequence_384": lambda: _privatizer_phone(
            layers.DChiNoise(20.0, vectors="sequences"), (384,), "float32",
            np.zeros((1, 384), np.float32), name="dchi_sequence_384"),
        "dchi_tokens_16x384": lambda: _privatizer_phone(
            layers.DChiNoise(20.0), (16, 384), "float32",
            np.zeros((1, 16, 384), np.float32), name="dchi_tokens_16x384"),
    }
    for name in text_mechanisms.REGISTRY:
        builders[f"{name}_text_to_text"] = (
            lambda name=name: _text_phone(name))
    wanted = list(builders) if names is None else list(names)
    unknown = [n for n in wanted if n not in builders]
    if unknown:
        from tfdptext.errors import ArgumentError

        raise ArgumentError(f"Unknown phone model(s) {unknown}; choose "
                            f"from {', '.join(builders)}.")
    return {name: builders[name]() for name in wanted}


def check_phone(phone, **kwargs):
    """`check_model` on a `Phone`, with its layout."""
    return check_tflite(phone.tflite, phone.feed, phone.width,
                        consumed=phone.consumed, **kwargs)


def check_tflite(tflite_bytes, feed, width, output=None, signature=None,
                 **kwargs):
    """`check_model` on a .tflite signature: `feed` holds its inputs other
    than `random_words`."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=tflite_bytes).get_signature_runner(
        signature)

    def run(words):
        out = runner(**feed, random_words=words)
        return out[output] if output else next(iter(out.values()))

    return check_model(run, width, **kwargs)


def check_export(export_dir, text="the staff was friendly", **kwargs):
    """`check_model` on every phone model (length) of an export that takes
    random words, with `text` as the input and each model's extraction
    layout from the manifest: {length: [Verdict]}."""
    from tfdptext.export.local import ExportedPipeline

    pipeline = ExportedPipeline(export_dir)
    features = pipeline.tokenizer([text])
    ids = features["token_ids"].numpy()
    mask = features["padding_mask"].numpy()
    out = {}
    for model in pipeline.models:
        if not model.random_words:
            continue
        runner = pipeline.runners[model.length]
        feed = {"token_ids": ids[:, :model.length],
                "padding_mask": mask[:, :model.length]}

        def run(words, runner=runner, feed=feed):
            return runner(**feed, random_words=words)[pipeline.spec.release]

        out[model.length] = check_model(
            run, model.random_words, consumed=model.consumed_words,
            **kwargs)
    return out


def markdown_table(verdicts):
    """The verdicts as a markdown table."""
    lines = ["| generator | words | buffers | refused | expected | channel "
             "of the released (p) | as expected |",
             "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        channel = "-" if v.channel_p is None else (
            f"{'WRONG' if v.wrong_channel else 'same'} ({v.channel_p:.2g})")
        verdict = "yes" if v.as_expected else (
            "NO: UNSAFE, released undetected" if v.unsafe else "NO")
        lines.append(f"| {v.generator} | {v.width:,} | {v.buffers} | "
                     f"{v.refused} | {v.expected} | {channel} | "
                     f"{verdict} |")
    return "\n".join(lines)
