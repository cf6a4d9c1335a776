"""Randomness extraction: how a phone model turns the app's random words
into the words its mechanism reads, so that no few bad words decide a
release.

A mechanism reads C int32 words per release (its "consumed" words: two
for a code release, four per coordinate of a Laplace release, 768 per
token of 384-d d_chi noise, plus one per position for word dropout). The
phone model takes g times as many, N = g C (`Layout`), and the word j it
hands the mechanism is the sum of the words at j, j + C, ..., j + (g-1) C,
modulo 2^32:

    v_j = (w_j + w_{j+C} + ... + w_{j+(g-1)C}) mod 2^32.

The fact it rests on: if X is uniform on the integers modulo 2^32 and
independent of Y, then X + Y mod 2^32 is uniform and independent of Y,
whatever Y's law. So if each group {j, j + C, ..., j + (g-1)C} holds one
word that is uniform and used nowhere else in the call ("fresh"), the
consumed words v are independent and uniform: the release follows the
mechanism's stated channel EXACTLY, whatever the other words hold. In
particular (`exact_despite`):

- any g - 1 bad words anywhere (a header word, an index off by one,
  a word overwritten by mistake, the first or the last few words zero or
  constant);
- any run of at most N - C = (g - 1) C consecutive bad words (a partial
  fill that covers at least the first C words, or leaves the first C
  words stale; a buffer half copied), because a run of R consecutive
  positions meets each group at most ceil(R / C) times.

g is at least 2 (`MIN_GROUP`), a power of two, and large enough that N
is at least `MIN_WORDS`, so short buffers (a code release reads 2 words:
g = 64, N = 128) are mixed the most.

What extraction cannot fix, and what the checks in the model are for
(`tfdptext.privacy.word_statistics`): a defect shared by most of the
buffer. A stuck bit in every word survives the sum (even + even is
even); a counter, an LCG, a constant or an unfilled buffer leaves every
group without a fresh word. These are global, so the checks look at a
fixed sample of the buffer. And nothing inside the model can see a
predictable generator (java.util.Random seeded with the time) or a buffer
reused from an earlier call: those break the contract, which is fresh
words from the platform's secure generator for every call.

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

    def positions(self, j):
        """The buffer positions summed into consumed word j."""
        return [j + i * self.consumed for i in range(self.group)]

    def to_dict(self):
        return {"consumed": self.consumed, "group": self.group,
                "words": self.words,
                "rule": (f"word j (0 <= j < {self.consumed}) that the "
                         "mechanism reads = (w[j] + w[j + C] + ... + "
                         f"w[j + {self.group - 1} C]) mod 2^32, C = "
                         f"{self.consumed}")}


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
    parts = words.astype(np.int64).reshape(*words.shape[:-1], lay.group,
                                           consumed) & _MASK
    total = parts.sum(axis=-2) & _MASK
    return total.astype(np.uint32).view(np.int32)


def buffer_for(consumed_words, others):
    """A buffer whose extraction is `consumed_words` (int32, (..., C)):
    the words at j + C, ..., j + (g - 1) C are taken from `others`
    (int32, (..., (g - 1) C), e.g. fresh random words) and the word at j
    is chosen so that the group sums to consumed word j. For tests and
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
    words = np.concatenate([first[..., None, :], rest], axis=-2)
    return words.reshape(*consumed_words.shape[:-1], lay.words).astype(
        np.uint32).view(np.int32)


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
    False
    """
    lay = layout(consumed)
    bad = np.zeros(lay.words, bool)
    for p in bad_positions:
        p = int(p)
        if not 0 <= p < lay.words:
            raise ArgumentError(f"`bad_positions` must lie in [0, "
                                f"{lay.words}), received {p}.")
        bad[p] = True
    return bool((~bad.reshape(lay.group, consumed)).any(axis=0).all())


def longest_harmless_run(consumed):
    """The longest run of consecutive bad words that always leaves the
    release exact: (g - 1) C.

    Example:
    >>> longest_harmless_run(1536)
    1536
    """
    lay = layout(consumed)
    return (lay.group - 1) * lay.consumed
