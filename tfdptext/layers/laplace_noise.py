"""LaplaceNoise: DPNR's Laplace perturbation of a [0, 1]^k representation."""

import keras
from keras import ops

from tfdptext.layers import base
from tfdptext.layers import noise_math
from tfdptext.privacy import laplace as laplace_accounting
from tfdptext.privacy import validation


@keras.saving.register_keras_serializable(package="tfdptext")
class LaplaceNoise(base.PrivatizationLayer):
    """Adds independent Laplace noise to every coordinate (DPNR Alg. 2).

    Runs on any Keras backend (the math in `tfdptext.layers.noise_math`);
    with `uniforms` (the phone's random words, `apply`) it uses
    TensorFlow's samplers.

    Inputs are clipped to [0, 1] first (put `MinMaxNormalize` before this
    layer), so the sensitivity of one coordinate is 1 and of the k-vector k.

    Args:
        epsilon: privacy parameter, finite and > 0.
        sensitivity: `"per_coordinate"` (the DPNR paper: b = 1 / epsilon;
            epsilon is per coordinate and the whole k-vector is
            (k * epsilon)-LDP) or `"vector"` (b = k / epsilon; epsilon for
            the whole representation).
        noise: False switches noise off (debugging only; no guarantee).

    Example:
    >>> layer = LaplaceNoise(epsilon=1.0, sensitivity="vector")
    >>> noisy = layer(np.random.rand(2, 384).astype("float32"))
    >>> print(layer.guarantee())  # 1-LDP per representation
    """

    def __init__(self, epsilon, sensitivity="per_coordinate", noise=True,
                 **kwargs):
        super().__init__(noise=noise, **kwargs)
        self.epsilon = validation.check_positive("epsilon", epsilon)
        self.sensitivity = validation.check_choice(
            "sensitivity", sensitivity, laplace_accounting.SENSITIVITY_MODES)
        # Refuses an epsilon whose noise would overflow float32 now, not at
        # the first call (vector mode checks again with k at build).
        laplace_accounting.laplace_scale(self.epsilon)
        self.dimension = None
        self.scale = None

    def build(self, input_shape):
        self._check_rank(input_shape, 2)
        self.dimension = int(input_shape[-1])
        self.scale = laplace_accounting.noise_scale(
            self.epsilon, self.dimension, self.sensitivity)
        super().build(input_shape)

    def apply(self, inputs, uniforms=None):
        self._check_built_width(inputs, self.dimension)
        raw = ops.cast(inputs, "float32")
        x = ops.clip(raw, 0.0, 1.0)
        if uniforms is not None:
            from tfdptext.layers import sampling

            x = x + sampling.laplace(None, self.scale, uniforms)
        elif self._noisy(None):
            source = self.noise_source()
            x = x + noise_math.laplace(source.shape(x), self.scale, source)
        return base.nan_unless(base.finite_rows(raw), x)

    def uniforms_shape(self, input_shape):
        return tuple(input_shape[1:]) + (2,)

    def words_shape(self, input_shape):
        # Two words per exponential (`sampling.laplace`).
        return tuple(input_shape[1:]) + (2, 2)

    def _guarantee(self):
        return laplace_accounting.laplace_guarantee(
            self.epsilon, self.dimension, self.sensitivity)

    def _guarantee_for(self, randomness):
        return laplace_accounting.laplace_guarantee(
            self.epsilon, self.dimension, self.sensitivity,
            uniform_bits=laplace_accounting.exponential_bits(randomness))

    def get_config(self):
        config = super().get_config()
        config.update(
            {"epsilon": self.epsilon, "sensitivity": self.sensitivity})
        return config
