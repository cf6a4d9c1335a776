"""The one type every mechanism uses to state what it guarantees.

A `Guarantee` says which mechanism, its privacy parameter (epsilon for pure
local DP, eta for metric DP), the unit the parameter refers to, the metric for
metric DP, delta, how it composes, and any condition it rests on. It renders
for people (`str`) and machines (`to_json` / `from_json`).
"""

import dataclasses
import json
import math
import numbers

from tfdptext.errors import ArgumentError
from tfdptext.privacy import randomness as randomness_lib

# Units. The unit is part of the guarantee: "epsilon = 0.05" per coordinate
# and per representation are very different promises.
PER_COORDINATE = "per_coordinate"
PER_REPRESENTATION = "per_representation"
PER_WORD = "per_word"
PER_TOKEN = "per_token"
PER_TOKEN_SUBSTITUTION = "per_token_substitution"
PER_SEQUENCE = "per_sequence"
PER_BIT = "per_bit"
PER_TEXT = "per_text"
PER_LABEL = "per_label"
PER_EXAMPLE = "per_example"
NO_PRIVACY = "none"

UNITS = (
    PER_COORDINATE,
    PER_REPRESENTATION,
    PER_WORD,
    PER_TOKEN,
    PER_TOKEN_SUBSTITUTION,
    PER_SEQUENCE,
    PER_BIT,
    PER_TEXT,
    PER_LABEL,
    PER_EXAMPLE,
    NO_PRIVACY,
)

_UNIT_TEXT = {
    PER_COORDINATE: "per coordinate (neighbouring inputs differ in one "
    "coordinate of the representation)",
    PER_REPRESENTATION: "per representation (any two inputs are neighbours)",
    PER_WORD: "per word (neighbouring inputs differ in one word)",
    PER_TOKEN: "per token, metric DP",
    PER_TOKEN_SUBSTITUTION: "per token substitution (neighbouring inputs "
    "have the same number of tokens and differ in one token)",
    PER_SEQUENCE: "per sequence (one vector per text), metric DP",
    PER_BIT: "per bit, metric DP over bit vectors",
    PER_TEXT: "per text (any two texts are neighbours: the whole release "
    "of one text)",
    PER_LABEL: "per label (any two labels are neighbours)",
    PER_EXAMPLE: "per training example (its text's release and its label; "
    "any two examples are neighbours)",
    NO_PRIVACY: "no privacy",
}


