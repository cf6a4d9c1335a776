"""TEMTextPrivatizer: the truncated exponential mechanism (Carvalho et al.
2023)."""

import keras
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import exponential_privatizer
from tfdptext.privacy import exponential
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import utilities


@keras.saving.register_keras_serializable(package="tfdptext")
class TEMTextPrivatizer(exponential_privatizer.ExponentialTextPrivatizer):
    """Replaces each token x by a word y drawn with probability ~ exp(-eps
    min(d(x, y), gamma) / 2), d the Euclidean distance between embeddings.

    This is the distribution of TEM: an exponential mechanism over the
    words within gamma of x plus one element standing for a uniform word
    beyond gamma (`tfdptext.substitution.utilities`). Per token, eps *
    min(d, gamma) metric DP, so at most eps * gamma for any two words.
    Sampled by the two-stage exponential race in float32 (the guarantee's
    delta, `tfdptext.privacy.exponential`); about 2 sqrt(V) uniforms per
    token.

    Reference: Carvalho, Vasiloudis, Feyisetan, Wang, "TEM: High Utility
    Metric Differential Privacy on Text", SIAM SDM 2023.

    Args:
        epsilon: privacy parameter, finite and > 0.
        embeddings: (vocabulary_size, dim) table, or None with
            `vocabulary_size` and `embedding_dim`.
        gamma: the truncation distance, > 0; default from `beta`.
        beta: in (0, 1); without `gamma`, gamma = (2 / eps) ln((1 - beta) (|V| - 1) / beta), |V| the
            number of candidates (default 0.001, as pyPANTERA and
            mldp-text).
        special_token_ids, passthrough_token_ids, embedding_description,
        noise: as `DChiTextPrivatizer`.

    Example:
    >>> table = np.random.randn(100, 16).astype("float32")
    >>> layer = TEMTextPrivatizer(epsilon=3.0, embeddings=table,
    ...                           special_token_ids=[0, 1])
    >>> layer(np.array([[5, 6, 7]]))
    """

    def __init__(self, epsilon, embeddings=None, gamma=None, beta=0.001,
                 **kwargs):
        super().__init__(epsilon, embeddings, **kwargs)
        self.beta = None if beta is None else utilities.check_beta(beta)
        if gamma is None:
            if self.beta is None:
                raise ArgumentError("Give `gamma` or `beta`.")
            gamma = utilities.tem_gamma(
                self.epsilon, self.beta, int((~self._is_special).sum()))
        self.gamma = validation.check_positive("gamma", gamma)

    def _log_weights(self, distances):
        return utilities.tem_log_weights(
            distances, self.epsilon, self.gamma,
            tf.constant(~self._is_special), backend.TENSORFLOW)

    def _guarantee(self):
        return self.guarantee_in(exponential.FLOAT32)

    def guarantee_in(self, precision):
        return guarantees.tem_guarantee(
            self.epsilon, self.gamma, self.embedding_description,
            self.vocabulary_size, precision, beta=self.beta)

    def metric_distance(self, token_a, token_b):
        return min(super().metric_distance(token_a, token_b), self.gamma)

    def corpus_privatizer(self, seed=None):
        from tfdptext.offline import tem as offline_tem

        return offline_tem.TEMCorpusPrivatizer(
            self.public_table(), self.epsilon, gamma=self.gamma,
            beta=self.beta, special_token_ids=self.special_token_ids,
            passthrough_token_ids=self.passthrough_token_ids, seed=seed,
            embedding_description=self.embedding_description)

    def get_config(self):
        config = super().get_config()
        config.update({"gamma": self.gamma, "beta": self.beta})
        return config
