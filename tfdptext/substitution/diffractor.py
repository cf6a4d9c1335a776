"""1-Diffractor (Meisenbacher, Chevli, Matthes 2024): the list of the
vocabulary, and geometric noise on list positions, sampled exactly.

Meisenbacher, Chevli, Matthes, "1-Diffractor: Efficient and
Utility-Preserving Text Obfuscation Leveraging Word-Level Metric
Differential Privacy", ACM WPES 2024 (PyPI `dp-diffractor` 0.2.1).

The list. The candidate words are put in one line by a greedy
nearest-neighbour walk over their embeddings: start at the first candidate
(the lowest non-special id), then repeatedly go to the nearest candidate
not yet in the list. "Nearest" is exact here: squared Euclidean distances
computed directly, sum((a - b)^2) in float64, ties to the lower id
(`greedy_order`). The package does the same walk with FAISS, but looks
only at a word's 50 nearest words and, when all 50 are already listed,
jumps to an arbitrary remaining word; here the walk never jumps (the
nearest remaining word is found by an exact search), so the list is a
function of the table alone (near ties are decided by the float64 values
of the direct form, which depend on the pair only). The search is fast
and still exact: every word's `SHORTLIST` nearest words are found once,
in blocks of a matrix product (||a||^2 + ||b||^2 - 2 a.b, in float32
unless the table's scale needs float64); a step takes the best unlisted word
of the shortlist when its direct distance is below the shortlist's
boundary minus a bound on the rounding of both formulas (`_Screen`), and
otherwise searches all unlisted words (the product form to find those
within twice the margin of the best, then the direct form among them).
A special input (e.g. [UNK]) takes the position of its nearest candidate
(`nearest_candidates`, the same exact search).

The noise. A word at position i of the list of L words is released as the
word at position clip(i + Z, 0, L - 1), Z with P(Z = k) = (1 - q) / (1 +
q) q^|k|, q = e^-eps: the difference G1 - G2 of two independent geometric
draws with success probability 1 - e^-eps (the package's
`rng.geometric(p) - rng.geometric(p)` with p = 1 - exp(-eps /
sensitivity); its `sensitivity` divides eps). Clipping is post-processing,
and a shift beyond L - 1 either way releases an end of the list, so Z is
drawn capped to [-(L - 1), L - 1] (the same releases).

Sampling without floating point: P(Z >= m) = q^m / (1 + q) for m >= 1.
The counts T_m = floor(2^B q^m / (1 + q)) (`tail_counts`, computed once in
float64; whatever integers they are, they are what runs) define the
implemented law P'(Z >= m) = P'(Z <= -m) = T_m / 2^B; shifts with T_m = 0
are never drawn (M, the largest shift drawn, is the last m with T_m >= 1,
at most L - 1). A draw compares one B-bit integer with the 2 M cumulative
thresholds (`shift_thresholds`) and counts: integers only, in the layer
(int32, TFLite builtins: LESS, SUM) and offline alike. B = 32 from a
random word (one per token), B = 23 from TensorFlow's own uniforms
(floor(U 2^23), exact for its 2^-23 grid). `total_variation` is the
distance between the implemented Z and the capped exact one (computed in
float64 from the integer counts, rounded up). The guarantee's delta
depends on the pair: two words d positions apart are (eps d, delta(d))
close, delta(d) the exact hockey-stick divergence of the implemented laws
(`pair_deltas`), which grows with d because the sampler never shifts by
more than M: from d = 2 M + 1 on the two words' outputs are disjoint
(`tfdptext.privacy.substitution.diffractor_guarantee` states delta(1) and
where delta(d) crosses 1e-9, 1e-6, 1e-3). No log, no exp, nothing that
can overflow in the layer.
"""

import functools
import math

import numpy as np

from tfdptext import vocabulary
from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

# The bits of the integer one draw reads: a whole random word (the phone
# model, SecureUserSide, the offline privatizer) or floor(U 2^23) of a
# float uniform (TensorFlow's and TFLite's own, multiples of 2^-23).
WORD_BITS = 32
UNIFORM_BITS = 23
BITS = (WORD_BITS, UNIFORM_BITS)

# Nearest words found in advance per word, and rows per matrix product.
SHORTLIST = 256
_BLOCK = 256


def check_bits(bits):
    if bits not in BITS:
        raise ArgumentError(f"`bits` must be one of {BITS}, received "
                            f"{bits!r}.")
    return bits


