"""Comparing metric-DP mechanisms with different metrics (BRR, Section 5).

P_d^avg = sum over all ordered pairs (x, x') of d(x, x') / |X|^2 (pairs
with x = x' included, as in the paper's Eq. 7) and P_d^max = max d(x, x').
eps * P_d is an estimate of the privacy loss over the vocabulary; to match
mechanism B to A, set eps_B = R * eps_A with R = P_dA / P_dB.

Hamming statistics are exact for any vocabulary size: the average from
per-bit counts in O(V n), the maximum from a nearest-neighbour search of the
complemented codes (max d(a, b) = n - min d(a, not b)). Euclidean statistics
are exact by blocked all-pairs computation, or estimated from sampled pairs
with a stated standard error (average) or as a lower bound (maximum).
"""

import dataclasses
import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

METRICS = ("euclidean", "hamming")


@dataclasses.dataclass(frozen=True)
class DistanceStatistic:
    """A pairwise-distance statistic over a vocabulary.

    `std_error` is the standard error of a sampled average (0 when exact);
    a sampled maximum is a lower bound (`is_lower_bound`).
    """

    statistic: str
    metric: str
    value: float
    exact: bool
    num_pairs: int
    std_error: float = 0.0
    is_lower_bound: bool = False


def _check_points(points, metric):
    validation.check_choice("metric", metric, METRICS)
    points = np.asarray(points)
    if points.ndim != 2 or points.shape[0] < 1 or points.shape[1] < 1:
        raise ArgumentError(
            "`points` must be a 2-D array (vocabulary x dimension), received "
            f"shape {points.shape}."
        )
    if metric == "hamming":
        if not np.isin(points, (0, 1)).all():
            raise ArgumentError("`points` must hold only 0 and 1 for Hamming.")
        return points.astype(np.uint8)
    points = points.astype(np.float64)
    if not np.isfinite(points).all():
        raise ArgumentError("`points` must be finite.")
    return points


def _pair_distances(points, metric, i, j):
    if metric == "hamming":
        return np.count_nonzero(points[i] != points[j], axis=-1).astype(float)
    return np.linalg.norm(points[i] - points[j], axis=-1)


def _euclidean_block(points, start, stop, sq_norms):
    block = points[start:stop]
    sq = sq_norms[start:stop, None] + sq_norms[None, :] - 2.0 * block @ points.T
    return np.sqrt(np.maximum(sq, 0.0))


def _sampled_distances(points, metric, num_samples, seed, minimum):
    num_samples = validation.check_int("num_samples", num_samples, minimum)
    rng = np.random.default_rng(seed)
    i = rng.integers(0, points.shape[0], num_samples)
    j = rng.integers(0, points.shape[0], num_samples)
    return _pair_distances(points, metric, i, j)


def average_distance(points, metric="euclidean", num_samples=None, seed=0,
                     block_size=1024):
    """P_d^avg, exact (default) or from `num_samples` sampled pairs."""
    points = _check_points(points, metric)
    v = points.shape[0]
    if num_samples is not None:
        d = _sampled_distances(points, metric, num_samples, seed, 2)
        return DistanceStatistic(
            "average", metric, float(d.mean()), False, len(d),
            std_error=float(d.std(ddof=1) / math.sqrt(len(d))))
    if metric == "hamming":
        ones = points.sum(axis=0, dtype=np.int64)
        total = float(np.sum(2 * ones * (v - ones)))
        return DistanceStatistic("average", metric, total / v**2, True, v * v)
    sq_norms = np.einsum("ij,ij->i", points, points)
    total = 0.0
    for start in range(0, v, block_size):
        total += _euclidean_block(points, start, start + block_size,
                                  sq_norms).sum()
    return DistanceStatistic("average", metric, total / v**2, True, v * v)


def max_distance(points, metric="euclidean", num_samples=None, seed=0,
                 block_size=1024):
    """P_d^max: exact (default) or a lower bound from sampled pairs."""
    points = _check_points(points, metric)
    v = points.shape[0]
    if num_samples is not None:
        d = _sampled_distances(points, metric, num_samples, seed, 1)
        return DistanceStatistic("max", metric, float(d.max()), False,
                                 len(d), is_lower_bound=True)
    if metric == "hamming":
        return DistanceStatistic("max", metric,
                                 float(_max_hamming(points)), True, v * v)
    sq_norms = np.einsum("ij,ij->i", points, points)
    best = 0.0
    for start in range(0, v, block_size):
        best = max(best, float(_euclidean_block(points, start,
                                                start + block_size,
                                                sq_norms).max()))
    return DistanceStatistic("max", metric, best, True, v * v)


def _max_hamming(bits):
    """max d(a, b) = n - min over a, b of d(a, complement(b)), via FAISS."""
    import faiss  # Imported here: only this exact search needs it.

    n = bits.shape[1]
    pad = (-n) % 8
    if pad:
        # Equal zero padding on both sides leaves distances unchanged, but
        # complementing must not flip the padding: pad after complementing.
        bits = np.pad(bits, ((0, 0), (0, pad)))
    codes = np.packbits(bits, axis=1)
    complement = np.packbits(
        np.pad(1 - bits[:, :n], ((0, 0), (0, pad))), axis=1)
    index = faiss.IndexBinaryFlat(codes.shape[1] * 8)
    index.add(codes)
    distances, _ = index.search(complement, 1)
    return n - int(distances.min())


def privacy_ratio(p_a, p_b):
    """R = P_dA / P_dB (floats or DistanceStatistic)."""
    a = p_a.value if isinstance(p_a, DistanceStatistic) else p_a
    b = p_b.value if isinstance(p_b, DistanceStatistic) else p_b
    a = validation.check_positive("p_a", a)
    b = validation.check_positive("p_b", b)
    return a / b


def matched_epsilon(epsilon_a, p_a, p_b):
    """eps_B = R * eps_A, so that eps_B * P_dB = eps_A * P_dA."""
    epsilon_a = validation.check_positive("epsilon_a", epsilon_a)
    return privacy_ratio(p_a, p_b) * epsilon_a
