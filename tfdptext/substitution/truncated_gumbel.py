"""TruncatedGumbel (Carvalho, Vasiloudis, Feyisetan, FLAIRS-34, 2021):
report-noisy-min over a random number of nearest words.

For an input word x:

1. draw K from a Poisson distribution with mean mu = ln(n - 1) (n the
   number of candidate words), truncated: here to {0, ..., k_max}, with
   K = 0 read as K = 1 (mldp-text returns x for K = 0, and x is its own
   nearest word, so both give x);
2. take the K nearest candidates of x (x itself first, Euclidean distance,
   ties to the lower id);
3. add to each of their distances an independent Gumbel(0, b) draw
   conditioned on |G| <= Delta_max, and release the candidate with the
   smallest noisy distance.

b comes from epsilon by the paper's calibration (`paper_scale`, as
mldp-text computes it: a = (eps - 2 (1 + ln n) / Delta_min) / 3,
b = 2 Delta_max / min(W(2 a Delta_max), ln(a Delta_min)), W the Lambert W
function, Delta_min and Delta_max the smallest non-zero and the largest
distance between candidates), or is given (`scale`).

What can be stated for what runs. The output of x is always among its
k_max nearest words: for two words whose k_max-nearest sets differ, some
output has probability 0 for one and not the other, an infinite
log-ratio. On a real vocabulary (k_max of 32 of 30,000 words) that is
almost every pair, whatever epsilon the calibration was given: the
mechanism has no worst-case DP guarantee over the vocabulary (nor does the
paper's own sampler, whose K exceeds 30 with probability ~ 1e-7 at n =
30,000: the farthest words are as good as unreachable). Only when every
candidate is within reach (k_max >= n) is every log-ratio finite; then
`exact_probabilities` computes the output distribution (numerical
integration, float64) and `exact_epsilon` the largest log-ratio over all
pairs of inputs: the guarantee states that number, and says it is
computed, not proved. `pair_log_ratio` gives the exact log-ratio of any
one pair.

Exactness of the sampler: K is drawn from integer counts out of 2^23 (each
size from 1 to k_max at least 1 count, largest remainders) by comparing
one 23-bit integer with thresholds, exactly, as CusText's sets are
(`tfdptext.substitution.custext`); the noise is G = -b ln E, E an Exp(1)
draw conditioned on [e^(-Delta/b), e^(Delta/b)] (the same event as
|G| <= Delta), by the inverse CDF from a cell-midpoint uniform strictly
inside (0, 1): no log(0), no overflow (Delta / b <= MAX_RATIO). The float
noise is on a grid (2^23 cells in the layer, 2^52 offline): its
distribution differs from the continuous one by that rounding, which the
guarantee states as a condition, as the metric-noise mechanisms do.

One token takes 1 + k_max random words on a phone (33 for k_max = 32).
"""

import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation
from tfdptext.substitution import custext
from tfdptext.substitution import race

BITS = custext.BITS
SCALE = custext.SCALE

# Delta / b at most this: e^(Delta / b) and e^(-Delta / b) are normal
# float32 numbers (float32 overflows above e^88.7).
MAX_RATIO = 80.0

# Candidates up to which `exact_epsilon` runs (every pair of inputs, every
# size, numerical integration).
EXACT_LIMIT = 24

# Gauss-Legendre nodes per piece (at most b / 2 long) of the integrals.
_NODES = 24


def check_max_candidates(value):
    return validation.check_int("max_candidates", value, minimum=1)


def poisson_mean(num_candidates):
    """mu = ln(n - 1), the paper's mean number of candidates."""
    num_candidates = validation.check_int("num_candidates", num_candidates,
                                          minimum=2)
    return math.log(num_candidates - 1)


def size_probabilities(mu, max_candidates):
    """P(K = k) for k = 1..k_max (float64): Poisson(mu) conditioned on
    K <= k_max, K = 0 merged into K = 1."""
    mu = validation.check_positive("mu", mu)
    k_max = check_max_candidates(max_candidates)
    k = np.arange(k_max + 1, dtype=np.float64)
    log_p = -mu + k * math.log(mu) - np.array(
        [math.lgamma(i + 1.0) for i in k])
    p = np.exp(log_p - log_p.max())
    p = p / p.sum()
    sizes = p[1:].copy()
    sizes[0] += p[0]
    return sizes


def size_thresholds(mu, max_candidates):
    """(k_max - 1,) int64 cumulative counts out of 2^23 of K = 1..k_max
    (each size at least 1 count): K = 1 + #{thresholds <= floor(U 2^23)}."""
    counts = custext.integer_counts(size_probabilities(mu, max_candidates))
    return np.cumsum(counts)[:-1].astype(np.int64)


