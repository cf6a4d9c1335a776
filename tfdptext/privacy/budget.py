"""A user's privacy budget, as an export carries it to every client.

Every release a user sends spends the guarantee's parameter (epsilon, or
eta for metric DP) once: m releases, of one text or of m texts, are
(m x value)-private in the guarantee's unit (basic composition). A budget
bounds that sum per UTC day and in total, on the user's device; the
ledger (`tfdptext.privacy.ledger`, `web/tfdptext/ledger.js`) keeps it.

The export records the budget in its manifest (`manifest.json` "budget",
`Budget.to_dict`). The default, when the exporter gives none:

- epsilon (pure LDP, any unit): DEFAULT_PER_DAY (10) per UTC day and
  DEFAULT_TOTAL (100) in total; when one release costs more than 10 (e.g.
  a per-token guarantee with word dropout), one release's cost per day,
  so that a default export can release at all;
- metric DP (eta x distance): eta scales have no common meaning across
  metrics, so DEFAULT_METRIC_RELEASES_PER_DAY (10) releases' worth per day
  and DEFAULT_METRIC_RELEASES_TOTAL (100) in total.

No budget is a deliberate choice (`Budget.none_chosen`, tfdptext-export
--no_budget), recorded with its reason and shown by every client; an export
without a privacy guarantee has nothing to count.

Pure Python: no TensorFlow.
"""

import dataclasses
import datetime
import math

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

DEFAULT_PER_DAY = 10.0
DEFAULT_TOTAL = 100.0
DEFAULT_METRIC_RELEASES_PER_DAY = 10
DEFAULT_METRIC_RELEASES_TOTAL = 100
PERIOD = "UTC day"
# What the ledger is keyed by: the app's storage (the browser's origin, the
# Python ledger file) and the privacy unit, never the model version, so a
# new model version keeps what was spent.
SCOPE_RULE = ("one ledger per app storage (browser origin / ledger file) "
              "and privacy unit (parameter, unit, metric), whatever the "
              "model or its version")
CHOSEN_NONE = "no budget: chosen at export (--no_budget)"
NOT_PRIVATE = "no budget: the export has no privacy guarantee to count"
# Float sums of epsilons: a release that fits up to this slack is allowed.
_SLACK = 1e-9


def amount(value):
    """An amount of the parameter as shown: at most 4 decimals ('0.25',
    '10'; float32 epsilons such as 0.9999998 show as '1')."""
    return f"{round(float(value), 4) + 0.0:g}"


def period(now):
    """The UTC day of `now` (an aware datetime), 'YYYY-MM-DD'."""
    return now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d")


