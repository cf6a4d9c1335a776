"""Accounting for binary randomized response on bit vectors (BRR).

Each bit is kept with probability e^eps / (1 + e^eps) and flipped otherwise,
independently. One bit is eps-LDP; an n-bit vector is eps * d_Hamming metric
DP (Carvalho et al., Theorem 1), i.e. at most (n * eps)-LDP for arbitrary
vectors. Nearest-neighbour decoding to a word is post-processing.

What runs is binary randomized response from integer thresholds: the m = 2
case of `tfdptext.privacy.categorical`. A bit is kept iff k < T, k a
random integer uniform on [0, 2^B) and T = floor(p 2^B) (at least 1, at
most 2^B - 1): B = 24 for random words and float uniforms given to a layer,
23 for TensorFlow's and TFLite's own uniforms (`categorical.GRIDS`), 32 for
the off-device sampler (`tfdptext.offline.BRRCorpusPrivatizer`, os.urandom
words). The keep probability T / 2^B is at most p, so the implemented
epsilon ln(T / (2^B - T)) is at most the requested one; a guarantee states
that implemented epsilon (the largest over the grids that can run), never
the requested one. (The previous float comparison U < float32(1 - p)
flipped less than 1 - p for some epsilons: float32(1 - p) can round down.)
"""

import math

from tfdptext.privacy import categorical
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import validation

# The off-device sampler's grid: one 32-bit os.urandom word per bit.
OFFLINE_BITS = 32


def keep_probability(epsilon):
    """e^eps / (1 + e^eps), computed without overflow."""
    epsilon = validation.check_positive("epsilon", epsilon)
    return 1.0 / (1.0 + math.exp(-epsilon))


def flip_probability(epsilon):
    """1 / (1 + e^eps) = e^-eps / (1 + e^eps), computed without overflow:
    the requested flip probability (what runs: `keep_thresholds`)."""
    epsilon = validation.check_positive("epsilon", epsilon)
    tail = math.exp(-epsilon)
    return tail / (1.0 + tail)


def keep_thresholds(epsilon, grids=categorical.GRIDS):
    """{bits: T}: a bit is kept iff its random integer on [0, 2^bits) is
    below T = floor(keep_probability * 2^bits) (clamped to [1, 2^bits - 1]).

    Example:
    >>> keep_thresholds(1.0)
    {23: 6132563, 24: 12265127}
    """
    return {bits: categorical.keep_threshold(epsilon, 2, bits)
            for bits in grids}


def implemented_flip_probability(epsilon, bits=24):
    """1 - T / 2^bits: the flip probability that runs (at least the
    requested one, and at least 2^-bits)."""
    return 1.0 - categorical.keep_threshold(epsilon, 2, bits) / 2.0**bits


def implemented_epsilon(epsilon, grids=categorical.GRIDS):
    """The epsilon per bit of what runs: the largest over `grids` of
    ln(T / (2^B - T)), rounded up (`categorical.implemented_epsilon`).
    At most `epsilon` up to that rounding.

    Example:
    >>> round(implemented_epsilon(1.0), 6)
    1.0
    """
    return max(categorical.implemented_epsilon(epsilon, 2, bits)
               for bits in grids)


def _details(epsilon, num_bits, grids):
    details = {"requested_epsilon": float(epsilon),
               "flip_probability": max(implemented_flip_probability(
                   epsilon, bits) for bits in grids),
               "keep_thresholds": {str(b): t for b, t in
                                   keep_thresholds(epsilon, grids).items()},
               "epsilon_by_grid": {str(bits): categorical.implemented_epsilon(
                   epsilon, 2, bits) for bits in grids}}
    if num_bits is not None:
        details["num_bits"] = num_bits
    return details


_INTEGER_CONDITION = (
    "a bit is kept iff k < T, k a uniform integer on [0, 2^B) (B = 24 for "
    "random words, 23 for TensorFlow's and TFLite's own uniforms, 32 off "
    "device) and T = floor(2^B e^eps / (1 + e^eps)): epsilon is ln(T / "
    "(2^B - T)) of these exact probabilities, rounded up")


def rr_guarantee(epsilon, num_bits=None, decoded_to_words=False,
                 grids=categorical.GRIDS):
    """The guarantee of per-bit randomized response on a bit vector, at
    the epsilon that runs (`implemented_epsilon` over `grids`)."""
    requested = validation.check_positive("epsilon", epsilon)
    epsilon = guarantee_lib.check_implemented(
        "binary randomized response", requested,
        implemented_epsilon(requested, grids),
        f"integer thresholds on {'/'.join(map(str, grids))}-bit random "
        "integers, capped at 2^B - 1")
    details = _details(requested, None, grids)
    composition = (
        "an n-bit vector is eps * d_Hamming metric DP; two arbitrary n-bit "
        "vectors: (n * eps)-LDP"
    )
    if num_bits is not None:
        num_bits = validation.check_int("num_bits", num_bits)
        details["num_bits"] = num_bits
        composition = (
            f"two {num_bits}-bit vectors at Hamming distance h: exp({epsilon:g}"
            f" * h); arbitrary vectors: {num_bits * epsilon:g}-LDP"
        )
    conditions = ["bits are flipped independently with fresh randomness",
                  _INTEGER_CONDITION]
    if decoded_to_words:
        conditions.append(
            "output = word with the nearest binary code (post-processing)")
    return guarantee_lib.Guarantee(
        mechanism="randomized_response",
        parameter="epsilon",
        value=epsilon,
        unit=guarantee_lib.PER_BIT,
        metric="Hamming distance between the binary codes",
        composition=composition,
        conditions=tuple(conditions),
        details=details,
    )


def brr_text_guarantee(epsilon, num_bits, codes_description="binary codes",
                       grids=categorical.GRIDS):
    """The guarantee of BRR text-to-text: each token's n-bit code through
    per-bit randomized response, decoded to the word with the nearest code.

    Per token, metric DP in the Hamming distance between the two words'
    codes: P[M(w) = o] <= exp(eps * d_H(phi(w), phi(w'))) P[M(w') = o], so
    at most exp(n * eps) for any two words (Carvalho et al., Theorem 1;
    decoding is post-processing). eps is the implemented epsilon over
    `grids` (`implemented_epsilon`; `OFFLINE_BITS` for the off-device
    sampler).
    """
    requested = validation.check_positive("epsilon", epsilon)
    epsilon = implemented_epsilon(requested, grids)
    num_bits = validation.check_int("num_bits", num_bits)
    return guarantee_lib.Guarantee(
        mechanism="brr_text_to_text",
        parameter="epsilon",
        value=epsilon,
        unit=guarantee_lib.PER_TOKEN,
        metric=(f"epsilon * Hamming distance between the words' {num_bits}-"
                f"bit codes ({codes_description})"),
        composition=(
            f"two words w, w': exp({epsilon:g} * d_H(phi(w), phi(w'))), at "
            f"most exp({num_bits * epsilon:g}); a sequence of tokens, each "
            "privatized independently: exp(eps * sum_i d_H) for "
            "equal-length sequences; m releases of the same input add "
            "their bounds"),
        conditions=(
            "bits are flipped independently with fresh randomness",
            _INTEGER_CONDITION,
            "the codes are public and fixed before the user's data is seen",
            "output = the candidate word whose code is nearest in Hamming "
            "distance, the lowest id among ties (post-processing); special "
            "tokens are never output; the structural tokens are released "
            "unchanged, so the token count (length) is released",
        ),
        details=_details(requested, num_bits, grids),
    )
