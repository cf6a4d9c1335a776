"""Put this folder first on PYTHONPATH to make TensorFlow unimportable: the
backend-agnostic path's tests (tests/test_jax_backend.py) prove it never
imports TensorFlow."""

raise ImportError("TensorFlow is blocked in this process (tests/no_tensorflow "
                  "is on PYTHONPATH): this path must not import it.")
