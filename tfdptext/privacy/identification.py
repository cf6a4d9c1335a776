"""The best (eps, delta)-LDP channel for naming a class: a linear program.

The theorem. Let a release M of a text be (eps, delta)-LDP for any two
texts, let texts come with K classes of prior pi, and let a server guess
the class from M's output with any decoder (randomised or not). The
composed map from a text to a guess is an (eps, delta)-LDP channel into
the K guesses (post-processing). Averaging it over the texts of each
class keeps the constraints (an average of inequalities), so the class ->
guess channel Q(y | x) = E[P(guess y | text) | class x] satisfies

    Q(S | x) <= e^eps Q(S | x') + delta  for every set S of guesses and
                                         classes x, x',

and the accuracy is sum_x pi_x Q(x | x). Its maximum over such Q, a
linear program in the K^2 numbers Q(y | x), is therefore an upper bound on
the accuracy of EVERY (eps, delta)-LDP release of a text, whatever its
output space and decoder, and a channel that attains it is itself a
release (apply it to the true class: randomized response on a grouping,
for example). With delta = 0 the singleton sets suffice; with delta > 0
the constraints run over all 2^K sets, so the program is built for
K <= MAX_CLASSES_DELTA (K <= MAX_CLASSES otherwise).

The same program with a general objective sum_{x, y} W[x, y] Q(y | x)
gives the best channel applied to something else: with W[r, y] the joint
law of a reference classifier's prediction r and the true class y, it is
the best accuracy of any (eps, delta)-LDP channel applied to that
classifier's prediction (`tfdptext.privacy.limit`, the reference limit).

Closed forms it reproduces: uniform prior and delta = 0,
e^eps / (e^eps + K - 1) (Kairouz, Oh and Viswanath 2014); K = 2, the
vertices of a polygon.

Solved with SciPy's HiGHS (`scipy.optimize.linprog`); the value returned
is certified from the solver's dual solution (weak duality, every dual
constraint repaired before the sum), so it is an upper bound of the true
optimum up to float64 rounding of one dot product, never a tolerance of
the solver.
"""

import dataclasses
import itertools
import math

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

# The largest K the program is built for: K^2 unknowns and K^2 (K - 1)
# constraints with delta = 0; (2^K - 2) K (K - 1) with delta > 0.
MAX_CLASSES = 32
MAX_CLASSES_DELTA = 8
# Above this epsilon e^eps overflows the solver's scale; the value is then
# the non-private optimum sum_x max_y W[x, y] (an upper bound, within
# K^2 e^-EPSILON_CAP of the program's).
EPSILON_CAP = 30.0
# A guess with less total weight than this is "unused" in a channel.
UNUSED = 1e-9


@dataclasses.dataclass(frozen=True)
class Optimum:
    """The program's solution.

    Attributes:
        value: the optimum accuracy, certified from the dual (an upper
            bound of the exact optimum up to float64 rounding).
        channel: (K, K) float64, Q[y | x] of an optimal channel (rows sum
            to 1), the solver's primal solution.
        achieved: the objective of `channel` (<= value, equal up to the
            solver's tolerance).
    """

    value: float
    channel: np.ndarray
    achieved: float

    def used_guesses(self, weights):
        """The guesses an optimal channel produces with positive weight
        (sorted)."""
        mass = np.asarray(weights, np.float64).sum(axis=1) @ self.channel
        return [int(y) for y in np.flatnonzero(mass > UNUSED)]


def _check_weights(weights):
    w = np.asarray(weights, np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] < 2 or \
            not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ArgumentError(
            "`weights` must be a square (K, K) matrix of finite "
            "non-negative numbers, K >= 2, not all zero; received shape "
            f"{w.shape}.")
    return w


def _guess_sets(num_classes, delta):
    """The sets S of guesses constrained: singletons for delta = 0, every
    non-empty proper subset otherwise."""
    if delta == 0.0:
        return [(y,) for y in range(num_classes)]
    return [s for size in range(1, num_classes)
            for s in itertools.combinations(range(num_classes), size)]


def _constraints(num_classes, epsilon, delta):
    """(A, b) of A q <= b over q = Q flattened row-major (q[x K + y])."""
    from scipy import sparse

    ratio = math.exp(epsilon)
    rows, cols, vals = [], [], []
    count = 0
    for guesses in _guess_sets(num_classes, delta):
        for x, other in itertools.permutations(range(num_classes), 2):
            for y in guesses:
                rows += [count, count]
                cols += [x * num_classes + y, other * num_classes + y]
                vals += [1.0, -ratio]
            count += 1
    a = sparse.csr_matrix((vals, (rows, cols)),
                          shape=(count, num_classes**2))
    return a, np.full(count, delta)


