"""Masked-LM batches: tokenized texts with BERT's masking, as tf.data.

Each batch is a dict:

    token_ids       (batch, length) the original ids (what the user types)
    masked_ids      (batch, length) the ids after BERT's masking: of the
                    selected positions, 80% [MASK], 10% a random token,
                    10% unchanged
    padding_mask    (batch, length)
    segment_ids     (batch, length)
    mask_positions  (batch, max_predictions) selected positions, 0-padded
    mask_weights    (batch, max_predictions) 1.0 selected, 0.0 padding

The model privatizes and corrupts (tfdptext.pretraining.model): the user
side's mechanism sees the original ids, the server's MLM corruption is
applied to what it releases.
"""

import numpy as np
import tensorflow as tf

from tfdptext.training.pipeline import trim_padding

# The keys of a batch (see the module docstring).
FEATURES = ("token_ids", "masked_ids", "padding_mask", "segment_ids",
            "mask_positions", "mask_weights")


class TokenMasker:
    """keras-hub's `MaskedLMMaskGenerator` that never selects a special
    token or padding.

    keras-hub checks every id against its list of unselectable ids; with a
    BERT vocabulary's 999 special ids ([PAD], [UNK], [CLS], [SEP], [MASK],
    [unused*]) that costs about 6 times the masking itself. So the special
    ids are first replaced by [PAD], the generator's only unselectable id,
    and put back afterwards: the same selection, at the cost of a short
    list.

    Args:
        vocabulary_size: the MLM vocabulary.
        mask_token_id, pad_token_id: [MASK] and [PAD].
        special_token_ids: ids never selected ([PAD] is added).
        mask_rate: the share of selectable tokens selected (BERT: 0.15).
        max_predictions: the most selections per sequence (BERT: 20).

    Example:
    >>> masker = TokenMasker(vocabulary_size=30522, mask_token_id=103,
    ...                      pad_token_id=0, special_token_ids=[0, 100, 101,
    ...                      102, 103], mask_rate=0.15, max_predictions=20)
    >>> out = masker(tokenizer(["a sentence to mask"])["token_ids"])
    >>> sorted(out)
    ['mask_positions', 'mask_weights', 'masked_ids']
    """

    def __init__(self, *, vocabulary_size, mask_token_id, pad_token_id,
                 special_token_ids, mask_rate, max_predictions):
        import keras_hub

        is_special = np.zeros([vocabulary_size], dtype=bool)
        is_special[list(special_token_ids)] = True
        is_special[pad_token_id] = True
        self.is_special = is_special
        self.pad_token_id = int(pad_token_id)
        self.max_predictions = int(max_predictions)
        self._generator = keras_hub.layers.MaskedLMMaskGenerator(
            vocabulary_size=vocabulary_size,
            mask_selection_rate=mask_rate,
            mask_token_id=mask_token_id,
            mask_selection_length=max_predictions,
            unselectable_token_ids=[int(pad_token_id)],
            dtype="float32")

    def __call__(self, token_ids):
        """{masked_ids, mask_positions (int32), mask_weights (float32)} of
        (batch, length) int32 `token_ids`."""
        token_ids = tf.cast(token_ids, tf.int32)
        special = tf.gather(tf.constant(self.is_special), token_ids)
        hidden = tf.where(special, self.pad_token_id, token_ids)
        out = self._generator(hidden)
        return {
            "masked_ids": tf.where(special, token_ids,
                                   tf.cast(out["token_ids"], tf.int32)),
            "mask_positions": tf.cast(out["mask_positions"], tf.int32),
            "mask_weights": tf.cast(out["mask_weights"], tf.float32),
        }


def masker_for(tokenizer, *, mask_rate, max_predictions):
    """The TokenMasker of a `tfdptext.data.TextTokenizer`: every special
    id of its vocabulary unselectable."""
    return TokenMasker(vocabulary_size=tokenizer.vocabulary_size,
                       mask_token_id=tokenizer.mask_id,
                       pad_token_id=tokenizer.pad_id,
                       special_token_ids=tokenizer.special_token_ids,
                       mask_rate=mask_rate, max_predictions=max_predictions)


def mask_batch(features, masker):
    """A tokenized batch (trimmed to its longest text) plus its masking."""
    features = trim_padding(features)
    return {**features, **masker(features["token_ids"])}


def batch_encoder(tokenizer, masker):
    """texts (batch,) -> a masked batch, as one tf.function traced once:
    every dataset built on it reuses that graph (tracing the tokenizer and
    the masking takes seconds; a run builds a dataset per checkpoint).
    Its random ops are unseeded (it must not be traced under a global
    seed), so every iteration masks afresh."""
    return tf.function(
        lambda texts: mask_batch(tokenizer(texts), masker),
        input_signature=[tf.TensorSpec([None], tf.string)])


def training_batches(texts, encode, *, batch_size, seed, skip_steps=0):
    """Endless masked batches of `texts` (`encode`: a `batch_encoder`),
    reshuffled each pass with a fixed `seed`; the first `skip_steps`
    batches are skipped, so a resumed run continues the same text order
    (the masks and the noise are fresh)."""
    ds = tf.data.Dataset.from_tensor_slices(tf.constant(texts, tf.string))
    ds = ds.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)
    ds = ds.repeat().skip(skip_steps * batch_size)
    ds = ds.batch(batch_size, drop_remainder=True)
    return ds.map(encode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE)


def heldout_batches(texts, tokenizer, *, mask_rate, max_predictions,
                    batch_size, seed):
    """Masked batches of `texts`, masked once with masks fixed by `seed`:
    iterating again, or building them again in another process, gives the
    same masks, so every evaluation of a run, resumed or not, predicts the
    same positions (the privacy noise is fresh each time).

    The masking is traced here, under `seed` (a scoped seed: nothing else
    is seeded by it), when the dataset maps it."""
    from tfdptext import seeding

    with seeding.scoped_seed(seed):
        encode = batch_encoder(tokenizer, masker_for(
            tokenizer, mask_rate=mask_rate, max_predictions=max_predictions))
        ds = tf.data.Dataset.from_tensor_slices(tf.constant(texts,
                                                            tf.string))
        ds = ds.batch(batch_size).map(encode)
    return ds.cache().prefetch(tf.data.AUTOTUNE)
