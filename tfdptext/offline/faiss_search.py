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
candidates are searched: both paths rank every candidate exactly, the BLAS
path by ||x||^2 + ||y||^2 - 2 x.y, as the Keras layers do, and may break a
tie within float rounding differently. The other indexes we build (HNSW,
product quantization with exact re-ranking, binary flat and HNSW) search
each query on its own or in small blocks and have no such threshold;
`benchmarks/small_calls.py` measures every index at 1, 10, 64 and
thousands of queries per call against bare FAISS.
"""

import contextlib

# The fewest queries per call that take the BLAS path (see the module
# docstring); measured: see docs/benchmarks.md, "Every call size".
BLAS_MIN_QUERIES = 2


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
