"""The tf.data pipelines of a training run and its class weights."""

import math

import numpy as np
import tensorflow as tf

from tfdptext.training import builder


def balanced_class_weights(labels, num_classes):
    """Weight n / (K * n_k) for each class k of `labels`: n examples, K the
    number of classes present, n_k those of class k. The weights of the
    examples then sum to n, and every present class to n / K. Classes
    absent from `labels` get weight 0 (no training example carries it).

    Example:
    >>> balanced_class_weights([0, 0, 0, 1], 2)
    array([0.6666667, 2.       ], dtype=float32)
    """
    labels = np.asarray(labels, dtype=np.int64).ravel()
    if labels.size == 0:
        raise ValueError("`labels` is empty: no class weights to compute.")
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    present = counts > 0
    weights = np.zeros(num_classes, dtype=np.float64)
    weights[present] = labels.size / (present.sum() * counts[present])
    return weights.astype(np.float32)


def train_labels(dataset, max_examples=None):
    """The task labels of the training examples a run uses."""
    labels = dataset.splits["train"].labels
    return labels[:max_examples] if max_examples else labels


def class_weights_for(config, dataset):
    """The per-class example weights `config.class_weight` asks for (from
    the training labels used), or None for "none"."""
    if config.class_weight != "balanced":
        return None
    return balanced_class_weights(
        train_labels(dataset, config.max_train_examples),
        dataset.num_classes)


def steps_per_epoch(num_examples, batch_size):
    """Optimizer updates per epoch: one per (global) batch."""
    return max(1, math.ceil(num_examples / batch_size))


def trim_padding(features):
    """Cuts a batch to its longest real sequence (results are unchanged:
    pooling and attention are masked; short texts train much faster)."""
    length = tf.reduce_max(tf.reduce_sum(features["padding_mask"], axis=1))
    return {k: v[:, :length] for k, v in features.items()}


def _targets(label, private, adv_attributes):
    """The label, or mode adv's dict {"label", "adv_<attribute>"...}."""
    if adv_attributes is None:
        return label
    targets = {builder.LABEL_OUTPUT: label}
    for name in adv_attributes:
        targets[builder.adv_output_name(name)] = private[name]
    return targets


def _sample_weights(label, class_weights, adv_attributes):
    """Each example's weight, by its task label's class. Mode adv weighs
    the task loss only: the attacker heads' losses keep weight 1."""
    weights = tf.gather(tf.constant(class_weights), label)
    if adv_attributes is None:
        return weights
    result = {builder.LABEL_OUTPUT: weights}
    for name in adv_attributes:
        result[builder.adv_output_name(name)] = tf.ones_like(weights)
    return result


# Texts tokenized per call of the tokenizer while building a split's rows
# (bounds the padded int32 arrays in flight: 4096 x max_length).
_CHUNK = 4096


def token_rows(tokenizer, texts):
    """Each text's ids as the tokenizer packs them ([CLS] ... [SEP], cut
    at its max_length), without the padding: a RaggedTensor of int32 rows.

    Example:
    >>> rows = token_rows(tokenizer, ["good", "very good food"])
    >>> rows.row_lengths().numpy()  # [CLS] good [SEP], ...
    array([3, 5])
    """
    values, lengths = [np.zeros(0, np.int32)], [np.zeros(0, np.int64)]
    for start in range(0, len(texts), _CHUNK):
        packed = tokenizer(tf.constant(list(texts[start:start + _CHUNK]),
                                       dtype=tf.string))
        mask = packed["padding_mask"].numpy().astype(bool)
        values.append(packed["token_ids"].numpy()[mask])
        lengths.append(mask.sum(axis=1))
    return tf.RaggedTensor.from_row_lengths(
        np.concatenate(values).astype(np.int32),
        np.concatenate(lengths).astype(np.int64))


def batches(tokenizer, dataset, split, *, batch_size, shuffle=False, seed=0,
            max_examples=None, adv_attributes=None, class_weights=None):
    """(features, target) batches of `split`, or (features, target,
    sample weight) with `class_weights` (an array indexed by label).

    The texts are tokenized once, here (`token_rows`), not again every
    epoch; each batch is padded to its longest text (as `trim_padding`
    cuts the tokenizer's fixed-length rows: the same features). With
    `adv_attributes` (mode adv) the target is a dict {"label": label,
    "adv_<attribute>": private label} matching the adversarial training
    model's outputs, and so are the sample weights.
    """
    examples = dataset.splits[split]
    used = slice(max_examples or None)
    ds = tf.data.Dataset.from_tensor_slices((
        token_rows(tokenizer, examples.texts[used]),
        examples.labels[used],
        {k: v[used] for k, v in examples.private.items()}))
    if shuffle:
        ds = ds.shuffle(10000, seed=seed, reshuffle_each_iteration=True)
    pad_id = tokenizer.pad_id

    def prepare(ids, label, private):
        token_ids = ids.to_tensor(default_value=pad_id)
        padding_mask = tf.sequence_mask(ids.row_lengths(),
                                        tf.shape(token_ids)[1], tf.int32)
        features = {"token_ids": token_ids, "padding_mask": padding_mask,
                    "segment_ids": tf.zeros_like(token_ids)}
        targets = _targets(label, private, adv_attributes)
        if class_weights is None:
            return features, targets
        return features, targets, _sample_weights(label, class_weights,
                                                  adv_attributes)

    return ds.ragged_batch(batch_size).map(prepare).prefetch(
        tf.data.AUTOTUNE)
