"""Noise samplers built from unseeded TensorFlow random ops.

Only `tf.random.uniform` and `tf.random.normal` are used, without op seeds:
they convert to the TFLite builtins RANDOM_UNIFORM / RANDOM_STANDARD_NORMAL
with seed (0, 0), which draw fresh numbers on every call, in every
interpreter and process. `keras.random` is avoided on purpose: its
SeedGenerator state would be baked into an exported model, so every phone
would add the same noise.

No inverse-CDF form that can reach log(0) is used: an Exp(1) variable is
-log1p(-U) with U in [0, 1), which is finite (at most about 16.6 in float32).
"""

import tensorflow as tf


# The largest float32 below 1. RANDOM_UNIFORM draws from [0, 1); clamping
# makes log1p(-U) finite even on a kernel that returned the endpoint 1.
_BELOW_ONE = 1.0 - 2.0**-24


def _uniform(shape, dtype):
    u = tf.random.uniform(shape, minval=0.0, maxval=1.0, dtype=dtype)
    return tf.minimum(u, tf.constant(_BELOW_ONE, dtype))


def exponential(shape, dtype=tf.float32):
    """Exp(1) samples: -log1p(-U)."""
    return -tf.math.log1p(-_uniform(shape, dtype))


def laplace(shape, scale, dtype=tf.float32):
    """Lap(scale) samples, as scale * (E1 - E2), E1, E2 ~ Exp(1) i.i.d.

    The difference of two independent standard exponentials is a standard
    Laplace variable; every element gets its own pair.
    """
    return scale * (exponential(shape, dtype) - exponential(shape, dtype))


def gamma_integer_shape(batch_shape, shape_k, scale, dtype=tf.float32):
    """Gamma(shape_k, scale) for an integer shape_k, as a sum of exponentials.

    `tf.random.gamma` is not a TFLite builtin; a sum of k i.i.d. Exp(1)
    variables is exactly Gamma(k, 1).
    Returns a tensor of shape `batch_shape + [1]`.
    """
    uniform_shape = tf.concat([batch_shape, [shape_k]], axis=0)
    return scale * tf.reduce_sum(
        exponential(uniform_shape, dtype), axis=-1, keepdims=True)


def unit_directions(shape, dtype=tf.float32):
    """Uniform directions on the unit sphere over the last axis."""
    z = tf.random.normal(shape, dtype=dtype)
    norm = tf.sqrt(tf.reduce_sum(tf.square(z), axis=-1, keepdims=True))
    return z / tf.maximum(norm, tf.constant(1e-30, dtype))


def dchi(shape, eta, dtype=tf.float32):
    """Noise with density proportional to exp(-eta * ||z||) over the last axis.

    Args:
        shape: the full (dynamic) shape, a 1-D int tensor.
        eta: the privacy parameter.

    The radius is Gamma(n, 1 / eta) with n = shape[-1], the direction uniform
    on the sphere: together they give the density exp(-eta ||z||) in R^n.
    """
    radius = gamma_integer_shape(shape[:-1], shape[-1], 1.0 / eta, dtype)
    return radius * unit_directions(shape, dtype)
