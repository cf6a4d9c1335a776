"""SanTextTextPrivatizer: SanText and SanText+ (Yue et al. 2021)."""

import math

import keras
import numpy as np
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import exponential_privatizer
from tfdptext.layers import sampling
from tfdptext.privacy import exponential
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import utilities


@keras.saving.register_keras_serializable(package="tfdptext")
class SanTextTextPrivatizer(exponential_privatizer.ExponentialTextPrivatizer):
    """Replaces each token by a word drawn with probability ~ exp(-eps
    d(x, y) / 2), d the Euclidean distance between embeddings (SanText);
    with `sensitive_token_ids`, by SanText+: outputs are sensitive words
    only, and a non-sensitive input is released unchanged with probability
    1 - p (else sanitized like a sensitive one).

    SanText is eps * d metric DP per token over all candidates. SanText+
    protects the sensitive words from each other only (eps * d between
    two of them); a non-sensitive word has no protection: it is released
    as itself, and a released non-sensitive word is the input. Sampled by
    the two-stage exponential race in float32 (the guarantee's delta,
    `tfdptext.privacy.exponential`); about 2 sqrt(V) uniforms per token.

    Reference: Yue, Du, Wang, Li, Sun, Chow, "Differential Privacy for
    Text Analytics via Natural Text Sanitization", Findings of ACL 2021.

    Args:
        epsilon: privacy parameter, finite and > 0.
        embeddings: (vocabulary_size, dim) table, or None with
            `vocabulary_size` and `embedding_dim`.
        sensitive_token_ids: None (SanText), or the sensitive ids
            (SanText+; each a candidate, at least one).
        p: SanText+'s probability of sanitizing a non-sensitive word, in
            [0, 1] (default 0.2 when `sensitive_token_ids` is given).
        special_token_ids, passthrough_token_ids, embedding_description,
        noise: as `DChiTextPrivatizer`.

    Example:
    >>> table = np.random.randn(100, 16).astype("float32")
    >>> layer = SanTextTextPrivatizer(epsilon=3.0, embeddings=table,
    ...                               special_token_ids=[0, 1])
    >>> layer(np.array([[5, 6, 7]]))
    """

    def __init__(self, epsilon, embeddings=None, sensitive_token_ids=None,
                 p=None, **kwargs):
        super().__init__(epsilon, embeddings, **kwargs)
        self.sensitive_token_ids = None
        self.p = None
        self._outputs = ~self._is_special
        if sensitive_token_ids is None:
            if p is not None:
                raise ArgumentError("`p` applies to SanText+ only: give "
                                    "`sensitive_token_ids` too.")
            return
        ids = sorted({validation.check_int("sensitive_token_ids", int(i), 0)
                      for i in np.asarray(sensitive_token_ids).ravel()})
        if not ids or ids[-1] >= self.vocabulary_size or \
                self._is_special[ids].any():
            raise ArgumentError(
                "`sensitive_token_ids` must be at least one candidate id in "
                f"[0, {self.vocabulary_size}), none of them special.")
        self.sensitive_token_ids = tuple(ids)
        self.p = validation.check_rate("p", 0.2 if p is None else p,
                                       include_one=True)
        self._threshold = utilities.keep_threshold(self.p)
        self._outputs = np.zeros(self.vocabulary_size, bool)
        self._outputs[ids] = True

    @property
    def plus(self):
        return self.sensitive_token_ids is not None

    def _log_weights(self, distances):
        return utilities.santext_log_weights(
            distances, self.epsilon, tf.constant(self._outputs),
            backend.TENSORFLOW)

    def _privatize_ids(self, ids, rows, uniforms):
        if not self.plus:
            return self._race(rows, uniforms)
        count = self._race_uniforms()
        keep_uniforms = sampling.uniform(
            tf.shape(ids), None if uniforms is None else uniforms[:, count])
        sanitized = self._race(rows, None if uniforms is None
                               else uniforms[:, :count])
        sensitive = tf.gather(tf.constant(self._outputs), ids)
        keep = tf.logical_and(
            tf.logical_not(sensitive),
            utilities.keeps(keep_uniforms, self._threshold,
                            backend.TENSORFLOW))
        return tf.where(keep, ids, sanitized)

    def _uniforms_per_token(self):
        return self._race_uniforms() + (1 if self.plus else 0)

    def _guarantee(self):
        return self.guarantee_in(exponential.FLOAT32)

    def guarantee_in(self, precision):
        keep = None if not self.plus else \
            self._threshold / 2**utilities.KEEP_BITS
        return guarantees.santext_guarantee(
            self.epsilon, self.embedding_description, self.vocabulary_size,
            precision, sensitive_count=None if not self.plus
            else len(self.sensitive_token_ids), keep=keep)

    def metric_distance(self, token_a, token_b):
        if self.plus and token_a != token_b and not (
                self._outputs[token_a] and self._outputs[token_b]):
            return math.inf
        return super().metric_distance(token_a, token_b)

    def corpus_privatizer(self, seed=None):
        from tfdptext.offline import santext as offline_santext

        return offline_santext.SanTextCorpusPrivatizer(
            self.public_table(), self.epsilon,
            sensitive_token_ids=self.sensitive_token_ids, p=self.p,
            special_token_ids=self.special_token_ids,
            passthrough_token_ids=self.passthrough_token_ids, seed=seed,
            embedding_description=self.embedding_description)

    def get_config(self):
        config = super().get_config()
        config.update({"sensitive_token_ids": None if not self.plus
                       else list(self.sensitive_token_ids), "p": self.p})
        return config
