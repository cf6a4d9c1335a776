"""Plausible deniability of token-level mechanisms (Qu et al. Sec. 5.3).

For each regular token w, privatize it `num_samples` times: N_w = how many
outputs equal w, S_w = how many distinct outputs. Small N_w and large S_w
mean more deniability.
"""

import numpy as np

# The most ids one call of `privatize` gets in `plausible_deniability`:
# the samples of several tokens go in one call (one row per token), which
# saves each call's fixed cost (a table search, a graph call) and bounds
# the arrays in flight.
IDS_PER_CALL = 1 << 16


def plausible_deniability(privatize, token_ids, num_samples=1000):
    """N_w and S_w for every id in `token_ids`.

    Args:
        privatize: a function from an int array of ids to privatized ids of
            the same shape, fresh noise for every id (e.g. a
            DChiTextPrivatizer layer, or
            tfdptext.offline.DChiCorpusPrivatizer). It is called on rows
            of `num_samples` copies of a token, several tokens' rows per
            call (at most IDS_PER_CALL ids, at least one row).
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
    rows = max(1, IDS_PER_CALL // num_samples)
    for start in range(0, len(ids), rows):
        part = ids[start:start + rows]
        out = np.asarray(privatize(np.repeat(part[:, None], num_samples,
                                             axis=1)))
        out = out.reshape(len(part), num_samples)
        n_w[start:start + len(part)] = (out == part[:, None]).sum(axis=1)
        s_w[start:start + len(part)] = [len(np.unique(row)) for row in out]
    return n_w, s_w


def changed_share(original_ids, private_ids, ignore_ids=()):
    """Share of tokens (outside `ignore_ids`) that the mechanism changed."""
    original = np.asarray(original_ids).ravel()
    private = np.asarray(private_ids).ravel()
    keep = ~np.isin(original, list(ignore_ids))
    if not keep.any():
        raise ValueError("No tokens left after `ignore_ids`.")
    return float((original[keep] != private[keep]).mean())
