"""Blocks scikit-learn in the JAX child (see ../pandas)."""

raise ImportError("scikit-learn is blocked in this process (tests/"
                  "no_tensorflow is on PYTHONPATH): the device image lacks "
                  "it.")
