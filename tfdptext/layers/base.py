"""The base class of the privatization layers."""

import contextlib
import threading

import keras
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import randomness

# The largest finite float32: |x| <= this is False for NaN and +-inf
# (ABS and LESS_EQUAL are TFLite builtins; tf.math.is_finite is not).
_FLOAT32_MAX = 3.4028234663852886e38


_CALLER_RANDOMNESS = threading.local()


@contextlib.contextmanager
def randomness_from_caller():
    """Within this block, privatization layers called without `uniforms`
    add no noise: the caller applies it with `apply(x, uniforms)` from its
    own random source (see tfdptext.models.secure). It applies while a
    model is called or traced inside the block, and to nothing else."""
    previous = getattr(_CALLER_RANDOMNESS, "active", False)
    _CALLER_RANDOMNESS.active = True
    try:
        yield
    finally:
        _CALLER_RANDOMNESS.active = previous


def finite_rows(x):
    """(..., 1) booleans: whether every value along the last axis is finite."""
    return tf.reduce_all(tf.abs(x) <= _FLOAT32_MAX, axis=-1, keepdims=True)


def nan_unless(ok, values):
    """`values` where `ok` (broadcast), NaN elsewhere: an unusable release
    rather than a wrong one (fail closed)."""
    return tf.where(ok, values, tf.constant(float("nan"), values.dtype))


class PrivatizationLayer(keras.layers.Layer):
    """A layer that privatizes its input and states its guarantee.

    Noise is applied whenever the layer is called, in training AND at
    inference: on the user side, inference is where privacy is needed. Pass
    `noise=False` only for debugging and parity checks; `guarantee()` then
    says there is no privacy.

    Computation is in float32 whatever the global dtype policy, so the noise
    is never sampled in float16. An input vector holding NaN or +-inf gives
    an all-NaN output vector: never a release that looks valid.

    Randomness: called directly, the layer draws from TensorFlow's unseeded
    random ops (not a cryptographic generator; see
    `tfdptext.privacy.randomness`). Releases that leave a user should use
    `tfdptext.models.secure.SecureUserSide` (OS entropy) or an exported
    model fed by the app's secure generator, which call `apply` with
    uniforms from those sources.
    """

    def __init__(self, noise=True, **kwargs):
        if not isinstance(noise, bool):
            raise ArgumentError(f"`noise` must be True or False, got {noise!r}.")
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.noise = noise

    def call(self, inputs):
        return self.apply(inputs)

    def apply(self, inputs, uniforms=None):
        """The layer's output; with `uniforms` (U[0, 1) numbers of shape
        (batch,) + `uniforms_shape(...)`), the noise is computed from them
        and is applied even when `noise=False` (export with
        noise_source=input)."""
        raise NotImplementedError

    def uniforms_shape(self, input_shape):
        """Per-example shape of the uniforms `apply` needs (no batch)."""
        raise NotImplementedError

    def _noisy(self, uniforms):
        if uniforms is not None:
            return True
        return self.noise and not getattr(_CALLER_RANDOMNESS, "active",
                                          False)

    def guarantee(self, randomness=randomness.TENSORFLOW_UNSEEDED):
        """The `tfdptext.privacy.Guarantee` of this layer's output.

        Args:
            randomness: where the noise comes from (see
                `tfdptext.privacy.randomness`); a direct call of the layer
                uses TensorFlow's unseeded ops.
        """
        if not self.noise:
            return guarantee_lib.Guarantee.none(
                self.name, "noise is switched off (noise=False)")
        return self._guarantee().with_randomness(randomness)

    def _guarantee(self):
        raise NotImplementedError

    @staticmethod
    def _check_rank(input_shape, min_rank, name="inputs"):
        rank = len(input_shape)
        if rank < min_rank:
            raise ArgumentError(
                f"`{name}` must have rank >= {min_rank} (batch, ..., "
                f"features), received shape {tuple(input_shape)}."
            )
        if input_shape[-1] is None:
            raise ArgumentError(
                f"The last dimension of `{name}` must be known, received "
                f"shape {tuple(input_shape)}."
            )

    def _check_numeric(self, inputs, integer=False):
        """Refuses strings (and, with `integer`, non-integer ids) with a
        message naming the layer, instead of a TensorFlow cast error."""
        dtype = tf.as_dtype(getattr(inputs, "dtype", None) or
                            tf.convert_to_tensor(inputs).dtype)
        if dtype == tf.string or (integer and not dtype.is_integer) or \
                not (dtype.is_integer or dtype.is_floating or dtype.is_bool):
            kind = "integer token ids" if integer else "numbers"
            raise ArgumentError(
                f"`inputs` of {self.name} must be {kind}, received dtype "
                f"{dtype.name}.")

    def _check_built_width(self, inputs, width):
        """Refuses an input whose last axis differs from the one the layer
        was built for: its noise scale and guarantee were set for that
        width (a wider vector would get too little noise)."""
        self._check_numeric(inputs)
        received = inputs.shape[-1]
        if width is not None and received is not None and \
                int(received) != width:
            raise ArgumentError(
                f"`inputs` of {self.name} must have last dimension {width} "
                f"(the layer was built for it; its noise and guarantee "
                f"depend on it), received shape {tuple(inputs.shape)}. Use "
                "a new layer for another width.")

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"noise": self.noise})
        config.pop("dtype", None)
        return config
