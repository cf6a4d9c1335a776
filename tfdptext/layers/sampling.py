"""Noise samplers built from unseeded TensorFlow random ops, or from
uniforms supplied by the caller.

Only `tf.random.uniform` and `tf.random.normal` are used, without op seeds:
they convert to the TFLite builtins RANDOM_UNIFORM / RANDOM_STANDARD_NORMAL
with seed (0, 0), which draw fresh numbers on every call, in every
interpreter and process. `keras.random` is avoided on purpose: its
SeedGenerator state would be baked into an exported model, so every phone
would add the same noise.

Every sampler also accepts `uniforms`: numbers in [0, 1) from elsewhere
(e.g. a phone's secure random number generator, fed as a model input). The
noise is then a deterministic function of them: Gaussians by Box-Muller
(TFLite's SIN and COS builtins), exponentials as -log1p(-U).

No inverse-CDF form that can reach log(0) is used: U is clamped to at most
the largest float32 below 1, so -log1p(-U) <= 16.6.
"""

import tensorflow as tf

# The largest float32 below 1. RANDOM_UNIFORM draws from [0, 1); clamping
# makes log1p(-U) finite even on a kernel (or an app) that returned 1.
_BELOW_ONE = 1.0 - 2.0**-24


def _clamp(u):
    u = tf.cast(u, tf.float32)
    return tf.minimum(tf.maximum(u, 0.0), _BELOW_ONE)


def uniform(shape, uniforms=None):
    """U[0, 1) samples of `shape`, drawn or taken from `uniforms`."""
    if uniforms is not None:
        return _clamp(uniforms)
    return _clamp(tf.random.uniform(shape, minval=0.0, maxval=1.0))


def exponential(shape, uniforms=None):
    """Exp(1) samples: -log1p(-U)."""
    return -tf.math.log1p(-uniform(shape, uniforms))


def laplace(shape, scale, uniforms=None):
    """Lap(scale) samples, as scale * (E1 - E2), E1, E2 ~ Exp(1) i.i.d.

    With `uniforms`, their shape is `shape + [2]`.
    """
    if uniforms is None:
        return scale * (exponential(shape) - exponential(shape))
    e = exponential(None, uniforms)
    return scale * (e[..., 0] - e[..., 1])


def gamma_integer_shape(batch_shape, shape_k, scale, uniforms=None):
    """Gamma(shape_k, scale) for an integer shape_k, as a sum of exponentials.

    `tf.random.gamma` is not a TFLite builtin; a sum of k i.i.d. Exp(1)
    variables is exactly Gamma(k, 1). Returns shape `batch_shape + [1]`;
    `uniforms`, if given, has shape `batch_shape + [shape_k]`.
    """
    uniform_shape = None if uniforms is not None else tf.concat(
        [batch_shape, [shape_k]], axis=0)
    return scale * tf.reduce_sum(exponential(uniform_shape, uniforms),
                                 axis=-1, keepdims=True)


def normal_from_uniforms(uniforms, n):
    """n standard normals per row from 2 * ceil(n / 2) uniforms (Box-Muller)."""
    half = (n + 1) // 2
    u1 = uniform(None, uniforms[..., :half])
    u2 = uniform(None, uniforms[..., half:2 * half])
    radius = tf.sqrt(-2.0 * tf.math.log1p(-u1))
    angle = 6.283185307179586 * u2
    z = tf.concat([radius * tf.cos(angle), radius * tf.sin(angle)], axis=-1)
    return z[..., :n]


def unit_directions(shape, n=None, uniforms=None):
    """Uniform directions on the unit sphere over the last axis."""
    if uniforms is None:
        z = tf.random.normal(shape)
    else:
        z = normal_from_uniforms(uniforms, n)
    norm = tf.sqrt(tf.reduce_sum(tf.square(z), axis=-1, keepdims=True))
    return z / tf.maximum(norm, 1e-30)


def dchi_uniforms_per_vector(n):
    """How many uniforms d_chi noise needs for one n-dim vector."""
    return n + 2 * ((n + 1) // 2)


def dchi(shape, eta, n=None, uniforms=None):
    """Noise with density proportional to exp(-eta * ||z||) over the last axis.

    Args:
        shape: the full (dynamic) shape, a 1-D int tensor.
        eta: the privacy parameter.
        n: the static last dimension (needed with `uniforms`).
        uniforms: optional, shape `shape[:-1] + [dchi_uniforms_per_vector(n)]`.

    The radius is Gamma(n, 1 / eta), the direction uniform on the sphere:
    together they give the density exp(-eta ||z||) in R^n.
    """
    if uniforms is None:
        radius = gamma_integer_shape(shape[:-1], shape[-1], 1.0 / eta)
        return radius * unit_directions(shape)
    radius = gamma_integer_shape(None, n, 1.0 / eta, uniforms[..., :n])
    return radius * unit_directions(None, n, uniforms[..., n:])
