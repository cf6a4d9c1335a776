"""DELIBERATELY BROKEN text-to-text privatizers, for testing the auditor.

Each builds, from a registry entry's `Settings`, a layer that claims the
correct mechanism's bound (the audit takes the claim from the correct
layer) while releasing something that does not satisfy it. Two copy a
defect of a public implementation of the same mechanism (docs/
benchmarks.md, "Same distribution"). Never use them to privatize data.

- `half_noise_mahalanobis`, `half_noise_vickrey`: the noise at half its
  scale (a Gamma scale of 1 / (2 eta)): the true bound is twice the claim.
  (A defect in the Vickrey choice itself could not be refuted: any choice
  made from the noisy vector alone is post-processing.)
- `tem_bottom_is_input`: TEM releasing the input word itself whenever a
  word beyond gamma is drawn (pyPANTERA's TEM: its uniform draw over the
  far words fails and its fallback returns the input).
- `santext_without_input`: SanText that never releases the input word
  (an "always change the word" variant): that output has probability 0
  for the input and not for its neighbours.
- `custext_per_word_sets`: CusText with each word's own top_k nearest
  words as its output set (pyPANTERA's CusText, the authors' "aggressive"
  mapping): two words of one set have different supports.
- `truncated_gumbel_without_input`: TruncatedGumbel whose k-NN search
  drops the query word: the input is never released.
- `half_noise_diffractor`: 1-Diffractor with the geometric noise of
  twice the epsilon (P(k) ~ exp(-2 eps |k|), half the spread): the true
  bound is twice the claim.
"""

import numpy as np
import tensorflow as tf

from tfdptext import layers
from tfdptext.substitution import backend
from tfdptext.substitution import custext


def _common(settings):
    return dict(special_token_ids=settings.special_token_ids,
                passthrough_token_ids=settings.passthrough_token_ids,
                embedding_description=settings.description)


class _HalfNoise:
    """Mixin: d_chi / Mahalanobis noise at half its scale."""

    def noisy_vectors(self, rows, uniforms):
        return rows + 0.5 * (super().noisy_vectors(rows, uniforms) - rows)


class _HalfNoiseMahalanobis(_HalfNoise, layers.MahalanobisTextPrivatizer):
    pass


class _HalfNoiseVickrey(_HalfNoise, layers.VickreyTextPrivatizer):
    pass


def half_noise_mahalanobis(settings):
    return _HalfNoiseMahalanobis(settings.value, settings.table,
                                 lam=settings.options["lam"],
                                 **_common(settings))


def half_noise_vickrey(settings):
    return _HalfNoiseVickrey(settings.value, settings.table,
                             t=settings.options["t"],
                             lam=settings.options.get("lam"),
                             **_common(settings))


class _TEMBottomIsInput(layers.TEMTextPrivatizer):

    def _privatize_ids(self, ids, rows, uniforms):
        drawn = self._race(rows, uniforms)
        table = tf.convert_to_tensor(self.embeddings)
        far = tf.norm(tf.gather(table, drawn) - rows, axis=-1) > self.gamma
        return tf.where(far, ids, drawn)


def tem_bottom_is_input(settings):
    return _TEMBottomIsInput(settings.value, settings.table,
                             gamma=settings.options["gamma"],
                             beta=settings.options["beta"],
                             **_common(settings))


class _SanTextWithoutInput(layers.SanTextTextPrivatizer):

    def _privatize_ids(self, ids, rows, uniforms):
        # The input's own log-weight set to -inf: the row's distance to it
        # is 0, so mask the smallest distance of each row.
        distances = self.distances(rows)
        own = tf.one_hot(ids, self.vocabulary_size) > 0.5
        weights = tf.where(own, -np.inf, self._log_weights(distances))
        count = self._race_uniforms()
        u = tf.random.uniform([tf.shape(rows)[0], count])
        from tfdptext.substitution import race

        return race.two_stage_race(weights, u, backend.TENSORFLOW)


def santext_without_input(settings):
    from tfdptext.mechanisms import exponential

    sensitive = (exponential._sensitive(settings)
                 if "sensitive_fraction" in settings.options else None)
    return _SanTextWithoutInput(
        settings.value, settings.table, sensitive_token_ids=sensitive,
        p=settings.options.get("p") if sensitive is not None else None,
        **_common(settings))


class _CusTextPerWordSets(layers.CusTextTextPrivatizer):

    def __init__(self, epsilon, embeddings, top_k, **kwargs):
        super().__init__(epsilon, embeddings, top_k=top_k, **kwargs)
        table = np.asarray(embeddings, np.float64)
        candidates = np.flatnonzero(~self._is_special)
        sets = self.sets_table().copy()
        for word in candidates:
            d = np.linalg.norm(table[candidates] - table[word], axis=1)
            members = candidates[np.argsort(d, kind="stable")[:top_k]]
            counts = custext.integer_counts(custext.probabilities(
                table, word, members, epsilon))
            sets[word, :top_k] = members
            sets[word, top_k:] = np.cumsum(counts)[:-1]
        self._initial_table = sets


def custext_per_word_sets(settings):
    return _CusTextPerWordSets(settings.value, settings.table,
                               settings.options["top_k"],
                               **_common(settings))


class _TruncatedGumbelWithoutInput(layers.TruncatedGumbelTextPrivatizer):
    """Takes the K nearest words other than the input (a k-NN search that
    drops the query): the input is never released, which a neighbour
    releases often."""

    def _private_tokens(self, rows, uniforms):
        from tfdptext.substitution import truncated_gumbel as tg

        k = self.max_candidates - 1
        u = tf.random.uniform([tf.shape(rows)[0], 1 + k])
        top = tf.math.top_k(-self.squared_distances(rows), k=k + 1)
        distances = tf.sqrt(tf.maximum(-top.values[:, 1:], 0.0))
        sizes = tf.minimum(tg.draw_sizes(u[:, 0], self._thresholds,
                                         backend.TENSORFLOW), k)
        noise = tg.truncated_gumbel(u[:, 1:], self.scale, self.max_distance,
                                    backend.TENSORFLOW)
        position = tg.select(distances, sizes, noise, backend.TENSORFLOW)
        return tf.gather(top.indices[:, 1:], position, batch_dims=1)


def truncated_gumbel_without_input(settings):
    return _TruncatedGumbelWithoutInput(
        settings.value, settings.table, scale=settings.options["scale"],
        max_candidates=settings.options["max_candidates"],
        **_common(settings))


class _HalfNoiseDiffractor(layers.DiffractorTextPrivatizer):

    def __init__(self, epsilon, embeddings, **kwargs):
        super().__init__(epsilon, embeddings, **kwargs)
        self._set_noise(2.0 * self.epsilon)


def half_noise_diffractor(settings):
    return _HalfNoiseDiffractor(settings.value, settings.table,
                                **_common(settings))
