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

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
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
    "noise is sampled in float32 (radius as a sum of n exponentials, "
    "direction as a normalised Gaussian from Box-Muller, whose normals are "
    "bounded by about 5.8); the bound is for the real-valued mechanism")
FLOAT64_SAMPLING = (
    "noise is sampled in float64 (radius by Marsaglia-Tsang rejection, "
    "direction as a normalised Gaussian from Box-Muller on 53-bit "
    "uniforms, whose normals are bounded by about 8.6); the bound is for "
    "the real-valued mechanism")


def dchi_guarantee(eta, dimension=None, embedding="the input vectors",
                   text_to_text=False, vectors="tokens",
                   sampling=FLOAT32_SAMPLING):
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
    """
    eta = validation.check_positive("eta", eta)
    validation.check_choice("vectors", vectors, VECTOR_KINDS)
    if text_to_text and vectors != "tokens":
        raise ArgumentError("`text_to_text` privatizes tokens: `vectors` must "
                         "be 'tokens'.")
    details = {}
    if dimension is not None:
        dimension = validation.check_int("dimension", dimension)
        details = {
            "dimension": dimension,
            "expected_noise_norm": expected_noise_norm(eta, dimension),
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
    if vectors == "sequences":
        unit = guarantee_lib.PER_SEQUENCE
        composition = (
            "one vector per text: exp(eta * ||r(x) - r(x')||) with r the "
            "pooled representation, whatever the texts' lengths; m releases "
            "of the same text add their bounds")
    else:
        unit = guarantee_lib.PER_TOKEN
        composition = (
            "a sequence of tokens, each privatized independently: "
            "exp(eta * sum_i ||phi(x_i) - phi(x'_i)||) for equal-length "
            "sequences; m releases of the same input add their bounds")
    return guarantee_lib.Guarantee(
        mechanism="dchi_text_to_text" if text_to_text else "dchi",
        parameter="eta",
        value=eta,
        unit=unit,
        metric=f"Euclidean distance between {embedding}",
        composition=composition,
        conditions=tuple(conditions),
        details=details,
    )
