"""GradientReversal: identity forward, gradient times -lambda backward."""

import keras
import tensorflow as tf

from tfdptext.privacy import validation


@keras.saving.register_keras_serializable(package="tfdptext")
class GradientReversal(keras.layers.Layer):
    """Passes its input through unchanged; reverses and scales the gradient.

    Forward: y = x (exactly). Backward: dL/dx = -lambda_ * dL/dy. Put it
    between an encoder and an attacker head (Ganin & Lempitsky 2015; the ADV
    baseline of Lyu et al. 2020): the head learns to predict a private
    attribute while the encoder is pushed to make that harder. This is a
    training device for *empirical* privacy only; it gives no differential
    privacy guarantee. Needs the TensorFlow backend (`tf.custom_gradient`).

    Args:
        lambda_: the reversal weight, finite and >= 0 (0 blocks the gradient
            to the encoder: the heads then train on a fixed representation).

    Example:
    >>> layer = GradientReversal(0.5)
    >>> x = tf.constant([[1.0, 2.0]])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = layer(x)
    >>> y.numpy(), tape.gradient(y, x).numpy()
    (array([[1., 2.]], dtype=float32), array([[-0.5, -0.5]], dtype=float32))
    """

    def __init__(self, lambda_=1.0, **kwargs):
        super().__init__(**kwargs)
        self.lambda_ = validation.check_nonnegative("lambda_", lambda_)
        self.supports_masking = True

    def call(self, inputs):
        scale = -self.lambda_

        @tf.custom_gradient
        def reverse(x):
            def grad(upstream):
                return upstream * tf.cast(scale, upstream.dtype)

            return tf.identity(x), grad

        return reverse(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["lambda_"] = self.lambda_
        return config
