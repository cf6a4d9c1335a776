"""Off-device d_chi text-to-text privatization of whole corpora, with FAISS.

The same mechanism as `tfdptext.layers.DChiTextPrivatizer` (noise with
density ~ exp(-eta ||z||) on each token's embedding, exact nearest candidate
token), for privatizing data sets in bulk on a server or workstation: numpy
samples the noise and a FAISS exact (flat L2) index finds the neighbours.
"""

import numpy as np

from tfdptext.privacy import metric
from tfdptext.privacy import validation


def dchi_noise(rng, num_vectors, dimension, eta):
    """(num_vectors, dimension) d_chi noise: Gamma(n, 1/eta) radius."""
    radius = rng.gamma(shape=dimension, scale=1.0 / eta, size=(num_vectors, 1))
    direction = rng.standard_normal((num_vectors, dimension))
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True),
                            1e-300)
    return radius * direction


class DChiCorpusPrivatizer:
    """Privatizes token ids in bulk: M(w) = nearest(phi(w) + z).

    Args:
        embeddings: (vocabulary_size, dim) table phi.
        eta: privacy parameter, finite and > 0.
        special_token_ids: never output; passed through when in the input.
        seed: seed for the numpy generator. None (default) draws fresh
            entropy from the OS; give a seed only for reproducible research,
            never for data that leaves a user.
        num_threads: FAISS threads (None = FAISS default).

    Example:
    >>> privatizer = DChiCorpusPrivatizer(table, eta=20.0,
    ...                                   special_token_ids=[0, 100, 101])
    >>> private_ids = privatizer(np.array([[101, 2023, 2003, 102]]))
    """

    def __init__(self, embeddings, eta, special_token_ids=(), seed=None,
                 num_threads=None, embedding_description="the token "
                 "embedding table"):
        import faiss

        self.eta = validation.check_positive("eta", eta)
        table = np.ascontiguousarray(embeddings, dtype=np.float32)
        if table.ndim != 2 or not np.isfinite(table).all():
            raise ValueError("`embeddings` must be a finite 2-D array.")
        self.embeddings = table
        vocabulary_size, self.dimension = table.shape
        self.is_special = np.zeros(vocabulary_size, dtype=bool)
        special = np.asarray(list(special_token_ids), dtype=np.int64)
        if special.size and (special.min() < 0 or
                             special.max() >= vocabulary_size):
            raise ValueError(
                "`special_token_ids` must be in [0, vocabulary_size).")
        self.is_special[special] = True
        self.candidate_ids = np.flatnonzero(~self.is_special)
        if num_threads is not None:
            faiss.omp_set_num_threads(
                validation.check_int("num_threads", num_threads))
        self.index = faiss.IndexFlatL2(self.dimension)
        self.index.add(table[self.candidate_ids])
        self.rng = np.random.default_rng(seed)
        self.embedding_description = embedding_description

    def nearest_tokens(self, vectors):
        """Exact nearest candidate token id for each row of `vectors`."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        _, rows = self.index.search(vectors, 1)
        return self.candidate_ids[rows[:, 0]]

    def __call__(self, token_ids):
        ids = np.asarray(token_ids)
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError("`token_ids` must be integers.")
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.is_special)):
            raise ValueError(
                "`token_ids` must be in [0, vocabulary_size) = [0, "
                f"{len(self.is_special)}).")
        flat = ids.reshape(-1)
        out = flat.copy()
        private = ~self.is_special[flat]
        if private.any():
            clean = self.embeddings[flat[private]]
            noisy = clean + dchi_noise(self.rng, len(clean), self.dimension,
                                       self.eta)
            out[private] = self.nearest_tokens(noisy)
        return out.reshape(ids.shape)

    def guarantee(self):
        return metric.dchi_guarantee(self.eta, self.dimension,
                                     self.embedding_description,
                                     text_to_text=True)
