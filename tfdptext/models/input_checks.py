"""The phone model's checks of its token inputs, in the graph.

An app that feeds the phone model wrong token inputs got, before these
checks, a kernel's error or nothing at all: ids from a larger vocabulary
crashed TFLite's GATHER ("gather index out of bounds"), a negative id or
an all-ones mask ran silently and released a representation of something
that was not the text. The checks below are a few comparisons per token
(builtin ops only). When one fails, the release is unusable, exactly like
a release whose random words failed (all NaN, or ids / codes all -1, which
the server refuses), and a second output, `input_status`, says why:

    0  the inputs follow the contract
    1  a token id outside [0, vocabulary size)
    2  padding_mask is not 1s then 0s (values 0 / 1, at least [CLS] and
       [SEP] marked)
    4  padding_mask and token_ids disagree: a real position holds [PAD],
       or a padded one holds another id
    8  the first id is not [CLS], or the last real one is not [SEP]

(bits add up when several fail). A release that is unusable while
`input_status` is 0 failed its random words' checks
(`tfdptext.models.secure`). What the checks cannot see: ids from another
tokenizer of the same vocabulary (a cased one, one that drops accents
differently) are valid ids; the export's test vectors catch those
(`tfdptext.data.tokenizer_vectors`). A random-words buffer of the wrong
size cannot reach the graph: its length is fixed per signature and the
runtimes refuse another one (LiteRT.js, Android's Interpreter) or resize
the model to it (Python's signature runner), which `ExportedPipeline` and
the web client check before running.
"""

import keras
import tensorflow as tf

from tfdptext.layers import base as layers_base

INPUT_STATUS = "input_status"
IDS_OUTSIDE_VOCABULARY = 1
MASK_NOT_PREFIX = 2
MASK_IDS_DISAGREE = 4
NO_CLS_SEP = 8
# What each bit of input_status means (the manifest and the clients say it).
STATUS_MEANINGS = {
    IDS_OUTSIDE_VOCABULARY: "a token id outside [0, vocabulary size)",
    MASK_NOT_PREFIX: ("padding_mask is not 1s then 0s (0 / 1 values, "
                      "[CLS] and [SEP] marked)"),
    MASK_IDS_DISAGREE: ("padding_mask and token_ids disagree (a real "
                        "position holds [PAD] or a padded one another id)"),
    NO_CLS_SEP: "the first id is not [CLS] or the last real id not [SEP]",
}


def describe_status(status):
    """The meanings of the bits set in one `input_status` value."""
    status = int(status)
    return [text for bit, text in STATUS_MEANINGS.items() if status & bit]


