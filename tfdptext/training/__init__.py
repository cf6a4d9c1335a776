"""Training with Keras `fit`: robust DPNR and privacy-constrained modes.

`tfdptext.training.config` (TrainConfig and the choices) is pure Python, so
a program's flags and `--help` never import TensorFlow; `train`,
`build_split` and `RunDirectoryError` load it on first use.
"""

import importlib

from tfdptext.training.config import ALLOWED
from tfdptext.training.config import MODES
from tfdptext.training.config import TrainConfig

_LAZY = {
    "build_split": "tfdptext.training.builder",
    "RunDirectoryError": "tfdptext.training.trainer",
    "train": "tfdptext.training.trainer",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(
        f"module 'tfdptext.training' has no attribute {name!r}")


__all__ = ["ALLOWED", "MODES", "RunDirectoryError", "TrainConfig",
           "build_split", "train"]