@dataclasses.dataclass(frozen=True)
class Guarantee:
    """A formal privacy guarantee with its unit.

    Args:
        mechanism: name of the mechanism, e.g. `"laplace"`, `"dchi"`.
        parameter: `"epsilon"` (pure/approximate LDP), `"eta"` or
            `"epsilon"` with a `metric` (metric DP), or `"none"`.
        value: the parameter's value; `None` when there is no guarantee.
        unit: one of `UNITS`.
        metric: for metric DP, the distance d in
            Pr[M(x) = y] <= exp(value * d(x, x')) Pr[M(x') = y].
        delta: the delta of (epsilon, delta)-DP; 0 for pure DP.
        composition: how the guarantee composes or converts.
        conditions: what the guarantee rests on.
        details: mechanism parameters (noise scale, dimension, ...).
        randomness: where the noise comes from, one of
            `tfdptext.privacy.randomness.SOURCES` (None when there is no
            noise). Part of the guarantee: predictable noise is no noise.

    Example:
    >>> g = Guarantee("laplace", "epsilon", 0.5, PER_REPRESENTATION)
    >>> g.epsilon
    0.5
    """

    mechanism: str
    parameter: str
    value: float | None
    unit: str
    metric: str | None = None
    delta: float = 0.0
    composition: str = ""
    conditions: tuple = ()
    details: dict = dataclasses.field(default_factory=dict)
    randomness: str | None = None

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ArgumentError(
                f"`unit` must be one of {UNITS}, received {self.unit!r}."
            )
        if self.unit == NO_PRIVACY:
            if self.value is not None:
                raise ArgumentError("A guarantee with unit 'none' has no value.")
        elif (self.value is None or isinstance(self.value, bool)
              or not isinstance(self.value, numbers.Real)
              or not (0.0 <= self.value < math.inf)):
            raise ArgumentError(
                "`value` must be a finite number >= 0 (an infinite epsilon "
                "is no guarantee: use Guarantee.none), received "
                f"{self.value!r}."
            )
        if self.value is not None:
            object.__setattr__(self, "value", float(self.value))
        if not (0.0 <= self.delta <= 1.0):
            raise ArgumentError(f"`delta` must be in [0, 1], got {self.delta}.")
        if self.randomness is not None:
            randomness_lib.check_source(self.randomness)
        object.__setattr__(self, "conditions", tuple(self.conditions))

    @classmethod
    def none(cls, mechanism, reason):
        """A statement that no privacy is provided, and why."""
        return cls(
            mechanism=mechanism,
            parameter="none",
            value=None,
            unit=NO_PRIVACY,
            conditions=(reason,),
        )

    @property
    def is_private(self):
        return self.unit != NO_PRIVACY

    @property
    def is_metric(self):
        return self.metric is not None

    @property
    def epsilon(self):
        """The privacy parameter, whatever its name."""
        return self.value

    def with_randomness(self, source):
        """The same guarantee with its noise drawn from `source`."""
        if not self.is_private:
            return self
        return dataclasses.replace(
            self, randomness=randomness_lib.check_source(source))

    def to_dict(self):
        out = dataclasses.asdict(self)
        out["conditions"] = list(self.conditions)
        return out

    def to_json(self, **kwargs):
        return json.dumps(self.to_dict(), sort_keys=True, **kwargs)

    @classmethod
    def from_dict(cls, data):
        """A Guarantee from `to_dict`'s output; ValueError naming missing or
        unknown keys."""
        if not isinstance(data, dict):
            raise ArgumentError(f"A guarantee must be a JSON object, received "
                             f"{type(data).__name__}.")
        fields = {f.name for f in dataclasses.fields(cls)}
        required = {"mechanism", "parameter", "value", "unit"}
        missing = sorted(required - set(data))
        unknown = sorted(set(data) - fields)
        if missing or unknown:
            raise ArgumentError(
                f"Not a guarantee: missing keys {missing}, unknown keys "
                f"{unknown} (a guarantee has {sorted(fields)}).")
        data = dict(data)
        data["conditions"] = tuple(data.get("conditions", ()))
        data["details"] = dict(data.get("details", {}))
        return cls(**data)

    @classmethod
    def from_json(cls, text):
        return cls.from_dict(json.loads(text))

    def __str__(self):
        if not self.is_private:
            reason = "; ".join(self.conditions)
            return f"{self.mechanism}: NO privacy guarantee ({reason})."
        if self.is_metric:
            head = (
                f"{self.mechanism}: {self.parameter} = {self.value:g}, "
                f"{_UNIT_TEXT[self.unit]}: Pr[M(x)=y] <= "
                f"exp({self.value:g} * d(x, x')) Pr[M(x')=y], "
                f"d = {self.metric}"
            )
        else:
            head = (
                f"{self.mechanism}: {self.value:g}-LDP "
                f"{_UNIT_TEXT[self.unit]}"
            )
        if self.delta:
            head += f", delta = {self.delta:g}"
        lines = [head + "."]
        if self.composition:
            lines.append(f"  Composition: {self.composition}")
        for condition in self.conditions:
            lines.append(f"  Condition: {condition}")
        if self.randomness is not None:
            lines.append(
                f"  Condition: {randomness_lib.DESCRIPTIONS[self.randomness]}")
        return "\n".join(lines)


# How far the epsilon that runs may sit from the one asked for before the
# user is told (`check_implemented`).
IMPLEMENTED_TOLERANCE = 0.01


class EpsilonMismatchWarning(UserWarning):
    """The epsilon a sampler implements differs from the one asked for by
    more than IMPLEMENTED_TOLERANCE (the guarantee states the one that
    runs)."""


def check_implemented(mechanism, requested, implemented, why,
                      warn_below=True):
    """Warns (EpsilonMismatchWarning) when the implemented epsilon is more
    than 1% above the requested one (a weaker guarantee than asked: the
    guarantee states it), or, with `warn_below`, more than 1% below (more
    noise, less utility than asked; not for a mechanism whose exact
    log-ratio is below its parameter by design). `why`: what makes them
    differ (the sampler's grid). Returns `implemented`.

    Example:
    >>> check_implemented("rr", 1.0, 1.0000001, "the 24-bit grid")
    1.0000001
    """
    import warnings

    if implemented > requested * (1.0 + IMPLEMENTED_TOLERANCE):
        warnings.warn(
            f"{mechanism}: the epsilon that runs, {implemented:.6g}, is "
            f"{implemented / requested:.3g} times the {requested:.6g} asked "
            f"for ({why}); the guarantee states {implemented:.6g}. Ask for "
            "a larger epsilon or fewer values to keep them close.",
            EpsilonMismatchWarning, stacklevel=3)
    elif warn_below and \
            implemented < requested * (1.0 - IMPLEMENTED_TOLERANCE):
        warnings.warn(
            f"{mechanism}: the epsilon that runs, {implemented:.6g}, is "
            f"below the {requested:.6g} asked for ({why}): the release is "
            "noisier than asked; the guarantee states the smaller value.",
            EpsilonMismatchWarning, stacklevel=3)
    return implemented
