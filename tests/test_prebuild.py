"""build_before_fit: the optimizer's slots and the compiled metrics exist
before fit, so the train step's first trace creates no variable and is not
traced a second time."""

import keras
import numpy as np
import pytest
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


def _two_output_model(seed):
    """Mode adv's shape: a functional model with a dict of outputs,
    compiled with a loss and accuracy per output. Its weights are seeded
    in a scope: no global seed is left for the tests that follow in this
    process (an exported noise op would take it)."""
    from tfdptext import seeding

    with seeding.scoped_seed(seed):
        inputs = {"a": keras.Input((4,), name="a"),
                  "b": keras.Input((2,), name="b")}
        hidden = keras.layers.Dense(5, name="hidden")(
            keras.layers.Concatenate()([inputs["a"], inputs["b"]]))
        outputs = {"label": keras.layers.Dense(3, name="label")(hidden),
                   "adv": keras.layers.Dense(2, name="adv")(hidden)}
        model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.AdamW(1e-2),
                  loss={name: keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True) for name in outputs},
                  metrics={name: ["accuracy"] for name in outputs})
    return model


def _weighted_batches():
    rng = np.random.default_rng(1)
    x = {"a": rng.normal(size=(40, 4)).astype("float32"),
         "b": rng.normal(size=(40, 2)).astype("float32")}
    y = {"label": np.arange(40) % 3, "adv": np.arange(40) % 2}
    weights = {"label": rng.uniform(0.5, 2.0, 40).astype("float32"),
               "adv": np.ones(40, "float32")}
    return tf.data.Dataset.from_tensor_slices((x, y, weights)).batch(16)


def _state(model):
    """Every variable of the model, its metrics and its optimizer: path
    (the optimizer's name, which Keras numbers per instance, read as
    OPTIMIZER), shape, dtype and value."""
    optimizer = model.optimizer
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    names = {optimizer.name: "OPTIMIZER", inner.name: "OPTIMIZER"}
    variables = model.weights + optimizer.variables + [
        v for metric in model.metrics for v in metric.variables]
    return [("/".join(names.get(p, p) for p in v.path.split("/")),
             tuple(v.shape), v.dtype, np.array(v.numpy()))
            for v in variables]


def _assert_same_state(a, b):
    assert [s[:3] for s in a] == [s[:3] for s in b]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x[3], y[3], x[0])


@pytest.mark.parametrize("policy", [None, "mixed_float16"])
def test_a_functional_model_is_built_as_keras_builds_it(policy):
    """The build from a functional model's outputs (no trace of its
    forward pass) leaves the state Keras' symbolic build leaves (every
    variable of the model, its metrics and its optimizer: what fit's steps
    start from), with the predictions' spec Keras traces
    (test_one_trace_after_the_build: fit then traces its step once)."""
    from keras.src import backend

    from tfdptext.training import devices

    batches = _weighted_batches()
    with devices.precision_policy(policy):
        ours, keras_built = _two_output_model(3), _two_output_model(3)
        x = keras.tree.map_structure(
            lambda v: keras.KerasTensor(v.shape, v.dtype),
            batches.element_spec[0])
        traced = backend.compute_output_spec(ours, x, training=False)
        for name, output in ours.output.items():
            assert (output.shape, output.dtype) == \
                (traced[name].shape, traced[name].dtype)
        forward = []
        call = ours.call
        ours.call = lambda *a, **k: forward.append(1) or call(*a, **k)
        assert prebuild.build_before_fit(ours, batches)
        assert forward == []  # no trace of the model
        ours.call = call
        keras_built._symbolic_build(data_batch=batches.element_spec)
        _assert_same_state(_state(ours), _state(keras_built))
