"""The log-weights of the exponential mechanisms over the vocabulary:
SanText, SanText+ (Yue et al. 2021) and TEM (Carvalho et al. 2023).

Each returns, for (N, V) Euclidean distances from the input tokens'
embeddings to every row of the table, the (N, V) log-weights s with
P(output = y | x) = exp(s_y) / sum_z exp(s_z); rows that may never be
output get -inf. Sampled by `tfdptext.substitution.race`, never
normalised.

- SanText: s_y = -eps d(x, y) / 2 over every candidate: eps * d metric DP.
  Yue, Du, Wang, Li, Sun, Chow, "Differential Privacy for Text Analytics
  via Natural Text Sanitization", Findings of ACL 2021.
- SanText+: the same over the sensitive candidates only; a non-sensitive
  input is released unchanged with probability 1 - p and otherwise
  sanitized into a sensitive word (`keep_threshold`).
- TEM: s_y = -eps min(d(x, y), gamma) / 2. The paper samples it as an
  exponential mechanism over L_x = {y : d(x, y) <= gamma} plus one
  element "bottom" of utility -gamma + (2 / eps) ln |V \\ L_x| that stands
  for a uniform word outside L_x: the same distribution, whose metric is
  the truncated distance min(d, gamma) (so eps * gamma bounds any pair).
  Carvalho, Vasiloudis, Feyisetan, Wang, "TEM: High Utility Metric
  Differential Privacy on Text", SDM 2023.
"""

import math

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

# SanText+'s keep decision compares KEEP_BITS bits of a uniform with an
# integer threshold: keep with probability exactly T / 2^KEEP_BITS.
KEEP_BITS = 23


def santext_log_weights(distances, epsilon, candidates, backend):
    """-eps d / 2 where `candidates` (a (V,) boolean mask), else -inf."""
    return _masked(-0.5 * epsilon * distances, candidates, backend)


def tem_log_weights(distances, epsilon, gamma, candidates, backend):
    """-eps min(d, gamma) / 2 where `candidates`, else -inf."""
    return _masked(-0.5 * epsilon * backend.minimum(distances, gamma),
                   candidates, backend)


def _masked(log_weights, candidates, backend):
    return backend.where(candidates[None, :], log_weights,
                         backend.zeros_like(log_weights) - math.inf)


def tem_gamma(epsilon, beta, num_candidates):
    """gamma = (2 / eps) ln((1 - beta) (|V| - 1) / beta): with it, the
    output falls outside L_x with probability at most beta (Carvalho et
    al. 2023; pyPANTERA's TEM uses the same).

    Example:
    >>> round(tem_gamma(10.0, 0.001, 30000), 3)
    3.443
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    beta = check_beta(beta)
    num_candidates = validation.check_int("num_candidates", num_candidates,
                                          minimum=2)
    return 2.0 / epsilon * math.log(
        (1.0 - beta) * (num_candidates - 1) / beta)


def check_beta(value):
    """beta in (0, 1), else ArgumentError naming `beta`."""
    value = validation._as_real("beta", value)
    if not 0.0 < value < 1.0:
        raise ArgumentError(f"`beta` must be in (0, 1), received {value}.")
    return value


def keep_threshold(p):
    """T = round((1 - p) 2^KEEP_BITS): SanText+ keeps a non-sensitive word
    iff floor(U 2^KEEP_BITS) < T, with probability T / 2^KEEP_BITS."""
    p = validation.check_rate("p", p, include_one=True)
    return int(round((1.0 - p) * 2**KEEP_BITS))


def keeps(uniforms, threshold, backend):
    """Booleans: floor(U 2^KEEP_BITS) < T (integers, exact in float)."""
    scale = float(2**KEEP_BITS)
    cell = backend.floor(backend.cast(uniforms, backend.dtype) * scale)
    return cell < float(threshold)


def sensitive_tail(candidate_ids, fraction):
    """The sensitive ids of SanText+ by `fraction` w: the last ceil(w m)
    of the m candidate ids in table order, taken as frequency order (most
    frequent first, as GloVe files and BERT's WordPiece vocabulary are
    sorted): the rarest words are sensitive, as in the paper."""
    fraction = validation.check_rate("sensitive_fraction", fraction,
                                     include_one=True)
    candidate_ids = list(candidate_ids)
    count = math.ceil(fraction * len(candidate_ids))
    if count < 1:
        raise ArgumentError("`sensitive_fraction` must leave at least one "
                            "sensitive word, received "
                            f"{fraction} of {len(candidate_ids)}.")
    return tuple(candidate_ids[len(candidate_ids) - count:])
