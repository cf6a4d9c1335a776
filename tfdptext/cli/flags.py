"""absl flags defined from a dataclass, and the dataclass built back from them.

`define_flags(TrainConfig)` gives a program one flag per field, so a field
added to the dataclass is a flag with nothing else to change:

- name: the field's name;
- type: from the field's annotation: `bool`, `int`, `float`, `str`; `list`
  or `tuple` give a comma-separated list; `X | None` is optional (default
  None); a union holding `str` (`str | int`) is a string flag;
- default: the field's default (or `defaults[name]`); a field without one
  is a required flag;
- help: `dataclasses.field(metadata={"help": ...})`, else a pointer to the
  dataclass's docstring;
- choices: `metadata["choices"]` (the library's constant, e.g.
  `tfdptext.training.config.MODES`). A string flag with choices is an
  enum; other kinds check their values against them.

`build(TrainConfig)` makes the dataclass from the parsed flags.
"""

import dataclasses
import types
import typing

from absl import flags

# The flags defined here belong to the module that called define_flags (the
# program), which is where --help looks for them.
flags.disclaim_key_flags()

_SEQUENCES = (list, tuple)
# The flag kind of each plain type, in the order a union is resolved:
# `str | int` is a string flag, `int | float` a float flag.
_KINDS = ((str, flags.DEFINE_string), (float, flags.DEFINE_float),
          (int, flags.DEFINE_integer), (bool, flags.DEFINE_bool))


def define_flags(cls, names=None, defaults=None, help_suffix="",
                 flag_values=flags.FLAGS):
    """Defines one flag per field of the dataclass `cls` in `flag_values`.

    names: the fields to define (default: every field `__init__` takes).
    defaults: field name -> the flag's default, replacing the field's.
    help_suffix: appended to every help text.
    """
    defaults = defaults or {}
    hints = typing.get_type_hints(cls)
    for field in _fields(cls, names):
        default = defaults.get(field.name, _default(field))
        required = default is dataclasses.MISSING
        _define(field.name, hints[field.name], None if required else default,
                _help(cls, field) + help_suffix,
                field.metadata.get("choices"), required, flag_values)


def values(cls, names=None, flag_values=flags.FLAGS):
    """The parsed flags of `cls`'s fields (only `names`, if given), as
    field values: name -> value (a tuple field gets a tuple)."""
    hints = typing.get_type_hints(cls)
    return {f.name: _field_value(hints[f.name], flag_values[f.name].value)
            for f in _fields(cls, names)}


def build(cls, flag_values=flags.FLAGS):
    """An instance of the dataclass `cls` from the flags that
    `define_flags(cls)` defined, once parsed."""
    return cls(**values(cls, flag_values=flag_values))


def _fields(cls, names):
    """The fields of `cls` that `__init__` takes, or those named."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if names is None:
        return fields
    unknown = set(names) - {f.name for f in fields}
    if unknown:
        raise KeyError(f"{cls.__name__} has no field(s) {sorted(unknown)}.")
    return [f for f in fields if f.name in names]


def _default(field):
    """The field's default value, or dataclasses.MISSING."""
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _help(cls, field):
    """The field's metadata["help"], else a pointer to the docstring."""
    return field.metadata.get(
        "help", f"{cls.__name__}.{field.name}; see the {cls.__name__} "
        "docstring.")


def _members(annotation):
    """The types a field annotation allows, None excluded (`list[str]`
    counts as `list`)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = typing.get_args(annotation)
    else:
        members = (annotation,)
    return {typing.get_origin(m) or m for m in members} - {type(None)}


def _define(name, annotation, default, help_text, allowed, required,
            flag_values):
    """Defines the flag `name` for a field annotated `annotation`."""
    members = _members(annotation)
    options = dict(flag_values=flag_values, required=required)
    if members & set(_SEQUENCES):
        flags.DEFINE_list(name, _as_list(default), help_text, **options)
    elif str in members and allowed is not None:
        flags.DEFINE_enum(name, default, list(allowed), help_text, **options)
        return  # an enum checks its choices itself
    else:
        _scalar_define(name, annotation, members)(name, default, help_text,
                                                  **options)
    if allowed is not None:
        _check_choices(name, allowed, flag_values)


def _scalar_define(name, annotation, members):
    """The absl DEFINE_* function for a field of one of `members`."""
    for python_type, define in _KINDS:
        if python_type in members:
            return define
    raise TypeError(f"Field {name!r}: no flag type for {annotation}; fields "
                    "need a bool, int, float, str, list or tuple type.")


def _as_list(default):
    return list(default) if isinstance(default, _SEQUENCES) else default


def _check_choices(name, allowed, flag_values):
    """absl validation of a non-string flag against its choices."""
    allowed = tuple(allowed)

    def valid(value):
        if value is None:
            return True
        given = value if isinstance(value, list) else [value]
        return all(v in allowed for v in given)

    flags.register_validator(
        name, valid, f"--{name} takes {', '.join(map(str, allowed))}.",
        flag_values=flag_values)


def _field_value(annotation, value):
    """A parsed flag value as the field takes it: the list of a list flag
    becomes a tuple where the field is a tuple only."""
    members = _members(annotation)
    if isinstance(value, list) and tuple in members and list not in members:
        return tuple(value)
    return value
