"""TruncatedGumbelTextPrivatizer: report-noisy-min over a Poisson number
of nearest words (Carvalho, Vasiloudis, Feyisetan, FLAIRS-34, 2021)."""

import math

import numpy as np
import tensorflow as tf
import keras

from tfdptext.errors import ArgumentError
from tfdptext.layers import embedding_privatizer
from tfdptext.layers import sampling
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import truncated_gumbel as tg


@keras.saving.register_keras_serializable(package="tfdptext")
class TruncatedGumbelTextPrivatizer(
        embedding_privatizer.EmbeddingTextPrivatizer):
    """Replaces each token x by the word with the smallest noisy distance
    d(x, y) + G_y among x's K nearest candidates, K ~ Poisson(ln(n - 1))
    truncated to `max_candidates`, G ~ Gumbel(0, b) conditioned on |G| <=
    Delta_max (`tfdptext.substitution.truncated_gumbel`).

    `epsilon` sets b through the paper's calibration; it is not the
    guarantee. The output of x is among its `max_candidates` nearest words,
    so two words with different nearest sets have an infinite log-ratio:
    on a real vocabulary there is no worst-case DP guarantee (the
    guarantee says so). With `max_candidates` at least the number of
    candidates (small tables), the guarantee is the exact largest log-ratio
    over all pairs, computed by numerical integration. `pair_bound` gives
    one pair's exact log-ratio on any table.

    Float32, builtin TFLite ops (TOPK_V2 for the nearest words); 1 +
    max_candidates uniforms per token: one 23-bit integer for K, exact
    (integer thresholds), and one truncated Gumbel per candidate.

    Reference: Carvalho, Vasiloudis, Feyisetan, FLAIRS-34 (2021),
    https://journals.flvc.org/FLAIRS/article/view/128463 (mldp-text's
    TruncatedGumbel).

    Args:
        epsilon: the paper's privacy parameter, finite and > 0: with
            `scale` None, b = `truncated_gumbel.paper_scale(epsilon, ...)`
            (an error where the paper's formula gives no positive scale).
        embeddings: (vocabulary_size, dim) table, or None with
            `vocabulary_size` and `embedding_dim`.
        scale: the Gumbel scale b > 0 (Delta_max / b <= 80); default from
            epsilon.
        max_candidates: k_max >= 1, the largest K (default 32).
        min_distance, max_distance: Delta_min > 0 and Delta_max > 0 of the
            calibration and truncation; default the exact smallest
            non-zero and largest distance between candidates (one pass
            over all pairs: seconds for 30,000 words).
        special_token_ids, passthrough_token_ids, embedding_description,
        noise: as `DChiTextPrivatizer`.
        exact_epsilon: set by `get_config` (a loaded layer's guarantee).

    Example:
    >>> table = np.random.randn(12, 4).astype("float32")
    >>> layer = TruncatedGumbelTextPrivatizer(
    ...     epsilon=3.0, embeddings=table, scale=0.5, max_candidates=11,
    ...     special_token_ids=[0])
    >>> layer(np.array([[5, 6, 7]]))
    """

    def __init__(self, epsilon, embeddings=None, scale=None,
                 max_candidates=32, min_distance=None, max_distance=None,
                 exact_epsilon=None, **kwargs):
        super().__init__(embeddings, **kwargs)
        self.epsilon = validation.check_positive("epsilon", epsilon)
        self.num_candidates = int((~self._is_special).sum())
        self.max_candidates = min(tg.check_max_candidates(max_candidates),
                                  self.num_candidates)
        if min_distance is None or max_distance is None:
            if embeddings is None:
                raise ArgumentError(
                    "Pass `min_distance` and `max_distance` with a table "
                    "loaded later.")
        (self.min_distance, self.max_distance, self.scale, self.mu,
         self._thresholds) = tg.resolve(
            self.epsilon, self.num_candidates, self.max_candidates,
            min_distance, max_distance, scale,
            rows=None if embeddings is None else self.candidate_rows())
        if exact_epsilon is None and embeddings is not None:
            exact_epsilon = self._exact_epsilon(np.asarray(embeddings))
        self.exact_epsilon = exact_epsilon

    def _inputs(self):
        return np.flatnonzero(~self._is_passthrough)

    def _exact_epsilon(self, table):
        """The exact largest log-ratio over all pairs when every candidate
        is within reach and the table is small; None otherwise."""
        if self.max_candidates < self.num_candidates or \
                self.num_candidates > tg.EXACT_LIMIT:
            return None
        matrix = tg.distribution_matrix(
            table, self._inputs(), np.flatnonzero(~self._is_special),
            self.max_candidates, self.size_probabilities(), self.scale,
            self.max_distance)
        value = tg.exact_epsilon(matrix)
        return None if math.isinf(value) else value

    def size_probabilities(self):
        """The implemented P(K = k), k = 1..max_candidates."""
        return tg.implemented_size_probabilities(self._thresholds)

    def _private_tokens(self, rows, uniforms):
        k = self.max_candidates
        if sampling.are_words(uniforms):  # the phone model's random words
            uniforms = sampling.uniforms_from_words(uniforms)
        if uniforms is None:
            uniforms = tf.random.uniform([tf.shape(rows)[0], 1 + k])
        top = tf.math.top_k(-self.squared_distances(rows), k=k)
        distances = tf.sqrt(tf.maximum(-top.values, 0.0))
        sizes = tg.draw_sizes(uniforms[:, 0], self._thresholds,
                              backend.TENSORFLOW)
        noise = tg.truncated_gumbel(uniforms[:, 1:1 + k], self.scale,
                                    self.max_distance, backend.TENSORFLOW)
        position = tg.select(distances, sizes, noise, backend.TENSORFLOW)
        return tf.gather(top.indices, position, batch_dims=1)

    def _uniforms_per_token(self):
        return 1 + self.max_candidates

    def pair_bound(self, token_a, token_b):
        """(exact log-ratio of the pair, 0): the largest |ln P(y | a) -
        ln P(y | b)| of the exact distributions (numerical integration),
        infinite when one can release a word the other cannot."""
        if token_a == token_b:
            return 0.0, 0.0
        matrix = tg.distribution_matrix(
            self.public_table(), [token_a, token_b],
            np.flatnonzero(~self._is_special), self.max_candidates,
            self.size_probabilities(), self.scale, self.max_distance)
        return tg.log_ratio(matrix[0], matrix[1]), 0.0

    def _guarantee(self):
        return guarantees.truncated_gumbel_guarantee(
            self.epsilon, self.exact_epsilon, self.scale, self.max_distance,
            self.max_candidates, self.num_candidates, self.mu,
            self.embedding_description, "float32, uniforms on 2^-23 cells")

    def corpus_privatizer(self, seed=None):
        from tfdptext.offline import truncated_gumbel as offline

        return offline.TruncatedGumbelCorpusPrivatizer(
            self.public_table(), self.epsilon, scale=self.scale,
            max_candidates=self.max_candidates,
            min_distance=self.min_distance, max_distance=self.max_distance,
            special_token_ids=self.special_token_ids,
            passthrough_token_ids=self.passthrough_token_ids, seed=seed,
            embedding_description=self.embedding_description,
            exact_epsilon=self.exact_epsilon)

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon, "scale": self.scale,
                       "max_candidates": self.max_candidates,
                       "min_distance": self.min_distance,
                       "max_distance": self.max_distance,
                       "exact_epsilon": self.exact_epsilon})
        return config
