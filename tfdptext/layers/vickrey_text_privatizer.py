"""VickreyTextPrivatizer: metric noise, then the Vickrey choice between
the two nearest tokens."""

import keras
import tensorflow as tf

from tfdptext.layers import mahalanobis_text_privatizer
from tfdptext.layers import sampling
from tfdptext.privacy import substitution as guarantees
from tfdptext.substitution import backend
from tfdptext.substitution import vickrey


@keras.saving.register_keras_serializable(package="tfdptext")
class VickreyTextPrivatizer(mahalanobis_text_privatizer._RootNoise):
    """Adds metric noise to each token's embedding, then releases the
    nearest token w1 or the second nearest w2 (Xu et al. 2021).

    With d1 <= d2 the distances of w1, w2 to the noisy vector, w1 is
    released with probability (1 - t) d2 / (t d1 + (1 - t) d2)
    (`tfdptext.substitution.vickrey`): t = 0 is the underlying mechanism,
    larger t moves mass to the runner-up, so a word survives less often
    at the same noise. The noise is d_chi (`lam=None`, mldp-text's
    VickreyMechanism and pyPANTERA's VickreyCMP) or Mahalanobis (`lam` in
    [0, 1], pyPANTERA's VickreyMhl). The choice is post-processing of the
    noisy vector: the guarantee is the noise's (eta * d metric DP per
    token, d Euclidean or d_R).

    Reference: Xu, Aggarwal, Feyisetan, Teissier, "On a Utilitarian
    Approach to Privacy Preserving Text Generation", PrivateNLP 2021.

    Args:
        eta: privacy parameter of the noise, finite and > 0.
        embeddings: (vocabulary_size, dim) table phi, or None with
            `vocabulary_size` and `embedding_dim`.
        t: the threshold, in [0, 1] (default 0.5).
        lam: None (d_chi noise) or lambda in [0, 1] (Mahalanobis noise).
        special_token_ids, passthrough_token_ids, embedding_description,
        noise: as `DChiTextPrivatizer`.

    Uniforms per token: the noise's (n + 2 ceil(n / 2)) and one for the
    choice.

    Example:
    >>> table = np.random.randn(100, 16).astype("float32")
    >>> layer = VickreyTextPrivatizer(eta=10.0, embeddings=table, t=0.5,
    ...                               special_token_ids=[0, 1])
    >>> layer(np.array([[5, 6, 7]]))
    """

    def __init__(self, eta, embeddings=None, t=0.5, lam=None, **kwargs):
        super().__init__(eta, embeddings, lam=lam, **kwargs)
        self.t = vickrey.check_threshold(t)

    def _private_tokens(self, rows, uniforms):
        count = self._noise_uniforms()
        noise_uniforms = None if uniforms is None else uniforms[:, :count]
        first, second, d1, d2 = self.two_nearest(
            self.noisy_vectors(rows, noise_uniforms))
        choice = sampling.uniform(tf.shape(d1), None if uniforms is None
                                  else uniforms[:, count])
        return vickrey.choose(first, second, d1, d2, self.t, choice,
                              backend.TENSORFLOW)

    def _uniforms_per_token(self):
        return self._noise_uniforms() + 1

    def _guarantee(self):
        return guarantees.vickrey_guarantee(self._base_guarantee(), self.t)

    def corpus_privatizer(self, seed=None):
        from tfdptext.offline import vickrey as offline_vickrey

        return offline_vickrey.VickreyCorpusPrivatizer(
            self.public_table(), self.eta, t=self.t, lam=self.lam,
            special_token_ids=self.special_token_ids,
            passthrough_token_ids=self.passthrough_token_ids, seed=seed,
            embedding_description=self.embedding_description)

    def get_config(self):
        config = super().get_config()
        config.update({"t": self.t})
        return config
