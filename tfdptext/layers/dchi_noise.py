"""DChiNoise: metric-DP (d_chi) noise on embedding vectors."""

import keras
from keras import ops

from tfdptext.errors import ArgumentError
from tfdptext.layers import base
from tfdptext.layers import noise_math
from tfdptext.privacy import metric
from tfdptext.privacy import validation


@keras.saving.register_keras_serializable(package="tfdptext")
class DChiNoise(base.PrivatizationLayer):
    """Adds multivariate Laplace noise, density ~ exp(-eta ||z||_2).

    Each vector along the last axis (a token embedding in
    (batch, length, n), or a sequence embedding in (batch, n)) gets its own
    noise z = r * p with r ~ Gamma(n, 1 / eta) and p uniform on the unit
    sphere, so E||z|| = n / eta. The output satisfies eta * d_Euclidean
    metric DP per vector: per token for token embeddings (composing over
    the tokens of a text), per sequence for one pooled vector per text.

    Runs on any Keras backend (the math in `tfdptext.layers.noise_math`);
    with `uniforms` (the phone's random words, `apply`) it uses
    TensorFlow's samplers.

    Args:
        eta: privacy parameter, finite and > 0 (larger = less noise).
        embedding_description: what the vectors are, for the guarantee's
            metric (e.g. "MiniLM token embeddings").
        vectors: "tokens" (a vector per token; the guarantee is per token)
            or "sequences" (one pooled vector per text; per sequence).
        noise: False switches noise off (debugging only; no guarantee).

    Example:
    >>> layer = DChiNoise(eta=20.0)
    >>> noisy = layer(np.zeros((2, 8, 384), "float32"))
    >>> np.linalg.norm(noisy, axis=-1).mean()  # about 384 / 20
    """

    def __init__(self, eta, embedding_description="the input vectors",
                 vectors="tokens", noise=True, **kwargs):
        super().__init__(noise=noise, **kwargs)
        self.eta = validation.check_positive("eta", eta)
        self.vectors = validation.check_choice("vectors", vectors,
                                               metric.VECTOR_KINDS)
        metric.check_float32_eta(self.eta)
        if not isinstance(embedding_description, str):
            raise ArgumentError("`embedding_description` must be a string.")
        self.embedding_description = embedding_description
        self.dimension = None

    def build(self, input_shape):
        self._check_rank(input_shape, 2)
        self.dimension = int(input_shape[-1])
        metric.check_float32_eta(self.eta, self.dimension)
        super().build(input_shape)

    def apply(self, inputs, uniforms=None):
        self._check_built_width(inputs, self.dimension)
        raw = ops.cast(inputs, "float32")
        x = raw
        if uniforms is not None:
            from tfdptext.layers import sampling

            x = x + sampling.dchi(None, self.eta, self.dimension, uniforms)
        elif self._noisy(None):
            source = self.noise_source()
            x = x + noise_math.dchi(source.shape(x), self.eta, source)
        return base.nan_unless(base.finite_rows(raw), x)

    def uniforms_shape(self, input_shape):
        n = int(input_shape[-1])
        return tuple(input_shape[1:-1]) + (
            noise_math.dchi_uniforms_per_vector(n),)

    def _guarantee(self):
        return self._guarantee_for(noise_math.default_randomness())

    def _guarantee_for(self, randomness):
        return metric.dchi_guarantee(
            self.eta, self.dimension, self.embedding_description,
            vectors=self.vectors,
            uniform_bits=metric.exponential_bits(randomness))

    def get_config(self):
        config = super().get_config()
        config.update({
            "eta": self.eta,
            "embedding_description": self.embedding_description,
            "vectors": self.vectors,
        })
        return config
