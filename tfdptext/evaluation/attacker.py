"""The eavesdropper of DPNR Sec. 4.5, plus stronger attackers.

One attacker per private attribute, trained on the released (noisy)
representations of the train split, tuned / early-stopped on dev, scored on
test. DPNR's attacker is `kind="mlp"` (one 512-unit ReLU hidden layer);
the other kinds make sure an empirical-privacy result does not hinge on a
single model family:

- "mlp_large": 2 hidden ReLU layers of 1024 with dropout 0.3 on
  standardized inputs, early-stopped on dev loss.
- "logistic_regression": on standardized features, C from a small grid
  chosen on dev loss.
- "gradient_boosting": histogram gradient boosting, tree size from a small
  grid and number of rounds early-stopped on dev loss.
"""

import numpy as np

from tfdptext import metrics
from tfdptext.evaluation import attacker_models

KINDS = ("mlp", "mlp_large", "logistic_regression", "gradient_boosting")
# The most epochs a Keras kind trains, early-stopped on dev loss before
# (DPNR's attacker: 50).
EPOCHS = 50


def _features_and_labels(x, y, split):
    x = np.asarray(x, np.float32)
    x = x.reshape(len(x), -1)
    y = np.asarray(y).ravel()
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"`x_{split}` and `y_{split}` must be non-empty and "
                         f"of equal length, got {len(x)} and {len(y)}.")
    if not np.isfinite(x).all():
        raise ValueError(f"`x_{split}` contains NaN or infinite values.")
    if (not np.issubdtype(y.dtype, np.integer)
            and (y != np.round(y)).any()) or y.min() < 0:
        raise ValueError(f"`y_{split}` must hold class ids >= 0.")
    return x, y.astype(np.int32)


def train_attacker(x_train, y_train, x_dev, y_dev, x_test, y_test,
                   kind="mlp", hidden_units=None, epochs=EPOCHS, batch_size=64,
                   patience=3, learning_rate=1e-3, seed=0):
    """Trains an attacker of the given `kind` and scores it on test.

    Args:
        x_*, y_*: features (flattened per example) and class ids per split.
        kind: one of KINDS.
        hidden_units: hidden width of the Keras kinds (default 512 for
            "mlp", 1024 for "mlp_large"); the other arguments up to
            `learning_rate` also apply to the Keras kinds only.
        seed: seeds the Keras and scikit-learn models.

    Returns:
        accuracy, majority-class accuracy, macro-F1, ROC-AUC (binary
        attributes), the sample sizes and the kind.
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {list(KINDS)}, got {kind!r}.")
    x_train, y_train = _features_and_labels(x_train, y_train, "train")
    x_dev, y_dev = _features_and_labels(x_dev, y_dev, "dev")
    x_test, y_test = _features_and_labels(x_test, y_test, "test")
    num_classes = int(max(y_train.max(), y_dev.max(), y_test.max())) + 1
    data = (x_train, y_train, x_dev, y_dev, x_test, num_classes)
    if kind in ("mlp", "mlp_large"):
        large = kind == "mlp_large"
        units = hidden_units or (1024 if large else 512)
        probs = attacker_models.fit_keras_mlp(
            *data, hidden=(units, units) if large else (units,),
            dropout=0.3 if large else 0.0, standardize=large, epochs=epochs,
            batch_size=batch_size, patience=patience,
            learning_rate=learning_rate, seed=seed)
    elif kind == "logistic_regression":
        probs = attacker_models.fit_logistic_regression(*data, seed=seed)
    else:
        probs = attacker_models.fit_gradient_boosting(*data, seed=seed)

    predicted = probs.argmax(axis=1)
    result = {
        "kind": kind,
        "accuracy": metrics.accuracy(y_test, predicted),
        "majority_accuracy": metrics.majority_accuracy(y_train, y_test),
        "macro_f1": metrics.macro_f1(y_test, predicted),
        "n_train": int(len(y_train)), "n_dev": int(len(y_dev)),
        "n_test": int(len(y_test)),
    }
    result["majority_class"] = int(np.bincount(y_train).argmax())
    # Accuracy within each true class (DPNR Table 5: entity absent/present).
    result["per_class_accuracy"] = {
        str(c): float((predicted[y_test == c] == c).mean())
        for c in np.unique(y_test)}
    result["n_test_per_class"] = {str(c): int((y_test == c).sum())
                                  for c in np.unique(y_test)}
    if num_classes == 2:
        # F1 of class 1 ("present"): DPNR's F for entity attributes.
        tp = int(((predicted == 1) & (y_test == 1)).sum())
        wrong = int((predicted != y_test).sum())
        result["positive_f1"] = 2 * tp / (2 * tp + wrong) if tp else 0.0
    if num_classes == 2 and len(np.unique(y_test)) == 2:
        result["roc_auc"] = metrics.roc_auc(y_test, probs[:, 1])
    return result
