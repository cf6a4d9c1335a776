"""The two array backends the shared mechanism math runs on.

A mechanism's math (`tfdptext.substitution.race`, the utilities of each
mechanism) is written once against the small namespace here and runs:

- in the Keras layers on `TENSORFLOW`: float32, TFLite builtin ops only,
  uniforms on a 2^-23 grid (`UNIFORM_BITS`);
- in `tfdptext.offline` on `NUMPY`: float64, uniforms on a 2^-52 grid
  from os.urandom.

The precision differs, and each guarantee states its own
(`tfdptext.privacy.exponential.FLOAT32` / `FLOAT64`); the arithmetic is the
same. Nothing here imports TensorFlow until `TENSORFLOW` is used.
"""

import math

import numpy as np


class _Numpy:
    """float64 numpy."""

    name = "numpy"
    dtype = np.float64
    # Uniforms are centred on a grid of 2^52 cells: (k + 1/2) 2^-52 is
    # exact in float64 and strictly inside (0, 1).
    uniform_bits = 52
    inf = math.inf

    @staticmethod
    def constant(value, dtype=None):
        return np.asarray(value, dtype=dtype or np.float64)

    @staticmethod
    def cast(x, dtype):
        return np.asarray(x).astype(dtype)

    floor = staticmethod(np.floor)
    zeros_like = staticmethod(np.zeros_like)
    sqrt = staticmethod(np.sqrt)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    where = staticmethod(np.where)
    concat = staticmethod(np.concatenate)

    @staticmethod
    def log(x):
        with np.errstate(divide="ignore"):
            return np.log(x)

    @staticmethod
    def exp(x):
        with np.errstate(over="ignore"):
            return np.exp(x)

    @staticmethod
    def neg_log_uniform(u):
        """-log(u) for u in (0, 1), with relative accuracy near u = 1
        (1 - u is exact there)."""
        return np.where(u < 0.5, -np.log(np.minimum(u, 0.5)),
                        -np.log1p(-(1.0 - np.maximum(u, 0.5))))

    @staticmethod
    def reduce_max(x, axis=-1, keepdims=False):
        return np.max(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def reduce_sum(x, axis=-1, keepdims=False):
        return np.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def argmin(x):
        return np.argmin(x, axis=-1).astype(np.int64)

    @staticmethod
    def reshape(x, shape):
        return np.reshape(x, shape)

    @staticmethod
    def shape(x):
        return np.shape(x)

    @staticmethod
    def matmul_transposed(a, b):
        """a @ b.T"""
        return a @ b.T

    @staticmethod
    def gather_rows(x, index):
        """x[i, index[i]] for a (N, M, ...) x and (N,) index."""
        return x[np.arange(len(index)), index]

    @staticmethod
    def gather(x, index):
        return np.asarray(x)[index]

    @staticmethod
    def pad_last(x, count, value):
        if count == 0:
            return x
        pad = [(0, 0)] * (x.ndim - 1) + [(0, count)]
        return np.pad(x, pad, constant_values=value)


class _TensorFlow:
    """float32 TensorFlow, builtin TFLite ops only."""

    name = "tensorflow"
    dtype = "float32"
    # (k + 1/2) 2^-23 has 24 significant bits: exact in float32.
    uniform_bits = 23
    inf = math.inf

    @property
    def tf(self):
        import tensorflow as tf

        return tf

    def constant(self, value, dtype=None):
        return self.tf.constant(value, dtype=dtype or self.tf.float32)

    def cast(self, x, dtype):
        return self.tf.cast(x, dtype)

    def floor(self, x):
        return self.tf.floor(x)

    def zeros_like(self, x):
        return self.tf.zeros_like(x)

    def sqrt(self, x):
        return self.tf.sqrt(x)

    def maximum(self, a, b):
        return self.tf.maximum(a, b)

    def minimum(self, a, b):
        return self.tf.minimum(a, b)

    def where(self, c, a, b):
        return self.tf.where(c, a, b)

    def concat(self, values, axis=-1):
        return self.tf.concat(values, axis=axis)

    def log(self, x):
        return self.tf.math.log(x)

    def exp(self, x):
        return self.tf.exp(x)

    def neg_log_uniform(self, u):
        """-log(u) for u in (0, 1) with relative accuracy everywhere.

        TFLite's LOG kernel is accurate in absolute, not relative, terms
        near 1 (measured: relative error 0.33 at u = 1 - 2^-24) and log1p
        converts to LOG(1 + x). For u >= 1/2: -log(u) = 2 atanh(z), z =
        v / (2 - v), v = 1 - u (exact), z <= 1/3, summed as the odd
        series to z^17 (truncation < 2^-25 relative); for u < 1/2, -log(u)
        >= 0.69 and LOG's absolute accuracy is relative enough.
        `tests/test_exponential.py` measures both, TF and TFLite, over the
        whole 2^-23 grid.
        """
        tf = self.tf
        v = 1.0 - tf.maximum(u, 0.5)
        z = v / (2.0 - v)
        t = z * z
        p = tf.zeros_like(t) + 1.0 / 17.0
        for n in (15, 13, 11, 9, 7, 5, 3, 1):
            p = p * t + 1.0 / n
        return tf.where(u < 0.5, -tf.math.log(tf.minimum(u, 0.5)),
                        2.0 * z * p)

    def reduce_max(self, x, axis=-1, keepdims=False):
        return self.tf.reduce_max(x, axis=axis, keepdims=keepdims)

    def reduce_sum(self, x, axis=-1, keepdims=False):
        return self.tf.reduce_sum(x, axis=axis, keepdims=keepdims)

    def argmin(self, x):
        return self.tf.argmin(x, axis=-1, output_type=self.tf.int32)

    def reshape(self, x, shape):
        return self.tf.reshape(x, shape)

    def shape(self, x):
        return self.tf.shape(x)

    def matmul_transposed(self, a, b):
        return self.tf.matmul(a, b, transpose_b=True)

    def gather_rows(self, x, index):
        return self.tf.gather(x, index, batch_dims=1)

    def gather(self, x, index):
        return self.tf.gather(x, index)

    def pad_last(self, x, count, value):
        if count == 0:
            return x
        tf = self.tf
        rank = len(x.shape)
        return tf.pad(x, [[0, 0]] * (rank - 1) + [[0, count]],
                      constant_values=value)


NUMPY = _Numpy()
TENSORFLOW = _TensorFlow()
