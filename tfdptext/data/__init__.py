"""Data: labelled text with private attributes, and tokenization.

`load_dataset(name, data_dir=...)` is the one entry point:

- `"synthetic"`: the project's own SYNTHETIC corpus (always available).
- `"ag_dpnr"`, `"sst2"`, `"trustpilot"`: the local formats in shared/data.
- `"csv"`, `"tsv"`, `"jsonl"`: generic local files (`train_file`, ...).
- any other name: TensorFlow Datasets (`glue/sst2`, `ag_news_subset`, ...).
"""

import os

from tfdptext.data.examples import SPLITS
from tfdptext.data.examples import DataError
from tfdptext.data.examples import Examples
from tfdptext.data.examples import TextDataset
from tfdptext.data.local_files import load_ag_dpnr
from tfdptext.data.local_files import load_files
from tfdptext.data.local_files import load_sst2
from tfdptext.data.local_files import load_trustpilot
from tfdptext.data.synthetic import load_synthetic
from tfdptext.data.tfds_source import load_tfds
from tfdptext.data.tokenization import TextTokenizer

LOCAL = ("synthetic", "ag_dpnr", "sst2", "trustpilot", "csv", "tsv", "jsonl")
# The generic local-file formats (train_file, text_column, ... options).
FILE_FORMATS = ("csv", "tsv", "jsonl")


def load_dataset(name, data_dir=None, **options):
    """Loads a TextDataset by name (see the package docstring).

    Options are passed to the loader: `seed` and `country` (trustpilot),
    `num_examples` (synthetic), `train_file`, `dev_file`, `test_file`,
    `text_column`, `label_column`, `private_columns`, `has_header`,
    `num_classes` (files: labels are integers 0..K-1 or names, see
    `load_files`), `text_key`, `label_key`, `download` (TFDS).
    """
    def need_dir():
        if not data_dir:
            raise DataError(f"Dataset {name!r} needs --data_dir.")
        return data_dir

    if name == "synthetic":
        return load_synthetic(**options)
    if name == "ag_dpnr":
        return load_ag_dpnr(need_dir())
    if name == "sst2":
        return load_sst2(need_dir())
    if name == "trustpilot":
        return load_trustpilot(need_dir(), **options)
    if name in FILE_FORMATS:
        if data_dir and "train_file" not in options:
            # --data_dir=DIR holding train.<ext>, test.<ext> [, dev.<ext>].
            for split in ("train", "dev", "test"):
                path = os.path.join(data_dir, f"{split}.{name}")
                if os.path.isfile(path):
                    options.setdefault(f"{split}_file", path)
        if "train_file" not in options or "test_file" not in options:
            raise DataError(
                f"Dataset {name!r} needs a train and a test file: give "
                f"`train_file` and `test_file`, or a `data_dir` holding "
                f"train.{name} and test.{name} (and optionally dev.{name}).")
        return load_files(file_format=name, name=name, **options)
    return load_tfds(name, data_dir=data_dir, **options)


__all__ = [
    "DataError", "Examples", "FILE_FORMATS", "LOCAL", "SPLITS", "TextDataset",
    "TextTokenizer", "load_ag_dpnr", "load_dataset", "load_files",
    "load_sst2", "load_synthetic", "load_tfds", "load_trustpilot",
]
