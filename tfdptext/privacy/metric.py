"""Accounting for d_chi (metric-DP) noise on embeddings (Feyisetan et al.).

M(x) = x + N with density p(N) proportional to exp(-eta * ||N||_2) in R^n
satisfies, for any two inputs x, x':

    Pr[M(x) = y] <= exp(eta * ||x - x'||_2) * Pr[M(x') = y].

For token embeddings phi(w), the distance between two tokens is
||phi(w) - phi(w')||; applied independently to every token of a sequence,
the bound composes additively: eta * sum_i ||phi(x_i) - phi(x'_i)|| for
sequences of equal length. Nearest-neighbour decoding back to a token
(text-to-text) is post-processing and keeps the same guarantee.
"""

import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import randomness
from tfdptext.privacy import validation


# Largest mean noise norm n / eta whose samples stay finite in float32.
MAX_NOISE_NORM = 1e30


def check_float32_eta(eta, dimension=1):
    """Returns eta if d_chi noise on `dimension`-dim vectors stays finite in
    float32 (mean norm n / eta <= 1e30), else raises ValueError."""
    eta = validation.check_positive("eta", eta)
    if dimension / eta > MAX_NOISE_NORM:
        raise ArgumentError(
            f"`eta` = {eta:g} is too small for float32 noise on "
            f"{dimension}-dim vectors: the mean noise norm n / eta must be "
            f"at most {MAX_NOISE_NORM:g} (allowed range: eta >= "
            f"{dimension / MAX_NOISE_NORM:g}).")
    return eta


def expected_noise_norm(eta, dimension):
    """E||N|| = n / eta: the radius is Gamma(shape = n, scale = 1 / eta)."""
    eta = validation.check_positive("eta", eta)
    dimension = validation.check_int("dimension", dimension)
    return dimension / eta


def sequence_distance(embeddings, token_ids_a, token_ids_b):
    """sum_i ||E[a_i] - E[b_i]||: the metric for two equal-length sequences."""
    a = np.asarray(token_ids_a)
    b = np.asarray(token_ids_b)
    if a.shape != b.shape or a.ndim != 1:
        raise ArgumentError(
            "`token_ids_a` and `token_ids_b` must be 1-D and of equal length, "
            f"received shapes {a.shape} and {b.shape}."
        )
    table = np.asarray(embeddings, dtype=np.float64)
    for name, ids in (("token_ids_a", a), ("token_ids_b", b)):
        if ids.size and (not np.issubdtype(ids.dtype, np.integer)
                         or ids.min() < 0 or ids.max() >= len(table)):
            raise ArgumentError(
                f"`{name}` must be integer ids in [0, {len(table)}) (the "
                f"table's rows), received {ids.tolist()[:10]}...")
    return float(np.linalg.norm(table[a] - table[b], axis=-1).sum())


def sequence_bound(eta, token_distances):
    """The privacy loss bound eta * sum_i d_i for per-token d_chi noise."""
    eta = validation.check_positive("eta", eta)
    distances = np.asarray(token_distances, dtype=np.float64)
    if np.any(~np.isfinite(distances)) or np.any(distances < 0):
        raise ArgumentError("`token_distances` must be finite and >= 0.")
    return eta * float(distances.sum())


VECTOR_KINDS = ("tokens", "sequences")


FLOAT32_SAMPLING = (
    "noise is sampled in float32: radius as a sum of n exponentials, "
    "direction as a normalised Gaussian from Box-Muller, each exponential "
    "(and Box-Muller radius sqrt(2 E)) from a grid of 2^B values, B = 32 "
    "with random words (normals bounded by 6.7), 23 with TensorFlow's own "
    "uniforms (5.6); delta charges the bound (`truncation_probability`); "
    "otherwise the statement is for real-valued arithmetic")
FLOAT64_SAMPLING = (
    "noise is sampled in float64 (radius by Marsaglia-Tsang rejection, "
    "direction as a normalised Gaussian from Box-Muller on 53-bit "
    "uniforms, whose normals are bounded by about 8.6); delta charges the "
    "bound; otherwise the statement is for real-valued arithmetic")
# The grid of the float64 sampler's uniforms (tfdptext.offline.dchi), of
# the exponentials read from one random word, and of TensorFlow's uniforms.
FLOAT64_BITS = 53
WORD_BITS = 32
INTERNAL_BITS = 23


def exponential_bits(source):
    """The grid (bits) of the d_chi sampler's exponentials with noise from
    `source`: 32 from random words (one word each), 23 otherwise."""
    return WORD_BITS if randomness.reads_words(source) else INTERNAL_BITS


