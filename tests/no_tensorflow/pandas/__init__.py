"""Blocks pandas in the JAX child of tests/test_jax_backend.py: the device
image has numpy, scipy, h5py, ml-dtypes, absl-py and safetensors, and the
device package carries keras, keras-hub and what they need
(benchmarks/gpu_package.py WHEELS), not pandas, matplotlib or
scikit-learn; Keras imports them only if installed. (Blocked, the child's
imports also take about a CPU-second less.)"""

raise ImportError("pandas is blocked in this process (tests/no_tensorflow "
                  "is on PYTHONPATH): the device image lacks it.")
