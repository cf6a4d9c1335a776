"""Datasets: local formats, synthetic corpus, TFDS errors, tokenization."""

import json
import os

import numpy as np
import pytest

from tfdptext import data


def test_synthetic_is_deterministic_and_leaky():
    a = data.load_synthetic(num_examples=400, seed=1)
    b = data.load_synthetic(num_examples=400, seed=1)
    assert a.splits["train"].texts == b.splits["train"].texts
    assert a.sizes() == {"train": 320, "dev": 40, "test": 40}
    assert a.num_classes == 2 and a.private_attributes == {"gender": 2,
                                                           "age": 2}
    train = a.splits["train"]
    # Gender leaks through names and pronouns.
    female = np.array([any(w in t.split() for w in ("she", "her", "mary",
                                                     "linda", "susan", "sarah",
                                                     "karen", "lisa", "nancy"))
                       for t in train.texts])
    assert (female == (train.private["gender"] == 1)).mean() > 0.95
    assert "SYNTHETIC" in a.description


def test_tf_dataset_structure_with_and_without_private():
    ds = data.load_synthetic(num_examples=50).tf_dataset("dev")
    first = next(iter(ds))
    assert set(first) == {"text", "label", "private"}
    assert set(first["private"]) == {"gender", "age"}
    examples = data.Examples(["a b", "c d"], [0, 1], {})
    plain = data.TextDataset("x", {s: examples for s in data.SPLITS}, 2, {})
    assert len(list(plain.tf_dataset("train"))) == 2


def _write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)
    return str(path)


def test_csv_with_named_columns(tmp_path):
    train = _write(tmp_path / "train.csv",
                   'text,label,gender\n"hello, world",1,0\nbye,0,1\n'
                   "more,1,1\nagain,0,0\nfine,1,0\nok,0,1\nyes,1,1\n"
                   "no,0,0\nmaybe,1,0\nnever,0,1\n")
    test = _write(tmp_path / "test.csv", "text,label,gender\nx,1,0\ny,0,1\n")
    ds = data.load_dataset("csv", train_file=train, test_file=test,
                           private_columns=["gender"], num_classes=2)
    assert ds.sizes() == {"train": 9, "dev": 1, "test": 2}
    assert "hello, world" in ds.splits["train"].texts + ds.splits["dev"].texts
    assert ds.private_attributes == {"gender": 2}


def test_jsonl(tmp_path):
    lines = [json.dumps({"t": f"text {i}", "y": i % 3, "age": i % 2})
             for i in range(20)]
    train = _write(tmp_path / "a.jsonl", "\n".join(lines))
    ds = data.load_dataset("jsonl", train_file=train, test_file=train,
                           text_column="t", label_column="y",
                           private_columns=["age"])
    assert ds.num_classes == 3 and ds.sizes()["test"] == 20


@pytest.mark.parametrize("content,message", [
    ("text,label\nfine,1\n,0\n", r"f\.csv:3: empty text"),
    ("text,label\nfine,1\nbad,7\n", r"f\.csv:3: label '7' is out of range"),
    ("text,label\nfine,x\n", r"f\.csv:2: label 'x' is not an integer"),
    ("words,label\nfine,1\n", r"no column 'text'"),
    ("text,label\nfine\n", r"f\.csv:2: 1 columns"),
])
def test_csv_errors_name_file_and_line(tmp_path, content, message):
    path = _write(tmp_path / "f.csv", content)
    with pytest.raises(data.DataError, match=message):
        data.load_dataset("csv", train_file=path, test_file=path,
                          num_classes=2)


def test_undecodable_bytes_and_missing_file(tmp_path):
    path = _write(tmp_path / "bad.tsv", b"sentence\tlabel\nok\t1\n\xff\xfe\t0\n",
                  mode="wb")
    with pytest.raises(data.DataError, match=r"bad\.tsv:3: bytes that are "
                       "not UTF-8"):
        data.load_dataset("tsv", train_file=path, test_file=path,
                          text_column="sentence")
    with pytest.raises(data.DataError, match="no such file"):
        data.load_sst2(str(tmp_path))
    with pytest.raises(data.DataError, match="needs --data_dir"):
        data.load_dataset("sst2")


