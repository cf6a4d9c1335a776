"""AdamW whose step builds its shared terms once per dtype.

Keras' AdamW computes, for every variable it updates, the same few terms of
the step: the learning rate cast to the variable's dtype, the step count,
the powers of the betas and the bias-corrected rate `alpha` (about a dozen
ops). In a traced train step each is a graph op built in Python, so a
model of n variables builds them n times. On the tiny 1-layer BERT of the
tests (23 variables) the trace of the update took a median 0.84 CPU-s with
them built once against 1.10 (8 traces each, interleaved, on a loaded
2-core machine, 2026-11-28). The ops, their inputs and their order are
Keras' own, so the updates are bit-identical; the state (moments,
iteration count) is AdamW's, named as an AdamW's, so checkpoints load
either way (tests/test_training.py,
`test_shared_terms_adamw_updates_as_keras_adamw`).
"""

import keras
from keras import ops
from keras.src.utils import naming


@keras.saving.register_keras_serializable(package="tfdptext")
class SharedTermsAdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` (same arguments, same state, bit-identical
    updates) that builds the terms every variable of a step shares (the
    rate in the variable's dtype and the bias-corrected rate) once per
    dtype and rate in each `apply`.

    Example:
    >>> optimizer = SharedTermsAdamW(1e-3)
    >>> model.compile(optimizer=optimizer, loss="mse")
    """

    def __init__(self, *args, name=None, **kwargs):
        # Unnamed, it is named as an AdamW would be ("adam_w", then
        # "adam_w_1", ...: the prefix of its variables' paths).
        super().__init__(*args, name=name or naming.auto_name(
            keras.optimizers.AdamW.__name__), **kwargs)
        self._step_terms = None

    def apply(self, grads, trainable_variables=None):
        # One step (eager, or one trace of the train step): the iteration
        # count and the rate are the same for all of its variables.
        self._step_terms = {}
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._step_terms = None

    def _terms(self, learning_rate, dtype):
        """(rate, alpha) in `dtype`, as Keras' AdamW computes them."""
        cache = self._step_terms
        key = (id(learning_rate), str(dtype))
        if cache is not None and key in cache:
            return cache[key][1:]
        lr = ops.cast(learning_rate, dtype)
        local_step = ops.cast(self.iterations + 1, dtype)
        beta_1_power = ops.power(ops.cast(self.beta_1, dtype), local_step)
        beta_2_power = ops.power(ops.cast(self.beta_2, dtype), local_step)
        alpha = lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        if cache is not None:
            # The rate is kept so that its id is not reused in this step.
            cache[key] = (learning_rate, lr, alpha)
        return lr, alpha

    def update_step(self, gradient, variable, learning_rate):
        _, alpha = self._terms(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        index = self._get_variable_index(variable)
        m = self._momentums[index]
        v = self._velocities[index]
        self.assign_add(
            m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(
            v, ops.multiply(ops.subtract(ops.square(gradient), v),
                            1 - self.beta_2))
        if self.amsgrad:
            v_hat = self._velocity_hats[index]
            self.assign(v_hat, ops.maximum(v_hat, v))
            v = v_hat
        self.assign_sub(variable, ops.divide(
            ops.multiply(m, alpha), ops.add(ops.sqrt(v), self.epsilon)))
