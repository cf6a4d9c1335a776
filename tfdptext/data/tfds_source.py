"""Datasets from TensorFlow Datasets (downloaded, or read from data_dir)."""

import numpy as np

from tfdptext.data.examples import DataError
from tfdptext.data.examples import Examples
from tfdptext.data.examples import TextDataset
from tfdptext.data.examples import split_indices

# name -> (text feature, label feature, number of classes, split names for
# train / dev / test; None = cut 10% of train for dev).
KNOWN = {
    "glue/sst2": ("sentence", "label", 2, ("train", None, "validation")),
    "ag_news_subset": ("description", "label", 4, ("train", None, "test")),
    "imdb_reviews": ("text", "label", 2, ("train", None, "test")),
    "yelp_polarity_reviews": ("text", "label", 2, ("train", None, "test")),
}


def _to_examples(tf_split, text_key, label_key):
    texts, labels = [], []
    for record in tf_split.as_numpy_iterator():
        text = record[text_key]
        texts.append(text.decode("utf-8") if isinstance(text, bytes)
                     else str(text))
        labels.append(int(record[label_key]))
    return Examples(texts, np.asarray(labels), {})


def load_tfds(name, data_dir=None, download=True, text_key=None,
              label_key=None, seed=0):
    """Loads a TFDS text-classification dataset as a TextDataset.

    Known names (see KNOWN) need no keys; others need `text_key` and
    `label_key`. Raises DataError naming the dataset and `--data_dir` when
    the dataset can be neither found nor downloaded.
    """
    import tensorflow_datasets as tfds

    known = KNOWN.get(name)
    if known is None and (text_key is None or label_key is None):
        raise DataError(
            f"TFDS dataset {name!r} is not one of {sorted(KNOWN)}: pass "
            "its text and label feature names (--text_column, "
            "--label_column).")
    text_key = text_key or known[0]
    label_key = label_key or known[1]
    split_names = known[3] if known else ("train", None, "test")
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        if download:
            builder.download_and_prepare()
        loaded = {s: builder.as_dataset(split=s) for s in split_names if s}
    except ImportError as err:  # a builder's own dependency, not the network
        raise DataError(
            f"TFDS's builder for {name!r} needs the Python package "
            f"{err.name or str(err)!r}, which is not installed (pip install "
            "it); this is not a network problem.") from err
    except Exception as err:  # tfds raises many types (network, not found).
        raise DataError(
            f"Could not load TFDS dataset {name!r} from data_dir="
            f"{data_dir or '(default ~/tensorflow_datasets)'}"
            f"{'' if download else ' without downloading'}: "
            f"{type(err).__name__}: {str(err).splitlines()[0][:300]}. "
            "Without internet access, prepare it elsewhere "
            f"(`tfds build {name} --data_dir=DIR`), copy DIR here and pass "
            "--data_dir=DIR.") from err
    train_name, dev_name, test_name = split_names
    train = _to_examples(loaded[train_name], text_key, label_key)
    test = _to_examples(loaded[test_name], text_key, label_key)
    if dev_name:
        dev = _to_examples(loaded[dev_name], text_key, label_key)
    else:
        dev_i, train_i = split_indices(len(train), [0.1, 0.9], seed)
        train, dev = train.subset(train_i), train.subset(dev_i)
    if (test.labels < 0).any():
        raise DataError(f"TFDS dataset {name!r}: split {test_name!r} has no "
                        "labels.")
    num_classes = known[2] if known else int(train.labels.max()) + 1
    return TextDataset(name, {"train": train, "dev": dev, "test": test},
                       num_classes, {}, f"TFDS {name}")
