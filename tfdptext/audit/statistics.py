"""Exact binomial confidence bounds and the epsilon lower bound they give.

Pure Python (only `math`): the regularized incomplete beta function by its
continued fraction, its inverse by bisection, one-sided Clopper-Pearson
bounds, and

    epsilon >= ln(p_low / q_high)

for an event S with p = P[M(x) in S] and q = P[M(x') in S] (an
epsilon-DP mechanism has p <= e^epsilon q for every S). Each bound holds
with the stated confidence; `bonferroni` splits a confidence level over a
family of tests.
"""

import math
import numbers

_TINY = 1e-300
_CF_TOLERANCE = 1e-15
_CF_MAX_ITERATIONS = 100000
_BISECTION_STEPS = 200


def _check_probability(name, value, open_interval=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"`{name}` must be a real number, received "
                         f"{value!r}.")
    value = float(value)
    ok = 0.0 < value < 1.0 if open_interval else 0.0 <= value <= 1.0
    if not ok:
        interval = "(0, 1)" if open_interval else "[0, 1]"
        raise ValueError(f"`{name}` must be in {interval}, received {value}.")
    return value


def _check_shape(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"`{name}` must be a real number, received "
                         f"{value!r}.")
    value = float(value)
    if not (0.0 < value < math.inf):
        raise ValueError(f"`{name}` must be finite and > 0 (allowed range: "
                         f"(0, inf)), received {value}.")
    return value


def _check_counts(successes, trials, prefix=""):
    for name, value in ((prefix + "successes", successes),
                        (prefix + "trials", trials)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"`{name}` must be an integer, received "
                             f"{value!r}.")
    if trials < 1:
        raise ValueError(f"`{prefix}trials` must be >= 1, received {trials}.")
    if not 0 <= successes <= trials:
        raise ValueError(
            f"`{prefix}successes` must be in [0, {prefix}trials] = "
            f"[0, {trials}], received {successes}.")
    return int(successes), int(trials)


