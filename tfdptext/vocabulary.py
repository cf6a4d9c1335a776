"""Token-id sets shared by the text-to-text privatizers (numpy only)."""

import dataclasses

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

# The special tokens of an uncased BERT WordPiece vocabulary (TensorFlow-free
# here, so that code that only needs to recognise such a vocabulary, e.g. a
# Beam worker over a word list, does not load TensorFlow).
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass(frozen=True)
class TokenSets:
    """Which ids are never output (special) and which are released
    unchanged (passthrough, a subset of special), as sorted tuples and as
    boolean masks over the vocabulary."""

    special_token_ids: tuple
    passthrough_token_ids: tuple
    is_special: np.ndarray
    is_passthrough: np.ndarray


def token_sets(vocabulary_size, special_token_ids, passthrough_token_ids):
    """Validates the two id sets against `vocabulary_size` (errors name the
    argument) and returns them as `TokenSets`."""
    special = sorted({
        validation.check_int("special_token_ids", i, minimum=0)
        for i in special_token_ids})
    if special and special[-1] >= vocabulary_size:
        raise ArgumentError(
            "`special_token_ids` must be < vocabulary_size "
            f"({vocabulary_size}), received {special[-1]}.")
    if len(special) >= vocabulary_size:
        raise ArgumentError("`special_token_ids` leaves no candidate token.")
    passthrough = sorted({
        validation.check_int("passthrough_token_ids", i, minimum=0)
        for i in passthrough_token_ids})
    if not set(passthrough) <= set(special):
        raise ArgumentError(
            "`passthrough_token_ids` must be special tokens (in "
            "`special_token_ids`), received "
            f"{sorted(set(passthrough) - set(special))}.")
    is_special = np.zeros([vocabulary_size], dtype=bool)
    is_special[special] = True
    is_passthrough = np.zeros([vocabulary_size], dtype=bool)
    is_passthrough[passthrough] = True
    return TokenSets(tuple(special), tuple(passthrough), is_special,
                     is_passthrough)
