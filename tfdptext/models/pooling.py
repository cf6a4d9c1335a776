"""MaskedMeanPooling: the mean of the real (unpadded) token vectors."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="tfdptext")
class MaskedMeanPooling(keras.layers.Layer):
    """Averages (batch, length, dim) vectors over positions where mask = 1.

    The sentence embedding MiniLM (sentence-transformers) was trained with.

    Example:
    >>> pool = MaskedMeanPooling()
    >>> pool(np.ones((1, 3, 4)), np.array([[1, 1, 0]])).shape
    (1, 4)
    """

    def call(self, sequence, padding_mask):
        mask = ops.cast(padding_mask, sequence.dtype)[:, :, None]
        total = ops.sum(sequence * mask, axis=1)
        count = ops.maximum(ops.sum(mask, axis=1), 1.0)
        return total / count

    def compute_output_shape(self, sequence_shape, padding_mask_shape=None):
        return (sequence_shape[0], sequence_shape[-1])
