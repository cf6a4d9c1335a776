"""BERT's masking of token ids on the host, in numpy (any backend).

The law of `tfdptext.pretraining.masking.TokenMasker` (the count
ceil(rate x selectable) in float32 as tensorflow-text computes it, capped
at `max_predictions`; positions uniform among the selectable ones,
ascending; of the selected, MASK_TOKEN_RATE become [MASK],
RANDOM_TOKEN_RATE a uniform id of the vocabulary, the rest are kept),
drawn from a numpy Generator: the same generator state gives the same
masks in any process. `TokenMasker.fixed` and the backend-agnostic
pretraining (`tfdptext.pretraining.portable`) both use it.
"""

import numpy as np

# BERT's corruption of a selected position (keras-hub's defaults): [MASK]
# with this probability, a uniformly random id with the next, else kept.
MASK_TOKEN_RATE = 0.8
RANDOM_TOKEN_RATE = 0.1


def special_ids_table(vocabulary_size, special_token_ids, pad_token_id):
    """(vocabulary_size,) booleans: the ids never selected ([PAD] too)."""
    is_special = np.zeros([vocabulary_size], dtype=bool)
    is_special[list(special_token_ids)] = True
    is_special[pad_token_id] = True
    return is_special


def mask_ids(token_ids, rng, *, is_special, mask_rate, max_predictions,
             mask_token_id):
    """{masked_ids, mask_positions (int32), mask_weights (float32)} of
    (batch, length) `token_ids`, drawn from the numpy Generator `rng`.

    Example:
    >>> special = special_ids_table(30522, [0, 100, 101, 102, 103], 0)
    >>> out = mask_ids(ids, np.random.default_rng(0), is_special=special,
    ...                mask_rate=0.15, max_predictions=20, mask_token_id=103)
    """
    ids = np.asarray(token_ids).astype(np.int32)
    vocabulary_size = len(is_special)
    positions = np.zeros([len(ids), max_predictions], np.int32)
    weights = np.zeros([len(ids), max_predictions], np.float32)
    masked = ids.copy()
    for row, row_ids in enumerate(ids):
        selectable = np.flatnonzero(~is_special[row_ids])
        count = int(np.ceil(np.float32(len(selectable)) *
                            np.float32(mask_rate)))
        count = min(count, max_predictions)
        chosen = np.sort(rng.permutation(selectable)[:count])
        draw = rng.random(count)
        random_ids = rng.integers(0, vocabulary_size, count)
        masked[row, chosen] = np.where(
            draw < MASK_TOKEN_RATE, mask_token_id,
            np.where(draw < MASK_TOKEN_RATE + RANDOM_TOKEN_RATE,
                     random_ids, row_ids[chosen]))
        positions[row, :count] = chosen
        weights[row, :count] = 1.0
    return {"masked_ids": masked, "mask_positions": positions,
            "mask_weights": weights}
