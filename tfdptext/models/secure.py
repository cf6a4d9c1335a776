"""User sides whose noise comes from a secure source: random words in.

TensorFlow's and TFLite's own random ops are keyed from 32 bits per process
(`tfdptext.privacy.randomness`), so a release that leaves a user must take
its randomness from elsewhere. `secure_user_model` wraps a trained user side
into a model with one more input, `random_words` (int32, one row of W words
per example), from which every random choice of the user side is made:
word dropout's positions and the privatization layer's noise. The phone
model of an export is this wrapper (the app fills the words from the
platform's secure generator); in Python, `SecureUserSide` fills them from
`os.urandom`.

The words are first mixed, then checked, in the graph. Mixed
(`tfdptext.privacy.extraction`): the user side's random choices read C
words, and the model takes N = g C (g >= 2, a power of two, N >= 128);
the word j the layers read is the sum modulo 2^32 of words j, j + C, ...,
j + (g - 1) C. When every such group holds one fresh word from the
secure generator, the release follows the stated channel exactly, so a
few bad words (an off-by-one, a header, the first or last words zero, a
stuck bit in some words) or a bad run of up to (g - 1) C consecutive
words can never choose it. Checked (`tfdptext.models.word_checks`, laws
and limits in `tfdptext.privacy.word_statistics`): on a fixed sample of
each row (every word up to 512, else four blocks of 128 spread over the
buffer), the count of ones at each of the 32 bit positions and the byte
collision counts (counters, Weyl sequences, LCGs), and over the whole
call the repeated words (a short array tiled, half the buffer copied,
rows that share words). These see the defects that extraction cannot
undo, which are shared by most of the buffer. A good buffer fails with
probability below 2^-40 per call. A release whose words fail is unusable
(all NaN; privatized token ids all -1), never a clean release. No check
can tell a predictable generator from a secure one (java.util.Random
seeded with the time passes every check): the app must use the
platform's secure generator.

Each consumed word gives a uniform U = (w mod 2^24) / 2^24, an integer
w mod 2^24 (randomized response), or an exponential from all 32 bits;
the Laplace noise reads two words per exponential
(`tfdptext.layers.sampling`): the privatization layers take the words
themselves (`words_shape`).
"""

import os

import keras
import numpy as np
import tensorflow as tf

from tfdptext.errors import TfdptextError
from tfdptext.layers import base as layers_base
from tfdptext.layers import sampling
from tfdptext.models import split as split_lib
from tfdptext.models import word_checks
from tfdptext.models import split_spec
from tfdptext.privacy import extraction
from tfdptext.privacy import randomness
from tfdptext.privacy import word_statistics

RANDOM_WORDS = "random_words"
INVALID_TOKEN_ID = -1
# The fewest random words a model takes (module docstring): 512 bytes, one
# block of the byte checks; a mechanism reading fewer words gets each of
# them mixed from more (a code release: 2 words, each the sum of 64).
MIN_RANDOM_WORDS = extraction.MIN_WORDS
# The most words one call (a batch) may carry: the checks refuse more.
MAX_WORDS_PER_CALL = word_statistics.MAX_WORDS_PER_CALL


class RandomnessError(TfdptextError):
    """A release came back unusable: its random words failed the checks or
    its representation was not finite."""


def os_random_words(shape):
    """int32 words from os.urandom, as a phone app fills `random_words`."""
    count = int(np.prod(shape))
    return np.frombuffer(os.urandom(4 * count), dtype=np.int32).reshape(shape)


def uniforms_from_words(words):
    """U[0, 1) float32 numbers from int32 words: (w mod 2^24) / 2^24."""
    return sampling.uniforms_from_words(words)


def words_look_random(words, consumed, used=None):
    """A scalar boolean: whether the call's random words, mixed into
    `consumed` words, pass the checks (module docstring); the
    repeated-word check runs over the whole batch."""
    return word_checks.words_look_random(words, consumed, used)


def find_layers(user):
    """(input perturbation or None, privatization layer or None) of a user
    side, by their fixed names (`tfdptext.layers.base`)."""
    return layers_base.privatization_layers(user)


def _split_words(used, sizes):
    """The consumed words (rows, C) cut into consecutive parts of `sizes`
    (SPLIT_V: a strided slice of a long buffer is much slower)."""
    sizes = [int(n) for n in sizes]
    if len(sizes) == 1:
        return [used]
    return tf.split(used, sizes, axis=1)


def _unusable_unless(ok, value):
    """The release where `ok` (a scalar: the call's verdict), else
    unusable: NaN, or token id -1."""
    if value.dtype.is_integer:
        return tf.where(ok, value, tf.constant(INVALID_TOKEN_ID,
                                               value.dtype))
    return layers_base.nan_unless(ok, value)


