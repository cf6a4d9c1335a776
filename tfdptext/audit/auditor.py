"""An empirical lower bound on epsilon from threshold tests on releases.

For a mechanism M and neighbouring inputs x, x', an epsilon-DP mechanism
satisfies P[M(x) in S] <= e^epsilon P[M(x') in S] for every event S. The
audit draws n releases per side, splits them into a selection half and an
evaluation half (StatDP, Ding et al. 2018; DP-Sniper, Bichsel et al. 2021):

1. On the selection half, every statistic f of the family (coordinates,
   coordinate contrasts, sums, a linear classifier score fitted there, the
   likelihood ratio of the claimed mechanism, counts of discrete outputs)
   picks its best event S = {f >= t} or {f <= t} and direction.
2. On the evaluation half, each chosen event gets
   ln(p_low / q_high) with one-sided Clopper-Pearson bounds, at the
   Bonferroni-corrected level alpha / m over the m tests evaluated.

The reported lower bound is the largest of the m bounds: with probability
>= `confidence` all m hold, so the true epsilon is at least that large. A
claim below the bound is refuted (verdict FAIL).
"""

import dataclasses
import json
import math
import numbers

import numpy as np

from tfdptext.audit import statistics

VECTOR = "vector"
CATEGORICAL = "categorical"
OUTPUT_KINDS = (VECTOR, CATEGORICAL)

PASS = "pass"
FAIL = "fail"

# Releases at or above this many coordinates get per-coordinate statistics
# only for the coordinates the setup names.
_MAX_COORDINATE_STATISTICS = 16
_NUM_THRESHOLDS = 512
_MIN_SAMPLES = 100


@dataclasses.dataclass(frozen=True)
class Statistic:
    """A scalar statistic of one release, or a recipe fitted on data.

    Args:
        name: shown in the report as the best test's description.
        fn: maps releases (n, ...) to scalars (n,). Exactly one of `fn` and
            `fit` is given.
        fit: maps the selection halves (releases_x, releases_x_prime) to
            such an `fn`; it must not look at the evaluation half.
        indicator: `fn` is 0/1, the indicator of the event `name`.
    """

    name: str
    fn: object = None
    fit: object = None
    indicator: bool = False

    def __post_init__(self):
        if (self.fn is None) == (self.fit is None):
            raise ValueError("Give exactly one of `fn` and `fit`.")

    def fitted(self, selection_x, selection_x_prime):
        if self.fn is not None:
            return self.fn
        return self.fit(selection_x, selection_x_prime)


@dataclasses.dataclass(frozen=True)
class MechanismSetup:
    """A mechanism at a worst-case pair of neighbouring inputs.

    Args:
        name: the row's name.
        claim: the epsilon the mechanism claims for this pair (for metric
            DP, the parameter times the pair's distance).
        unit: how the claim reads, e.g. "per coordinate".
        delta: the claim's delta (0 for pure DP): the bound is then
            ln((p_low - delta) / q_high).
        sample: `sample(side, n)` returns n releases (a numpy array with n
            rows) of M(x) for side 0 and of M(x') for side 1.
        output: "vector" (real or bit vectors, shape (n, k)) or
            "categorical" (discrete outputs, shape (n,) or (n, k)).
        statistics: setup-specific statistics (e.g. the likelihood ratio);
            the auditor adds its generic family.
        differing: indices of the coordinates that differ between x and x'
            (vector outputs), for the coordinate statistics.
        broken: True for deliberately broken variants, which the audit is
            expected to refute.
        description: one line on the neighbours.
    """

    name: str
    claim: float
    unit: str
    sample: object
    delta: float = 0.0
    output: str = VECTOR
    statistics: tuple = ()
    differing: tuple = ()
    broken: bool = False
    description: str = ""


@dataclasses.dataclass(frozen=True)
class TestOutcome:
    """One test evaluated on the evaluation half."""

    description: str
    count_x: int
    count_x_prime: int
    lower_bound: float


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """The audit of one mechanism at one pair of neighbours."""

    mechanism: str
    claim: float
    unit: str
    lower_bound: float
    samples_per_side: int
    evaluation_samples: int
    num_tests: int
    confidence: float
    best_test: str
    delta: float = 0.0
    broken: bool = False
    description: str = ""
    tests: tuple = ()

    @property
    def tightness(self):
        """lower bound / claim (1 = the claim is tight; > 1 = refuted)."""
        if self.claim == 0.0:
            return math.inf if self.lower_bound > 0.0 else 1.0
        return self.lower_bound / self.claim

    @property
    def verdict(self):
        """"pass" when the lower bound does not exceed the claim."""
        return PASS if self.lower_bound <= self.claim else FAIL

    @property
    def as_expected(self):
        """Correct mechanisms pass and broken ones fail."""
        return (self.verdict == FAIL) == self.broken

    def to_dict(self):
        out = dataclasses.asdict(self)
        out["tests"] = [dataclasses.asdict(t) for t in self.tests]
        out.update(tightness=self.tightness, verdict=self.verdict)
        return out


