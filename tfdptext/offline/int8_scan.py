"""Exact nearest rows for small calls: an int8 scan, certified in float64.

At a few queries per call an exact float32 search must read the whole
table once per call (36 MB for 30,000 x 300), and FAISS's and OpenBLAS's
float32 products at 10 queries do worse (FAISS below its BLAS threshold
reads it once per query; OpenBLAS's sgemm copies it into its packed
layout every call). `Int8Scan` reads a quarter of that: the table as int8 codes
with a float32 scale per row, multiplied with int8 codes of the queries
by LiteRT's XNNPACK kernel (one FULLY_CONNECTED op of a model built here
from the codes). Its result is not the exact product; what makes the
answer exact is a bound on everything between the two, per query and row:

    q . x - approx(q . x) = (q - qh) . x + qh . (x - xh) + (qh . xh - y)

with qh, xh the quantized query and row (known to us exactly) and y the
kernel's output. By Cauchy-Schwarz the first two terms are at most
|q - qh| |x| and |qh| |x - xh|, both computed in float64. The third is
the kernel's float32 scaling of an exact integer sum: the query codes are
fed on the grid the kernel quantizes to (each query holds the codes 127
and -128 in two extra columns whose table codes are 0, so its dynamic
quantization, asymmetric per row, has scale s and zero point 0 and returns
our codes), the int8 x int8 products are summed exactly in int32 (at most
302 x 128 x 127 < 2^31), and the sum is scaled by the query's and the
row's float32 scales: a few roundings, bounded here by `KERNEL_ULPS`
units of float32 rounding of |qh| |xh|. `Int8Scan` checks that bound on
random queries when it is built (and is not used where it fails) and
again on every row it re-ranks.

With t(x) = |x|^2 / 2 - q . x (the squared distance is |q|^2 + 2 t), a
query's candidates are the rows whose lower bound on t is at most the
k-th smallest upper bound; every other row is farther than k of them in
exact arithmetic, by more than float64's rounding of the squared
distance (`_float64_slack`), so the k nearest by float64 squared distance,
ties to the lower row, are among the candidates, which are re-ranked in
float64 as `faiss_search.exact_nearest` does. No whole-table float64 pass
is needed; a query is handed back to the caller only where its values are
not finite or too large for float32, or where more than `MAX_CANDIDATES`
rows could not be told apart (tables of near-duplicates far from the
origin).
"""

import threading

import numpy as np

from tfdptext.errors import TfdptextError

# Units of float32 rounding the kernel's scaling may add, relative to
# |qh| |xh| (measured: at most 4.2 on 38 million products).
KERNEL_ULPS = 16.0
# Tables smaller than this (rows x dim) are not worth a scan: there the
# scan's fixed cost per call exceeds FAISS's whole search (on a 3,000 x 50
# table, calls of 10 ids were slower with the scan than without).
MIN_TABLE_ENTRIES = 1_000_000
# A query with more candidates than this is left to the caller's search.
MAX_CANDIDATES = 4096
# Values whose products or squares float32 cannot hold, with room.
_LARGEST = 1e15
_SMALLEST = 1e-30
_U32 = 2.0 ** -24
_U64 = 2.0 ** -53
# Random queries checked against the kernel's bound when a scan is built.
_PROBE_QUERIES = 16


class KernelBoundError(TfdptextError):
    """The int8 kernel's output left its proven error bound."""