def implemented_size_probabilities(thresholds):
    """The exact P(K = k), k = 1..k_max, of `size_thresholds`."""
    edges = np.concatenate([[0], np.asarray(thresholds, np.int64), [SCALE]])
    return np.diff(edges).astype(np.float64) / SCALE


def draw_sizes(uniforms, thresholds, backend):
    """K for each uniform: 1 + the number of thresholds at or below
    floor(U 2^23) (integers, exact in float32)."""
    cell = backend.floor(backend.cast(uniforms, backend.dtype)
                         * float(SCALE))
    above = backend.cast(cell[:, None] >= backend.cast(
        backend.constant(np.asarray(thresholds, np.float64)),
        backend.dtype)[None, :], "int32")
    return 1 + backend.reduce_sum(above, axis=-1)


def check_scale(scale, bound):
    """b > 0 with Delta / b <= MAX_RATIO, else ArgumentError naming
    `scale`."""
    scale = validation.check_positive("scale", scale)
    bound = validation.check_positive("max_distance", bound)
    if bound / scale > MAX_RATIO:
        raise ArgumentError(
            f"`scale` must be at least max_distance / {MAX_RATIO:g} = "
            f"{bound / MAX_RATIO:.6g} (float-safe truncated Gumbel noise), "
            f"received {scale}.")
    return scale


def truncated_gumbel(uniforms, scale, bound, backend):
    """Gumbel(0, b) noise conditioned on |G| <= Delta from uniforms in
    [0, 1) (any shape): G = -b ln E, E = lo - ln(q + (1 - q) U) with
    lo = e^(-Delta/b), hi = e^(Delta/b), q = e^(-(hi - lo)), U a cell
    midpoint. E is Exp(1) conditioned on [lo, hi], so G is the truncated
    Gumbel; every log has an argument in (0, 1] or >= lo > 0."""
    ratio = bound / scale
    lo = math.exp(-ratio)
    hi = math.exp(ratio)
    q = math.exp(-(hi - lo))
    u = race.centred_uniforms(uniforms, backend)
    t = backend.neg_log_uniform(q + (1.0 - q) * u)
    noise = -scale * backend.log(lo + t)
    return backend.minimum(backend.maximum(noise, -bound), bound)


def select(sorted_distances, sizes, noise, backend):
    """The position (0-based, in distance order) of the smallest noisy
    distance among the first K of each row: (N, k_max) distances, (N,)
    sizes K, (N, k_max) noise."""
    k_max = int(sorted_distances.shape[-1])
    positions = backend.cast(backend.constant(np.arange(k_max)),
                             "int32")
    inside = positions[None, :] < sizes[:, None]
    noisy = backend.cast(sorted_distances, backend.dtype) + noise
    noisy = backend.where(inside, noisy, backend.zeros_like(noisy)
                          + math.inf)
    return backend.argmin(noisy)


def lambert_w(z):
    """The principal branch W(z) of w e^w = z, for z > 0 (Newton)."""
    if not z > 0:
        raise ArgumentError(f"lambert_w needs z > 0, received {z}.")
    w = math.log1p(z)
    for _ in range(100):
        e = math.exp(w)
        step = (w * e - z) / (e * (w + 1.0))
        w -= step
        if abs(step) <= 1e-15 * max(1.0, abs(w)):
            break
    return w


def paper_scale(epsilon, num_candidates, min_distance, max_distance):
    """The paper's noise scale b for epsilon (mldp-text's formula); an
    ArgumentError naming `epsilon` where the formula gives no positive
    scale (mldp-text then goes on with a negative or complex one)."""
    epsilon = validation.check_positive("epsilon", epsilon)
    n = validation.check_int("num_candidates", num_candidates, minimum=2)
    low = validation.check_positive("min_distance", min_distance)
    high = validation.check_positive("max_distance", max_distance)
    floor = 2.0 * (1.0 + math.log(n)) / low
    a = (epsilon - floor) / 3.0
    if a * low <= 1.0:
        raise ArgumentError(
            f"`epsilon` must exceed {floor + 3.0 / low:.6g} for the paper's "
            f"noise calibration on this table ({n} candidates, distances "
            f"{low:.4g} to {high:.4g}); received {epsilon}. Give the noise "
            "scale instead (mechanism option `scale`).")
    return 2.0 * high / min(lambert_w(2.0 * a * high), math.log(a * low))


