"""The learning-rate schedule of a training run: linear warm-up, then decay.

The rate is a function of the optimizer's iteration count (one per global
batch), so a run resumed from its backup (which restores the optimizer's
variables, the count included) continues the schedule where it stopped.
"""

import math
import weakref

import keras
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation
from tfdptext.training.config import SCHEDULES


def warmup_decay_rate(step, peak, total_steps, warmup_steps, decay):
    """The closed form of `WarmupDecay` at integer `step` (plain Python).

    Warm-up (step < warmup_steps): peak * (step + 1) / warmup_steps, so the
    first update already moves and the last warm-up step reaches `peak`.
    After it, with p = (step - warmup_steps) / (total_steps - warmup_steps)
    clipped to [0, 1]: linear peak * (1 - p), cosine
    peak * (1 + cos(pi p)) / 2, constant peak. Both decays reach 0 at
    step = total_steps (one past the last update).
    """
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    progress = min(1.0, max(0.0, (step - warmup_steps)
                            / max(1, total_steps - warmup_steps)))
    if decay == "linear":
        return peak * (1.0 - progress)
    if decay == "cosine":
        return peak * 0.5 * (1.0 + math.cos(math.pi * progress))
    return peak


@keras.saving.register_keras_serializable(package="tfdptext")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak_learning_rate`, then linear, cosine or no
    decay down to 0 at `total_steps`.

    Args:
        peak_learning_rate: the rate at the end of warm-up (> 0).
        total_steps: the optimizer updates of the whole run (>= 1).
        warmup_steps: updates of linear warm-up, in [0, total_steps].
        decay: "linear", "cosine" or "constant" (no decay after warm-up).

    Example:
    >>> schedule = WarmupDecay(1e-4, total_steps=300, warmup_steps=30)
    >>> optimizer = keras.optimizers.AdamW(schedule)
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps=0,
                 decay="linear"):
        super().__init__()
        self.peak_learning_rate = validation.check_positive(
            "peak_learning_rate", peak_learning_rate)
        self.total_steps = validation.check_int("total_steps", total_steps, 1)
        self.warmup_steps = validation.check_int("warmup_steps", warmup_steps,
                                                 0)
        if self.warmup_steps > self.total_steps:
            raise ArgumentError(
                f"`warmup_steps` must be in [0, total_steps={total_steps}], "
                f"received {warmup_steps}.")
        self.decay = validation.check_choice("decay", decay, SCHEDULES)

    def __call__(self, step):
        # Keras's AdamW asks for the rate once per weight-decayed variable
        # (and once more for the updates) while the train step is traced,
        # all before the step's one increment of `iterations`: in one graph
        # the rate of one step variable is built once and reused. Eager
        # calls (each may follow an increment) always compute it.
        graph = None if tf.executing_eagerly() else \
            tf.compat.v1.get_default_graph()
        memo = getattr(self, "_graph_memo", None)
        if graph is not None and memo is not None and \
                memo[0]() is graph and memo[1] is step:
            return memo[2]
        rate = self._rate(step)
        if graph is not None:
            self._graph_memo = (weakref.ref(graph), step, rate)
        return rate

    def _rate(self, step):
        step = tf.cast(step, tf.float32)
        peak = tf.constant(self.peak_learning_rate, tf.float32)
        warmup = float(self.warmup_steps)
        span = float(max(1, self.total_steps - self.warmup_steps))
        progress = tf.clip_by_value((step - warmup) / span, 0.0, 1.0)
        if self.decay == "linear":
            decayed = peak * (1.0 - progress)
        elif self.decay == "cosine":
            decayed = peak * 0.5 * (1.0 + tf.cos(math.pi * progress))
        else:
            decayed = peak
        if not self.warmup_steps:
            return decayed
        warming = peak * (step + 1.0) / warmup
        return tf.where(step < warmup, warming, decayed)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate,
                "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps,
                "decay": self.decay}


def run_schedule(config, steps_per_epoch):
    """The WarmupDecay of a TrainConfig: `config.epochs` epochs of
    `steps_per_epoch` updates (the whole run's, whatever a resumed session
    has left), warm-up `config.warmup_fraction` of them (rounded)."""
    total = max(1, config.epochs * steps_per_epoch)
    warmup = int(round(config.warmup_fraction * total))
    return WarmupDecay(config.learning_rate, total_steps=total,
                       warmup_steps=warmup, decay=config.lr_schedule)
