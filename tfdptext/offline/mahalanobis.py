"""Off-device Mahalanobis text-to-text privatization (Xu et al. 2020).

The same mechanism as `tfdptext.layers.MahalanobisTextPrivatizer`, with
the same Sigma_lambda^{1/2} (`tfdptext.substitution.mahalanobis`, float64
on the host): d_chi noise from os.urandom (`tfdptext.offline.dchi`),
stretched by Sigma_lambda^{1/2}, added to the token's embedding; the
nearest candidate by a FAISS index.

Reference: Xu, Aggarwal, Feyisetan, Teissier, "A Differentially Private
Text Perturbation Method Using a Regularized Mahalanobis Metric",
PrivateNLP 2020.
"""

import numpy as np

from tfdptext.offline import dchi
from tfdptext.privacy import metric
from tfdptext.privacy import substitution as guarantees
from tfdptext.substitution import backend
from tfdptext.substitution import mahalanobis


class MahalanobisCorpusPrivatizer(dchi.DChiCorpusPrivatizer):
    """Privatizes token ids in bulk: nearest(phi(w) + Sigma_lambda^{1/2}
    u), u d_chi noise at `eta`.

    Args:
        embeddings, eta, special_token_ids, passthrough_token_ids, seed,
        num_threads, embedding_description, index, hnsw_neighbors,
        pq_refine: as `DChiCorpusPrivatizer`.
        lam: lambda in [0, 1] (default 0.2).

    Example:
    >>> privatizer = MahalanobisCorpusPrivatizer(table, eta=10.0, lam=0.2,
    ...                                          special_token_ids=[0])
    >>> private_ids = privatizer(np.array([[5, 17, 42]]))
    """

    def __init__(self, embeddings, eta, lam=0.2, special_token_ids=(),
                 passthrough_token_ids=(), seed=None, num_threads=None,
                 embedding_description="the token embedding table",
                 **index_options):
        self.lam = mahalanobis.check_lambda(lam)
        super().__init__(embeddings, eta, special_token_ids,
                         passthrough_token_ids, seed, num_threads,
                         embedding_description, **index_options)
        self.root, self.inverse_root = mahalanobis.roots(
            mahalanobis.regularized_covariance(
                self.embeddings[self.candidate_ids], self.lam))

    def noisy_vectors(self, ids):
        noise = dchi.dchi_noise(self.rng, len(ids), self.dimension, self.eta)
        return self.embeddings[ids] + mahalanobis.transform(
            noise, self.root, backend.NUMPY)

    def _privatize(self, ids):
        return self.nearest_tokens(self.noisy_vectors(ids))

    def pair_bound(self, token_a, token_b):
        """(log-ratio bound, delta) for two input ids: eta * d_R."""
        return self.eta * mahalanobis.distance(
            self.inverse_root, self.embeddings[token_a],
            self.embeddings[token_b]), 0.0

    def guarantee(self):
        return guarantees.mahalanobis_guarantee(
            self.eta, self.lam, self.dimension, self.embedding_description,
            sampling=metric.FLOAT64_SAMPLING
        ).with_randomness(self.randomness())
