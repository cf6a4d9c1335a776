"""The regularized Mahalanobis metric of Xu et al. (2020), and elliptical
noise in it.

Xu, Aggarwal, Feyisetan, Teissier, "A Differentially Private Text
Perturbation Method Using a Regularized Mahalanobis Metric", Proceedings
of the Second Workshop on Privacy in NLP (PrivateNLP), 2020.

Sigma is the covariance of the candidate tokens' embeddings, scaled to
trace n (an average variance of 1, so that it and the identity have the
same trace); Sigma_lambda = lambda Sigma + (1 - lambda) I. Noise with
density ~ exp(-eta ||Sigma_lambda^{-1/2} z||) is z = Sigma_lambda^{1/2} u
with u d_chi noise (density ~ exp(-eta ||u||): a Gamma(n, 1/eta) radius
times a uniform direction), and the mechanism
x + z, decoded to the nearest token by Euclidean distance, is
eta * d_R metric DP with d_R(x, x') = ||Sigma_lambda^{-1/2} (x - x')||.

The roots are computed once, in float64 numpy, on the host; the layers
hold them as weights.
"""

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

# The smallest eigenvalue of Sigma_lambda accepted, relative to the
# largest: below, the metric is (numerically) infinite along some
# direction and the noise degenerate.
MIN_CONDITION = 1e-6


def check_lambda(value):
    """lambda in [0, 1], else ArgumentError naming `lam`."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ArgumentError(f"`lam` must be a number in [0, 1], "
                                f"received {value!r}.") from None
    value = validation._as_real("lam", value)
    if not 0.0 <= value <= 1.0:
        raise ArgumentError(f"`lam` must be in [0, 1], received {value}.")
    return value


def regularized_covariance(embeddings, lam):
    """Sigma_lambda (float64, (n, n)) of the (m, n) candidate embeddings."""
    lam = check_lambda(lam)
    x = np.asarray(embeddings, np.float64)
    if x.ndim != 2 or len(x) < 2 or not np.isfinite(x).all():
        raise ArgumentError(
            "`embeddings` must be a finite 2-D table with at least 2 "
            f"candidate rows, received shape {x.shape}.")
    n = x.shape[1]
    covariance = np.cov(x, rowvar=False, ddof=0).reshape(n, n)
    trace = float(np.trace(covariance))
    if not trace > 0.0:
        raise ArgumentError("`embeddings`: the candidate rows are all equal; "
                            "their covariance is 0.")
    return lam * covariance * (n / trace) + (1.0 - lam) * np.eye(n)


def roots(sigma):
    """(Sigma^{1/2}, Sigma^{-1/2}) of a symmetric positive definite
    matrix, float64; ArgumentError naming `lam` when it is (nearly)
    singular (lambda = 1 with a rank-deficient covariance)."""
    values, vectors = np.linalg.eigh(np.asarray(sigma, np.float64))
    if not values.min() > MIN_CONDITION * values.max():
        raise ArgumentError(
            "`lam`: Sigma_lambda is singular (smallest eigenvalue "
            f"{values.min():.3g}, largest {values.max():.3g}): the "
            "embeddings' covariance is rank-deficient; use lam < 1.")
    root = (vectors * np.sqrt(values)) @ vectors.T
    inverse = (vectors / np.sqrt(values)) @ vectors.T
    return root, inverse


def distance(inverse_root, a, b):
    """d_R(a, b) = ||Sigma_lambda^{-1/2} (a - b)|| (float64)."""
    diff = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    return float(np.linalg.norm(np.asarray(inverse_root) @ diff))


def transform(noise, root, backend):
    """Sigma_lambda^{1/2} u for each row u of (N, n) noise (the root is
    symmetric: rows times root)."""
    return backend.matmul_transposed(noise, root)
