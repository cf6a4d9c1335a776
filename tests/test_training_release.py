"""Training texts that users send, released once (--training_release):
draws per text counted across epochs, the recorded release (real tokens
only, read back on resume, refused when it does not fit), the guarantee of
the training data, and the config rules. Tiny backbone, synthetic corpus."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tfdptext import data
from tfdptext import models
from tfdptext import rundir
from tfdptext import training
from tfdptext.errors import ArgumentError
from tfdptext.layers import token_privatizer
from tfdptext.models import split_spec
from tfdptext.training import builder
from tfdptext.training import user_release

EPOCHS = 2


@pytest.fixture(scope="module")
def corpus():
    return data.load_synthetic(num_examples=200)


def _config(preset, **kwargs):
    defaults = dict(preset=preset, max_length=16, batch_size=32,
                    epochs=EPOCHS, learning_rate=3e-3)
    defaults.update(kwargs)
    return training.TrainConfig(**defaults)


def _count_draws(monkeypatch):
    """Counts every noisy pass of a token privatizer, per input text (its
    real token ids), in eager calls and inside fit's graphs alike."""
    draws = collections.Counter()
    original = token_privatizer.TokenPrivatizer.apply

    def record(ids):
        for row in ids:
            draws[tuple(int(t) for t in row if t != 0)] += 1
        return np.int32(0)

    def apply(self, inputs, uniforms=None):
        out = original(self, inputs, uniforms)
        if self._noisy(uniforms):  # not the secure model's clean pass
            done = tf.numpy_function(record, [tf.cast(inputs, tf.int32)],
                                     tf.int32)
            with tf.control_dependencies([done]):
                out = tf.identity(out)
        return out

    monkeypatch.setattr(token_privatizer.TokenPrivatizer, "apply", apply)
    return draws


def _texts(corpus, name):
    """Each text of a split as its real token ids (the counter's key)."""
    tokenizer = models.load_tokenizer(max_length=16)
    ids = tokenizer(list(corpus.splits[name].texts))["token_ids"].numpy()
    return collections.Counter(tuple(int(t) for t in row if t != 0)
                               for row in ids)


@pytest.mark.parametrize("release", ["once", "per_epoch"])
def test_privatizer_draws_per_text_across_epochs(tiny_preset, corpus,
                                                 tmp_path, monkeypatch,
                                                 release):
    draws = _count_draws(monkeypatch)
    metrics = training.train(
        _config(tiny_preset, mode="text_to_text", eta=1000.0,
                label_epsilon=1.0, training_release=release),
        str(tmp_path / release), dataset=corpus, verbose=0)
    train, dev, test = (_texts(corpus, n) for n in ("train", "dev", "test"))
    # The test split is measured with one fresh release per text.
    if release == "once":
        # One release per train and dev text, whatever the epochs.
        expected = train + dev + test
    else:
        # Again at every epoch (train), every validation and the final
        # measurement (dev).
        expected = collections.Counter()
        for key in set(train) | set(dev) | set(test):
            expected[key] = (EPOCHS * train[key] + (EPOCHS + 1) * dev[key]
                             + test[key])
    assert draws == expected
    record = metrics["training_release"]
    assert record["mode"] == release
    example = metrics["label_privacy"].get("example_guarantee")
    if release == "once":
        assert record["texts"] == {"train": len(corpus.splits["train"]),
                                   "dev": len(corpus.splits["dev"])}
        assert record["guarantee"]["randomness"] == "os_entropy"
        # The delta of the random-word sampler that drew the release, not
        # of TensorFlow's 23-bit uniforms (the split's own guarantee).
        assert record["guarantee"]["delta"] == \
            record["release_guarantee"]["delta"] < \
            metrics["guarantee"]["delta"]
        assert "released once" in record["guarantee"]["composition"]
        assert "training label" in example["composition"]
    else:
        assert record["guarantee"]["unit"] == "none"
        assert "per_epoch" in record["guarantee"]["conditions"][0]
        assert example is None
    labels = metrics["label_privacy"]
    assert "clean labels" in labels["changed_share_against"]
    assert 0.0 <= labels["dev_accuracy_randomized_labels"] <= 1.0


