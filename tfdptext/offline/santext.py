"""Off-device SanText and SanText+ (Yue et al. 2021).

The same mechanism as `tfdptext.layers.SanTextTextPrivatizer`
(`tfdptext.substitution.utilities`, the two-stage race) in float64 with
noise from os.urandom.

Reference: Yue, Du, Wang, Li, Sun, Chow, "Differential Privacy for Text
Analytics via Natural Text Sanitization", Findings of ACL 2021.
"""

import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.offline import exponential
from tfdptext.offline import table_cache
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import race
from tfdptext.substitution import utilities


class SanTextCorpusPrivatizer(exponential.ExponentialCorpusPrivatizer):
    """Privatizes token ids in bulk: y with probability ~ exp(-eps d / 2)
    (SanText); with `sensitive_token_ids`, SanText+ (outputs sensitive
    words only; a non-sensitive input kept with probability 1 - p).

    Args:
        embeddings, epsilon, special_token_ids, passthrough_token_ids,
        seed, embedding_description, cache_bytes: see
            `ExponentialCorpusPrivatizer`.
        sensitive_token_ids: None (SanText) or the sensitive ids.
        p: SanText+'s probability of sanitizing a non-sensitive word
            (default 0.2).

    Example:
    >>> privatizer = SanTextCorpusPrivatizer(table, epsilon=3.0,
    ...                                      special_token_ids=[0])
    >>> private_ids = privatizer(np.array([[5, 17, 42]]))
    """

    def __init__(self, embeddings, epsilon, sensitive_token_ids=None,
                 p=None, special_token_ids=(), passthrough_token_ids=(),
                 seed=None, embedding_description="the token embedding "
                 "table", *, cache_bytes=table_cache.DEFAULT_MAX_BYTES):
        super().__init__(embeddings, epsilon, special_token_ids,
                         passthrough_token_ids, seed, embedding_description,
                         cache_bytes=cache_bytes)
        self.outputs = ~self.is_special
        self.sensitive_token_ids = None
        self.p = None
        if sensitive_token_ids is None:
            if p is not None:
                raise ArgumentError("`p` applies to SanText+ only: give "
                                    "`sensitive_token_ids` too.")
            return
        ids = np.unique(np.asarray(sensitive_token_ids, np.int64).ravel())
        if not ids.size or ids.min() < 0 or \
                ids.max() >= self.vocabulary_size or self.is_special[ids].any():
            raise ArgumentError(
                "`sensitive_token_ids` must be at least one candidate id in "
                f"[0, {self.vocabulary_size}), none of them special.")
        self.sensitive_token_ids = tuple(int(i) for i in ids)
        self.p = validation.check_rate("p", 0.2 if p is None else p,
                                       include_one=True)
        self.threshold = utilities.keep_threshold(self.p)
        self.outputs = np.zeros(self.vocabulary_size, bool)
        self.outputs[ids] = True

    def _log_weights(self, distances):
        return utilities.santext_log_weights(distances, self.epsilon,
                                             self.outputs, backend.NUMPY)

    def _privatize(self, ids):
        if self.sensitive_token_ids is None:
            return self.draw(ids)
        keep = ~self.outputs[ids] & utilities.keeps(
            race.numpy_uniforms((len(ids),), self.rng), self.threshold,
            backend.NUMPY)
        out = np.asarray(ids, np.int64).copy()
        if (~keep).any():
            out[~keep] = self.draw(ids[~keep])
        return out

    def metric_distance(self, token_a, token_b):
        if self.sensitive_token_ids is not None and token_a != token_b and \
                not (self.outputs[token_a] and self.outputs[token_b]):
            return math.inf
        return super().metric_distance(token_a, token_b)

    def guarantee_in(self, precision):
        plus = self.sensitive_token_ids is not None
        return guarantees.santext_guarantee(
            self.epsilon, self.embedding_description, self.vocabulary_size,
            precision, sensitive_count=len(self.sensitive_token_ids)
            if plus else None,
            keep=self.threshold / 2**utilities.KEEP_BITS if plus else None)