def test_ag_format_errors(tmp_path):
    sep = "=" * 20
    good = "1\tsome text\t0 3\n"
    path = _write(tmp_path / "ag.txt", f"{good}{sep}\n{good}{sep}\n"
                  f"5\tbad label\t\n{sep}\n")
    with pytest.raises(data.DataError, match=r"ag\.txt:5: label '5'"):
        data.load_ag_dpnr(path)
    path = _write(tmp_path / "ag2.txt", f"{good}{sep}\n{good}")
    with pytest.raises(data.DataError, match="expected 3 splits"):
        data.load_ag_dpnr(path)
    path = _write(tmp_path / "ag3.txt", f"{good}{sep}\n{good}{sep}\n{good}")
    ds = data.load_ag_dpnr(path)
    assert ds.splits["test"].private["entity_3"].tolist() == [1]
    assert ds.splits["test"].private["entity_1"].tolist() == [0]


def test_tfds_unavailable_gives_clear_error(tmp_path):
    with pytest.raises(data.DataError) as err:
        data.load_dataset("imdb_reviews", data_dir=str(tmp_path),
                          download=False)
    assert "imdb_reviews" in str(err.value)
    assert "--data_dir" in str(err.value)
    with pytest.raises(data.DataError, match="text and label feature"):
        data.load_dataset("some_unknown_dataset", data_dir=str(tmp_path))


def test_shared_ag_dpnr(shared_data):
    ds = data.load_dataset("ag_dpnr",
                           data_dir=os.path.join(shared_data, "ag_dpnr"))
    assert ds.sizes() == {"train": 11657, "dev": 1457, "test": 1457}
    assert ds.num_classes == 4 and len(ds.private_attributes) == 5
    presence = np.stack(list(ds.splits["train"].private.values()), axis=1)
    assert presence.any(axis=1).mean() > 0.9  # DPNR kept entity examples


def test_shared_sst2(shared_data):
    ds = data.load_dataset("sst2", data_dir=os.path.join(shared_data, "sst2"))
    assert ds.sizes() == {"train": 60614, "dev": 6735, "test": 872}


def test_shared_trustpilot_split(shared_data):
    path = os.path.join(shared_data, "trustpilot")
    a = data.load_dataset("trustpilot", data_dir=path)
    b = data.load_dataset("trustpilot", data_dir=path)
    assert sum(a.sizes().values()) == 4066
    assert a.sizes() == {"train": 3253, "dev": 407, "test": 406}
    assert a.splits["test"].texts == b.splits["test"].texts
    assert set(np.unique(a.splits["train"].labels)) == set(range(5))
    us = data.load_dataset("trustpilot", data_dir=path,
                           country="united_states")
    assert sum(us.sizes().values()) < 4066


def test_tokenizer_uncased_accents_truncation(tokenizer):
    f = tokenizer(["Café NAÏVE", "cafe naive", "word " * 40])
    ids = f["token_ids"].numpy()
    np.testing.assert_array_equal(ids[0], ids[1])
    assert tokenizer.unk_id not in ids[0]
    assert ids.shape == (3, 16)
    assert ids[2, 0] == tokenizer.cls_id and ids[2, -1] == tokenizer.sep_id
    assert f["padding_mask"].numpy()[0].sum() == 2 + 2  # cafe naive
    assert tokenizer.decode(ids[0]) == "cafe naive"
    special = tokenizer.special_token_ids
    assert {0, 100, 101, 102, 103} <= set(special) and len(special) > 900


def test_encode_dataset(tokenizer):
    ds = data.load_synthetic(num_examples=50)
    batches = tokenizer.encode_dataset(ds.tf_dataset("train"), batch_size=8)
    features, labels, private = next(iter(batches))
    assert features["token_ids"].shape == (8, 16)
    assert labels.shape == (8,) and private["gender"].shape == (8,)
