"""The most any eps-LDP release of a text can tell about its class.

The bound (a theorem, any prior). For a release that is (eps, delta)-LDP
for any two texts, classes of prior pi and any decoder, the accuracy of
naming the class is at most the optimum of a linear program over
(eps, delta)-LDP channels from the K classes to K guesses
(`tfdptext.privacy.identification`, which has the proof); a channel that
attains it is a release. `bound(epsilon, prior, delta)` is that optimum.
With a uniform prior it has the closed form

    (e^eps + (K - 1) delta) / (e^eps + K - 1)   (`identification_bound`)

(K-ary randomized response on the true class attains it at delta = 0;
Kairouz, Oh and Viswanath 2014). With a skewed prior it can be far above
K-ary randomized response: for AG's prior 0.58/0.371/0.007/0.042 it is
0.592/0.695/0.838 at eps 0.5/1/2 (binary randomized response between
the two big classes), against 0.587/0.655/0.788.

The reference limit (not a theorem about every release). A server that
holds a non-private classifier can release an LDP channel applied to that
classifier's prediction r; the best such channel for the joint law of r
and the class is the same program with weights P(r, y)
(`reference_limit`, from the classifier's confusion matrix on the test
split). It bounds every release built as a channel on that prediction,
not a release that reads the text otherwise (a better classifier would
do better); it is the yardstick beside a private accuracy.
`limit_report` says which one a number is.

K-ary randomized response, decoded by Bayes' rule, is kept for
comparison: `rr_limit` (errors spread evenly over the other classes),
`rr_reference` (the classifier's actual confusion matrix). Each is a
channel the programs range over, so never above them.

Pure Python and numpy; the programs use SciPy.
"""

import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import identification
from tfdptext.privacy import validation

THEOREM = "theorem"
REFERENCE = "reference"


