"""The pretraining optimizer: AdamW, with a larger rate for the new MLM head.

The encoder arrives trained and wants a fine-tuning rate (1e-4); the MLM
head is new (no BERT-family checkpoint we ship has one: the head starts
from random weights and a zero bias). Adam moves each weight by at most
about its learning rate per step, so at 1e-4 the head's 30,522 output
biases and its 384 x 384 transform can move by 0.05 in 500 steps: far too
little to learn even the unigram distribution of the masked tokens (log
probabilities span about 10 nats). docs/benchmarks.md ("Why the MLM
learned slowly") has the measurements; the remedy is the usual one for a
new head on a pretrained body: a learning rate `head_rate_multiplier`
times larger for the head's variables, the same schedule for both.
"""

import keras


class HeadRateAdamW(keras.optimizers.AdamW):
    """AdamW whose learning rate is `head_rate_multiplier` times larger for
    the variables whose path contains `head_name` as a path component.

    Its state (moments, iteration count) is AdamW's, so a checkpoint saved
    with `model.save_weights` restores it. Weight decay stays at the base
    rate for every variable.

    Args:
        learning_rate: the base rate or schedule (the encoder's).
        head_name: the name of the head layer (a path component).
        head_rate_multiplier: the head's rate over the base rate (>= 1).
        **kwargs: AdamW's.

    Example:
    >>> optimizer = HeadRateAdamW(1e-4, head_name="mlm_head",
    ...                           head_rate_multiplier=10.0)
    >>> model.compile(optimizer=optimizer)
    """

    def __init__(self, learning_rate, *, head_name, head_rate_multiplier,
                 **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.head_name = str(head_name)
        self.head_rate_multiplier = float(head_rate_multiplier)
        self._in_head = []

    def build(self, variables):
        super().build(variables)
        # Indexed like the optimizer's own per-variable state.
        self._in_head = [self.head_name in v.path.split("/")
                         for v in variables]

    @property
    def head_variable_count(self):
        """How many of the built variables get the head's rate."""
        return sum(self._in_head)

    def update_step(self, gradient, variable, learning_rate):
        if self._in_head[self._get_variable_index(variable)]:
            learning_rate = learning_rate * self.head_rate_multiplier
        super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        return {**super().get_config(), "head_name": self.head_name,
                "head_rate_multiplier": self.head_rate_multiplier}
