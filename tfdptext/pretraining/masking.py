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

from tfdptext.pretraining import host_masking
from tfdptext.pretraining.host_masking import MASK_TOKEN_RATE
from tfdptext.pretraining.host_masking import RANDOM_TOKEN_RATE
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
        mask_rate: the share of selectable tokens selected (BERT: 0.15):
            ceil(rate x the row's selectable tokens), at most
            `max_predictions`, chosen uniformly.
        max_predictions: the most selections per sequence (BERT: 20).

    Called inside a tf.function or a tf.data map (as `batch_encoder` and
    the training pipeline call it), it draws from TensorFlow's random ops:
    fresh masks every call. Called eagerly, keras-hub's generator takes its
    pure-Python path instead, a different law (each token selected with
    probability `mask_rate`). `fixed` draws the traced law from a numpy
    Generator: the same masks for the same generator state.

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

        self.is_special = host_masking.special_ids_table(
            vocabulary_size, special_token_ids, pad_token_id)
        self.pad_token_id = int(pad_token_id)
        self.mask_token_id = int(mask_token_id)
        self.vocabulary_size = int(vocabulary_size)
        self.mask_rate = float(mask_rate)
        self.max_predictions = int(max_predictions)
        self._generator = keras_hub.layers.MaskedLMMaskGenerator(
            vocabulary_size=vocabulary_size,
            mask_selection_rate=mask_rate,
            mask_token_id=mask_token_id,
            mask_selection_length=max_predictions,
            unselectable_token_ids=[int(pad_token_id)],
            mask_token_rate=MASK_TOKEN_RATE,
            random_token_rate=RANDOM_TOKEN_RATE,
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

    def fixed(self, token_ids, rng):
        """What calling the masker traced returns (as numpy arrays), drawn
        from the numpy Generator `rng`: the same selection law (the count
        ceil(rate x selectable) in float32 as tensorflow-text computes it,
        capped; positions uniform among the selectable ones, ascending)
        and the same corruption (MASK_TOKEN_RATE [MASK],
        RANDOM_TOKEN_RATE a uniform id of the vocabulary, else kept), but
        reproducible: the same `rng` state gives the same masks in any
        process. (The TensorFlow masking cannot: tensorflow-text shuffles
        each row inside a tf.map_fn whose iterations draw from one random
        op in whatever order they run, so even under a global seed the
        rows trade their selections from one run to the next.)"""
        return host_masking.mask_ids(
            token_ids, rng, is_special=self.is_special,
            mask_rate=self.mask_rate, max_predictions=self.max_predictions,
            mask_token_id=self.mask_token_id)


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
    """Masked batches of `texts` (each trimmed to its longest text), masked
    once by `TokenMasker.fixed` with numpy's Generator of `seed`:
    iterating again, building them again, or building them in another
    process gives the same masks, so every evaluation of a run, resumed or
    not, and every run with the same seed predicts the same positions (the
    privacy noise is fresh each time). Nothing global is seeded."""
    masker = masker_for(tokenizer, mask_rate=mask_rate,
                        max_predictions=max_predictions)
    rng = np.random.default_rng(seed)
    dataset = None
    for start in range(0, max(len(texts), 1), batch_size):
        features = trim_padding(tokenizer(tf.constant(
            list(texts[start:start + batch_size]) or [""], tf.string)))
        features = {k: v.numpy() for k, v in features.items()}
        batch = tf.data.Dataset.from_tensors(
            {**features, **masker.fixed(features["token_ids"], rng)})
        dataset = batch if dataset is None else dataset.concatenate(batch)
    return dataset if len(texts) else dataset.take(0)
