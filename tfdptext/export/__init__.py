"""Export: the phone model (TFLite) and the server model (TF Serving).

`tfdptext.export.choices` is pure Python; the TFLite helpers load
TensorFlow on first use.
"""

import importlib

_LAZY = {name: "tfdptext.export.tflite" for name in (
    "ConversionError", "check_unseeded_builtins", "convert",
    "convert_signatures", "operators", "signature_keys")}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(
        f"module 'tfdptext.export' has no attribute {name!r}")


__all__ = sorted(_LAZY)
