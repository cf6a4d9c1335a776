"""Off-device BRR text-to-text privatization of token ids, with FAISS binary
indexes.

The same mechanism as `tfdptext.layers.BRRTextPrivatizer`: each token's
n-bit code goes through per-bit randomized response, and the output is the
candidate word whose code is nearest in Hamming distance. Codes stay packed
(n / 8 bytes per word, FAISS's binary layout) from the table to the index.
"""

import os

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.offline import base
from tfdptext.privacy import categorical
from tfdptext.privacy import randomized_response as rr
from tfdptext.privacy import validation

INDEXES = ("exact", "hnsw")
# Neighbours fetched per query by the exact index; a row whose K nearest are
# all tied is resolved by a range search (the tie rule needs them all).
_EXACT_K = 8


def keep_threshold(epsilon):
    """T = floor(2^32 e^eps / (1 + e^eps)) (in [1, 2^32 - 1]): a bit is
    kept iff its uniform 32-bit word w < T, so it flips with probability
    1 - T / 2^32 >= 1 / (1 + e^eps): rounding only ever flips more, and
    the guarantee states the epsilon of these exact probabilities
    (`tfdptext.privacy.randomized_response`, grid of 32 bits)."""
    return categorical.keep_threshold(epsilon, 2, rr.OFFLINE_BITS)


class BRRCorpusPrivatizer(base.CorpusPrivatizer):
    """Privatizes token ids in bulk: M(w) = nearest(RR(phi(w))) in Hamming
    distance.

    Args:
        codes: (vocabulary_size, num_bits / 8) uint8, the packed codes
            (`np.packbits` of the 0/1 rows; `tfdptext.binary` writes them),
            row i the code of token id i.
        epsilon: per-bit privacy parameter, finite and > 0.
        special_token_ids: never output.
        passthrough_token_ids: released unchanged (structural tokens; each
            must be in `special_token_ids`).
        index: "exact" (`faiss.IndexBinaryFlat`; the lowest id among tied
            nearest codes, the same output distribution as the Keras layer)
            or "hnsw" (`faiss.IndexBinaryHNSW`, approximate: faster, may
            return a code that is not the nearest; the guarantee is
            unchanged, as decoding is post-processing).
        seed: None (default): flips from os.urandom. A seed gives a numpy
            generator, for reproducible research only (the guarantee then
            says there is none against anyone who knows the seed).
        num_threads: FAISS threads (None = FAISS default).
        hnsw_neighbors: M of the HNSW graph.

    Example:
    >>> packed = np.packbits(np.random.randint(0, 2, (1000, 256)), axis=1)
    >>> privatizer = BRRCorpusPrivatizer(packed, epsilon=1.0,
    ...                                  special_token_ids=[0, 1, 2],
    ...                                  passthrough_token_ids=[0, 1, 2])
    >>> private_ids = privatizer(np.array([[1, 17, 523, 2]]))
    """

    def __init__(self, codes, epsilon, special_token_ids=(),
                 passthrough_token_ids=(), index="exact", seed=None,
                 num_threads=None, hnsw_neighbors=32,
                 codes_description="binary codes"):
        import faiss

        self.epsilon = validation.check_positive("epsilon", epsilon)
        packed = np.ascontiguousarray(codes)
        if packed.dtype != np.uint8 or packed.ndim != 2 or len(packed) < 2:
            raise ArgumentError(
                "`codes` must be packed codes: a 2-D uint8 array with at "
                f"least 2 rows, received {packed.dtype} {packed.shape}.")
        self.codes = packed
        self.num_bits = 8 * packed.shape[1]
        self.index_kind = validation.check_choice("index", index, INDEXES)
        super().__init__(len(packed), special_token_ids, passthrough_token_ids,
                         seed, num_threads)
        self.candidates = np.ascontiguousarray(packed[self.candidate_ids])
        if self.index_kind == "exact":
            self.index = faiss.IndexBinaryFlat(self.num_bits)
        else:
            self.index = faiss.IndexBinaryHNSW(
                self.num_bits,
                validation.check_int("hnsw_neighbors", hnsw_neighbors, 2))
        self.index.add(self.candidates)
        self.threshold = keep_threshold(self.epsilon)
        self.codes_description = codes_description

    def index_bytes(self):
        """The size of the serialized FAISS index, in bytes."""
        import faiss

        return int(faiss.serialize_index_binary(self.index).size)

    def flip_masks(self, count):
        """(count, num_bits / 8) packed masks, each bit set (flipped) with
        probability 1 - `threshold` / 2^32 independently."""
        shape = (count, self.num_bits)
        if self.rng is None:
            words = np.frombuffer(os.urandom(4 * count * self.num_bits),
                                  dtype=np.uint32).reshape(shape)
        else:
            words = self.rng.integers(0, 2**32, size=shape, dtype=np.uint32)
        # threshold >= 2^31: the flip probability is at most 1/2.
        return np.packbits(words >= self.threshold, axis=1)

    def nearest_tokens(self, packed_queries):
        """The candidate id nearest to each packed query (exact index: the
        lowest id among ties)."""
        queries = np.ascontiguousarray(packed_queries, dtype=np.uint8)
        if self.index_kind != "exact":
            _, rows = self.index.search(queries, 1)
            return self.candidate_ids[rows[:, 0]]
        k = min(_EXACT_K, len(self.candidate_ids))
        distances, rows = self.index.search(queries, k)
        tied = distances == distances[:, :1]
        best = np.where(tied, rows, np.iinfo(rows.dtype).max).min(axis=1)
        # All k fetched neighbours tied: more may tie beyond them. Fetch
        # every candidate at the minimum distance (a range search below
        # distance + 1, one per distinct distance) and keep the lowest.
        if k < len(self.candidate_ids):
            unsure = np.flatnonzero(tied[:, -1])
            minimum = distances[unsure, 0]
            for distance in np.unique(minimum):
                rows_at = unsure[minimum == distance]
                limits, _, found = self.index.range_search(
                    queries[rows_at], int(distance) + 1)
                for j, row in enumerate(rows_at):
                    best[row] = found[limits[j]:limits[j + 1]].min()
        return self.candidate_ids[best]

    def _privatize(self, ids):
        noisy = np.bitwise_xor(self.codes[ids], self.flip_masks(len(ids)))
        return self.nearest_tokens(noisy)

    def guarantee(self):
        return rr.brr_text_guarantee(
            self.epsilon, self.num_bits, self.codes_description,
            grids=(rr.OFFLINE_BITS,)).with_randomness(self.randomness())