def _check_confidence(confidence):
    if isinstance(confidence, bool) or not isinstance(confidence,
                                                      numbers.Real):
        raise ValueError(f"`confidence` must be a real number in (0, 1), "
                         f"received {confidence!r}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"`confidence` must be in (0, 1), received "
                         f"{confidence}.")
    return float(confidence)


def _check_samples(samples_per_side):
    if isinstance(samples_per_side, bool) or not isinstance(
            samples_per_side, numbers.Integral):
        raise ValueError(f"`samples_per_side` must be an integer >= "
                         f"{_MIN_SAMPLES}, received {samples_per_side!r}.")
    if samples_per_side < _MIN_SAMPLES:
        raise ValueError(f"`samples_per_side` must be an integer >= "
                         f"{_MIN_SAMPLES}, received {samples_per_side}.")
    return int(samples_per_side)


# ---------------------------------------------------------------------------
# Generic statistics.


def _flat(releases):
    releases = np.asarray(releases)
    return releases.reshape(len(releases), -1).astype(np.float64)


def coordinate(index):
    """The statistic y[index].

    Example:
    >>> coordinate(0).fn(np.array([[3.0, 1.0]]))
    array([3.])
    """
    return Statistic(f"coordinate {index}",
                     fn=lambda y: _flat(y)[:, index])


def coordinate_contrast(index):
    """y[index] minus the mean of the other coordinates.

    Noise shared by all coordinates (one scalar per example) cancels in it.

    Example:
    >>> coordinate_contrast(0).fn(np.array([[3.0, 1.0, 2.0]]))
    array([1.5])
    """
    def fn(y):
        y = _flat(y)
        others = (y.sum(axis=1) - y[:, index]) / max(y.shape[1] - 1, 1)
        return y[:, index] - others
    return Statistic(f"coordinate {index} minus the mean of the others", fn)


def coordinate_sum():
    """The sum of all coordinates (e.g. the Hamming weight of bits)."""
    return Statistic("sum of coordinates", fn=lambda y: _flat(y).sum(axis=1))


def linear_classifier(ridge=1e-6):
    """A linear score w . y, w = Fisher's discriminant on the selection half.

    w = (S_x + S_x' + ridge * I)^-1 (mean_x - mean_x'), with S the sample
    covariances; scaled ridge keeps it defined when a direction has no
    variance (e.g. noise shared by all coordinates).
    """
    def fit(sel_x, sel_x_prime):
        a, b = _flat(sel_x), _flat(sel_x_prime)
        cov = np.atleast_2d(np.cov(a, rowvar=False)
                            + np.cov(b, rowvar=False))
        scale = max(float(np.trace(cov)) / len(cov), 1e-12)
        weights = np.linalg.solve(cov + ridge * scale * np.eye(len(cov)),
                                  a.mean(axis=0) - b.mean(axis=0))
        return lambda y: _flat(y) @ weights
    return Statistic("linear classifier score (Fisher, fit on the selection "
                     "half)", fit=fit)


def _category_keys(releases):
    """An int64 key per release: the value itself for scalar outputs, a
    hash of the row's bytes otherwise (the same row, the same key, within
    one process)."""
    releases = np.asarray(releases)
    if releases.ndim == 1 or releases[0].size == 1:
        return releases.reshape(len(releases)).astype(np.int64)
    rows = np.ascontiguousarray(releases.reshape(len(releases), -1))
    return np.array([hash(row.tobytes()) for row in rows], dtype=np.int64)