# ---------------------------------------------------------------------------
# The list.


def squared_distances(rows, index, others):
    """Squared Euclidean distances from rows[index] to rows[others],
    computed directly, sum((a - b)^2) in float64: the distance the walk
    ranks by (each value depends on its pair only)."""
    difference = rows[others] - rows[index]
    return np.sum(difference * difference, axis=-1)


class _Screen:
    """The product form ||a||^2 + ||b||^2 - 2 a.b of the rows, in float32
    (float64 when the table's largest |value| is outside [2^-30, 2^30],
    where float32 squares could overflow or lose all their bits), and the
    bound on how far it and the direct form can be from the exact squared
    distance."""

    def __init__(self, rows):
        top = float(np.abs(rows).max()) if rows.size else 0.0
        single = 2.0**-30 <= top <= 2.0**30
        self.dtype = np.float32 if single else np.float64
        self.rows = rows.astype(self.dtype)
        self.norms = np.sum(self.rows * self.rows, axis=1)
        self.max_norm = float(np.sum(rows * rows, axis=1).max())
        unit, tiny = ((2.0**-24, 2.0**-149) if single
                      else (2.0**-53, 2.0**-1074))
        n = rows.shape[1] + 4
        self._relative = 1.01 * 8.0 * n * unit / (1.0 - n * unit)
        self._absolute = 32.0 * n * tiny

    def margin(self, query_norms):
        """A bound on |product form - exact| + |direct form - exact| for
        squared distances from vectors of squared norm `query_norms`: a
        dot product of length n errs by at most gamma_n |a| |b| (gamma_n =
        n u / (1 - n u), any summation order, FMA or not; Higham, Accuracy
        and Stability, 3.1), the norms by gamma_n |a|^2, the two additions
        by u each on at most 2 (|a|^2 + |b|^2), rounding float64 rows to
        float32 by 3 u |a| |b|; the direct form (float64) by (gamma_n + 4
        u) 2 (|a|^2 + |b|^2). All below 8 gamma_(n + 4) (|a|^2 + |b|^2)
        with u of the product form's type, plus underflow (an absolute
        term of the smallest subnormal per operation)."""
        return (self._relative * (np.asarray(query_norms, np.float64)
                                  + self.max_norm) + self._absolute)

    def values(self, queries, pool=None):
        """(N, len(pool)) product forms from the rows `queries` of the
        screened table, in its type."""
        rows = self.rows if pool is None else self.rows[pool]
        norms = self.norms if pool is None else self.norms[pool]
        product = self.rows[queries] @ rows.T
        return self.norms[queries][:, None] + norms[None, :] - 2.0 * product


def shortlists(rows, size=SHORTLIST, block=_BLOCK, screen=None):
    """(near, boundary): each row's `size` nearest rows by the product
    form (in no particular order) and the largest product-form value among
    them, at most that of every row not in the shortlist. Blocks of
    `block` rows at a time."""
    rows = np.asarray(rows, np.float64)
    screen = screen or _Screen(rows)
    n = len(rows)
    size = min(size, n)
    near = np.empty((n, size), np.int64)
    boundary = np.empty(n, np.float64)
    for start in range(0, n, block):
        part = screen.values(np.arange(start, min(n, start + block)))
        if size < n:
            index = np.argpartition(part, size - 1, axis=1)[:, :size]
        else:
            index = np.tile(np.arange(n), (len(part), 1))
        near[start:start + len(part)] = index
        boundary[start:start + len(part)] = np.take_along_axis(
            part, index, axis=1).max(axis=1).astype(np.float64)
    return near, boundary


class _Unvisited:
    """The rows not yet visited, for the exact search of a step whose
    shortlist is used up: kept as a compact copy of the screened rows,
    rebuilt when half of it has been visited."""

    def __init__(self, screen):
        self.screen = screen
        self.ids = np.arange(len(screen.rows))
        self.rows = screen.rows
        self.norms = screen.norms

    def nearest(self, rows, current, visited):
        """The unvisited row nearest to rows[current] (direct form, ties
        to the lower index): the product form keeps the rows within twice
        the margin of its smallest value (no other can be nearest), the
        direct form decides among them."""
        live = ~visited[self.ids]
        if 2 * int(live.sum()) < len(self.ids):
            self.ids = self.ids[live]
            self.rows = self.screen.rows[self.ids]
            self.norms = self.screen.norms[self.ids]
            live = np.ones(len(self.ids), bool)
        query = self.screen.rows[current]
        values = (self.norms + self.screen.norms[current]
                  - 2.0 * (self.rows @ query)).astype(np.float64)
        values[~live] = np.inf
        margin = float(self.screen.margin(rows[current] @ rows[current]))
        close = self.ids[values <= values.min() + 2.0 * margin]
        direct = squared_distances(rows, current, close)
        return int(close[direct == direct.min()].min())


