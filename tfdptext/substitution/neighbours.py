"""Distances from vectors to a vocabulary table, and its nearest tokens.

Shared by the layers (TensorFlow, exact search by a matrix product) and
the offline privatizers (numpy; FAISS does the search there, with the
same scores). Candidates that may never be output are masked with +inf.

Squared distances are ||x||^2 + ||y||^2 - 2 x.y, clipped at 0 (the
product form rounds; ranking ties between candidates at equal distance
go to the lowest id in both backends).
"""

import math


def squared_distances(vectors, table, backend, table_norms=None):
    """(N, V) squared Euclidean distances from (N, n) vectors to the (V, n)
    table's rows."""
    if table_norms is None:
        table_norms = backend.reduce_sum(table * table, axis=-1)
    norms = backend.reduce_sum(vectors * vectors, axis=-1, keepdims=True)
    products = backend.matmul_transposed(vectors, table)
    return backend.maximum(norms + table_norms[None, :] - 2.0 * products,
                           0.0)


def distances(vectors, table, backend, table_norms=None):
    """(N, V) Euclidean distances."""
    return backend.sqrt(squared_distances(vectors, table, backend,
                                          table_norms))


def masked(scores, candidates, backend):
    """`scores` with the non-candidates (a (V,) boolean mask of those that
    may be output) set to +inf."""
    return backend.where(candidates[None, :], scores,
                         backend.zeros_like(scores) + math.inf)
