"""The attacker models behind `train_attacker`.

Each fitter trains on (x_train, y_train), picks its hyperparameters or its
stopping point on (x_dev, y_dev) only, and returns class probabilities of
shape (len(x_test), num_classes) for the test split.
"""

import numpy as np

from tfdptext import seeding

LOGISTIC_C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0)
BOOSTING_LEAF_GRID = (7, 31)


def _full_probs(probs, classes, num_classes):
    """One column per class, also for classes unseen in training
    (scikit-learn only returns columns for `model.classes_`)."""
    full = np.zeros((len(probs), num_classes))
    full[:, classes] = probs
    return full


def _dev_loss(probs, y):
    return float(-np.mean(np.log(np.clip(probs[np.arange(len(y)), y],
                                         1e-12, None))))


def fit_keras_mlp(x_train, y_train, x_dev, y_dev, x_test, num_classes,
                  hidden=(512,), dropout=0.0, standardize=False, epochs=50,
                  batch_size=64, patience=3, learning_rate=1e-3, seed=0):
    """ReLU MLP with `hidden` layer widths, early-stopped on dev loss."""
    import keras

    # Seeded weights, but no TF global seed left for later noise ops.
    with seeding.scoped_seed(seed):
        if standardize:
            x_train, x_dev, x_test = _standardized(x_train, x_dev, x_test)
        layers = [keras.Input((x_train.shape[1],))]
        for units in hidden:
            layers.append(keras.layers.Dense(units, activation="relu"))
            if dropout:
                layers.append(keras.layers.Dropout(dropout))
        layers.append(keras.layers.Dense(num_classes))
        model = _compiled(keras.Sequential(layers), (
            x_train.shape[1], tuple(hidden), dropout, standardize,
            num_classes, keras.config.dtype_policy().name, learning_rate))
        _fit(model, x_train, y_train, x_dev, y_dev, epochs, batch_size,
             keras.callbacks.EarlyStopping(patience=patience,
                                           restore_best_weights=True))
        logits = _eager_logits(model, x_test)
    shifted = logits - logits.max(axis=1, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)


def _standardized(x_train, *others):
    """`x_train` and `others` standardized by the mean and variance of
    `x_train`: what a Keras Normalization layer adapted to `x_train`
    computes (the same values, element by element, as that layer inside
    the model).

    Outside the model: the layer computes with tensors it sets when
    adapted, not with its variables, so a cached model's traced functions
    would keep standardizing by the statistics of the first data they
    were traced with.
    """
    import keras

    norm = keras.layers.Normalization()
    norm.adapt(x_train)
    return [np.asarray(norm(x)) for x in (x_train, *others)]


def _fit(model, x_train, y_train, x_dev, y_dev, epochs, batch_size,
         early_stopping):
    """`model.fit(x_train, y_train, validation_data=(x_dev, y_dev),
    epochs=epochs, batch_size=batch_size, callbacks=[early_stopping])`,
    the same training bit for bit, without tf.data.

    Keras' `fit` builds two tf.data pipelines per call and an iterator
    over each per epoch (about 40% of a small attacker's fit); this loop
    feeds `fit`'s batches to the model's own train and test step
    functions: the train split in `_fit_order` (the order `fit` shuffles
    it into, the same in every epoch), cut into batches of `batch_size`
    (the last one partial); the dev split in order; the dev loss as
    `evaluate` averages it (the loss tracker over the batches); the
    early-stopping callback called as `fit` calls it.
    """
    import tensorflow as tf

    def batches(x, y, order=None):
        if order is not None:
            x, y = x[order], y[order]
        return [(tf.constant(x[start:start + batch_size]),
                 tf.constant(y[start:start + batch_size]))
                for start in range(0, len(x), batch_size)]

    train = batches(x_train, y_train, _fit_order(len(x_train)))
    dev = batches(x_dev, y_dev)
    model.make_train_function()
    model.make_test_function()
    model.stop_training = False
    early_stopping.set_model(model)
    early_stopping.on_train_begin()
    logs = None
    for epoch in range(epochs):
        model.reset_metrics()
        for batch in train:
            model.train_function([batch])
        logs = dict(model.get_metrics_result())
        model.reset_metrics()
        for batch in dev:
            model.test_function([batch])
        logs.update({f"val_{name}": float(value) for name, value in
                     model.get_metrics_result().items()})
        early_stopping.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    model.optimizer.finalize_variable_values(model.trainable_weights)
    early_stopping.on_train_end(logs)