def test_release_keeps_real_tokens_and_is_read_back(tiny_preset, corpus,
                                                    tmp_path):
    """token_rep: one noisy embedding per real token, recorded once; a
    second start reads the same values; other inputs are refused."""
    config = _config(tiny_preset, mode="token_rep", eta=50.0,
                     max_train_examples=40, max_dev_examples=10).validate()
    tokenizer = models.load_tokenizer(config.preset, config.max_length)
    split = builder.build_split(config, models.load_backbone(config.preset),
                                tokenizer, corpus.num_classes)
    run = rundir.RunDir(str(tmp_path / "run"), ValueError)
    released, record = user_release.released_inputs(
        run, config, split, tokenizer, corpus, ValueError, log=None)
    mask = tokenizer(list(corpus.splits["train"].texts[:40]))[
        "padding_mask"].numpy()
    train = released["train"]
    np.testing.assert_array_equal(train.lengths, mask.sum(axis=1))
    assert train.values.shape == (mask.sum(), 16)  # real tokens x dim
    assert record["bytes"] == sum(r.values.nbytes + r.lengths.nbytes
                                  for r in released.values())
    assert record["drawn_this_session"]
    # The noise is there (not the clean embeddings) and fresh per token.
    assert np.unique(train.values[:, 0]).size == len(train.values)
    again, record = user_release.released_inputs(
        run, config, split, tokenizer, corpus, ValueError, log=None)
    assert not record["drawn_this_session"]
    np.testing.assert_array_equal(again["train"].values, train.values)
    # Server batches: padded to the batch's longest, mask from lengths.
    spec = split_spec.get(split.split_point)
    features, labels = next(iter(user_release.batches(
        train, spec, corpus.splits["train"].labels[:40], batch_size=8,
        pad_id=0)))
    width = int(train.lengths[:8].max())
    assert features["token_embeddings"].shape == (8, width, 16)
    np.testing.assert_array_equal(features["padding_mask"].numpy().sum(1),
                                  train.lengths[:8])
    np.testing.assert_array_equal(
        features["token_embeddings"][0, :train.lengths[0]],
        train.values[:train.lengths[0]])
    other = _config(tiny_preset, mode="token_rep", eta=50.0,
                    max_train_examples=30, max_dev_examples=10).validate()
    with pytest.raises(ValueError, match="never drawn again"):
        user_release.released_inputs(run, other, split, tokenizer, corpus,
                                     ValueError, log=None)


def test_damaged_release_file_is_refused(tmp_path):
    run = rundir.RunDir(str(tmp_path), ValueError)
    run.write_training_release(
        {"per_token": True},
        {"train": (np.zeros((5, 2), np.float32), np.array([2, 2]))})
    with pytest.raises(ValueError, match="damaged"):
        run.read_training_release()
    with open(run.file(rundir.TRAINING_RELEASE), "wb") as f:
        f.write(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match="not a readable training release"):
        run.read_training_release()


def test_training_release_config_rules():
    assert training.TrainConfig(mode="text_to_text", eta=50.0).validate(
    ).training_release == "once"
    assert training.TrainConfig(mode="seq_rep", eta=50.0,
                                training_release="per_epoch").validate(
    ).training_release == "per_epoch"
    assert training.TrainConfig(mode="robust", epsilon=1.0).validate(
    ).training_release is None
    with pytest.raises(ArgumentError, match="training_release"):
        training.TrainConfig(mode="robust", epsilon=1.0,
                             training_release="once").validate()
    with pytest.raises(ArgumentError, match="training_release"):
        training.TrainConfig(mode="token_rep", eta=50.0,
                             training_release="twice").validate()
    # A run written before the field privatized inside fit.
    old = training.TrainConfig(mode="token_rep", eta=50.0).validate(
    ).to_dict()
    del old["training_release"]
    assert training.TrainConfig.from_dict(old).training_release == \
        "per_epoch"