def count_log_ratio():
    """log((c_x(y) + 1/2) / (c_x'(y) + 1/2)) with counts per output value y
    on the selection half; thresholds on it give sets of outputs."""
    def fit(sel_x, sel_x_prime):
        keys_a, keys_b = _category_keys(sel_x), _category_keys(sel_x_prime)
        values, inverse = np.unique(np.concatenate([keys_a, keys_b]),
                                    return_inverse=True)
        counts_a = np.bincount(inverse[:len(keys_a)], minlength=len(values))
        counts_b = np.bincount(inverse[len(keys_a):], minlength=len(values))
        score = np.log((counts_a + 0.5) / (counts_b + 0.5))

        def fn(y):
            keys = _category_keys(y)
            index = np.searchsorted(values, keys)
            index = np.minimum(index, len(values) - 1)
            known = values[index] == keys
            return np.where(known, score[index], 0.0)
        return fn
    return Statistic("log ratio of output counts (fit on the selection "
                     "half)", fit=fit)


def output_equals(value):
    """The indicator of release == value (a discrete output)."""
    def fn(y):
        y = np.asarray(y)
        return (y.reshape(len(y), -1) == value).all(axis=1).astype(
            np.float64)
    return Statistic(f"output == {value}", fn, indicator=True)


def generic_statistics(setup, num_coordinates):
    """The auditor's own statistics for a setup's kind of output."""
    if setup.output == CATEGORICAL:
        return (count_log_ratio(),)
    found = [coordinate_sum(), linear_classifier()]
    if num_coordinates <= _MAX_COORDINATE_STATISTICS:
        indices = range(num_coordinates)
    else:
        indices = setup.differing
    for index in indices:
        found.append(coordinate(index))
    if num_coordinates > 1:
        for index in indices:
            found.append(coordinate_contrast(index))
    return tuple(found)


# ---------------------------------------------------------------------------
# Selecting and evaluating threshold tests.


def _wilson_lower(count, n, z):
    p = count / n
    centre = p + z * z / (2 * n)
    spread = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.maximum((centre - spread) / (1 + z * z / n), 0.0)


def _wilson_upper(count, n, z):
    p = count / n
    centre = p + z * z / (2 * n)
    spread = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.minimum((centre + spread) / (1 + z * z / n), 1.0)


def _threshold_counts(values, thresholds):
    ordered = np.sort(values)
    at_least = len(ordered) - np.searchsorted(ordered, thresholds, "left")
    at_most = np.searchsorted(ordered, thresholds, "right")
    return at_least, at_most


def select_event(values_x, values_x_prime, z=3.0):
    """The threshold event and direction that look best on selection data.

    Scores every event {f >= t} and {f <= t} (t over quantiles of the
    pooled values) in both directions by ln(lower / upper) of Wilson
    intervals: a fast stand-in for the Clopper-Pearson bound used later.

    Args:
        values_x, values_x_prime: the statistic on the selection halves.
        z: the normal quantile of the score's intervals.

    Returns:
        (threshold, at_least, swapped, score): the event is {f >= t} when
        `at_least` else {f <= t}; `swapped` means the test bounds
        P[M(x') in S] / P[M(x) in S].

    Example:
    >>> t, at_least, swapped, _ = select_event(np.zeros(50), np.ones(50))
    >>> t in (0.0, 1.0)  # {f <= 0} or {f >= 1}: both separate the sides
    True
    """
    values_x = np.asarray(values_x, dtype=np.float64)
    values_x_prime = np.asarray(values_x_prime, dtype=np.float64)
    pooled = np.concatenate([values_x, values_x_prime])
    pooled = pooled[np.isfinite(pooled)]
    if len(pooled) == 0:
        return 0.0, True, False, -math.inf
    thresholds = np.unique(np.quantile(
        pooled, np.linspace(0.0, 1.0, _NUM_THRESHOLDS), method="lower"))
    thresholds = np.unique(np.concatenate(
        [thresholds, np.unique(pooled)[:_NUM_THRESHOLDS]]))
    ge_a, le_a = _threshold_counts(values_x, thresholds)
    ge_b, le_b = _threshold_counts(values_x_prime, thresholds)
    n_a, n_b = len(values_x), len(values_x_prime)
    best = (0.0, True, False, -math.inf)
    for at_least, (count_a, count_b) in ((True, (ge_a, ge_b)),
                                         (False, (le_a, le_b))):
        for swapped in (False, True):
            top, n_top, bottom, n_bottom = (
                (count_b, n_b, count_a, n_a) if swapped
                else (count_a, n_a, count_b, n_b))
            with np.errstate(divide="ignore"):
                score = (np.log(_wilson_lower(top, n_top, z))
                         - np.log(_wilson_upper(bottom, n_bottom, z)))
            i = int(np.argmax(score))
            if score[i] > best[3]:
                best = (float(thresholds[i]), at_least, swapped,
                        float(score[i]))
    return best


