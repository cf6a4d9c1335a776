"""The base classes of the layers that randomize what leaves the user.

Two kinds, one base each:

- `PrivatizationLayer`: a mechanism (Laplace, d_chi, randomized response).
  Its output is the release, and `guarantee(randomness)` is a differential
  privacy guarantee on its own. Its default (and, in a split model,
  required) name is `PRIVATIZER` = "privatizer".
- `InputPerturbation`: a random change of the input before the encoder
  (word dropout). It is not differential privacy on its own: its
  `guarantee(base_guarantee, ...)` amplifies the guarantee of the mechanism
  that follows it. Its default (and required) name is
  `INPUT_PERTURBATION` = "input_perturbation".

Both share `RandomizedLayer`: noise on every call (inference included),
float32 compute, the `apply(inputs, uniforms)` hook through which a caller
supplies the randomness (`tfdptext.models.secure`), and input checks.
`privatization_layers(model)` finds the two in a user-side model by their
fixed names.

This module imports no TensorFlow: the layers whose math is written in
`keras.ops` (`LaplaceNoise`, `MinMaxNormalize`, `DChiNoise`,
`DChiTextPrivatizer`, `WordDropout`) run on any Keras backend; their
phone-side paths (randomness from the app's words) and the other layers
import TensorFlow themselves.
"""

import contextlib
import threading

import keras
import numpy as np
from keras import ops

from tfdptext.errors import ArgumentError
from tfdptext.layers import noise_math
from tfdptext.privacy import guarantee as guarantee_lib

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
    return ops.all(ops.abs(x) <= _FLOAT32_MAX, axis=-1, keepdims=True)


def nan_unless(ok, values):
    """`values` where `ok` (broadcast), NaN elsewhere: an unusable release
    rather than a wrong one (fail closed)."""
    return ops.where(ok, values, ops.cast(float("nan"), values.dtype))


def checked_token_ids(inputs, vocabulary_size, layer_name):
    """(int32 ids with invalid ones set to 0, validity mask). Ids outside
    [0, vocabulary_size) raise when called eagerly; in a graph (a traced
    or compiled step) the caller releases -1 for them (an unusable release
    the server refuses). Any backend."""
    token_ids = ops.cast(inputs, "int32")
    valid = ops.logical_and(token_ids >= 0, token_ids < vocabulary_size)
    values = _values_now(valid)
    if values is not None and not values.all():
        bad = np.asarray(_values_now(token_ids))[~values]
        raise ArgumentError(
            f"`inputs` of {layer_name} must be token ids in [0, "
            f"{vocabulary_size}), received {bad[:10]}.")
    return ops.where(valid, token_ids, 0), valid


def _values_now(x):
    """`x` as numpy when it holds values (an eager call), else None (a
    TensorFlow graph, a JAX trace)."""
    if noise_math.is_tensorflow():
        import tensorflow as tf

        return x.numpy() if tf.executing_eagerly() else None
    if keras.backend.backend() == "jax":
        import jax

        if isinstance(x, jax.core.Tracer):
            return None
    return np.asarray(x)


PRIVATIZER = "privatizer"
INPUT_PERTURBATION = "input_perturbation"