def identification_bound(epsilon, num_classes, delta=0.0):
    """(e^eps + (K - 1) delta) / (e^eps + K - 1), computed without
    overflow: the largest accuracy of naming one of K EQUALLY LIKELY
    classes from an (eps, delta)-LDP release (module docstring; `bound`
    for any prior).

    Example:
    >>> round(identification_bound(1.0, 4), 4)
    0.4754
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    num_classes = validation.check_int("num_classes", num_classes, 2)
    delta = validation.check_rate("delta", delta, include_one=True)
    tail = (num_classes - 1) * math.exp(-epsilon)
    return min(1.0, (1.0 + delta * tail) / (1.0 + tail))


def _is_uniform(prior, num_classes):
    """Whether `prior` is None or exactly uniform (the closed form holds;
    a nearly uniform prior goes to the program)."""
    if prior is None:
        return True
    weights = np.asarray(prior, np.float64)
    _check_prior(weights, num_classes)
    return bool(np.all(weights == weights[0]))


def _check_prior(prior, num_classes):
    """The prior as a float64 array summing to 1, or ArgumentError."""
    prior = np.asarray(prior, np.float64)
    if prior.shape != (num_classes,) or not np.isfinite(prior).all() \
            or (prior < 0).any() or prior.sum() <= 0:
        raise ArgumentError(
            f"`prior` must be {num_classes} finite non-negative class "
            f"weights (not all zero), received {prior.tolist()}.")
    return prior / prior.sum()


def bound(epsilon, num_classes, prior=None, delta=0.0):
    """The theorem: the most any (eps, delta)-LDP release of a text lets
    any decoder name its class, classes occurring with `prior` (None:
    uniform, the closed form `identification_bound`); the linear program
    of `tfdptext.privacy.identification` otherwise.

    Example (the DPNR AG file's prior):
    >>> round(bound(1.0, 4, [0.58, 0.371, 0.007, 0.042]), 3)
    0.695
    """
    if _is_uniform(prior, num_classes):
        return identification_bound(epsilon, num_classes, delta)
    prior = _check_prior(prior, num_classes)
    return identification.best_channel(np.diag(prior), epsilon,
                                       delta).value


def even_errors_joint(num_classes, reference_accuracy, prior=None):
    """(K, K) joint law P(prediction r, class y) of a classifier of
    accuracy a whose errors spread evenly over the other classes."""
    a = validation.check_rate("reference_accuracy", reference_accuracy,
                              include_one=True)
    prior = (np.full(num_classes, 1.0 / num_classes) if prior is None
             else _check_prior(prior, num_classes))
    given = np.full((num_classes, num_classes),
                    (1.0 - a) / (num_classes - 1))
    np.fill_diagonal(given, a)  # given[y, r] = P(r | y)
    return (prior[:, None] * given).T


def reference_limit(epsilon, confusion, delta=0.0):
    """The best accuracy of any (eps, delta)-LDP channel applied to a
    classifier's prediction, for the joint law of its predictions and the
    classes in `confusion` (counts, row the true class, column the
    prediction): the program of `tfdptext.privacy.identification` with
    weights P(r, y). Never below `rr_reference` (one such channel).

    Example:
    >>> round(reference_limit(2.0, [[45, 5], [10, 40]]), 3)
    0.767
    """
    counts = _check_confusion(confusion)
    return identification.best_channel(
        identification.joint_from_confusion(counts), epsilon, delta).value


def limit_at(epsilon, num_classes, prior=None, delta=0.0,
             reference_accuracy=None, reference_confusion=None):
    """The limit beside a private accuracy at `epsilon` per text:
    `reference_limit` of `reference_confusion`; else the same program for
    a classifier of `reference_accuracy` with even errors; else (no
    reference) the theorem `bound`."""
    if reference_confusion is not None:
        return reference_limit(epsilon, reference_confusion, delta)
    if reference_accuracy is None:
        return bound(epsilon, num_classes, prior, delta)
    return identification.best_channel(
        even_errors_joint(num_classes, reference_accuracy, prior), epsilon,
        delta).value


def rr_limit(epsilon, num_classes, reference_accuracy=1.0, prior=None,
             delta=0.0):
    """Accuracy of K-ary randomized response on the prediction of a
    classifier of accuracy `reference_accuracy` (errors spread evenly over
    the other classes), decoded by Bayes' rule for `prior` (None:
    uniform). What randomized response gets, never above `limit_at`.

    Example:
    >>> [round(rr_limit(e, 4, 0.85), 2) for e in (1, 2, 4, 8)]
    [0.43, 0.62, 0.81, 0.85]
    >>> [round(rr_limit(e, 2, 0.90), 2) for e in (1, 2, 4)]
    [0.68, 0.8, 0.89]
    """
    p = identification_bound(epsilon, num_classes, delta)
    a = validation.check_rate("reference_accuracy", reference_accuracy,
                              include_one=True)
    others = num_classes - 1
    keep = a * p + (1.0 - a) * (1.0 - p) / others
    if prior is None:
        return keep
    prior = _check_prior(prior, num_classes)
    spread = (1.0 - keep) / others
    # For output r: the class r itself, or the likeliest other class.
    order = np.argsort(prior)[::-1]
    best_other = np.where(np.arange(num_classes) == order[0],
                          prior[order[1]], prior[order[0]])
    return float(np.maximum(prior * keep, best_other * spread).sum())


def confusion_matrix(labels, predicted, num_classes):
    """(K, K) counts: row the true class, column the predicted one."""
    counts = np.zeros((num_classes, num_classes), np.int64)
    np.add.at(counts, (np.asarray(labels, np.int64),
                       np.asarray(predicted, np.int64)), 1)
    return counts


def _check_confusion(confusion):
    counts = np.asarray(confusion, np.float64)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1] or \
            counts.shape[0] < 2 or not np.isfinite(counts).all() or \
            (counts < 0).any() or counts.sum() <= 0:
        raise ArgumentError(
            "`confusion` must be a square (K, K) matrix of non-negative "
            f"counts, K >= 2, not all zero; received shape {counts.shape}.")
    return counts


def rr_reference(epsilon, confusion, delta=0.0):
    """Accuracy of K-ary randomized response on a classifier's actual
    predictions, decoded by Bayes' rule for their joint law with the true
    class: sum over released r of max_k P(class k, released r), where
    P(k, r) = sum_c confusion[k, c] / n * T[c, r] and T keeps the
    prediction with probability p = `identification_bound` (else another
    class uniformly).

    Unlike `rr_limit` with a < 1, this assumes nothing about how the
    classifier errs: it is the expected accuracy, on the texts `confusion`
    counts, of a release one can build (randomized response on that
    classifier's prediction, decoded by the table fitted to its confusion
    matrix). As epsilon grows it tends to the accuracy of the best
    relabelling of the predictions (the classifier's own when no
    prediction is more often another class); `rr_limit`'s even-errors
    model can sit well above it when the prior is skewed.

    Example:
    >>> round(rr_reference(2.0, [[45, 5], [10, 40]]), 3)
    0.767
    """
    counts = _check_confusion(confusion)
    num_classes = counts.shape[0]
    p = identification_bound(epsilon, num_classes, delta)
    channel = np.full((num_classes, num_classes),
                      (1.0 - p) / (num_classes - 1))
    np.fill_diagonal(channel, p)
    joint = (counts / counts.sum()) @ channel
    return float(joint.max(axis=0).sum())


def per_text_epsilon(guarantee):
    """(epsilon, delta) of the whole release of one text, or None when
    the guarantee has no single epsilon for two arbitrary texts.

    Exact conversions only: per text and per representation as they are;
    per coordinate with a recorded dimension k: k coordinates at eps each
    are (k eps)-LDP (and the recorded representation delta); word dropout
    then a per-representation mechanism: the base epsilon (dropout
    amplifies single-token substitutions only). Metric DP (d_chi, BRR,
    per token) has no epsilon for arbitrary texts: None.
    """
    if not guarantee.is_private or guarantee.is_metric:
        return None
    unit, details = guarantee.unit, guarantee.details
    if unit in (guarantee_lib.PER_TEXT, guarantee_lib.PER_REPRESENTATION):
        return guarantee.value, guarantee.delta
    if unit == guarantee_lib.PER_COORDINATE and "dimension" in details:
        return (guarantee.value * int(details["dimension"]),
                float(details.get("representation_delta",
                                  min(1.0, guarantee.delta
                                      * int(details["dimension"])))))
    if unit == guarantee_lib.PER_TOKEN_SUBSTITUTION and \
            "base_epsilon" in details:
        return float(details["base_epsilon"]), guarantee.delta
    return None


def _no_limit(guarantee):
    if not guarantee.is_private:
        return "the release is not private (no epsilon)"
    if guarantee.is_metric:
        return (f"the guarantee is metric DP ({guarantee.metric}): it has "
                "no single epsilon for two arbitrary texts")
    return (f"the guarantee's unit ({guarantee.unit}) does not convert "
            "exactly to one epsilon per text")


def _too_large(num_classes, delta, uniform):
    """Why no program is solved for K classes (None when it is)."""
    most = (identification.MAX_CLASSES if delta == 0.0
            else identification.MAX_CLASSES_DELTA)
    if num_classes <= most or uniform:
        return None
    return (f"{num_classes} classes with an uneven prior: the limit's linear "
            f"program is built for K <= {most}"
            + (" with delta > 0" if delta else ""))


def limit_report(guarantee, accuracy, num_classes, reference_accuracy=None,
                 prior=None, num_texts=None, reference_confusion=None):
    """The limit beside a private accuracy.

    Args:
        guarantee: the release's `Guarantee`.
        accuracy: the accuracy measured through the release.
        num_classes: K.
        reference_accuracy: the non-private accuracy of the same budget
            (None: no reference; the limit is then the theorem `bound`).
        prior: the class frequencies of the test set (None: uniform).
        num_texts: how many test texts `accuracy` was measured on: adds
            the 95% interval of the share (the limit bounds the expected
            accuracy; a finite test set can land above it by chance).
        reference_confusion: the non-private classifier's (K, K) confusion
            matrix on the same test texts: the limit is then
            `reference_limit` (the best LDP channel on its actual
            predictions), and `reference_accuracy` is read from it.
            Without it, its errors are taken as spread evenly over the
            other classes (a model: with a skewed prior it can put the
            limit above the reference's own accuracy).

    Returns a dict: "applies" False with a "reason", or K, the per-text
    epsilon and delta, the `limit` and `share_of_limit` (accuracy /
    limit), `bound_any_classifier` (the theorem `bound`, `bound_kind`
    "theorem"), `randomized_response` (K-ary randomized response on the
    same reference, for comparison), and `kind`: "theorem" when the limit
    is the bound (no reference), else "reference" (the best channel on
    the reference's predictions).
    """
    per_text = per_text_epsilon(guarantee)
    if per_text is None:
        return {"applies": False, "reason": _no_limit(guarantee)}
    epsilon, delta = per_text
    uniform = _is_uniform(prior, num_classes)
    reason = _too_large(num_classes, delta, uniform and (
        reference_accuracy is None and reference_confusion is None))
    if reason:
        return {"applies": False, "reason": reason}
    if reference_confusion is not None:
        counts = np.asarray(reference_confusion, np.float64)
        if counts.shape != (num_classes, num_classes):
            raise ArgumentError(
                f"`reference_confusion` must be ({num_classes}, "
                f"{num_classes}), received shape {counts.shape}.")
        reference_accuracy = float(np.trace(counts) / counts.sum())
        rr = rr_reference(epsilon, counts, delta)
    elif reference_accuracy is not None:
        reference_accuracy = validation.check_rate(
            "reference_accuracy", reference_accuracy, include_one=True)
        rr = rr_limit(epsilon, num_classes, reference_accuracy, prior,
                      delta)
    else:
        rr = rr_limit(epsilon, num_classes, 1.0, prior, delta)
    limit = limit_at(epsilon, num_classes, prior, delta, reference_accuracy,
                     reference_confusion)
    given = reference_accuracy is not None
    report = {
        "applies": True,
        "num_classes": int(num_classes),
        "epsilon_per_text": float(epsilon),
        "delta": float(delta),
        "reference_accuracy": float(reference_accuracy) if given else 1.0,
        "reference_given": given,
        "reference_model": ("confusion" if reference_confusion is not None
                            else "even errors" if given else "none"),
        "reference_confusion": (None if reference_confusion is None else
                                np.asarray(reference_confusion).tolist()),
        "prior": None if prior is None else _check_prior(
            prior, num_classes).tolist(),
        "limit": float(limit),
        "share_of_limit": float(accuracy) / limit,
        "bound_any_classifier": float(bound(epsilon, num_classes, prior,
                                            delta)),
        "bound_kind": THEOREM,
        "randomized_response": float(rr),
        "kind": REFERENCE if given else THEOREM,
    }
    if num_texts:
        n = validation.check_int("num_texts", num_texts)
        half = 1.96 * math.sqrt(max(accuracy * (1.0 - accuracy), 0.25 / n)
                                / n)
        report["num_texts"] = n
        report["share_of_limit_95"] = [(accuracy - half) / limit,
                                       (accuracy + half) / limit]
    return report