def greedy_order(rows, size=SHORTLIST, block=_BLOCK):
    """The greedy nearest-neighbour walk over `rows` ((L, n), float64):
    start at row 0, then always the nearest row not yet visited (direct
    squared distance in float64, ties to the lower index). Returns the
    (L,) visiting order, a permutation of range(L)."""
    rows = np.asarray(rows, np.float64)
    if rows.ndim != 2 or not len(rows) or not np.isfinite(rows).all():
        raise ArgumentError("`embeddings` must be a finite 2-D table with "
                            "at least one candidate row.")
    count = len(rows)
    screen = _Screen(rows)
    margin = screen.margin(np.sum(rows * rows, axis=1))
    near, boundary = shortlists(rows, size, block, screen)
    complete = near.shape[1] == count  # every row shortlisted
    unvisited_rows = _Unvisited(screen)
    visited = np.zeros(count, bool)
    order = np.empty(count, np.int64)
    current = 0
    for step in range(count):
        order[step] = current
        visited[current] = True
        if step == count - 1:
            break
        unvisited = near[current][~visited[near[current]]]
        following = -1
        if unvisited.size:
            direct = squared_distances(rows, current, unvisited)
            best = direct.min()
            # Every row outside the shortlist is more than boundary -
            # margin away by the direct form: farther than `best`.
            if complete or best < boundary[current] - margin[current]:
                following = int(unvisited[direct == best].min())
        if following < 0:
            following = unvisited_rows.nearest(rows, current, visited)
        current = following
    return order


def nearest_candidates(table, queries, candidate_ids):
    """The nearest candidate id of each query id (direct squared distance
    between rows of `table` in float64, ties to the lower id), by the
    same exact search as the walk's."""
    table = np.asarray(table, np.float64)
    candidates = np.asarray(candidate_ids, np.int64)
    queries = np.asarray(queries, np.int64)
    rows = table[np.concatenate([candidates, queries])]
    screen = _Screen(rows)
    count = len(candidates)
    out = np.empty(len(queries), np.int64)
    for start in range(0, len(queries), _BLOCK):
        index = count + np.arange(start, min(len(queries), start + _BLOCK))
        values = screen.values(index, np.arange(count)).astype(np.float64)
        margin = screen.margin(np.sum(rows[index] ** 2, axis=1))
        for j, query in enumerate(index):
            close = np.flatnonzero(values[j] <= values[j].min()
                                   + 2.0 * margin[j])
            direct = squared_distances(rows, query, close)
            out[start + j] = candidates[close[direct == direct.min()].min()]
    return out


def list_table(embeddings, special_token_ids):
    """The (V, 2) int32 table a layer and its offline twin hold: column 0
    the list position of every id (a special id: its nearest candidate's),
    column 1 the id at each list position (rows 0 .. L - 1; -1 below).

    Args:
        embeddings: (V, n) finite table (float32 or float64).
        special_token_ids: ids never output (not in the list).
    """
    table = np.asarray(embeddings, np.float64)
    if table.ndim != 2 or not np.isfinite(table).all():
        raise ArgumentError("`embeddings` must be a finite 2-D table.")
    special = vocabulary.token_sets(len(table), special_token_ids,
                                    ()).is_special
    candidates = np.flatnonzero(~special)
    if len(candidates) < 2:
        raise ArgumentError(
            "`special_token_ids` leave fewer than 2 candidate tokens.")
    order = candidates[greedy_order(table[candidates])]
    result = np.full((len(table), 2), -1, np.int64)
    result[order, 0] = np.arange(len(order))
    result[:len(order), 1] = order
    specials = np.flatnonzero(special)
    if specials.size:
        nearest = nearest_candidates(table, specials, candidates)
        result[specials, 0] = result[nearest, 0]
    return result.astype(np.int32)


def list_length(table):
    """L: the number of ids in the list of a `list_table`."""
    return int((np.asarray(table)[:, 1] >= 0).sum())


# ---------------------------------------------------------------------------
# The noise.