class RandomizedLayer(keras.layers.Layer):
    """The common base of mechanisms and input perturbations (see the
    module docstring); not used directly.

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

    # The layer's name when none is given.
    default_name = None

    def __init__(self, noise=True, **kwargs):
        if kwargs.get("name") is None and self.default_name:
            kwargs["name"] = self.default_name
        if not isinstance(noise, bool):
            raise ArgumentError(f"`noise` must be True or False, got {noise!r}.")
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.noise = noise
        # Under a backend other than TensorFlow, random ops inside a
        # compiled step need a seed state owned by the layer. Its state is
        # not saved with the weights, and under TensorFlow (the phone
        # path, exports) there is none: no seed is ever baked in.
        self.seed_generator = (None if noise_math.is_tensorflow() else
                               keras.random.SeedGenerator())

    def noise_source(self):
        """The source of `tfdptext.layers.noise_math` a direct call draws
        from: TensorFlow's unseeded ops, or `keras.random` with this
        layer's SeedGenerator under another backend."""
        if self.seed_generator is None:
            from tfdptext.layers import sampling

            return sampling.TENSORFLOW_UNSEEDED
        return noise_math.KerasRandom(self.seed_generator)

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

    def words_shape(self, input_shape):
        """Per-example shape of the int32 random words `apply` needs in
        their place (`tfdptext.models.secure`): the uniforms' shape, unless
        the layer reads several words per number."""
        return self.uniforms_shape(input_shape)

    def _noisy(self, uniforms):
        if uniforms is not None:
            return True
        return self.noise and not getattr(_CALLER_RANDOMNESS, "active",
                                          False)

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
        dtype = getattr(inputs, "dtype", None)
        if dtype is None:
            dtype = np.asarray(inputs).dtype
        dtype = keras.backend.standardize_dtype(dtype)
        is_integer = "int" in dtype
        numeric = is_integer or "float" in dtype or dtype == "bool"
        if (integer and not is_integer) or not numeric:
            kind = "integer token ids" if integer else "numbers"
            raise ArgumentError(
                f"`inputs` of {self.name} must be {kind}, received dtype "
                f"{dtype}.")

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


class PrivatizationLayer(RandomizedLayer):
    """A mechanism: its output is the release, with its own guarantee.

    Subclasses implement `apply`, `uniforms_shape` and `_guarantee`.
    """

    default_name = PRIVATIZER

    def guarantee(self, randomness=None):
        """The `tfdptext.privacy.Guarantee` of this layer's output.

        Args:
            randomness: where the noise comes from (see
                `tfdptext.privacy.randomness`); None: what a direct call of
                the layer uses (`noise_math.default_randomness`:
                TensorFlow's unseeded ops, or a seeded generator under
                another backend).
        """
        if randomness is None:
            randomness = noise_math.default_randomness()
        if not self.noise:
            return guarantee_lib.Guarantee.none(
                self.name, "noise is switched off (noise=False)")
        return self._guarantee_for(randomness).with_randomness(randomness)

    def _guarantee_for(self, randomness):
        """The guarantee with noise from `randomness` (mechanisms whose
        delta depends on the source's grid override this)."""
        del randomness
        return self._guarantee()

    def _guarantee(self):
        raise NotImplementedError


class InputPerturbation(RandomizedLayer):
    """A random change of the input before the encoder (word dropout).

    Not differential privacy on its own: `guarantee(base_guarantee, ...)`
    is the amplified guarantee of the mechanism that follows it.
    """

    default_name = INPUT_PERTURBATION


def privatization_layers(model):
    """(input perturbation, mechanism) of a user-side model, found by
    their fixed names among `model.layers`; None for each one absent.

    Raises ArgumentError when a layer holds one of the names without being
    of the matching kind, or when a randomized layer has another name (it
    would be missed: fail closed).
    """
    found = {layer.name: layer for layer in model.layers}
    for layer in model.layers:
        if isinstance(layer, RandomizedLayer) and \
                layer.name not in (PRIVATIZER, INPUT_PERTURBATION):
            raise ArgumentError(
                f"The {type(layer).__name__} of {model.name} is named "
                f"{layer.name!r}; a user side's mechanism must be named "
                f"{PRIVATIZER!r} and its input perturbation "
                f"{INPUT_PERTURBATION!r} (the layers' default names) so that "
                "export and evaluation find them.")
    result = []
    for name, kind in ((INPUT_PERTURBATION, InputPerturbation),
                       (PRIVATIZER, PrivatizationLayer)):
        layer = found.get(name)
        if layer is not None and not isinstance(layer, kind):
            raise ArgumentError(
                f"The layer {name!r} of {model.name} is a "
                f"{type(layer).__name__}, not a {kind.__name__}; the name "
                f"{name!r} is reserved for it.")
        result.append(layer)
    return tuple(result)
