"""Partly bad random-word buffers on the phone models of every exported
mechanism (issue 27): refused, or released by exactly the stated channel;
and buffers with a defect of every word refused.

Each mechanism runs alone as a phone model runs it
(`secure.secure_privatizer_model`: the same extraction and checks as an
exported phone model), converted to TFLite, one row per call. The
text-to-text mechanisms (d_chi, Mahalanobis, Vickrey, TEM, SanText,
CusText, TruncatedGumbel, 1-Diffractor) run the same checks in their own
tests (`substitution_checks.check_phone_model`), BRR below.

Before extraction, these failed: a code release with its first word 0
released the clean code every time, and an all-even buffer released one
code never (the issue's table).

Statistical tests: fixed sample sizes; p > 1e-6 per test (a few dozen
tests in this file: a correct mechanism fails one run in about 10^4).
"""

import numpy as np
import pytest
from scipy import stats

import partial_buffers
import substitution_checks as checks
from tfdptext import layers
from tfdptext.models import secure
from tfdptext.privacy import categorical
from tfdptext.privacy import extraction

P_REJECT = 1e-6


_phone = partial_buffers.phone


def test_code_release_partial_buffers_follow_the_transition_matrix():
    """The issue's table on a 3-code release at epsilon 2 (128 words:
    each of the 2 words the release reads is the sum of 64)."""
    run, width = partial_buffers.code_release_phone(2.0, 3)
    assert width == 128
    expected = categorical.transition_matrix(2.0, 3, 24)[0]
    x = np.zeros((1,), np.int32)
    released = partial_buffers.released_outputs(
        lambda w: run(x, w), width, draws=4000)
    tested = 0
    for kind, codes in released.items():
        if codes is None:
            continue
        tested += 1
        counts = np.bincount(codes, minlength=3)
        p = stats.chisquare(counts, expected * counts.sum()).pvalue
        assert p > P_REJECT, (kind, counts)
    assert tested >= 4  # most partial buffers are released, exactly
    partial_buffers.assert_defects_refused(lambda w: run(x, w), width)


def test_laplace_partial_buffers_keep_the_laplace_law():
    run, width = _phone(layers.LaplaceNoise(1.0), (8,))
    assert width == extraction.layout(4 * 8).words
    assert extraction.layout(4 * 8).group == 4
    x = np.full((1, 8), 0.5, np.float32)
    released = partial_buffers.released_outputs(
        lambda w: run(x, w), width, draws=600)
    law = stats.laplace(scale=1.0).cdf
    for kind, out in released.items():
        if out is None:
            continue
        noise = (out - x).reshape(-1, 8)
        assert stats.kstest(noise.ravel(), law).pvalue > P_REJECT, kind
        # The first coordinate alone: what the first (bad) words feed.
        assert stats.kstest(noise[:, 0], law).pvalue > P_REJECT, kind
    partial_buffers.assert_defects_refused(lambda w: run(x, w), width,
                                           kinds=_DEFECTS_AND_PERIODS)


# A low bit following the position modulo 4, 6 or 8: on these layouts
# (g = 4 for Laplace on 8 coordinates, g = 8 for d_chi on one 8-d
# vector) every consumed word's low bit is fixed; refused (issue 38).
_DEFECTS_AND_PERIODS = partial_buffers.DEFECTS + (
    "low_bit_period_4", "low_bit_period_6", "low_bit_period_8",
    "pool_tiled_after_header")


@pytest.mark.parametrize("shape", [(8,), (3, 8)])
def test_dchi_partial_buffers_keep_the_gamma_radius(shape):
    """d_chi noise of 8-d vectors (one per sequence, or per token):
    ||noise|| ~ Gamma(8, 1 / eta), and its direction uniform (the first
    coordinate of the unit direction has mean 0)."""
    eta = 4.0
    run, width = _phone(layers.DChiNoise(eta), shape)
    x = np.zeros((1,) + shape, np.float32)
    released = partial_buffers.released_outputs(
        lambda w: run(x, w), width, draws=500)
    radius = stats.gamma(a=8, scale=1.0 / eta).cdf
    for kind, out in released.items():
        if out is None:
            continue
        noise = out.reshape(-1, 8)
        norms = np.linalg.norm(noise, axis=-1)
        assert stats.kstest(norms, radius).pvalue > P_REJECT, kind
        first = noise[:, 0] / norms
        # E = 0, Var = 1/8 for a uniform direction in R^8.
        assert abs(first.mean()) < 5.5 * np.sqrt(1 / 8 / len(first)), kind
    partial_buffers.assert_defects_refused(lambda w: run(x, w), width,
                                           kinds=_DEFECTS_AND_PERIODS)


def test_brr_phone_model_partial_buffers_follow_the_closed_form():
    import test_brr

    layer = test_brr._layer()
    checks.check_phone_model(layer, [2, 5],
                             [test_brr.closed_form(2), test_brr.closed_form(5)],
                             draws=5000, batch=500, partial_draws=1500)


def test_word_dropout_reads_the_first_consumed_words(monkeypatch):
    """Word dropout's positions come from the first L consumed words and
    the noise from the rest, both after extraction (a spy on the layers'
    `apply` sees exactly `extraction.extract` of the buffer)."""
    import keras_hub

    from tfdptext import models

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=60, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16)
    split = models.sequence_representation_split(
        backbone, 2, [layers.MinMaxNormalize(), layers.LaplaceNoise(2.0)],
        input_dropout=layers.WordDropout(0.5, 4, (0, 2, 3)))
    seen = {}
    dropout, privatizer = secure.find_layers(split.user)
    for name, layer in (("dropout", dropout), ("noise", privatizer)):
        original = layer.apply

        def spy(inputs, uniforms=None, original=original, name=name):
            if uniforms is not None:  # the user side's own call has none
                seen[name] = uniforms
            return original(inputs, uniforms)

        monkeypatch.setattr(layer, "apply", spy)
    model = secure.secure_user_model(split.user, split.split_point, 6)
    consumed = 6 + 4 * 8  # 6 positions, then 4 words per coordinate (8)
    width = int(model.input[secure.RANDOM_WORDS].shape[-1])
    assert width == extraction.layout(consumed).words
    words = secure.os_random_words((1, width))
    model({"token_ids": np.array([[2, 7, 8, 9, 3, 0]], np.int32),
           "padding_mask": np.array([[1, 1, 1, 1, 1, 0]], np.int32),
           "random_words": words})
    used = extraction.extract(words, consumed)
    np.testing.assert_array_equal(np.asarray(seen["dropout"]), used[:, :6])
    np.testing.assert_array_equal(
        np.asarray(seen["noise"]).reshape(1, -1), used[:, 6:])
