"""EmbeddingTextPrivatizer: the common part of the text-to-text layers
whose public table is the token embedding table."""

import keras
import numpy as np
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import token_privatizer
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import neighbours


class EmbeddingTextPrivatizer(token_privatizer.TokenPrivatizer):
    """Token ids in, token ids out, through the embedding table phi (a
    non-trainable weight `embeddings`, saved with the weights).

    Gives subclasses the candidates (the non-special ids), the distances
    from vectors to every candidate, and the exact nearest and two nearest
    candidates (ties to the lowest id), all in float32 with builtin TFLite
    ops (the math of `tfdptext.substitution.neighbours`). Not used
    directly.

    Args:
        embeddings: (vocabulary_size, dim) table, or None with
            `vocabulary_size` and `embedding_dim` (weights loaded later).
        embedding_description: what the table is, for the guarantee.
        Others: see `TokenPrivatizer`.
    """

    def __init__(self, embeddings=None, vocabulary_size=None,
                 embedding_dim=None, special_token_ids=(),
                 passthrough_token_ids=(),
                 embedding_description="the token embedding table",
                 noise=True, **kwargs):
        table = None
        if embeddings is not None:
            table = token_privatizer.float_table(embeddings, "embeddings")
            vocabulary_size, embedding_dim = table.shape
        if vocabulary_size is None or embedding_dim is None:
            raise ArgumentError(
                "Pass `embeddings`, or both `vocabulary_size` and "
                "`embedding_dim`.")
        self.embedding_dim = validation.check_int("embedding_dim",
                                                  embedding_dim)
        super().__init__(table, vocabulary_size, self.embedding_dim,
                         "embeddings", special_token_ids,
                         passthrough_token_ids, noise=noise, **kwargs)
        self.embedding_description = embedding_description
        self._host_table = table
        if int((~self._is_special).sum()) < 2:
            raise ArgumentError(
                "`special_token_ids` leave fewer than 2 candidate tokens.")

    def build(self, input_shape):
        super().build(input_shape)
        self._host_table = None  # the weight holds it now

    def candidate_rows(self):
        """The candidates' rows of the table, as numpy float64 (the table
        given at construction, or the loaded weights)."""
        table = self._host_table
        if table is None:
            table = self.public_table()
        return np.asarray(table, np.float64)[~self._is_special]

    def _candidates(self):
        return tf.constant(~self._is_special)

    def squared_distances(self, vectors):
        """(N, vocabulary_size) squared distances to every row, +inf for
        the special ids."""
        table = tf.convert_to_tensor(self.embeddings)
        return neighbours.masked(
            neighbours.squared_distances(vectors, table, backend.TENSORFLOW),
            self._candidates(), backend.TENSORFLOW)

    def nearest_tokens(self, vectors):
        """The exact nearest candidate of each row of (N, dim) vectors."""
        return tf.argmin(self.squared_distances(vectors), axis=-1,
                         output_type=tf.int32)

    def two_nearest(self, vectors):
        """(first, second, d1, d2): the two nearest candidates and their
        Euclidean distances, d1 <= d2."""
        top = tf.math.top_k(-self.squared_distances(vectors), k=2)
        squared = tf.maximum(-top.values, 0.0)
        distance = tf.sqrt(squared)
        return (top.indices[:, 0], top.indices[:, 1], distance[:, 0],
                distance[:, 1])

    def public_table(self):
        if self._host_table is not None:  # not built yet
            return np.asarray(self._host_table)
        return np.asarray(self.embeddings.numpy())

    def get_config(self):
        config = super().get_config()
        config.update({"embedding_dim": self.embedding_dim,
                       "embedding_description": self.embedding_description})
        return config
