"""How much of an embedding table its binary codes keep.

`binarization_report` measures, for a (V, dim) table and its (V, bits)
codes:

- reconstruction (when given the autoencoder's scaled inputs and
  outputs): mean squared error in the scaled space, and the mean cosine
  between each scaled input and its reconstruction;
- neighbours: for a fixed-size sample of words drawn with a seeded
  generator (the same words for the same seed and vocabulary), the
  overlap between a word's k nearest neighbours by cosine in the real
  space (FAISS exact inner product on unit vectors) and by Hamming
  distance in the code space (exact, numpy popcount), as a fraction of k
  and averaged over the sample; the word itself is never its own
  neighbour. Hamming distances tie often; words tied at the k-th distance
  count by the expected overlap of a uniformly random choice among them,
  so the figure does not depend on an index's tie order. The chance
  level, k / (V - 1), is the overlap of k words drawn at random;
- bits set per word (mean, min, max), the share of words setting each bit
  (min, max, and the bits constant over the vocabulary, which carry
  nothing);
- distinct codes and words that share their code with another word (such
  words cannot be told apart after binarization).

`exclude_ids` (a preset's special tokens) are left out of every figure:
neither sampled nor candidates nor counted. Memory is O(chunk x V): no
V x V matrix is built.

Pure numpy and FAISS (no TensorFlow import).
"""

import numpy as np

from tfdptext.binary import codes as codes_lib
from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

DEFAULT_K = 10
DEFAULT_SAMPLE = 1000
DEFAULT_SEED = 0
# Query words per block of the Hamming search (block x V int32 distances).
_QUERY_CHUNK = 128


def _unit_rows(matrix):
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix),
                     where=norms > 0)


def _reconstruction(scaled_inputs, reconstruction, keep, shape):
    if (scaled_inputs is None) != (reconstruction is None):
        raise ArgumentError("`scaled_inputs` and `reconstruction` go "
                            "together: give both or neither.")
    if scaled_inputs is None:
        return None
    x = np.asarray(scaled_inputs, np.float64)
    y = np.asarray(reconstruction, np.float64)
    if x.shape != shape or y.shape != shape:
        raise ArgumentError(
            f"`scaled_inputs` {x.shape} and `reconstruction` {y.shape} must "
            f"both have the matrix's shape {shape}.")
    x, y = x[keep], y[keep]
    cosine = np.sum(_unit_rows(x) * _unit_rows(y), axis=1)
    return {"mse": float(np.mean(np.square(x - y))),
            "mean_cosine": float(np.mean(cosine))}


def _real_neighbours(unit, queries, k):
    """(len(queries), k) ids of each query's k nearest rows of `unit` by
    cosine, the query itself left out."""
    import faiss

    index = faiss.IndexFlatIP(unit.shape[1])
    index.add(np.ascontiguousarray(unit, np.float32))
    _, found = index.search(np.ascontiguousarray(unit[queries], np.float32),
                            k + 1)
    neighbours = np.empty((len(queries), k), np.int64)
    for row, (query, ids) in enumerate(zip(queries, found)):
        ids = ids[ids != query]
        neighbours[row] = ids[:k]
    return neighbours


def _expected_overlap(distances, real, k):
    """Per query row: the expected size of (the k nearest by `distances`,
    ties at the k-th distance broken uniformly at random) & `real` (a
    boolean mask of the same shape)."""
    kth = np.partition(distances, k - 1, axis=1)[:, k - 1:k]
    closer = distances < kth
    tied = distances == kth
    needed = k - closer.sum(axis=1)
    return (np.sum(closer & real, axis=1)
            + needed / tied.sum(axis=1) * np.sum(tied & real, axis=1))


def neighbour_overlap(matrix, packed, *, k=DEFAULT_K, sample=DEFAULT_SAMPLE,
                      seed=DEFAULT_SEED):
    """(mean overlap fraction, per-query overlaps, query ids): top-k
    cosine neighbours vs top-k Hamming neighbours (module docstring)."""
    count = matrix.shape[0]
    queries = np.sort(np.random.default_rng(seed).choice(
        count, size=min(sample, count), replace=False))
    real = _real_neighbours(_unit_rows(matrix), queries, k)
    overlaps = np.empty(len(queries))
    for start in range(0, len(queries), _QUERY_CHUNK):
        block = queries[start:start + _QUERY_CHUNK]
        distances = codes_lib.hamming_distances(packed[block], packed)
        rows = np.arange(len(block))
        distances[rows, block] = np.iinfo(np.int32).max  # not itself
        mask = np.zeros(distances.shape, bool)
        mask[rows[:, None], real[start:start + len(block)]] = True
        overlaps[start:start + len(block)] = _expected_overlap(
            distances, mask, k)
    return float(np.mean(overlaps) / k), overlaps / k, queries