class _RandomWordsNoise(keras.layers.Layer):
    """Word dropout before, and noise after, a user side, from random words.

    Call with (features, random_words): returns the release. The words
    are checked and mixed into `consumed` words (`word_checks`): the first
    `dropout_words` go to word dropout, the rest to the privatization
    layer. The user side runs inside `randomness_from_caller()`, so it
    computes the clean value and every random choice comes from the
    words, which the layers take as they are (int32:
    `tfdptext.layers.sampling`).
    """

    def __init__(self, user, release_name, dropout, privatizer,
                 dropout_words, noise_shape, **kwargs):
        super().__init__(**kwargs)
        self.user = user
        self.release_name = release_name
        self.dropout = dropout
        self.privatizer = privatizer
        self.dropout_words = int(dropout_words)
        self.noise_shape = tuple(int(d) for d in noise_shape)
        self.noise_words = int(np.prod(self.noise_shape)) \
            if self.noise_shape else 0
        self.consumed = self.dropout_words + self.noise_words

    def call(self, features, random_words):
        words = tf.cast(random_words, tf.int32)
        used = word_checks.extract(words, self.consumed)
        ok = words_look_random(words, self.consumed, used)
        sizes = [n for n in (self.dropout_words, self.noise_words) if n]
        parts = _split_words(used, sizes)
        if self.dropout_words:
            features = self.dropout.apply(features, parts.pop(0))
        with layers_base.randomness_from_caller():
            value = self.user(features)[self.release_name]
        if self.noise_shape:
            value = self.privatizer.apply(
                value, tf.reshape(parts.pop(0), [-1, *self.noise_shape]))
        return _unusable_unless(ok, value)

    def compute_output_spec(self, features, random_words):
        released = self.user.compute_output_spec(features)[self.release_name]
        return keras.KerasTensor(released.shape, dtype=released.dtype)


class _CheckedPrivatizer(keras.layers.Layer):
    """A privatization layer applied to int32 random words (checked and
    mixed as in a phone model), its release made unusable when the words
    fail the checks."""

    def __init__(self, privatizer, **kwargs):
        super().__init__(**kwargs)
        self.privatizer = privatizer
        self.consumed = None

    def build(self, inputs_shape, words_shape=None):
        if not self.privatizer.built:
            self.privatizer.build(inputs_shape)
        self.consumed = int(np.prod(self.privatizer.words_shape(
            inputs_shape)))
        super().build(inputs_shape)

    def call(self, inputs, words):
        words = tf.cast(words, tf.int32)
        shape = [int(d) for d in self.privatizer.words_shape(inputs.shape)]
        consumed = int(np.prod(shape))
        used = word_checks.extract(words, consumed)
        value = self.privatizer.apply(inputs, tf.reshape(used, [-1, *shape]))
        return _unusable_unless(words_look_random(words, consumed, used),
                                value)

    def compute_output_spec(self, inputs, words):
        integer = "int" in str(inputs.dtype)
        return keras.KerasTensor(inputs.shape,
                                 dtype="int32" if integer else "float32")


def secure_privatizer_model(privatizer, input_shape, input_dtype="float32",
                            before=None):
    """A privatization layer alone, fed like a phone model: inputs `x`
    (batch, *input_shape) and `random_words` (int32, the layer's words
    mixed as in a phone model: `extraction.layout`), checked as a phone
    model checks them. `before`
    (a Keras layer, e.g. MinMaxNormalize) runs on x first. For audits
    and demonstrations without a trained user side.

    Example:
    >>> model = secure_privatizer_model(LaplaceNoise(1.0), (384,),
    ...                                 before=MinMaxNormalize())
    >>> model.input["random_words"].shape   # 4 per coordinate, mixed 2:1
    (None, 3072)
    """
    shape = tuple(int(d) for d in input_shape)
    x = keras.Input(shape, dtype=input_dtype, name="x")
    count = int(np.prod(privatizer.words_shape((None, *shape))))
    words = keras.Input((extraction.layout(count).words,), dtype="int32",
                        name=RANDOM_WORDS)
    value = before(x) if before is not None else x
    released = _CheckedPrivatizer(privatizer, name="noise_from_random_words")(
        value, words)
    return keras.Model({"x": x, RANDOM_WORDS: words}, released,
                       name="privatizer")


def consumed_words(user, split_point, max_length):
    """(dropout words, noise shape): what one example's random choices
    read before mixing: one word per position for word dropout, the
    privatization layer's `words_shape` for the release ((0, ()) parts
    when absent)."""
    dropout, privatizer = find_layers(user)
    count = max_length if dropout is not None and dropout.rate > 0 else 0
    shape = ()
    if privatizer is not None:
        value = _release_spec(user, split_point, max_length)
        shape = tuple(int(d) for d in privatizer.words_shape(value.shape))
    return count, shape


def words_per_example(user, split_point, max_length):
    """How many random words one example takes: the consumed words
    (`consumed_words`) times their group size (`extraction.layout`; at
    least MIN_RANDOM_WORDS), 0 when nothing is random."""
    count, shape = consumed_words(user, split_point, max_length)
    consumed = count + (int(np.prod(shape)) if shape else 0)
    return extraction.layout(consumed).words if consumed else 0


