"""Off-device d_chi text-to-text privatization of token ids, with FAISS.

The same mechanism as `tfdptext.layers.DChiTextPrivatizer` (noise with
density ~ exp(-eta ||z||) on each token's embedding, exact nearest candidate
token), for privatizing data sets in bulk on a server or workstation: the
noise is computed from os.urandom (or, for reproducible research only, a
seeded numpy generator) and a FAISS index finds the neighbours: exact (flat
L2, the default) or approximate (HNSW), as `BRRCorpusPrivatizer` offers.
"""

import os

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.offline import base
from tfdptext.offline import faiss_search
from tfdptext.offline import int8_scan
from tfdptext.privacy import metric
from tfdptext.privacy import validation

INDEXES = ("exact", "hnsw", "pq")
# A product quantizer of 16 centroids per sub-space needs this many vectors
# to train on (FAISS asks for 39 per centroid).
_PQ_MIN_VECTORS = 39 * 16


def pq_subspaces(dimension):
    """The sub-spaces of `index="pq"`: the largest divisor of `dimension`
    that is at most dimension / 2 (2 coordinates per 4-bit code; 150 for
    300-d GloVe, 192 for 384-d MiniLM); 1 for dimension 1."""
    return max([m for m in range(1, dimension // 2 + 1)
                if dimension % m == 0] or [1])


# Rounds of Marsaglia-Tsang rejection before giving up: with a good source a
# row is rejected with probability < 0.002 (shape >= 1), so 64 rounds fail
# with probability < 1e-170; running out means the source is broken.
_MAX_GAMMA_ROUNDS = 64


def os_uniforms(shape):
    """U(0, 1) float64 numbers with 53 random bits each, from os.urandom."""
    count = int(np.prod(shape))
    words = np.frombuffer(os.urandom(8 * count), dtype=np.uint64)
    return (((words >> np.uint64(11)).astype(np.float64) + 0.5)
            * 2.0**-53).reshape(shape)


def os_normals(count):
    """`count` standard normals from os.urandom (Box-Muller on 53-bit
    uniforms in (0, 1): finite, |x| < 8.6)."""
    half = (count + 1) // 2
    u = os_uniforms((2, half))
    rho = np.sqrt(-2.0 * np.log(u[0]))
    angle = 2.0 * np.pi * u[1]
    return np.concatenate([rho * np.cos(angle), rho * np.sin(angle)])[:count]


def os_gamma(shape, count):
    """`count` Gamma(shape, 1) numbers from os.urandom, shape >= 1.

    Marsaglia and Tsang's (2000) rejection method: exact given exact
    normals and uniforms, about one normal and one uniform per number
    (the sum of `shape` exponentials it replaces took `shape` uniforms).
    Raises RuntimeError if rows are still rejected after 64 rounds: the
    random source is broken, and no noise is better than bad noise.
    """
    if shape < 1:
        raise ArgumentError(f"`shape` must be >= 1, got {shape}.")
    d = shape - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.empty(count)
    todo = np.arange(count)
    for _ in range(_MAX_GAMMA_ROUNDS):
        if not todo.size:
            return out
        x = os_normals(todo.size)
        u = os_uniforms(todo.size)
        v = (1.0 + c * x) ** 3
        ok = v > 0
        ok[ok] = (np.log(u[ok])
                  < 0.5 * x[ok] ** 2 + d - d * v[ok] + d * np.log(v[ok]))
        out[todo[ok]] = d * v[ok]
        todo = todo[~ok]
    if todo.size:
        raise RuntimeError(
            f"os.urandom gave {todo.size} Gamma draws that were rejected "
            f"{_MAX_GAMMA_ROUNDS} times in a row: the random source is "
            "broken; no noise was released.")
    return out


def dchi_noise(rng, num_vectors, dimension, eta):
    """(num_vectors, dimension) d_chi noise: Gamma(n, 1/eta) radius times a
    uniform direction.

    Args:
        rng: None for os.urandom (radius by `os_gamma`, direction from
            `os_normals`), or a numpy Generator (seeded research runs).
    """
    if rng is not None:
        radius = rng.gamma(shape=dimension, scale=1.0 / eta,
                           size=(num_vectors, 1))
        direction = rng.standard_normal((num_vectors, dimension))
    else:
        radius = os_gamma(dimension, num_vectors)[:, None] / eta
        direction = os_normals(num_vectors * dimension).reshape(
            num_vectors, dimension)
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True),
                            1e-300)
    return radius * direction


