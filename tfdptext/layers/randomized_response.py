"""RandomizedResponse: per-bit randomized response on binary embeddings."""

import keras
import tensorflow as tf

from tfdptext.layers import base
from tfdptext.layers import sampling
from tfdptext.privacy import randomized_response as rr
from tfdptext.privacy import validation


@keras.saving.register_keras_serializable(package="tfdptext")
class RandomizedResponse(base.PrivatizationLayer):
    """Keeps each bit with probability e^eps / (1 + e^eps), else flips it.

    Inputs are read as bits by thresholding at 0.5 (so a {0, 1} code passes
    unchanged and nothing else can widen the output range); output bits are
    float32 0.0 / 1.0. Each bit is flipped independently. The output is
    epsilon * d_Hamming metric-DP (BRR, Carvalho et al.).

    The flip is integer arithmetic, never a float compared with a float
    probability: a bit is kept iff k < T, with k a random integer of 24
    bits (random words, or float uniforms given to `apply`) or 23 bits
    (TensorFlow's own uniforms) and T = floor(p 2^bits)
    (`tfdptext.privacy.categorical.keep_threshold` with m = 2). The
    guarantee states the epsilon of those exact probabilities (never more
    than requested: the keep probability is rounded down).

    Args:
        epsilon: privacy parameter per bit, finite and > 0.
        noise: False switches noise off (debugging only; no guarantee).

    Example:
    >>> layer = RandomizedResponse(epsilon=2.0)
    >>> bits = layer(np.ones((4, 256), "float32"))
    >>> bits.numpy().mean()  # about e^2 / (1 + e^2) = 0.88
    """

    def __init__(self, epsilon, noise=True, **kwargs):
        super().__init__(noise=noise, **kwargs)
        self.epsilon = validation.check_positive("epsilon", epsilon)
        self.thresholds = rr.keep_thresholds(self.epsilon)
        self.flip_probability = rr.implemented_flip_probability(
            self.epsilon)
        self.num_bits = None

    def build(self, input_shape):
        self._check_rank(input_shape, 2)
        self.num_bits = int(input_shape[-1])
        super().build(input_shape)

    def apply(self, inputs, uniforms=None):
        self._check_built_width(inputs, self.num_bits)
        raw = tf.cast(inputs, tf.float32)
        bits = tf.cast(raw > 0.5, tf.float32)
        if self._noisy(uniforms):
            k, grid = sampling.random_integers(tf.shape(bits), uniforms)
            bits = tf.where(k < self.thresholds[grid], bits, 1.0 - bits)
        return base.nan_unless(base.finite_rows(raw), bits)

    def uniforms_shape(self, input_shape):
        return tuple(input_shape[1:])

    def _guarantee(self):
        return rr.rr_guarantee(self.epsilon, self.num_bits)

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon})
        return config
