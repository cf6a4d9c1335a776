"""MahalanobisTextPrivatizer: elliptical metric noise, nearest token."""

import keras
import numpy as np
import tensorflow as tf

from tfdptext.layers import embedding_privatizer
from tfdptext.layers import sampling
from tfdptext.privacy import metric
from tfdptext.privacy import substitution as guarantees
from tfdptext.substitution import backend
from tfdptext.substitution import mahalanobis


class _RootNoise(embedding_privatizer.EmbeddingTextPrivatizer):
    """d_chi noise, made elliptical by Sigma_lambda^{1/2} when `lam` is
    given (a weight `noise_root`, computed from the candidates' rows on
    the host); shared by the Mahalanobis and Vickrey layers."""

    def __init__(self, eta, embeddings=None, lam=None, **kwargs):
        super().__init__(embeddings, **kwargs)
        self.eta = metric.check_float32_eta(eta, self.embedding_dim)
        self.lam = None if lam is None else mahalanobis.check_lambda(lam)
        self._initial_root = None
        if self.lam is not None and embeddings is not None:
            self._initial_root, _ = mahalanobis.roots(
                mahalanobis.regularized_covariance(self.candidate_rows(),
                                                   self.lam))

    def build(self, input_shape):
        super().build(input_shape)
        if self.lam is None:
            return
        root = self._initial_root
        initializer = "zeros" if root is None else (
            lambda shape, dtype=None: tf.constant(root, dtype=dtype))
        self.noise_root = self.add_weight(
            name="noise_root", shape=(self.embedding_dim,) * 2,
            initializer=initializer, trainable=False)
        self._initial_root = None

    def root(self):
        """Sigma_lambda^{1/2} as float64 numpy (None for d_chi noise)."""
        if self.lam is None:
            return None
        if self._initial_root is not None:
            return self._initial_root
        return np.asarray(self.noise_root.numpy(),
                          np.float64)

    def metric_distance(self, token_a, token_b):
        """The distance the guarantee's bound grows with, between two
        token ids: Euclidean (d_chi noise) or d_R (Mahalanobis)."""
        table = np.asarray(self.public_table(), np.float64)
        if self.lam is None:
            return float(np.linalg.norm(table[token_a] - table[token_b]))
        return mahalanobis.distance(np.linalg.inv(self.root()),
                                    table[token_a], table[token_b])

    def pair_bound(self, token_a, token_b):
        """(log-ratio bound, delta) of the guarantee for two input ids."""
        return self.eta * self.metric_distance(token_a, token_b), 0.0

    def noisy_vectors(self, rows, uniforms):
        """phi(x) + z for (N, dim) rows; `uniforms` (N, dchi uniforms)."""
        noise = sampling.dchi(tf.shape(rows), self.eta, self.embedding_dim,
                              uniforms)
        if self.lam is not None:
            noise = mahalanobis.transform(
                noise, tf.convert_to_tensor(self.noise_root),
                backend.TENSORFLOW)
        return rows + noise

    def _noise_uniforms(self):
        return sampling.dchi_uniforms_per_vector(self.embedding_dim)

    def _base_guarantee(self, sampling_condition=metric.FLOAT32_SAMPLING):
        if self.lam is None:
            return metric.dchi_guarantee(
                self.eta, self.embedding_dim, self.embedding_description,
                text_to_text=True, sampling=sampling_condition)
        return guarantees.mahalanobis_guarantee(
            self.eta, self.lam, self.embedding_dim,
            self.embedding_description, sampling=sampling_condition)

    def get_config(self):
        config = super().get_config()
        config.update({"eta": self.eta, "lam": self.lam})
        return config


@keras.saving.register_keras_serializable(package="tfdptext")
class MahalanobisTextPrivatizer(_RootNoise):
    """Replaces each token by the token nearest to its embedding plus
    elliptical noise (Xu et al. 2020).

    M(w) = argmin_{w' in candidates} ||phi(w) + z - phi(w')||, z with
    density ~ exp(-eta ||Sigma_lambda^{-1/2} z||), Sigma_lambda = lambda
    Sigma + (1 - lambda) I, Sigma the covariance of the candidates'
    embeddings scaled to trace n (`tfdptext.substitution.mahalanobis`).
    The noise stretches along the directions in which the vocabulary
    varies, so that words in sparse regions get replaced too. Per token,
    eta * d_R metric DP, d_R the regularized Mahalanobis distance
    (`guarantee()`); lambda = 0 is d_chi (`DChiTextPrivatizer`).

    Reference: Xu, Aggarwal, Feyisetan, Teissier, "A Differentially
    Private Text Perturbation Method Using a Regularized Mahalanobis
    Metric", PrivateNLP 2020.

    Args:
        eta: privacy parameter, finite and > 0 (mldp-text's and
            pyPANTERA's epsilon).
        embeddings: (vocabulary_size, dim) table phi, or None with
            `vocabulary_size` and `embedding_dim`.
        lam: lambda in [0, 1] (default 0.2).
        special_token_ids, passthrough_token_ids, embedding_description,
        noise: as `DChiTextPrivatizer`.

    Uniforms per token: those of d_chi noise (n + 2 ceil(n / 2)).

    Example:
    >>> table = np.random.randn(100, 16).astype("float32")
    >>> layer = MahalanobisTextPrivatizer(eta=10.0, embeddings=table,
    ...                                   lam=0.2, special_token_ids=[0, 1])
    >>> layer(np.array([[5, 6, 7]]))
    """

    def __init__(self, eta, embeddings=None, lam=0.2, **kwargs):
        super().__init__(eta, embeddings,
                         lam=mahalanobis.check_lambda(lam), **kwargs)

    def _private_tokens(self, rows, uniforms):
        return self.nearest_tokens(self.noisy_vectors(rows, uniforms))

    def _uniforms_per_token(self):
        return self._noise_uniforms()

    def _guarantee(self):
        return self._base_guarantee()

    def corpus_privatizer(self, seed=None):
        from tfdptext.offline import mahalanobis as offline_mahalanobis

        return offline_mahalanobis.MahalanobisCorpusPrivatizer(
            self.public_table(), self.eta, lam=self.lam,
            special_token_ids=self.special_token_ids,
            passthrough_token_ids=self.passthrough_token_ids, seed=seed,
            embedding_description=self.embedding_description)
