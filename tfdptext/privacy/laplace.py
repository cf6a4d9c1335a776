"""Accounting for DPNR's Laplace perturbation of a [0, 1]^k representation.

DPNR (Lyu et al., 2020) normalises a k-dim representation to [0, 1] and adds
Lap(b) noise to every coordinate with b = Delta / epsilon and Delta = 1. The
sensitivity of ONE coordinate is 1, so that epsilon is per coordinate; the L1
sensitivity of the whole vector is k, so the released vector is
(k * epsilon)-LDP. `sensitivity="vector"` uses b = k / epsilon instead and
gives epsilon for the whole representation.
"""

import functools
import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import randomness
from tfdptext.privacy import validation

PER_COORDINATE_MODE = "per_coordinate"
VECTOR_MODE = "vector"
SENSITIVITY_MODES = (PER_COORDINATE_MODE, VECTOR_MODE)

# The exponentials' grids: TensorFlow's and TFLite's own uniforms have 23
# bits; from random words each exponential reads two words, 56 bits
# (`tfdptext.layers.sampling.complements_from_word_pairs`). A guarantee
# whose randomness is not known takes the coarser grid.
DEFAULT_UNIFORM_BITS = 23
WORD_BITS = 56
# float32's relative resolution: a grid finer than 2^-24 of the value is
# below what float32 arithmetic itself resolves.
FLOAT32_BITS = 24
# Grids of at least this many bits are far finer than float32 (below).
_FINE_GRID = 48

FLOAT_CONDITION = (
    "noise is float32 Lap(b) = b (E1 - E2), each E = -log(V) for V on a "
    "grid of 2^-B (B = 56 from two random words per exponential, 23 from "
    "TensorFlow's and TFLite's own uniforms). B = 56: the grid is finer "
    "than float32's own resolution except where E > 32 ln 2 (probability "
    "2^-32 per exponential), which delta charges in full (the sampler is "
    "the exact Laplace mechanism elsewhere); B = 23: the grid is as coarse "
    "as float32, and delta is that of the grid model (E1 on its grid, E2 "
    "continuous), which a release resolved finer than the grid exceeds. "
    "Rounding of x + noise to float32 (Mironov, CCS 2012) is not covered: "
    "like every floating-point Laplace sampler, the (epsilon, delta) "
    "statement is for real-valued arithmetic"
)


def exponential_bits(source):
    """The grid (bits) of the Laplace sampler's exponentials with noise
    from `source` (`tfdptext.privacy.randomness`): 56 from random words,
    23 otherwise."""
    return WORD_BITS if randomness.reads_words(source) else \
        DEFAULT_UNIFORM_BITS


def coarse_probability(uniform_bits):
    """The probability that one exponential -log(V), V on a grid of
    2^-bits, lands where the grid is coarser than float32's resolution:
    its spacing there, e^E 2^-bits, exceeds 2^-24 (in units of E) when E >
    (bits - 24) ln 2, which has probability 2^-(bits - 24) (1 for a grid
    of 24 bits or fewer)."""
    bits = validation.check_int("uniform_bits", uniform_bits, minimum=2)
    return min(1.0, 2.0**-(bits - FLOAT32_BITS))


# Terms of the grid constant summed exactly; the rest is bounded.
_EXACT_TERMS = 2**16


def max_exponential(uniform_bits=DEFAULT_UNIFORM_BITS):
    """The largest Exp(1) sample ln(2^bits / j), j = 1: bits * ln 2
    (15.94 for 23 bits, 22.18 for 32)."""
    bits = validation.check_int("uniform_bits", uniform_bits, minimum=2)
    return bits * math.log(2.0)


