"""What the float exponential race costs in privacy: its delta, computed.

`tfdptext.substitution.race` samples an exponential mechanism as
argmin_i E_i exp(m - s_i) with E_i = -log U_i. With continuous uniforms
and exact arithmetic that is the mechanism exactly. What runs differs in
two ways, and this module bounds the total variation (TV) distance between
what runs and the exact mechanism, for every input:

1. Random part, per key. Each U_i is the midpoint of one of 2^B cells, and
   the key is computed in floating point. Couple the implemented race
   with the exact one by drawing a continuous U_i and using the midpoint
   of its cell, and replace one key at a time (a hybrid argument). Keys
   other than i fix a threshold t that key i must beat; the output changes
   only if the exact and the implemented key i lie on opposite sides of t.
   Both lie, in log space, in the cell's interval of log E widened by the
   key's relative float error eta (log space: |log(1 + err)| <= eta). The
   cells meeting [t - eta, t + eta] have probability at most
   P(log E in [t - eta, t + eta]) + 2 * 2^-B, and log E (E ~ Exp(1)) has
   density at most 1/e. So each key adds at most

       rho = 2 * 2^-B + 2 * eta / e                (`key_flip_probability`)

   and a race over k keys at most k * rho.

2. Deterministic part. exp(m - s_i) (and, in the two-stage race, each
   block's log-sum-exp) is computed with a relative error theta (beta for a
   block weight) that does not depend on the randomness: the race then
   samples exactly from weights within a factor e^(+-theta) of the true
   ones, whose distribution is within a factor e^(+-2 theta) of the exact
   one: TV <= e^(2 theta) - 1 (two stages: e^(2 (2 theta + beta)) - 1).

A mechanism whose exact version has P(S | x) <= e^L P(S | x') then runs
with P(S | x) <= e^L P(S | x') + delta, delta = TV (1 + e^L)
(`hockey_stick_delta`): TV once for x, and e^L times for x'. For metric
DP, L = value * d(x, x') grows with the pair's distance, and so does
delta; guarantees state delta at L = 1 and give the formula.

The float budgets are stated, not assumed: `tests/test_exponential.py`
measures the errors of TensorFlow's and TFLite's kernels over the whole
2^-23 grid (E: at most 4 units of 2^-24; TFLite's EXP: 65 units) and
checks them against these budgets, and computes the exact distribution of
the discrete race on a coarse grid to check the TV bound. The float32
values (B = 23, eta = 2^-21, theta = 2^-16) are those of the Keras layers
and TFLite; float64 (B = 52, 2^-50) those of `tfdptext.offline`.

Pure Python.
"""

import dataclasses
import math

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation


@dataclasses.dataclass(frozen=True)
class Precision:
    """The numeric setting a race runs in.

    Args:
        name: "float32" or "float64".
        uniform_bits: B, the uniforms are midpoints of 2^B cells.
        key_error: eta, bound on the relative error of a computed key
            E_i exp(m - s_i) beyond its exact discrete value (E's own
            error plus the product's rounding).
        weight_error: theta, bound on the relative error of exp(m - s_i).
        log_error: absolute error of LOG on a block sum in [1, size].
        unit_roundoff: u of the float type (sums and subtractions).
    """

    name: str
    uniform_bits: int
    key_error: float
    weight_error: float
    log_error: float
    unit_roundoff: float


FLOAT32 = Precision("float32", uniform_bits=23, key_error=2.0**-21,
                    weight_error=2.0**-16, log_error=2.0**-21,
                    unit_roundoff=2.0**-24)
FLOAT64 = Precision("float64", uniform_bits=52, key_error=2.0**-50,
                    weight_error=2.0**-50, log_error=2.0**-50,
                    unit_roundoff=2.0**-53)
PRECISIONS = {p.name: p for p in (FLOAT32, FLOAT64)}


def key_flip_probability(precision=FLOAT32):
    """rho: the most one key of a race adds to its total variation
    (module docstring, part 1).

    Example:
    >>> f"{key_flip_probability(FLOAT32):.3g}"
    '5.89e-07'
    """
    return (2.0 * 2.0**-precision.uniform_bits
            + 2.0 * precision.key_error / math.e)


def race_total_variation(num_keys, precision=FLOAT32):
    """TV between a one-stage race over `num_keys` candidates and the exact
    exponential mechanism: k rho + e^(2 theta) - 1."""
    num_keys = validation.check_int("num_keys", num_keys)
    return min(1.0, num_keys * key_flip_probability(precision)
               + math.expm1(2.0 * precision.weight_error))


def two_stage_sizes(num_candidates):
    """(blocks, block size) of the two-stage race over n candidates: block
    size ceil(sqrt(n)), blocks ceil(n / block size); it takes blocks +
    size uniforms per draw (350 for 30,522 candidates).

    Example:
    >>> two_stage_sizes(30522)
    (175, 175)
    """
    num_candidates = validation.check_int("num_candidates", num_candidates)
    size = math.isqrt(num_candidates - 1) + 1
    return -(-num_candidates // size), size


def block_weight_error(num_candidates, precision=FLOAT32):
    """beta: bound on the error (log space) of a block's log-sum-exp,
    m_b + log(sum_i exp(s_i - m_b)) over `size` terms: theta (the exps),
    (size + blocks + 1) u (the sum, the subtractions, and the final
    addition weighted by the block's probability), and LOG's error."""
    blocks, size = two_stage_sizes(
        validation.check_int("num_candidates", num_candidates))
    return (precision.weight_error
            + (size + blocks + 1) * precision.unit_roundoff
            + precision.log_error)


def two_stage_total_variation(num_candidates, precision=FLOAT32):
    """TV of `two_stage_race` over n candidates: (blocks + size) rho for
    the keys, e^(2 (2 theta + beta)) - 1 for the weights.

    Example:
    >>> f"{two_stage_total_variation(30522):.3g}"
    '0.000341'
    """
    blocks, size = two_stage_sizes(
        validation.check_int("num_candidates", num_candidates))
    num_keys = blocks + size
    deterministic = math.expm1(2.0 * (
        2.0 * precision.weight_error
        + block_weight_error(num_candidates, precision)))
    return min(1.0, num_keys * key_flip_probability(precision)
               + deterministic)


def hockey_stick_delta(total_variation, log_ratio=1.0):
    """delta = TV (1 + e^L): what a sampler within `total_variation` of an
    exact mechanism with P(S|x) <= e^L P(S|x') adds (module docstring).

    Example:
    >>> f"{hockey_stick_delta(1e-6, 1.0):.3g}"
    '3.72e-06'
    """
    if not (0.0 <= total_variation <= 1.0):
        raise ArgumentError(f"`total_variation` must be in [0, 1], "
                            f"received {total_variation!r}.")
    log_ratio = validation.check_nonnegative("log_ratio", log_ratio)
    if log_ratio > 700.0:
        return 1.0
    return min(1.0, total_variation * (1.0 + math.exp(log_ratio)))


def race_condition(total_variation, precision, sampler):
    """The guarantee condition that states the sampler's delta."""
    return (
        f"sampled by {sampler} in {precision.name} (uniforms on a 2^-"
        f"{precision.uniform_bits} grid, strictly inside (0, 1); log-space "
        f"utilities, no normalisation): within total variation "
        f"{total_variation:.3g} of the exact mechanism "
        "(tfdptext.privacy.exponential), so a pair of inputs whose exact "
        f"log-ratio bound is L has delta = {total_variation:.3g} * "
        "(1 + e^L); the stated delta is at L = 1. Distances and "
        "utilities are computed in the same float type; the bound is for "
        "the mechanism on those computed utilities")
