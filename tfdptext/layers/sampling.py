"""Noise samplers built from unseeded TensorFlow random ops, or from
randomness supplied by the caller.

Only `tf.random.uniform` and `tf.random.normal` are used, without op seeds:
they convert to the TFLite builtins RANDOM_UNIFORM / RANDOM_STANDARD_NORMAL
with seed (0, 0), which draw fresh numbers on every call, in every
interpreter and process. `keras.random` is avoided on purpose: its
SeedGenerator state would be baked into an exported model, so every phone
would add the same noise.

Every sampler also accepts `uniforms` from elsewhere: either float numbers
in [0, 1) (taken as multiples of 2^-24), or int32 random words (a phone's
secure random number generator, fed as a model input; see
`tfdptext.models.secure`). The noise is then a deterministic function of
them: Gaussians by Box-Muller (TFLite's SIN and COS builtins),
exponentials as -log of a number in (0, 1].

How a word becomes each kind of number (all 32 bits are random):

- a uniform U = (w mod 2^24) / 2^24 (`uniforms_from_words`), 24 bits;
- an integer k = w mod 2^24 (`random_integers`: randomized response
  compares it with an integer threshold, never a float with a float);
- an exponential E = -log(V), V = (2^32 - w_u) / 2^32 in [2^-32, 1] with
  w_u the word read as unsigned (`complements_from_words`): the whole
  word, so E reaches 32 ln 2 = 22.18 and its top grid cells (V = j 2^-32
  for small j) are exact in float32 (d_chi's radius and Box-Muller);
- an exponential from TWO words (`complements_from_word_pairs`, the
  Laplace noise): V = 1 - U, U = (w1_u 2^24 + (w2_u >> 8)) / 2^56 a
  56-bit uniform, so E reaches 56 ln 2 = 38.8 and its grid is coarser
  than float32's own resolution (2^-24 relative) only where E > 32 ln 2,
  with probability 2^-32 (`tfdptext.privacy.laplace`).

No inverse-CDF form that can reach log(0) is used: float uniforms are
clamped to at most the largest float32 below 1, so -log1p(-U) <= 16.6,
and a word's V is at least 2^-32.

The formulas themselves (an exponential from a uniform, Laplace from two
exponentials, Gamma from a sum, a direction from normals) live once in
`tfdptext.layers.noise_math` (keras.ops), which the other backends use
with `keras.random`; this module is the TensorFlow side: its unseeded
draws (`TENSORFLOW_UNSEEDED`) and the phone's words.
"""

import tensorflow as tf

from tfdptext.layers import noise_math

_BELOW_ONE = noise_math.BELOW_ONE
# Bits of the uniform and integer made from a word, and of the exponential.
WORD_UNIFORM_BITS = 24
WORD_EXPONENTIAL_BITS = 32
# TensorFlow's and TFLite's RANDOM_UNIFORM: 23 random mantissa bits.
INTERNAL_UNIFORM_BITS = 23
_TWO_32 = 4294967296.0


def _clamp(u):
    return noise_math.clamp_unit(u)


class _TensorFlowUnseeded:
    """The randomness source of `noise_math` under TensorFlow: unseeded
    RANDOM_UNIFORM and RANDOM_STANDARD_NORMAL (no seed is ever baked into
    an export)."""

    @staticmethod
    def shape(x):
        return tf.shape(x)

    @staticmethod
    def uniform(shape):
        return tf.random.uniform(shape, minval=0.0, maxval=1.0)

    @staticmethod
    def normal(shape):
        return tf.random.normal(shape)


TENSORFLOW_UNSEEDED = _TensorFlowUnseeded()


def are_words(uniforms):
    """Whether `uniforms` are int32 random words (not float uniforms)."""
    return uniforms is not None and tf.as_dtype(uniforms.dtype).is_integer


def uniforms_from_words(words):
    """U[0, 1) float32 numbers from int32 words: (w mod 2^24) / 2^24."""
    low = tf.math.floormod(tf.cast(words, tf.int32), 2**WORD_UNIFORM_BITS)
    return tf.cast(low, tf.float32) * 2.0**-WORD_UNIFORM_BITS


def complements_from_words(words):
    """V = (2^32 - w_u) / 2^32 in [2^-32, 1] from int32 words (w_u: the
    word read as an unsigned integer): 1 - U for a 32-bit uniform U,
    computed so that small V (the exponential's tail) is exact.

    w >= 0: V = (2^32 - w) / 2^32 in (1/2, 1]; w < 0: w_u = w + 2^32 and
    V = -w / 2^32 in [2^-32, 1/2], exact in float32 for |w| < 2^24.
    """
    value = tf.cast(tf.cast(words, tf.int32), tf.float32)
    return tf.where(value < 0.0, -value, _TWO_32 - value) * 2.0**-32