@functools.lru_cache(maxsize=256)
def grid_constant(shift, uniform_bits=DEFAULT_UNIFORM_BITS):
    """C with delta = C 2^-bits for one coordinate shifted by `shift` b.

    The sampler's exponentials take the values E = ln(n / j), j = 1..n,
    n = 2^bits, each with probability 1 / n: near the top of the range
    (E1 = ln n, ln(n / 2), ...) the grid is coarse, and the noise b (E1 -
    E2) has a cliff at every E1 value (E2 >= 0). We model E1 on its grid
    and E2 as Exp(1): the noise (b = 1) then has density, for v >= 0,

        g(v) = (e^v / n^2) F(n e^-v) / 2,   F(t) = J (J + 1), J = min(floor(t), n),

    (the sum over the atoms j <= n e^-v of e^-(E1_j - v) / n), and
    e^v (n + 1) / (2 n) for v < 0. Two inputs shifted by s b give
    delta(s) = int (g(v - s) - e^s g(v))_+ dv; with t = n e^-v,

        delta(s) = (1 / (2 n)) int_0^n [e^-s F(t e^s) - e^s F(t)]_+ dt / t^2.

    F is constant between integers, so the integral is a sum of closed
    forms: the part t < 1 (outputs only x' can reach, above x + ln(n) b)
    and, for every m = 1..n - 1, the part t in [m, m + 1), c_m. The first
    `_EXACT_TERMS` of them are summed exactly; for m > M0 they are
    bounded: F(u) <= u (u + 1) gives c_m <= (e^s + 1)^2 (m + 1)^2 /
    (8 e^s m^3), so their sum is at most (e^s + 1)^2 (1 + 1/M0)^2 /
    (8 e^s) ln(n / M0) (about 3 times the true tail, which is a(s) ln(n /
    M0) with a(0.05) = 0.17, a(1) = 0.36). Summed exactly (all m), C
    matches a numerical integration of g to 1e-5 (tests/test_secure_noise).
    The v < 0 side never exceeds e^s (its density is e^v times a constant),
    and by symmetry the reverse direction (x vs x') gives the same delta.

    The constant grows with the shift and slowly (like ln n) with the grid:
    every E1 value makes a cliff, and the shift exposes a sliver of each.
    Most of those cliffs are far finer than the float32 resolution of the
    release (which blurs them), so this overstates what a release can
    show; it is an upper bound of the grid model (blurring only lowers a
    hockey-stick divergence).

    Example:
    >>> round(grid_constant(0.05, 23), 2), round(grid_constant(0.05, 32), 2)
    (4.3, 7.42)
    """
    shift = validation.check_nonnegative("shift", shift)
    bits = validation.check_int("uniform_bits", uniform_bits, minimum=2)
    if shift == 0.0:
        return 0.0
    n = 2**bits
    e_s = math.exp(shift)
    # t < 1: F(t) = 0; F(t e^s) = k (k + 1) for t e^s in [k, k + 1).
    total = 0.0
    k = 1
    while k < min(e_s, n):
        total += k * (k + 1) * (1.0 / k - 1.0 / min(k + 1.0, e_s))
        k += 1
    if e_s > n:
        total += n * (n + 1.0) * (1.0 / n - 1.0 / e_s)
    total *= 0.5
    exact = min(n - 1, _EXACT_TERMS)
    total += float(_slice_terms(shift, np.arange(1, exact + 1,
                                                 dtype=np.float64), n).sum())
    if n - 1 > exact:
        total += ((e_s + 1.0)**2 * (1.0 + 1.0 / exact)**2 / (8.0 * e_s)
                  * math.log((n - 1) / exact))
    return total


def _slice_terms(shift, m, n):
    """c_m of `grid_constant` for an array of m (1 <= m < n), exactly: half
    the integral over u = t e^s in [m e^s, (m + 1) e^s) of (F(u) - A) /
    u^2 where positive, A = e^(2s) m (m + 1), F constant on each [k, k +
    1) and n (n + 1) from u = n on."""
    e_s = math.exp(shift)
    a = e_s * e_s * m * (m + 1.0)
    low, top = m * e_s, (m + 1.0) * e_s
    high = np.minimum(top, float(n))
    # The smallest integer k with k (k + 1) > a.
    k_pos = np.floor((-1.0 + np.sqrt(1.0 + 4.0 * a)) / 2.0)
    k_pos = np.where(k_pos * (k_pos + 1.0) > a, k_pos, k_pos + 1.0)
    k_pos = np.where((k_pos - 1.0) * k_pos > a, k_pos - 1.0, k_pos)
    start = np.maximum(k_pos, low)
    live = start < high
    safe = np.where(live, 1.0, 0.0)
    k0 = np.floor(start)
    end0 = np.where(live, np.minimum(k0 + 1.0, high), 1.0)
    total = safe * (k0 * (k0 + 1.0) - a) * (1.0 / np.maximum(start, 1.0)
                                            - 1.0 / end0)
    k1, k_last = k0 + 1.0, np.floor(high)
    # Whole pieces k1 .. k_last - 1: sum of (k (k + 1) - a)(1/k - 1/(k+1))
    # telescopes to (k_last - k1) - a (1/k1 - 1/k_last).
    whole = live & (k_last > k1)
    total += np.where(whole, (k_last - k1) - a * (
        1.0 / k1 - 1.0 / np.maximum(k_last, 1.0)), 0.0)
    last = live & (k_last >= k1) & (high > k_last)
    total += np.where(last, (k_last * (k_last + 1.0) - a) * (
        1.0 / np.maximum(k_last, 1.0) - 1.0 / high), 0.0)
    # u >= n: F = n (n + 1).
    capped = n * (n + 1.0) - a
    from_n = np.maximum(float(n), low)
    total += np.where((top > from_n) & (capped > 0.0),
                      capped * (1.0 / from_n - 1.0 / top), 0.0)
    return 0.5 * total


