"""WordDropout: masks a fixed share of the real tokens of each example."""

import keras
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import base
from tfdptext.layers import sampling
from tfdptext.privacy import dropout
from tfdptext.privacy import validation


@keras.saving.register_keras_serializable(package="tfdptext")
class WordDropout(base.InputPerturbation):
    """Replaces round(d * rate) of the d real tokens by `mask_token_id`.

    DPNR's word dropout (Sec. 3.3.2): before the encoder, mask a share `rate`
    of the words, at positions drawn uniformly without replacement. Real
    tokens are those with `padding_mask` = 1 whose id is not in
    `special_token_ids` ([CLS], [SEP], ...); padding and special tokens are
    never masked. Half counts round up: d = 3, rate = 0.5 masks 2 tokens.

    Input and output: a dict with `"token_ids"` and `"padding_mask"` of
    shape (batch, length), as keras-hub backbones take; other keys pass
    through.

    Word dropout alone is not differential privacy: it amplifies the
    guarantee of the mechanism that follows it (`guarantee(base)`).

    Args:
        rate: dropout rate mu in [0, 1).
        mask_token_id: id written in place of a dropped token (the
            tokenizer's [MASK]).
        special_token_ids: ids never dropped.
        noise: False switches dropout off.

    Example:
    >>> layer = WordDropout(rate=0.5, mask_token_id=103,
    ...                     special_token_ids=(101, 102))
    >>> out = layer({"token_ids": np.array([[101, 7, 8, 9, 10, 102, 0]]),
    ...              "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 0]])})
    >>> (out["token_ids"].numpy() == 103).sum()  # round(4 * 0.5) = 2
    2
    """

    def __init__(self, rate, mask_token_id, special_token_ids=(), noise=True,
                 **kwargs):
        super().__init__(noise=noise, **kwargs)
        self.rate = validation.check_rate("rate", rate)
        self.mask_token_id = validation.check_int(
            "mask_token_id", mask_token_id, minimum=0)
        self.special_token_ids = tuple(
            validation.check_int("special_token_ids", i, minimum=0)
            for i in special_token_ids)

    def build(self, input_shape):
        if not isinstance(input_shape, dict) or not {
                "token_ids", "padding_mask"} <= set(input_shape):
            raise ArgumentError(
                "`inputs` must be a dict with 'token_ids' and 'padding_mask',"
                f" received {input_shape!r}.")
        for key in ("token_ids", "padding_mask"):
            if len(input_shape[key]) != 2:
                raise ArgumentError(
                    f"`inputs['{key}']` must have rank 2 (batch, length), "
                    f"received shape {tuple(input_shape[key])}.")
        super().build(input_shape)

    def _real_tokens(self, token_ids, padding_mask):
        real = tf.cast(padding_mask, tf.bool)
        for special in self.special_token_ids:
            real = tf.logical_and(real, tf.not_equal(token_ids, special))
        return real

    def dropped_positions(self, token_ids, padding_mask, uniforms=None):
        """A boolean (batch, length) tensor: which positions to mask."""
        token_ids = tf.cast(token_ids, tf.int32)
        real = self._real_tokens(token_ids, padding_mask)
        count = tf.reduce_sum(tf.cast(real, tf.float32), axis=-1)
        num_drop = tf.floor(count * self.rate + 0.5)
        # Uniform scores for real tokens, 2.0 (above all of them) elsewhere;
        # a token is dropped when its rank among the real tokens is below
        # num_drop, which picks a uniformly random subset of that size.
        scores = tf.where(
            real, sampling.uniform(tf.shape(token_ids), uniforms), 2.0)
        s_i = scores[:, :, None]
        s_j = scores[:, None, :]
        index = tf.range(tf.shape(token_ids)[1])
        earlier = index[None, None, :] < index[None, :, None]
        before = tf.logical_or(
            s_j < s_i, tf.logical_and(tf.equal(s_j, s_i), earlier))
        rank = tf.reduce_sum(tf.cast(before, tf.float32), axis=-1)
        return tf.logical_and(real, rank < num_drop[:, None])

    def apply(self, inputs, uniforms=None):
        outputs = dict(inputs)
        if not self._noisy(uniforms) or self.rate == 0.0:
            return outputs
        token_ids = tf.cast(inputs["token_ids"], tf.int32)
        drop = self.dropped_positions(token_ids, inputs["padding_mask"],
                                      uniforms)
        outputs["token_ids"] = tf.where(
            drop, tf.constant(self.mask_token_id, tf.int32), token_ids)
        return outputs

    def uniforms_shape(self, input_shape):
        return tuple(input_shape["token_ids"][1:])

    def guarantee(self, base_guarantee=None, min_tokens=1, max_tokens=512):
        """The word-level guarantee of this dropout followed by a mechanism.

        Args:
            base_guarantee: per-representation guarantee of what follows
                (e.g. `to_representation_level(laplace.guarantee())`).
                Without it, dropout alone guarantees nothing.
            min_tokens, max_tokens: the range of input lengths (real
                tokens) the amplification must hold for.
        """
        if base_guarantee is None:
            from tfdptext.privacy import guarantee as guarantee_lib
            return guarantee_lib.Guarantee.none(
                self.name, "word dropout alone is not differentially private;"
                " pass the guarantee of the mechanism that follows it")
        if not self.noise or self.rate == 0.0:
            return base_guarantee
        return dropout.with_dropout(base_guarantee, self.rate, min_tokens,
                                    max_tokens)

    def compute_output_shape(self, input_shape):
        return dict(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({
            "rate": self.rate,
            "mask_token_id": self.mask_token_id,
            "special_token_ids": list(self.special_token_ids),
        })
        return config
