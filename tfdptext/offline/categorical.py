"""m-ary randomized response off device (numpy), from integer words.

The same integer arithmetic as `tfdptext.layers.CodeRandomizedResponse`
with random words (`tfdptext.privacy.categorical`): for each value c and
two 32-bit words w1, w2, with k = w mod 2^24,

    keep iff k1 < T,  else  c + 1 + (k2 mod (m - 1))  (mod m).

Used for training labels that users contribute (label privacy) and for
privatizing codes or labels in bulk; the words come from os.urandom.
"""

import os

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import categorical

BITS = 24
_LOW_BITS = (1 << BITS) - 1


def os_words(count):
    """(count, 2) uint32 words from os.urandom."""
    return np.frombuffer(os.urandom(8 * int(count)),
                         dtype=np.uint32).reshape(-1, 2)


def randomized_response(values, num_values, epsilon, words=None):
    """Each of `values` (ints in [0, m)) released by m-ary randomized
    response at `epsilon`; `words` (len(values), 2) integer words, default
    fresh from os.urandom.

    Example:
    >>> released = randomized_response(np.zeros(10000, int), 4, 2.0)
    >>> float((released == 0).mean())  # about e^2 / (e^2 + 3) = 0.71
    """
    num_values = categorical.check_num_values("num_values", num_values)
    values = np.asarray(values)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.integer):
        raise ArgumentError(f"`values` must be a 1-D array of integers, "
                            f"received {values.dtype} of shape "
                            f"{values.shape}.")
    if values.size and (values.min() < 0 or values.max() >= num_values):
        raise ArgumentError(f"`values` must lie in [0, {num_values}), "
                            f"received values from {values.min()} to "
                            f"{values.max()}.")
    if words is None:
        words = os_words(len(values))
    words = np.asarray(words)
    if words.shape != (len(values), 2) or not np.issubdtype(words.dtype,
                                                            np.integer):
        raise ArgumentError(f"`words` must be integers of shape "
                            f"({len(values)}, 2), received {words.dtype} "
                            f"{words.shape}.")
    k = words.astype(np.int64) & _LOW_BITS
    threshold = categorical.keep_threshold(epsilon, num_values, BITS)
    other = (values + 1 + k[:, 1] % (num_values - 1)) % num_values
    return np.where(k[:, 0] < threshold, values, other).astype(values.dtype)