def complements_from_word_pairs(words):
    """V = 1 - U in [2^-56, 1] from int32 words (..., 2): U = (w1_u 2^24 +
    (w2_u >> 8)) / 2^56, the first word's 32 bits above the second's top
    24 (w_u: the words read as unsigned). Computed as ((2^32 - w1_u) - c)
    2^-32 with c = (w2_u >> 8) 2^-24 in [0, 1 - 2^-24] (exact): near V =
    2^-32 (the tail of E) every bit is kept."""
    words = tf.cast(words, tf.int32)
    high = complements_from_words(words[..., 0]) * _TWO_32
    low = tf.math.floormod(tf.bitwise.right_shift(words[..., 1], 8),
                           2**24)
    return (high - tf.cast(low, tf.float32) * 2.0**-24) * 2.0**-32


def uniform(shape, uniforms=None):
    """U[0, 1) samples of `shape`, drawn or taken from `uniforms` (floats,
    or int32 words)."""
    if are_words(uniforms):
        return uniforms_from_words(uniforms)
    if uniforms is not None:
        return _clamp(uniforms)
    return _clamp(TENSORFLOW_UNSEEDED.uniform(shape))


def random_integers(shape, uniforms=None):
    """(k, bits): int32 integers uniform on [0, 2^bits) and their bits.

    From words: k = w mod 2^24 (24 bits). From float uniforms: k =
    floor(U 2^24), exact for multiples of 2^-24 (24 bits). Drawn: TF's
    RANDOM_UNIFORM, whose floats are multiples of 2^-23: k = U 2^23
    exactly (23 bits).
    """
    if are_words(uniforms):
        return (tf.math.floormod(tf.cast(uniforms, tf.int32),
                                 2**WORD_UNIFORM_BITS), WORD_UNIFORM_BITS)
    if uniforms is not None:
        bits = WORD_UNIFORM_BITS
        u = _clamp(uniforms)
    else:
        bits = INTERNAL_UNIFORM_BITS
        u = uniform(shape)
    return tf.cast(tf.floor(u * float(2**bits)), tf.int32), bits


def exponential(shape, uniforms=None):
    """Exp(1) samples: -log(V) from words (32 bits), -log1p(-U) from
    float uniforms or drawn ones."""
    if are_words(uniforms):
        return -tf.math.log(complements_from_words(uniforms))
    return noise_math.exponential_from_uniform(uniform(shape, uniforms))


def laplace(shape, scale, uniforms=None):
    """Lap(scale) samples, as scale * (E1 - E2), E1, E2 ~ Exp(1) i.i.d.

    With float `uniforms`, their shape is `shape + [2]`; with int32 words,
    `shape + [2, 2]`: two words per exponential
    (`complements_from_word_pairs`).
    """
    if uniforms is None:
        return noise_math.laplace(shape, scale, TENSORFLOW_UNSEEDED)
    if are_words(uniforms):
        e = -tf.math.log(complements_from_word_pairs(uniforms))
    else:
        e = exponential(None, uniforms)
    return noise_math.laplace_from_exponentials(e[..., 0], e[..., 1], scale)


def gamma_integer_shape(batch_shape, shape_k, scale, uniforms=None):
    """Gamma(shape_k, scale) for an integer shape_k, as a sum of exponentials.

    `tf.random.gamma` is not a TFLite builtin; a sum of k i.i.d. Exp(1)
    variables is exactly Gamma(k, 1). Returns shape `batch_shape + [1]`;
    `uniforms`, if given, has shape `batch_shape + [shape_k]`.
    """
    uniform_shape = None if uniforms is not None else tf.concat(
        [batch_shape, [shape_k]], axis=0)
    return noise_math.gamma_from_exponentials(
        exponential(uniform_shape, uniforms), scale)


def normal_from_uniforms(uniforms, n):
    """n standard normals per row from 2 * ceil(n / 2) uniforms or words
    (Box-Muller: radius sqrt(2 E) from the first half, angle 2 pi U from
    the second)."""
    half = (n + 1) // 2
    radius = tf.sqrt(2.0 * exponential(None, uniforms[..., :half]))
    angle = 6.283185307179586 * uniform(None, uniforms[..., half:2 * half])
    z = tf.concat([radius * tf.cos(angle), radius * tf.sin(angle)], axis=-1)
    return z[..., :n]


def unit_directions(shape, n=None, uniforms=None):
    """Uniform directions on the unit sphere over the last axis."""
    if uniforms is None:
        z = TENSORFLOW_UNSEEDED.normal(shape)
    else:
        z = normal_from_uniforms(uniforms, n)
    return noise_math.unit_directions(z)


# How many uniforms d_chi noise needs for one n-dim vector.
dchi_uniforms_per_vector = noise_math.dchi_uniforms_per_vector


def dchi_exponentials_per_vector(n):
    """How many of them are read as exponentials (the radius's n and the
    Box-Muller radii's ceil(n / 2)): the draws whose grid bounds the
    sampler (`tfdptext.privacy.metric.truncation_probability`)."""
    return n + (n + 1) // 2


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
        return noise_math.dchi(shape, eta, TENSORFLOW_UNSEEDED)
    radius = gamma_integer_shape(None, n, 1.0 / eta, uniforms[..., :n])
    return radius * unit_directions(None, n, uniforms[..., n:])
