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


# Texts per eager call of the tokenizer (bounds its ragged intermediates).
_TOKENIZE_CHUNK = 4096


def tokenized_split(tokenizer, dataset, split, max_examples=None):
    """{"token_ids": int32, "padding_mask": int8} arrays, a row per text,
    of the first `max_examples` texts of `split` (all without it).

    The tokenizer's compiled function runs here once, eagerly, on the
    same string tensors a tf.data map would give it, so the ids are those
    of the map; in a map its kernels would be built again every time the
    dataset is iterated (about 0.4 CPU-s per epoch and per validation).

    Example:
    >>> from tfdptext import data, models
    >>> tokens = tokenized_split(models.load_tokenizer(max_length=16),
    ...                          data.load_synthetic(50), "dev")
    >>> tokens["token_ids"].shape, tokens["padding_mask"].dtype
    ((5, 16), dtype('int8'))
    """
    texts = dataset.splits[split].texts
    if max_examples:
        texts = texts[:max_examples]
    ids, masks = [], []
    for start in range(0, len(texts), _TOKENIZE_CHUNK):  # never empty
        chunk = tf.constant(texts[start:start + _TOKENIZE_CHUNK],
                            dtype=tf.string)
        features = tokenizer(chunk)
        ids.append(features["token_ids"].numpy())
        masks.append(features["padding_mask"].numpy().astype(np.int8))
    return {"token_ids": np.concatenate(ids),
            "padding_mask": np.concatenate(masks)}


def batches(tokenizer, dataset, split, *, batch_size, shuffle=False, seed=0,
            max_examples=None, adv_attributes=None, class_weights=None):
    """(features, target) batches of `split`, or (features, target,
    sample weight) with `class_weights` (an array indexed by label).

    With `adv_attributes` (mode adv) the target is a dict {"label": label,
    "adv_<attribute>": private label} matching the adversarial training
    model's outputs, and so are the sample weights.

    The texts are tokenized once (`tokenized_split`); the batches are
    those of tokenizing each batch in the pipeline, in the same order
    (the shuffle draws the same permutation whatever the elements hold).
    """
    ds = dataset.tf_dataset(split)
    if max_examples:
        ds = ds.take(max_examples)
    tokens = tf.data.Dataset.from_tensor_slices(
        tokenized_split(tokenizer, dataset, split, max_examples))
    ds = tf.data.Dataset.zip((tokens, ds))
    if shuffle:
        ds = ds.shuffle(10000, seed=seed, reshuffle_each_iteration=True)

    def prepare(tokens, example):
        token_ids = tokens["token_ids"]
        features = trim_padding({
            "token_ids": token_ids,
            "padding_mask": tf.cast(tokens["padding_mask"], tf.int32),
            "segment_ids": tf.zeros_like(token_ids)})
        label, private = example["label"], example["private"]
        targets = _targets(label, private, adv_attributes)
        if class_weights is None:
            return features, targets
        return features, targets, _sample_weights(label, class_weights,
                                                  adv_attributes)

    return ds.batch(batch_size).map(prepare).prefetch(tf.data.AUTOTUNE)