def tail_probability(epsilon, m):
    """P(Z >= m) = q^m / (1 + q) of the exact two-sided geometric, m >= 1
    (float64, an array for an array of m)."""
    m = np.asarray(m, np.float64)
    return np.exp(-epsilon * m - math.log1p(math.exp(-epsilon)))


def tail_counts(epsilon, length, bits):
    """T_1 .. T_M: floor(2^bits P(Z >= m)) for m = 1 .. L - 1, cut after
    the last non-zero count (M = 0: an empty array)."""
    epsilon = validation.check_positive("epsilon", epsilon)
    bits = check_bits(bits)
    length = validation.check_int("length", length, minimum=2)
    # Counts vanish beyond m = bits ln 2 / eps; no need to look further.
    top = min(length - 1, int(bits * math.log(2.0) / epsilon) + 2)
    counts = np.floor(tail_probability(epsilon, np.arange(1, top + 1))
                      * 2.0**bits).astype(np.int64)
    live = np.flatnonzero(counts >= 1)
    return counts[:live[-1] + 1] if live.size else counts[:0]


def shift_thresholds(counts, bits):
    """The 2 M centred cumulative thresholds of z = -M + 1 .. M, M =
    len(counts): T_z = 2^bits - T_(1 - z) for z <= 0, T_z for z >= 1,
    minus 2^(bits - 1) (int64; in int32's range for bits = 32)."""
    bits = check_bits(bits)
    counts = np.asarray(counts, np.int64)
    scale = 2**bits
    low = scale - counts[::-1]      # z = -M + 1 .. 0
    return np.concatenate([low, counts]) - scale // 2


def draw_shifts(integers, thresholds, backend):
    """Z for each centred integer s (uniform on [-2^(B-1), 2^(B-1)), an
    int32 array): -M + the number of thresholds above s. With M = 0 there
    is nothing to compare and Z = 0."""
    count = int(np.shape(thresholds)[0])
    if count == 0:
        return backend.cast(integers, "int32") * 0
    limits = backend.cast(backend.constant(np.asarray(thresholds, np.int64),
                                           "int32"), "int32")
    above = backend.cast(backend.cast(integers, "int32")[:, None]
                         < limits[None, :], "int32")
    return backend.reduce_sum(above, axis=-1) - count // 2


def centred_from_uniforms(uniforms, backend):
    """The 23-bit centred integer floor(U 2^23) - 2^22 of a float uniform
    in [0, 1) (exact for multiples of 2^-23)."""
    scale = float(2**UNIFORM_BITS)
    cell = backend.floor(backend.cast(uniforms, backend.dtype) * scale)
    cell = backend.minimum(backend.maximum(cell, 0.0), scale - 1.0)
    return backend.cast(cell, "int32") - 2**(UNIFORM_BITS - 1)


def release_positions(positions, shifts, length, backend):
    """clip(i + Z, 0, L - 1)."""
    moved = backend.cast(positions, "int32") + backend.cast(shifts, "int32")
    return backend.minimum(backend.maximum(moved, 0), length - 1)


def implemented_shift_probabilities(counts, bits):
    """P'(Z = z) for z = -M .. M of the integer sampler (float64; exact
    ratios of integers below 2^53)."""
    counts = np.asarray(counts, np.float64)
    scale = 2.0**bits
    if not counts.size:
        return np.ones(1)
    right = np.append(counts[:-1] - counts[1:], counts[-1]) / scale
    centre = 1.0 - 2.0 * counts[0] / scale
    return np.concatenate([right[::-1], [centre], right])


def exact_shift_probabilities(epsilon, length, shifts):
    """P(Z_cap = z) of the exact Z capped at +-(L - 1), for the integers
    `shifts` (|z| <= L - 1)."""
    z = np.abs(np.asarray(shifts, np.int64))
    q = math.exp(-epsilon)
    pmf = -math.expm1(-epsilon) / (1.0 + q) * np.exp(-epsilon * z)
    return np.where(z == length - 1, tail_probability(epsilon, z), pmf)


def total_variation(epsilon, length, bits):
    """The total variation between the implemented shift (`tail_counts`)
    and the exact one capped at +-(L - 1), computed in float64 and
    rounded up: the sampler's only departure from the mechanism."""
    counts = tail_counts(epsilon, length, bits)
    m = len(counts)
    implemented = implemented_shift_probabilities(counts, bits)
    exact = exact_shift_probabilities(epsilon, length, np.arange(-m, m + 1))
    total = float(np.abs(implemented - exact).sum())
    if m < length - 1:  # shifts beyond M: exact mass, never drawn
        total += 2.0 * float(tail_probability(epsilon, m + 1))
    # Each of the 2 M + 3 terms has a float64 error of a few ulps of 1.
    return min(1.0, 0.5 * total + (2 * m + 3) * 2.0**-49)


