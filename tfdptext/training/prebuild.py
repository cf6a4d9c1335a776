"""Builds a compiled model's optimizer slots and metrics before `fit`.

Without a distribution strategy, Keras (3.x, TensorFlow backend) builds the
optimizer's slots and the compiled metrics inside the first trace of the
train step; tf.function sees variables created and traces the whole step
again: a second graph of the model's forward and backward pass and of the
optimizer, about a quarter of a small run's CPU time. Building them first,
from the dataset's element spec (symbolically: no batch is read, so no
shuffle or release is drawn), leaves one trace.

Keras' own symbolic build first traces the whole forward pass into a
scratch graph to learn the spec of the predictions. A functional model
(`keras.Model(inputs, outputs)`, every model `fit` trains in a run) already
holds that spec, its symbolic outputs: `build_before_fit` builds the
metrics, the loss and the optimizer from them, as Keras would, without
that trace (a tiny BERT run's build: 0.69 -> 0.34 CPU-s, medians of 5
interleaved pairs in one process on the loaded 2-core machine,
2026-11-28). Its 2-epoch mode-none run trained to the same losses and dev
losses, bit for bit, after either build (2 runs each, interleaved, one
process and preset).
"""

import keras
from keras.src import backend
from keras.src.models.functional import Functional


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
    if not _build_from_outputs(model, spec):
        build(data_batch=spec)
    return True


def _build_from_outputs(model, spec):
    """Keras' `_symbolic_build` with the predictions' spec read off a
    functional model's outputs instead of traced; returns False (nothing
    done) for any other model, or one whose layers are not all built."""
    compile_metrics = getattr(model, "_compile_metrics", None)
    compile_loss = getattr(model, "_compile_loss", None)
    post_build = getattr(model, "_post_build", None)
    if type(model) is not Functional or post_build is None or \
            not all(layer.built for layer in model._flatten_layers()):
        return False
    batch = keras.tree.map_structure(
        lambda v: None if v is None else keras.KerasTensor(
            v.shape, backend.standardize_dtype(v.dtype)), spec)
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(batch)
    y_pred = model.output
    if compile_metrics is not None and not compile_metrics.built:
        backend.compute_output_spec(
            model.compute_metrics, x, y, y_pred, sample_weight=sample_weight)
    if compile_loss is not None and not compile_loss.built:
        backend.compute_output_spec(
            model._compute_loss, x, y, y_pred, sample_weight=sample_weight,
            training=False)
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    post_build()
    return True
