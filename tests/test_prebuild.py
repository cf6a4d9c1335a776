"""build_before_fit: the optimizer's slots and the compiled metrics exist
before fit, so the train step's first trace creates no variable and is not
traced a second time."""

import keras
import numpy as np
import tensorflow as tf

from tfdptext.training import prebuild


def _model():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    model.compile(optimizer=keras.optimizers.AdamW(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True), metrics=["accuracy"])
    return model


def _batches():
    x = np.random.default_rng(0).normal(size=(40, 4)).astype("float32")
    y = np.arange(40) % 3
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(16)


def _traces_of_the_step(model, batches):
    """How many times fit traced the train step."""
    count = [0]
    step = model.train_step

    def counted(data):
        count[0] += 1
        return step(data)

    model.train_step = counted
    model.fit(batches, epochs=2, verbose=0, shuffle=False)
    return count[0]


def test_one_trace_after_the_build():
    model, batches = _model(), _batches()
    assert prebuild.build_before_fit(model, batches)
    assert model.optimizer.built
    assert _traces_of_the_step(model, batches) == 1


def test_without_it_keras_traces_the_step_twice():
    # The reason for the module: if a Keras release stops retracing, this
    # fails and the build can go.
    assert _traces_of_the_step(_model(), _batches()) == 2


def test_the_build_reads_no_batch():
    model = _model()
    read = []
    batches = _batches().map(lambda x, y: (tf.py_function(
        lambda v: read.append(1) or v, [x], tf.float32), y))
    batches = batches.map(lambda x, y: (tf.ensure_shape(x, (None, 4)), y))
    prebuild.build_before_fit(model, batches)
    assert read == []
