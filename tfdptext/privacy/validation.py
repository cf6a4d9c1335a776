"""Argument checks shared by the accounting functions and the layers.

Every check raises `tfdptext.errors.ArgumentError` (a `ValueError`) whose
message names the argument, the value
received and the allowed range, so bad input never reaches TensorFlow.
"""

import math
import numbers

from tfdptext.errors import ArgumentError


def _as_real(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(
            f"`{name}` must be a real number, received {value!r} "
            f"of type {type(value).__name__}."
        )
    value = float(value)
    if math.isnan(value):
        raise ArgumentError(f"`{name}` must be a number, received NaN.")
    return value


def check_positive(name, value):
    """Returns `value` as a float if it is finite and > 0, else raises."""
    value = _as_real(name, value)
    if not (0.0 < value < math.inf):
        raise ArgumentError(
            f"`{name}` must be finite and > 0 (allowed range: (0, inf)), "
            f"received {value}."
        )
    return value


def check_rate(name, value, include_one=False):
    """Returns `value` as a float in [0, 1) (or [0, 1]), else raises."""
    value = _as_real(name, value)
    upper_ok = value <= 1.0 if include_one else value < 1.0
    if not (value >= 0.0 and upper_ok):
        bracket = "]" if include_one else ")"
        raise ArgumentError(
            f"`{name}` must be in [0, 1{bracket}, received {value}."
        )
    return value


def check_nonnegative(name, value):
    """Returns `value` as a float if it is finite and >= 0, else raises."""
    value = _as_real(name, value)
    if not (0.0 <= value < math.inf):
        raise ArgumentError(
            f"`{name}` must be finite and >= 0 (allowed range: [0, inf)), "
            f"received {value}."
        )
    return value


def check_int(name, value, minimum=1):
    """Returns `value` as an int if it is an integer >= `minimum`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentError(
            f"`{name}` must be an integer >= {minimum}, received {value!r}."
        )
    if value < minimum:
        raise ArgumentError(
            f"`{name}` must be an integer >= {minimum}, received {value}."
        )
    return int(value)


def check_choice(name, value, choices):
    """Returns `value` if it is one of `choices`, else raises."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ArgumentError(
            f"`{name}` must be one of {allowed}; received {value!r}."
        )
    return value
