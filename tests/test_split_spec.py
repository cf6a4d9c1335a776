"""The split-point registry: one SplitSpec per split point, and the user
and server sides of every built split agree with it."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdptext import layers
from tfdptext import models
from tfdptext.errors import ArgumentError
from tfdptext.export import exporter
from tfdptext.layers import base as layers_base
from tfdptext.models import split as split_lib
from tfdptext.models import split_spec

DIM = 16  # the tiny backbone's hidden size
LENGTH = 16  # the tokenizer fixture's max_length


@pytest.fixture(scope="module")
def splits(tiny_backbone, tokenizer):
    """One built split per split point, noise on."""
    table = models.token_embedding_table(tiny_backbone)
    return {
        split_spec.SEQUENCE: models.sequence_representation_split(
            tiny_backbone, 3, [layers.MinMaxNormalize(),
                               layers.LaplaceNoise(1.0)]),
        split_spec.TOKEN: models.token_representation_split(
            tiny_backbone, 3, layers.DChiNoise(5.0)),
        split_spec.TEXT_TO_TEXT: models.text_to_text_split(
            tiny_backbone, 3, layers.DChiTextPrivatizer(
                5.0, table, special_token_ids=tokenizer.special_token_ids,
                passthrough_token_ids=tokenizer.passthrough_token_ids)),
        split_spec.CODE: models.code_split(
            tiny_backbone, 3, 4, layers.CodeRandomizedResponse(1.0, 4)),
    }


@pytest.fixture(scope="module")
def features(tokenizer):
    return tokenizer(["the staff was friendly", "terrible delivery"])


def test_every_split_point_has_a_spec():
    assert tuple(split_spec.SPLITS) == models.SPLIT_POINTS
    for name, spec in split_spec.SPLITS.items():
        assert split_spec.get(name) is spec and spec.name == name
        assert spec.released_keys[0] == spec.release
        assert spec.mask_travels == (spec.released_keys[1:] ==
                                     split_spec.MASK_KEYS)
    assert split_spec.get(split_spec.SEQUENCE).release == \
        "private_representation"
    assert split_spec.get(split_spec.TOKEN).release == "token_embeddings"
    assert split_spec.get(split_spec.TEXT_TO_TEXT).release == "token_ids"
    assert split_spec.get(split_spec.CODE).release == "private_code"


@pytest.mark.parametrize("name", split_spec.SPLIT_POINTS)
def test_user_side_returns_the_spec_dict_and_server_takes_it(
        splits, features, name):
    split, spec = splits[name], split_spec.get(name)
    assert split.spec is spec
    released = split.user(features)
    assert isinstance(released, dict)
    assert tuple(released) == spec.released_keys
    infos = {i.name: i for i in spec.released_infos(LENGTH, DIM)}
    for key, value in released.items():
        assert tuple(value.shape) == (2,) + infos[key].shape[1:], key
        assert value.dtype.name == infos[key].dtype, key
    # The splits are built for any length (sequence_length=None).
    assert tuple(split.server.input) == spec.released_keys
    inputs = {i.name: i for i in spec.released_infos(None, DIM)}
    for key, tensor in split.server.input.items():
        assert tuple(tensor.shape) == inputs[key].shape, key
        assert tensor.dtype == inputs[key].dtype, key
    assert split.model(features).shape == (2, 3)
    # The server reads the dict as it comes from the user side.
    assert split.server(released).shape == (2, 3)
    np.testing.assert_array_equal(split.release_of(released),
                                  released[spec.release])
    if spec.mask_travels:
        np.testing.assert_array_equal(released["padding_mask"],
                                      features["padding_mask"])
        np.testing.assert_array_equal(released["segment_ids"],
                                      features["segment_ids"])


@pytest.mark.parametrize("name", split_spec.SPLIT_POINTS)
def test_server_signature_inputs_are_the_specs(splits, features, name,
                                               tmp_path):
    split, spec = splits[name], split_spec.get(name)
    dim = DIM if spec.feature_axis else None
    path = str(tmp_path / "server")
    exporter._write_server(split.server, name, LENGTH, dim, path)
    signature = tf.saved_model.load(path).signatures["serving_default"]
    _, inputs = signature.structured_input_signature
    expected = spec.signature_inputs(LENGTH, dim)
    assert sorted(inputs) == sorted(info.name for info in expected)
    assert "segment_ids" not in inputs
    for info in expected:
        assert tuple(inputs[info.name].shape.as_list()) == info.shape
        assert inputs[info.name].dtype.name == info.dtype
    assert [s.name for s in exporter.server_input_specs(
        name, LENGTH, dim)] == [info.name for info in expected]
    # The signature equals the Keras server on the user side's release.
    released = split.user(features)
    out = signature(**{info.name: released[info.name] for info in expected})
    reference = keras.ops.softmax(split.server(released), axis=-1)
    np.testing.assert_allclose(out["probabilities"], reference, atol=1e-5)


def test_code_attack_features_are_one_hot(splits):
    code = split_spec.get(split_spec.CODE)
    table = split_lib.release_embedding_table(splits[split_spec.CODE].user)
    np.testing.assert_array_equal(table, np.eye(4))
    np.testing.assert_array_equal(
        code.attack_features({"private_code": np.array([3, 0])}, table),
        np.eye(4)[[3, 0]])
    with pytest.raises(ArgumentError, match="table"):
        code.attack_features({"private_code": np.array([1])})


def test_attack_features_closed_form():
    mask = np.array([[1, 1, 0], [1, 0, 0]], np.int32)
    vectors = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    sequence = split_spec.get(split_spec.SEQUENCE)
    x = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    np.testing.assert_array_equal(
        sequence.attack_features({"private_representation": x}), x)
    token = split_spec.get(split_spec.TOKEN)
    # Row 0: mean of (0, 1) and (2, 3); row 1: (6, 7) alone.
    np.testing.assert_allclose(token.attack_features(
        {"token_embeddings": vectors, "padding_mask": mask}),
        [[1.0, 2.0], [6.0, 7.0]])
    ids = split_spec.get(split_spec.TEXT_TO_TEXT)
    table = np.array([[0, 0], [2, 4], [4, 8], [10, 0]], np.float32)
    released = {"token_ids": np.array([[1, 2, 3], [3, 1, 0]]),
                "padding_mask": mask}
    np.testing.assert_allclose(ids.attack_features(released, table),
                               [[3.0, 6.0], [10.0, 0.0]])
    with pytest.raises(ArgumentError, match="table"):
        ids.attack_features(released)
    # A text without any real token gives zeros, not NaN.
    empty = token.attack_features({"token_embeddings": vectors,
                                   "padding_mask": np.zeros_like(mask)})
    np.testing.assert_array_equal(empty, 0.0)


def test_pad_values_and_descriptions():
    ids = split_spec.get(split_spec.TEXT_TO_TEXT)
    assert ids.pad_value("token_ids", 7) == 7
    assert ids.pad_value("padding_mask", 7) == 0
    assert split_spec.get(split_spec.TOKEN).pad_value(
        "token_embeddings", 7) == 0
    sequence = split_spec.get(split_spec.SEQUENCE)
    assert sequence.describe() == ("one vector per text (the pooled encoder "
                                   "output, normalised and noised)")
    assert "NOT privatized" in sequence.describe(private=False)
    for spec in split_spec.SPLITS.values():
        assert ("padding mask" in spec.describe()) == spec.mask_travels


def test_with_mask_and_server_feed():
    token = split_spec.get(split_spec.TOKEN)
    mask = np.array([[1, 1, 0]], np.int32)
    out = token.with_mask({"token_embeddings": np.ones((1, 3, 2))}, mask)
    assert tuple(out) == token.released_keys
    np.testing.assert_array_equal(out["segment_ids"], 0)
    feed = token.server_feed({"token_embeddings": tf.ones((1, 3, 2)),
                              "padding_mask": tf.constant(mask)})
    assert tuple(feed) == token.released_keys
    np.testing.assert_array_equal(feed["segment_ids"], 0)
    sequence = split_spec.get(split_spec.SEQUENCE)
    assert tuple(sequence.with_mask({"private_representation": 1}, mask)) \
        == ("private_representation",)


def test_unknown_split_point_is_a_clear_error():
    with pytest.raises(ArgumentError,
                       match="unknown split point 'pooled'.*sequence_repr"):
        split_spec.get("pooled")
    with pytest.raises(exporter.ExportError,
                       match="^run/split.json: unknown split point None"):
        split_spec.get(None, exporter.ExportError, "run/split.json")


def test_release_embedding_table(splits, tiny_backbone):
    table = models.token_embedding_table(tiny_backbone)
    assert models.release_embedding_table(
        splits[split_spec.SEQUENCE].user) is None
    for name in (split_spec.TOKEN, split_spec.TEXT_TO_TEXT):
        np.testing.assert_array_equal(
            models.release_embedding_table(splits[name].user), table)
    user = splits[split_spec.TOKEN].user
    assert user.get_layer(split_lib.TOKEN_EMBEDDING) is \
        tiny_backbone.token_embedding


def test_renamed_privatizer_is_refused(tiny_backbone):
    with pytest.raises(ArgumentError, match="named 'my_noise'"):
        models.sequence_representation_split(
            tiny_backbone, 2, [layers.MinMaxNormalize(),
                               layers.LaplaceNoise(1.0, name="my_noise")])
    x = keras.Input((4, 8))
    renamed = keras.Model(x, layers.DChiNoise(5.0, name="noise")(x))
    with pytest.raises(ArgumentError, match="'privatizer'"):
        layers_base.privatization_layers(renamed)
    kept = keras.Model(x, layers.DChiNoise(5.0)(x))
    assert layers_base.privatization_layers(kept)[1].name == "privatizer"


def test_report_states_the_specs_release():
    from tfdptext.evaluation import report

    for name, spec in split_spec.SPLITS.items():
        assert report._release_text({"split_point": name,
                                     "mechanism": "dchi"}) == spec.describe()
    assert report._release_text({"split_point": split_spec.SEQUENCE,
                                 "mechanism": "none"}) == (
        "one vector per text (the pooled encoder output, NOT privatized)")
