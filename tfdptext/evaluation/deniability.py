"""Plausible deniability of token-level mechanisms (Qu et al. Sec. 5.3).

For each regular token w, privatize it `num_samples` times: N_w = how many
outputs equal w, S_w = how many distinct outputs. Small N_w and large S_w
mean more deniability.
"""

import numpy as np


def plausible_deniability(privatize, token_ids, num_samples=1000):
    """N_w and S_w for every id in `token_ids`.

    Args:
        privatize: a function from an int array of ids to privatized ids of
            the same shape (e.g. a DChiTextPrivatizer layer, or
            tfdptext.offline.DChiCorpusPrivatizer).
        token_ids: the tokens to test.
        num_samples: privatizations per token.

    Returns:
        (n_w, s_w): int arrays aligned with `token_ids`.
    """
    ids = np.asarray(token_ids, dtype=np.int32).ravel()
    if num_samples < 1:
        raise ValueError(f"`num_samples` must be >= 1, got {num_samples}.")
    n_w = np.zeros(len(ids), np.int64)
    s_w = np.zeros(len(ids), np.int64)
    for i, token in enumerate(ids):
        out = np.asarray(privatize(np.full((1, num_samples), token,
                                           np.int32))).ravel()
        n_w[i] = int((out == token).sum())
        s_w[i] = len(np.unique(out))
    return n_w, s_w


def changed_share(original_ids, private_ids, ignore_ids=()):
    """Share of tokens (outside `ignore_ids`) that the mechanism changed."""
    original = np.asarray(original_ids).ravel()
    private = np.asarray(private_ids).ravel()
    keep = ~np.isin(original, list(ignore_ids))
    if not keep.any():
        raise ValueError("No tokens left after `ignore_ids`.")
    return float((original[keep] != private[keep]).mean())
