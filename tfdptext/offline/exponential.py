"""The common part of the offline exponential mechanisms over the
vocabulary (SanText, TEM): numpy float64, noise from os.urandom.

The log-weights of a token depend on its id only, so they and the
two-stage race's block tables (`tfdptext.substitution.race`) are computed
once per distinct id of a call (in chunks, to bound memory), and every
token of that id draws from them with its own fresh uniforms (about
2 sqrt(V) per token): the math of the Keras layers, on numpy.
"""

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.offline import base
from tfdptext.privacy import exponential
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import neighbours
from tfdptext.substitution import race

# Distinct ids whose (V,) log-weights are held at once (float64: about
# 250 KB each for V = 30,522).
_CHUNK = 128


class ExponentialCorpusPrivatizer(base.CorpusPrivatizer):
    """Privatizes token ids in bulk by an exponential mechanism whose
    log-weights come from the distances to every table row
    (`_log_weights`). Not used directly.

    Args:
        embeddings: (vocabulary_size, dim) table.
        epsilon: privacy parameter, finite and > 0.
        special_token_ids, passthrough_token_ids, seed: as
            `DChiCorpusPrivatizer` (seed: research only).
        embedding_description: what the table is, for the guarantee.
    """

    def __init__(self, embeddings, epsilon, special_token_ids=(),
                 passthrough_token_ids=(), seed=None,
                 embedding_description="the token embedding table"):
        self.epsilon = validation.check_positive("epsilon", epsilon)
        table = np.asarray(embeddings, dtype=np.float64)
        if table.ndim != 2 or len(table) < 2 or not np.isfinite(table).all():
            raise ArgumentError("`embeddings` must be a finite 2-D array "
                                "with at least 2 rows.")
        super().__init__(len(table), special_token_ids, passthrough_token_ids,
                         seed, None)
        if len(self.candidate_ids) < 2:
            raise ArgumentError(
                "`special_token_ids` leave fewer than 2 candidate tokens.")
        self.embeddings = table
        self.norms = np.sum(table * table, axis=1)
        self.embedding_description = embedding_description
        self.width = race.two_stage_uniforms(len(table))

    def distances(self, ids):
        """(len(ids), V) float64 Euclidean distances to every row."""
        return neighbours.distances(self.embeddings[ids], self.embeddings,
                                    backend.NUMPY, self.norms)

    def _log_weights(self, distances):
        raise NotImplementedError

    def draw(self, ids):
        """One draw of the exponential mechanism for each of `ids`."""
        ids = np.asarray(ids)
        out = np.empty(len(ids), np.int64)
        distinct, rows = np.unique(ids, return_inverse=True)
        for start in range(0, len(distinct), _CHUNK):
            part = distinct[start:start + _CHUNK]
            grouped, block_weights = race.block_log_weights(
                self._log_weights(self.distances(part)), backend.NUMPY)
            tokens = np.flatnonzero((rows >= start)
                                    & (rows < start + len(part)))
            uniforms = race.numpy_uniforms((len(tokens), self.width),
                                           self.rng)
            out[tokens] = race.two_stage_draw(
                grouped, block_weights, uniforms, backend.NUMPY,
                rows=rows[tokens] - start)
        return out

    def _privatize(self, ids):
        return self.draw(ids)

    def pair_bound(self, token_a, token_b):
        """(log-ratio bound, delta) of the guarantee for two input ids."""
        from tfdptext.privacy import substitution as guarantees

        bound = self.epsilon * self.metric_distance(token_a, token_b)
        return bound, guarantees.pair_delta(self.guarantee(), bound)

    def metric_distance(self, token_a, token_b):
        return float(np.linalg.norm(self.embeddings[token_a]
                                    - self.embeddings[token_b]))

    def guarantee(self):
        return self.guarantee_in(exponential.FLOAT64).with_randomness(
            self.randomness())