class InputChecks(keras.layers.Layer):
    """(token_ids, padding_mask) -> (ids, mask, input_status).

    `ids` has every id outside the vocabulary replaced by [PAD] and `mask`
    is clipped to 0 / 1, so the model behind never sees an index its
    kernels cannot take; `input_status` (int32, (batch,)) is 0 when the
    inputs follow the contract, else the sum of the bits above.

    Args:
        vocabulary_size: ids must lie in [0, vocabulary_size).
        pad_id, cls_id, sep_id: the tokenizer's special ids.

    Example:
    >>> checks = InputChecks(30522, pad_id=0, cls_id=101, sep_id=102)
    >>> _, _, status = checks(np.array([[101, 7592, 102, 0]]),
    ...                       np.array([[1, 1, 1, 1]]))
    >>> int(status[0])   # a real position holds [PAD]
    4
    """

    def __init__(self, vocabulary_size, pad_id, cls_id, sep_id, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("vocabulary_size", vocabulary_size),
                            ("pad_id", pad_id), ("cls_id", cls_id),
                            ("sep_id", sep_id)):
            if isinstance(value, bool) or not isinstance(value, int) or \
                    value < 0:
                raise ValueError(f"`{name}` must be an integer >= 0, "
                                 f"received {value!r}.")
        for name, value in (("pad_id", pad_id), ("cls_id", cls_id),
                            ("sep_id", sep_id)):
            if value >= vocabulary_size:
                raise ValueError(f"`{name}` {value} must be below "
                                 f"`vocabulary_size` {vocabulary_size}.")
        self.vocabulary_size = vocabulary_size
        self.pad_id, self.cls_id, self.sep_id = pad_id, cls_id, sep_id

    def call(self, token_ids, padding_mask):
        ids = tf.cast(token_ids, tf.int32)
        mask = tf.cast(padding_mask, tf.int32)

        def failed(holds):  # (batch,) int32: 1 where a row fails
            return 1 - tf.cast(tf.reduce_all(holds, axis=1), tf.int32)

        in_vocabulary = tf.logical_and(ids >= 0, ids < self.vocabulary_size)
        binary = tf.logical_or(tf.equal(mask, 0), tf.equal(mask, 1))
        non_increasing = mask[:, 1:] <= mask[:, :-1]
        count = tf.reduce_sum(tf.clip_by_value(mask, 0, 1), axis=1)
        prefix = tf.concat([binary, non_increasing, (count >= 2)[:, None]],
                           axis=1)
        agree = tf.equal(tf.equal(mask, 1), tf.not_equal(ids, self.pad_id))
        positions = tf.range(tf.shape(ids)[1])[None, :]
        last = tf.reduce_sum(
            tf.where(tf.equal(positions, (count - 1)[:, None]), ids, 0),
            axis=1)
        ends = tf.stack([tf.equal(ids[:, 0], self.cls_id),
                         tf.equal(last, self.sep_id)], axis=1)
        status = (IDS_OUTSIDE_VOCABULARY * failed(in_vocabulary)
                  + MASK_NOT_PREFIX * failed(prefix)
                  + MASK_IDS_DISAGREE * failed(agree)
                  + NO_CLS_SEP * failed(ends))
        safe_ids = tf.where(in_vocabulary, ids, self.pad_id)
        return safe_ids, tf.clip_by_value(mask, 0, 1), status

    def compute_output_spec(self, token_ids, padding_mask):
        shape = token_ids.shape
        return (keras.KerasTensor(shape, dtype="int32"),
                keras.KerasTensor(shape, dtype="int32"),
                keras.KerasTensor(shape[:1], dtype="int32"))

    def get_config(self):
        return {**super().get_config(),
                "vocabulary_size": self.vocabulary_size,
                "pad_id": self.pad_id, "cls_id": self.cls_id,
                "sep_id": self.sep_id}


class _CheckedPhone(keras.layers.Layer):
    """Runs a phone model on checked inputs; its release is unusable (NaN,
    or -1 for integers) where `input_status` is not 0."""

    def __init__(self, phone, release, checks, **kwargs):
        super().__init__(**kwargs)
        self.phone = phone
        self.release = release
        self.checks = checks

    def build(self, inputs_shape):
        # The phone model is built and the checks hold no weights: nothing
        # to create. (Keras' default build would run `call` symbolically,
        # tracing the whole phone model once more per length: about 0.5
        # CPU-s of a small export, for nothing it keeps.)
        self.built = True

    def call(self, inputs):
        ids, mask, status = self.checks(inputs["token_ids"],
                                        inputs["padding_mask"])
        value = self.phone({**inputs, "token_ids": ids,
                            "padding_mask": mask})[self.release]
        ok = tf.reshape(tf.equal(status, 0),
                        [-1] + [1] * (len(value.shape) - 1))
        if value.dtype.is_integer:
            value = tf.where(ok, value, tf.constant(-1, value.dtype))
        else:
            value = layers_base.nan_unless(ok, value)
        return {self.release: value, INPUT_STATUS: status}

    def compute_output_spec(self, inputs):
        released = self.phone.compute_output_spec(inputs)[self.release]
        return {self.release: keras.KerasTensor(released.shape,
                                                dtype=released.dtype),
                INPUT_STATUS: keras.KerasTensor(
                    inputs["token_ids"].shape[:1], dtype="int32")}


def checked_phone_model(phone, release, tokenizer_config):
    """`phone` (inputs token_ids, padding_mask[, random_words]; output
    {release: ...}) with its token inputs checked: the same inputs, outputs
    {release, INPUT_STATUS} (module docstring).

    Args:
        phone: a phone model (`tfdptext.export.exporter`).
        release: the name of its release output.
        tokenizer_config: `TextTokenizer.config()` (vocabulary_size and
            the special ids).
    """
    checks = InputChecks(int(tokenizer_config["vocabulary_size"]),
                         pad_id=int(tokenizer_config["pad_id"]),
                         cls_id=int(tokenizer_config["cls_id"]),
                         sep_id=int(tokenizer_config["sep_id"]),
                         name="input_checks")
    inputs = {name: keras.Input(tensor.shape[1:], dtype=tensor.dtype,
                                name=name)
              for name, tensor in phone.input.items()}
    outputs = _CheckedPhone(phone, release, checks,
                            name="checked_phone")(inputs)
    return keras.Model(inputs, outputs, name=phone.name)
