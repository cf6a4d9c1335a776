"""MinMaxNormalize: per-example min-max scaling to [0, 1]."""

import keras
from keras import ops

from tfdptext.errors import ArgumentError
from tfdptext.layers import base


@keras.saving.register_keras_serializable(package="tfdptext")
class MinMaxNormalize(keras.layers.Layer):
    """Scales every vector to [0, 1] over its last axis (DPNR Alg. 2, step 3).

    x <- (x - min(x)) / (max(x) - min(x)), per example. A constant vector
    (max = min) becomes all zeros rather than NaN. The output is clipped to
    [0, 1] so the sensitivity bound of a following `LaplaceNoise` holds. A
    vector holding NaN or +-inf becomes all NaN (never a valid-looking
    vector: the noise layers then release NaN, which servers refuse).

    Runs on any Keras backend (`keras.ops`).

    Example:
    >>> layer = MinMaxNormalize()
    >>> layer(np.array([[1.0, 3.0, 2.0]])).numpy()
    array([[0. , 1. , 0.5]], dtype=float32)
    """

    def __init__(self, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)

    def build(self, input_shape):
        if len(input_shape) < 2:
            raise ArgumentError(
                "`inputs` must have rank >= 2 (batch, ..., features), "
                f"received shape {tuple(input_shape)}."
            )
        super().build(input_shape)

    def call(self, inputs):
        x = ops.cast(inputs, "float32")
        low = ops.min(x, axis=-1, keepdims=True)
        span = ops.max(x, axis=-1, keepdims=True) - low
        safe_span = ops.where(span > 0.0, span, ops.ones_like(span))
        scaled = ops.clip((x - low) / safe_span, 0.0, 1.0)
        return base.nan_unless(base.finite_rows(x), scaled)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        return config
