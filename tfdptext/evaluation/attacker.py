"""The eavesdropper of DPNR Sec. 4.5: an MLP on released representations.

One attacker per private attribute, trained on the released (noisy)
representations of the train split, early-stopped on dev, scored on test.
"""

import numpy as np

from tfdptext.evaluation import metrics


def train_attacker(x_train, y_train, x_dev, y_dev, x_test, y_test,
                   hidden_units=512, epochs=50, batch_size=64, patience=3,
                   learning_rate=1e-3, seed=0):
    """Trains the 2-layer MLP attacker and scores it on test.

    Returns accuracy, majority-class accuracy, macro-F1, ROC-AUC (binary
    attributes) and the sample sizes.
    """
    import keras

    x_train, x_dev, x_test = (np.asarray(x, np.float32).reshape(len(x), -1)
                              for x in (x_train, x_dev, x_test))
    y_train, y_dev, y_test = (np.asarray(y, np.int32)
                              for y in (y_train, y_dev, y_test))
    num_classes = int(max(y_train.max(), y_dev.max(), y_test.max())) + 1
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input((x_train.shape[1],)),
        keras.layers.Dense(hidden_units, activation="relu"),
        keras.layers.Dense(num_classes),
    ])
    model.compile(keras.optimizers.Adam(learning_rate),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x_train, y_train, validation_data=(x_dev, y_dev),
              epochs=epochs, batch_size=batch_size, verbose=0,
              callbacks=[keras.callbacks.EarlyStopping(
                  patience=patience, restore_best_weights=True)])
    logits = model.predict(x_test, verbose=0, batch_size=1024)
    predicted = logits.argmax(axis=1)
    result = {
        "accuracy": metrics.accuracy(y_test, predicted),
        "majority_accuracy": metrics.majority_accuracy(y_train, y_test),
        "macro_f1": metrics.macro_f1(y_test, predicted),
        "n_train": int(len(y_train)), "n_dev": int(len(y_dev)),
        "n_test": int(len(y_test)),
    }
    if num_classes == 2 and len(np.unique(y_test)) == 2:
        shifted = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        result["roc_auc"] = metrics.roc_auc(y_test, probs[:, 1])
    return result
