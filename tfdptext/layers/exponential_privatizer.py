"""ExponentialTextPrivatizer: the common part of the layers that sample
an exponential mechanism over the whole vocabulary (SanText, TEM)."""

import math

import tensorflow as tf

from tfdptext.layers import embedding_privatizer
from tfdptext.layers import sampling
from tfdptext.privacy import exponential
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import neighbours
from tfdptext.substitution import race


class ExponentialTextPrivatizer(embedding_privatizer.EmbeddingTextPrivatizer):
    """Replaces each token by a draw of an exponential mechanism whose
    log-weights are a function of the distances from the token's embedding
    to every row (`_log_weights`), sampled by the two-stage exponential
    race (`tfdptext.substitution.race`): float32, log space, builtin
    TFLite ops, two_stage_uniforms(V) uniforms per token (350 for a
    30,522-token vocabulary). Not used directly.

    Args:
        epsilon: privacy parameter, finite and > 0.
        Others: see `EmbeddingTextPrivatizer`.
    """

    def __init__(self, epsilon, embeddings=None, **kwargs):
        super().__init__(embeddings, **kwargs)
        self.epsilon = validation.check_positive("epsilon", epsilon)

    def distances(self, rows):
        """(N, V) Euclidean distances from rows to every table row."""
        return neighbours.distances(
            rows, tf.convert_to_tensor(self.embeddings), backend.TENSORFLOW)

    def _log_weights(self, distances):
        raise NotImplementedError

    def _race(self, rows, uniforms):
        if sampling.are_words(uniforms):  # the phone model's random words
            uniforms = sampling.uniforms_from_words(uniforms)
        if uniforms is None:
            uniforms = tf.random.uniform(
                [tf.shape(rows)[0], self._race_uniforms()])
        return race.two_stage_race(self._log_weights(self.distances(rows)),
                                   uniforms, backend.TENSORFLOW)

    def _private_tokens(self, rows, uniforms):
        return self._race(rows, uniforms)

    def _race_uniforms(self):
        return race.two_stage_uniforms(self.vocabulary_size)

    def _uniforms_per_token(self):
        return self._race_uniforms()

    def sampler_total_variation(self):
        return exponential.two_stage_total_variation(self.vocabulary_size)

    def pair_bound(self, token_a, token_b):
        """(log-ratio bound, delta) of the guarantee for two input ids:
        epsilon times the guarantee's metric, and the sampler's delta at
        that log-ratio."""
        bound = self.epsilon * self.metric_distance(token_a, token_b)
        return bound, guarantees.pair_delta(self.guarantee(), bound)

    def metric_distance(self, token_a, token_b):
        table = self.public_table()
        return float(math.dist(table[token_a], table[token_b]))

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon})
        return config
