"""Randomness extraction: how a phone model turns the app's random words
into the words its mechanism reads, so that no few bad words decide a
release.

A mechanism reads C int32 words per release (its "consumed" words: two
for a code release, four per coordinate of a Laplace release, 768 per
token of 384-d d_chi noise, plus one per position for word dropout). The
phone model takes g times as many, N = g C (`Layout`), cut into g blocks
of C words, and the word j it hands the mechanism is the sum modulo 2^32
of one word of each block, the words of group j:

    v_j = (w[p(0, j)] + w[p(1, j)] + ... + w[p(g - 1, j)]) mod 2^32,
    p(i, j) = i C + ((j + s_i) mod C),

block i rotated by a public shift s_i (`block_shifts`): s_i = 0 when C
is odd; -i mod C when C is even and at least 4 (so g = 2 pairs w[j] with
w[C + j - 1], and w[0] with w[N - 1]); the Thue-Morse bit of i (the
parity of its binary digits) when C = 2.

The fact it rests on: if X is uniform on the integers modulo 2^32 and
independent of Y, then X + Y mod 2^32 is uniform and independent of Y,
whatever Y's law. So if each group holds one word that is uniform and
used nowhere else in the call ("fresh"), and the other words ("bad")
are independent of the fresh ones, the consumed words v are independent
and uniform: the release follows the mechanism's stated channel EXACTLY,
whatever the bad words hold. Bad words DERIVED from fresh ones (a copy,
a negation, a checksum) are not covered: they can cancel a fresh word.
In particular (`exact_despite`, `longest_harmless_run`):

- any g - 1 bad words anywhere (a header word, an index off by one,
  a word overwritten by mistake, the first or the last few words zero or
  constant);
- the first or the last (g - 1) C words (`longest_harmless_edge`): a
  partial fill, or the start of the buffer left stale;
- any run of `longest_harmless_run` consecutive bad words ((g - 1)
  (C - 1) when C is even and at least 4: C - 1 for g = 2);
- every word at an even position, or every word at an odd one (a
  generator interleaved with another, 64-bit values split in two): the
  shifts put words of both parities in every group (C even: s_i changes
  parity from one block to the next; C odd: the blocks alternate), and
  for C = 2 every group meets every residue class modulo 2^k for
  2^k <= N / 2 (Thue-Morse). The plain rule p(i, j) = i C + j (before
  issue 38) put all even words in one group of a code release, and with
  g = 2 and C even paired even words with even words.

g is at least 2 (`MIN_GROUP`), a power of two, and large enough that N
is at least `MIN_WORDS`, so short buffers (a code release reads 2 words:
g = 64, N = 128) are mixed the most.

What extraction cannot fix, and what the checks in the model are for
(`tfdptext.privacy.word_statistics`): a defect shared by every word (a
stuck bit, or a bit that follows the position: the low bit of a sum is
the XOR of the low bits), a buffer mostly empty, constant or tiled, and
words derived from others (a negated or complemented half, checksums).
And nothing inside the model can see a predictable generator (java.util.
Random seeded with the time) or a buffer reused from an earlier call:
those break the contract, which is fresh words from the platform's
secure generator for every call.

Candidates compared before this choice (docs/benchmarks.md, "Random words:
extraction and checks"): XOR instead of the sum (the same guarantee,
3x slower in TFLite's BITWISE_XOR kernel), and a 256-bit key from the app
expanded in the graph by ChaCha20 (32 bytes for the app to fill, but
about 14x the whole d_chi token phone model at 128 tokens).

Pure Python and numpy.
"""

import dataclasses

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

# Every buffer mixes at least this many words into each consumed word.
MIN_GROUP = 2
# The fewest words a phone model takes: one block of the checks (a code
# release reading 2 words still takes 128, mixed 64 to one).
MIN_WORDS = 128
_MASK = 0xFFFFFFFF


def thue_morse(i):
    """The parity of the number of ones in i's binary digits.

    Example:
    >>> [thue_morse(i) for i in range(8)]
    [0, 1, 1, 0, 1, 0, 0, 1]
    """
    return bin(int(i)).count("1") % 2


def block_shifts(consumed, group):
    """The public shifts s_0 .. s_{g-1} of the blocks (module docstring).

    Example:
    >>> block_shifts(2, 8), block_shifts(1536, 2), block_shifts(3, 4)
    ([0, 1, 1, 0, 1, 0, 0, 1], [0, 1535], [0, 0, 0, 0])
    """
    if consumed % 2:
        return [0] * group
    if consumed == 2:
        return [thue_morse(i) for i in range(group)]
    return [(-i) % consumed for i in range(group)]


@dataclasses.dataclass(frozen=True)
class Layout:
    """How N random words become the C words a mechanism reads.

    Attributes:
        consumed: C, the words the mechanism reads per release.
        group: g, the words summed into each consumed word.
        words: N = g C, the words the app fills per release.
    """

    consumed: int
    group: int

    @property
    def words(self):
        return self.consumed * self.group

    @property
    def shifts(self):
        return block_shifts(self.consumed, self.group)

    @property
    def order(self):
        """numpy int64 (g, C): order[i, j] = p(i, j), the word of block i
        summed into consumed word j."""
        c = self.consumed
        j = np.arange(c)
        return np.stack([i * c + (j + s) % c
                         for i, s in enumerate(self.shifts)])

    def positions(self, j):
        """The buffer positions summed into consumed word j."""
        return [int(p) for p in self.order[:, j]]

    def to_dict(self):
        c, g = self.consumed, self.group
        if c % 2:
            shift = "s_i = 0"
        elif c == 2:
            shift = ("s_i = the parity of the number of ones in i's binary "
                     "digits (Thue-Morse)")
        else:
            shift = f"s_i = (-i) mod {c}"
        return {"consumed": c, "group": g, "words": self.words,
                "rule": (f"word j (0 <= j < {c}) that the mechanism reads "
                         f"= (w[p(0, j)] + ... + w[p({g - 1}, j)]) mod "
                         f"2^32, p(i, j) = i * {c} + ((j + s_i) mod {c}), "
                         f"{shift}")}


