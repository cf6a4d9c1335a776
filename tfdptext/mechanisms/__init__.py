"""The registry of text-to-text mechanisms, and the math they share.

Every mechanism that maps token ids to token ids is one `TextMechanism`
entry here (`tfdptext.mechanisms.spec`): `tfdptext-train
--mode=text_to_text`, `tfdptext-privatize-corpus`, the export and the
evaluation's plausible deniability look it up by name and build its
Keras layer or offline privatizer from it; none of them branches on
names. Adding a mechanism is its entry and its math.

Pure Python: nothing here imports TensorFlow (the entries import their
layers when building one).

Example:
>>> from tfdptext import mechanisms
>>> mechanisms.get("dchi").parameter
'eta'
"""

from tfdptext.errors import ArgumentError
from tfdptext.mechanisms import brr
from tfdptext.mechanisms import custext
from tfdptext.mechanisms import dchi
from tfdptext.mechanisms import diffractor
from tfdptext.mechanisms import exponential
from tfdptext.mechanisms import mahalanobis
from tfdptext.mechanisms import truncated_gumbel
from tfdptext.mechanisms.spec import CODES
from tfdptext.mechanisms.spec import EMBEDDINGS
from tfdptext.mechanisms.spec import Option
from tfdptext.mechanisms.spec import Settings
from tfdptext.mechanisms.spec import TextMechanism

# In this order in every list of choices (dchi first: the default with
# --eta; brr the first with --epsilon).
REGISTRY = {entry.name: entry for entry in (
    dchi.SPEC,
    brr.SPEC,
    mahalanobis.MAHALANOBIS,
    mahalanobis.VICKREY_DCHI,
    mahalanobis.VICKREY_MAHALANOBIS,
    exponential.TEM,
    exponential.SANTEXT,
    exponential.SANTEXT_PLUS,
    custext.CUSTEXT,
    custext.CUSTEXT_PLUS,
    truncated_gumbel.TRUNCATED_GUMBEL,
    diffractor.DIFFRACTOR,
)}


def names():
    """The registered mechanisms' names, in registry order."""
    return tuple(REGISTRY)


def get(name):
    """The entry `name`; ArgumentError naming `mechanism` otherwise."""
    if name not in REGISTRY:
        raise ArgumentError(
            f"`mechanism` must be one of "
            f"{', '.join(repr(m) for m in REGISTRY)}; received {name!r}.")
    return REGISTRY[name]


def with_parameter(parameter):
    """The names of the entries whose privacy parameter is `parameter`."""
    return tuple(n for n, e in REGISTRY.items() if e.parameter == parameter)


def options_help():
    """Every entry's options, for the --mechanism_options help."""
    parts = [f"{e.name}: " + "; ".join(f"{o.name} ({o.help})"
                                       for o in e.options)
             for e in REGISTRY.values() if e.options]
    return " ".join(parts) if parts else "none yet"


__all__ = ["CODES", "EMBEDDINGS", "Option", "REGISTRY", "Settings",
           "TextMechanism", "get", "names", "options_help",
           "with_parameter"]
