"""One registered text-to-text mechanism: `TextMechanism` and its options.

A text-to-text mechanism maps token ids to token ids through a public table
(token embeddings, or binary codes). Its entry says everything the
programs need, so that a new mechanism is one entry plus its math:

- `name`, `summary`, `reference`: the --mechanism value, one line for help
  and the README table, and the paper;
- `parameter`: its privacy parameter, "eta" (metric noise with density
  ~ exp(-eta ||.||)) or "epsilon" (every other mechanism), a field of
  `TrainConfig` and `CorpusConfig`;
- `table`: "embeddings" (the encoder's token embeddings, or --embeddings)
  or "codes" (a tfdptext-binarize directory, --codes);
- `options`: its own settings (`Option`), given as --mechanism_options
  name=value pairs, each validated with an error naming it;
- `layer(settings)` and `offline(settings, seed, num_threads)`: its Keras
  layer (tfdptext.layers) and offline privatizer (tfdptext.offline),
  built from one `Settings`; both import lazily, so that the registry is
  pure Python (the programs' --help reads it without TensorFlow);
- `audit`: how `tfdptext-audit` runs it on a toy table, and the broken
  variant the audit must refute (`AuditSetting`).
"""

import dataclasses
from typing import Callable

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

EMBEDDINGS = "embeddings"
CODES = "codes"
TABLES = (EMBEDDINGS, CODES)
PARAMETERS = ("eta", "epsilon")


@dataclasses.dataclass(frozen=True)
class Option:
    """A mechanism's own setting.

    Args:
        name: its name in --mechanism_options (name=value).
        help: what it is, with its range and default.
        default: its value when not given (None: required unless the
            mechanism derives it).
        parse: (name, value) -> the checked value, raising ArgumentError
            naming `name`; the value may be a string (from a flag).
    """

    name: str
    help: str
    default: object
    parse: Callable


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a layer or offline privatizer is built from.

    Args:
        value: the privacy parameter (eta or epsilon), checked.
        options: every option of the mechanism, checked, defaults filled.
        table: the public (vocabulary_size, width) table: embeddings, or
            0/1 codes.
        special_token_ids: never output.
        passthrough_token_ids: released unchanged.
        description: what the table is, for the guarantee.
        vocabulary: the table's tokens (strings, in row order), for
            options that name words; None when unknown.
    """

    value: float
    options: dict
    table: object
    special_token_ids: tuple = ()
    passthrough_token_ids: tuple = ()
    description: str = "the token embedding table"
    vocabulary: tuple | None = None


@dataclasses.dataclass(frozen=True)
class AuditSetting:
    """How `tfdptext-audit` runs an entry on its toy table
    (`tfdptext.audit.mechanisms.text_audit_table`).

    Args:
        value: the privacy parameter (a claim of about 1 to 2 nats for the
            pair, so that the audit can approach it).
        options: the options, as name=value strings.
        pair: the two neighbouring input ids.
        broken: "module:function" building a deliberately broken layer
            (from the same `Settings`) that claims the correct one's
            bound; the audit must refute it.
    """

    value: float
    options: tuple = ()
    pair: tuple = (1, 2)
    broken: str | None = None


@dataclasses.dataclass(frozen=True)
class TextMechanism:
    """One registry entry (see the module docstring)."""

    name: str
    summary: str
    reference: str
    parameter: str
    table: str
    layer: Callable
    offline: Callable
    options: tuple = ()
    audit: AuditSetting | None = None
    check_value: Callable = None

    def __post_init__(self):
        validation.check_choice("parameter", self.parameter, PARAMETERS)
        validation.check_choice("table", self.table, TABLES)
        names = [option.name for option in self.options]
        if len(set(names)) != len(names):
            raise ArgumentError(f"Mechanism {self.name!r} declares an "
                                f"option twice: {names}.")

    def value(self, value):
        """The privacy parameter, checked (finite and > 0, and whatever
        the mechanism adds)."""
        if value is None:
            raise ArgumentError(f"`{self.parameter}` is required with "
                                f"mechanism {self.name}.")
        if self.check_value is not None:
            return self.check_value(value)
        return validation.check_positive(self.parameter, value)

    def parse_options(self, given=None):
        """Every option of the mechanism, checked, with defaults filled.

        Args:
            given: None, a dict {name: value}, or a list of "name=value"
                strings (the --mechanism_options flag).

        Raises ArgumentError naming `mechanism_options` for a malformed
        pair or an option the mechanism does not take, and naming the
        option for a bad value.
        """
        pairs = _as_pairs(given)
        known = {option.name: option for option in self.options}
        unknown = sorted(set(pairs) - set(known))
        if unknown:
            takes = (", ".join(sorted(known)) if known else "none")
            raise ArgumentError(
                f"`mechanism_options`: mechanism {self.name!r} takes no "
                f"option {', '.join(map(repr, unknown))} (its options: "
                f"{takes}).")
        return {name: option.parse(name, pairs.get(name, option.default))
                for name, option in known.items()}

    def help(self):
        """One paragraph: the summary, the parameter and the options."""
        text = f"{self.name}: {self.summary} (--{self.parameter}"
        if self.table == CODES:
            text += ", --codes"
        text += ")"
        if self.options:
            text += "; options: " + "; ".join(
                f"{o.name}: {o.help}" for o in self.options)
        return text + "."


def _as_pairs(given):
    if given is None:
        return {}
    if isinstance(given, dict):
        return dict(given)
    if isinstance(given, str):
        given = [part for part in given.split(",") if part.strip()]
    pairs = {}
    for item in given:
        if not isinstance(item, str) or "=" not in item:
            raise ArgumentError(
                "`mechanism_options` must be name=value pairs, received "
                f"{item!r}.")
        name, value = (part.strip() for part in item.split("=", 1))
        if not name or name in pairs:
            raise ArgumentError(
                f"`mechanism_options`: {item!r} names no option or one "
                "given twice.")
        pairs[name] = value
    return pairs


def float_option(low, high, include_low=True, include_high=True):
    """An Option parser for a float in [low, high] (ends as given)."""

    def parse(name, value):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ArgumentError(f"`{name}` must be a number, received "
                                    f"{value!r}.") from None
        value = validation._as_real(name, value)
        ok_low = value >= low if include_low else value > low
        ok_high = value <= high if include_high else value < high
        if not (ok_low and ok_high):
            left = "[" if include_low else "("
            right = "]" if include_high else ")"
            raise ArgumentError(f"`{name}` must be in {left}{low:g}, "
                                f"{high:g}{right}, received {value}.")
        return value
    return parse


def optional(parse):
    """A parser that lets None through (an option derived when absent)."""

    def parse_optional(name, value):
        if value is None or value == "":
            return None
        return parse(name, value)
    return parse_optional


def int_option(minimum, maximum=None):
    """An Option parser for an integer in [minimum, maximum]."""

    def parse(name, value):
        if isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise ArgumentError(f"`{name}` must be an integer, "
                                    f"received {value!r}.") from None
        value = validation.check_int(name, value, minimum)
        if maximum is not None and value > maximum:
            raise ArgumentError(f"`{name}` must be an integer in "
                                f"[{minimum}, {maximum}], received {value}.")
        return value
    return parse