def layout(consumed):
    """The `Layout` of a mechanism that reads `consumed` words: g the
    smallest power of two >= MIN_GROUP with g * consumed >= MIN_WORDS.

    Example:
    >>> layout(2).words, layout(2).group    # a code release
    (128, 64)
    >>> layout(1536).words                  # 384-d Laplace
    3072
    """
    consumed = validation.check_int("consumed", consumed, minimum=1)
    group = MIN_GROUP
    while group * consumed < MIN_WORDS:
        group *= 2
    return Layout(consumed, group)


def extract(words, consumed):
    """The consumed words (numpy int32, (..., C)) of buffers `words`
    (int32, (..., N)), N = layout(C).words: the reference for the graph
    (`tfdptext.models.word_checks.extract`)."""
    lay = layout(consumed)
    words = np.asarray(words)
    if words.shape[-1] != lay.words:
        raise ArgumentError(
            f"`words` must have {lay.words} words on its last axis for "
            f"{consumed} consumed words, received shape {words.shape}.")
    parts = words[..., lay.order].astype(np.int64) & _MASK
    total = parts.sum(axis=-2) & _MASK
    return total.astype(np.uint32).view(np.int32)


def buffer_for(consumed_words, others):
    """A buffer whose extraction is `consumed_words` (int32, (..., C)):
    the words of blocks 1 .. g - 1 are taken from `others` (int32,
    (..., (g - 1) C), e.g. fresh random words, in the order of the
    groups: `Layout.order`) and the word of block 0 (at j) is chosen so
    that the group sums to consumed word j. For tests and
    audits that need two models, or two buffers, to read the same
    consumed words.

    Example:
    >>> v = np.arange(2, dtype=np.int32)[None]
    >>> w = buffer_for(v, np.ones((1, 126), np.int32))
    >>> extract(w, 2).tolist()
    [[0, 1]]
    """
    consumed_words = np.asarray(consumed_words)
    consumed = consumed_words.shape[-1]
    lay = layout(consumed)
    others = np.asarray(others)
    if others.shape != consumed_words.shape[:-1] + (lay.words - consumed,):
        raise ArgumentError(
            f"`others` must have shape {consumed_words.shape[:-1] + (lay.words - consumed,)} "
            f"for {consumed} consumed words, received {others.shape}.")
    rest = others.astype(np.int64).reshape(
        *others.shape[:-1], lay.group - 1, consumed) & _MASK
    first = (consumed_words.astype(np.int64) - rest.sum(axis=-2)) & _MASK
    blocks = np.concatenate([first[..., None, :], rest], axis=-2)
    words = np.zeros(consumed_words.shape[:-1] + (lay.words,), np.int64)
    words[..., lay.order] = blocks
    return words.astype(np.uint32).view(np.int32)


def exact_despite(bad_positions, consumed):
    """Whether every group keeps a position outside `bad_positions` (an
    iterable of buffer positions whose words may be anything, copies
    included: a word written at two positions counts as bad at both).
    When True, the release follows the stated channel exactly, provided
    the other words are fresh from a secure generator.

    Example:
    >>> exact_despite(range(16), 2)          # first 16 words zero
    True
    >>> exact_despite(range(0, 128, 2), 2)   # every even word bad
    True
    >>> exact_despite(range(64), 2)          # the whole first half
    True
    >>> exact_despite(layout(2).positions(0), 2)   # a whole group
    False
    """
    lay = layout(consumed)
    words = lay.words
    positions = np.fromiter(map(int, bad_positions), np.int64)
    outside = (positions < 0) | (positions >= words)
    if outside.any():
        raise ArgumentError(f"`bad_positions` must lie in [0, {words}), "
                            f"received {positions[outside.argmax()]}.")
    bad = np.zeros(words, bool)
    bad[positions] = True
    return bool((~bad[lay.order]).any(axis=0).all())


def longest_harmless_run(consumed):
    """The longest run of consecutive bad words that always leaves the
    release exact: one less than the shortest span max p(., j) - min
    p(., j) + 1 of a group: (g - 1)(C - 1) when C is even and at least
    4 (C - 1 for g = 2), (g - 1) C when C is odd or 2.

    Example:
    >>> longest_harmless_run(1536), longest_harmless_run(2)
    (1535, 126)
    """
    order = layout(consumed).order
    return int((order.max(axis=0) - order.min(axis=0)).min())


def longest_harmless_edge(consumed):
    """The most words at the start, or at the end, of the buffer that
    may be bad with the release exact: (g - 1) C (every group has a word
    in the last block and one in the first).

    Example:
    >>> longest_harmless_edge(1536), longest_harmless_edge(2)
    (1536, 126)
    """
    lay = layout(consumed)
    order = lay.order
    return int(min(order.max(axis=0).min(),
                   lay.words - 1 - order.min(axis=0).max()))
