"""The nearest-token search (`tfdptext.layers.nearest`) against a float64
brute force on adversarial near-ties, under this process's backend
(TensorFlow; tests/test_jax_backend.py checks JAX's answers)."""

import os
import sys

import numpy as np

from tfdptext.layers import nearest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nearest_ties  # noqa: E402


def _search(**kwargs):
    queries, table, candidates = nearest_ties.ties()
    chosen = np.asarray(nearest.nearest_tokens(queries, table, candidates,
                                               **kwargs))
    return chosen, nearest_ties.float64_nearest(queries, table, candidates)


def test_equals_float64_on_near_ties():
    chosen, reference = _search()
    np.testing.assert_array_equal(chosen, reference)


def test_equals_float64_with_a_tf32_product():
    # A GPU's TF32 product ranks the 10 near rows at random; the exact
    # re-ranking of the shortlist still finds the float64 nearest.
    chosen, reference = _search(product=nearest_ties.tf32_product)
    np.testing.assert_array_equal(chosen, reference)


def test_the_product_alone_is_not_exact():
    # Without the re-ranking (shortlist 1: the product's argmin), float32
    # and TF32 products miss the nearest of these ties: the tests above
    # would fail for a search that trusted them. Ten rows in the error
    # band: a random pick is right 1 time in 10.
    for product in (nearest._product, nearest_ties.tf32_product):
        chosen, reference = _search(shortlist=1, product=product)
        assert np.mean(chosen == reference) < 0.6


def test_exact_ties_give_the_lowest_id_and_never_a_special():
    table = np.array([[1, 0], [0, 1], [0, 1], [5, 5]], np.float32)
    candidates = np.array([False, True, True, True])
    # (1, 0) is special; (0, 1) appears twice: ids 1 and 2 tie exactly.
    chosen = nearest.nearest_tokens(np.array([[1, 0.1], [0, 1]],
                                             np.float32), table, candidates)
    np.testing.assert_array_equal(np.asarray(chosen), [1, 1])


def test_blocks_of_rows_give_the_same_tokens():
    # Eager under TensorFlow the rows are searched in blocks (the (N, V)
    # scores stay small): blocks of 5 rows (not dividing the 48 queries)
    # and one pass both give the float64 nearest. (The product's
    # rounding depends on the block's row count, so the coarse order of
    # these near-ties changes with the block; the exact re-ranking does
    # not.)
    reference = None
    for block in (5, 0):
        chosen, reference = _search(block=block)
        np.testing.assert_array_equal(chosen, reference)


def test_default_blocks_hold_a_fixed_number_of_scores(monkeypatch):
    # By default a block holds EAGER_BLOCK_SCORES scores (rows x tokens):
    # many rows of a small table, 256 of MiniLM's 30,522 tokens.
    assert nearest.EAGER_BLOCK_SCORES // 30_522 == 256
    queries, table, candidates = nearest_ties.ties()
    sizes = []
    search = nearest._search

    def counted(vectors, *args):
        sizes.append(int(vectors.shape[0]))
        return search(vectors, *args)

    monkeypatch.setattr(nearest, "_search", counted)
    rows_per_block = 5
    monkeypatch.setattr(nearest, "EAGER_BLOCK_SCORES",
                        rows_per_block * table.shape[0] + 1)
    chosen = np.asarray(nearest.nearest_tokens(queries, table, candidates))
    np.testing.assert_array_equal(
        chosen, nearest_ties.float64_nearest(queries, table, candidates))
    n = queries.shape[0]
    assert sizes == [min(rows_per_block, n - start)
                     for start in range(0, n, rows_per_block)]


def test_the_coarse_ranking_is_the_negated_coarse_scores():
    # The search ranks 2 v.t - ||t||^2 (specials at -inf): bit for bit
    # the order of `coarse_scores` with the specials at +inf. With a
    # shortlist of 1 the answer is that ranking's first token (lowest id
    # among equal scores): the argmin of the scores, on the near-ties, on
    # exact ties, and with a row whose squared norm is subnormal, eagerly
    # and traced.
    import tensorflow as tf

    queries, table, candidates = nearest_ties.ties()
    exact_table = np.array([[1, 0], [0, 1], [0, 1], [5, 5]], np.float32)
    subnormal = np.array([[1e-22, 0], [0, 1], [3e-23, 0], [1, 1]],
                         np.float32)
    small = np.array([[1, 0.1], [0, 1], [2, 2], [0, 0], [-1e-22, 0]],
                     np.float32)
    searched = tf.function(lambda q, t, c: nearest.nearest_tokens(
        q, t, c, shortlist=1))
    for q, t, c in ((queries, table, candidates),
                    (small, exact_table, np.array([False, True, True, True])),
                    (small, subnormal, np.array([True, True, True, True]))):
        scores = np.where(c[None, :], np.asarray(
            nearest.coarse_scores(q, t)), np.inf)
        for chosen in (nearest.nearest_tokens(q, t, c, shortlist=1,
                                              block=0),
                       searched(q, t, c)):
            np.testing.assert_array_equal(np.asarray(chosen),
                                          scores.argmin(axis=1))


def test_eager_layer_releases_what_its_graph_releases():
    # Eagerly, DChiTextPrivatizer searches only the positions it does not
    # pass through, in blocks; traced (fit, a TFLite export) it searches
    # every position in one pass. Same uniforms: the same ids.
    import tensorflow as tf

    from tfdptext.layers import DChiTextPrivatizer

    rng = np.random.default_rng(5)
    table = rng.normal(size=(600, 8)).astype(np.float32)
    layer = DChiTextPrivatizer(eta=2.0, embeddings=table,
                               special_token_ids=[0, 1, 2, 3, 4],
                               passthrough_token_ids=[0, 1, 2])
    ids = rng.integers(5, 600, size=(40, 12)).astype(np.int32)
    ids[:, 0], ids[:, 9], ids[:, 10:] = 1, 2, 0
    ids[3, 4] = 3  # [MASK]-like: special, not passed through
    layer.build(ids.shape)
    uniforms = rng.random(
        (40, 12, layer._uniforms_per_token())).astype(np.float32)
    traced = tf.function(layer.apply)
    eager = np.asarray(layer.apply(ids, uniforms))
    np.testing.assert_array_equal(
        eager, np.asarray(traced(tf.constant(ids), tf.constant(uniforms))))
    passed = np.isin(ids, [0, 1, 2])
    np.testing.assert_array_equal(eager[passed], ids[passed])
    assert not np.isin(eager[~passed], [0, 1, 2, 3, 4]).any()
    # The noise moved most tokens (eta 2: noise norm about 4, rows about
    # 2.8).
    assert np.mean(eager[~passed] != ids[~passed]) > 0.5
