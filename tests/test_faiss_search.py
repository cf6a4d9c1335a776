"""FAISS searches at every call size (tfdptext.offline.faiss_search): the
BLAS path from two queries per call, and nearest rows that stay exact where
that path's float32 arithmetic does not."""

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from tfdptext.offline import dchi  # noqa: E402
from tfdptext.offline import faiss_search  # noqa: E402


def _far_table(rows=6000, dim=8, seed=7):
    """Standard normal rows, the first 2,000 moved 1,000 along every axis:
    float32 ||x||^2 + ||y||^2 - 2 x.y cannot resolve their distances."""
    table = np.random.default_rng(seed).standard_normal((rows, dim))
    table[:2000] += 1000.0
    return table.astype(np.float32)


def _index(table):
    index = faiss.IndexFlatL2(table.shape[1])
    index.add(table)
    return faiss_search.prepare(index)


def _brute_force(table, queries, k):
    """Exact float64 squared distances and rows, ties to the lower row."""
    d = ((table.astype(np.float64)[None] - queries[:, None]) ** 2).sum(-1)
    rows = np.argsort(d, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(d, rows, axis=1), rows


def test_small_calls_take_the_blas_path():
    """Two queries already take the BLAS path (its float32 rounding shows
    on the far rows: a query equal to a row gets another row), one query
    the sequential one; the threshold is restored after the call."""
    table = _far_table()
    index = _index(table)
    before = faiss.cvar.distance_compute_blas_threshold
    queries = table[:400]
    _, rows = faiss_search.search(index, queries, 1)
    assert faiss.cvar.distance_compute_blas_threshold == before
    wrong = int((rows[:, 0] != np.arange(400)).sum())
    assert wrong > 0  # measured 29 of 600 on a 30,522-row table
    alone = [faiss_search.search(index, table[i:i + 1], 1)[1][0, 0]
             for i in range(0, 400, 20)]
    assert alone == list(range(0, 400, 20))


def test_blas_threshold_is_restored_on_an_error():
    before = faiss.cvar.distance_compute_blas_threshold
    with pytest.raises(RuntimeError):
        with faiss_search.blas_threshold(16):
            assert faiss.cvar.distance_compute_blas_threshold == 16
            raise RuntimeError("boom")
    assert faiss.cvar.distance_compute_blas_threshold == before


@pytest.mark.parametrize("calls", [1, 2, 10, 64, 700])
@pytest.mark.parametrize("k", [1, 2])
def test_exact_nearest_is_the_float64_brute_force(calls, k):
    """At every call size, far rows and ordinary rows alike: the same rows
    (ties to the lower row) and distances as float64 brute force."""
    table = _far_table()
    index = _index(table)
    rows_view = faiss_search.flat_rows(index)
    assert np.array_equal(rows_view, table)
    rng = np.random.default_rng(calls * 10 + k)
    picks = rng.integers(0, len(table), calls)
    queries = table[picks].astype(np.float64) + rng.normal(
        0.0, 1e-3, (calls, table.shape[1]))
    queries[::3] = table[picks[::3]]  # exactly on a row
    d, rows = faiss_search.exact_nearest(
        index, rows_view, queries, k, faiss_search.max_squared_norm(table))
    ref_d, ref_rows = _brute_force(table, queries, k)
    np.testing.assert_array_equal(rows, ref_rows)
    np.testing.assert_allclose(d, ref_d, rtol=1e-12, atol=1e-9)


def test_exact_nearest_breaks_ties_to_the_lower_row():
    table = np.zeros((40, 4), np.float32)
    table[:, 0] = np.repeat(np.arange(10), 4)  # four copies of each row
    index = _index(table)
    d, rows = faiss_search.exact_nearest(
        index, faiss_search.flat_rows(index), table[[5, 21, 39]], 3,
        faiss_search.max_squared_norm(table))
    np.testing.assert_array_equal(rows, [[4, 5, 6], [20, 21, 22],
                                         [36, 37, 38]])
    np.testing.assert_array_equal(d, 0.0)


def test_rounding_margin_covers_the_blas_paths_error():
    """The BLAS path's squared distances lie within the margin of the exact
    ones (the margin is a bound, not a typical size)."""
    table = _far_table()
    index = _index(table)
    rng = np.random.default_rng(3)
    queries = table[rng.integers(0, len(table), 200)].astype(np.float64) \
        + rng.normal(0.0, 0.5, (200, table.shape[1]))
    far, rows = faiss_search.search(
        index, queries.astype(np.float32), 16)
    exact = ((table[rows].astype(np.float64) - queries[:, None]) ** 2).sum(-1)
    margin = faiss_search.rounding_margin(
        table.shape[1], (queries ** 2).sum(1),
        faiss_search.max_squared_norm(table))
    assert (np.abs(far - exact) <= margin[:, None]).all()


def test_dchi_privatizer_is_exact_on_far_rows():
    """At a huge eta the d_chi corpus privatizer returns every input word,
    also where its rows have large norms (before: the BLAS path's rounding
    returned other words for some)."""
    table = _far_table(rows=3000)
    privatizer = dchi.DChiCorpusPrivatizer(table, eta=1e12)
    ids = np.arange(5, 3000, 7)
    np.testing.assert_array_equal(privatizer(ids), ids)
