"""Training batches: texts tokenized once, batches padded to their longest
text, equal to the tokenizer's fixed-length rows cut by trim_padding."""

import numpy as np
import tensorflow as tf

from tfdptext import data
from tfdptext.data import examples as examples_lib
from tfdptext.data import tokenization
from tfdptext.training import pipeline

# [PAD] is not id 0 here: padding must use the tokenizer's pad id.
VOCABULARY = ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "good", "bad",
              "food", "very", "service", "the", "was", "##s"]


def _dataset(texts, labels, private):
    split = examples_lib.Examples(texts, labels, private)
    return examples_lib.TextDataset("t", {"train": split, "dev": split,
                                          "test": split}, 3, {"age": 2})


def _fixed_length(tokenizer, dataset, batch_size, shuffle=False, seed=0,
                  max_examples=None):
    """The batches as tokenized per batch at the tokenizer's full length,
    then cut (the pipeline before texts were tokenized once)."""
    ds = dataset.tf_dataset("train")
    if max_examples:
        ds = ds.take(max_examples)
    if shuffle:
        ds = ds.shuffle(10000, seed=seed, reshuffle_each_iteration=True)
    return tokenizer.encode_dataset(ds, batch_size).map(
        lambda f, y, p: (pipeline.trim_padding(f), y, p["age"]))


def _assert_same(expected, got):
    expected, got = list(expected), list(got)
    assert len(expected) == len(got)
    for (features, label, age), (new_features, targets, weights) in zip(
            expected, got):
        assert set(new_features) == set(features)
        for name, value in features.items():
            assert new_features[name].dtype == value.dtype, name
            np.testing.assert_array_equal(new_features[name], value, name)
        np.testing.assert_array_equal(targets["label"], label)
        np.testing.assert_array_equal(targets["adv_age"], age)
        np.testing.assert_allclose(weights["label"],
                                   np.array([0.5, 1.0, 2.0])[label.numpy()])


def test_batches_equal_fixed_length_rows_cut_to_the_longest():
    tokenizer = tokenization.TextTokenizer(VOCABULARY, max_length=6)
    assert tokenizer.pad_id == 4
    rng = np.random.default_rng(0)
    words = ["good", "bad", "food", "very", "service", "goods", "xyz", ""]
    texts = [" ".join(rng.choice(words, rng.integers(0, 9)))
             for _ in range(37)]  # empty texts and texts cut at 6 ids
    dataset = _dataset(texts, rng.integers(0, 3, 37), {
        "age": rng.integers(0, 2, 37)})
    weights = np.array([0.5, 1.0, 2.0], np.float32)
    for kwargs in (dict(batch_size=8), dict(batch_size=5, max_examples=23),
                   dict(batch_size=8, shuffle=True, seed=3)):
        got = pipeline.batches(tokenizer, dataset, "train",
                               adv_attributes=["age"],
                               class_weights=weights, **kwargs)
        expected = _fixed_length(tokenizer, dataset, **kwargs)
        # Every epoch: the shuffled order changes as it did.
        for _ in range(2):
            _assert_same(expected, got)
    lengths = pipeline.token_rows(tokenizer, ["", "good food", "very " * 9])
    np.testing.assert_array_equal(lengths.row_lengths(), [2, 4, 6])
    assert pipeline.token_rows(tokenizer, []).shape[0] == 0


def test_rows_are_tokenized_once_in_chunks(monkeypatch):
    monkeypatch.setattr(pipeline, "_CHUNK", 7)
    corpus = data.load_synthetic(num_examples=60)
    tokenizer = tokenization.TextTokenizer(
        tokenization.read_vocabulary(_minilm_vocabulary()), max_length=12)
    texts = corpus.splits["train"].texts
    rows = pipeline.token_rows(tokenizer, texts)
    packed = tokenizer(texts)
    mask = packed["padding_mask"].numpy().astype(bool)
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(row, packed["token_ids"].numpy()[i][
            mask[i]])
    # The dataset holds ids, not the tokenizer's graph: no string op runs
    # when an epoch starts.
    ds = pipeline.batches(tokenizer, corpus, "train", batch_size=16)
    graph = ds._as_serialized_graph().numpy()
    assert b"WordpieceTokenize" not in graph and b"RegexReplace" not in \
        graph
    assert sum(int(tf.shape(f["token_ids"])[0]) for f, _ in ds) == len(texts)


def _minilm_vocabulary():
    import os

    from tfdptext import models

    return os.path.join(models.minilm_directory(), "vocab.txt")
