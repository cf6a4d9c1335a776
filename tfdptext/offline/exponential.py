"""The common part of the offline exponential mechanisms over the
vocabulary (SanText, TEM): numpy float64, noise from os.urandom.

The log-weights of a token depend on its id only, so the two-stage
race's tables (`tfdptext.substitution.race.two_stage_factors`) are computed
once per distinct id and kept across calls in a bounded cache
(`tfdptext.offline.table_cache`, `cache_bytes`, 256 MiB by default), and
every token of that id draws from them with its own fresh uniforms (about
2 sqrt(V) per token): the math of the Keras layers, on numpy. The uniforms
are drawn in token order before any table is looked up, so a seeded run
releases the same ids whatever the cache holds.
"""

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.offline import base
from tfdptext.offline import table_cache
from tfdptext.privacy import exponential
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import neighbours
from tfdptext.substitution import race

# Distinct ids whose (V,) tables are computed at once (float64: about
# 250 KB each for V = 30,522).
_CHUNK = 128
# Tokens whose uniforms are drawn at once (about 2 sqrt(V) float64 each:
# 2.8 KB for V = 30,522).
_TOKEN_CHUNK = 8192


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
        cache_bytes: the most memory the per-word tables kept across
            calls may take (`tfdptext.offline.table_cache`; 256 MiB by
            default, about 8 |V| bytes a word; 0 keeps none).
    """

    def __init__(self, embeddings, epsilon, special_token_ids=(),
                 passthrough_token_ids=(), seed=None,
                 embedding_description="the token embedding table", *,
                 cache_bytes=table_cache.DEFAULT_MAX_BYTES):
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
        self.blocks, self.block_size = race.two_stage_sizes(len(table))
        self.cache = table_cache.TableCache(cache_bytes)

    def distances(self, ids):
        """(len(ids), V) float64 Euclidean distances to every row."""
        return neighbours.distances(self.embeddings[ids], self.embeddings,
                                    backend.NUMPY, self.norms)

    def _log_weights(self, distances):
        raise NotImplementedError

    def tables(self, ids):
        """The two-stage tables of each of the distinct `ids`: a list of
        ((blocks,) factors, (blocks, size) factors), from the cache or
        computed (the missing ones together, `_CHUNK` at a time) and
        kept."""
        found = [self.cache.get(int(i)) for i in ids]
        missing = [j for j, table in enumerate(found) if table is None]
        for start in range(0, len(missing), _CHUNK):
            part = missing[start:start + _CHUNK]
            block_factors, inner_factors = race.two_stage_factors(
                self._log_weights(self.distances(ids[part])))
            for row, j in enumerate(part):
                table = (block_factors[row].copy(),
                         inner_factors[row].copy())
                found[j] = table
                self.cache.put(int(ids[j]), table)
        return found

    def draw(self, ids):
        """One draw of the exponential mechanism for each of `ids`."""
        ids = np.asarray(ids, np.int64)
        out = np.empty(len(ids), np.int64)
        blocks = self.blocks
        for first in range(0, len(ids), _TOKEN_CHUNK):
            part = ids[first:first + _TOKEN_CHUNK]
            uniforms = race.numpy_uniforms((len(part), self.width), self.rng)
            distinct, rows = np.unique(part, return_inverse=True)
            order = np.argsort(rows, kind="stable")
            bounds = np.searchsorted(rows[order],
                                     np.arange(len(distinct) + 1))
            for start in range(0, len(distinct), _CHUNK):
                group = distinct[start:start + _CHUNK]
                tables = self.tables(group)
                tokens = order[bounds[start]:bounds[start + len(group)]]
                local = rows[tokens] - start
                block_factors = np.stack([t[0] for t in tables])
                block = race.race_with_factors(
                    block_factors[local], uniforms[tokens, :blocks])
                inner = np.empty((len(tokens), self.block_size))
                for j, (_, inner_factors) in enumerate(tables):
                    mine = slice(bounds[start + j] - bounds[start],
                                 bounds[start + j + 1] - bounds[start])
                    inner[mine] = inner_factors[block[mine]]
                within = race.race_with_factors(
                    inner, uniforms[tokens, blocks:blocks + self.block_size])
                out[first + tokens] = block * self.block_size + within
        return out

    def cache_info(self):
        """The table cache's counts and sizes (`TableCache.info`)."""
        return self.cache.info()

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
