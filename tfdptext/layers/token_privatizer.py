"""TokenPrivatizer: the common part of the text-to-text mechanisms.

Written in `keras.ops`: with a subclass whose noise is too (d_chi), it runs
on any backend; the other subclasses, and the phone's random words, use
TensorFlow."""

import keras
import numpy as np
from keras import ops

from tfdptext import vocabulary
from tfdptext.errors import ArgumentError
from tfdptext.layers import base
from tfdptext.privacy import validation


class TokenPrivatizer(base.PrivatizationLayer):
    """Token ids in, privatized token ids out, through a public table with
    one row per token id (d_chi: the embeddings; BRR: the +-1 codes).

    A subclass says how a batch of table rows becomes private token ids
    (`_private_tokens`) and how many uniforms one token needs
    (`_uniforms_per_token`). This class owns the rest: the table as a
    non-trainable weight named `table_name` (saved with the weights, not in
    the config), which ids are special (never output) and passthrough
    (released unchanged: [PAD], [CLS], [SEP]), and the id checks: an id
    outside the table raises when called eagerly and gives -1 in a graph
    (an unusable release the server refuses). Not used directly.

    Args:
        table: the (vocabulary_size, width) table (float32, or
            `table_dtype`), or None when `vocabulary_size` and `width` are
            given (the weights are then loaded later, e.g. by
            `keras.saving`).
        table_name: the weight's name (and the attribute holding it).
        special_token_ids, passthrough_token_ids: see above.
    """

    def __init__(self, table, vocabulary_size, width, table_name,
                 special_token_ids=(), passthrough_token_ids=(),
                 noise=True, table_dtype="float32", **kwargs):
        super().__init__(noise=noise, **kwargs)
        self._table_dtype = table_dtype
        self._initial_table = table
        self.vocabulary_size = validation.check_int(
            "vocabulary_size", vocabulary_size, minimum=2)
        self._width = validation.check_int("width", width)
        self._table_name = table_name
        sets = vocabulary.token_sets(self.vocabulary_size, special_token_ids,
                                     passthrough_token_ids)
        self.special_token_ids = sets.special_token_ids
        self.passthrough_token_ids = sets.passthrough_token_ids
        self._is_special = sets.is_special
        self._is_passthrough = sets.is_passthrough

    def build(self, input_shape):
        if len(input_shape) < 1:
            raise ArgumentError(
                "`inputs` must be token ids of rank >= 1, received shape "
                f"{tuple(input_shape)}.")
        table = self._initial_table
        # The table is the variable's initial value (not an assign after
        # creation), so it is in place even when the layer is first built
        # while tracing a tf.function.
        initializer = "zeros" if table is None else (
            lambda shape, dtype=None: ops.convert_to_tensor(table, dtype))
        setattr(self, self._table_name, self.add_weight(
            name=self._table_name, shape=(self.vocabulary_size, self._width),
            initializer=initializer, trainable=False,
            dtype=self._table_dtype))
        self._initial_table = None
        super().build(input_shape)

    def _candidates_only(self, scores, fill):
        """(N, vocabulary_size) scores with special tokens' set to `fill`."""
        return ops.where(ops.convert_to_tensor(self._is_special)[None, :],
                         ops.cast(fill, "float32"), scores)

    def apply(self, inputs, uniforms=None):
        self._check_numeric(inputs, integer=True)
        token_ids, valid = base.checked_token_ids(
            inputs, self.vocabulary_size, self.name)
        if not self._noisy(uniforms):
            return ops.where(valid, token_ids, -1)
        flat = ops.reshape(token_ids, (-1,))
        rows = ops.take(getattr(self, self._table_name), flat, axis=0)
        if uniforms is not None:
            uniforms = ops.reshape(uniforms, (-1, self._uniforms_per_token()))
        private = self._privatize_ids(flat, rows, uniforms)
        keep = ops.take(ops.convert_to_tensor(self._is_passthrough), flat,
                        axis=0)
        private = ops.where(keep, flat, ops.cast(private, "int32"))
        return ops.where(valid, ops.reshape(private, ops.shape(token_ids)),
                         -1)

    def _privatize_ids(self, ids, rows, uniforms):
        """Private ids for the (N,) input `ids`, whose table rows are
        `rows`; by default a function of the rows (`_private_tokens`)."""
        return self._private_tokens(rows, uniforms)

    def _private_tokens(self, rows, uniforms):
        raise NotImplementedError

    def _uniforms_per_token(self):
        raise NotImplementedError

    def uniforms_shape(self, input_shape):
        return tuple(input_shape[1:]) + (self._uniforms_per_token(),)

    def public_table(self):
        """The public (vocabulary_size, width) table as numpy: what an
        eavesdropper embeds released ids with (attack features)."""
        if self._initial_table is not None:  # not built yet
            return np.asarray(self._initial_table)
        return np.asarray(getattr(self, self._table_name).numpy())

    def corpus_privatizer(self, seed=None):
        """The same mechanism off device (`tfdptext.offline`), with this
        layer's parameters and table: noise from os.urandom, or a seeded
        numpy generator for research (`seed`)."""
        raise NotImplementedError

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "special_token_ids": list(self.special_token_ids),
            "passthrough_token_ids": list(self.passthrough_token_ids),
        })
        return config


def float_table(values, name):
    """A finite 2-D float32 table, or an error naming `name`."""
    table = np.asarray(values, dtype=np.float32)
    if table.ndim != 2:
        raise ArgumentError(f"`{name}` must be 2-D (vocabulary_size, dim), "
                            f"received shape {table.shape}.")
    if not np.isfinite(table).all():
        raise ArgumentError(f"`{name}` must be finite.")
    return table
