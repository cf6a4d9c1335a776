"""Classification metrics with their sample sizes (numpy only)."""

import numpy as np


def _labels(y_true, y_pred):
    y_true = np.asarray(y_true).ravel()
    y_pred = np.asarray(y_pred).ravel()
    if y_true.shape != y_pred.shape or y_true.size == 0:
        raise ValueError(
            "`y_true` and `y_pred` must be non-empty and of equal length, "
            f"received {y_true.shape} and {y_pred.shape}.")
    return y_true, y_pred


def accuracy(y_true, y_pred):
    y_true, y_pred = _labels(y_true, y_pred)
    return float((y_true == y_pred).mean())


def majority_accuracy(y_train, y_test):
    """Accuracy of always predicting the training set's majority class."""
    majority = np.bincount(np.asarray(y_train)).argmax()
    return float((np.asarray(y_test) == majority).mean())


def macro_f1(y_true, y_pred):
    """Unweighted mean of per-class F1 over the classes in y_true."""
    y_true, y_pred = _labels(y_true, y_pred)
    scores = []
    for c in np.unique(y_true):
        tp = np.sum((y_pred == c) & (y_true == c))
        fp = np.sum((y_pred == c) & (y_true != c))
        fn = np.sum((y_pred != c) & (y_true == c))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def roc_auc(y_true, scores):
    """Binary ROC-AUC as the Mann-Whitney statistic (ties count half)."""
    y_true = np.asarray(y_true).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if y_true.shape != scores.shape:
        raise ValueError("`y_true` and `scores` must have equal length.")
    positive = y_true == 1
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("ROC-AUC needs both classes in `y_true`.")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty_like(scores)
    sorted_scores = scores[order]
    # Average ranks over ties.
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(scores)]])
    for start, end in zip(starts, ends):
        ranks[order[start:end]] = (start + end + 1) / 2.0
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2)
                 / (n_pos * n_neg))
