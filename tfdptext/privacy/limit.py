"""The most any eps-LDP release of a text can tell about its class.

The bound (a theorem). Let a release M be (eps, delta)-LDP for any two
texts, and let a server name the class of a text from M's output with any
decoder d. For K classes with a uniform prior:

    P[d(M(x)) = y(x)] <= (e^eps + (K - 1) delta) / (e^eps + K - 1).

Proof: let S_y be the outputs decoded as y and A = sum_y P[M(x_y) in S_y]
for texts x_y of each class. For y' != y, P[M(x_y) in S_y] <= e^eps
P[M(x_y') in S_y] + delta; summed over y' != y and then over y,
(K - 1) A <= e^eps (K - A) + K (K - 1) delta, and the accuracy is A / K.
K-ary randomized response on the true class attains it at delta = 0
(Kairouz, Oh and Viswanath 2014, "Extremal mechanisms for local
differential privacy").

The reference (not a theorem). A server that holds a non-private
classifier of accuracy a can at best get what randomized response on that
classifier's prediction gets: the two symmetric channels compose to one
with keep probability a' = a p + (1 - a) (1 - p) / (K - 1),
p = the bound above. `rr_limit(eps, K, a)` is a' (uniform prior), or, with
a class `prior`, the accuracy of the Bayes-optimal decoder of that channel,
sum_r max_y prior_y P[r | y]. With a = 1 this is optimal for K = 2 and any
prior (every binary eps-LDP decision is a mixture of randomized response
and constants); for K > 2 and a non-uniform prior it is what randomized
response achieves, not a proven bound. `limit_report` says which one a
number is.

Pure Python and numpy.
"""

import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import validation

THEOREM = "theorem"
REFERENCE = "reference"


def identification_bound(epsilon, num_classes, delta=0.0):
    """(e^eps + (K - 1) delta) / (e^eps + K - 1), computed without
    overflow: the largest accuracy of naming one of K equally likely
    classes from an (eps, delta)-LDP release (module docstring).

    Example:
    >>> round(identification_bound(1.0, 4), 4)
    0.4754
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    num_classes = validation.check_int("num_classes", num_classes, 2)
    delta = validation.check_rate("delta", delta, include_one=True)
    tail = (num_classes - 1) * math.exp(-epsilon)
    return min(1.0, (1.0 + delta * tail) / (1.0 + tail))


def _check_prior(prior, num_classes):
    """The prior as a float64 array summing to 1, or ArgumentError."""
    prior = np.asarray(prior, np.float64)
    if prior.shape != (num_classes,) or not np.isfinite(prior).all() \
            or (prior < 0).any() or prior.sum() <= 0:
        raise ArgumentError(
            f"`prior` must be {num_classes} finite non-negative class "
            f"weights (not all zero), received {prior.tolist()}.")
    return prior / prior.sum()


def rr_limit(epsilon, num_classes, reference_accuracy=1.0, prior=None,
             delta=0.0):
    """Accuracy of K-ary randomized response on the prediction of a
    classifier of accuracy `reference_accuracy` (errors spread evenly over
    the other classes), decoded by Bayes' rule for `prior` (None:
    uniform). See the module docstring for when this is a theorem.

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


def limit_report(guarantee, accuracy, num_classes, reference_accuracy=None,
                 prior=None, num_texts=None):
    """The limit beside a private accuracy.

    Args:
        guarantee: the release's `Guarantee`.
        accuracy: the accuracy measured through the release.
        num_classes: K.
        reference_accuracy: the non-private accuracy of the same budget
            (None: the limit of a perfect classifier, a = 1).
        prior: the class frequencies of the test set (None: uniform).
        num_texts: how many test texts `accuracy` was measured on: adds
            the 95% interval of the share (the limit bounds the expected
            accuracy; a finite test set can land above it by chance).

    Returns a dict: "applies" False with a "reason", or K, the per-text
    epsilon and delta, the `limit` and `share_of_limit` (accuracy / limit),
    `bound_any_classifier` (a = 1) with its `bound_kind`, and `kind`:
    "theorem" when the limit is a proven upper bound (a = 1 with a uniform
    prior, or K = 2), else "reference".
    """
    per_text = per_text_epsilon(guarantee)
    if per_text is None:
        return {"applies": False, "reason": _no_limit(guarantee)}
    epsilon, delta = per_text
    uniform = prior is None or np.allclose(
        _check_prior(prior, num_classes), 1.0 / num_classes)
    if reference_accuracy is None:
        reference = 1.0
    else:
        reference = validation.check_rate(
            "reference_accuracy", reference_accuracy, include_one=True)
    limit = rr_limit(epsilon, num_classes, reference, prior, delta)
    bound = rr_limit(epsilon, num_classes, 1.0, prior, delta)
    bound_proven = uniform or num_classes == 2
    proven = reference == 1.0 and bound_proven
    report = {
        "applies": True,
        "num_classes": int(num_classes),
        "epsilon_per_text": float(epsilon),
        "delta": float(delta),
        "reference_accuracy": float(reference),
        "reference_given": reference_accuracy is not None,
        "prior": None if prior is None else _check_prior(
            prior, num_classes).tolist(),
        "limit": float(limit),
        "share_of_limit": float(accuracy) / limit,
        "bound_any_classifier": float(bound),
        "bound_kind": THEOREM if bound_proven else REFERENCE,
        "kind": THEOREM if proven else REFERENCE,
    }
    if num_texts:
        n = validation.check_int("num_texts", num_texts)
        half = 1.96 * math.sqrt(max(accuracy * (1.0 - accuracy), 0.25 / n)
                                / n)
        report["num_texts"] = n
        report["share_of_limit_95"] = [(accuracy - half) / limit,
                                       (accuracy + half) / limit]
    return report