def best_channel(weights, epsilon, delta=0.0):
    """max over (eps, delta)-LDP channels Q from K inputs to K guesses of
    sum_{x, y} weights[x, y] Q(y | x) (module docstring).

    Args:
        weights: (K, K) non-negative; diag(prior) for the accuracy of
            naming the class, joint(prediction, class) for a channel on a
            classifier's prediction.
        epsilon: > 0.
        delta: in [0, 1).

    Returns an `Optimum`. Raises ArgumentError for bad arguments or K
    above MAX_CLASSES (MAX_CLASSES_DELTA with delta > 0).

    Example:
    >>> round(best_channel(np.diag([0.5, 0.5]), 1.0).value, 4)
    0.7311
    """
    from scipy import optimize

    w = _check_weights(weights)
    epsilon = validation.check_positive("epsilon", epsilon)
    delta = validation.check_rate("delta", delta)
    k = w.shape[0]
    limit = MAX_CLASSES if delta == 0.0 else MAX_CLASSES_DELTA
    if k > limit:
        raise ArgumentError(
            f"The identification program is built for K <= {limit} classes"
            f"{' with delta > 0 (2^K sets of guesses)' if delta else ''}; "
            f"received K = {k}.")
    if epsilon >= EPSILON_CAP:
        channel = np.zeros((k, k))
        channel[np.arange(k), w.argmax(axis=1)] = 1.0
        value = float(w.max(axis=1).sum())
        return Optimum(value, channel, value)
    a_ub, b_ub = _constraints(k, epsilon, delta)
    a_eq = np.kron(np.eye(k), np.ones((1, k)))
    c = w.reshape(-1)
    result = optimize.linprog(-c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq,
                              b_eq=np.ones(k), bounds=(0.0, 1.0),
                              method="highs")
    if result.status != 0:
        raise ArgumentError(f"The identification program did not solve "
                            f"({result.message}).")
    value = _certified(c, a_ub, b_ub, a_eq, result)
    channel = np.clip(result.x.reshape(k, k), 0.0, None)
    channel /= channel.sum(axis=1, keepdims=True)
    return Optimum(value, channel, float((w * channel).sum()))


def _certified(c, a_ub, b_ub, a_eq, result):
    """An upper bound of max c.q from the solver's dual: y >= 0 on the
    inequalities, z on the row sums, u >= 0 on q <= 1 chosen so that
    A^T y + E^T z + u >= c; then c.q <= b.y + 1.z + 1.u for every feasible
    q (weak duality)."""
    y = np.maximum(-np.asarray(result.ineqlin.marginals), 0.0)
    z = -np.asarray(result.eqlin.marginals)
    u = np.maximum(c - a_ub.T @ y - a_eq.T @ z, 0.0)
    return float(b_ub @ y + z.sum() + u.sum())


def is_ldp(channel, epsilon, delta=0.0, tolerance=1e-9):
    """Whether Q(S | x) <= e^eps Q(S | x') + delta (+ tolerance) for
    every set S of outputs and inputs x, x' (all 2^K sets; small K)."""
    q = np.asarray(channel, np.float64)
    ratio = math.exp(epsilon)
    for guesses in _guess_sets(q.shape[1], 1.0 if delta else 0.0):
        mass = q[:, list(guesses)].sum(axis=1)
        if (mass[:, None] - ratio * mass[None, :]
                > delta + tolerance).any():
            return False
    return True


def identification_limit(prior, epsilon, delta=0.0):
    """The most any (eps, delta)-LDP release of a text lets a server name
    its class, for classes of `prior` (a theorem: module docstring).

    Example (AG's prior):
    >>> [round(identification_limit([0.58, 0.371, 0.007, 0.042], e), 3)
    ...  for e in (0.5, 1, 2)]
    [0.592, 0.695, 0.838]
    """
    prior = np.asarray(prior, np.float64)
    return best_channel(np.diag(prior / prior.sum()), epsilon, delta).value


