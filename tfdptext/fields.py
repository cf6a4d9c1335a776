"""Config dataclass fields that carry their program flag's help.

`tfdptext.cli.flags` makes one absl flag per field of a config dataclass
(`TrainConfig`, `PretrainConfig`), taking its help text and choices from
the field's metadata. Pure Python.
"""

import dataclasses


def field_with_help(default, help_text, choices=None):
    """A dataclass field with `metadata={"help": ..., "choices": ...}`.

    Example:
    >>> @dataclasses.dataclass
    ... class Options:
    ...     mode: str = field_with_help("a", "The mode.", ("a", "b"))
    >>> dataclasses.fields(Options)[0].metadata["choices"]
    ('a', 'b')
    """
    metadata = {"help": help_text}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    return dataclasses.field(default=default, metadata=metadata)
