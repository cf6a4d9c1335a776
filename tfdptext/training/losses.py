"""The loss of training on labels that went through a known channel
(`keras.ops`: any backend).

(The code release's loss, the exact expected loss over its own channel, is
`tfdptext.models.code.ExpectedNegativeLogLikelihood`.)

- `ForwardCorrectedCrossentropy`: labels randomized by K-ary randomized
  response (label privacy). The model's class probabilities p go through
  the known transition matrix T before the cross-entropy with the noisy
  label: -log (p T)_y~ (Patrini et al. 2017, "Making deep neural networks
  robust to label noise: a loss correction approach"). Minimising it in
  expectation over the noisy labels recovers the clean posterior, since T
  is invertible for every epsilon > 0.
"""

import keras
import numpy as np
from keras import ops

from tfdptext.errors import ArgumentError


def _labels(y_true):
    return ops.reshape(ops.cast(y_true, "int32"), (-1,))


def check_transition(transition, num_classes=None):
    """A (K, K) row-stochastic float32 matrix with no zero entry (forward
    correction takes its log), or ArgumentError."""
    matrix = np.asarray(transition, np.float64)
    k = matrix.shape[0] if matrix.ndim == 2 else None
    if (matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]
            or (num_classes is not None and k != num_classes)
            or not np.isfinite(matrix).all() or (matrix <= 0).any()
            or not np.allclose(matrix.sum(axis=1), 1.0, atol=1e-6)):
        raise ArgumentError(
            "`transition` must be a square row-stochastic matrix with "
            "positive entries" + (f" of size {num_classes}" if num_classes
                                  else "") + f", received {matrix.tolist()}.")
    return matrix.astype(np.float32)


@keras.saving.register_keras_serializable(package="tfdptext")
class ForwardCorrectedCrossentropy(keras.losses.Loss):
    """-log (softmax(logits) T)[noisy label], in log space.

    Args:
        transition: the (K, K) matrix P[noisy = j | clean = i].

    Example:
    >>> from tfdptext.privacy import categorical
    >>> loss = ForwardCorrectedCrossentropy(
    ...     categorical.transition_matrix(1.0, 2))
    """

    def __init__(self, transition, name="forward_corrected_crossentropy",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.transition = check_transition(transition)

    def call(self, y_true, y_pred):
        log_p = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
        log_t = ops.log(ops.convert_to_tensor(self.transition))
        # log sum_i p_i T_ij for every j: (batch, K, 1) + (K, K), over i.
        log_noisy = ops.logsumexp(log_p[:, :, None] + log_t[None], axis=1)
        picked = ops.take_along_axis(
            log_noisy, ops.expand_dims(_labels(y_true), -1), axis=-1)
        return -ops.squeeze(picked, -1)

    def get_config(self):
        config = super().get_config()
        config["transition"] = self.transition.tolist()
        return config
