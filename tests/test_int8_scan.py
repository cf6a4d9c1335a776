"""The int8 scan for small calls (tfdptext.offline.int8_scan): the same rows
as a float64 brute force on tables built to break it, its error bound, and
hand-backs to FAISS's search only where the scan cannot certify."""

import concurrent.futures

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")
pytest.importorskip("ai_edge_litert")

from tfdptext.offline import dchi  # noqa: E402
from tfdptext.offline import faiss_search  # noqa: E402
from tfdptext.offline import int8_scan  # noqa: E402
from tfdptext.offline import vickrey  # noqa: E402


def _brute_force(table, queries, k):
    """float64 squared distances, ties to the lower row (as now)."""
    d = ((table.astype(np.float64)[None] - queries[:, None]) ** 2).sum(-1)
    return np.argsort(d, axis=1, kind="stable")[:, :k]


def _exact(table, queries, k, scan):
    index = faiss.IndexFlatL2(table.shape[1])
    index.add(table)
    faiss_search.prepare(index)
    rows_view = faiss_search.flat_rows(index)
    return faiss_search.exact_nearest(
        index, rows_view, queries, k, faiss_search.max_squared_norm(table),
        distances=False, scan=scan)[1]


def _adversarial(seed=0):
    """2,000 x 16: duplicates (rows 0-99 repeat 100-199), rows 1 ulp apart,
    norms from 1e-3 to 1e5, and a block of near-ties."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((2000, 16))
    table[100:200] = table[:100]
    table[200:300] = table[:100]
    table[200:300, 0] = np.nextafter(table[200:300, 0].astype(np.float32),
                                     np.float32(np.inf))
    table[300:500] *= 1e-3
    table[500:700] *= 1e5
    table[700:900] = table[900:1100] + 1e-6 * rng.standard_normal((200, 16))
    return table.astype(np.float32)


@pytest.fixture(scope="module")
def adversarial():
    table = _adversarial()
    return table, int8_scan.Int8Scan(table)


@pytest.mark.parametrize("k", [1, 2])
def test_same_rows_as_float64_brute_force_on_adversarial_tables(
        adversarial, k):
    table, scan = adversarial
    assert scan.available
    rng = np.random.default_rng(k)
    picks = rng.integers(0, len(table), 60)
    queries = table[picks].astype(np.float64)
    queries[20:40] += rng.normal(0.0, 1e-4, (20, 16))  # near rows
    queries[40:] += rng.normal(0.0, 3.0, (20, 16))  # noisy, far
    # Exactly between two rows: a float64 tie, to the lower row.
    queries[0] = (table[5].astype(np.float64) + table[7]) / 2
    rows, handled = scan.nearest(queries, k)
    assert handled.all()
    np.testing.assert_array_equal(rows, _brute_force(table, queries, k))


def test_exact_ties_go_to_the_lower_row():
    """Duplicates: every query equal to a copy gets the first copy; a query
    exactly between two rows gets the lower one, then the higher."""
    table = np.zeros((40, 4), np.float32)
    table[:, 0] = np.repeat(np.arange(10), 4)  # four copies of each row
    table[:, 1] = 0.5
    scan = int8_scan.Int8Scan(table)
    rows, handled = scan.nearest(table[[5, 21, 39]].astype(np.float64), 3)
    assert handled.all()
    np.testing.assert_array_equal(rows, [[4, 5, 6], [20, 21, 22],
                                         [36, 37, 38]])
    between = np.array([[2.5, 0.5, 0.0, 0.0]])
    rows, _ = scan.nearest(between, 8)
    np.testing.assert_array_equal(rows, [[8, 9, 10, 11, 12, 13, 14, 15]])


def test_the_bound_covers_the_kernel_and_is_tight():
    """|approx(q . x) - q . x| <= |q - qh| |x| + |qh| |x - xh| + the
    kernel's rounding, on every row; and the bound is within 50x of the
    largest error seen (not vacuous)."""
    rng = np.random.default_rng(3)
    table = (rng.standard_normal((3000, 64))
             * rng.lognormal(0, 1, (3000, 1))).astype(np.float32)
    scan = int8_scan.Int8Scan(table)
    q = rng.standard_normal((8, 64)) * 4.0
    codes, scale, error = int8_scan._query_codes(q)
    y = scan._run(codes, scale).astype(np.float64)
    exact = q @ table.astype(np.float64).T
    qh = scale * int8_scan._code_norms(codes)
    bound = (error[:, None] * scan.norm + qh[:, None] * scan.residual
             + int8_scan._kernel_bound(qh[:, None], scan.quantized_norm))
    err = np.abs(y - exact)
    assert (err <= bound).all()
    assert bound.max() < 50 * err.max()


@pytest.mark.parametrize("k", [1, 2, 6])
def test_the_prefilter_keeps_every_row_of_stage_one(k):
    """Every row that stage 1 keeps when computed over the whole table
    (t32 +- slope |x| in float32, as before the prefilter) is under the
    prefilter's threshold, on values of every sign and scale with
    near-ties; and the threshold drops most rows (it is not vacuous).
    `_kth_smallest` leaves its input as it was."""
    rng = np.random.default_rng(k)
    n, rows = 7, 5000
    norm32 = rng.uniform(0.5, 20.0, rows).astype(np.float32)
    for scale in (1e-20, 1e-3, 1.0, 1e4, 1e12):
        t32 = (rng.standard_normal((n, rows)) * scale).astype(np.float32)
        t32[:, 10:20] = t32[:, :10]  # exact ties
        t32[:, 20:30] = np.nextafter(t32[:, :10], np.float32(np.inf))
        slope32 = (rng.uniform(1e-4, 1e-2, n) * scale).astype(np.float32)
        offset = rng.uniform(0.0, 1e-3, n) * scale
        before = t32.copy()
        threshold = int8_scan._prefilter(t32, k, slope32, norm32.max(),
                                         offset)
        assert np.array_equal(t32, before)
        spread = np.multiply.outer(slope32, norm32)
        upper = np.sort(t32 + spread, axis=1)[:, k - 1].astype(np.float64)
        limit = np.nextafter((upper + 2.0 * offset).astype(np.float32),
                             np.float32(np.inf))
        kept = t32 - spread <= limit[:, None]
        assert kept.sum(axis=1).min() >= k
        assert (t32[kept] <= np.broadcast_to(threshold[:, None],
                                             t32.shape)[kept]).all()
        assert (t32 <= threshold[:, None]).mean() < 0.2


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_group_kth_is_the_k_th_smallest_per_group(k):
    """Per group (sorted, some empty, some with fewer than k rows, with
    ties): the k-th smallest with ties counted, +inf where fewer."""
    rng = np.random.default_rng(k)
    group = np.sort(rng.integers(0, 12, 300))
    group = group[(group != 3) & ~((group == 5) & (np.arange(300) % 7 > 0))]
    values = rng.integers(0, 6, len(group)).astype(np.float64)
    found = int8_scan._group_kth(group, values, k, 14)
    for g in range(14):
        mine = np.sort(values[group == g])
        expected = mine[k - 1] if len(mine) >= k else np.inf
        assert found[g] == expected, (g, mine)


def test_no_hand_back_on_noisy_queries():
    """d_chi-like queries on an ordinary table: every query answered by the
    scan, with a few candidates each (the whole-table search never runs)."""
    rng = np.random.default_rng(5)
    table = (rng.standard_normal((4000, 48))
             * rng.uniform(0.2, 0.5, 48)).astype(np.float32)
    scan = int8_scan.Int8Scan(table)
    queries = table[rng.integers(0, 4000, 64)] + dchi.dchi_noise(
        rng, 64, 48, 20.0)
    for k in (1, 2):
        rows, handled = scan.nearest(queries, k)
        assert handled.all()
        np.testing.assert_array_equal(rows, _brute_force(table, queries, k))
    assert scan.stats["handed_back"] == 0
    assert scan.stats["candidates"] < 10 * 2 * 64


def test_hands_back_only_what_it_cannot_certify(monkeypatch):
    """Queries too large for float32 and queries with more candidates than
    MAX_CANDIDATES are handed back, and `exact_nearest` answers them by
    FAISS's certified search; the others stay with the scan."""
    rng = np.random.default_rng(7)
    table = rng.standard_normal((3000, 8))
    table[:1000] = 1000.0 + 1e-3 * table[:1000]  # near-duplicates, far out
    table = table.astype(np.float32)
    scan = int8_scan.Int8Scan(table)
    queries = table[rng.integers(0, 3000, 30)].astype(np.float64)
    queries[:10] = table[:10] + 1e-4
    queries[10] = 1e20  # too large for the scan's float32
    monkeypatch.setattr(int8_scan, "MAX_CANDIDATES", 50)
    _, handled = scan.nearest(queries, 1)
    assert not handled[:11].any()
    far_out = np.flatnonzero(
        np.abs(table[_brute_force(table, queries, 1)[:, 0], 0] - 1000) < 1)
    assert set(np.flatnonzero(~handled)) == set(far_out) | {10}
    np.testing.assert_array_equal(_exact(table, queries, 1, scan),
                                  _brute_force(table, queries, 1))


