"""tfdptext: local differential privacy for text, as Keras layers.

Subpackages are imported on first use, so `import tfdptext` stays cheap and
`tfdptext.privacy` (pure accounting) never pulls in TensorFlow:

- `tfdptext.privacy`: guarantees and the math behind them.
- `tfdptext.layers`: privatization mechanisms as Keras layers.
- `tfdptext.data`: datasets and tokenization.
- `tfdptext.models`: encoders and the user-side / server-side split.
- `tfdptext.offline`: privatizing whole corpora off device (FAISS).
"""

import importlib

from tfdptext.version import __version__

_SUBMODULES = ("privacy", "layers", "data", "models", "offline", "training",
               "export", "evaluation", "serving")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"tfdptext.{name}")
    raise AttributeError(f"module 'tfdptext' has no attribute {name!r}")


__all__ = ["__version__", *_SUBMODULES]
