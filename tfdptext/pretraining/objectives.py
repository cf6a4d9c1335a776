"""The targets of the privacy-adaptive MLM objectives, and their loss.

Qu et al. (2021), Sec. 3.4, eqs. (5)-(7). At a masked position whose
original token is w:

- vanilla: the privatized token w^ (the token the user-side mechanism
  released at that position), one-hot;
- probabilistic: the empirical distribution of K privatizations
  w^_1..w^_K of w, count(v) / K for each vocabulary token v;
- denoising: the original token w, one-hot.

Each is trained with cross-entropy against the MLM logits at the masked
positions only (positions with mask weight 0 are padding of the fixed-size
position list and do not count). Pure functions on tensors; the model
(`tfdptext.pretraining.model`) supplies the privatized ids.
"""

import dataclasses
import typing

import tensorflow as tf

from tfdptext.pretraining.config import DENOISING
from tfdptext.pretraining.config import PROBABILISTIC
from tfdptext.pretraining.config import VANILLA


def at_positions(values, positions):
    """`values` (batch, length, ...) at `positions` (batch, predictions):
    (batch, predictions, ...)."""
    return tf.gather(values, positions, batch_dims=1)


def denoising_targets(original_ids):
    """The original token at each masked position (Qu eq. 7)."""
    return tf.convert_to_tensor(original_ids)


def vanilla_targets(privatized_ids):
    """The privatized token at each masked position (Qu eq. 5): the id the
    user-side mechanism released there."""
    return tf.convert_to_tensor(privatized_ids)


def soft_targets(draws, vocabulary_size):
    """count(v) / K over the last axis of `draws` (..., K) of token ids:
    (..., vocabulary_size) float32 rows that sum to 1.

    Example:
    >>> soft_targets([[2, 2, 0, 1]], 4).numpy()
    array([[0.25, 0.25, 0.5 , 0.  ]], dtype=float32)
    """
    draws = tf.convert_to_tensor(draws, tf.int32)
    shape = tf.shape(draws)
    k = shape[-1]
    counts = tf.math.bincount(tf.reshape(draws, [-1, k]),
                              minlength=vocabulary_size,
                              maxlength=vocabulary_size, axis=-1,
                              dtype=tf.float32)
    counts = tf.reshape(counts, tf.concat([shape[:-1], [vocabulary_size]], 0))
    return counts / tf.cast(k, tf.float32)


def privatize_selected(privatize, ids, weights):
    """`privatize(ids)` where `weights` > 0, `ids` unchanged elsewhere.

    Only the selected ids go through `privatize` (a nearest-neighbour
    search over the vocabulary for d_chi text-to-text): most slots of the
    fixed-size mask position list are padding.
    """
    ids = tf.convert_to_tensor(ids, tf.int32)
    selected = tf.convert_to_tensor(weights) > 0
    private = tf.cast(privatize(tf.boolean_mask(ids, selected)), tf.int32)
    return tf.tensor_scatter_nd_update(ids, tf.where(selected), private)


def probabilistic_targets(original_ids, weights, *, privatize,
                          num_privatizations, vocabulary_size):
    """The empirical distribution of `num_privatizations` (K) independent
    privatizations of each original token (Qu eq. 6): (batch, predictions,
    vocabulary_size) rows count / K that sum to 1. Rows of weight 0 are the
    one-hot of their (unused) id.

    Args:
        original_ids: (batch, predictions) original token ids.
        weights: (batch, predictions) mask weights (1 masked, 0 padding).
        privatize: ids -> privatized ids of the same shape, a fresh draw
            per id (a d_chi text-to-text mechanism).
        num_privatizations: K >= 2.
        vocabulary_size: the number of classes of the MLM head.
    """
    original_ids = tf.convert_to_tensor(original_ids, tf.int32)
    draws = tf.repeat(original_ids[..., None], num_privatizations, axis=-1)
    draw_weights = tf.repeat(tf.convert_to_tensor(weights)[..., None],
                             num_privatizations, axis=-1)
    draws = privatize_selected(privatize, draws, draw_weights)
    return soft_targets(draws, vocabulary_size)


def hard_targets(targets):
    """The target id at each position: itself for ids, the most frequent
    token for distributions (the first of the most frequent on a tie)."""
    if targets.dtype.is_integer:
        return tf.cast(targets, tf.int32)
    return tf.argmax(targets, axis=-1, output_type=tf.int32)


def masked_cross_entropy(targets, logits, weights):
    """Mean cross-entropy over the masked positions (weight-averaged).

    Args:
        targets: (batch, predictions) ids, or (batch, predictions, vocab)
            distributions.
        logits: (batch, predictions, vocab) MLM logits (any float dtype;
            computed in float32).
        weights: (batch, predictions) mask weights.
    """
    logits = tf.cast(logits, tf.float32)
    weights = tf.cast(weights, tf.float32)
    if targets.dtype.is_integer:
        per_position = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(targets, tf.int32), logits=logits)
    else:
        per_position = tf.nn.softmax_cross_entropy_with_logits(
            labels=tf.cast(targets, tf.float32), logits=logits)
    return tf.math.divide_no_nan(tf.reduce_sum(per_position * weights),
                                 tf.reduce_sum(weights))


def correct_predictions(target_ids, logits):
    """1.0 where the top logit is `target_ids`, else 0.0 (float32)."""
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return tf.cast(tf.equal(predicted, tf.cast(target_ids, tf.int32)),
                   tf.float32)


@dataclasses.dataclass
class TargetSources:
    """What an objective builds its targets from, for one batch.

    Attributes:
        original_ids: (batch, predictions) original tokens at the masked
            positions.
        weights: (batch, predictions) mask weights.
        released_ids: () -> (batch, predictions) the privatized tokens the
            user side released at the masked positions (called only by the
            objective that needs them).
        privatize: ids -> a fresh privatization of each id.
        num_privatizations: K.
        vocabulary_size: classes of the MLM head.
    """

    original_ids: typing.Any
    weights: typing.Any
    released_ids: typing.Callable
    privatize: typing.Callable
    num_privatizations: int
    vocabulary_size: int


@dataclasses.dataclass(frozen=True)
class Objective:
    """An MLM objective: its name, what it predicts, and its targets.

    Attributes:
        name: one of `tfdptext.pretraining.config.OBJECTIVES`.
        predicts: what the target at a masked position is, in words.
        targets: TargetSources -> (batch, predictions) ids or
            (batch, predictions, vocabulary) distributions.
    """

    name: str
    predicts: str
    targets: typing.Callable


REGISTRY = {
    VANILLA: Objective(
        VANILLA, "the privatized token released at the masked position",
        lambda s: vanilla_targets(s.released_ids())),
    PROBABILISTIC: Objective(
        PROBABILISTIC, "the empirical distribution of K privatizations of "
        "the original token",
        lambda s: probabilistic_targets(
            s.original_ids, s.weights, privatize=s.privatize,
            num_privatizations=s.num_privatizations,
            vocabulary_size=s.vocabulary_size)),
    DENOISING: Objective(
        DENOISING, "the original token",
        lambda s: denoising_targets(s.original_ids)),
}


def get(name):
    """The Objective named `name` (KeyError naming the choices)."""
    if name not in REGISTRY:
        raise KeyError(f"Unknown objective {name!r}; one of "
                       f"{sorted(REGISTRY)}.")
    return REGISTRY[name]
