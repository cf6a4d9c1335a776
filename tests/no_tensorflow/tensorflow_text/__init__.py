"""Blocks TensorFlow Text with TensorFlow (see ../tensorflow)."""

raise ImportError("TensorFlow Text is blocked in this process (tests/"
                  "no_tensorflow is on PYTHONPATH).")