def joint_from_confusion(confusion):
    """(K, K) joint law W[r, y] = P(prediction r, class y) from a confusion
    matrix of counts (row the true class, column the prediction)."""
    counts = np.asarray(confusion, np.float64)
    return (counts / counts.sum()).T


def grouped_accuracy(prior, groups, transition):
    """Accuracy of sending class x's code groups[x] through `transition`
    (m x m, P[released | code]) and decoding each released code to its
    likeliest class (Bayes): sum_c max_x prior_x T[groups[x], c]. The
    code release of a perfect code head reaches it.

    Example (binary randomized response on AG's two big classes, eps 1):
    >>> from tfdptext.privacy import categorical
    >>> t = categorical.transition_matrix(1.0, 2)
    >>> round(grouped_accuracy([0.58, 0.371, 0.007, 0.042], [0, 1, 1, 1],
    ...                        t), 3)
    0.695
    """
    prior = np.asarray(prior, np.float64)
    prior = prior / prior.sum()
    sent = np.asarray(transition, np.float64)[np.asarray(groups)]
    return float((prior[:, None] * sent).max(axis=0).sum())


@dataclasses.dataclass(frozen=True)
class CodeGrouping:
    """How many codes a code release uses and which classes share one.

    Attributes:
        num_codes: m >= 2.
        groups: (K,) the code of each class.
        accuracy: `grouped_accuracy` of the grouping through m-ary
            randomized response at the epsilon asked for (a perfect head).
        bound: the program's optimum for the prior (`identification_limit`).
        source: "program" (read off an optimal channel) or "top_m" (the m
            most frequent classes own a code each, the rest share the
            most frequent class's code).
    """

    num_codes: int
    groups: tuple
    accuracy: float
    bound: float
    source: str


def _program_grouping(prior, optimum):
    """(m, groups) read off an optimal channel: the guesses it uses are
    the codes (at least two: the likeliest class is added), and each class
    takes the code it is most often guessed as."""
    used = optimum.used_guesses(np.diag(prior))
    for y in np.argsort(-prior, kind="stable"):
        if len(used) >= 2:
            break
        if int(y) not in used:
            used = sorted(used + [int(y)])
    channel = optimum.channel[:, used]
    groups = channel.argmax(axis=1)
    for code, y in enumerate(used):
        groups[y] = code
    return len(used), groups


def top_m_grouping(prior, num_codes):
    """(K,) codes: the `num_codes` most frequent classes own a code each
    (by decreasing frequency), the others share the most frequent class's
    code (0)."""
    prior = np.asarray(prior, np.float64)
    order = np.argsort(-prior, kind="stable")
    groups = np.zeros(len(prior), np.int64)
    groups[order[:num_codes]] = np.arange(num_codes)
    return groups


def code_grouping(prior, epsilon, transition_of):
    """The code release's number of codes and class-to-code grouping for
    classes of `prior` at `epsilon` per text (`--num_codes=auto`).

    Candidates: the grouping read off an optimal channel of the program
    (the guesses it uses become the codes), and for every m in [2, K] the
    m most frequent classes with a code each (the others sharing the most
    frequent one's code). The one whose `grouped_accuracy` through m-ary
    randomized response (`transition_of(m)`, the matrix that runs) is
    highest wins; ties go to the program's, then to more codes.

    Example (AG's prior at eps 1: two codes, the two big classes):
    >>> from tfdptext.privacy import categorical
    >>> plan = code_grouping([0.58, 0.371, 0.007, 0.042], 1.0,
    ...     lambda m: categorical.transition_matrix(1.0, m))
    >>> plan.num_codes, plan.groups[:2], round(plan.accuracy, 3)
    (2, (0, 1), 0.695)
    """
    prior = np.asarray(prior, np.float64)
    prior = prior / prior.sum()
    k = len(prior)
    optimum = best_channel(np.diag(prior), epsilon)
    m, groups = _program_grouping(prior, optimum)
    candidates = [(grouped_accuracy(prior, groups, transition_of(m)), 1, m,
                   groups, "program")]
    for m in range(2, k + 1):
        groups = top_m_grouping(prior, m)
        candidates.append((grouped_accuracy(prior, groups, transition_of(m)),
                           0, m, groups, "top_m"))
    best = max(candidates, key=lambda c: (round(c[0], 12), c[1], c[2]))
    accuracy, _, m, groups, source = best
    return CodeGrouping(int(m), tuple(int(g) for g in groups), accuracy,
                        optimum.value, source)
