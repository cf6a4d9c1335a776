"""Main-task accuracy per subgroup of a private attribute (DPNR Sec. 4.6)."""

import numpy as np

from tfdptext import metrics


def subgroup_accuracy(y_true, y_pred, groups):
    """{group: {"accuracy": a, "n": count}} for every group value."""
    y_true, y_pred = metrics._labels(y_true, y_pred)
    groups = np.asarray(groups).ravel()
    if groups.shape != y_true.shape:
        raise ValueError("`groups` must have one value per example.")
    return {int(g): {"accuracy": float((y_true[groups == g]
                                        == y_pred[groups == g]).mean()),
                     "n": int((groups == g).sum())}
            for g in np.unique(groups)}


def accuracy_gap(y_true, y_pred, groups):
    """max - min subgroup accuracy."""
    accs = [v["accuracy"] for v in
            subgroup_accuracy(y_true, y_pred, groups).values()]
    return float(max(accs) - min(accs))


def gap_change_test(y_true, pred_a, pred_b, groups, num_permutations=2000,
                    seed=0):
    """Is the gap of run B different from run A's? Paired permutation test.

    Under the null hypothesis the two runs are exchangeable on each example,
    so each example's pair of predictions is swapped at random. Returns the
    observed change (gap_B - gap_A) and a two-sided p-value.
    """
    y_true, pred_a = metrics._labels(y_true, pred_a)
    _, pred_b = metrics._labels(y_true, pred_b)
    observed = (accuracy_gap(y_true, pred_b, groups)
                - accuracy_gap(y_true, pred_a, groups))
    rng = np.random.default_rng(seed)
    extreme = 0
    for _ in range(num_permutations):
        swap = rng.random(len(y_true)) < 0.5
        a = np.where(swap, pred_b, pred_a)
        b = np.where(swap, pred_a, pred_b)
        change = accuracy_gap(y_true, b, groups) - accuracy_gap(y_true, a,
                                                                groups)
        extreme += abs(change) >= abs(observed) - 1e-12
    return {"gap_change": float(observed),
            "p_value": (extreme + 1) / (num_permutations + 1),
            "num_permutations": num_permutations, "n": int(len(y_true))}
