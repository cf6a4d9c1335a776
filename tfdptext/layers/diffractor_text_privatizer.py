"""DiffractorTextPrivatizer: 1-Diffractor's geometric mechanism on a 1-D
list of the vocabulary (Meisenbacher, Chevli, Matthes 2024)."""

import keras
import numpy as np
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import sampling
from tfdptext.layers import token_privatizer
from tfdptext.privacy import randomness as randomness_lib
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import diffractor


@keras.saving.register_keras_serializable(package="tfdptext")
class DiffractorTextPrivatizer(token_privatizer.TokenPrivatizer):
    """Replaces each token by a word near it in a one-dimensional list of
    the vocabulary: the candidates are listed by a greedy nearest-neighbour
    walk over the embeddings, and the word at position i is released as
    the word at position clip(i + Z, 0, L - 1), Z two-sided geometric,
    P(Z = k) ~ exp(-eps |k|) (`tfdptext.substitution.diffractor`).

    eps * |pos(x) - pos(x')| metric DP per token, in positions of the list,
    with a delta that depends on the pair's distance d (the integer
    sampler's exact hockey-stick divergence, `pair_bound`): about 3e-9 at
    d = 1 and eps = 1 from random words, growing with d, and 1 once d
    exceeds twice the largest shift drawn (the guarantee says where). One
    random word per token on a phone, no floating point in the sampler.

    One table, one list. The paper's package can build one list per
    embedding model and pick one of the lists' candidates uniformly; a
    `Settings` holds one table, so this layer has one list (the mixture's
    guarantee would be eps times the largest position distance over the
    lists). The package's `method="TEM"` variant is not built.

    The table is int32 (V, 2): each id's list position (a special id: its
    nearest candidate's) and the id at each position, computed once on the
    host from the embeddings by an exact walk (39 s for 30,522 random
    384-d vectors on two shared cores; a word's 256 nearest words by one
    matrix product, an exact search when they are all listed); the
    embeddings themselves are not kept.

    Reference: Meisenbacher, Chevli, Matthes, "1-Diffractor: Efficient and
    Utility-Preserving Text Obfuscation Leveraging Word-Level Metric
    Differential Privacy", ACM WPES 2024 (PyPI dp-diffractor).

    Args:
        epsilon: privacy parameter per list position, finite and > 0 (the
            package's epsilon / sensitivity).
        embeddings: (vocabulary_size, dim) table the list comes from; None
            with `vocabulary_size` (weights loaded later).
        special_token_ids: never output (not in the list).
        passthrough_token_ids: released unchanged.
        embedding_description: what the embeddings are, for the guarantee.
        noise: False switches noise off (debugging only; no guarantee).

    Example:
    >>> table = np.random.randn(100, 16).astype("float32")
    >>> layer = DiffractorTextPrivatizer(epsilon=1.0, embeddings=table,
    ...                                  special_token_ids=[0, 1])
    >>> layer(np.array([[5, 6, 7]]))
    """

    def __init__(self, epsilon, embeddings=None, vocabulary_size=None,
                 special_token_ids=(), passthrough_token_ids=(),
                 embedding_description="the token embedding table",
                 noise=True, **kwargs):
        self.epsilon = validation.check_positive("epsilon", epsilon)
        table = None
        if embeddings is not None:
            embeddings = token_privatizer.float_table(embeddings,
                                                      "embeddings")
            vocabulary_size = len(embeddings)
            table = diffractor.list_table(embeddings, special_token_ids)
        if vocabulary_size is None:
            raise ArgumentError("Pass `embeddings`, or `vocabulary_size`.")
        super().__init__(table, vocabulary_size, 2, "list_table",
                         special_token_ids, passthrough_token_ids,
                         noise=noise, table_dtype="int32", **kwargs)
        self.embedding_description = embedding_description
        self.list_length = int((~self._is_special).sum())
        if self.list_length < 2:
            raise ArgumentError(
                "`special_token_ids` leave fewer than 2 candidate tokens.")
        self._set_noise(self.epsilon)

    def _set_noise(self, epsilon):
        """The thresholds of both integer widths for noise exp(-epsilon
        |k|) (a broken audit variant sets another epsilon)."""
        self._counts = {bits: diffractor.tail_counts(
            epsilon, self.list_length, bits) for bits in diffractor.BITS}
        self._thresholds = {bits: diffractor.shift_thresholds(
            counts, bits) for bits, counts in self._counts.items()}

    def _privatize_ids(self, ids, rows, uniforms):
        if sampling.are_words(uniforms):  # the phone model's random words
            integers = tf.cast(uniforms[:, 0], tf.int32)
            bits = diffractor.WORD_BITS
        else:
            u = sampling.uniform(tf.shape(ids), None if uniforms is None
                                 else uniforms[:, 0])
            integers = diffractor.centred_from_uniforms(u,
                                                        backend.TENSORFLOW)
            bits = diffractor.UNIFORM_BITS
        shifts = diffractor.draw_shifts(integers, self._thresholds[bits],
                                        backend.TENSORFLOW)
        released = diffractor.release_positions(
            rows[:, 0], shifts, self.list_length, backend.TENSORFLOW)
        table = tf.convert_to_tensor(self.list_table)
        return tf.gather(table[:, 1], released)

    def _uniforms_per_token(self):
        return 1

    def public_table(self):
        """None: this layer holds a list, not embeddings (the evaluation
        embeds released ids with the encoder's table)."""
        return None

    def list_table_values(self):
        """The (V, 2) int32 table as numpy: list positions, list ids."""
        if self._initial_table is not None:
            return np.asarray(self._initial_table)
        return np.asarray(self.list_table.numpy())

    def positions(self):
        """The (V,) list position of every id."""
        return self.list_table_values()[:, 0]

    def metric_distance(self, token_a, token_b):
        """|pos(a) - pos(b)|, in list positions."""
        positions = self.positions()
        return abs(int(positions[token_a]) - int(positions[token_b]))

    def pair_bound(self, token_a, token_b):
        """(eps |pos(a) - pos(b)|, the sampler's delta for that log-ratio);
        (0, 0) for two ids at the same position (the same distribution)."""
        distance = self.metric_distance(token_a, token_b)
        if distance == 0:
            return 0.0, 0.0
        bound = self.epsilon * distance
        # The layer's own guarantee: TensorFlow's 23-bit uniforms.
        return bound, diffractor.pair_deltas(
            self.epsilon, self.list_length, diffractor.UNIFORM_BITS,
            [distance])[0]

    def _guarantee(self):
        return self._guarantee_for(randomness_lib.TENSORFLOW_UNSEEDED)

    def _guarantee_for(self, randomness):
        bits = (diffractor.WORD_BITS if randomness_lib.reads_words(randomness)
                else diffractor.UNIFORM_BITS)
        return guarantees.diffractor_guarantee(
            self.epsilon, self.list_length,
            diffractor.total_variation(self.epsilon, self.list_length, bits),
            bits, len(self._counts[bits]), self.embedding_description,
            diffractor.delta_statement(self.epsilon, self.list_length, bits))

    def corpus_privatizer(self, seed=None):
        from tfdptext.offline import diffractor as offline_diffractor

        return offline_diffractor.DiffractorCorpusPrivatizer.from_table(
            self.list_table_values(), self.epsilon,
            special_token_ids=self.special_token_ids,
            passthrough_token_ids=self.passthrough_token_ids, seed=seed,
            embedding_description=self.embedding_description)

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon,
                       "embedding_description": self.embedding_description})
        return config
