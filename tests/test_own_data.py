"""Your own data end to end: tfdptext-train --dataset=tsv --train_file=...
with word labels, export, and a prediction that names the label."""

import json
import os
import random
import subprocess
import sys

import pytest

from tfdptext import data
from tfdptext import training
from tfdptext.data import local_files
import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train", "tfdptext-train")
NAMES = ["Business", "Sports", "World"]
WORDS = {"Business": ("stock", "market", "profit", "bank", "shares"),
         "Sports": ("match", "goal", "team", "coach", "league"),
         "World": ("election", "treaty", "president", "border", "summit")}


def _tsv(path, n, seed, extra=""):
    rng = random.Random(seed)
    lines = ["text\tlabel"]
    for i in range(n):
        label = rng.choice(NAMES)
        words = " ".join(rng.choice(WORDS[label]) for _ in range(5))
        lines.append(f"{words} story {i}\t{label}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n" + extra)
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("own")
    return {"base": base,
            "train": _tsv(base / "train.tsv", 200, 0),
            "test": _tsv(base / "test.tsv", 40, 1)}


@pytest.fixture(scope="module")
def preset(tiny_preset):
    return tiny_preset


@pytest.fixture(scope="module")
def run(files, preset):
    """tfdptext-train with the file flags, as a user types it."""
    out = str(files["base"] / "runs" / "mine")
    result = zygote.run(
        [sys.executable, TRAIN, "--mode=robust", "--epsilon=1",
         "--dataset=tsv", f"--train_file={files['train']}",
         f"--test_file={files['test']}", "--text_column=text",
         "--label_column=label", f"--preset={preset}", "--max_length=16",
         "--batch_size=32", "--epochs=1", "--learning_rate=3e-3",
         f"--output_dir={out}"],
        capture_output=True, text=True, timeout=600, cwd=str(files["base"]))
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_string_labels_map_sorted_names(files):
    ds = data.load_dataset("tsv", train_file=files["train"],
                           test_file=files["test"])
    assert ds.label_names == NAMES and ds.num_classes == 3
    assert set(ds.splits["test"].labels.tolist()) <= {0, 1, 2}


def test_integer_labels_keep_index_names(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("text,label\n" + "".join(
        f"text {i},{i % 3}\n" for i in range(30)))
    ds = data.load_dataset("csv", train_file=str(path), test_file=str(path))
    assert ds.label_names == ["0", "1", "2"]


def test_mixed_integer_and_word_labels_refused(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("text,label\n" + "".join(
        f"text {i},{i % 2}\n" for i in range(20)) + "typo,1.5\n")
    with pytest.raises(data.DataError,
                       match=r"f\.csv:22: label '1\.5' is not an integer"):
        data.load_dataset("csv", train_file=str(path), test_file=str(path))


def test_known_label_names():
    assert data.load_synthetic(num_examples=50).label_names == [
        "negative", "positive"]


def test_unknown_test_label_names_file_and_line(files, tmp_path):
    bad = _tsv(tmp_path / "bad.tsv", 5, 2, "a text\tWeather\n")
    with pytest.raises(data.DataError,
                       match=r"bad\.tsv:7: label 'Weather' is not among"):
        data.load_dataset("tsv", train_file=files["train"], test_file=bad)
    with pytest.raises(data.DataError, match=r"bad\.tsv:7: .*'Weather'"):
        local_files.load_files(files["train"], files["test"], dev_file=bad,
                               file_format="tsv")


def test_no_header_columns_by_index(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("".join(f"{['Sports', 'World'][i % 2]},text {i}\n"
                            for i in range(30)))
    config = training.TrainConfig(
        mode="none", dataset="csv", train_file=str(path),
        test_file=str(path), text_column="1", label_column="0",
        no_header=True).validate()
    ds = data.load_dataset(config.dataset, **config.dataset_options())
    assert ds.label_names == ["Sports", "World"]
    assert ds.splits["test"].texts[0] == "text 0"


@pytest.mark.parametrize("kwargs,message", [
    (dict(dataset="sst2", train_file="a.tsv"), "applies to your own files"),
    (dict(dataset="synthetic", private_columns=["x"]),
     "applies to your own files"),
    (dict(dataset="synthetic", text_column="t"), "applies to your own files"),
    (dict(dataset="jsonl", train_file="a", test_file="b", no_header=True),
     "not jsonl"),
    (dict(dataset="tsv", train_file="a.tsv"), "go together"),
    (dict(dataset="tsv"), "needs `train_file`"),
    (dict(dataset="csv", train_file="a", test_file="b", no_header=True,
          text_column="text"), "given by index"),
])
def test_file_options_refused_where_meaningless(kwargs, message):
    with pytest.raises(ValueError, match=message):
        training.TrainConfig(mode="none", **kwargs).validate()


def test_program_refuses_file_flags_with_named_dataset(tmp_path):
    result = subprocess.run(
        [sys.executable, TRAIN, "--mode=none", "--dataset=synthetic",
         "--train_file=x.tsv", f"--output_dir={tmp_path / 'x'}"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "applies to your own files" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_records_dataset_and_label_names(run, files):
    config = json.load(open(os.path.join(run, "config.json")))
    assert config["train_file"] == os.path.abspath(files["train"])
    assert config["test_file"] == os.path.abspath(files["test"])
    assert config["label_column"] == "label"
    for name in ("metrics.json", "split.json"):
        assert json.load(open(os.path.join(run, name)))["label_names"] == \
            NAMES
    # The recorded config alone reloads the same data.
    reloaded = training.TrainConfig.from_dict(config).validate()
    from tfdptext.training import trainer

    assert trainer.load_config_dataset(reloaded).label_names == NAMES


def test_export_and_predict_label_name(run, files):
    from tfdptext.export import exporter
    from tfdptext.export.local import ExportedPipeline

    out = str(files["base"] / "exports" / "mine")
    manifest = exporter.export_run(run, out, quantization="float32")
    assert manifest["label_names"] == NAMES
    assert "label_name" in manifest["server"]["outputs"]
    answer = ExportedPipeline(out).predict(["stock market profit bank",
                                            "goal team coach"])
    assert answer["label_name"].shape == (2,)
    for i, name in enumerate(answer["label_name"]):
        assert name in NAMES
        assert name == NAMES[int(answer["label"][i])]