def test_a_kernel_outside_its_bound_switches_the_scan_off(monkeypatch):
    """Fails closed: a kernel that errs by more than its bound on a
    re-ranked row raises, the scan turns itself off, and `exact_nearest`
    still returns the exact rows (by FAISS)."""
    table = _adversarial(1)[:1000]
    scan = int8_scan.Int8Scan(table)
    run = scan._run
    monkeypatch.setattr(scan, "_run", lambda c, s, copy=True: run(c, s)
                        * np.float32(1.0 + 1e-3))
    queries = table[:12].astype(np.float64)
    with pytest.raises(int8_scan.KernelBoundError):
        scan.nearest(queries, 1)
    assert not scan.available
    np.testing.assert_array_equal(_exact(table, queries, 1, scan),
                                  _brute_force(table, queries, 1))


def test_tables_out_of_float32_range_are_not_scanned():
    table = np.ones((50, 4), np.float32)
    table[3] = 1e20
    scan = int8_scan.Int8Scan(table)
    assert not scan.available
    queries = np.ones((3, 4))
    rows, handled = scan.nearest(queries, 1)
    assert not handled.any()
    np.testing.assert_array_equal(_exact(table, queries, 1, scan),
                                  _brute_force(table, queries, 1))


def test_privatizers_use_the_scan_for_small_calls_only(monkeypatch):
    """Vickrey's two nearest at a huge eta: the input word and its nearest
    other word, by the scan at 10 ids per call, by FAISS at 65; no scan
    for a table under MIN_TABLE_ENTRIES."""
    rng = np.random.default_rng(9)
    table = rng.standard_normal((2000, 16)).astype(np.float32)
    assert vickrey.VickreyCorpusPrivatizer(table, eta=1.0)._scan is None
    monkeypatch.setattr(int8_scan, "MIN_TABLE_ENTRIES", table.size)
    privatizer = vickrey.VickreyCorpusPrivatizer(table, eta=1e12, t=0.5)
    scan = privatizer._scan
    ids = rng.integers(0, 2000, 10)
    first, second, _, _ = privatizer.two_nearest(table[ids])
    ref = _brute_force(table, table[ids].astype(np.float64), 2)
    np.testing.assert_array_equal(first, ids)
    np.testing.assert_array_equal(second, ref[:, 1])
    assert scan.stats["queries"] == 10
    np.testing.assert_array_equal(privatizer(ids), ids)
    assert scan.stats["queries"] == 20
    big = rng.integers(0, 2000, faiss_search.SCAN_MAX_QUERIES + 1)
    np.testing.assert_array_equal(privatizer(big), big)
    assert scan.stats["queries"] == 20


def test_threads_sharing_a_scan_get_exact_rows(adversarial):
    """A corpus job shares one privatizer between threads: each thread has
    its own interpreter and buffers, so concurrent calls stay exact."""
    table, scan = adversarial
    rng = np.random.default_rng(11)
    batches = [table[rng.integers(0, len(table), 10)].astype(np.float64)
               + rng.normal(0.0, 0.5, (10, 16)) for _ in range(24)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda q: scan.nearest(q, 2)[0], batches))
    for q, rows in zip(batches, found):
        np.testing.assert_array_equal(rows, _brute_force(table, q, 2))
