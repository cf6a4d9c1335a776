"""DChiTextPrivatizer: d_chi text-to-text privatization of token ids."""

import keras
import numpy as np
import tensorflow as tf

from tfdptext import vocabulary
from tfdptext.errors import ArgumentError
from tfdptext.layers import base
from tfdptext.layers import sampling
from tfdptext.privacy import metric
from tfdptext.privacy import validation


@keras.saving.register_keras_serializable(package="tfdptext")
class DChiTextPrivatizer(base.PrivatizationLayer):
    """Replaces each token by the token nearest to its d_chi-noised embedding.

    M(w) = argmin_{w' in candidates} ||phi(w) + z - phi(w')||, z with density
    ~ exp(-eta ||z||) (Feyisetan et al.; Qu et al. text-to-text). Tokens in
    `special_token_ids` ([PAD], [CLS], [SEP], [MASK], [UNK], [unused*]) are
    never output. Every input token is privatized, [UNK] included (passing
    it through would make a word -> [UNK] substitution infinitely
    distinguishable), except the structural `passthrough_token_ids`
    ([PAD], [CLS], [SEP]), which reveal only the length.
    Exact nearest neighbour in the graph (a matrix product and ARG_MIN), so
    the layer exports to TFLite; for whole corpora off device, see
    `tfdptext.offline.DChiCorpusPrivatizer` (FAISS).

    The embedding table is a non-trainable weight: it is saved with the
    model's weights, not in the config.

    Args:
        eta: privacy parameter, finite and > 0.
        embeddings: (vocabulary_size, dim) array, the table phi. May be
            omitted when `vocabulary_size` and `embedding_dim` are given
            (the weights are then loaded later, e.g. by `keras.saving`).
        special_token_ids: ids never output.
        passthrough_token_ids: ids released unchanged when they are in the
            input (structural tokens only; each must also be in
            `special_token_ids`).
        embedding_description: what the table is, for the guarantee.
        noise: False switches noise off (output = input ids).

    Example:
    >>> table = np.random.randn(100, 16).astype("float32")
    >>> layer = DChiTextPrivatizer(eta=10.0, embeddings=table,
    ...                            special_token_ids=[0, 1, 2, 3],
    ...                            passthrough_token_ids=[0, 1, 2])
    >>> layer(np.array([[1, 5, 3, 2, 0]]))  # 1, 2, 0 pass through
    """

    def __init__(self, eta, embeddings=None, vocabulary_size=None,
                 embedding_dim=None, special_token_ids=(),
                 passthrough_token_ids=(),
                 embedding_description="the token embedding table",
                 noise=True, **kwargs):
        super().__init__(noise=noise, **kwargs)
        self.eta = metric.check_float32_eta(eta)
        self._initial_embeddings = None
        if embeddings is not None:
            table = np.asarray(embeddings, dtype=np.float32)
            if table.ndim != 2:
                raise ArgumentError(
                    "`embeddings` must be 2-D (vocabulary_size, dim), "
                    f"received shape {table.shape}.")
            if not np.isfinite(table).all():
                raise ArgumentError("`embeddings` must be finite.")
            self._initial_embeddings = table
            vocabulary_size, embedding_dim = table.shape
        if vocabulary_size is None or embedding_dim is None:
            raise ArgumentError(
                "Pass `embeddings`, or both `vocabulary_size` and "
                "`embedding_dim`.")
        self.vocabulary_size = validation.check_int(
            "vocabulary_size", vocabulary_size, minimum=2)
        self.embedding_dim = validation.check_int(
            "embedding_dim", embedding_dim)
        sets = vocabulary.token_sets(self.vocabulary_size, special_token_ids,
                                     passthrough_token_ids)
        self.special_token_ids = sets.special_token_ids
        self.passthrough_token_ids = sets.passthrough_token_ids
        self._is_special = sets.is_special
        self._is_passthrough = sets.is_passthrough
        self.embedding_description = embedding_description

    def build(self, input_shape):
        if len(input_shape) < 1:
            raise ArgumentError(
                "`inputs` must be token ids of rank >= 1, received shape "
                f"{tuple(input_shape)}.")
        table = self._initial_embeddings
        # The table is the variable's initial value (not an assign after
        # creation), so it is in place even when the layer is first built
        # while tracing a tf.function.
        initializer = "zeros" if table is None else (
            lambda shape, dtype=None: tf.constant(table, dtype=dtype))
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocabulary_size, self.embedding_dim),
            initializer=initializer,
            trainable=False,
        )
        self._initial_embeddings = None
        super().build(input_shape)

    def nearest_tokens(self, vectors):
        """Exact nearest candidate token for each row of (N, dim) vectors."""
        table = tf.convert_to_tensor(self.embeddings)
        squared_norms = tf.reduce_sum(tf.square(table), axis=-1)
        scores = squared_norms[None, :] - 2.0 * tf.matmul(
            vectors, table, transpose_b=True)
        scores = tf.where(tf.constant(self._is_special)[None, :],
                          tf.constant(np.inf, tf.float32), scores)
        return tf.argmin(scores, axis=-1, output_type=tf.int32)

    def apply(self, inputs, uniforms=None):
        self._check_numeric(inputs, integer=True)
        # Ids outside the table give -1 (an unusable release, refused by the
        # server) in a graph; called eagerly, the layer raises.
        token_ids, valid = base.checked_token_ids(
            inputs, self.vocabulary_size, self.name)
        if not self._noisy(uniforms):
            return tf.where(valid, token_ids, -1)
        flat = tf.reshape(token_ids, [-1])
        clean = tf.gather(self.embeddings, flat)
        if uniforms is not None:
            uniforms = tf.reshape(uniforms, [-1, uniforms.shape[-1]])
        noisy = clean + sampling.dchi(tf.shape(clean), self.eta,
                                      self.embedding_dim, uniforms)
        private = self.nearest_tokens(noisy)
        keep = tf.gather(tf.constant(self._is_passthrough), flat)
        private = tf.where(keep, flat, private)
        return tf.where(valid, tf.reshape(private, tf.shape(token_ids)), -1)

    def uniforms_shape(self, input_shape):
        return tuple(input_shape[1:]) + (
            sampling.dchi_uniforms_per_vector(self.embedding_dim),)

    def _guarantee(self):
        return metric.dchi_guarantee(
            self.eta, self.embedding_dim, self.embedding_description,
            text_to_text=True)

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update({
            "eta": self.eta,
            "vocabulary_size": self.vocabulary_size,
            "embedding_dim": self.embedding_dim,
            "special_token_ids": list(self.special_token_ids),
            "passthrough_token_ids": list(self.passthrough_token_ids),
            "embedding_description": self.embedding_description,
        })
        return config