def _event_counts(values, threshold, at_least):
    values = np.asarray(values)
    inside = values >= threshold if at_least else values <= threshold
    return int(np.count_nonzero(inside))


def audit(setup, samples_per_side, confidence=0.95):
    """Draws releases and bounds the mechanism's epsilon from below.

    Args:
        setup: a `MechanismSetup`.
        samples_per_side: n releases per neighbour (half select, half
            evaluate); an integer >= 100.
        confidence: the probability that the bound holds, in (0, 1).

    Returns:
        An `AuditResult`.

    Example:
    >>> from tfdptext.audit import mechanisms
    >>> result = audit(mechanisms.laplace_per_coordinate(), 20000)
    >>> result.verdict
    'pass'
    """
    samples_per_side = _check_samples(samples_per_side)
    confidence = _check_confidence(confidence)
    if setup.output not in OUTPUT_KINDS:
        raise ValueError(f"`setup.output` must be one of {OUTPUT_KINDS}, "
                         f"received {setup.output!r}.")
    releases = [np.asarray(setup.sample(side, samples_per_side))
                for side in (0, 1)]
    for side, r in enumerate(releases):
        if len(r) != samples_per_side:
            raise ValueError(
                f"`setup.sample` returned {len(r)} releases for side {side},"
                f" expected {samples_per_side}.")
    half = samples_per_side // 2
    selection = [r[:half] for r in releases]
    evaluation = [r[half:] for r in releases]
    num_coordinates = int(np.prod(releases[0].shape[1:], dtype=np.int64))
    family = tuple(setup.statistics) + generic_statistics(setup,
                                                          num_coordinates)
    alpha = statistics.bonferroni(1.0 - confidence, len(family))
    outcomes = []
    for statistic in family:
        fn = statistic.fitted(*selection)
        threshold, at_least, swapped, _ = select_event(
            fn(selection[0]), fn(selection[1]))
        counts = [_event_counts(fn(e), threshold, at_least)
                  for e in evaluation]
        n_eval = [len(e) for e in evaluation]
        top, bottom = (1, 0) if swapped else (0, 1)
        bound = statistics.epsilon_lower_bound(
            counts[top], n_eval[top], counts[bottom], n_eval[bottom], alpha,
            delta=setup.delta)
        direction = "M(x') vs M(x)" if swapped else "M(x) vs M(x')"
        if statistic.indicator:
            event = statistic.name if at_least == (threshold > 0.5) else (
                f"not ({statistic.name})")
        else:
            relation = ">=" if at_least else "<="
            event = f"{statistic.name} {relation} {threshold:.4g}"
        outcomes.append(TestOutcome(
            description=f"{event}, {direction}",
            count_x=counts[0], count_x_prime=counts[1], lower_bound=bound))
    best = max(outcomes, key=lambda o: o.lower_bound)
    return AuditResult(
        mechanism=setup.name, claim=float(setup.claim), unit=setup.unit,
        lower_bound=best.lower_bound, samples_per_side=samples_per_side,
        evaluation_samples=samples_per_side - half, num_tests=len(family),
        confidence=confidence, best_test=best.description,
        delta=float(setup.delta), broken=setup.broken,
        description=setup.description, tests=tuple(outcomes))


# ---------------------------------------------------------------------------
# Reports.


def markdown_table(results):
    """The results as a markdown table, one row per audit.

    Example:
    >>> print(markdown_table([result]))  # doctest: +SKIP
    | mechanism | claim (unit) | lower bound (95%) | ...
    """
    results = list(results)
    confidences = sorted({r.confidence for r in results})
    level = "/".join(f"{100 * c:g}%" for c in confidences) or "95%"
    lines = [
        f"| mechanism | claimed epsilon (unit) | lower bound ({level}) | "
        "n per side | tightness | verdict | best test |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        name = f"{r.mechanism} (deliberately broken)" if r.broken else (
            r.mechanism)
        verdict = r.verdict.upper()
        claim = f"{r.claim:.4g} ({r.unit}"
        claim += f"; delta {r.delta:.2g})" if r.delta else ")"
        if not r.as_expected:
            verdict += " (UNEXPECTED)"
        lines.append(
            f"| {name} | {claim} | {r.lower_bound:.4f} | "
            f"{r.samples_per_side:,} | {r.tightness:.3f} | {verdict} | "
            f"{r.best_test} |")
    return "\n".join(lines)


def to_json(results, **kwargs):
    """The results (with every test evaluated) as a JSON document."""
    return json.dumps({"results": [r.to_dict() for r in results]},
                      sort_keys=True, **kwargs)