def max_shift(epsilon, length, bits):
    """M: the largest |Z| the sampler draws."""
    return len(tail_counts(epsilon, length, bits))


# Lists up to this length get delta(d) from the clipped output laws of
# every pair of positions (exact); longer ones from the unclipped laws.
EXACT_PAIRS_LENGTH = 512


def _clipped_laws(pmf, length):
    """(L, L): P'(output position y | word at position i), the shift
    clipped to the list."""
    m = len(pmf) // 2
    laws = np.zeros((length, length))
    shifts = np.arange(-m, m + 1)
    for i in range(length):
        np.add.at(laws[i], np.clip(i + shifts, 0, length - 1), pmf)
    return laws


def _hockey_stick(p, q, log_ratio):
    """Row-wise sum max(0, p - e^L q) (q = 0 where e^L overflows)."""
    if log_ratio > 700.0:
        return np.where(q > 0, 0.0, p).sum(axis=-1)
    return np.maximum(p - math.exp(log_ratio) * q, 0.0).sum(axis=-1)


def pair_deltas(epsilon, length, bits, distances):
    """delta(d) for each distance d >= 1 in `distances`: the smallest
    delta with P'(S | x) <= e^(eps d) P'(S | x') + delta for every set S
    of outputs and every two words d positions apart, under the law that
    runs (the integer counts).

    Lists of up to EXACT_PAIRS_LENGTH words: the largest hockey-stick
    divergence between the clipped output laws over every such pair
    (exact). Longer lists: the divergence between the unclipped laws,

        sum_u max(0, P'(Z = u) - e^(eps d) P'(Z = u - d)),

    which bounds every pair (clipping is post-processing) and equals the
    pairs away from the ends of the list. Either way delta(d) is at least
    the mass the farther word cannot reach, so it grows with d, and it is
    1 once d > 2 M (M the largest shift drawn; the outputs are disjoint).
    float64 from the integer counts, rounded up by a few ulps per term."""
    counts = tail_counts(epsilon, length, bits)
    m = len(counts)
    pmf = implemented_shift_probabilities(counts, bits)  # z = -m .. m
    laws = _clipped_laws(pmf, length) if length <= EXACT_PAIRS_LENGTH \
        else None
    out = []
    for d in np.asarray(distances, np.int64).tolist():
        if d < 1 or d > length - 1:
            raise ArgumentError(f"`distances` must be in [1, {length - 1}], "
                                f"received {d}.")
        log_ratio = epsilon * d
        if laws is not None:
            value = max(_hockey_stick(laws[:-d], laws[d:], log_ratio).max(),
                        _hockey_stick(laws[d:], laws[:-d], log_ratio).max())
            terms = length
        elif d > 2 * m:
            out.append(1.0)
            continue
        else:
            # P'(Z = u - d) for u = -m .. m (0 below -m).
            shifted = np.zeros_like(pmf)
            shifted[d:] = pmf[:len(pmf) - d]
            value = float(_hockey_stick(pmf, shifted, log_ratio))
            terms = len(pmf)
        out.append(min(1.0, float(value) + terms * 2.0**-52))
    return out


@functools.lru_cache(maxsize=64)
def delta_statement(epsilon, length, bits, levels=(1e-9, 1e-6, 1e-3)):
    """What a guarantee states about `pair_deltas`: delta at distance 1,
    the largest distance whose delta is at most each of `levels`, and the
    distance from which the outputs are disjoint (delta = 1; None when the
    list is shorter)."""
    m = max_shift(epsilon, length, bits)
    top = min(length - 1, 2 * m)
    deltas = pair_deltas(epsilon, length, bits, np.arange(1, top + 1)) \
        if top >= 1 else [1.0]
    largest = {}
    for level in levels:
        below = [d for d, value in enumerate(deltas, start=1)
                 if value <= level]
        largest[f"{level:g}"] = max(below) if below else 0
    return {"delta_at_distance_1": deltas[0],
            "largest_distance_with_delta_at_most": largest,
            "disjoint_from_distance": (2 * m + 1 if 2 * m + 1 <= length - 1
                                       else None)}
