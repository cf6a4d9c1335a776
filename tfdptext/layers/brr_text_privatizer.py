"""BRRTextPrivatizer: binary randomized response text-to-text on token ids."""

import keras
import numpy as np
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import sampling
from tfdptext.layers import token_privatizer
from tfdptext.privacy import randomized_response as rr
from tfdptext.privacy import validation


def check_codes(codes):
    """`codes` as a (vocabulary_size, num_bits) uint8 array of 0 and 1."""
    array = np.asarray(codes)
    if array.ndim != 2 or array.shape[0] < 2 or array.shape[1] < 1:
        raise ArgumentError(
            "`codes` must be 2-D (vocabulary_size >= 2, num_bits >= 1), "
            f"received shape {array.shape}.")
    if not np.isin(array, (0, 1)).all():
        raise ArgumentError("`codes` must hold only 0 and 1 (unpacked bits).")
    return array.astype(np.uint8)


@keras.saving.register_keras_serializable(package="tfdptext")
class BRRTextPrivatizer(token_privatizer.TokenPrivatizer):
    """Replaces each token by the word whose binary code is nearest to its
    own code after per-bit randomized response (BRR, Carvalho et al.).

    M(w) = argmin_{w' in candidates} d_H(RR(phi(w)), phi(w')), where RR
    keeps each of the n bits with probability e^eps / (1 + e^eps) and flips
    it otherwise, independently (integer thresholds, as in
    `RandomizedResponse`: kept iff k < floor(p 2^bits)). Per token, the
    output is
    eps * d_H(phi(w), phi(w')) metric-DP (`guarantee()`); decoding is
    post-processing.

    The nearest code is found exactly in the graph: the codes are kept as a
    +-1 table S, and for a noisy +-1 code s the score s . S_w' = n - 2 d_H
    is maximised with ARG_MAX (builtin TFLite ops; integer-valued, so int8
    weight quantization keeps the ranking). Ties go to the LOWEST candidate
    id, here and in `tfdptext.offline.BRRCorpusPrivatizer`. Special tokens
    are never output; the structural `passthrough_token_ids` are released
    unchanged; every other input token, [UNK] included, is privatized.

    The codes are a non-trainable weight (saved with the weights).

    Args:
        epsilon: per-bit privacy parameter, finite and > 0.
        codes: (vocabulary_size, num_bits) array of 0/1, row i the code of
            token id i (`tfdptext.binary.load_codes(...).bits`). May be
            omitted when `vocabulary_size` and `num_bits` are given (the
            weights are then loaded later, e.g. by `keras.saving`).
        special_token_ids: ids never output.
        passthrough_token_ids: ids released unchanged (each must be in
            `special_token_ids`).
        codes_description: what the codes are, for the guarantee.
        noise: False switches noise off (output = input ids; debugging
            only; no guarantee).

    Example:
    >>> codes = np.random.randint(0, 2, size=(100, 64))
    >>> layer = BRRTextPrivatizer(epsilon=2.0, codes=codes,
    ...                           special_token_ids=[0, 1, 2, 3],
    ...                           passthrough_token_ids=[0, 1, 2])
    >>> layer(np.array([[1, 5, 3, 2, 0]]))  # 1, 2, 0 pass through
    """

    def __init__(self, epsilon, codes=None, vocabulary_size=None,
                 num_bits=None, special_token_ids=(),
                 passthrough_token_ids=(), codes_description="binary codes",
                 noise=True, **kwargs):
        signs = None
        if codes is not None:
            bits = check_codes(codes)
            signs = 2.0 * bits.astype(np.float32) - 1.0
            vocabulary_size, num_bits = bits.shape
        if vocabulary_size is None or num_bits is None:
            raise ArgumentError(
                "Pass `codes`, or both `vocabulary_size` and `num_bits`.")
        self.num_bits = validation.check_int("num_bits", num_bits)
        super().__init__(signs, vocabulary_size, self.num_bits, "signs",
                         special_token_ids, passthrough_token_ids,
                         noise=noise, **kwargs)
        self.epsilon = validation.check_positive("epsilon", epsilon)
        self.thresholds = rr.keep_thresholds(self.epsilon)
        self.flip_probability = rr.implemented_flip_probability(
            self.epsilon)
        self.codes_description = codes_description

    def nearest_tokens(self, noisy_signs):
        """The candidate id whose code is nearest in Hamming distance to
        each row of (N, num_bits) +-1 codes; the lowest id among ties."""
        scores = tf.matmul(noisy_signs, self.signs, transpose_b=True)
        scores = self._candidates_only(scores, -np.inf)
        return tf.argmax(scores, axis=-1, output_type=tf.int32)

    def _private_tokens(self, rows, uniforms):
        k, grid = sampling.random_integers(tf.shape(rows), uniforms)
        return self.nearest_tokens(
            tf.where(k < self.thresholds[grid], rows, -rows))

    def _uniforms_per_token(self):
        return self.num_bits

    def _guarantee(self):
        return rr.brr_text_guarantee(self.epsilon, self.num_bits,
                                     self.codes_description)

    def get_config(self):
        config = super().get_config()
        config.update({
            "epsilon": self.epsilon,
            "num_bits": self.num_bits,
            "codes_description": self.codes_description,
        })
        return config
