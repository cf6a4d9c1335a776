"""Builds a compiled model's optimizer slots and metrics before `fit`.

Without a distribution strategy, Keras (3.x, TensorFlow backend) builds the
optimizer's slots and the compiled metrics inside the first trace of the
train step; tf.function sees variables created and traces the whole step
again: a second graph of the model's forward and backward pass and of the
optimizer, about a quarter of a small run's CPU time. Building them first,
from the dataset's element spec (symbolically: no batch is read, so no
shuffle or release is drawn), leaves one trace.
"""


def build_before_fit(model, batches):
    """Builds `model`'s state for `model.fit(batches)` from
    `batches.element_spec`; returns whether it did (False under a
    distribution strategy, where Keras does it, and where this Keras has no
    symbolic build, which then happens in the first trace as before)."""
    if getattr(model, "_distribute_strategy", None) is not None:
        # Under a strategy Keras builds them itself, in its scope, from
        # the distributed batches.
        return False
    build = getattr(model, "_symbolic_build", None)
    spec = getattr(batches, "element_spec", None)
    if build is None or spec is None:
        return False
    build(data_batch=spec)
    return True
