"""The exact nearest-token search of the text-to-text mechanisms, in
`keras.ops` (any backend; under TensorFlow it converts to TFLite builtins).

d_chi text-to-text releases argmin_w ||v - phi(w)|| over the candidate
tokens (the noisy embedding v; special tokens excluded). Which token is
nearest is the release, so the search must be exact in float32, and a
plain matrix product is not, in two ways:

- the expanded form ||t||^2 - 2 v.t cancels: its rounding error grows with
  ||v|| ||t|| (a noisy vector is long), not with the gap between the two
  nearest distances;
- on a GPU, JAX and TensorFlow compute float32 matrix products in TF32 by
  default (inputs rounded to 11 significant bits): an error of about
  2^-10 ||v|| ||t|| in each score, which changes the nearest token of
  near-ties.

So the search runs in two passes (`nearest_tokens`): the matrix product
ranks every token (`coarse_scores`, at the backend's highest precision
where it can be asked for: JAX's `Precision.HIGHEST`; TensorFlow has no
per-product setting, so on a GPU with TF32 on its ranking is TF32's), and
the `SHORTLIST` best are ranked again by their exact squared distance
sum((v - t)^2), computed from the differences (elementwise float32 ops,
never TF32). The answer is the float64 nearest token unless more than
SHORTLIST - 1 tokens sit, in the coarse ranking's error, closer than the
nearest one; or unless two distances differ by less than float32 can
tell.
"""

import keras
from keras import ops

# Tokens the coarse ranking passes to the exact one.
SHORTLIST = 16
# Scores (rows x tokens) per block of the eager search under TensorFlow
# (`nearest_tokens`): 256 rows of MiniLM's 30,522 tokens, 31 MB of float32.
EAGER_BLOCK_SCORES = 256 * 30_522


def _product(vectors, table):
    """(N, V) = vectors (N, d) @ table (V, d)^T, at full float32 precision
    under JAX (TF32 is JAX's GPU default)."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.lax.dot_general(
            vectors, table, (((1,), (1,)), ((), ())),
            precision=jax.lax.Precision.HIGHEST)
    return ops.matmul(vectors, ops.transpose(table))


def coarse_scores(vectors, table, product=_product):
    """(N, V) ||t||^2 - 2 v.t: the squared distance less ||v||^2 (the same
    for every token of a row), from one matrix product."""
    squared_norms = ops.sum(ops.square(table), axis=-1)
    return squared_norms[None, :] - 2.0 * product(vectors, table)


def _eager_tensorflow():
    """Whether ops run eagerly under TensorFlow (not while tracing a
    graph or a TFLite conversion, not under JAX)."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    return tf.executing_eagerly()


def nearest_tokens(vectors, table, candidates, shortlist=SHORTLIST,
                   product=_product, block=None):
    """The nearest candidate token of each vector.

    Args:
        vectors: (N, d) float32 (noisy embeddings).
        table: (V, d) float32 (the embedding table).
        candidates: (V,) bools: the tokens that may be output (at least
            one True).
        shortlist: how many tokens of the coarse ranking the exact
            distance ranks again (at most V are used).
        product: (vectors, table) -> vectors @ table^T, the coarse
            ranking's matrix product (a test swaps in a TF32 one).
        block: run eagerly under TensorFlow, the rows are searched in
            blocks of this many (None: as many as keep a block's scores
            within `EAGER_BLOCK_SCORES`, 256 rows of MiniLM's table; 0:
            one pass); in a graph (fit, a TFLite export) and under JAX,
            in one pass. The product's rounding may depend on
            how many rows it multiplies (so may the coarse order of
            near-ties: it already did on the batch size), never the
            answer, which the exact re-ranking decides under the same
            condition as above.

    Returns:
        (N,) int32 token ids; among exactly equal distances, the token
        ranked first by the coarse scores (the lowest id among equal
        scores).

    Example:
    >>> table = np.eye(4, dtype="float32")
    >>> nearest_tokens(np.array([[0.9, 0.8, 0, 0]], "float32"), table,
    ...                np.array([False, True, True, True]))  # [1]
    """
    vectors = ops.cast(vectors, "float32")
    table = ops.cast(table, "float32")
    candidates = ops.convert_to_tensor(candidates, "bool")
    count = min(int(shortlist), int(table.shape[0]))
    # -(||t||^2 - 2 v.t), special tokens at -inf: bit for bit the negated
    # `coarse_scores` with the specials set to +inf (negation and the
    # factor 2 are exact; a - b == -(b - a) in IEEE arithmetic), in two
    # passes over the (N, V) scores instead of four. The norms are masked
    # once per call (V values): finite vectors give finite products, and
    # a finite number less +inf is -inf.
    squared_norms = ops.sum(ops.square(table), axis=-1)
    masked_norms = ops.where(candidates, squared_norms, float("inf"))
    if block is None:
        block = max(1, EAGER_BLOCK_SCORES // max(1, int(table.shape[0])))
    if not _eager_tensorflow() or not block or \
            int(vectors.shape[0]) <= block:
        return _search(vectors, table, candidates, masked_norms, count,
                       product)
    # One (N, V) matrix is 125 MB at N = 1,024 and MiniLM's 30,522
    # tokens: every op would write (and fault in) a fresh one; a block
    # of 256 rows is 31 MB. A small table takes many rows per block (a
    # block per few rows would cost more in eager ops than it searches).
    return ops.concatenate(
        [_search(vectors[start:start + block], table, candidates,
                 masked_norms, count, product)
         for start in range(0, int(vectors.shape[0]), block)], axis=0)


def _search(vectors, table, candidates, masked_norms, count, product):
    """`nearest_tokens` of (n, d) vectors in one pass, ranking
    2 v.t - masked_norms."""
    negated = 2.0 * product(vectors, table) - masked_norms[None, :]
    _, ids = ops.top_k(negated, count)  # (N, count), best first
    rows = ops.take(table, ids, axis=0)  # (N, count, d)
    exact = ops.sum(ops.square(vectors[:, None, :] - rows), axis=-1)
    exact = ops.where(ops.take(candidates, ids, axis=0), exact,
                      float("inf"))
    # top_k, not argmin: Keras' float argmin under TensorFlow adds a
    # BitwiseAnd (not a TFLite builtin). Ties: the first in shortlist order.
    _, best = ops.top_k(-exact, 1)
    chosen = ops.take_along_axis(ids, best, axis=-1)
    return ops.cast(ops.squeeze(chosen, -1), "int32")
