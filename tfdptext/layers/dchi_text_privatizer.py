"""DChiTextPrivatizer: d_chi text-to-text privatization of token ids."""

import keras

from tfdptext.errors import ArgumentError
from tfdptext.layers import nearest
from tfdptext.layers import noise_math
from tfdptext.layers import token_privatizer
from tfdptext.privacy import metric
from tfdptext.privacy import validation


@keras.saving.register_keras_serializable(package="tfdptext")
class DChiTextPrivatizer(token_privatizer.TokenPrivatizer):
    """Replaces each token by the token nearest to its d_chi-noised embedding.

    M(w) = argmin_{w' in candidates} ||phi(w) + z - phi(w')||, z with density
    ~ exp(-eta ||z||) (Feyisetan et al.; Qu et al. text-to-text). Tokens in
    `special_token_ids` ([PAD], [CLS], [SEP], [MASK], [UNK], [unused*]) are
    never output. Every input token is privatized, [UNK] included (passing
    it through would make a word -> [UNK] substitution infinitely
    distinguishable), except the structural `passthrough_token_ids`
    ([PAD], [CLS], [SEP]), which reveal only the length.
    Exact nearest neighbour in the graph (`tfdptext.layers.nearest`: a
    matrix product, TOPK_V2 and an exact re-ranking), so the layer exports
    to TFLite, and runs on any Keras backend (server-side training under
    JAX, noise from `keras.random` there); for whole corpora off device, see
    `tfdptext.offline.DChiCorpusPrivatizer` (FAISS).

    The embedding table is a non-trainable weight: it is saved with the
    model's weights, not in the config.

    Args:
        eta: privacy parameter, finite and > 0.
        embeddings: (vocabulary_size, dim) array, the table phi. May be
            omitted when `vocabulary_size` and `embedding_dim` are given
            (the weights are then loaded later, e.g. by `keras.saving`).
        special_token_ids: ids never output.
        passthrough_token_ids: ids released unchanged when they are in the
            input (structural tokens only; each must also be in
            `special_token_ids`).
        embedding_description: what the table is, for the guarantee.
        noise: False switches noise off (output = input ids).

    Example:
    >>> table = np.random.randn(100, 16).astype("float32")
    >>> layer = DChiTextPrivatizer(eta=10.0, embeddings=table,
    ...                            special_token_ids=[0, 1, 2, 3],
    ...                            passthrough_token_ids=[0, 1, 2])
    >>> layer(np.array([[1, 5, 3, 2, 0]]))  # 1, 2, 0 pass through
    """

    def __init__(self, eta, embeddings=None, vocabulary_size=None,
                 embedding_dim=None, special_token_ids=(),
                 passthrough_token_ids=(),
                 embedding_description="the token embedding table",
                 noise=True, **kwargs):
        table = None
        if embeddings is not None:
            table = token_privatizer.float_table(embeddings, "embeddings")
            vocabulary_size, embedding_dim = table.shape
        if vocabulary_size is None or embedding_dim is None:
            raise ArgumentError(
                "Pass `embeddings`, or both `vocabulary_size` and "
                "`embedding_dim`.")
        self.embedding_dim = validation.check_int("embedding_dim",
                                                  embedding_dim)
        super().__init__(table, vocabulary_size, self.embedding_dim,
                         "embeddings", special_token_ids,
                         passthrough_token_ids, noise=noise, **kwargs)
        self.eta = metric.check_float32_eta(eta)
        self.embedding_description = embedding_description

    def nearest_tokens(self, vectors):
        """Exact nearest candidate token for each row of (N, dim) vectors
        (`tfdptext.layers.nearest`: full float32 precision on a GPU too)."""
        return nearest.nearest_tokens(vectors, self.embeddings,
                                      ~self._is_special)

    def _privatize_ids(self, ids, rows, uniforms):
        vectors = self._noisy_vectors(rows, uniforms)
        if not nearest._eager_tensorflow():
            return self.nearest_tokens(vectors)
        # Eagerly (a secure release in Python), only the positions that
        # are not passed through ([PAD], [CLS], [SEP]: `apply` releases
        # their ids unchanged) are searched: the same noise is drawn for
        # every position, the other answers are not read.
        import tensorflow as tf

        searched = tf.where(~tf.gather(
            tf.convert_to_tensor(self._is_passthrough), ids))
        found = self.nearest_tokens(tf.gather_nd(vectors, searched))
        return tf.tensor_scatter_nd_update(tf.cast(ids, tf.int32), searched,
                                           found)

    def _noisy_vectors(self, rows, uniforms):
        if uniforms is None:
            source = self.noise_source()
            noise = noise_math.dchi(source.shape(rows), self.eta, source)
        else:  # the phone's random numbers (TensorFlow)
            from tfdptext.layers import sampling

            noise = sampling.dchi(None, self.eta, self.embedding_dim,
                                  uniforms)
        return rows + noise

    def _private_tokens(self, rows, uniforms):
        return self.nearest_tokens(self._noisy_vectors(rows, uniforms))

    def _uniforms_per_token(self):
        return noise_math.dchi_uniforms_per_vector(self.embedding_dim)

    def corpus_privatizer(self, seed=None):
        from tfdptext.offline import dchi as offline_dchi

        return offline_dchi.DChiCorpusPrivatizer(
            self.public_table(), self.eta,
            special_token_ids=self.special_token_ids,
            passthrough_token_ids=self.passthrough_token_ids, seed=seed,
            embedding_description=self.embedding_description)

    def _guarantee(self):
        return self._guarantee_for(noise_math.default_randomness())

    def _guarantee_for(self, randomness):
        return metric.dchi_guarantee(
            self.eta, self.embedding_dim, self.embedding_description,
            text_to_text=True,
            uniform_bits=metric.exponential_bits(randomness))

    def get_config(self):
        config = super().get_config()
        config.update({
            "eta": self.eta,
            "embedding_dim": self.embedding_dim,
            "embedding_description": self.embedding_description,
        })
        return config
