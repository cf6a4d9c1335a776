"""Accounting for DPNR's Laplace perturbation of a [0, 1]^k representation.

DPNR (Lyu et al., 2020) normalises a k-dim representation to [0, 1] and adds
Lap(b) noise to every coordinate with b = Delta / epsilon and Delta = 1. The
sensitivity of ONE coordinate is 1, so that epsilon is per coordinate; the L1
sensitivity of the whole vector is k, so the released vector is
(k * epsilon)-LDP. `sensitivity="vector"` uses b = k / epsilon instead and
gives epsilon for the whole representation.
"""

import math

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import validation

PER_COORDINATE_MODE = "per_coordinate"
VECTOR_MODE = "vector"
SENSITIVITY_MODES = (PER_COORDINATE_MODE, VECTOR_MODE)

# Uniforms have at most 23 bits (TensorFlow's and TFLite's RANDOM_UNIFORM;
# random words give 24): the delta below is computed for the worse case.
DEFAULT_UNIFORM_BITS = 23

FLOAT_CONDITION = (
    "noise is float32 Lap(b) = b (E1 - E2), E = -log(1 - U) from uniforms "
    "with at most 23 bits, so |noise| <= 23 ln(2) b = 15.94 b: outputs "
    "beyond that are impossible for some inputs and possible for others, "
    "which delta covers. Rounding of x + noise to float32 (Mironov, CCS "
    "2012) is not covered: like every floating-point Laplace sampler, the "
    "(epsilon, delta) statement is for real-valued arithmetic"
)


def max_exponential(uniform_bits=DEFAULT_UNIFORM_BITS):
    """The largest Exp(1) sample -log(1 - U) from uniforms on a 2^-bits grid.

    U <= 1 - 2^-bits, so -log(1 - U) <= bits * ln 2 (15.94 for 23 bits).
    """
    bits = validation.check_int("uniform_bits", uniform_bits, minimum=8)
    return bits * math.log(2.0)


def truncation_delta(shift, count=1, uniform_bits=DEFAULT_UNIFORM_BITS):
    """delta of Laplace noise whose float sampler is bounded.

    The sampler's noise b (E1 - E2) lies in [-M b, M b], M =
    `max_exponential(uniform_bits)`. Two inputs whose coordinates differ by
    at most `shift` * b give outputs that only one of them can reach, of
    probability below (1/2) e^-(M - shift) per coordinate for the ideal
    Laplace; near the edge of the support the difference of two truncated
    exponentials also has a density ratio above e^shift, which adds about
    as much again. So delta <= count * e^-(M - shift) / (1 - e^-M)^2,
    summed (union bound) over the `count` coordinates that differ (the
    last factor is the truncated density's normalisation). Tested against
    the hockey-stick divergence of the truncated sampler, computed
    numerically: it approaches this bound from below as shift grows.

    Args:
        shift: |x_i - x'_i| / b, the per-coordinate privacy loss (epsilon
            per coordinate).
        count: how many coordinates differ.
        uniform_bits: resolution of the uniforms.

    Example:
    >>> f"{truncation_delta(1.0):.2g}"  # eps = 1 per coordinate
    '3.2e-07'
    """
    shift = validation.check_nonnegative("shift", shift)
    count = validation.check_int("count", count)
    bound = max_exponential(uniform_bits)
    if shift >= bound:
        return 1.0
    return min(1.0, count * math.exp(shift - bound)
               / (1.0 - math.exp(-bound))**2)


# Largest noise scale whose samples (at most ~17 scales) stay finite in
# float32 (max 3.4e38) with room to spare.
MAX_SCALE = 1e30


