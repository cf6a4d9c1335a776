"""Off-device 1-Diffractor (Meisenbacher, Chevli, Matthes 2024).

The same list and integer sampler as
`tfdptext.layers.DiffractorTextPrivatizer`
(`tfdptext.substitution.diffractor`): the same exact distribution as the
phone model, each draw one 32-bit word from os.urandom.

Reference: Meisenbacher, Chevli, Matthes, "1-Diffractor: Efficient and
Utility-Preserving Text Obfuscation Leveraging Word-Level Metric
Differential Privacy", ACM WPES 2024 (PyPI dp-diffractor).
"""

import os

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.offline import base
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import diffractor


class DiffractorCorpusPrivatizer(base.CorpusPrivatizer):
    """Privatizes token ids in bulk by 1-Diffractor's geometric mechanism
    on one list (built from `embeddings` by the exact greedy walk).

    Args:
        embeddings: (vocabulary_size, dim) table the list comes from.
        epsilon: privacy parameter per list position, finite and > 0.
        special_token_ids, passthrough_token_ids, seed,
        embedding_description: as `DChiCorpusPrivatizer` (seed: research
            only; then no privacy against whoever knows it).

    Example:
    >>> privatizer = DiffractorCorpusPrivatizer(table, epsilon=1.0,
    ...                                         special_token_ids=[0])
    >>> private_ids = privatizer(np.array([[5, 17, 42]]))
    """

    def __init__(self, embeddings, epsilon, special_token_ids=(),
                 passthrough_token_ids=(), seed=None,
                 embedding_description="the token embedding table"):
        epsilon = validation.check_positive("epsilon", epsilon)
        table = np.asarray(embeddings, np.float64)
        if table.ndim != 2 or len(table) < 2 or not np.isfinite(table).all():
            raise ArgumentError("`embeddings` must be a finite 2-D array "
                                "with at least 2 rows.")
        self._setup(diffractor.list_table(table, special_token_ids),
                    epsilon, special_token_ids, passthrough_token_ids, seed,
                    embedding_description)

    @classmethod
    def from_table(cls, list_table, epsilon, special_token_ids=(),
                   passthrough_token_ids=(), seed=None,
                   embedding_description="the token embedding table"):
        """The privatizer of a layer's (V, 2) list table."""
        privatizer = cls.__new__(cls)
        privatizer._setup(np.asarray(list_table, np.int64),
                          validation.check_positive("epsilon", epsilon),
                          special_token_ids, passthrough_token_ids, seed,
                          embedding_description)
        return privatizer

    def _setup(self, table, epsilon, special_token_ids,
               passthrough_token_ids, seed, description):
        super().__init__(len(table), special_token_ids, passthrough_token_ids,
                         seed, None)
        self.epsilon = epsilon
        self.list_length = len(self.candidate_ids)
        if self.list_length < 2 or \
                diffractor.list_length(table) != self.list_length:
            raise ArgumentError(
                "`list_table` must list every candidate (non-special) id "
                "once, at least 2.")
        self.positions = np.asarray(table[:, 0], np.int64)
        self.order = np.asarray(table[:self.list_length, 1], np.int64)
        self.counts = diffractor.tail_counts(epsilon, self.list_length,
                                             diffractor.WORD_BITS)
        self.thresholds = diffractor.shift_thresholds(self.counts,
                                                      diffractor.WORD_BITS)
        self.embedding_description = description

    def list_table(self):
        """The (V, 2) int32 table: list positions, list ids."""
        table = np.full((self.vocabulary_size, 2), -1, np.int32)
        table[:, 0] = self.positions
        table[:self.list_length, 1] = self.order
        return table

    def _words(self, count):
        """`count` int32 random words: os.urandom, or the research seed."""
        if self.rng is None:
            return np.frombuffer(os.urandom(4 * count), np.int32)
        return self.rng.integers(-2**31, 2**31, size=count,
                                 dtype=np.int64).astype(np.int32)

    def _privatize(self, ids):
        ids = np.asarray(ids, np.int64)
        shifts = diffractor.draw_shifts(self._words(len(ids)),
                                        self.thresholds, backend.NUMPY)
        released = diffractor.release_positions(
            self.positions[ids], shifts, self.list_length, backend.NUMPY)
        return self.order[released]

    def metric_distance(self, token_a, token_b):
        """|pos(a) - pos(b)|, in list positions."""
        return abs(int(self.positions[token_a])
                   - int(self.positions[token_b]))

    def pair_bound(self, token_a, token_b):
        """As the layer's: (eps |pos(a) - pos(b)|, the sampler's delta)."""
        distance = self.metric_distance(token_a, token_b)
        if distance == 0:
            return 0.0, 0.0
        bound = self.epsilon * distance
        return bound, diffractor.pair_deltas(
            self.epsilon, self.list_length, diffractor.WORD_BITS,
            [distance])[0]

    def guarantee(self):
        bits = diffractor.WORD_BITS
        return guarantees.diffractor_guarantee(
            self.epsilon, self.list_length,
            diffractor.total_variation(self.epsilon, self.list_length, bits),
            bits, len(self.counts), self.embedding_description,
            diffractor.delta_statement(self.epsilon, self.list_length, bits)
        ).with_randomness(self.randomness())
