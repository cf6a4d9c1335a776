"""FAISS searches that are fast at every call size.

A corpus job privatizes one sentence (about 10 ids) or one batch of lines
(64) per call as often as a whole corpus, so the nearest-neighbour search
must not depend on large calls to be fast.

FAISS's exact float search (`IndexFlatL2`) takes one of two paths:
it computes distances with one BLAS matrix product per block of queries
only when queries x dimension >= `faiss.cvar.distance_compute_blas_threshold`
(128,000 in faiss 1.15: 427 queries of 300-d), and below that streams the
whole table once PER QUERY. A call of 10 or 64 queries then reads the table
10 or 64 times instead of once (measured on GloVe's 33,849 x 300: 164
queries/s at 426 queries per call, 2,522 at 427). `search` sets the
threshold to `BLAS_MIN_QUERIES` x dimension for the duration of the call,
so that every call of 2 queries or more takes the BLAS path (one query
alone streams the table once on either path, and the sequential one is
faster there), and `prepare` caches the table's squared norms in the index
(`IndexFlatL2.sync_l2norms`), which the BLAS path would otherwise
recompute, one more pass over the table, in every call.

The threshold is a process-wide FAISS setting; it is set and restored
around each call. It selects how distances are computed, not which
candidates are searched, but the BLAS path's float32 ||x||^2 + ||y||^2 -
2 x.y loses the small distances of vectors with large norms (measured: a
table whose rows sit 1,000 from the origin in 8-d gave the wrong nearest
row for 29 of 600 queries that equal a row). `exact_nearest` therefore
keeps the BLAS path's answer where the gaps between its distances exceed
what float32 rounding can do, re-ranks a short list in float64 where they
do not, and searches in float64 over the whole table where rounding
could still have left a nearer row off that list: the nearest rows
whatever the norms, at the BLAS path's speed on real data. Calls of at
most `SCAN_MAX_QUERIES` queries go first to an int8 scan of the table
(`tfdptext.offline.int8_scan`), certified by its own error bound, which
reads a quarter of the bytes once per call. The other indexes we build (HNSW,
product quantization with exact re-ranking, binary flat and HNSW) search
each query on its own or in small blocks and have no such threshold;
`benchmarks/small_calls.py` measures every index at 1, 10, 64 and
thousands of queries per call against bare FAISS.
"""

import contextlib

import numpy as np

# The fewest queries per call that take the BLAS path (see the module
# docstring); measured: see docs/benchmarks.md, "Every call size".
BLAS_MIN_QUERIES = 2
# Extra rows on the BLAS path's short list, beyond the k asked for.
SHORT_LIST_EXTRA = 8
# The most queries per call that `exact_nearest` gives to an int8 scan
# (beyond, FAISS's BLAS path is faster per query; see docs/benchmarks.md,
# "Small calls").
SCAN_MAX_QUERIES = 64
# Queries per block of the float64 re-ranking (bounds its memory).
_RERANK_BLOCK = 4096


@contextlib.contextmanager
def blas_threshold(value):
    """Sets `faiss.cvar.distance_compute_blas_threshold` to `value` inside
    the block and restores the previous value after, also on an error."""
    import faiss

    previous = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = int(value)
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_threshold = previous


def prepare(index):
    """Readies a built float index for searches of any size: caches the
    squared norms of an `IndexFlatL2` (the BLAS path's ||y||^2). Other
    indexes are returned as they are."""
    import faiss

    if isinstance(index, faiss.IndexFlatL2):
        index.sync_l2norms()
    return index


def search(index, queries, k):
    """`index.search(queries, k)` with the BLAS path for every call of at
    least `BLAS_MIN_QUERIES` queries. Returns (distances, rows)."""
    with blas_threshold(BLAS_MIN_QUERIES * index.d):
        return index.search(queries, k)


def rounding_margin(dimension, query_norms, table_norm):
    """A bound on |float32 BLAS squared distance - exact squared distance|
    for queries of squared norms `query_norms` against rows of squared norm
    at most `table_norm`, both rounded to float32 first.

    Each float32 dot product of length d errs by at most
    gamma_d |x| |y| with gamma_d = d u / (1 - d u), u = 2^-24, so
    ||x||^2 + ||y||^2 - 2 x.y errs by at most (gamma_d + 3u) 2 (|x|^2 +
    |y|^2); rounding the inputs to float32 moves the exact squared distance
    by at most 2^-22 (|x|^2 + |y|^2). The margin is that sum, doubled.
    """
    u = 2.0 ** -24
    gamma = dimension * u / (1.0 - dimension * u)
    return 2.0 * ((gamma + 3.0 * u) * 2.0 + 2.0 ** -22) * (
        np.asarray(query_norms, np.float64) + float(table_norm))