class Int8Scan:
    """Exact k nearest rows of a float32 table for small calls.

    Args:
        table: (rows, dim) float32 table (finite), kept by reference.
        num_threads: LiteRT threads (None: 1).

    `available` is False where the table's values are too large or too
    small for the scan's float32 arithmetic, or where the kernel failed
    its check when built; `nearest` then handles no query.

    Example:
    >>> scan = Int8Scan(table)
    >>> rows, handled = scan.nearest(queries, k=1)
    """

    def __init__(self, table, num_threads=None):
        self.table = table
        self.count, self.dimension = table.shape
        self.stats = {"queries": 0, "handed_back": 0, "stage1": 0,
                      "candidates": 0}
        self.available = False
        # One interpreter and one set of buffers per thread: a corpus job
        # shares a privatizer between threads, and neither is thread-safe.
        self._local = threading.local()
        self._model = None
        amax = np.abs(table).max(axis=1).astype(np.float64) \
            if self.count else np.zeros(0)
        nonzero = amax[amax > 0]
        if not self.count or (nonzero.size and (
                nonzero.max() > _LARGEST or nonzero.min() < _SMALLEST)):
            return
        self._quantize(amax)
        try:
            self._model = _model(self.codes, self.scales)
            self._threads = 1 if num_threads is None else int(num_threads)
            self._interpreter()
        except ImportError:  # LiteRT not installed: the caller's search.
            return
        self.available = self._kernel_is_within_bound()

    def _quantize(self, amax):
        scales = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        codes = np.empty((self.count, self.dimension + 2), np.int8)
        codes[:, self.dimension:] = 0
        norm = np.empty(self.count)
        residual = np.empty(self.count)
        quantized = np.empty(self.count)
        half = np.empty(self.count)
        for start in range(0, self.count, 4096):
            rows = slice(start, start + 4096)
            x = self.table[rows].astype(np.float64)
            s = scales[rows].astype(np.float64)[:, None]
            c = np.clip(np.rint(x / s), -127, 127)
            codes[rows, :self.dimension] = c
            xh = c * s
            squared = np.einsum("ij,ij->i", x, x)
            norm[rows] = np.sqrt(squared)
            half[rows] = 0.5 * squared
            residual[rows] = np.sqrt(np.einsum("ij,ij->i", x - xh, x - xh))
            quantized[rows] = np.sqrt(np.einsum("ij,ij->i", xh, xh))
        grow = 1.0 + 1e-12  # float64 rounding of the norms, outward
        self.codes = codes
        self.scales = scales
        self.norm = norm * grow
        self.residual = residual * grow
        self.quantized_norm = quantized * grow
        self.half = half
        self.half32 = half.astype(np.float32)
        # float32 norms rounded up (stage 1 of `nearest`).
        self.norm32 = np.nextafter(self.norm.astype(np.float32),
                                   np.float32(np.inf))
        self._norm32_max = self.norm32.max()
        ratio = (self.residual[norm > 0] / norm[norm > 0]).max(initial=0.0)
        self._max = (float(self.norm.max()), ratio * (1.0 + 1e-9),
                     float(self.half32.max()))

    def _kernel_is_within_bound(self):
        rng = np.random.default_rng(0)
        q = rng.standard_normal((_PROBE_QUERIES, self.dimension))
        q *= rng.uniform(0.1, 10.0, (_PROBE_QUERIES, 1))
        codes, scale, _ = _query_codes(q)
        y = self._run(codes, scale).astype(np.float64)
        qh_norm = (scale * _code_norms(codes))[:, None]
        for start in range(0, self.count, 4096):
            rows = slice(start, start + 4096)
            # Integer sums below 2^53: exact in float64.
            exact = (codes @ self.codes[rows, :self.dimension].T.astype(
                np.float64)) * scale[:, None] * self.scales[rows]
            if not (np.abs(y[:, rows] - exact) <= _kernel_bound(
                    qh_norm, self.quantized_norm[rows])).all():
                return False
        return True

    def _interpreter(self):
        """This thread's LiteRT interpreter of the scan's model."""
        it = getattr(self._local, "interpreter", None)
        if it is None:
            from ai_edge_litert.interpreter import Interpreter

            it = Interpreter(model_content=self._model,
                             num_threads=self._threads)
            detail = it.get_input_details()[0]
            self._local.io = (detail["index"],
                              it.get_output_details()[0]["index"],
                              tuple(detail["shape"]))
            self._local.interpreter = it
        return it

    def _scratch(self, shape):
        """This thread's float32 array and bool array of `shape`, reused
        between calls."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is None or buffers[0].shape != shape:
            buffers = (np.empty(shape, np.float32), np.empty(shape, bool))
            self._local.buffers = buffers
        return buffers

    def _run(self, codes, scale, copy=True):
        """The kernel's (n, rows) float32 products qh . xh; with
        `copy=False` a view of the interpreter's output (no 1 MB copy per
        call), valid until this thread's next `_run`: drop it before."""
        fed = np.empty((len(codes), self.dimension + 2), np.float32)
        fed[:, :self.dimension] = codes * scale[:, None]
        fed[:, self.dimension] = 127.0 * scale
        fed[:, self.dimension + 1] = -128.0 * scale
        it = self._interpreter()
        inp, out, shape = self._local.io
        if shape != fed.shape:
            it.resize_tensor_input(inp, fed.shape)
            it.allocate_tensors()
            self._local.io = (inp, out, fed.shape)
        it.set_tensor(inp, fed)
        it.invoke()
        if copy:
            return it.get_tensor(out)
        return it.tensor(out)()

    def nearest(self, queries, k):
        """The k nearest rows (n, k) of float64 `queries`, nearest first,
        ties to the lower row, exactly as a float64 search of the whole
        table; and a bool (n,) mask of the queries handled (rows of the
        others are undefined: search them another way). Raises
        KernelBoundError if the kernel's output leaves its bound on a
        re-ranked row (the scan is then no longer `available`)."""
        queries = np.asarray(queries, np.float64)
        n = len(queries)
        rows = np.zeros((n, k), np.int64)
        handled = np.zeros(n, bool)
        self.stats["queries"] += n
        if not self.available or k >= self.count or not n:
            self.stats["handed_back"] += n
            return rows, handled
        amax = np.abs(queries).max(axis=1)
        fits = np.isfinite(amax) & (amax <= _LARGEST) & (
            (amax == 0) | (amax >= _SMALLEST))
        todo = np.flatnonzero(fits)
        if todo.size:
            r, ok = self._nearest(queries[todo], k)
            rows[todo] = r
            handled[todo] = ok
        self.stats["handed_back"] += int(n - handled.sum())
        return rows, handled

    def _nearest(self, q, k):
        codes, scale, error = _query_codes(q)
        qh_norm = scale * _code_norms(codes)
        q_norm = np.sqrt(np.einsum("ij,ij->i", q, q)) * (1.0 + 1e-12)
        # A view of the kernel's output, used only in this call.
        y = self._run(codes, scale, copy=False)
        # Stage 1, float32: |t - (h - y)| <= slope |x| + offset for every
        # row (|x - xh| <= ratio |x|, |x|^2 / 2 <= max |x| |x| / 2); rows
        # whose lower bound is within the k-th smallest upper bound.
        nx, ratio, h32 = self._max
        kappa = KERNEL_ULPS * _U32
        y_slope = (1.0 + kappa) * qh_norm * (1.0 + ratio)
        slope = (error + qh_norm * ratio + kappa * qh_norm * (1.0 + ratio)
                 + _U32 * ((1.0 + _U32) * nx / 2 + y_slope)
                 + _U32 * nx / 2) * (1.0 + 1e-6)
        offset = _float64_slack(self.dimension, q_norm, nx) + 1e-30
        # The float32 roundings of t32, t32 +- slope |x|.
        offset += 4.0 * _U32 * (h32 + y_slope * nx + slope * nx)
        # Into buffers kept between calls: a fresh 1 MB array costs its
        # page faults every call.
        t32, mask = self._scratch(y.shape)
        np.subtract(self.half32[None, :], y, out=t32)
        slope32 = slope.astype(np.float32)
        # The rows that could pass stage 1, from t32 alone (one pass
        # instead of four over the (n, rows) products): `_prefilter`.
        np.less_equal(t32, _prefilter(t32, k, slope32, self._norm32_max,
                                      offset)[:, None], out=mask)
        # (2-D np.nonzero is 20x slower than flatnonzero here.)
        first, second = np.divmod(np.flatnonzero(mask), self.count)
        # Stage 1 on those rows, in the same float32 operations as over
        # the whole table: t32 + slope |x| (upper), t32 - slope |x|.
        t = t32[first, second]
        spread = slope32[first] * self.norm32[second]
        upper = _group_kth(first, (t + spread).astype(np.float64), k,
                           len(q))
        limit = np.nextafter((upper + 2.0 * offset).astype(np.float32),
                             np.float32(np.inf))
        keep = t - spread <= limit[first]
        first, second = first[keep], second[keep]
        self.stats["stage1"] += len(first)
        # Stage 2, float64, one bound per row: lower bound <= the k-th
        # smallest upper bound.
        t = self.half[second] - y[first, second].astype(np.float64)
        row_bound = (error[first] * self.norm[second]
                     + qh_norm[first] * self.residual[second]
                     + _kernel_bound(qh_norm[first],
                                     self.quantized_norm[second])
                     + _float64_slack(self.dimension, q_norm[first],
                                      self.norm[second])) * (1 + 1e-9)
        upper = _group_kth(first, t + row_bound, k, len(q))
        keep = t - row_bound <= upper[first]
        ok = np.bincount(first[keep], minlength=len(q)) <= MAX_CANDIDATES
        keep &= ok[first]
        first, second = first[keep], second[keep]
        self.stats["candidates"] += len(first)
        exact = _exact_products(self, codes, scale, first, second)
        if not (np.abs(y[first, second].astype(np.float64) - exact)
                <= _kernel_bound(qh_norm[first],
                                 self.quantized_norm[second])).all():
            self.available = False
            raise KernelBoundError(
                "The int8 kernel's products left their proven error bound; "
                "the int8 scan is switched off for this table.")
        diff = self.table[second].astype(np.float64) - q[first]
        d = np.einsum("ij,ij->i", diff, diff)
        order = np.lexsort((second, d, first))
        first, second = first[order], second[order]
        starts = np.searchsorted(first, np.arange(len(q)))
        rows = np.zeros((len(q), k), np.int64)
        for j in range(k):
            rows[ok, j] = second[starts[ok] + j]
        return rows, ok


