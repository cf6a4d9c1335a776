"""Token embedding inversion (Qu et al. Sec. 5.4).

An attacker who knows the public token embedding table maps each released
noisy token embedding to its nearest table row. Inversion accuracy is the
share of regular tokens recovered exactly. For d_chi text-to-text the
release already is that nearest token, so the same number is the share of
tokens left unchanged.
"""

import numpy as np


def nearest_tokens(vectors, table, candidate_ids=None):
    """Exact (flat L2, FAISS) nearest table row id for each vector.

    Args:
        vectors: (n, dim) float array.
        table: (vocabulary, dim) token embedding table.
        candidate_ids: the ids the attacker considers (default: all).
    """
    import faiss

    table = np.ascontiguousarray(table, np.float32)
    vectors = np.ascontiguousarray(vectors, np.float32)
    if table.ndim != 2 or vectors.ndim != 2 or \
            vectors.shape[1] != table.shape[1]:
        raise ValueError(
            f"`vectors` {vectors.shape} and `table` {table.shape} must be "
            "2-D with the same width.")
    if candidate_ids is None:
        candidate_ids = np.arange(len(table))
    candidate_ids = np.asarray(candidate_ids, np.int64)
    index = faiss.IndexFlatL2(table.shape[1])
    index.add(table[candidate_ids])
    _, rows = index.search(vectors, 1)
    return candidate_ids[rows[:, 0]]


def inversion_accuracy(released_embeddings, token_ids, padding_mask, table,
                       special_token_ids=()):
    """Share of regular tokens whose released embedding inverts to them.

    Args:
        released_embeddings: (n, length, dim) noisy token embeddings.
        token_ids: (n, length) the true ids.
        padding_mask: (n, length) 1 for real tokens.
        table: the public (vocabulary, dim) embedding table.
        special_token_ids: ids not counted ([CLS], [SEP], ...).

    Returns:
        {"accuracy": a, "n_tokens": count}.
    """
    ids = np.asarray(token_ids)
    keep = (np.asarray(padding_mask) > 0) & ~np.isin(ids,
                                                     list(special_token_ids))
    if not keep.any():
        raise ValueError("No regular tokens to invert.")
    vectors = np.asarray(released_embeddings)[keep]
    recovered = nearest_tokens(vectors, table)
    return {"accuracy": float((recovered == ids[keep]).mean()),
            "n_tokens": int(keep.sum())}


def regular_token_sample(token_ids, padding_mask, special_token_ids, count,
                         seed=0):
    """Up to `count` distinct regular token ids from a corpus, drawn with a
    fixed seed (the tokens whose deniability is measured)."""
    ids = np.asarray(token_ids)[np.asarray(padding_mask) > 0]
    ids = np.unique(ids[~np.isin(ids, list(special_token_ids))])
    if len(ids) == 0:
        raise ValueError("The corpus holds no regular tokens.")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(ids, size=min(count, len(ids)), replace=False))
