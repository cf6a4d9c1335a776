"""Off-device Vickrey text-to-text privatization (Xu et al. 2021).

The same mechanism as `tfdptext.layers.VickreyTextPrivatizer`: d_chi (or
Mahalanobis) noise from os.urandom, the two nearest candidates from a
FAISS index, and the Vickrey choice between them
(`tfdptext.substitution.vickrey`, the layer's math on numpy).

Reference: Xu, Aggarwal, Feyisetan, Teissier, "On a Utilitarian Approach
to Privacy Preserving Text Generation", PrivateNLP 2021.
"""

import numpy as np

from tfdptext.offline import dchi
from tfdptext.offline import faiss_search
from tfdptext.privacy import metric
from tfdptext.privacy import substitution as guarantees
from tfdptext.substitution import backend
from tfdptext.substitution import mahalanobis
from tfdptext.substitution import race
from tfdptext.substitution import vickrey


class VickreyCorpusPrivatizer(dchi.DChiCorpusPrivatizer):
    """Privatizes token ids in bulk: the nearest or second-nearest token to
    the noisy embedding, by the Vickrey rule with threshold `t`.

    Args:
        embeddings, eta, special_token_ids, passthrough_token_ids, seed,
        num_threads, embedding_description, index, hnsw_neighbors,
        pq_refine: as `DChiCorpusPrivatizer`.
        t: the threshold in [0, 1] (default 0.5).
        lam: None for d_chi noise, or lambda in [0, 1] for Mahalanobis
            noise.

    Example:
    >>> privatizer = VickreyCorpusPrivatizer(table, eta=10.0, t=0.5,
    ...                                      special_token_ids=[0])
    >>> private_ids = privatizer(np.array([[5, 17, 42]]))
    """

    def __init__(self, embeddings, eta, t=0.5, lam=None,
                 special_token_ids=(), passthrough_token_ids=(), seed=None,
                 num_threads=None,
                 embedding_description="the token embedding table",
                 **index_options):
        self.t = vickrey.check_threshold(t)
        super().__init__(embeddings, eta, special_token_ids,
                         passthrough_token_ids, seed, num_threads,
                         embedding_description, **index_options)
        self.lam = None
        self.root = None
        if lam is not None:
            self.lam = mahalanobis.check_lambda(lam)
            self.root, _ = mahalanobis.roots(
                mahalanobis.regularized_covariance(
                    self.embeddings[self.candidate_ids], self.lam))

    def noisy_vectors(self, ids):
        noise = dchi.dchi_noise(self.rng, len(ids), self.dimension, self.eta)
        if self.root is not None:
            noise = mahalanobis.transform(
                noise, self.root, backend.NUMPY)
        return self.embeddings[ids] + noise

    def two_nearest(self, vectors):
        """(first, second, d1, d2) ids and Euclidean distances."""
        if self.index_kind == "exact":
            squared, rows = faiss_search.exact_nearest(
                self.index, self._candidates, vectors, 2, self._max_norm,
                scan=self._scan)
        else:
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            squared, rows = faiss_search.search(self.index, vectors, 2)
        distance = np.sqrt(np.maximum(squared.astype(np.float64), 0.0))
        return (self.candidate_ids[rows[:, 0]], self.candidate_ids[rows[:, 1]],
                distance[:, 0], distance[:, 1])

    def _privatize(self, ids):
        first, second, d1, d2 = self.two_nearest(self.noisy_vectors(ids))
        u = race.numpy_uniforms((len(ids),), self.rng)
        return vickrey.choose(first, second, d1, d2, self.t, u,
                              backend.NUMPY)

    def guarantee(self):
        if self.lam is None:
            base = metric.dchi_guarantee(
                self.eta, self.dimension, self.embedding_description,
                text_to_text=True, sampling=metric.FLOAT64_SAMPLING)
        else:
            base = guarantees.mahalanobis_guarantee(
                self.eta, self.lam, self.dimension,
                self.embedding_description, sampling=metric.FLOAT64_SAMPLING)
        return guarantees.vickrey_guarantee(base, self.t).with_randomness(
            self.randomness())