def _query_codes(q):
    """Symmetric int8 codes (n, dim) in [-127, 127], float32-exact scales
    (n,) and |q - scale * codes| (n,) (float64, rounded outward)."""
    amax = np.abs(q).max(axis=1)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32) \
        .astype(np.float64)
    codes = np.clip(np.rint(q / scale[:, None]), -127, 127)
    diff = q - codes * scale[:, None]
    error = np.sqrt(np.einsum("ij,ij->i", diff, diff)) * (1.0 + 1e-12)
    return codes, scale, error


def _code_norms(codes):
    """|codes| per row (exact integers, so one float64 rounding)."""
    return np.sqrt(np.einsum("ij,ij->i", codes, codes)) * (1.0 + 1e-12)


def _exact_products(scan, codes, scale, first, second):
    """qh . xh for the (query, row) pairs, in float64: the integer sum is
    exact, then two roundings (relative 2^-52, far inside the bound)."""
    sums = np.einsum("ij,ij->i",
                     scan.codes[second, :scan.dimension].astype(np.float64),
                     codes[first])
    return sums * scale[first] * scan.scales[second].astype(np.float64)


def _kernel_bound(qh_norm, xh_norm):
    """The kernel's error on qh . xh: KERNEL_ULPS float32 roundings of
    |qh| |xh|, and an absolute 1e-30 for float32 underflow."""
    return KERNEL_ULPS * _U32 * qh_norm * xh_norm + 1e-30


