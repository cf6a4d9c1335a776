"""Word dropout before an LDP mechanism (DPNR, Theorem 2).

Dropping each word with probability mu before an epsilon-DP mechanism gives
epsilon' = ln((1 - mu) e^epsilon + mu) for neighbouring inputs that differ in
one position: with probability mu the differing position is masked and the
two outputs have the same distribution. The base epsilon must be the epsilon
of the released representation for any two inputs (per representation; for
DPNR's per-coordinate Laplace, the k * epsilon of the vector).

The positions are TOKENS (WordPiece pieces), not words: "i met john
yesterday" is 4 tokens and "i met xiaoyun yesterday" 6, so two texts that
differ in one word may differ in several positions and in length. The
amplified epsilon holds for inputs with the same number of tokens that
differ in one token (`PER_TOKEN_SUBSTITUTION`); any other pair of inputs
keeps only the base epsilon.

`tfdptext.layers.WordDropout` masks exactly round(d * mu) of the d real
tokens (half rounds up), so the probability that a given word is masked is
q = round(d * mu) / d, which equals mu only when d * mu is an integer and can
be smaller for short inputs (d = 1 and mu < 0.5 masks nothing).
"""

import math

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import validation


def dropout_epsilon(epsilon, rate):
    """epsilon' = ln((1 - rate) * e^epsilon + rate) (DPNR Theorem 2).

    Example:
    >>> round(dropout_epsilon(1.0, 0.5), 2)
    0.62
    """
    epsilon = validation.check_nonnegative("epsilon", epsilon)
    rate = validation.check_rate("rate", rate, include_one=True)
    # log(e^eps (1 - rate) + rate) = eps + log1p(rate (e^-eps - 1)),
    # which stays finite for large eps.
    return epsilon + math.log1p(rate * math.expm1(-epsilon))


def num_dropped(num_tokens, rate):
    """How many of `num_tokens` real tokens WordDropout masks."""
    num_tokens = validation.check_int("num_tokens", num_tokens, minimum=0)
    rate = validation.check_rate("rate", rate)
    return int(math.floor(num_tokens * rate + 0.5))


def effective_rate(num_tokens, rate):
    """Probability q that a given word of a d-token input is masked."""
    num_tokens = validation.check_int("num_tokens", num_tokens, minimum=1)
    return num_dropped(num_tokens, rate) / num_tokens


def worst_case_rate(rate, min_tokens, max_tokens):
    """The smallest effective rate over input lengths in a range."""
    min_tokens = validation.check_int("min_tokens", min_tokens)
    max_tokens = validation.check_int("max_tokens", max_tokens)
    if max_tokens < min_tokens:
        raise ArgumentError(
            f"`max_tokens` ({max_tokens}) must be >= `min_tokens` "
            f"({min_tokens})."
        )
    return min(effective_rate(d, rate) for d in range(min_tokens,
                                                      max_tokens + 1))


def with_dropout(base, rate, min_tokens=1, max_tokens=512):
    """The token-substitution guarantee of dropout followed by `base`.

    The amplification is computed at the worst effective rate over input
    lengths in [min_tokens, max_tokens], so it holds for every such input.

    Args:
        base: the guarantee of the mechanism after dropout. Must be per
            representation (a per-coordinate guarantee is not a guarantee
            about words; convert it with
            `tfdptext.privacy.laplace.to_representation_level` first).
        rate: the dropout rate mu.
    """
    rate = validation.check_rate("rate", rate)
    if base.unit != guarantee_lib.PER_REPRESENTATION:
        raise ArgumentError(
            "`base` must be a per-representation guarantee, received unit "
            f"{base.unit!r}; convert per-coordinate guarantees first."
        )
    q = worst_case_rate(rate, min_tokens, max_tokens)
    eps = dropout_epsilon(base.value, q)
    details = dict(base.details)
    details.update(
        dropout_rate=rate,
        worst_case_effective_rate=q,
        base_epsilon=base.value,
        token_range=[min_tokens, max_tokens],
    )
    conditions = base.conditions + (
        f"inputs with {min_tokens} to {max_tokens} real tokens; round(d * "
        f"{rate:g}) of the d tokens are masked, so at least a fraction "
        f"{q:.4g} of them",
        "positions are masked uniformly at random and independently of "
        "the input's content",
        "neighbours are token sequences of equal length differing in one "
        "token (WordPiece piece), not words: a word that tokenizes into a "
        "different number of pieces changes the length and several "
        f"positions, and such inputs keep only the base {base.value:g}",
    )
    return guarantee_lib.Guarantee(
        mechanism=f"word_dropout+{base.mechanism}",
        parameter="epsilon",
        value=eps,
        unit=guarantee_lib.PER_TOKEN_SUBSTITUTION,
        delta=base.delta,
        composition=(
            f"ln((1 - q) e^{base.value:g} + q) with q = {q:.4g} "
            f"(DPNR Theorem 2, over token positions); inputs of equal "
            f"length differing in m tokens: min(m * {eps:.4g}, "
            f"{base.value:g}); any other two inputs: {base.value:g}"
        ),
        conditions=conditions,
        details=details,
        randomness=base.randomness,
    )