def truncation_probability(dimension, uniform_bits):
    """tau: the probability that the d_chi sampler of one n-dim vector
    leaves the ideal mechanism, for uniforms on a grid of 2^-bits.

    The sampler is an exact transform of its uniforms (radius r = sum of n
    exponentials / eta, direction = normalised Box-Muller Gaussian), except
    that each exponential -log(V) is computed from a V that cannot go below
    2^-bits. In the model where the uniforms are continuous on the grid's
    range, V is clamped there with probability 2^-bits, and otherwise the
    implemented noise IS the ideal noise (density proportional to
    exp(-eta ||z||)). The n radius exponentials and the ceil(n / 2)
    Box-Muller radii are the only clamped draws (the angles are not), so
    by a union bound the noise differs from the ideal one with
    probability at most tau = (n + ceil(n / 2)) 2^-bits.

    The model takes the uniforms as continuous on the grid's range: the
    grid itself (V = j 2^-bits) is smoothed by the other draws of the
    vector (a sum of n exponentials for the radius, a continuous angle for
    every Box-Muller pair), unlike a single Laplace coordinate's two
    exponentials (`tfdptext.privacy.laplace`).

    If the implemented law equals the ideal one except on an event of
    probability tau (the same uniforms drive both), then for any set S
    P[M(x) in S] <= P*[M(x) in S] + tau <= e^eps P*[M(x') in S] + tau
    <= e^eps (P[M(x') in S] + tau) + tau: two inputs at distance d are
    (eta d, (1 + e^(eta d)) tau)-DP (`pair_delta`). Tested against the
    hockey-stick divergence of the implemented 2-d sampler computed
    numerically (tests/test_secure_noise.py).

    Example:
    >>> f"{truncation_probability(384, 32):.2g}"
    '1.3e-07'
    """
    dimension = validation.check_int("dimension", dimension)
    bits = validation.check_int("uniform_bits", uniform_bits, minimum=2)
    return min(1.0, (dimension + (dimension + 1) // 2) * 2.0**-bits)


def pair_delta(guarantee, distance):
    """The delta of a d_chi guarantee for two inputs at `distance`:
    (1 + e^(eta d)) tau, tau = guarantee.delta (`truncation_probability`);
    at most 1."""
    distance = validation.check_nonnegative("distance", distance)
    exponent = guarantee.value * distance
    if exponent > 700.0:
        return 1.0
    return min(1.0, (1.0 + math.exp(exponent)) * guarantee.delta)


def dchi_guarantee(eta, dimension=None, embedding="the input vectors",
                   text_to_text=False, vectors="tokens",
                   sampling=FLOAT32_SAMPLING, uniform_bits=23):
    """The guarantee of DChiNoise (optionally decoded to tokens).

    Args:
        eta: the noise parameter (density proportional to exp(-eta ||z||)).
        dimension: n, the embedding dimension (None if unknown).
        embedding: what the vectors are, for the metric's description
            (e.g. "MiniLM token embeddings E (30522 x 384)").
        text_to_text: whether the output is the nearest token.
        vectors: "tokens" (one vector per token: per-token metric DP that
            composes over a sequence) or "sequences" (one pooled vector per
            text: metric DP per sequence, in the distance between the two
            texts' pooled representations).
        sampling: how the noise is computed (FLOAT32_SAMPLING: the Keras
            layers and TFLite; FLOAT64_SAMPLING: `tfdptext.offline`).
        uniform_bits: the exponentials' grid with FLOAT32_SAMPLING (32:
            random words; 23: TensorFlow's own uniforms).

    delta is tau = `truncation_probability` per vector: two vectors at
    distance d are (eta d, (1 + e^(eta d)) tau)-DP (`pair_delta`), and a
    sequence's tokens add their deltas. Without a dimension tau cannot be
    computed, and delta is 1 (no statement) until the layer is built.
    """
    eta = validation.check_positive("eta", eta)
    validation.check_choice("vectors", vectors, VECTOR_KINDS)
    if text_to_text and vectors != "tokens":
        raise ArgumentError("`text_to_text` privatizes tokens: `vectors` must "
                         "be 'tokens'.")
    details = {}
    bits = FLOAT64_BITS if sampling == FLOAT64_SAMPLING else uniform_bits
    delta = 1.0
    if dimension is not None:
        dimension = validation.check_int("dimension", dimension)
        delta = truncation_probability(dimension, bits)
        details = {
            "dimension": dimension,
            "expected_noise_norm": expected_noise_norm(eta, dimension),
            "uniform_bits": bits,
            "truncation_probability": delta,
        }
    conditions = [
        "eta's meaning depends on the embedding's scale and dimension: "
        "compare settings by nearest-neighbour inversion rate or plausible "
        "deniability, not by raw eta across models",
        sampling,
    ]
    if text_to_text:
        conditions.append(
            "output = nearest candidate token to the noisy embedding "
            "(post-processing); special tokens ([PAD] [CLS] [SEP] [MASK] "
            "[UNK] [unused*]) are never output; [UNK] and every other input "
            "token are privatized alike; the structural tokens [CLS], [SEP] "
            "and [PAD] are released unchanged, so the token count (length) "
            "is released"
        )
    pair = ("delta is per vector: two vectors at distance d are "
            "(eta d, (1 + exp(eta d)) delta)-DP (the sampler's bounded "
            "draws, `truncation_probability`)")
    if vectors == "sequences":
        unit = guarantee_lib.PER_SEQUENCE
        composition = (
            "one vector per text: exp(eta * ||r(x) - r(x')||) with r the "
            "pooled representation, whatever the texts' lengths; m releases "
            "of the same text add their bounds; " + pair)
    else:
        unit = guarantee_lib.PER_TOKEN
        composition = (
            "a sequence of tokens, each privatized independently: "
            "exp(eta * sum_i ||phi(x_i) - phi(x'_i)||) for equal-length "
            "sequences; m releases of the same input add their bounds; "
            + pair + "; the deltas of the tokens that differ add")
    return guarantee_lib.Guarantee(
        mechanism="dchi_text_to_text" if text_to_text else "dchi",
        parameter="eta",
        value=eta,
        unit=unit,
        metric=f"Euclidean distance between {embedding}",
        delta=delta,
        composition=composition,
        conditions=tuple(conditions),
        details=details,
    )