def _float64_slack(dimension, q_norm, x_norm):
    """A bound on |float64 squared distance - exact| / 2 (and on the
    float64 rounding of |x|^2 / 2): (dim + 4) roundings of 2^-53 of
    (|q| + |x|)^2, doubled."""
    return 2.0 * (dimension + 4) * _U64 * (q_norm + x_norm) ** 2


def _prefilter(t32, k, slope32, norm_max, offset):
    """Per query, a float32 threshold on t32 that every row passing
    stage 1 of `Int8Scan._nearest` is under, from t32 alone.

    With s_r = fl(slope32 * norm32_r) in [0, S], S = fl(slope32 * max
    norm32) (rounding is monotone): (a) fl(t_r + s_r) >= t_r, and the
    k-th smallest of fl(t + s) is at most U' = fl(kth(t) + S) <= (kth(t)
    + S)(1 + 2u) + 2^-149 (u = 2^-24), so a row whose upper bound is among
    the k smallest has t_r <= U'; (b) a row with fl(t_r - s_r) <= limit
    has fl(t_r - S) <= limit, so t_r - S <= limit + 2 u |limit| + 2^-149
    (one rounding, and underflow), where limit <= limit', the stage's
    limit computed from the bound on U' (every step is monotone). The
    threshold is S + limit' + that rounding, with room for float64's own
    roundings, rounded up to float32; U' <= limit' is under it."""
    smallest = _kth_smallest(t32, k).astype(np.float64)
    spread = (slope32 * np.float32(norm_max)).astype(np.float64)
    upper = smallest + spread
    upper = upper + (2.0 * _U32 + 1e-9) * (np.abs(smallest) + spread) \
        + 1e-30
    limit = np.nextafter((upper + 2.0 * offset).astype(np.float32),
                         np.float32(np.inf)).astype(np.float64)
    bound = spread + limit + (2.0 * _U32 + 1e-9) * (spread + np.abs(limit)) \
        + 1e-30
    return np.nextafter(bound.astype(np.float32), np.float32(np.inf))


