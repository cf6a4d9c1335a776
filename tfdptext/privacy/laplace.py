"""Accounting for DPNR's Laplace perturbation of a [0, 1]^k representation.

DPNR (Lyu et al., 2020) normalises a k-dim representation to [0, 1] and adds
Lap(b) noise to every coordinate with b = Delta / epsilon and Delta = 1. The
sensitivity of ONE coordinate is 1, so that epsilon is per coordinate; the L1
sensitivity of the whole vector is k, so the released vector is
(k * epsilon)-LDP. `sensitivity="vector"` uses b = k / epsilon instead and
gives epsilon for the whole representation.
"""

from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import validation

PER_COORDINATE_MODE = "per_coordinate"
VECTOR_MODE = "vector"
SENSITIVITY_MODES = (PER_COORDINATE_MODE, VECTOR_MODE)

FLOAT_CONDITION = (
    "noise is sampled in float32; as for every floating-point Laplace "
    "sampler (Mironov, CCS 2012) the pure-DP statement is for the "
    "real-valued mechanism"
)


def laplace_scale(epsilon, sensitivity=1.0):
    """The Laplace scale b = sensitivity / epsilon.

    Example:
    >>> laplace_scale(0.5)
    2.0
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    sensitivity = validation.check_positive("sensitivity", sensitivity)
    return sensitivity / epsilon


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

    Args:
        epsilon: the layer's epsilon.
        dimension: k, the size of the representation (None if unknown).
        mode: `"per_coordinate"` or `"vector"` (see module docstring).
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    validation.check_choice("sensitivity", mode, SENSITIVITY_MODES)
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
            composition = (
                f"the whole {dimension}-dim representation is "
                f"{epsilon * dimension:g}-LDP "
                f"({dimension} coordinates x {epsilon:g})"
            )
        return guarantee_lib.Guarantee(
            mechanism="laplace",
            parameter="epsilon",
            value=epsilon,
            unit=guarantee_lib.PER_COORDINATE,
            composition=composition,
            conditions=tuple(conditions),
            details=details,
        )
    if dimension is not None:
        dimension = validation.check_int("dimension", dimension)
        details["dimension"] = dimension
        details["noise_scale"] = laplace_scale(epsilon, dimension)
    return guarantee_lib.Guarantee(
        mechanism="laplace",
        parameter="epsilon",
        value=epsilon,
        unit=guarantee_lib.PER_REPRESENTATION,
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
        raise ValueError(
            "`guarantee` must be per coordinate or per representation, "
            f"received unit {guarantee.unit!r}."
        )
    dimension = guarantee.details.get("dimension")
    if dimension is None:
        raise ValueError(
            "`guarantee` does not record the representation dimension; "
            "build the layer first."
        )
    return guarantee_lib.Guarantee(
        mechanism=guarantee.mechanism,
        parameter="epsilon",
        value=vector_epsilon(guarantee.value, dimension),
        unit=guarantee_lib.PER_REPRESENTATION,
        composition=(
            f"{dimension} coordinates x {guarantee.value:g} per coordinate"
        ),
        conditions=guarantee.conditions,
        details=dict(guarantee.details),
    )