def _release_spec(user, split_point, max_length):
    """The KerasTensor of the user side's release for one example of
    `max_length` tokens."""
    features = {name: keras.KerasTensor((1, max_length), dtype="int32")
                for name in split_lib.FEATURES}
    return user.compute_output_spec(features)[
        split_spec.get(split_point).release]


def secure_user_model(user, split_point, max_length):
    """The user side with a `random_words` input (see module docstring).

    Inputs: `token_ids`, `padding_mask` (int32, (batch, max_length)) and
    `random_words` (int32, (batch, W), W = `words_per_example`). Output:
    {release name: release}. The user model itself is unchanged (called
    directly, it still draws its own noise).
    """
    name = split_spec.get(split_point).release
    dropout, privatizer = find_layers(user)
    num_words = words_per_example(user, split_point, max_length)
    if num_words == 0:
        raise ValueError("This user side draws no randomness (no noise "
                         "layer): it has no secure variant to build.")
    for layer in (dropout, privatizer):
        if layer is not None and not layer.noise:
            raise ValueError(
                f"The user side's {layer.name} has noise=False: it would "
                "release without noise; nothing secure to build.")
    ids = keras.Input((max_length,), dtype="int32", name="token_ids")
    mask = keras.Input((max_length,), dtype="int32", name="padding_mask")
    words = keras.Input((num_words,), dtype="int32", name=RANDOM_WORDS)
    features = {"token_ids": ids, "padding_mask": mask,
                "segment_ids": keras.ops.zeros_like(ids)}
    dropout_words, noise_shape = consumed_words(user, split_point,
                                                max_length)
    value = _RandomWordsNoise(user, name, dropout, privatizer,
                              dropout_words, noise_shape,
                              name="noise_from_random_words")(features, words)
    return keras.Model({"token_ids": ids, "padding_mask": mask,
                        RANDOM_WORDS: words}, {name: value},
                       name="privatizer")


def phone_consumed_words(model):
    """The words the mechanism of a model built here (`secure_user_model`,
    `secure_privatizer_model`, or a model wrapping one) reads per row,
    before mixing."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, (_RandomWordsNoise, _CheckedPrivatizer)):
            return layer.consumed
    raise ValueError(f"{model.name} takes no random words through a "
                     "checked privatization layer.")


def release_is_usable(value):
    """Whether every element of a release (numpy) is a valid value."""
    value = np.asarray(value)
    if np.issubdtype(value.dtype, np.integer):
        return bool((value >= 0).all())
    return bool(np.isfinite(value).all())


class SecureUserSide:
    """Runs a user side in Python with noise from os.urandom.

    Builds (and caches) one `secure_user_model` per input length, feeds
    every example fresh words from `os.urandom`, and raises RandomnessError
    if a release comes back unusable. A batch is run in calls of at most
    MAX_WORDS_PER_CALL words (the checks refuse larger calls).

    Args:
        user: a user-side Keras model (left unchanged).
        split_point: one of `tfdptext.models.SPLIT_POINTS`.
        max_tokens: the longest input (real tokens) the guarantee must hold
            for; needed only when the user side has word dropout.

    Attributes:
        guarantee: what the releases guarantee (randomness: os.urandom).

    Example:
    >>> secure = SecureUserSide(keras.models.load_model(
    ...     "runs/ag/user_side.keras"), "sequence_representation")
    >>> released = secure(tokenizer(["A sentence."]))
    """

    def __init__(self, user, split_point, max_tokens=None):
        dropout, privatizer = find_layers(user)
        if dropout is not None and max_tokens is None:
            max_tokens = 510
        self.guarantee = split_lib.user_side_guarantee(
            privatizer, dropout, max_tokens, randomness.OS_ENTROPY)
        self.user = user
        self.split_point = split_point
        self.release_name = split_spec.get(split_point).release
        self._models = {}

    def model(self, length):
        if length not in self._models:
            self._models[length] = secure_user_model(
                self.user, self.split_point, length)
        return self._models[length]

    def __call__(self, features):
        """The release for a batch of features (token_ids, padding_mask):
        {release name: numpy array}."""
        ids = np.asarray(features["token_ids"], np.int32)
        mask = np.asarray(features["padding_mask"], np.int32)
        model = self.model(ids.shape[1])
        width = int(model.input[RANDOM_WORDS].shape[-1])
        rows = max(1, MAX_WORDS_PER_CALL // width)
        parts = []
        for start in range(0, len(ids), rows):
            stop = start + rows
            out = model({"token_ids": ids[start:stop],
                         "padding_mask": mask[start:stop],
                         RANDOM_WORDS: os_random_words(
                             (len(ids[start:stop]), width))})
            parts.append(np.asarray(out[self.release_name]))
        value = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if not release_is_usable(value):
            raise RandomnessError(
                "The user side returned an unusable release (NaN or id -1): "
                "an input representation was not finite, or the random "
                "words failed their checks.")
        return {self.release_name: value}