def laplace_scale(epsilon, sensitivity=1.0):
    """The Laplace scale b = sensitivity / epsilon.

    Raises ValueError when b would overflow float32 noise (b > 1e30): such
    an epsilon releases nothing but +-inf.

    Example:
    >>> laplace_scale(0.5)
    2.0
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    sensitivity = validation.check_positive("sensitivity", sensitivity)
    scale = sensitivity / epsilon
    if not scale <= MAX_SCALE:
        raise ArgumentError(
            f"`epsilon` = {epsilon:g} is too small for float32 noise: the "
            f"Laplace scale {sensitivity:g} / epsilon must be at most "
            f"{MAX_SCALE:g} (allowed range: epsilon >= "
            f"{sensitivity / MAX_SCALE:g}).")
    return scale


def noise_scale(epsilon, dimension, mode=PER_COORDINATE_MODE):
    """The Laplace scale for a [0, 1]^dimension representation.

    `mode="per_coordinate"`: b = 1 / epsilon (the DPNR paper's choice);
    `mode="vector"`: b = dimension / epsilon.
    """
    validation.check_choice("sensitivity", mode, SENSITIVITY_MODES)
    dimension = validation.check_int("dimension", dimension)
    sensitivity = 1.0 if mode == PER_COORDINATE_MODE else float(dimension)
    return laplace_scale(epsilon, sensitivity)


def vector_epsilon(per_coordinate_epsilon, dimension):
    """Epsilon of a whole k-vector whose coordinates are each eps-LDP.

    Basic composition over k coordinates (each with sensitivity 1 in
    [0, 1]): k * eps. It is tight for Laplace noise: two vectors at opposite
    corners of [0, 1]^k have L1 distance k.
    """
    eps = validation.check_positive("per_coordinate_epsilon",
                                    per_coordinate_epsilon)
    dimension = validation.check_int("dimension", dimension)
    return eps * dimension


def per_coordinate_epsilon(vector_eps, dimension):
    """The per-coordinate epsilon that gives `vector_eps` for the vector."""
    eps = validation.check_positive("vector_epsilon", vector_eps)
    dimension = validation.check_int("dimension", dimension)
    return eps / dimension


def laplace_guarantee(epsilon, dimension=None, mode=PER_COORDINATE_MODE):
    """The guarantee of min-max normalisation + Laplace noise.

    (epsilon, delta)-LDP, delta from the float sampler's bounded support
    (`truncation_delta`).

    Args:
        epsilon: the layer's epsilon.
        dimension: k, the size of the representation (None if unknown;
            required with mode "vector").
        mode: `"per_coordinate"` or `"vector"` (see module docstring).
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    validation.check_choice("sensitivity", mode, SENSITIVITY_MODES)
    if mode == VECTOR_MODE and dimension is None:
        raise ArgumentError("`dimension` is required with sensitivity='vector' "
                         "(build the layer first).")
    conditions = [
        "every released coordinate is clipped to [0, 1] before noise "
        "(sensitivity 1 per coordinate, k for the vector)",
        FLOAT_CONDITION,
        "fresh noise for every release; releasing the same input m times "
        "costs m times the epsilon (sequential composition)",
    ]
    details = {"sensitivity_mode": mode}
    if mode == PER_COORDINATE_MODE:
        details["noise_scale"] = laplace_scale(epsilon, 1.0)
        delta = truncation_delta(epsilon)
        if dimension is None:
            composition = (
                "the whole k-dim representation is (k * epsilon)-LDP "
                "(k = representation size)"
            )
        else:
            dimension = validation.check_int("dimension", dimension)
            details["dimension"] = dimension
            details["representation_epsilon"] = vector_epsilon(
                epsilon, dimension)
            details["representation_delta"] = truncation_delta(
                epsilon, dimension)
            composition = (
                f"the whole {dimension}-dim representation is "
                f"({epsilon * dimension:g}, "
                f"{details['representation_delta']:.2g})-LDP "
                f"({dimension} coordinates x {epsilon:g})"
            )
        return guarantee_lib.Guarantee(
            mechanism="laplace",
            parameter="epsilon",
            value=epsilon,
            unit=guarantee_lib.PER_COORDINATE,
            delta=delta,
            composition=composition,
            conditions=tuple(conditions),
            details=details,
        )
    dimension = validation.check_int("dimension", dimension)
    details["dimension"] = dimension
    details["noise_scale"] = laplace_scale(epsilon, dimension)
    return guarantee_lib.Guarantee(
        mechanism="laplace",
        parameter="epsilon",
        value=epsilon,
        unit=guarantee_lib.PER_REPRESENTATION,
        delta=truncation_delta(epsilon / dimension, dimension),
        composition=(
            "each coordinate alone is also epsilon-LDP; m releases of the "
            "same input are (m * epsilon)-LDP"
        ),
        conditions=tuple(conditions),
        details=details,
    )


def to_representation_level(guarantee):
    """Converts a per-coordinate Laplace guarantee to the whole vector."""
    if guarantee.unit == guarantee_lib.PER_REPRESENTATION:
        return guarantee
    if guarantee.unit != guarantee_lib.PER_COORDINATE:
        raise ArgumentError(
            "`guarantee` must be per coordinate or per representation, "
            f"received unit {guarantee.unit!r}."
        )
    dimension = guarantee.details.get("dimension")
    if dimension is None:
        raise ArgumentError(
            "`guarantee` does not record the representation dimension; "
            "build the layer first."
        )
    return guarantee_lib.Guarantee(
        mechanism=guarantee.mechanism,
        parameter="epsilon",
        value=vector_epsilon(guarantee.value, dimension),
        unit=guarantee_lib.PER_REPRESENTATION,
        delta=min(1.0, guarantee.delta * dimension),
        randomness=guarantee.randomness,
        composition=(
            f"{dimension} coordinates x {guarantee.value:g} per coordinate"
        ),
        conditions=guarantee.conditions,
        details=dict(guarantee.details),
    )
