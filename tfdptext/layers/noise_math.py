"""The noise formulas of the mechanisms, in `keras.ops` (any backend).

One copy of the math, two kinds of randomness source:

- `sampling.TENSORFLOW_UNSEEDED` (`tfdptext.layers.sampling`): TensorFlow's
  unseeded RANDOM_UNIFORM / RANDOM_STANDARD_NORMAL, what a layer draws
  under the TensorFlow backend and what an exported phone model keeps
  (never a seed baked in);
- `KerasRandom`: `keras.random` with the layer's own `SeedGenerator`, what
  a layer draws under the other backends (JAX), where random ops inside a
  compiled step need a seed state. It is a seeded generator: such noise is
  for server-side training, never a release that leaves a user
  (`default_randomness`).

A source has `shape(x)` (the shape to draw for a tensor like `x`),
`uniform(shape)` (U[0, 1)) and `normal(shape)` (N(0, 1)). The phone-side
paths that read the app's secure random words stay in `sampling`
(TensorFlow); they feed their numbers into the same formulas below.
"""

import keras
from keras import ops

from tfdptext.privacy import randomness as randomness_lib

# The largest float32 below 1: clamping makes log1p(-U) finite even where a
# kernel (or an app) returned 1.
BELOW_ONE = 1.0 - 2.0**-24


def is_tensorflow():
    """Whether Keras runs on TensorFlow (the phone path's backend)."""
    return keras.backend.backend() == "tensorflow"


def default_randomness():
    """Where a layer called directly draws its noise from, as a
    `tfdptext.privacy.randomness` source: TensorFlow's unseeded ops under
    TensorFlow, a seeded generator (`keras.random`) elsewhere."""
    return (randomness_lib.TENSORFLOW_UNSEEDED if is_tensorflow()
            else randomness_lib.SEEDED)


def clamp_unit(u):
    """`u` as float32 in [0, 1 - 2^-24]."""
    return ops.minimum(ops.maximum(ops.cast(u, "float32"), 0.0), BELOW_ONE)


def exponential_from_uniform(u):
    """Exp(1) as -log1p(-U), at most 16.6 (U clamped below 1)."""
    return -ops.log1p(-clamp_unit(u))


def laplace_from_exponentials(e1, e2, scale):
    """Lap(scale) as scale * (E1 - E2), E1, E2 ~ Exp(1) i.i.d."""
    return scale * (e1 - e2)


def gamma_from_exponentials(exponentials, scale):
    """Gamma(k, scale) from k i.i.d. Exp(1) along the last axis (their sum
    is exactly Gamma(k, 1)); the last axis is kept with size 1."""
    return scale * ops.sum(exponentials, axis=-1, keepdims=True)


def unit_directions(z):
    """`z` scaled to unit norm over its last axis (a normal vector: a
    uniform direction on the sphere)."""
    norm = ops.sqrt(ops.sum(ops.square(z), axis=-1, keepdims=True))
    return z / ops.maximum(norm, 1e-30)


def laplace(shape, scale, source):
    """Lap(scale) noise of `shape`, drawn from `source`."""
    return laplace_from_exponentials(
        exponential_from_uniform(source.uniform(shape)),
        exponential_from_uniform(source.uniform(shape)), scale)


def dchi(shape, eta, source):
    """Noise with density proportional to exp(-eta ||z||) over the last
    axis of `shape` (n coordinates): radius Gamma(n, 1 / eta) (a sum of n
    exponentials), direction uniform on the sphere."""
    radius = gamma_from_exponentials(
        exponential_from_uniform(source.uniform(shape)), 1.0 / eta)
    return radius * unit_directions(source.normal(shape))


def dchi_uniforms_per_vector(n):
    """How many uniforms d_chi noise from given numbers needs for one n-dim
    vector: n (the radius) and 2 ceil(n / 2) (Box-Muller's normals)."""
    return n + 2 * ((n + 1) // 2)


class KerasRandom:
    """A randomness source over `keras.random` and a `SeedGenerator` (owned
    by the layer, so a compiled step carries its state).

    Example:
    >>> source = KerasRandom(keras.random.SeedGenerator(0))
    >>> dchi(source.shape(x), 20.0, source)
    """

    def __init__(self, seed_generator):
        self.seed_generator = seed_generator

    @staticmethod
    def shape(x):
        return tuple(ops.shape(x))

    def uniform(self, shape):
        return keras.random.uniform(shape, 0.0, 1.0, dtype="float32",
                                    seed=self.seed_generator)

    def normal(self, shape):
        return keras.random.normal(shape, dtype="float32",
                                   seed=self.seed_generator)
