"""DELIBERATELY BROKEN privatizers, for testing the auditor only.

Every class here keeps the guarantee of the correct layer it derives from
(`LaplaceNoise`, per coordinate) while releasing something that does NOT
satisfy it. They exist so that `tfdptext-audit --include_broken` and
tests/test_audit.py can check that the audit refutes a false claim. Never
use them to privatize data.

- `SharedNoiseLaplace`: one noise scalar per example broadcast over all
  coordinates (the defect of the DPNR authors' public code): coordinate
  differences are released exactly.
- `NoiselessLaplace`: the noise is switched off but the guarantee is still
  claimed.
- `ReusedSeedLaplace`: noise from a stateless op with a constant seed, so
  every release carries the same noise vector.
- `HalvedScaleLaplace`: Laplace scale b / 2, so the true epsilon is twice
  the claim.
- `DoubleKeepCodeRR`: code randomized response whose keep threshold is
  computed for 2 eps while the guarantee claims eps (the claim is half the
  truth). A keep probability computed for eps / 2 would be MORE private
  than claimed, which no lower bound can refute; this is its mirror.
- `SkewedOtherCodeRR`: code randomized response that, when it does not
  keep, always releases c + 1 (mod m) instead of a uniform other code.
"""

import tensorflow as tf

from tfdptext.layers import code_randomized_response
from tfdptext.layers import laplace_noise
from tfdptext.layers import sampling
from tfdptext.privacy import categorical

_REUSED_SEED = (1234, 5678)


class SharedNoiseLaplace(laplace_noise.LaplaceNoise):
    """BROKEN: one Laplace scalar per example, added to every coordinate.

    Example:
    >>> layer = SharedNoiseLaplace(epsilon=1.0)
    >>> y = layer(np.zeros((2, 4), "float32")).numpy()
    >>> float(np.ptp(y[0]))  # all coordinates moved together
    0.0
    """

    def apply(self, inputs, uniforms=None):
        x = tf.clip_by_value(tf.cast(inputs, tf.float32), 0.0, 1.0)
        shape = tf.concat([tf.shape(x)[:-1], [1]], axis=0)
        return x + sampling.laplace(shape, self.scale)


class NoiselessLaplace(laplace_noise.LaplaceNoise):
    """BROKEN: releases the clipped input, still claiming epsilon.

    Example:
    >>> NoiselessLaplace(epsilon=1.0)(np.full((1, 2), 0.3, "float32"))
    """

    def apply(self, inputs, uniforms=None):
        return tf.clip_by_value(tf.cast(inputs, tf.float32), 0.0, 1.0)


class ReusedSeedLaplace(laplace_noise.LaplaceNoise):
    """BROKEN: the same noise on every call (a constant-seed stateless op).

    Example:
    >>> layer = ReusedSeedLaplace(epsilon=1.0)
    >>> x = np.zeros((1, 4), "float32")
    >>> bool((layer(x) == layer(x)).numpy().all())
    True
    """

    def apply(self, inputs, uniforms=None):
        x = tf.clip_by_value(tf.cast(inputs, tf.float32), 0.0, 1.0)
        # Every row of every call gets the noise of the first row.
        shape = tf.concat([[2], tf.shape(x)[-1:]], axis=0)
        u = tf.random.stateless_uniform(shape, seed=_REUSED_SEED)
        u = tf.minimum(u, 1.0 - 2.0**-24)
        noise = self.scale * (tf.math.log1p(-u[1]) - tf.math.log1p(-u[0]))
        return x + noise


class HalvedScaleLaplace(laplace_noise.LaplaceNoise):
    """BROKEN: Laplace scale b / 2 (true epsilon = 2 x the claim).

    Example:
    >>> layer = HalvedScaleLaplace(epsilon=1.0)
    >>> _ = layer(np.zeros((1, 4), "float32"))
    >>> layer.scale
    0.5
    """

    def build(self, input_shape):
        super().build(input_shape)
        self.scale = self.scale / 2.0


class DoubleKeepCodeRR(code_randomized_response.CodeRandomizedResponse):
    """BROKEN: keeps the code with the probability of 2 eps, claims eps.

    Example:
    >>> layer = DoubleKeepCodeRR(epsilon=1.0, num_codes=4)
    >>> round(layer.guarantee().value, 3)
    1.0
    """

    def __init__(self, epsilon, num_codes, **kwargs):
        super().__init__(epsilon, num_codes, **kwargs)
        self._thresholds = {
            bits: categorical.keep_threshold(2.0 * self.epsilon,
                                             self.num_codes, bits)
            for bits in self._thresholds}


class SkewedOtherCodeRR(code_randomized_response.CodeRandomizedResponse):
    """BROKEN: the other code is always c + 1 (mod m), not uniform.

    Example:
    >>> layer = SkewedOtherCodeRR(epsilon=1.0, num_codes=4)
    >>> sorted(set(layer(np.zeros(1000, "int32")).numpy().tolist()))
    [0, 1]
    """

    def apply(self, inputs, uniforms=None):
        codes = tf.cast(inputs, tf.int32)
        if uniforms is None:
            u = sampling.uniform(tf.shape(codes))
            threshold = self._thresholds[23]
            bits = 23
        else:
            u = sampling.uniform(None, tf.reshape(uniforms, [-1, 2])[:, 0])
            threshold = self._thresholds[24]
            bits = 24
        k = tf.cast(tf.floor(u * float(2**bits)), tf.int32)
        other = tf.math.floormod(codes + 1, self.num_codes)
        return tf.where(k < threshold, codes, other)


BROKEN_CODE_LAYERS = {
    "broken_code_double_keep": DoubleKeepCodeRR,
    "broken_code_skewed_other": SkewedOtherCodeRR,
}

BROKEN_LAYERS = {
    "broken_shared_noise": SharedNoiseLaplace,
    "broken_noise_off": NoiselessLaplace,
    "broken_reused_seed": ReusedSeedLaplace,
    "broken_halved_scale": HalvedScaleLaplace,
}