def _fit_order(num_examples):
    """The order in which Keras' `fit` feeds `num_examples` array
    examples with `shuffle=True`: its data adapter's permutation, drawn by
    the same dataset function (a `tf.random.shuffle` of the indices whose
    seed follows from TensorFlow's global seed alone), which every epoch's
    iterator draws afresh with the same seed."""
    import tensorflow as tf

    def permutation(unused):
        return tf.random.shuffle(tf.range(num_examples, dtype=tf.int64))

    dataset = tf.data.Dataset.range(1).map(permutation)
    return next(iter(dataset)).numpy()


# Compiled Keras attackers by architecture: {key: (model, the optimizer's
# initial variable values)}, the most recently used _MAX_COMPILED.
_COMPILED = {}
_MAX_COMPILED = 4


def _compiled(fresh, key):
    """A compiled model in the state of the freshly built `fresh`.

    The first model of an architecture (`key`: input width, hidden
    widths, dropout, standardization, classes, dtype policy, learning
    rate) is compiled and kept; later fits of that architecture copy
    every variable of their freshly built, seeded model (weights and the
    dropout seed generators' states; no layer may keep state outside its
    variables, as Normalization does: see `_standardized`) into it and
    put its optimizer back to its initial state: the same training as a
    fresh model, bit for bit, without tracing the train and test
    functions once per fit.
    """
    import keras

    if key not in _COMPILED:
        learning_rate = key[-1]
        # No metrics: early stopping reads the dev loss only (a metric
        # would be traced and computed every step for nothing).
        fresh.compile(
            keras.optimizers.Adam(learning_rate),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        fresh.optimizer.build(fresh.trainable_variables)
        while len(_COMPILED) >= _MAX_COMPILED:
            del _COMPILED[next(iter(_COMPILED))]
        _COMPILED[key] = (fresh, [np.array(v) for v in
                                  fresh.optimizer.variables])
        return fresh
    model, optimizer_state = _COMPILED[key] = _COMPILED.pop(key)
    if [v.shape for v in model.variables] != \
            [v.shape for v in fresh.variables]:
        raise AssertionError("A cached attacker's variables differ from "
                             "those of its architecture's fresh model.")
    for target, source in zip(model.variables, fresh.variables):
        target.assign(np.array(source))
    for variable, value in zip(model.optimizer.variables, optimizer_state):
        variable.assign(value)
    return model


def _eager_logits(model, x, batch_size=1024):
    """`model.predict(x, batch_size=batch_size)` called eagerly, batch by
    batch: the same batches and kernels (the same logits, bit for bit),
    without tracing a predict function that runs once per attacker."""
    return np.concatenate([
        np.asarray(model(x[start:start + batch_size], training=False))
        for start in range(0, len(x), batch_size)])


def fit_logistic_regression(x_train, y_train, x_dev, y_dev, x_test,
                            num_classes, seed=0):
    """Logistic regression on standardized features; C picked on dev loss."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    best_loss, best = np.inf, None
    for c in LOGISTIC_C_GRID:
        model = make_pipeline(StandardScaler(), LogisticRegression(
            C=c, max_iter=1000, random_state=seed))
        model.fit(x_train, y_train)
        loss = _dev_loss(_full_probs(model.predict_proba(x_dev),
                                     model.classes_, num_classes), y_dev)
        if loss < best_loss:
            best_loss, best = loss, model
    return _full_probs(best.predict_proba(x_test), best.classes_,
                       num_classes)


def fit_gradient_boosting(x_train, y_train, x_dev, y_dev, x_test, num_classes,
                          max_iter=200, seed=0):
    """Histogram gradient boosting, early-stopped on dev loss.

    For each tree size in BOOSTING_LEAF_GRID, fits `max_iter` rounds and
    keeps the round count with the lowest dev loss (the staged predictions
    make this one fit per grid point).
    """
    from sklearn.ensemble import HistGradientBoostingClassifier

    best_loss, best = np.inf, None
    for leaves in BOOSTING_LEAF_GRID:
        model = HistGradientBoostingClassifier(
            max_iter=max_iter, max_leaf_nodes=leaves, learning_rate=0.1,
            early_stopping=False, random_state=seed)
        model.fit(x_train, y_train)
        for rounds, probs in enumerate(model.staged_predict_proba(x_dev), 1):
            loss = _dev_loss(_full_probs(probs, model.classes_, num_classes),
                             y_dev)
            if loss < best_loss:
                best_loss, best = loss, (model, rounds)
    model, rounds = best
    for stage, probs in enumerate(model.staged_predict_proba(x_test), 1):
        if stage == rounds:
            break
    return _full_probs(probs, model.classes_, num_classes)
