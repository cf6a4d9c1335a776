"""CusTextTextPrivatizer: CusText and CusText+ (Chen et al. 2023)."""

import keras
import numpy as np
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import sampling
from tfdptext.layers import token_privatizer
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import custext


@keras.saving.register_keras_serializable(package="tfdptext")
class CusTextTextPrivatizer(token_privatizer.TokenPrivatizer):
    """Replaces each token by a word of its customized output set: the
    vocabulary is partitioned into sets of `top_k` near words, and a word
    x is replaced by y of its set with probability ~ exp(eps u(x, y) / 2),
    u the min-max normalised negative distance
    (`tfdptext.substitution.custext`). CusText+ keeps the words of
    `keep_token_ids` (the paper: stopwords) unchanged.

    eps-LDP between any two words of the same set, with the exact epsilon
    of what runs (probabilities are integer counts out of 2^23, sampled by
    comparing one 23-bit integer with thresholds; delta = 0); no guarantee
    between words of different sets, nor for kept words. One random word
    per token on a phone.

    The table is int32 (V, 2 top_k - 1): each id's output set and its
    cumulative thresholds, computed once on the host from the embeddings;
    the embeddings themselves are not kept.

    Reference: Chen, Mo, Wang, Chen, Nie, Wang, Cui, "A Customized Text
    Sanitization Mechanism with Differential Privacy", Findings of ACL
    2023.

    Args:
        epsilon: privacy parameter, finite and > 0.
        embeddings: (vocabulary_size, dim) table the sets and
            probabilities come from (order: frequency order, most frequent
            first); None with `vocabulary_size` (weights loaded later).
        top_k: the size of an output set, >= 2 (default 20).
        keep_token_ids: CusText+'s words released unchanged (no
            protection); they may still be output for other words.
        special_token_ids, passthrough_token_ids, noise: as
            `DChiTextPrivatizer`.
        embedding_description: what the embeddings are, for the
            guarantee.
        implemented_epsilon: set by `get_config` (a loaded layer's).

    Example:
    >>> table = np.random.randn(100, 16).astype("float32")
    >>> layer = CusTextTextPrivatizer(epsilon=2.0, embeddings=table,
    ...                               top_k=5, special_token_ids=[0, 1])
    >>> layer(np.array([[5, 6, 7]]))
    """

    def __init__(self, epsilon, embeddings=None, top_k=20,
                 keep_token_ids=(), vocabulary_size=None,
                 special_token_ids=(), passthrough_token_ids=(),
                 embedding_description="the token embedding table",
                 implemented_epsilon=None, noise=True, **kwargs):
        self.epsilon = validation.check_positive("epsilon", epsilon)
        self.top_k = custext.check_top_k(top_k)
        table = None
        if embeddings is not None:
            embeddings = token_privatizer.float_table(embeddings,
                                                      "embeddings")
            vocabulary_size = len(embeddings)
            members, thresholds, _ = custext.tables(
                embeddings, special_token_ids, self.top_k, self.epsilon)
            table = np.concatenate([members, thresholds], axis=1)
            implemented_epsilon = custext.implemented_epsilon(members,
                                                              thresholds)
        if vocabulary_size is None:
            raise ArgumentError("Pass `embeddings`, or `vocabulary_size`.")
        super().__init__(table, vocabulary_size, 2 * self.top_k - 1, "sets",
                         special_token_ids, passthrough_token_ids,
                         noise=noise, table_dtype="int32", **kwargs)
        keep = sorted({validation.check_int("keep_token_ids", int(i), 0)
                       for i in keep_token_ids})
        if keep and (keep[-1] >= self.vocabulary_size
                     or self._is_special[keep].any()):
            raise ArgumentError(
                "`keep_token_ids` must be candidate ids in [0, "
                f"{self.vocabulary_size}), none of them special.")
        self.keep_token_ids = tuple(keep)
        self._is_kept = np.zeros(self.vocabulary_size, bool)
        self._is_kept[keep] = True
        self.embedding_description = embedding_description
        self.implemented_epsilon = implemented_epsilon

    def _privatize_ids(self, ids, rows, uniforms):
        u = sampling.uniform(tf.shape(ids), None if uniforms is None
                             else uniforms[:, 0])
        private = custext.draw(rows[:, :self.top_k], rows[:, self.top_k:],
                               u, backend.TENSORFLOW)
        return tf.where(tf.gather(tf.constant(self._is_kept), ids), ids,
                        private)

    def _uniforms_per_token(self):
        return 1

    def public_table(self):
        """None: this layer holds output sets, not embeddings (the
        evaluation embeds released ids with the encoder's table)."""
        return None

    def sets_table(self):
        """The (V, 2 top_k - 1) int32 table as numpy."""
        if self._initial_table is not None:
            return np.asarray(self._initial_table)
        return np.asarray(self.sets.numpy())

    def pair_bound(self, token_a, token_b):
        """(log-ratio bound, delta) for two input ids: the exact largest
        log-ratio of their implemented counts (at most the guarantee's
        epsilon) within a set, infinite across sets or for kept words."""
        table = self.sets_table()
        if token_a == token_b:
            return 0.0, 0.0
        if self._is_kept[[token_a, token_b]].any() or \
                tuple(table[token_a, :self.top_k]) != \
                tuple(table[token_b, :self.top_k]):
            return float("inf"), 0.0
        pair = table[[token_a, token_b]]
        return custext.implemented_epsilon(pair[:, :self.top_k],
                                           pair[:, self.top_k:]), 0.0

    def _guarantee(self):
        return guarantees.custext_guarantee(
            self.epsilon, self.implemented_epsilon, self.top_k,
            self.embedding_description, len(self.keep_token_ids))

    def corpus_privatizer(self, seed=None):
        from tfdptext.offline import custext as offline_custext

        return offline_custext.CusTextCorpusPrivatizer.from_tables(
            self.sets_table(), self.epsilon, self.top_k,
            self.implemented_epsilon, keep_token_ids=self.keep_token_ids,
            special_token_ids=self.special_token_ids,
            passthrough_token_ids=self.passthrough_token_ids, seed=seed,
            embedding_description=self.embedding_description)

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon, "top_k": self.top_k,
                       "keep_token_ids": list(self.keep_token_ids),
                       "embedding_description": self.embedding_description,
                       "implemented_epsilon": self.implemented_epsilon})
        return config
