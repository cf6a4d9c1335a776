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
    """BERT's masking of token ids that never selects a special token or
    padding, as a few vectorized TensorFlow ops.

    The law is keras-hub's `MaskedLMMaskGenerator` traced (tensorflow-
    text's `RandomItemSelector` and `MaskValuesChooser`) with every special
    id unselectable: in each row, ceil(rate x the row's selectable tokens)
    positions (in float32, as tensorflow-text computes it), at most
    `max_predictions`, a uniformly random subset of the selectable ones,
    returned ascending; of the selected, MASK_TOKEN_RATE become [MASK],
    RANDOM_TOKEN_RATE a uniformly random id of the vocabulary, the rest
    are kept. The subset is the positions of the smallest of independent
    uniform float64 keys (the selectable ones' only), which is uniform over
    the subsets of that size; tensorflow-text shuffles each row inside a
    tf.map_fn instead, a graph that cost about 3 CPU-s to trace and 0.8
    CPU-s to instantiate in every tf.data iterator, for the same law
    (tests/test_pretraining.py checks the two against each other).

    Args:
        vocabulary_size: the MLM vocabulary.
        mask_token_id, pad_token_id: [MASK] and [PAD].
        special_token_ids: ids never selected ([PAD] is added).
        mask_rate: the share of selectable tokens selected (BERT: 0.15):
            ceil(rate x the row's selectable tokens), at most
            `max_predictions`, chosen uniformly.
        max_predictions: the most selections per sequence (BERT: 20).

    Called eagerly, inside a tf.function or in a tf.data map (as
    `batch_encoder` and the training pipeline call it), it draws from
    TensorFlow's unseeded random ops: fresh masks every call, the same law
    every way. `fixed` draws the same law from a numpy Generator: the same
    masks for the same generator state.

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
        self.is_special = host_masking.special_ids_table(
            vocabulary_size, special_token_ids, pad_token_id)
        self.pad_token_id = int(pad_token_id)
        self.mask_token_id = int(mask_token_id)
        self.vocabulary_size = int(vocabulary_size)
        self.mask_rate = float(mask_rate)
        self.max_predictions = int(max_predictions)
        # One graph for every call, eager ones included (about 25 ops:
        # eagerly, each would be dispatched one by one).
        self._mask = tf.function(
            self._masked, autograph=False,
            input_signature=[tf.TensorSpec([None, None], tf.int32)])

    def __call__(self, token_ids):
        """{masked_ids, mask_positions (int32), mask_weights (float32)} of
        (batch, length) int32 `token_ids`."""
        return self._mask(tf.cast(token_ids, tf.int32))

    def _masked(self, token_ids):
        shape = tf.shape(token_ids)
        selectable = tf.logical_not(
            tf.gather(tf.constant(self.is_special), token_ids))
        count = selection_counts(
            tf.reduce_sum(tf.cast(selectable, tf.int32), axis=1),
            self.mask_rate, self.max_predictions)
        # The selectable positions of the `count` smallest keys: a uniform
        # subset (the unselectable ones' keys, 2, come after all of them).
        keys = tf.where(selectable,
                        tf.random.uniform(shape, dtype=tf.float64),
                        tf.constant(2.0, tf.float64))
        width = tf.minimum(shape[1], self.max_predictions)
        _, smallest = tf.math.top_k(-keys, k=width, sorted=True)
        used = tf.range(width)[None, :] < count[:, None]
        # Ascending, the unused slots (past the row's count) last, as 0.
        positions = tf.sort(tf.where(used, smallest, shape[1]), axis=1)
        positions = tf.where(used, positions, 0)
        pad = [[0, 0], [0, self.max_predictions - width]]
        positions = tf.pad(positions, pad)
        used = tf.pad(used, pad)
        original = tf.gather(token_ids, positions, batch_dims=1)
        draw = tf.random.uniform(tf.shape(positions))
        random_ids = tf.random.uniform(tf.shape(positions), maxval=
                                       self.vocabulary_size, dtype=tf.int32)
        values = tf.where(
            draw < MASK_TOKEN_RATE, self.mask_token_id,
            tf.where(draw < MASK_TOKEN_RATE + RANDOM_TOKEN_RATE, random_ids,
                     original))
        rows = tf.broadcast_to(tf.range(shape[0])[:, None],
                               tf.shape(positions))
        indices = tf.stack([rows, positions], axis=-1)
        masked_ids = tf.tensor_scatter_nd_update(
            token_ids, tf.boolean_mask(indices, used),
            tf.boolean_mask(values, used))
        return {"masked_ids": masked_ids, "mask_positions": positions,
                "mask_weights": tf.cast(used, tf.float32)}

    def fixed(self, token_ids, rng):
        """What calling the masker returns (as numpy arrays), drawn from
        the numpy Generator `rng`: the same selection law and corruption,
        but reproducible: the same `rng` state gives the same masks in any
        process (`host_masking.mask_ids`)."""
        return host_masking.mask_ids(
            token_ids, rng, is_special=self.is_special,
            mask_rate=self.mask_rate, max_predictions=self.max_predictions,
            mask_token_id=self.mask_token_id)


def selection_counts(selectable, mask_rate, max_predictions):
    """The positions selected per row: ceil(rate x `selectable`) computed
    in float32 (as tensorflow-text's RandomItemSelector and
    `host_masking.mask_ids` do), at most `max_predictions` (int32).

    Example:
    >>> selection_counts(tf.constant([0, 1, 7, 200]), 0.15, 20).numpy()
    array([ 0,  1,  2, 20], dtype=int32)
    """
    count = tf.math.ceil(tf.cast(selectable, tf.float32) *
                         tf.constant(mask_rate, tf.float32))
    return tf.cast(tf.minimum(count, float(max_predictions)), tf.int32)


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