def truncation_delta(shift, count=1, uniform_bits=DEFAULT_UNIFORM_BITS):
    """delta of the Laplace sampler that runs, for `count` coordinates
    each shifted by at most `shift` * b (the coordinates' deltas add).

    Fine grids (48 bits or more: random words, 56): per coordinate
    (1 + e^shift) * 2 * `coarse_probability`. Outside the event that E1 or
    E2 lands where its grid is coarser than float32 (probability tau = 2 *
    2^-(bits - 24)), the sampler's values are the exact Laplace mechanism's
    to float32 resolution; if two mechanisms agree except on an event of
    probability tau, a pure eps-DP one gives the other (eps, (1 + e^eps)
    tau) (`tfdptext.privacy.metric.truncation_probability` has the
    argument).

    Coarser grids (TensorFlow's 23 bits): per coordinate
    `grid_constant(shift, bits)` 2^-bits, the grid model's delta; the grid
    is as coarse as float32 there, so this is a statement for the model
    (E1 on its grid, E2 continuous), not for every resolution.

    Args:
        shift: |x_i - x'_i| / b, the per-coordinate privacy loss (epsilon
            per coordinate).
        count: how many coordinates differ.
        uniform_bits: the exponentials' grid (56: random words; 23:
            TensorFlow's and TFLite's own uniforms).

    Example:
    >>> f"{truncation_delta(0.05):.2g}", f"{truncation_delta(0.05, 384, 56):.2g}"
    ('5.1e-07', '3.7e-07')
    """
    shift = validation.check_nonnegative("shift", shift)
    count = validation.check_int("count", count)
    bits = validation.check_int("uniform_bits", uniform_bits, minimum=2)
    if shift >= max_exponential(bits):
        return 1.0
    if bits >= _FINE_GRID:
        per_coordinate = (1.0 + math.exp(shift)) * 2.0 * \
            coarse_probability(bits)
    else:
        per_coordinate = grid_constant(float(shift), bits) * 2.0**-bits
    return min(1.0, count * per_coordinate)


def continuous_truncation_delta(shift, count=1,
                                uniform_bits=DEFAULT_UNIFORM_BITS):
    """The delta stated before the grid was modelled (kept to compare, in
    docs/benchmarks.md): E continuous on [0, bits ln 2],
    count e^-(M - shift) / (1 - e^-M)^2."""
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


def laplace_guarantee(epsilon, dimension=None, mode=PER_COORDINATE_MODE,
                      uniform_bits=DEFAULT_UNIFORM_BITS):
    """The guarantee of min-max normalisation + Laplace noise.

    (epsilon, delta)-LDP, delta from the sampler's grid (`truncation_delta`).

    Args:
        epsilon: the layer's epsilon.
        dimension: k, the size of the representation (None if unknown;
            required with mode "vector").
        mode: `"per_coordinate"` or `"vector"` (see module docstring).
        uniform_bits: the exponentials' grid (`exponential_bits` of the
            noise's source).
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
    details = {"sensitivity_mode": mode, "uniform_bits": uniform_bits}
    if mode == PER_COORDINATE_MODE:
        details["noise_scale"] = laplace_scale(epsilon, 1.0)
        delta = truncation_delta(epsilon, 1, uniform_bits)
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
                epsilon, dimension, uniform_bits)
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
        delta=truncation_delta(epsilon / dimension, dimension, uniform_bits),
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
