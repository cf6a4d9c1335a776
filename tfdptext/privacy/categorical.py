"""Accounting for m-ary randomized response from integer random words.

m-ary randomized response (Warner 1965; Kairouz, Oh and Viswanath 2014)
releases a value c in {0, ..., m - 1} as itself with probability
p = e^eps / (e^eps + m - 1) and as each of the m - 1 others with
probability (1 - p) / (m - 1): eps-LDP for any two inputs, and the optimal
eps-LDP mechanism for naming c (`tfdptext.privacy.limit`).

The implementation never compares floats. Each release takes two random
integers k1, k2, uniform on [0, 2^B) (B bits of a random word):

    keep   iff k1 < T,  T = floor(p * 2^B)            (keep_threshold)
    else   c + 1 + (k2 mod (m - 1))  (mod m)          (the other value)

so the probabilities that run are rationals: keep T / 2^B, and "other
value j" (1 - T / 2^B) * n_j / 2^B, where n_j counts the k2 with
k2 mod (m - 1) = j: floor(2^B / (m - 1)), plus one for the first
2^B mod (m - 1) values of j (the modulo bias). `implemented_epsilon`
is the log of the largest ratio of these probabilities between two
inputs, computed exactly (fractions) and rounded up: never less than the
true epsilon of what runs.

B is 24 for random words and os.urandom (U = (w mod 2^24) / 2^24) and 23
for TensorFlow's and TFLite's own uniforms (multiples of 2^-23):
`tfdptext.privacy.randomness.UNIFORM_BITS`. Pure Python.
"""

import fractions
import math

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import randomness
from tfdptext.privacy import validation

# The most values a release may take (an int32 code, and the modulo bias
# stays below 2^-8 of a probability with 24-bit words).
MAX_VALUES = 2**16
# The grids of the random integers the samplers draw from (bits).
GRIDS = tuple(sorted(set(randomness.UNIFORM_BITS.values())))


def check_num_values(name, num_values):
    """`num_values` as an int in [2, MAX_VALUES], else ArgumentError."""
    value = validation.check_int(name, num_values, minimum=2)
    if value > MAX_VALUES:
        raise ArgumentError(
            f"`{name}` must be an integer in [2, {MAX_VALUES}], received "
            f"{value}.")
    return value


