"""The configuration of a training run, validated before anything starts."""

import dataclasses
import json
import os

from tfdptext.privacy import laplace
from tfdptext.privacy import metric
from tfdptext.privacy import validation

MODES = ("none", "robust", "token_rep", "text_to_text", "seq_rep", "adv")
MECHANISMS = ("none", "laplace", "dchi")
# Which mechanisms make sense for which mode.
ALLOWED = {
    "none": ("none",),
    "robust": ("laplace",),
    "seq_rep": ("laplace", "dchi"),
    "token_rep": ("dchi",),
    "text_to_text": ("dchi",),
    # Adversarial training (the ADV baseline of Lyu et al. 2020): the user
    # side releases the clean representation, as in mode none. Empirical
    # privacy only, never a DP guarantee.
    "adv": ("none",),
}
# Datasets read from the user's own files (--train_file, --text_column...).
FILE_FORMATS = ("csv", "tsv", "jsonl")
# Datasets whose files have a fixed layout (no file or column options).
FIXED_FORMATS = ("synthetic", "ag_dpnr", "sst2", "trustpilot")
FILE_FIELDS = ("train_file", "dev_file", "test_file", "private_columns",
               "no_header")
COLUMN_FIELDS = ("text_column", "label_column")

# Modes where the user side is frozen (Qu et al. privacy-constrained
# fine-tuning: the server cannot update what runs on the phone).
FROZEN_USER_SIDE = ("token_rep", "text_to_text", "seq_rep")


