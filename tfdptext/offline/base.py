"""The common part of the off-device token privatizers."""

import numpy as np

from tfdptext import vocabulary
from tfdptext.errors import ArgumentError
from tfdptext.privacy import randomness
from tfdptext.privacy import validation


class CorpusPrivatizer:
    """Token ids in, privatized token ids out, for whole corpora.

    Owns what the mechanisms share: the special ids (never output) and
    passthrough ids (released unchanged), the candidate ids, the input
    checks, the random source (os.urandom unless a research `seed` is
    given) and FAISS's thread count. A subclass implements
    `_privatize(ids)`: private ids for a 1-D array of ids that are neither
    passthrough nor out of range. Not used directly.
    """

    def __init__(self, vocabulary_size, special_token_ids,
                 passthrough_token_ids, seed, num_threads):
        sets = vocabulary.token_sets(vocabulary_size, special_token_ids,
                                     passthrough_token_ids)
        self.vocabulary_size = vocabulary_size
        self.is_special = sets.is_special
        self.is_passthrough = sets.is_passthrough
        self.candidate_ids = np.flatnonzero(~sets.is_special)
        if num_threads is not None:
            import faiss

            faiss.omp_set_num_threads(
                validation.check_int("num_threads", num_threads))
        self.seed = seed
        self.rng = None if seed is None else np.random.default_rng(seed)

    def randomness(self):
        """Where the noise comes from, for the guarantee."""
        return randomness.OS_ENTROPY if self.seed is None \
            else randomness.SEEDED

    def __call__(self, token_ids):
        ids = np.asarray(token_ids)
        if not np.issubdtype(ids.dtype, np.integer):
            raise ArgumentError("`token_ids` must be integers.")
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocabulary_size):
            raise ArgumentError(
                "`token_ids` must be in [0, vocabulary_size) = [0, "
                f"{self.vocabulary_size}).")
        flat = ids.reshape(-1)
        out = flat.copy()
        private = ~self.is_passthrough[flat]
        if private.any():
            out[private] = self._privatize(flat[private])
        return out.reshape(ids.shape)

    def _privatize(self, ids):
        raise NotImplementedError
