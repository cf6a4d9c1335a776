"""In-memory labelled text with private attributes, split three ways."""

import dataclasses

import numpy as np

from tfdptext.errors import TfdptextError

SPLITS = ("train", "dev", "test")


class DataError(TfdptextError):
    """A data file or dataset cannot be used; the message names where."""


@dataclasses.dataclass
class Examples:
    """Texts with a task label and private attributes (one split)."""

    texts: list
    labels: np.ndarray
    private: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self.labels = np.asarray(self.labels, dtype=np.int32)
        self.private = {k: np.asarray(v, dtype=np.int32)
                        for k, v in self.private.items()}
        n = len(self.texts)
        if self.labels.shape != (n,):
            raise DataError(f"{n} texts but labels of shape "
                            f"{self.labels.shape}.")
        for name, values in self.private.items():
            if values.shape != (n,):
                raise DataError(f"{n} texts but private attribute {name!r} "
                                f"has shape {values.shape}.")

    def __len__(self):
        return len(self.texts)

    def subset(self, indices):
        indices = np.asarray(indices, dtype=np.int64)
        return Examples(
            [self.texts[i] for i in indices],
            self.labels[indices],
            {k: v[indices] for k, v in self.private.items()},
        )

    @classmethod
    def concatenate(cls, parts):
        parts = list(parts)
        names = set(parts[0].private)
        if any(set(p.private) != names for p in parts):
            raise DataError("Parts have different private attributes.")
        return cls(
            [t for p in parts for t in p.texts],
            np.concatenate([p.labels for p in parts]),
            {k: np.concatenate([p.private[k] for p in parts]) for k in names},
        )


def split_indices(n, fractions, seed):
    """A fixed-seed permutation of range(n) cut at the given fractions."""
    order = np.random.default_rng(seed).permutation(n)
    bounds = np.cumsum([int(round(f * n)) for f in fractions[:-1]])
    return np.split(order, bounds)


@dataclasses.dataclass
class TextDataset:
    """A dataset with train/dev/test splits, as every program consumes it.

    Attributes:
        name: the dataset's name.
        splits: {"train", "dev", "test"} -> Examples.
        num_classes: number of task labels (labels are 0..num_classes - 1).
        private_attributes: attribute name -> number of its classes.
        description: one line on where the data comes from.
        label_names: the name of each label 0..num_classes - 1 (strings;
            default: "0", "1", ...).
    """

    name: str
    splits: dict
    num_classes: int
    private_attributes: dict
    description: str = ""
    label_names: list | None = None

    def __post_init__(self):
        if self.label_names is None:
            self.label_names = [str(i) for i in range(self.num_classes)]
        self.label_names = [str(n) for n in self.label_names]
        if len(self.label_names) != self.num_classes:
            raise DataError(
                f"Dataset {self.name!r}: {len(self.label_names)} label names "
                f"for {self.num_classes} classes.")
        if len(set(self.label_names)) != len(self.label_names):
            raise DataError(f"Dataset {self.name!r}: label names repeat: "
                            f"{self.label_names}.")
        missing = [s for s in SPLITS if s not in self.splits]
        if missing:
            raise DataError(f"Dataset {self.name!r} lacks splits {missing}.")
        for split, examples in self.splits.items():
            if len(examples) == 0:
                raise DataError(f"Dataset {self.name!r}: split {split!r} "
                                "is empty.")
            if set(examples.private) != set(self.private_attributes):
                raise DataError(
                    f"Dataset {self.name!r}: split {split!r} has private "
                    f"attributes {sorted(examples.private)}, expected "
                    f"{sorted(self.private_attributes)}.")

    def sizes(self):
        return {split: len(self.splits[split]) for split in SPLITS}

    def require_private(self, names):
        """Raises DataError unless every name is a private attribute."""
        missing = [n for n in names if n not in self.private_attributes]
        if missing:
            raise DataError(
                f"Dataset {self.name!r} has no private attribute(s) "
                f"{missing}; it has {sorted(self.private_attributes) or 'none'}"
                ".")

    def tf_dataset(self, split):
        """A tf.data.Dataset of {"text", "label", "private": {...}}."""
        import tensorflow as tf

        if split not in SPLITS:
            raise ValueError(f"`split` must be one of {SPLITS}, got {split!r}.")
        ex = self.splits[split]
        return tf.data.Dataset.from_tensor_slices({
            "text": tf.constant(ex.texts, dtype=tf.string),
            "label": ex.labels,
            "private": dict(ex.private),
        })
