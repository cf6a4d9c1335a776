"""Blocks matplotlib in the JAX child (see ../pandas)."""

raise ImportError("matplotlib is blocked in this process (tests/"
                  "no_tensorflow is on PYTHONPATH): the device image lacks "
                  "it.")
