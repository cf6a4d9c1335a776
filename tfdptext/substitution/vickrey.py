"""The Vickrey choice of Xu et al. (2021) between the two nearest tokens.

Xu, Aggarwal, Feyisetan, Teissier, "On a Utilitarian Approach to Privacy
Preserving Text Generation", Proceedings of the Third Workshop on Privacy
in NLP (PrivateNLP), 2021.

After metric noise (d_chi or Mahalanobis), let w1, w2 be the nearest and
second-nearest candidate tokens to the noisy vector, at Euclidean
distances d1 <= d2. Output w1 with probability

    p1 = (1 - t) d2 / (t d1 + (1 - t) d2),

else w2, for a threshold t in [0, 1]: t = 0 is the nearest token (the
underlying mechanism), t = 1/2 gives p1 = d2 / (d1 + d2), t = 1 always the
second. The choice depends only on the noisy vector and fresh randomness,
so it is post-processing: the guarantee is the underlying noise's. (A
variant that skips the input word when it is the nearest, as mldp-text's
VickreyMechanism does, is not post-processing: its output depends on the
input beyond the noisy vector, so the noise's proof does not cover it.)

The comparison u < p1 is in floating point; as post-processing it cannot
weaken the guarantee, it only rounds p1 (by at most 2^-23 in float32).
"""

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation


def check_threshold(value):
    """t in [0, 1], else ArgumentError naming `t`."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ArgumentError(f"`t` must be a number in [0, 1], received "
                                f"{value!r}.") from None
    value = validation._as_real("t", value)
    if not 0.0 <= value <= 1.0:
        raise ArgumentError(f"`t` must be in [0, 1], received {value}.")
    return value


def first_probability(d1, d2, t, backend):
    """p1 for distances d1 <= d2 (1 when both are 0)."""
    numerator = (1.0 - t) * d2
    denominator = t * d1 + numerator
    safe = backend.where(denominator > 0.0, denominator,
                         backend.zeros_like(denominator) + 1.0)
    return backend.where(denominator > 0.0, numerator / safe,
                         backend.zeros_like(denominator) + 1.0)


def choose(first, second, d1, d2, t, uniforms, backend):
    """The released ids: `first` where U < p1, else `second`."""
    p1 = first_probability(d1, d2, t, backend)
    return backend.where(backend.cast(uniforms, backend.dtype) < p1, first,
                         second)