def expansion_error_bound(dim, squared_norms):
    """A bound on |fl(|x|^2 + |y|^2 - 2 x.y) - |x - y|^2| for float64 rows
    of `dim` coordinates whose squared norms sum to at most
    `squared_norms`: each of the two squared norms and the product is a sum
    of `dim` terms (error at most gamma_dim times the sum of their absolute
    values, in any summation order, FMA or not; |x.y| <= (|x|^2 + |y|^2) /
    2), plus three roundings of the additions; doubled for margin.

    Example:
    >>> expansion_error_bound(16, 2.0) < 1e-13
    True
    """
    unit = np.finfo(np.float64).eps / 2.0
    gamma = dim * unit / (1.0 - dim * unit)
    return 2.0 * (2.0 * gamma + 6.0 * unit) * squared_norms


def _exact_squared(rows, first, second):
    """|rows[first] - rows[second]|^2 from the differences (no
    cancellation), for index arrays `first` and `second`."""
    differences = rows[first] - rows[second]
    return np.einsum("ij,ij->i", differences, differences)


def distance_range(rows, block=256):
    """(smallest non-zero, largest) Euclidean distance between two
    different rows (float64).

    "Non-zero" is above 1e-9 times the largest distance (at least 1e-9):
    rows that equal another up to rounding do not count. The search runs
    in blocks of `block` rows on squared distances expanded as |x|^2 +
    |y|^2 - 2 x.y (one matrix product per block, each pair once). That
    expansion cancels: a row's distance to itself comes out near 1e-15,
    not 0, and close pairs lose digits. So it only selects candidates: every pair whose expanded value
    is within `expansion_error_bound` of the running largest (or of the
    smallest surely non-zero) is measured again from its differences, and
    those exact values decide. A row is never compared with itself.
    """
    rows = np.asarray(rows, np.float64)
    if rows.ndim != 2 or len(rows) < 2:
        raise ArgumentError("The candidate rows must be a matrix of at "
                            "least two rows.")
    norms = np.sum(rows * rows, axis=1)
    max_norm = float(norms.max())
    # "Non-zero" uses the largest distance, known at the end; 2 max |x| is
    # above it, so pairs surely above this threshold are surely non-zero.
    threshold_above = (1e-9 * max(1.0, 2.0 * math.sqrt(max_norm))) ** 2
    high_floor, low_ceiling = -math.inf, math.inf
    far, near = [], []  # candidate pairs (first, second) of each end
    for start in range(0, len(rows), block):
        stop = min(start + block, len(rows))
        # Each pair once: this block's rows against the rows from `start`.
        squared = rows[start:stop] @ rows[start:].T
        squared *= -2.0
        squared += norms[start:stop, None]
        squared += norms[None, start:]
        err = expansion_error_bound(
            rows.shape[1], float(norms[start:stop].max()) + max_norm)
        own = np.arange(stop - start)
        squared[own, own] = np.nan  # a row and itself: never a pair
        high_floor = max(high_floor, float(np.nanmax(squared)) - err)
        sure = float(np.min(squared, where=squared > threshold_above + err,
                            initial=math.inf))
        low_ceiling = min(low_ceiling, sure + err)
        with np.errstate(invalid="ignore"):
            for found, mask in ((far, squared >= high_floor - err),
                                (near, squared <= low_ceiling + err)):
                first, second = np.nonzero(mask)
                found.append((first + start, second + start))
    far_first, far_second = (np.concatenate(a) for a in zip(*far))
    high = math.sqrt(float(_exact_squared(rows, far_first,
                                          far_second).max()))
    near_first, near_second = (np.concatenate(a) for a in zip(*near))
    exact = _exact_squared(rows, near_first, near_second)
    exact = exact[exact > (1e-9 * max(1.0, high)) ** 2]
    if high <= 0.0 or exact.size == 0:
        raise ArgumentError("The candidate rows must hold at least two "
                            "distinct vectors.")
    return math.sqrt(float(exact.min())), high


# ---------------------------------------------------------------------------
# The exact output distribution (float64 numerical integration).

def _survival(t, scale, bound):
    """P(G > t) for the truncated Gumbel, elementwise, with relative
    accuracy near the upper end."""
    t = np.clip(t, -bound, bound)
    top = math.exp(-math.exp(-bound / scale))
    low = math.exp(-math.exp(bound / scale))
    mass = top - low
    gap = np.exp(-t / scale) - math.exp(-bound / scale)
    return top * -np.expm1(-gap) / mass


def _density(g, scale, bound):
    top = math.exp(-math.exp(-bound / scale))
    low = math.exp(-math.exp(bound / scale))
    z = np.exp(-g / scale)
    return z * np.exp(-z) / (scale * (top - low))


