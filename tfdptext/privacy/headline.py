"""One line a program prints first: what one text's whole release costs.

A flag's epsilon has a unit (per coordinate, per bit, per token), and the
composed figure for the whole release of one text can be far larger: 1 per
coordinate of a 384-d vector is 384 per text. `per_text_line(guarantee)`
says it plainly, and `warning(guarantee)` says when it protects little.

WEAK_EPSILON = 10: at epsilon 10 per text, the best guess of a yes/no fact
about the text that is even odds beforehand is right with probability up
to e^10 / (1 + e^10) = 0.99995 (`tfdptext.privacy.limit.
identification_bound`), so the release hides almost nothing about any
single fact; epsilon 1 to 8 per text is where a release still protects
something (0.73 to 0.9997 for such a fact).

Pure Python.
"""

import math

from tfdptext.privacy import limit

WEAK_EPSILON = 10.0


def per_text_line(guarantee):
    """'Privacy: ...' on one line: epsilon for the whole release of one
    text, how it was composed, or why there is no such figure.

    Example:
    >>> from tfdptext.privacy import laplace
    >>> per_text_line(laplace.laplace_guarantee(1.0, 384))
    'Privacy: epsilon 384 for the whole release of one text (delta 0.00012; 1 per coordinate x 384 coordinates).'
    """
    if not guarantee.is_private:
        reason = "; ".join(guarantee.conditions[:1])
        return f"Privacy: NONE ({reason})."
    per_text = limit.per_text_epsilon(guarantee)
    if per_text is None:
        return (f"Privacy: no single epsilon for a whole text: "
                f"{guarantee.parameter} {guarantee.value:g} "
                f"{guarantee.unit.replace('_', ' ')}, metric DP in "
                f"{guarantee.metric}; a text of n tokens adds n such bounds.")
    epsilon, delta = per_text
    how = ""
    if guarantee.unit != "per_text" and not math.isclose(epsilon,
                                                          guarantee.value):
        how = (f"; {guarantee.value:g} {guarantee.unit.replace('_', ' ')} x "
               f"{round(epsilon / guarantee.value)} coordinates"
               if guarantee.unit == "per_coordinate" else
               f"; the base epsilon of {guarantee.mechanism}")
    delta_text = f"delta {delta:.2g}" if delta else "delta 0"
    return (f"Privacy: epsilon {epsilon:.4g} for the whole release of one "
            f"text ({delta_text}{how}).")


def warning(guarantee):
    """A warning line when the per-text epsilon exceeds WEAK_EPSILON (None
    otherwise, or when there is no per-text epsilon)."""
    per_text = limit.per_text_epsilon(guarantee) \
        if guarantee.is_private else None
    if per_text is None or per_text[0] <= WEAK_EPSILON:
        return None
    epsilon = per_text[0]
    return (f"WARNING: epsilon {epsilon:.4g} per text protects little: "
            f"a yes/no fact about a text that is even odds beforehand can "
            f"be guessed right with probability up to "
            f"{limit.identification_bound(epsilon, 2):.5f}"
            f". Choose {WEAK_EPSILON:g} or less per text (e.g. "
            "--sensitivity=vector, or --release=code).")


def lines(guarantee):
    """The headline and, if any, its warning."""
    out = [per_text_line(guarantee)]
    extra = warning(guarantee)
    if extra:
        out.append(extra)
    return out