def renewal(now):
    """When the period of `now` ends: the next UTC midnight."""
    day = now.astimezone(datetime.timezone.utc).date()
    return datetime.datetime.combine(
        day + datetime.timedelta(days=1), datetime.time(),
        tzinfo=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much of the guarantee's parameter a user may spend.

    Args:
        parameter: the guarantee's parameter ("epsilon", "eta").
        unit: the guarantee's unit (`tfdptext.privacy.guarantee.UNITS`).
        metric: the metric of metric DP, or None.
        per_release: what one release costs (the guarantee's value).
        per_day: the most a user may spend per UTC day (None: no daily
            bound, only with `none_reason`).
        total: the most a user may spend in all (None: as per_day).
        none_reason: why there is no budget (None: there is one).

    Example:
    >>> b = Budget.for_guarantee({"parameter": "epsilon", "value": 4.0,
    ...                           "unit": "per_text"})
    >>> (b.per_day, b.total, b.releases_per_day)
    (10.0, 100.0, 2)
    """

    parameter: str
    unit: str
    metric: str | None
    per_release: float
    per_day: float | None
    total: float | None
    none_reason: str | None = None

    def __post_init__(self):
        validation.check_nonnegative("per_release", self.per_release)
        if self.none_reason is not None:
            if self.per_day is not None or self.total is not None:
                raise ArgumentError("A budget with `none_reason` has no "
                                    "`per_day` or `total`.")
            return
        for name in ("per_day", "total"):
            validation.check_positive(f"budget_{name}",
                                      getattr(self, name))
        if self.per_day > self.total + _SLACK:
            raise ArgumentError(
                f"`budget_per_day` ({self.per_day:g}) must not exceed "
                f"`budget_total` ({self.total:g}).")
        if self.per_release > self.per_day + _SLACK:
            raise ArgumentError(
                f"`budget_per_day` ({self.per_day:g}) is below the cost of "
                f"one release ({self.parameter} {self.per_release:g} "
                f"{self.unit}): no release could ever be sent. Give "
                f"--budget_per_day >= {self.per_release:g}, or --no_budget "
                "to export without one.")

    @property
    def limited(self):
        """Whether releases are ever refused."""
        return self.none_reason is None

    @property
    def scope(self):
        """The ledger's key for this budget's spending (SCOPE_RULE)."""
        return "/".join([self.parameter, self.unit] +
                        ([self.metric] if self.metric else []))

    @property
    def releases_per_day(self):
        """Releases that fit in one day's budget (None without one)."""
        return self._releases(self.per_day)

    @property
    def releases_total(self):
        return self._releases(self.total)

    def _releases(self, amount):
        if not self.limited:
            return None
        if self.per_release == 0:
            return math.inf
        return int(math.floor(amount / self.per_release + _SLACK))

    def fits(self, spent_day, spent_total):
        """Whether one more release stays within both bounds."""
        if not self.limited:
            return True
        cost = self.per_release
        return (spent_day + cost <= self.per_day + _SLACK
                and spent_total + cost <= self.total + _SLACK)

    def refusal(self, spent_day, spent_total, now):
        """The refusal in words: what is left and when it renews."""
        name = self.parameter
        left_day = max(0.0, self.per_day - spent_day)
        left_total = max(0.0, self.total - spent_total)
        head = (f"Refused on this device: one release costs {name} "
                f"{amount(self.per_release)} ({self.unit}) and ")
        if spent_total + self.per_release > self.total + _SLACK:
            return (head + f"{name} {amount(left_total)} of the total "
                    f"budget {amount(self.total)} is left. The total budget "
                    "never renews. Nothing was privatized, sent or charged.")
        return (head + f"{name} {amount(left_day)} of today's budget "
                f"{amount(self.per_day)} is left ({PERIOD} "
                f"{period(now)}; {name} {amount(left_total)} of the total "
                f"{amount(self.total)} is left). It renews at "
                f"{renewal(now).strftime('%Y-%m-%dT%H:%M:%SZ')}. Nothing "
                "was privatized, sent or charged.")

    def describe(self):
        """The budget in one sentence."""
        if not self.limited:
            return self.none_reason + "."
        return (f"Budget: {self.parameter} {amount(self.per_day)} per "
                f"{PERIOD} and {amount(self.total)} in total ({self.unit}; "
                f"{self.releases_per_day} and {self.releases_total} "
                f"release(s) of {self.parameter} {amount(self.per_release)}).")

    def to_dict(self):
        out = dataclasses.asdict(self)
        out["period"] = PERIOD
        out["scope"] = self.scope
        out["scope_rule"] = SCOPE_RULE
        return out

    @classmethod
    def from_dict(cls, record):
        """A Budget from `to_dict`'s output; ArgumentError naming what is
        missing."""
        fields = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(record, dict) or any(
                f not in record for f in fields):
            raise ArgumentError(f"A budget record needs the keys {fields}; "
                                f"received {record!r}.")
        return cls(**{f: record[f] for f in fields})

    @classmethod
    def for_guarantee(cls, guarantee, per_day=None, total=None,
                      no_budget=False):
        """The budget of an export whose guarantee is `guarantee` (a dict,
        `Guarantee.to_dict`): the given bounds, or the defaults (module
        docstring); `no_budget` records that none was chosen."""
        value = guarantee.get("value")
        parameter = guarantee.get("parameter", "none")
        unit = guarantee.get("unit", "none")
        metric = guarantee.get("metric")
        if value is None or unit == "none":
            return cls(parameter, unit, metric, 0.0, None, None,
                       NOT_PRIVATE)
        if no_budget:
            if per_day is not None or total is not None:
                raise ArgumentError("`no_budget` excludes `budget_per_day` "
                                    "and `budget_total`: give one or the "
                                    "other.")
            return cls(parameter, unit, metric, float(value), None, None,
                       CHOSEN_NONE)
        if metric:
            day_default = DEFAULT_METRIC_RELEASES_PER_DAY * float(value)
            total_default = DEFAULT_METRIC_RELEASES_TOTAL * float(value)
        else:
            day_default = max(DEFAULT_PER_DAY, float(value))
            total_default = max(DEFAULT_TOTAL, day_default)
        if per_day is None:
            per_day = day_default if total is None else min(
                day_default, total)
        if total is None:
            total = max(total_default, per_day)
        return cls(parameter, unit, metric, float(value), float(per_day),
                   float(total))

    @classmethod
    def of_manifest(cls, manifest):
        """The export's budget; for an export made before budgets, the
        default for its guarantee."""
        if "budget" in manifest:
            return cls.from_dict(manifest["budget"])
        return cls.for_guarantee(manifest["guarantee"])
