"""Training texts that users send, released once (--training_release):
draws per text counted across epochs, the recorded release (real tokens
only, read back on resume, refused when it does not fit), the guarantee of
the training data, and the config rules. Tiny backbone, synthetic corpus."""

import collections
import contextlib
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tfdptext import data
from tfdptext import models
from tfdptext import rundir
from tfdptext import training
from tfdptext.errors import ArgumentError
from tfdptext.errors import TfdptextError
from tfdptext.layers import token_privatizer
from tfdptext.models import split_spec
from tfdptext.training import builder
from tfdptext.training import label_privacy
from tfdptext.training import user_release

import eager_training

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
def test_privatizer_draws_per_text_across_epochs(tiny_preset, tmp_path,
                                                 monkeypatch, release):
    draws = _count_draws(monkeypatch)
    # Half the module's corpus (80 training texts, 3 steps an epoch): the
    # counts are exact per text at any size, and the release's draws and
    # the steps cost in proportion.
    corpus = data.load_synthetic(num_examples=100)
    # Released once, fit trains the server alone on the release (no
    # privatizer in it): its six steps run eagerly (tests/eager_training.
    # py). per_epoch privatizes inside fit's traced graph, as the product
    # runs it.
    fit = (eager_training.eager_fit() if release == "once"
           else contextlib.nullcontext())
    with fit:
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
    # Its digest is no longer the one recorded when it was drawn.
    with pytest.raises(ValueError, match="recorded when it was drawn"):
        run.read_training_release()


@pytest.fixture(scope="module")
def drawn(tiny_preset, corpus, tmp_path_factory):
    """A text_to_text run directory whose release (and randomized labels)
    were drawn, with what `released_inputs` needs to read it again."""
    config = _config(tiny_preset, mode="text_to_text", eta=50.0,
                     label_epsilon=1.0, max_train_examples=40,
                     max_dev_examples=10).validate()
    tokenizer = models.load_tokenizer(config.preset, config.max_length)
    split = builder.build_split(config, models.load_backbone(config.preset),
                                tokenizer, corpus.num_classes)
    path = str(tmp_path_factory.mktemp("drawn") / "run")
    run = rundir.RunDir(path, ValueError)
    released, record = user_release.released_inputs(
        run, config, split, tokenizer, corpus, ValueError, log=None)
    label_privacy.randomized_labels(run, config, corpus, ValueError)
    assert record["sha256"] == run.recorded_draw(rundir.TRAINING_RELEASE)
    assert record["run_id"] == run.run_id() and len(run.run_id()) == 32
    return dict(config=config, tokenizer=tokenizer, split=split, path=path,
                released=released)


def _copy_run(drawn, tmp_path, name="copy"):
    target = str(tmp_path / name)
    shutil.copytree(drawn["path"], target)
    return rundir.RunDir(target, ValueError)


def _read(drawn, run, corpus):
    return user_release.released_inputs(
        run, drawn["config"], drawn["split"], drawn["tokenizer"], corpus,
        ValueError, log=None)


def _rewrite(run, change):
    """Rewrites the run's release through `change(meta, splits)` as if
    it had been drawn so (its digest recorded): what the content checks
    alone must refuse."""
    meta, splits = run.read_training_release()
    splits = {n: (np.array(v), np.array(l)) for n, (v, l) in splits.items()}
    change(meta, splits)
    run.write_training_release(
        {k: v for k, v in meta.items() if k not in ("format", "splits")},
        splits)


def _shift_lengths(meta, splits):
    values, lengths = splits["train"]
    lengths[0] += 1
    lengths[1] -= 1  # the same total


def _float_ids(meta, splits):
    values, lengths = splits["train"]
    splits["train"] = (values.astype(np.float32), lengths)


def _out_of_vocabulary(meta, splits):
    values, lengths = splits["train"]
    values[3] = 10**6


