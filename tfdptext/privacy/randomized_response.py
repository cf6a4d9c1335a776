"""Accounting for binary randomized response on bit vectors (BRR).

Each bit is kept with probability e^eps / (1 + e^eps) and flipped otherwise,
independently. One bit is eps-LDP; an n-bit vector is eps * d_Hamming metric
DP (Carvalho et al., Theorem 1), i.e. at most (n * eps)-LDP for arbitrary
vectors. Nearest-neighbour decoding to a word is post-processing.
"""

import math

from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import validation


def keep_probability(epsilon):
    """e^eps / (1 + e^eps), computed without overflow."""
    epsilon = validation.check_positive("epsilon", epsilon)
    return 1.0 / (1.0 + math.exp(-epsilon))


def flip_probability(epsilon):
    """1 / (1 + e^eps) = e^-eps / (1 + e^-eps), computed without overflow.

    In float32 the flip test U < p on uniforms of 23 or 24 bits flips with
    probability >= p (at least 2^-24 once p > 0), so a very large epsilon
    is an upper bound of the real one, never an understatement.
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    tail = math.exp(-epsilon)
    return tail / (1.0 + tail)


def rr_guarantee(epsilon, num_bits=None, decoded_to_words=False):
    """The guarantee of per-bit randomized response on a bit vector."""
    epsilon = validation.check_positive("epsilon", epsilon)
    details = {"flip_probability": flip_probability(epsilon)}
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
    conditions = ["bits are flipped independently with fresh randomness"]
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


def brr_text_guarantee(epsilon, num_bits, codes_description="binary codes"):
    """The guarantee of BRR text-to-text: each token's n-bit code through
    per-bit randomized response, decoded to the word with the nearest code.

    Per token, metric DP in the Hamming distance between the two words'
    codes: P[M(w) = o] <= exp(eps * d_H(phi(w), phi(w'))) P[M(w') = o], so
    at most exp(n * eps) for any two words (Carvalho et al., Theorem 1;
    decoding is post-processing).
    """
    epsilon = validation.check_positive("epsilon", epsilon)
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
            "the codes are public and fixed before the user's data is seen",
            "output = the candidate word whose code is nearest in Hamming "
            "distance, the lowest id among ties (post-processing); special "
            "tokens are never output; the structural tokens are released "
            "unchanged, so the token count (length) is released",
        ),
        details={"flip_probability": flip_probability(epsilon),
                 "num_bits": num_bits},
    )