def exact_nearest(index, table, queries, k, max_norm, distances=True,
                  scan=None):
    """The k nearest rows of `table` to each query in exact arithmetic,
    nearest first (ties to the lower row): (squared distances (n, k) in
    float64, or None with `distances=False`; rows (n, k)).

    `index` is an `IndexFlatL2` holding `table` (float32, in order);
    `max_norm` the table's `max_squared_norm`; `scan` None or an
    `int8_scan.Int8Scan` of `table`, which answers calls of at most
    `SCAN_MAX_QUERIES` queries (the queries it hands back, and larger
    calls, take the path below). The BLAS path gives k + 1
    rows per query; where every gap between them exceeds twice
    `rounding_margin`, float32 rounding cannot have changed their order or
    hidden a nearer row, and they are the answer (almost every query of
    real data). The others get a short list of k + SHORT_LIST_EXTRA rows
    re-ranked in float64, and a query whose k-th exact distance is not
    below every row left off that list by more than the margin is searched
    over the whole table in float64.
    """
    queries = np.asarray(queries, np.float64)
    k = min(int(k), len(table))
    if scan is not None and len(queries) <= SCAN_MAX_QUERIES:
        out_r, handled = _scanned(scan, queries, k)
        rest = np.flatnonzero(~handled)
        if rest.size:
            out_r[rest] = _searched(index, table, queries[rest], k, max_norm)
    else:
        out_r = _searched(index, table, queries, k, max_norm)
    if not distances:
        return None, out_r
    return _squared(queries, table, out_r), out_r


def _scanned(scan, queries, k):
    """`scan.nearest`, or nothing handled where its kernel failed its
    bound (it switches itself off; the caller's search is then exact)."""
    from tfdptext.offline import int8_scan

    try:
        return scan.nearest(queries, k)
    except int8_scan.KernelBoundError:
        return np.zeros((len(queries), k), np.int64), \
            np.zeros(len(queries), bool)


def _searched(index, table, queries, k, max_norm):
    """Rows of `exact_nearest` by the BLAS path and its certification."""
    count = len(table)
    out_r = np.empty((len(queries), k), np.int64)
    for start in range(0, len(queries), _RERANK_BLOCK):
        q = queries[start:start + _RERANK_BLOCK]
        q32 = np.ascontiguousarray(q, np.float32)
        far, rows = search(index, q32, min(k + 1, count))
        out_r[start:start + len(q)] = rows[:, :k]
        if k == count:
            unsure = np.arange(len(q))
        else:
            margin = rounding_margin(table.shape[1], (q * q).sum(1), max_norm)
            gaps = np.diff(far.astype(np.float64), axis=1)
            unsure = np.flatnonzero((gaps <= 2.0 * margin[:, None]).any(1))
        if unsure.size:
            out_r[start + unsure] = _reranked(
                index, table, q[unsure], q32[unsure], k, max_norm)
    return out_r


def _reranked(index, table, q, q32, k, max_norm):
    """Rows of `exact_nearest` for queries its first list left unsure."""
    count = len(table)
    short = min(k + SHORT_LIST_EXTRA, count)
    far, rows = search(index, q32, short)
    d = _squared(q, table, rows)
    order = np.lexsort((rows, d), axis=1)[:, :k]
    best_r = np.take_along_axis(rows, order, axis=1)
    if short < count:
        best_d = np.take_along_axis(d, order, axis=1)
        margin = rounding_margin(table.shape[1], (q * q).sum(1), max_norm)
        for i in np.flatnonzero(
                best_d[:, -1] >= far[:, -1].astype(np.float64) - margin):
            best_r[i] = _exhaustive(q[i], table, k)[1]
    return best_r


def flat_rows(index):
    """The float32 rows an `IndexFlatL2` holds, in its order, as a numpy
    view of FAISS's own storage (no copy; valid while the index lives and
    nothing is added to it)."""
    import faiss

    return faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d) \
        .reshape(index.ntotal, index.d)


def max_squared_norm(table):
    """The largest float64 squared row norm of `table` (`exact_nearest`'s
    `max_norm`; compute it once per table)."""
    return float(np.einsum("ij,ij->i", table, table, dtype=np.float64).max())


def _squared(q, table, rows):
    """(n, m) float64 squared distances from each query to its rows."""
    diff = table[rows].astype(np.float64) - q[:, None, :]
    return np.einsum("ijk,ijk->ij", diff, diff)


def _exhaustive(q, table, k):
    """The k nearest rows to one query over the whole table, in float64."""
    d = np.empty(len(table))
    for start in range(0, len(table), _RERANK_BLOCK * 16):
        diff = table[start:start + _RERANK_BLOCK * 16].astype(np.float64) - q
        d[start:start + len(diff)] = np.einsum("ij,ij->i", diff, diff)
    rows = np.lexsort((np.arange(len(d)), d))[:k]
    return d[rows], rows