@pytest.mark.parametrize("change, message", [
    (_shift_lengths, r"lengths that are not its texts' real token counts "
                     r"\(text 0"),
    (_float_ids, r"float32 values .* token ids are 1-D integers"),
    (_out_of_vocabulary, r"outside the vocabulary \[0, 30522\)"),
])
def test_release_contents_are_validated_on_read(drawn, corpus, tmp_path,
                                                 change, message):
    run = _copy_run(drawn, tmp_path)
    _rewrite(run, change)
    with pytest.raises(ValueError, match=message) as err:
        _read(drawn, run, corpus)
    assert run.file(rundir.TRAINING_RELEASE) in str(err.value)


def test_a_release_of_another_run_or_edited_is_refused(drawn, corpus,
                                                       tmp_path):
    ours = _copy_run(drawn, tmp_path, "ours")
    released, record = _read(drawn, ours, corpus)  # the copy reads back
    assert not record["drawn_this_session"]
    # Another run of the same config draws its own release...
    other = rundir.RunDir(str(tmp_path / "other"), ValueError)
    _read(drawn, other, corpus)
    assert other.run_id() != ours.run_id()
    theirs = other.file(rundir.TRAINING_RELEASE)
    # ... which is refused here by its digest,
    shutil.copy(theirs, ours.file(rundir.TRAINING_RELEASE))
    with pytest.raises(ValueError, match="not the .* recorded when it was "
                       "drawn") as err:
        _read(drawn, ours, corpus)
    assert ours.file(rundir.TRAINING_RELEASE) in str(err.value)
    # ... and by its run id when the record is edited to match it.
    record = ours.run_record()
    record["draws"][rundir.TRAINING_RELEASE] = \
        other.recorded_draw(rundir.TRAINING_RELEASE)
    ours.write(rundir.RUN_RECORD, record)
    with pytest.raises(ValueError, match=f"drawn by run '{other.run_id()}'"):
        _read(drawn, ours, corpus)
    # The labels likewise.
    shutil.copy(other.file(rundir.TRAINING_RELEASE),
                ours.file(rundir.TRAINING_RELEASE))
    label_privacy.randomized_labels(other, drawn["config"], corpus,
                                    ValueError)
    shutil.copy(other.file(rundir.RANDOMIZED_LABELS),
                ours.file(rundir.RANDOMIZED_LABELS))
    with pytest.raises(ValueError, match="randomized_labels.json has "
                       "SHA-256"):
        label_privacy.randomized_labels(ours, drawn["config"], corpus,
                                        ValueError)


@pytest.mark.parametrize("name", [rundir.TRAINING_RELEASE,
                                  rundir.RANDOMIZED_LABELS])
@pytest.mark.parametrize("why", ["progress", "recorded"])
def test_a_missing_draw_is_never_drawn_again(drawn, corpus, tmp_path, name,
                                             why):
    run = _copy_run(drawn, tmp_path)
    os.remove(run.file(name))
    if why == "progress":  # an epoch's checkpoint, no record of the draw
        record = run.run_record()
        record["draws"] = {}
        run.write(rundir.RUN_RECORD, record)
        run.write(rundir.BEST_RECORD, {"val_loss": 1.0})
    before = sorted(os.listdir(run.path))
    with pytest.raises(ValueError, match=(
            f"{re.escape(run.file(name))} is missing, and .* never drawn "
            "again.* new --output_dir")):
        if name == rundir.TRAINING_RELEASE:
            _read(drawn, run, corpus)
        else:
            label_privacy.randomized_labels(run, drawn["config"], corpus,
                                            ValueError)
    assert sorted(os.listdir(run.path)) == before  # nothing drawn


def test_a_resumed_run_without_its_release_refuses(drawn, corpus,
                                                   tmp_path):
    """The trainer's path: a run with an epoch's progress (best.json)
    whose training_release.npz is gone refuses to resume, naming it."""
    run = _copy_run(drawn, tmp_path)
    run.write_text(rundir.CONFIG, drawn["config"].to_json())
    run.write(rundir.BEST_RECORD, {"val_loss": 1.0})
    os.remove(run.file(rundir.TRAINING_RELEASE))
    with pytest.raises(TfdptextError, match=re.escape(
            f"{run.file(rundir.TRAINING_RELEASE)} is missing")):
        training.train(drawn["config"], run.path, dataset=corpus, verbose=0)
    assert not run.exists(rundir.TRAINING_RELEASE)


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
