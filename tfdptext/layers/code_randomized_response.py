"""CodeRandomizedResponse: m-ary randomized response on an integer code."""

import keras
import numpy as np
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import base
from tfdptext.layers import sampling
from tfdptext.privacy import categorical
from tfdptext.privacy import validation

# The grids of the random integers: random words and os.urandom give 24
# bits per uniform, TensorFlow's own RANDOM_UNIFORM 23 (multiples of
# 2^-23), so U * 2^bits is an exact integer in float32 either way.
_WORD_BITS = 24
_INTERNAL_BITS = 23


@keras.saving.register_keras_serializable(package="tfdptext")
class CodeRandomizedResponse(base.PrivatizationLayer):
    """Releases a code c in {0, ..., m - 1} by m-ary randomized response.

    Keeps c with probability e^eps / (e^eps + m - 1), else releases one of
    the other m - 1 codes, uniformly. Every random choice is integer
    arithmetic (`tfdptext.privacy.categorical`): keep iff k1 < T, else
    c + 1 + (k2 mod (m - 1)) mod m, with k1, k2 the integers of two
    uniforms (24 bits from random words, 23 from TensorFlow's own
    generator). No float is ever compared with a probability.

    Guarantee: eps-LDP per text for any two texts (delta = 0), as
    implemented: `guarantee().value` is the log of the largest ratio of
    the exact probabilities that run (modulo bias included), never below
    the true one.

    Inputs are int codes of any shape; ids outside [0, m) raise when called
    eagerly and give -1 in a graph (an unusable release the server
    refuses). Output: int32 codes of the same shape.

    Args:
        epsilon: privacy parameter per text, finite and > 0.
        num_codes: m, in [2, 65536].
        noise: False switches noise off (debugging only; no guarantee).

    Example:
    >>> layer = CodeRandomizedResponse(epsilon=2.0, num_codes=4)
    >>> released = layer(np.zeros((10000,), "int32"))
    >>> float((released.numpy() == 0).mean())  # about 0.71
    """

    def __init__(self, epsilon, num_codes, noise=True, **kwargs):
        super().__init__(noise=noise, **kwargs)
        self.epsilon = validation.check_positive("epsilon", epsilon)
        self.num_codes = categorical.check_num_values("num_codes", num_codes)
        self._thresholds = {
            bits: categorical.keep_threshold(self.epsilon, self.num_codes,
                                             bits)
            for bits in (_WORD_BITS, _INTERNAL_BITS)}

    def build(self, input_shape):
        if len(input_shape) < 1:
            raise ArgumentError(
                f"`inputs` of {self.name} must be integer codes of rank >= 1 "
                f"(batch, ...), received shape {tuple(input_shape)}.")
        super().build(input_shape)

    def apply(self, inputs, uniforms=None):
        self._check_numeric(inputs, integer=True)
        codes, valid = base.checked_token_ids(inputs, self.num_codes,
                                              self.name)
        if not self._noisy(uniforms):
            return tf.where(valid, codes, -1)
        shape = tf.concat([tf.shape(codes), [2]], axis=0)
        if uniforms is not None:
            uniforms = tf.reshape(uniforms, shape)
        k, bits = sampling.random_integers(shape, uniforms)
        keep = k[..., 0] < self._thresholds[bits]
        other = tf.math.floormod(
            codes + 1 + tf.math.floormod(k[..., 1], self.num_codes - 1),
            self.num_codes)
        return tf.where(valid, tf.where(keep, codes, other), -1)

    def uniforms_shape(self, input_shape):
        return tuple(input_shape[1:]) + (2,)

    def transition_matrix(self):
        """The (m, m) float32 matrix P[release = j | code = i] that runs
        with random words (the identity with noise off): the channel the
        training loss averages over."""
        if not self.noise:
            return np.eye(self.num_codes, dtype=np.float32)
        return categorical.transition_matrix(
            self.epsilon, self.num_codes, _WORD_BITS).astype(np.float32)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, dtype="int32")

    def _guarantee(self):
        return categorical.code_guarantee(self.epsilon, self.num_codes)

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon, "num_codes": self.num_codes})
        return config
