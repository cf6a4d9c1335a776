"""Off-device TruncatedGumbel (Carvalho, Vasiloudis, Feyisetan, FLAIRS-34,
2021).

The same mechanism as `tfdptext.layers.TruncatedGumbelTextPrivatizer`
(`tfdptext.substitution.truncated_gumbel`: the size K from integer
thresholds, the truncated Gumbel noise, report-noisy-min) in float64, the
nearest words of each distinct id found once per call (exact search), and
1 + max_candidates uniforms per token from os.urandom.
"""

import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.offline import base
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import neighbours
from tfdptext.substitution import race
from tfdptext.substitution import truncated_gumbel as tg

_CHUNK = 256
# Ids whose FAISS shortlists are searched at once.
_SHORTLIST_CHUNK = 4096

# Tokens drawn at once (bounds the (n, 1 + max_candidates) uniforms).
_TOKENS = 65536


class TruncatedGumbelCorpusPrivatizer(base.CorpusPrivatizer):
    """Privatizes token ids in bulk by TruncatedGumbel.

    Args:
        embeddings: (vocabulary_size, dim) table.
        epsilon: the paper's parameter (> 0); sets the scale when `scale`
            is None.
        scale, max_candidates, min_distance, max_distance, exact_epsilon:
            as `TruncatedGumbelTextPrivatizer`.
        special_token_ids, passthrough_token_ids, seed,
        embedding_description: as `DChiCorpusPrivatizer` (seed: research
            only).

    Example:
    >>> privatizer = TruncatedGumbelCorpusPrivatizer(
    ...     table, epsilon=3.0, scale=0.5, special_token_ids=[0])
    >>> private_ids = privatizer(np.array([[5, 17, 42]]))
    """

    def __init__(self, embeddings, epsilon, scale=None, max_candidates=32,
                 min_distance=None, max_distance=None, special_token_ids=(),
                 passthrough_token_ids=(), seed=None,
                 embedding_description="the token embedding table",
                 exact_epsilon=None):
        self.epsilon = validation.check_positive("epsilon", epsilon)
        table = np.asarray(embeddings, dtype=np.float64)
        if table.ndim != 2 or len(table) < 2 or not np.isfinite(table).all():
            raise ArgumentError("`embeddings` must be a finite 2-D array "
                                "with at least 2 rows.")
        super().__init__(len(table), special_token_ids, passthrough_token_ids,
                         seed, None)
        self.num_candidates = len(self.candidate_ids)
        if self.num_candidates < 2:
            raise ArgumentError(
                "`special_token_ids` leave fewer than 2 candidate tokens.")
        self.embeddings = table
        self.norms = np.sum(table * table, axis=1)
        self.max_candidates = min(tg.check_max_candidates(max_candidates),
                                  self.num_candidates)
        (self.min_distance, self.max_distance, self.scale, self.mu,
         self.thresholds) = tg.resolve(
            self.epsilon, self.num_candidates, self.max_candidates,
            min_distance, max_distance, scale,
            rows=table[self.candidate_ids])
        self.embedding_description = embedding_description
        # Every id's max_candidates nearest candidates, computed once (the
        # same `nearest` as a call would run): a token then costs a gather
        # and 1 + max_candidates uniforms, not a pass over the table.
        self._members, self._distances = self._nearest_table()
        if exact_epsilon is None and \
                self.max_candidates >= self.num_candidates and \
                self.num_candidates <= tg.EXACT_LIMIT:
            value = tg.exact_epsilon(self.distribution_matrix(
                np.flatnonzero(~self.is_passthrough)))
            exact_epsilon = None if math.isinf(value) else value
        self.exact_epsilon = exact_epsilon

    def _nearest_table(self):
        """`nearest` of every id: a FAISS search in float32 (BLAS, heaps
        of 2 max_candidates + 8) shortlists each id's nearest candidates,
        `nearest` in float64 ranks the shortlist, and an id whose
        max_candidates-th distance is not clearly below the shortlist's
        last (float32 rounding could have left a nearer one out) is
        searched exhaustively in float64: the same answer as the
        exhaustive search everywhere (`tests/test_truncated_gumbel.py`),
        without V x V float64 distances and partitions (MiniLM's
        vocabulary: about 10x faster)."""
        import faiss

        from tfdptext.offline import faiss_search

        count, k = len(self.embeddings), self.max_candidates
        members = np.zeros((count, k), np.int64)
        distances = np.zeros((count, k))
        short = min(2 * k + 8, self.num_candidates)
        if short >= self.num_candidates:  # small tables: exhaustive
            for start in range(0, count, _CHUNK):
                block = np.arange(start, min(start + _CHUNK, count))
                members[block], distances[block] = self.nearest(block)
            return members, distances
        table32 = np.ascontiguousarray(self.embeddings, np.float32)
        index = faiss.IndexFlatL2(table32.shape[1])
        index.add(table32[self.candidate_ids])
        faiss_search.prepare(index)
        # float32 squared distances err by about 2^-22 (|x|^2 + |y|^2);
        # four times that is the margin.
        top = float(self.norms[self.candidate_ids].max())
        for start in range(0, count, _SHORTLIST_CHUNK):
            ids = np.arange(start, min(start + _SHORTLIST_CHUNK, count))
            far, rows = faiss_search.search(index, table32[ids], short)
            listed = self.candidate_ids[rows]
            d = np.sqrt(np.maximum(
                self.norms[ids, None] + self.norms[listed] - 2.0 * np.einsum(
                    "ij,ikj->ik", self.embeddings[ids],
                    self.embeddings[listed]), 0.0))
            order = np.lexsort((listed, d), axis=1)[:, :k]
            members[ids] = np.take_along_axis(listed, order, axis=1)
            distances[ids] = np.take_along_axis(d, order, axis=1)
            margin = 4.0 * 2.0**-22 * (self.norms[ids] + top)
            unsure = ids[distances[ids, -1] ** 2
                         >= far[:, -1].astype(np.float64) - margin]
            if unsure.size:
                members[unsure], distances[unsure] = self.nearest(unsure)
        return members, distances

    def nearest(self, ids):
        """(len(ids), max_candidates) nearest candidate ids, nearest first
        (ties to the lower id), and their distances."""
        d = neighbours.masked(
            neighbours.distances(self.embeddings[ids], self.embeddings,
                                 backend.NUMPY, self.norms),
            ~self.is_special, backend.NUMPY)
        k = self.max_candidates
        if k < d.shape[1]:
            part = np.argpartition(d, k - 1, axis=1)[:, :k]
            # argpartition keeps any of the rows tied at the k-th distance
            # (which ones depends on numpy's build): where more rows than
            # fit are tied there, a stable sort keeps the lower ids.
            kth = np.take_along_axis(d, part, axis=1).max(axis=1)
            for row in np.flatnonzero((d <= kth[:, None]).sum(axis=1) > k):
                part[row] = np.argsort(d[row], kind="stable")[:k]
        else:
            part = np.tile(np.arange(d.shape[1]), (len(ids), 1))
        keys = np.take_along_axis(d, part, axis=1)
        order = np.lexsort((part, keys), axis=1)
        members = np.take_along_axis(part, order, axis=1)[:, :k]
        return members, np.take_along_axis(d, members, axis=1)

    def _privatize(self, ids):
        ids = np.asarray(ids, np.int64)
        out = np.empty(len(ids), np.int64)
        k = self.max_candidates
        for start in range(0, len(ids), _TOKENS):
            part = ids[start:start + _TOKENS]
            u = race.numpy_uniforms((len(part), 1 + k), self.rng)
            sizes = tg.draw_sizes(u[:, 0], self.thresholds, backend.NUMPY)
            noise = tg.truncated_gumbel(u[:, 1:], self.scale,
                                        self.max_distance, backend.NUMPY)
            position = tg.select(self._distances[part], sizes, noise,
                                 backend.NUMPY)
            out[start:start + len(part)] = self._members[part, position]
        return out

    def size_probabilities(self):
        return tg.implemented_size_probabilities(self.thresholds)

    def distribution_matrix(self, inputs):
        """(len(inputs), vocabulary_size) exact P(y | x)."""
        return tg.distribution_matrix(
            self.embeddings, inputs, self.candidate_ids, self.max_candidates,
            self.size_probabilities(), self.scale, self.max_distance)

    def pair_bound(self, token_a, token_b):
        """(exact log-ratio of the pair, 0), as the layer's."""
        if token_a == token_b:
            return 0.0, 0.0
        matrix = self.distribution_matrix([token_a, token_b])
        return tg.log_ratio(matrix[0], matrix[1]), 0.0

    def guarantee(self):
        return guarantees.truncated_gumbel_guarantee(
            self.epsilon, self.exact_epsilon, self.scale, self.max_distance,
            self.max_candidates, self.num_candidates, self.mu,
            self.embedding_description, "float64, uniforms on 2^-52 cells"
        ).with_randomness(self.randomness())