class DChiCorpusPrivatizer(base.CorpusPrivatizer):
    """Privatizes token ids in bulk: M(w) = nearest(phi(w) + z) in L2.

    Args:
        embeddings: (vocabulary_size, dim) table phi.
        eta: privacy parameter, finite and > 0.
        special_token_ids: never output.
        passthrough_token_ids: structural ids ([PAD], [CLS], [SEP]) released
            unchanged; every other input token, [UNK] included, is
            privatized. Each must be in `special_token_ids`.
        seed: None (default): every number from os.urandom. A seed gives a
            numpy generator, for reproducible research only: never for data
            that leaves a user (the guarantee then says there is none
            against anyone who knows the seed).
        num_threads: FAISS threads (None = FAISS default).
        embedding_description: what the table is, for the guarantee.
        index: "exact" (`faiss.IndexFlatL2`, the default: the same output
            distribution as the Keras layer) or "hnsw"
            (`faiss.IndexHNSWFlat`, approximate: may return a candidate
            that is not the nearest; the guarantee is unchanged, as
            decoding is post-processing). Its search breadth is
            `index.hnsw.efSearch` (FAISS default 16; larger is slower and
            finds the nearest more often). The graph search is fast for
            queries near the table; with strong noise (noisy vectors far
            from every word) it finds the nearest less often and need not
            beat the exact index. "pq" (`faiss.IndexRefineFlat` over
            `faiss.IndexPQFastScan`, `pq_subspaces(dim)` codes of 4 bits):
            ranks every candidate by its compressed vector, then re-ranks
            the best `pq_refine` of them by exact distance; needs at least
            624 candidates to train on. `benchmarks/brr_efficiency.py`
            measures all three on noisy queries.
        hnsw_neighbors: M of the HNSW graph.
        pq_refine: candidates re-ranked exactly per query ("pq" only;
            `index.k_factor`, may be changed after construction): larger
            is slower and finds the nearest more often.

    Example:
    >>> privatizer = DChiCorpusPrivatizer(
    ...     table, eta=20.0, special_token_ids=[0, 100, 101, 102, 103],
    ...     passthrough_token_ids=[0, 101, 102])
    >>> private_ids = privatizer(np.array([[101, 2023, 2003, 102]]))
    """

    def __init__(self, embeddings, eta, special_token_ids=(),
                 passthrough_token_ids=(), seed=None, num_threads=None,
                 embedding_description="the token embedding table", *,
                 index="exact", hnsw_neighbors=32, pq_refine=64):
        import faiss

        self.eta = validation.check_positive("eta", eta)
        self.index_kind = validation.check_choice("index", index, INDEXES)
        table = np.ascontiguousarray(embeddings, dtype=np.float32)
        if table.ndim != 2 or not np.isfinite(table).all():
            raise ArgumentError("`embeddings` must be a finite 2-D array.")
        super().__init__(len(table), special_token_ids, passthrough_token_ids,
                         seed, num_threads)
        self.embeddings = table
        self.dimension = table.shape[1]
        if self.index_kind == "exact":
            self.index = faiss.IndexFlatL2(self.dimension)
        elif self.index_kind == "hnsw":
            self.index = faiss.IndexHNSWFlat(
                self.dimension,
                validation.check_int("hnsw_neighbors", hnsw_neighbors, 2))
        else:
            refine = validation.check_int("pq_refine", pq_refine, 1)
            if len(self.candidate_ids) < _PQ_MIN_VECTORS:
                raise ArgumentError(
                    f"`index`='pq' needs at least {_PQ_MIN_VECTORS} "
                    "candidate tokens to train its quantizer, the table has "
                    f"{len(self.candidate_ids)}: use index='exact'.")
            # Kept as an attribute too: the refine index does not own it.
            self._pq = faiss.IndexPQFastScan(
                self.dimension, pq_subspaces(self.dimension), 4)
            self.index = faiss.IndexRefineFlat(self._pq)
            self.index.k_factor = refine
            self.index.train(table[self.candidate_ids])
        self.index.add(table[self.candidate_ids])
        faiss_search.prepare(self.index)
        if self.index_kind == "exact":
            self._candidates = faiss_search.flat_rows(self.index)
            self._max_norm = faiss_search.max_squared_norm(self._candidates)
            self._scan = None
            if self._candidates.size >= int8_scan.MIN_TABLE_ENTRIES:
                self._scan = int8_scan.Int8Scan(self._candidates,
                                                num_threads)
        self.embedding_description = embedding_description

    def index_bytes(self):
        """The size of the serialized FAISS index, in bytes."""
        import faiss

        return int(faiss.serialize_index(self.index).size)

    def nearest_tokens(self, vectors):
        """The nearest candidate token id for each row of `vectors` (exact
        index: the nearest in exact arithmetic, ties to the lower id;
        "hnsw", "pq": an approximate nearest)."""
        if self.index_kind == "exact":
            _, rows = faiss_search.exact_nearest(
                self.index, self._candidates, vectors, 1, self._max_norm,
                distances=False, scan=self._scan)
        else:
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            _, rows = faiss_search.search(self.index, vectors, 1)
        return self.candidate_ids[rows[:, 0]]

    def _privatize(self, ids):
        noisy = self.embeddings[ids] + dchi_noise(
            self.rng, len(ids), self.dimension, self.eta)
        return self.nearest_tokens(noisy)

    def guarantee(self):
        return metric.dchi_guarantee(
            self.eta, self.dimension, self.embedding_description,
            text_to_text=True, sampling=metric.FLOAT64_SAMPLING
        ).with_randomness(self.randomness())