def keep_probability(epsilon, num_values):
    """p = e^eps / (e^eps + m - 1), computed without overflow.

    Example:
    >>> round(keep_probability(1.0, 4), 4)
    0.4754
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    num_values = check_num_values("num_values", num_values)
    return 1.0 / (1.0 + (num_values - 1) * math.exp(-epsilon))


def keep_threshold(epsilon, num_values, bits):
    """T = floor(p * 2^bits), at least 1 and at most 2^bits - 1 (keeping
    always would release the input itself: no privacy).

    Example:
    >>> keep_threshold(1.0, 2, 24)
    12265127
    """
    bits = validation.check_int("bits", bits, minimum=8)
    p = keep_probability(epsilon, num_values)
    return min(max(int(math.floor(p * 2.0**bits)), 1), 2**bits - 1)


def other_counts(num_values, bits):
    """(fewest, most) random integers k2 in [0, 2^bits) that choose one
    "other value" j: floor(2^bits / (m - 1)), plus 1 when (m - 1) does
    not divide 2^bits (the modulo bias)."""
    num_values = check_num_values("num_values", num_values)
    others = num_values - 1
    low, rest = divmod(2**bits, others)
    return low, low + (1 if rest else 0)


def implemented_probabilities(epsilon, num_values, bits):
    """The exact probabilities that run, as Fractions: (keep, smallest
    probability of one other value, largest)."""
    scale = 2**bits
    threshold = keep_threshold(epsilon, num_values, bits)
    keep = fractions.Fraction(threshold, scale)
    low, high = other_counts(num_values, bits)
    rest = 1 - keep
    return keep, rest * fractions.Fraction(low, scale), \
        rest * fractions.Fraction(high, scale)


def _log_upper(ratio):
    """ln(ratio) for a positive Fraction, rounded up: the natural logs of
    its numerator and denominator (each within an ulp), then a relative
    and an absolute margin far above the float error."""
    value = math.log(ratio.numerator) - math.log(ratio.denominator)
    return value + abs(value) * 1e-12 + 1e-15


def implemented_epsilon(epsilon, num_values, bits):
    """ln of the largest ratio P[M(c) = y] / P[M(c') = y] of the
    implemented probabilities, over every output y and inputs c, c'.

    With m = 2 an output is either the input (keep) or the other value;
    with m >= 3 it can also be "other" for both inputs with different
    j, so the modulo bias enters. Rounded up (`_log_upper`).

    Example:
    >>> abs(implemented_epsilon(1.0, 4, 24) - 1.0) < 1e-6
    True
    """
    keep, other_low, other_high = implemented_probabilities(
        epsilon, num_values, bits)
    ratios = [keep / other_low, other_high / keep]
    if num_values >= 3:
        ratios.append(other_high / other_low)
    return _log_upper(max(ratios))


def stated_epsilon(epsilon, num_values):
    """The epsilon a release of `epsilon` states: the largest
    `implemented_epsilon` over the random grids the layers and offline
    samplers draw from (23 and 24 bits). Warns
    (`guarantee.EpsilonMismatchWarning`) when it is more than 1% from
    `epsilon`: above at a tiny epsilon with many values (the modulo bias
    and the grid), below at a huge one (the keep threshold is capped at
    2^B - 1)."""
    value = max(implemented_epsilon(epsilon, num_values, bits)
                for bits in GRIDS)
    return guarantee_lib.check_implemented(
        f"{num_values}-ary randomized response", epsilon, value,
        "integer thresholds on 23- and 24-bit random integers, the modulo "
        "bias of choosing among the other values, and a keep threshold "
        "capped at 2^B - 1")


def transition_matrix(epsilon, num_values, bits=24):
    """The m x m matrix P[release = j | value = i] that runs (float64
    numpy), modulo bias included: row i keeps i with T / 2^bits and gives
    i + 1 + j (mod m) with (1 - T / 2^bits) n_j / 2^bits."""
    import numpy as np

    num_values = check_num_values("num_values", num_values)
    scale = 2.0**bits
    keep = keep_threshold(epsilon, num_values, bits) / scale
    others = num_values - 1
    low, rest = divmod(2**bits, others)
    counts = np.full(others, low, np.float64)
    counts[:rest] += 1
    row = np.concatenate([[keep], (1.0 - keep) * counts / scale])
    # Row i is `row` rotated so that position i holds the keep term and
    # i + 1 + j (mod m) holds other value j.
    return np.stack([np.roll(row, i) for i in range(num_values)])


def _rr_details(epsilon, num_values):
    keep, other_low, other_high = implemented_probabilities(
        epsilon, num_values, 24)
    return {"requested_epsilon": float(epsilon),
            "num_values": num_values,
            "keep_probability": float(keep),
            "other_probability_range": [float(other_low),
                                        float(other_high)],
            "keep_threshold_24_bits": keep_threshold(epsilon, num_values,
                                                     24),
            "epsilon_by_grid": {str(bits): implemented_epsilon(
                epsilon, num_values, bits) for bits in GRIDS}}


_INTEGER_CONDITION = (
    "keep iff k1 < T and the other value from k2 mod (m - 1), with k1, k2 "
    "uniform integers on [0, 2^24) (random words, os.urandom) or [0, 2^23) "
    "(TensorFlow's and TFLite's own uniforms); epsilon is the log of the "
    "largest ratio of these exact probabilities (the modulo bias "
    "included), rounded up")


def code_guarantee(epsilon, num_codes):
    """The guarantee of releasing a learned code by m-ary randomized
    response: eps-LDP per text (any two texts), delta = 0.

    Example:
    >>> g = code_guarantee(2.0, 4)
    >>> g.unit, round(g.value, 6)
    ('per_text', 2.0)
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    num_codes = check_num_values("num_codes", num_codes)
    value = stated_epsilon(epsilon, num_codes)
    return guarantee_lib.Guarantee(
        mechanism="code_randomized_response",
        parameter="epsilon",
        value=value,
        unit=guarantee_lib.PER_TEXT,
        composition=(
            f"one code of {num_codes} values per text; any two texts are "
            f"neighbours, so this is the epsilon of the whole release of a "
            f"text; m releases of the same text are (m * {value:.6g})-LDP"),
        conditions=(
            "the code is argmax of the user side's logits: a deterministic "
            "function of the text alone (post-processing cannot add "
            "information)",
            _INTEGER_CONDITION,
            "fresh randomness for every release",
        ),
        details=_rr_details(epsilon, num_codes),
    )


def label_guarantee(epsilon, num_classes):
    """The guarantee of one training label released by K-ary randomized
    response (once per example, never drawn again)."""
    epsilon = validation.check_positive("epsilon", epsilon)
    num_classes = check_num_values("num_classes", num_classes)
    value = stated_epsilon(epsilon, num_classes)
    return guarantee_lib.Guarantee(
        mechanism="label_randomized_response",
        parameter="epsilon",
        value=value,
        unit=guarantee_lib.PER_LABEL,
        composition=(
            "one randomized label per training example, drawn once and "
            "recorded (a resumed run reads it back); with the example's "
            "text release, the epsilons add (sequential composition)"),
        conditions=(_INTEGER_CONDITION.replace("random words, ", ""),
                    "randomness: os.urandom"),
        details=_rr_details(epsilon, num_classes),
        randomness=randomness.OS_ENTROPY,
    )


def with_label(text_guarantee, label_guarantee_):
    """What one training example (its text's release and its randomized
    label) guarantees, by sequential composition.

    When the text's guarantee is one epsilon for the whole text (per text
    or per representation, or per coordinate with a known dimension), the
    pair is (eps_text + eps_label, delta_text)-LDP per example. Otherwise
    (metric DP per token), the text's guarantee is kept and the label's
    epsilon is added to its bound for any two examples, as the
    composition line says.
    """
    from tfdptext.privacy import limit

    eps_label = label_guarantee_.value
    if not text_guarantee.is_private:
        raise ArgumentError("A label guarantee composes with a private text "
                            "release; this one has none.")
    per_text = limit.per_text_epsilon(text_guarantee)
    details = {**text_guarantee.details, "label_epsilon": eps_label,
               "text_guarantee": text_guarantee.to_dict()}
    if per_text is not None:
        eps_text, delta = per_text
        return guarantee_lib.Guarantee(
            mechanism=f"{text_guarantee.mechanism}+label",
            parameter="epsilon",
            value=eps_text + eps_label,
            unit=guarantee_lib.PER_EXAMPLE,
            delta=delta,
            composition=(f"text release {eps_text:.6g} + label "
                         f"{eps_label:.6g} (sequential composition)"),
            conditions=text_guarantee.conditions
            + label_guarantee_.conditions,
            details=details,
            randomness=text_guarantee.randomness,
        )
    return guarantee_lib.Guarantee(
        **{**text_guarantee.to_dict(),
           "conditions": text_guarantee.conditions
           + label_guarantee_.conditions,
           "details": details,
           "composition": (
               f"the text release as stated, and its training label at "
               f"{eps_label:.6g}-LDP: two examples (x, y), (x', y') have "
               f"the text's bound times exp({eps_label:.6g}) when y != y' "
               f"(sequential composition). " + text_guarantee.composition)})