def win_probabilities(distances, scale, bound):
    """P(candidate j has the smallest noisy distance) for distances d_j
    (float64, numerical integration of f(g) prod_i P(G_i > d_j + g - d_i)
    over [-Delta, Delta]: split where a factor reaches an end, and into
    pieces no longer than b / 2, each integrated by Gauss-Legendre)."""
    d = np.asarray(distances, np.float64)
    nodes, weights = np.polynomial.legendre.leggauss(_NODES)
    out = np.empty(len(d))
    for j in range(len(d)):
        cuts = np.concatenate([[-bound, bound], d - d[j] - bound,
                               d - d[j] + bound])
        cuts = np.unique(np.clip(cuts, -bound, bound))
        edges = [cuts[0]]
        for a, b in zip(cuts[:-1], cuts[1:]):
            count = max(1, int(math.ceil((b - a) / (0.5 * scale))))
            edges.extend(np.linspace(a, b, count + 1)[1:])
        edges = np.asarray(edges)
        half = 0.5 * np.diff(edges)
        half = half[half > 0]
        mid = (0.5 * (edges[:-1] + edges[1:]))[np.diff(edges) > 0]
        g = (mid[:, None] + half[:, None] * nodes[None, :]).ravel()
        value = _density(g, scale, bound)
        others = np.delete(d, j)
        if len(others):
            value = value * np.prod(_survival(
                d[j] + g[:, None] - others[None, :], scale, bound), axis=1)
        out[j] = float(np.sum(value.reshape(len(half), -1) @ weights
                              * half))
    return out


def exact_probabilities(sorted_distances, size_probs, scale, bound):
    """P(release the word at position p) for one input whose candidates,
    nearest first, have `sorted_distances` (k_max of them), K distributed
    as `size_probs` (k = 1..k_max)."""
    d = np.asarray(sorted_distances, np.float64)
    out = np.zeros(len(d))
    for k, weight in enumerate(size_probs, start=1):
        if weight > 0:
            out[:k] += weight * win_probabilities(d[:k], scale, bound)
    return out


def neighbour_lists(table, inputs, candidates, k_max):
    """For each input id, its k_max nearest candidate ids (nearest first,
    ties to the lower id) and their distances (float64)."""
    table = np.asarray(table, np.float64)
    candidates = np.asarray(candidates, np.int64)
    ids, dists = [], []
    for x in inputs:
        d = np.linalg.norm(table[candidates] - table[x], axis=1)
        order = np.argsort(d, kind="stable")[:k_max]
        ids.append(candidates[order])
        dists.append(d[order])
    return np.array(ids), np.array(dists)


def distribution_matrix(table, inputs, candidates, k_max, size_probs,
                        scale, bound):
    """(len(inputs), vocabulary_size) exact P(y | x)."""
    ids, dists = neighbour_lists(table, inputs, candidates, k_max)
    out = np.zeros((len(inputs), len(table)))
    for row, (members, d) in enumerate(zip(ids, dists)):
        out[row, members] = exact_probabilities(d, size_probs, scale, bound)
    return out


def log_ratio(p, q):
    """max_y |ln p_y - ln q_y| over outputs either can release; inf when
    one can release what the other cannot."""
    p, q = np.asarray(p), np.asarray(q)
    either = (p > 0) | (q > 0)
    if ((p[either] == 0) | (q[either] == 0)).any():
        return math.inf
    return float(np.max(np.abs(np.log(p[either]) - np.log(q[either]))))


def exact_epsilon(matrix):
    """The largest log-ratio over every pair of rows of an exact
    distribution matrix, rounded up by a relative 1e-6 (the integration's
    accuracy is not proved: the figure is computed)."""
    best = 0.0
    for a in range(len(matrix)):
        for b in range(a + 1, len(matrix)):
            best = max(best, log_ratio(matrix[a], matrix[b]))
            if math.isinf(best):
                return best
    return best * (1.0 + 1e-6) + 1e-12


def resolve(epsilon, num_candidates, max_candidates, min_distance,
            max_distance, scale, rows=None):
    """(min_distance, max_distance, scale, mu, thresholds) of one
    TruncatedGumbel setting, shared by the layer and its offline twin:
    distances not given come from the candidate `rows` (`distance_range`),
    the scale from the paper's formula when not given (`paper_scale`)."""
    from tfdptext.privacy import validation

    if min_distance is None or max_distance is None:
        low, high = distance_range(rows)
        min_distance = low if min_distance is None else min_distance
        max_distance = high if max_distance is None else max_distance
    min_distance = validation.check_positive("min_distance", min_distance)
    max_distance = validation.check_positive("max_distance", max_distance)
    if scale is None:
        scale = paper_scale(epsilon, num_candidates, min_distance,
                            max_distance)
    scale = check_scale(scale, max_distance)
    mu = poisson_mean(num_candidates)
    return (min_distance, max_distance, scale, mu,
            size_thresholds(mu, max_candidates))