def binarization_report(matrix, bits_array, *, scaled_inputs=None,
                        reconstruction=None, k=DEFAULT_K,
                        sample=DEFAULT_SAMPLE, seed=DEFAULT_SEED,
                        exclude_ids=()):
    """The report of a binarization, as a JSON-ready dict.

    Args:
        matrix: (V, dim) real embeddings.
        bits_array: (V, bits) codes, 0 and 1.
        scaled_inputs, reconstruction: (V, dim) the autoencoder's inputs
            and outputs (`autoencoder.scaled`, `autoencoder.decode`), for
            the reconstruction figures; both or neither.
        k: neighbours per word, 1 <= k <= V' - 1 (V' words kept).
        sample: words whose neighbours are compared (all if fewer).
        seed: the sample's seed.
        exclude_ids: ids left out of every figure.

    Example:
    >>> report = binarization_report(matrix, encode(model, matrix))
    >>> report["neighbours"]["overlap"] > 5 * report["neighbours"]["chance"]
    True
    """
    matrix = np.asarray(matrix, np.float32)
    if matrix.ndim != 2:
        raise ArgumentError(f"`matrix` must be 2-D, received shape "
                            f"{matrix.shape}.")
    bits_array = codes_lib.check_bit_array(bits_array)
    if bits_array.shape[0] != matrix.shape[0]:
        raise ArgumentError(
            f"`bits_array` has {bits_array.shape[0]} rows, `matrix` "
            f"{matrix.shape[0]}; they must match.")
    sample = validation.check_int("sample", sample)
    seed = validation.check_int("seed", seed, minimum=0)
    excluded = np.zeros(matrix.shape[0], bool)
    for i in exclude_ids:
        if not 0 <= int(i) < matrix.shape[0]:
            raise ArgumentError(f"`exclude_ids`: {i} is not a row of "
                                "`matrix`.")
        excluded[int(i)] = True
    keep = np.flatnonzero(~excluded)
    if len(keep) < 2:
        raise ArgumentError("binarization_report needs at least 2 words "
                            f"that are not excluded, has {len(keep)}.")
    k = validation.check_int("k", k)
    if k > len(keep) - 1:
        raise ArgumentError(f"`k` must be at most {len(keep) - 1} (the "
                            f"other words), received {k}.")
    bits = bits_array[keep]
    packed = np.packbits(bits, axis=1)
    overlap, _, queries = neighbour_overlap(matrix[keep], packed, k=k,
                                            sample=sample, seed=seed)
    chance = k / (len(keep) - 1)
    set_per_word = bits.sum(axis=1)
    share = bits.mean(axis=0)
    _, counts = np.unique(packed, axis=0, return_counts=True)
    return {
        "words": int(len(keep)),
        "excluded_ids": int(excluded.sum()),
        "bits": int(bits.shape[1]),
        "reconstruction": _reconstruction(scaled_inputs, reconstruction,
                                          keep, matrix.shape),
        "neighbours": {
            "k": k, "sample": int(len(queries)), "seed": seed,
            "real_metric": "cosine", "binary_metric": "hamming",
            "overlap": overlap, "chance": chance,
            "ratio_to_chance": overlap / chance,
        },
        "bits_set": {"mean": float(set_per_word.mean()),
                     "min": int(set_per_word.min()),
                     "max": int(set_per_word.max())},
        "bit_share": {"min": float(share.min()), "max": float(share.max()),
                      "constant_bits": int(np.sum((share == 0)
                                                  | (share == 1)))},
        "distinct_codes": int(len(counts)),
        "words_sharing_a_code": int(counts[counts > 1].sum()),
    }


def format_report(report):
    """The report as a few lines of text, for people."""
    n = report["neighbours"]
    lines = [f"words: {report['words']} ({report['excluded_ids']} special "
             f"ids left out), bits: {report['bits']}"]
    rec = report["reconstruction"]
    if rec is not None:
        lines.append(f"reconstruction: MSE {rec['mse']:.5f} (scaled "
                     f"space), mean cosine {rec['mean_cosine']:.4f}")
    lines += [
        f"top-{n['k']} neighbour overlap (cosine vs Hamming, {n['sample']} "
        f"words, seed {n['seed']}): {n['overlap']:.4f}; chance "
        f"{n['chance']:.6f} ({n['ratio_to_chance']:.0f}x chance)",
        f"bits set per word: mean {report['bits_set']['mean']:.1f}, min "
        f"{report['bits_set']['min']}, max {report['bits_set']['max']}",
        f"share of words per bit: min {report['bit_share']['min']:.3f}, max "
        f"{report['bit_share']['max']:.3f}, constant bits "
        f"{report['bit_share']['constant_bits']}",
        f"distinct codes: {report['distinct_codes']} of {report['words']} "
        f"({report['words_sharing_a_code']} words share a code)",
    ]
    return "\n".join(lines)


__all__ = ["binarization_report", "format_report", "neighbour_overlap"]