def _beta_continued_fraction(a, b, x):
    """The continued fraction of I_x(a, b) (modified Lentz's method)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _CF_MAX_ITERATIONS + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _CF_TOLERANCE:
            return h
    raise ArithmeticError(
        f"The incomplete beta continued fraction did not converge for "
        f"a={a}, b={b}, x={x}.")


def regularized_incomplete_beta(x, a, b):
    """I_x(a, b), the CDF of Beta(a, b) at x.

    Args:
        x: a point in [0, 1].
        a, b: the shape parameters, finite and > 0.

    Returns:
        I_x(a, b) as a float in [0, 1].

    Example:
    >>> regularized_incomplete_beta(0.5, 2.0, 2.0)
    0.5
    """
    x = _check_probability("x", x, open_interval=False)
    a = _check_shape("a", a)
    b = _check_shape("b", b)
    if x == 0.0 or x == 1.0:
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    # The fraction converges fast on the side of the mean it is used on.
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(
        b, a, 1.0 - x) / b


def beta_quantile(probability, a, b):
    """The `probability` quantile of Beta(a, b), by bisection on its CDF.

    Args:
        probability: in (0, 1).
        a, b: the shape parameters, finite and > 0.

    Returns:
        x in [0, 1] with I_x(a, b) = probability (to about 1e-15 in x, or
        to the float resolution near 0).

    Example:
    >>> round(beta_quantile(0.25, 1.0, 1.0), 12)  # Beta(1, 1) is uniform
    0.25
    """
    probability = _check_probability("probability", probability)
    a = _check_shape("a", a)
    b = _check_shape("b", b)
    low, high = 0.0, 1.0
    for _ in range(_BISECTION_STEPS):
        # Bisect on the geometric mean while the bracket spans decades, so
        # tiny quantiles keep their relative precision.
        if low > 0.0 and high / low > 4.0:
            middle = math.sqrt(low * high)
        elif low == 0.0 and high > 1e-300:
            middle = high * 1e-3 if high < 1e-3 else high / 2.0
        else:
            middle = 0.5 * (low + high)
        if middle <= low or middle >= high:
            break
        if regularized_incomplete_beta(middle, a, b) < probability:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high) if low > 0.0 else high


def clopper_pearson_lower(successes, trials, alpha):
    """One-sided Clopper-Pearson lower bound on a binomial proportion.

    P[p >= bound] >= 1 - alpha over the draw of `successes`.

    Args:
        successes: k, an integer in [0, trials].
        trials: n >= 1.
        alpha: the error probability, in (0, 1).

    Returns:
        The alpha quantile of Beta(k, n - k + 1); 0 when k = 0.

    Example:
    >>> round(clopper_pearson_lower(10, 10, 0.05), 4)  # 0.05 ** (1 / 10)
    0.7411
    """
    successes, trials = _check_counts(successes, trials)
    alpha = _check_probability("alpha", alpha)
    if successes == 0:
        return 0.0
    return beta_quantile(alpha, successes, trials - successes + 1)


def clopper_pearson_upper(successes, trials, alpha):
    """One-sided Clopper-Pearson upper bound on a binomial proportion.

    P[p <= bound] >= 1 - alpha over the draw of `successes`.

    Args:
        successes: k, an integer in [0, trials].
        trials: n >= 1.
        alpha: the error probability, in (0, 1).

    Returns:
        The 1 - alpha quantile of Beta(k + 1, n - k); 1 when k = n.

    Example:
    >>> round(clopper_pearson_upper(0, 10, 0.05), 4)  # 1 - 0.05 ** (1 / 10)
    0.2589
    """
    successes, trials = _check_counts(successes, trials)
    alpha = _check_probability("alpha", alpha)
    if successes == trials:
        return 1.0
    return beta_quantile(1.0 - alpha, successes + 1, trials - successes)


def epsilon_lower_bound(successes_x, trials_x, successes_x_prime,
                        trials_x_prime, alpha, delta=0.0):
    """A (1 - alpha)-confidence lower bound on epsilon from one event S.

    With k of n releases of M(x) in S and k' of n' releases of M(x') in S,
    p_low = CP lower(k, n) and q_high = CP upper(k', n'), each at alpha / 2,
    so both hold together with probability >= 1 - alpha, and then
    epsilon >= ln(p / q) >= ln(p_low / q_high). For an (epsilon, delta)
    claim, p <= e^epsilon q + delta gives epsilon >= ln((p_low - delta) /
    q_high). Epsilon is never negative, so the bound is clipped at 0.

    Args:
        successes_x, trials_x: counts of S among the releases of M(x).
        successes_x_prime, trials_x_prime: the same for M(x').
        alpha: the error probability of the bound, in (0, 1).
        delta: the claim's delta, in [0, 1].

    Returns:
        The lower bound, a float >= 0.

    Example:
    >>> bound = epsilon_lower_bound(6000, 10000, 2000, 10000, 0.05)
    >>> 1.0 < bound < math.log(3.0)
    True
    """
    successes_x, trials_x = _check_counts(successes_x, trials_x, "x_")
    successes_x_prime, trials_x_prime = _check_counts(
        successes_x_prime, trials_x_prime, "x_prime_")
    alpha = _check_probability("alpha", alpha)
    delta = _check_probability("delta", delta, open_interval=False)
    p_low = clopper_pearson_lower(successes_x, trials_x, alpha / 2.0) - delta
    q_high = clopper_pearson_upper(successes_x_prime, trials_x_prime,
                                   alpha / 2.0)
    if p_low <= 0.0:
        return 0.0
    return max(0.0, math.log(p_low) - math.log(q_high))


def bonferroni(alpha, num_tests):
    """The per-test error probability for a family of `num_tests` tests.

    If each of m bounds holds with probability >= 1 - alpha / m, all hold
    together with probability >= 1 - alpha (union bound).

    Args:
        alpha: the family's error probability, in (0, 1).
        num_tests: m, an integer >= 1.

    Returns:
        alpha / m.

    Example:
    >>> bonferroni(0.05, 10)
    0.005
    """
    alpha = _check_probability("alpha", alpha)
    if isinstance(num_tests, bool) or not isinstance(num_tests,
                                                     numbers.Integral):
        raise ValueError(f"`num_tests` must be an integer >= 1, received "
                         f"{num_tests!r}.")
    if num_tests < 1:
        raise ValueError(f"`num_tests` must be an integer >= 1, received "
                         f"{num_tests}.")
    return alpha / num_tests