@dataclasses.dataclass
class TrainConfig:
    """Everything that defines a run; saved as config.json beside it.

    Fields left at None take the mode's defaults (see `validate`).

    Mode `adv` (adversarial training, the ADV baseline of DPNR) uses
    `adv_lambda`, the gradient-reversal weight (> 0, required), and
    `adv_attributes`, the private attributes with an attacker head each
    (None: all of the dataset's). Its user side adds no noise: the
    guarantee is "none" (empirical privacy only, no DP).

    Your own files (`dataset` csv, tsv or jsonl): `train_file`,
    `test_file`, optional `dev_file` (stored as absolute paths, so that the
    run can reload its data), `text_column`, `label_column` (names, or
    indices with `no_header`), `private_columns`, `no_header` (csv/tsv
    without a header line). `text_column` and `label_column` also name the
    features of a TFDS dataset.
    """

    mode: str = "robust"
    mechanism: str | None = None
    epsilon: float | None = None
    sensitivity: str = "per_coordinate"
    eta: float | None = None
    dropout_rate: float = 0.0
    dataset: str = "synthetic"
    data_dir: str | None = None
    preset: str = "minilm"
    max_length: int = 64
    batch_size: int | None = None  # None: 32 on CPU, 128 on a GPU
    epochs: int = 1
    learning_rate: float = 5e-5
    pooling: str = "mean"
    max_train_examples: int | None = None
    max_dev_examples: int | None = None
    seed: int = 0
    adv_lambda: float | None = None
    adv_attributes: tuple | list | None = None
    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    text_column: str | int | None = None
    label_column: str | int | None = None
    private_columns: tuple | list | None = None
    no_header: bool = False

    def validate(self):
        """Fills defaults and raises ValueError naming any bad field."""
        validation.check_choice("mode", self.mode, MODES)
        if self.mechanism is None:
            allowed = ALLOWED[self.mode]
            if self.epsilon is not None and "laplace" not in allowed:
                raise ValueError(
                    f"`epsilon` makes no sense with `mode={self.mode}`, "
                    f"which takes mechanism(s) {allowed}"
                    + (" with `eta`." if "dchi" in allowed else "."))
            if self.eta is not None and "dchi" not in allowed:
                raise ValueError(
                    f"`eta` makes no sense with `mode={self.mode}`, which "
                    f"takes mechanism(s) {allowed}.")
            if self.eta is not None and "dchi" in allowed:
                self.mechanism = "dchi"
            elif self.epsilon is not None and "laplace" in allowed:
                self.mechanism = "laplace"
            else:
                self.mechanism = allowed[0]
        validation.check_choice("mechanism", self.mechanism, MECHANISMS)
        if self.mechanism not in ALLOWED[self.mode]:
            raise ValueError(
                f"`mechanism={self.mechanism}` makes no sense with "
                f"`mode={self.mode}`; allowed: {ALLOWED[self.mode]}.")
        if self.mechanism == "laplace":
            if self.epsilon is None:
                raise ValueError("`epsilon` is required with mechanism "
                                 "laplace.")
            self.epsilon = validation.check_positive("epsilon", self.epsilon)
            laplace.laplace_scale(self.epsilon)  # finite float32 noise
            validation.check_choice("sensitivity", self.sensitivity,
                                    ("per_coordinate", "vector"))
        elif self.epsilon is not None:
            raise ValueError(f"`epsilon` is not used by mechanism "
                             f"{self.mechanism}; use `eta` for dchi.")
        if self.mechanism == "dchi":
            if self.eta is None:
                raise ValueError("`eta` is required with mechanism dchi.")
            self.eta = metric.check_float32_eta(self.eta)
        elif self.eta is not None:
            raise ValueError(f"`eta` is not used by mechanism "
                             f"{self.mechanism}.")
        self.dropout_rate = validation.check_rate("dropout_rate",
                                                  self.dropout_rate)
        if self.dropout_rate and self.mode not in ("robust", "seq_rep"):
            raise ValueError("`dropout_rate` > 0 (word dropout) applies to "
                             "modes robust and seq_rep only.")
        if self.dropout_rate and self.mechanism != "laplace":
            raise ValueError(
                "`dropout_rate` > 0 (word dropout) amplifies an epsilon-LDP "
                "release (mechanism laplace); with mechanism "
                f"{self.mechanism} there is no amplification theorem to "
                "state: set `dropout_rate` to 0 or use `epsilon`.")
        validation.check_int("max_length", self.max_length, 8)
        if self.batch_size is not None:
            validation.check_int("batch_size", self.batch_size, 1)
        validation.check_int("epochs", self.epochs, 1)
        validation.check_positive("learning_rate", self.learning_rate)
        validation.check_choice("pooling", self.pooling, ("mean", "cls"))
        for name in ("max_train_examples", "max_dev_examples"):
            if getattr(self, name) is not None:
                validation.check_int(name, getattr(self, name), 1)
        self._validate_adv()
        self._validate_data()
        return self

    def _validate_data(self):
        """The file and column options, against `dataset`."""
        if self.dataset not in FILE_FORMATS:
            for name in FILE_FIELDS + (
                    COLUMN_FIELDS if self.dataset in FIXED_FORMATS else ()):
                if getattr(self, name) not in (None, False):
                    raise ValueError(
                        f"`{name}` applies to your own files (`dataset` "
                        f"csv, tsv or jsonl) only, received "
                        f"{getattr(self, name)!r} with "
                        f"`dataset={self.dataset}`.")
            return
        if self.train_file is None and self.data_dir is None:
            raise ValueError(
                f"`dataset={self.dataset}` needs `train_file` and "
                f"`test_file` (or a `data_dir` holding train.{self.dataset} "
                f"and test.{self.dataset}).")
        if (self.train_file is None) != (self.test_file is None) or (
                self.dev_file is not None and self.train_file is None):
            raise ValueError(
                "`train_file` and `test_file` go together (and `dev_file` "
                f"with them), received train_file={self.train_file!r}, "
                f"dev_file={self.dev_file!r}, test_file={self.test_file!r}.")
        for name in ("train_file", "dev_file", "test_file"):
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise ValueError(f"`{name}` must be a file path, "
                                     f"received {value!r}.")
                setattr(self, name, os.path.abspath(value))
        self.no_header = bool(self.no_header)
        if self.no_header and self.dataset == "jsonl":
            raise ValueError("`no_header` applies to csv and tsv files, "
                             "not jsonl.")
        columns = self.private_columns
        if isinstance(columns, str):  # "gender,age"
            columns = [c.strip() for c in columns.split(",")]
        if columns is not None:
            if not isinstance(columns, (list, tuple)) or any(
                    c in ("", None) for c in columns):
                raise ValueError(
                    "`private_columns` must be a list of column names "
                    f"(indices with `no_header`), received {columns!r}.")
            columns = list(columns) or None
        if self.no_header:
            def index(name, value):
                if isinstance(value, int) and not isinstance(value, bool) \
                        and value >= 0:
                    return value
                if isinstance(value, str) and value.strip().isdigit():
                    return int(value)
                raise ValueError(
                    f"`{name}`: with `no_header` columns are given by index "
                    f"(0, 1, ...), received {value!r}.")
            for name in COLUMN_FIELDS:
                if getattr(self, name) is not None:
                    setattr(self, name, index(name, getattr(self, name)))
            if columns is not None:
                columns = [index("private_columns", c) for c in columns]
        self.private_columns = columns

    def dataset_options(self):
        """The options of `tfdptext.data.load_dataset` for this dataset
        (besides `data_dir`)."""
        options = {}
        if self.dataset in FILE_FORMATS:
            for name in ("train_file", "dev_file", "test_file",
                         "text_column", "label_column"):
                if getattr(self, name) is not None:
                    options[name] = getattr(self, name)
            if self.private_columns:
                options["private_columns"] = list(self.private_columns)
            if self.no_header:
                options["has_header"] = False
        elif self.dataset not in FIXED_FORMATS:  # TFDS
            if self.text_column is not None:
                options["text_key"] = self.text_column
            if self.label_column is not None:
                options["label_key"] = self.label_column
        return options

    def _validate_adv(self):
        if self.mode != "adv":
            for name in ("adv_lambda", "adv_attributes"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"`{name}` applies to mode adv only, received "
                        f"{getattr(self, name)!r} with `mode={self.mode}`.")
            return
        if self.adv_lambda is None:
            raise ValueError("`adv_lambda` (the gradient-reversal weight, "
                             "allowed range: (0, inf)) is required with "
                             "mode adv.")
        self.adv_lambda = validation.check_positive("adv_lambda",
                                                    self.adv_lambda)
        if self.adv_attributes is not None:
            names = self.adv_attributes
            if isinstance(names, str):  # "gender,age"
                names = [n.strip() for n in names.split(",")]
            if (not isinstance(names, (list, tuple)) or not names
                    or any(not isinstance(n, str) or not n for n in names)):
                raise ValueError(
                    "`adv_attributes` must be a non-empty list of private "
                    "attribute names (or None for all of the dataset's), "
                    f"received {self.adv_attributes!r}.")
            if len(set(names)) != len(names):
                raise ValueError(f"`adv_attributes` names an attribute "
                                 f"twice: {list(names)}.")
            # A list, as it reads back from config.json (run identity).
            self.adv_attributes = list(names)

    @property
    def frozen_user_side(self):
        return self.mode in FROZEN_USER_SIDE

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data):
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"Unknown training config fields: "
                             f"{sorted(unknown)}.")
        return cls(**data)

    def run_identity(self):
        """The fields that must match to resume a run in the same dir."""
        data = self.to_dict()
        for name in ("adv_attributes", "private_columns"):
            if data[name] is not None:
                data[name] = list(data[name])
        data.pop("epochs")  # more epochs may be asked for on resume
        return data
