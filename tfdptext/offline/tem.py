"""Off-device TEM, the truncated exponential mechanism (Carvalho et al.
2023).

The same mechanism as `tfdptext.layers.TEMTextPrivatizer`
(`tfdptext.substitution.utilities`, the two-stage race) in float64 with
noise from os.urandom.

Reference: Carvalho, Vasiloudis, Feyisetan, Wang, "TEM: High Utility
Metric Differential Privacy on Text", SIAM SDM 2023.
"""

from tfdptext.errors import ArgumentError
from tfdptext.offline import exponential
from tfdptext.offline import table_cache
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import utilities


class TEMCorpusPrivatizer(exponential.ExponentialCorpusPrivatizer):
    """Privatizes token ids in bulk: y with probability ~ exp(-eps
    min(d, gamma) / 2).

    Args:
        embeddings, epsilon, special_token_ids, passthrough_token_ids,
        seed, embedding_description, cache_bytes: see
            `ExponentialCorpusPrivatizer`.
        gamma: the truncation distance (> 0); default from `beta`.
        beta: gamma = (2 / eps) ln((1 - beta) (|V| - 1) / beta) (default
            0.001).

    Example:
    >>> privatizer = TEMCorpusPrivatizer(table, epsilon=3.0,
    ...                                  special_token_ids=[0])
    >>> private_ids = privatizer(np.array([[5, 17, 42]]))
    """

    def __init__(self, embeddings, epsilon, gamma=None, beta=0.001,
                 special_token_ids=(), passthrough_token_ids=(), seed=None,
                 embedding_description="the token embedding table", *,
                 cache_bytes=table_cache.DEFAULT_MAX_BYTES):
        super().__init__(embeddings, epsilon, special_token_ids,
                         passthrough_token_ids, seed, embedding_description,
                         cache_bytes=cache_bytes)
        self.beta = None if beta is None else utilities.check_beta(beta)
        if gamma is None:
            if self.beta is None:
                raise ArgumentError("Give `gamma` or `beta`.")
            gamma = utilities.tem_gamma(self.epsilon, self.beta,
                                        len(self.candidate_ids))
        self.gamma = validation.check_positive("gamma", gamma)

    def _log_weights(self, distances):
        return utilities.tem_log_weights(distances, self.epsilon, self.gamma,
                                         ~self.is_special, backend.NUMPY)

    def metric_distance(self, token_a, token_b):
        return min(super().metric_distance(token_a, token_b), self.gamma)

    def guarantee_in(self, precision):
        return guarantees.tem_guarantee(
            self.epsilon, self.gamma, self.embedding_description,
            self.vocabulary_size, precision, beta=self.beta)
