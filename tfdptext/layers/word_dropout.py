"""WordDropout: masks a fixed share of the real tokens of each example."""

import keras
import numpy as np
from keras import ops

from tfdptext.errors import ArgumentError
from tfdptext.layers import base
from tfdptext.layers import noise_math
from tfdptext.privacy import dropout
from tfdptext.privacy import validation

# The drop counts round(d * rate) for d = 0..COUNTED_TOKENS real tokens are
# a constant table computed by `tfdptext.privacy.dropout.num_dropped`, the
# function the guarantee counts with: float32 arithmetic in the graph
# rounds d * rate differently for some rates and lengths (rate 0.105, d =
# 300: 31 in float64, 32 in float32), which would let the layer drop fewer
# tokens than the guarantee assumes. Longer inputs (BERT models take at
# most 512 tokens) round in float32; no guarantee of this layer covers them.
COUNTED_TOKENS = 512


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

    Runs on any Keras backend (`keras.ops`, fixed shapes: it compiles
    under `jax.jit`). Its uniforms come from TensorFlow's unseeded
    RANDOM_UNIFORM under TensorFlow (the phone export), from
    `keras.random` with the layer's own seeded `SeedGenerator` under
    another backend (server-side training only: `tfdptext.layers.
    noise_math`), or from the caller (`apply`; the phone's int32 random
    words are read by TensorFlow's `sampling`).

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
    >>> (np.asarray(out["token_ids"]) == 103).sum()  # round(4 * 0.5) = 2
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
        # round(d * rate) for d = 0..COUNTED_TOKENS, as the guarantee counts.
        self._counts = np.array([dropout.num_dropped(d, self.rate)
                                 for d in range(COUNTED_TOKENS + 1)],
                                np.float32)

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
        real = ops.cast(padding_mask, "bool")
        for special in self.special_token_ids:
            real = ops.logical_and(real, ops.not_equal(token_ids, special))
        return real

    def _uniforms(self, token_ids, uniforms):
        """U[0, 1) scores, one per position: drawn (the backend's source),
        taken from float `uniforms`, or made from int32 random words."""
        if uniforms is None:
            source = self.noise_source()
            return noise_math.clamp_unit(
                source.uniform(source.shape(token_ids)))
        dtype = keras.backend.standardize_dtype(uniforms.dtype)
        if "int" in dtype:  # the phone's words: TensorFlow only
            from tfdptext.layers import sampling

            return sampling.uniform(None, uniforms)
        return noise_math.clamp_unit(uniforms)

    def _num_dropped(self, count):
        """round(count * rate) per row as float32: from the accounting's
        table up to COUNTED_TOKENS real tokens, in float32 above."""
        counted = ops.take(ops.convert_to_tensor(self._counts),
                           ops.minimum(count, COUNTED_TOKENS))
        longer = ops.floor(ops.cast(count, "float32") * self.rate + 0.5)
        return ops.where(count <= COUNTED_TOKENS, counted, longer)

    def dropped_positions(self, token_ids, padding_mask, uniforms=None):
        """A boolean (batch, length) tensor: which positions to mask."""
        token_ids = ops.cast(token_ids, "int32")
        real = self._real_tokens(token_ids, padding_mask)
        num_drop = self._num_dropped(ops.sum(ops.cast(real, "int32"),
                                             axis=-1))
        # Uniform scores for real tokens, 2.0 (above all of them) elsewhere;
        # a token is dropped when its rank among the real tokens is below
        # num_drop, which picks a uniformly random subset of that size.
        # Ranks by pairwise comparison: (batch, length, length), a fixed
        # shape (no sort, mask or scatter of data-dependent size).
        scores = ops.where(real, self._uniforms(token_ids, uniforms), 2.0)
        s_i = scores[:, :, None]
        s_j = scores[:, None, :]
        index = ops.arange(ops.shape(token_ids)[1], dtype="int32")
        earlier = index[None, None, :] < index[None, :, None]
        before = ops.logical_or(
            s_j < s_i, ops.logical_and(ops.equal(s_j, s_i), earlier))
        rank = ops.sum(ops.cast(before, "float32"), axis=-1)
        return ops.logical_and(real, rank < num_drop[:, None])

    def apply(self, inputs, uniforms=None):
        outputs = dict(inputs)
        if not self._noisy(uniforms) or self.rate == 0.0:
            return outputs
        token_ids = ops.cast(inputs["token_ids"], "int32")
        drop = self.dropped_positions(token_ids, inputs["padding_mask"],
                                      uniforms)
        outputs["token_ids"] = ops.where(
            drop, ops.cast(self.mask_token_id, "int32"), token_ids)
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
        max_tokens = validation.check_int("max_tokens", max_tokens)
        if max_tokens > COUNTED_TOKENS:
            raise ArgumentError(
                f"`max_tokens` must be at most {COUNTED_TOKENS} (the longest "
                f"input whose drop count the layer takes from the "
                f"guarantee's own count), received {max_tokens}.")
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
