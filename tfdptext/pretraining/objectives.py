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

Everything is written in `keras.ops` with fixed shapes (any backend, one
compiled step).
"""

import dataclasses
import typing

import keras
from keras import ops

from tfdptext.pretraining.config import DENOISING
from tfdptext.pretraining.config import PROBABILISTIC
from tfdptext.pretraining.config import VANILLA


def at_positions(values, positions):
    """`values` (batch, length, ...) at `positions` (batch, predictions):
    (batch, predictions, ...)."""
    values = ops.convert_to_tensor(values)
    index = ops.cast(positions, "int32")
    for _ in range(len(values.shape) - 2):
        index = ops.expand_dims(index, -1)  # broadcast over the features
    return ops.take_along_axis(values, index, axis=1)


def denoising_targets(original_ids):
    """The original token at each masked position (Qu eq. 7)."""
    return ops.convert_to_tensor(original_ids)


def vanilla_targets(privatized_ids):
    """The privatized token at each masked position (Qu eq. 5): the id the
    user-side mechanism released there."""
    return ops.convert_to_tensor(privatized_ids)


def soft_targets(draws, vocabulary_size):
    """count(v) / K over the last axis of `draws` (..., K) of token ids:
    (..., vocabulary_size) float32 rows that sum to 1 (a sum of K one-hot
    rows: fixed shapes, any backend).

    Example:
    >>> soft_targets(np.array([[2, 2, 0, 1]]), 4)
    [[0.25, 0.25, 0.5, 0.]]
    """
    draws = ops.cast(draws, "int32")
    k = int(draws.shape[-1])
    counts = ops.one_hot(draws[..., 0], vocabulary_size, dtype="float32")
    for i in range(1, k):
        counts = counts + ops.one_hot(draws[..., i], vocabulary_size,
                                      dtype="float32")
    return counts / float(k)


def privatize_selected(privatize, ids, weights):
    """`privatize(ids)` where `weights` > 0, `ids` unchanged elsewhere.

    Every slot is privatized (fixed shapes for a compiled step); the
    unselected ones (padding of the fixed-size mask position list) are
    then put back.
    """
    ids = ops.cast(ids, "int32")
    private = ops.cast(privatize(ids), "int32")
    return ops.where(ops.convert_to_tensor(weights) > 0, private, ids)


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
    original_ids = ops.cast(original_ids, "int32")
    draws = ops.repeat(ops.expand_dims(original_ids, -1),
                       num_privatizations, axis=-1)
    draw_weights = ops.repeat(
        ops.expand_dims(ops.convert_to_tensor(weights), -1),
        num_privatizations, axis=-1)
    draws = privatize_selected(privatize, draws, draw_weights)
    return soft_targets(draws, vocabulary_size)


def hard_targets(targets):
    """The target id at each position: itself for ids, the most frequent
    token for distributions (the first of the most frequent on a tie)."""
    if _is_integer(targets):
        return ops.cast(targets, "int32")
    return ops.cast(ops.argmax(targets, axis=-1), "int32")


def _is_integer(tensor):
    return "int" in keras.backend.standardize_dtype(tensor.dtype)


def masked_cross_entropy(targets, logits, weights):
    """Mean cross-entropy over the masked positions (weight-averaged).

    Args:
        targets: (batch, predictions) ids, or (batch, predictions, vocab)
            distributions.
        logits: (batch, predictions, vocab) MLM logits (any float dtype;
            computed in float32).
        weights: (batch, predictions) mask weights.
    """
    logits = ops.cast(logits, "float32")
    weights = ops.cast(weights, "float32")
    if _is_integer(targets):
        per_position = ops.sparse_categorical_crossentropy(
            ops.cast(targets, "int32"), logits, from_logits=True)
    else:
        per_position = ops.categorical_crossentropy(
            ops.cast(targets, "float32"), logits, from_logits=True)
    return ops.divide_no_nan(ops.sum(per_position * weights),
                             ops.sum(weights))


def correct_predictions(target_ids, logits):
    """1.0 where the top logit is `target_ids`, else 0.0 (float32)."""
    predicted = ops.cast(ops.argmax(logits, axis=-1), "int32")
    return ops.cast(ops.equal(predicted, ops.cast(target_ids, "int32")),
                    "float32")


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