def _kth_smallest(values, k):
    """The k-th smallest of each row of `values` (n, m), k <= m: k passes
    of argmin for small k (np.partition is far slower than min here);
    `values` is left as it was."""
    if k > 4:
        return np.partition(values, k - 1, axis=1)[:, k - 1]
    lines = np.arange(len(values))
    taken = []
    for _ in range(k - 1):
        columns = values.argmin(axis=1)
        taken.append((columns, values[lines, columns].copy()))
        values[lines, columns] = np.inf
    found = values.min(axis=1)
    for columns, kept in reversed(taken):
        values[lines, columns] = kept
    return found


def _group_kth(group, values, k, groups):
    """The k-th smallest of `values` within each group (`group` sorted,
    as np.flatnonzero gives them); +inf for a group with fewer. Small k:
    k minimum reductions over the groups' runs (a sort costs 100 times
    more on the few thousand rows of a call)."""
    out = np.full(groups, np.inf)
    if not len(group):
        return out
    counts = np.bincount(group, minlength=groups)
    if k > 4:
        order = np.lexsort((values, group))
        v = values[order]
        starts = np.cumsum(counts) - counts
        has = counts >= k
        out[has] = v[starts[has] + k - 1]
        return out
    present = np.flatnonzero(counts)
    starts = (np.cumsum(counts) - counts)[present]
    v = np.array(values, np.float64)
    for _ in range(k - 1):
        low = np.repeat(np.minimum.reduceat(v, starts), counts[present])
        # One occurrence of each group's minimum out (ties count k times).
        at = np.flatnonzero(v == low)
        first = np.ones(len(at), bool)
        first[1:] = group[at[1:]] != group[at[:-1]]
        v[at[first]] = np.inf
    found = np.minimum.reduceat(v, starts)
    has = counts[present] >= k
    out[present[has]] = found[has]
    return out


def _model(codes, scales):
    """A .tflite of one hybrid FULLY_CONNECTED op: float32 queries
    (n, dim + 2) times the int8 `codes` (rows, dim + 2) with a float32
    scale per row."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    rows, width = codes.shape
    model = schema.ModelT()
    model.version = 3
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = \
        schema.BuiltinOperator.FULLY_CONNECTED
    code.version = 1
    model.operatorCodes = [code]
    weights = schema.BufferT()
    weights.data = np.frombuffer(np.ascontiguousarray(codes).tobytes(),
                                 np.uint8)
    model.buffers = [schema.BufferT(), weights, schema.BufferT(),
                     schema.BufferT()]

    def tensor(name, shape, buffer, kind, signature=None):
        t = schema.TensorT()
        t.name, t.shape, t.buffer, t.type = name, list(shape), buffer, kind
        t.shapeSignature = signature
        return t

    queries = tensor("queries", [1, width], 2, schema.TensorType.FLOAT32,
                     [-1, width])
    table = tensor("codes", [rows, width], 1, schema.TensorType.INT8)
    table.quantization = schema.QuantizationParametersT()
    table.quantization.scale = [float(s) for s in scales]
    table.quantization.zeroPoint = [0] * rows
    table.quantization.quantizedDimension = 0
    products = tensor("products", [1, rows], 3, schema.TensorType.FLOAT32,
                      [-1, rows])
    op = schema.OperatorT()
    op.opcodeIndex = 0
    op.inputs, op.outputs = [0, 1, -1], [2]
    op.builtinOptionsType = schema.BuiltinOptions.FullyConnectedOptions
    op.builtinOptions = schema.FullyConnectedOptionsT()
    op.builtinOptions.asymmetricQuantizeInputs = True
    graph = schema.SubGraphT()
    graph.tensors = [queries, table, products]
    graph.inputs, graph.outputs = [0], [2]
    graph.operators = [op]
    model.subgraphs = [graph]
    builder = flatbuffers.Builder(codes.size + (1 << 20))
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
