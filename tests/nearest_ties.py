"""Adversarial near-ties for the nearest-token search
(`tfdptext.layers.nearest`), shared by tests/test_nearest.py (TensorFlow)
and tests/jax_backend_checks.py (JAX). numpy only.

Each query q (norm 100, like a long noisy vector) has 10 rows around it at
squared distances 1, 1 + 3e-5, 1 + 6e-5, ... in a random order of ids: the
gap is far above float32's error in sum((q - t)^2) (about 64 x 2^-24
relative at worst: 4e-6) and far below the expanded form's
||t||^2 - 2 q.t (about 2^-24 x 2 ||q|| ||t|| = 1e-3 in float32, 10 in
TF32). Some queries' nearest row is a special token (never output).
"""

import numpy as np

DIM = 64
QUERIES = 48
NEAR = 10
GAP = 3e-5
RANDOM_ROWS = 40
SPECIAL_EVERY = 6  # every 6th query's nearest row is special


def ties(seed=0):
    """(queries (N, DIM) float32, table (V, DIM) float32, candidates (V,)
    bools)."""
    rng = np.random.default_rng(seed)
    queries, rows, special = [], [], []
    for j in range(QUERIES):
        q = rng.normal(size=DIM)
        q *= 100.0 / np.linalg.norm(q)
        order = rng.permutation(NEAR)
        for k in order:
            u = rng.normal(size=DIM)
            u /= np.linalg.norm(u)
            rows.append(q + np.sqrt(1.0 + GAP * k) * u)
            special.append(k == 0 and j % SPECIAL_EVERY == 0)
        queries.append(q)
    rows += list(rng.normal(size=(RANDOM_ROWS, DIM)) * 100.0 / np.sqrt(DIM))
    special += [False] * RANDOM_ROWS
    return (np.asarray(queries, np.float32), np.asarray(rows, np.float32),
            ~np.asarray(special))


def float64_nearest(queries, table, candidates):
    """The brute-force reference: float64 distances of the float32
    values."""
    d = ((queries.astype(np.float64)[:, None, :] -
          table.astype(np.float64)[None]) ** 2).sum(-1)
    d[:, ~candidates] = np.inf
    return d.argmin(axis=1)


def round_to_tf32(x):
    """float32 values rounded to TF32 (10 mantissa bits, to nearest even):
    what a GPU's TF32 matrix product reads."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    bias = np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))
    return ((bits + bias) & np.uint32(0xFFFFE000)).view(np.float32)


def tf32_product(vectors, table):
    """vectors @ table^T as a TF32 GPU product computes it (rounded inputs,
    float32 sums), for the coarse ranking of an eager call."""
    from keras import ops

    v = round_to_tf32(ops.convert_to_numpy(vectors))
    t = round_to_tf32(ops.convert_to_numpy(table))
    return ops.convert_to_tensor(v @ t.T)
