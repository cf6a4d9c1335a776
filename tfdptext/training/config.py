"""The configuration of a training run, validated before anything starts."""

import dataclasses
import json
import os

from tfdptext.errors import ArgumentError
from tfdptext import mechanisms
from tfdptext.fields import field_with_help
from tfdptext.privacy import laplace
from tfdptext.privacy import metric
from tfdptext.privacy import validation

MODES = ("none", "robust", "token_rep", "text_to_text", "seq_rep", "adv")
# The text-to-text mechanisms are the registry's (tfdptext.mechanisms).
TEXT_MECHANISMS = mechanisms.names()
MECHANISMS = ("none", "laplace", "dchi", "brr", "rr") + tuple(
    m for m in TEXT_MECHANISMS if m not in ("dchi", "brr"))
# Mechanisms whose parameter is `epsilon` (the others take `eta`).
EPSILON_MECHANISMS = ("laplace", "rr") + mechanisms.with_parameter(
    "epsilon")
# What the user side releases on the sequence split: a representation
# (a vector, the DPNR release) or a learned code of `num_codes` values
# (released by m-ary randomized response, mechanism rr).
RELEASES = ("representation", "code")
# --num_codes=auto: the code release's m and grouping from the prior.
AUTO_CODES = "auto"
# The modes that may release a code: mode none (a non-private code, the
# reference) and robust (the code by randomized response; everything
# trains with the exact expected loss over the channel).
CODE_MODES = ("none", "robust")
# Settings of the vector release that a code release does not take, with
# their defaults.
REPRESENTATION_ONLY = {"private_dim": None, "normalization": "minmax",
                       "sensitivity": "per_coordinate", "dropout_rate": 0.0}
# Modes whose training examples (text and label) come from users: their
# labels may be randomized on the device (`label_epsilon`), and their texts
# are released once (`training_release`).
LABEL_PRIVACY_MODES = ("token_rep", "text_to_text", "seq_rep")
USER_DATA_MODES = LABEL_PRIVACY_MODES
# How the training and dev texts of a user-data mode are privatized: once
# (each text released once from os.urandom, recorded in the run, every
# epoch trains on that release: what a deployment's server receives) or
# per_epoch (privatized again inside fit at every epoch: noise as
# augmentation of a server's own texts, no guarantee to any user).
TRAINING_RELEASES = ("once", "per_epoch")
SENSITIVITIES = ("per_coordinate", "vector")
POOLINGS = ("mean", "cls")
# Learning-rate decay after the linear warm-up (tfdptext.training.schedules).
SCHEDULES = ("linear", "cosine", "constant")
# "balanced": each example weighs n / (K * n_k) for its label's class k.
CLASS_WEIGHTS = ("none", "balanced")
# tf.distribute strategies (tfdptext.training.devices).
STRATEGIES = ("default", "mirrored", "multi_worker")
# The default recipe (measured in docs/benchmarks.md, "Training recipe").
DEFAULT_EPOCHS = 3
DEFAULT_LEARNING_RATE = 1e-4
DEFAULT_WARMUP_FRACTION = 0.1
# What a config.json written before these fields existed describes: AdamW
# at a constant rate, unweighted, on one device.
LEGACY_VALUES = {"lr_schedule": "constant", "warmup_fraction": 0.0,
                 "class_weight": "none", "distribute": "default",
                 "release": "representation", "num_codes": None,
                 "label_epsilon": None, "mechanism_options": None,
                 "training_release": None}
# Which mechanisms make sense for which mode.
ALLOWED = {
    "none": ("none",),
    "robust": ("laplace", "rr"),
    "seq_rep": ("laplace", "dchi"),
    "token_rep": ("dchi",),
    "text_to_text": TEXT_MECHANISMS,
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
# Modes that may project the pooled representation to `private_dim`
# dimensions on the user side (it must train, so not seq_rep).
PROJECTED_MODES = ("none", "adv", "robust")
# How the released vector is brought into [0, 1]^k before Laplace noise:
# per-example min-max (DPNR), or a sigmoid on the `private_dim` projection.
NORMALIZATIONS = ("minmax", "sigmoid")


_field = field_with_help


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

    The recipe: AdamW whose rate warms up linearly over `warmup_fraction`
    of all steps to `learning_rate`, then follows `lr_schedule` (linear or
    cosine decay to 0, or constant); `class_weight` "balanced" weighs each
    example by n / (K * n_k) of its class (training labels). `distribute`
    picks the tf.distribute strategy; `batch_size` is the global batch.

    Each field's `metadata` holds its program flag's "help" and, for the
    fields that take one of a few values, its "choices".
    """

    mode: str = _field(
        "robust", "Training mode: none (non-private baseline), adv "
        "(adversarial-training baseline, no DP), robust (DPNR: noise in the "
        "training graph), seq_rep / token_rep / text_to_text (frozen user "
        "side).", MODES)
    mechanism: str | None = _field(
        None, "Privatization mechanism; default: laplace with --epsilon, "
        "dchi with --eta, rr with --release=code. Mode text_to_text: "
        + ", ".join(TEXT_MECHANISMS) + " (see --mechanism_options).",
        MECHANISMS)
    release: str = _field(
        "representation", "Modes none and robust: what leaves the phone. "
        "representation: a vector (DPNR); code: one of --num_codes codes "
        "per text, by randomized response at --epsilon per text (mechanism "
        "rr; the best release for one task at a small epsilon).", RELEASES)
    num_codes: int | str | None = _field(
        None, "--release=code: how many codes m, in [2, 65536] (default: "
        "the number of classes K; more gives several codes per class, fewer "
        "makes classes share a code), or auto: m and which classes share a "
        "code from the training labels' prior and --epsilon, read off the "
        "best LDP channel for that prior (at a small epsilon on skewed data "
        "fewer codes than classes name the big classes more often).")
    epsilon: float | None = _field(
        None, "Laplace epsilon (unit: --sensitivity), BRR's per-bit "
        "epsilon (mode text_to_text with --codes), or the code release's "
        "epsilon per text (--release=code).")
    training_release: str | None = _field(
        None, "Modes token_rep, text_to_text, seq_rep, whose training "
        "texts come from users: once (default) releases each training and "
        "dev text ONCE through the user side (noise from os.urandom, "
        "recorded in the run, read back on resume) and every epoch trains "
        "on that release; per_epoch privatizes them again at every epoch "
        "(noise as augmentation of the server's own texts: no guarantee to "
        "any user for the training data).", TRAINING_RELEASES)
    label_epsilon: float | None = _field(
        None, "Modes token_rep, text_to_text, seq_rep: randomize each "
        "training (and dev) label once by K-ary randomized response at this "
        "epsilon (from os.urandom; recorded in the run) and train with the "
        "forward-corrected loss. Default: labels are not privatized.")
    sensitivity: str = _field(
        "per_coordinate", "per_coordinate: b = 1/eps, eps per coordinate "
        "(the DPNR paper); vector: b = k/eps, eps per representation.",
        SENSITIVITIES)
    eta: float | None = _field(
        None, "d_chi eta (metric DP per token/vector).")
    codes: str | None = _field(
        None, "Mechanism brr: the binary codes directory of the preset's "
        "vocabulary (tfdptext-binarize --embeddings=preset:...).")
    mechanism_options: dict | list | None = _field(
        None, "Mode text_to_text: the mechanism's own settings as "
        "name=value pairs, comma-separated (e.g. lam=0.2,t=0.5). "
        + mechanisms.options_help())
    dropout_rate: float = _field(0.0, "DPNR word dropout rate mu.")
    dataset: str = _field(
        "synthetic", "synthetic, ag_dpnr, sst2, trustpilot, csv/tsv/jsonl, "
        "or a TFDS name.")
    data_dir: str | None = _field(None, "Directory of the dataset files.")
    preset: str = _field(
        "minilm", "keras-hub preset, hf:// handle or local directory.")
    max_length: int = _field(64, "Token length.")
    batch_size: int | None = _field(
        None, "Global batch size, over all replicas (default: 32 on CPU, "
        "128 on a GPU).")
    epochs: int = _field(DEFAULT_EPOCHS, "Epochs.")
    learning_rate: float = _field(
        DEFAULT_LEARNING_RATE, "Peak AdamW learning rate (reached at the "
        "end of warm-up).")
    lr_schedule: str = _field(
        "linear", "Learning-rate decay after warm-up: linear or cosine "
        "(to 0 at the last step), or constant.", SCHEDULES)
    warmup_fraction: float = _field(
        DEFAULT_WARMUP_FRACTION, "Fraction of all training steps of linear "
        "learning-rate warm-up, in [0, 1).")
    class_weight: str = _field(
        "none", "none, or balanced: weight each training (and dev) example "
        "by n / (K * n_k) of its label's class k.", CLASS_WEIGHTS)
    distribute: str = _field(
        "default", "default (one device), mirrored (all GPUs, or all "
        "logical CPUs, of this machine) or multi_worker (the cluster in "
        "TF_CONFIG).", STRATEGIES)
    pooling: str = _field("mean", "Sentence pooling.", POOLINGS)
    normalization: str = _field(
        "minmax", "Into [0, 1] before Laplace noise: minmax (per example, "
        "DPNR; one coordinate becomes 0 and one 1) or sigmoid (on the "
        "--private_dim projection; every coordinate stays informative).",
        NORMALIZATIONS)
    private_dim: int | None = _field(
        None, "Modes none, adv, robust: a trainable projection of the "
        "pooled representation to this many dimensions (>= 2) on the user "
        "side, before min-max + noise; exported with it. The noise then "
        "covers k coordinates: with --sensitivity=vector, b = k / epsilon "
        "and epsilon is per representation.")
    max_train_examples: int | None = _field(
        None, "Use only the first N training examples.")
    max_dev_examples: int | None = _field(
        None, "Use only the first N dev examples (validation).")
    seed: int = _field(0, "Seed for initialisation and shuffling (never for "
                       "privacy noise).")
    adv_lambda: float | None = _field(
        None, "Mode adv: gradient-reversal weight lambda (> 0).")
    adv_attributes: tuple | list | None = _field(
        None, "Mode adv: private attributes to train attacker heads for, "
        "comma-separated (default: all of the dataset's).")
    train_file: str | None = _field(
        None, "csv/tsv/jsonl: the training file (your own data).")
    dev_file: str | None = _field(
        None, "csv/tsv/jsonl: the dev file (default: 10% of the train file, "
        "fixed seed).")
    test_file: str | None = _field(None, "csv/tsv/jsonl: the test file.")
    text_column: str | int | None = _field(
        None, "Column (csv/tsv header name, or index with --no_header) or "
        "JSON key of the text (default: text); for a TFDS dataset, its text "
        "feature.")
    label_column: str | int | None = _field(
        None, "Column or JSON key of the label (default: label): integers "
        "0..K-1 or names such as Sports; for a TFDS dataset, its label "
        "feature.")
    private_columns: tuple | list | None = _field(
        None, "csv/tsv/jsonl: columns of private attributes (integers), "
        "comma-separated.")
    no_header: bool = _field(
        False, "csv/tsv: the files have no header line; columns are given "
        "by index (text 0, label 1 by default).")

    def validate(self):
        """Fills defaults and raises ValueError naming any bad field."""
        validation.check_choice("mode", self.mode, MODES)
        self._validate_release()
        if self.mechanism is None:
            allowed = ALLOWED[self.mode]
            by_epsilon = [m for m in allowed if m in EPSILON_MECHANISMS]
            if self.epsilon is not None and not by_epsilon:
                raise ArgumentError(
                    f"`epsilon` makes no sense with `mode={self.mode}`, "
                    f"which takes mechanism(s) {allowed}"
                    + (" with `eta`." if "dchi" in allowed else "."))
            if self.eta is not None and "dchi" not in allowed:
                raise ArgumentError(
                    f"`eta` makes no sense with `mode={self.mode}`, which "
                    f"takes mechanism(s) {allowed}.")
            if self.eta is not None and "dchi" in allowed:
                self.mechanism = "dchi"
            elif self.epsilon is not None:
                self.mechanism = by_epsilon[0]
            else:
                self.mechanism = allowed[0]
        validation.check_choice("mechanism", self.mechanism, MECHANISMS)
        if self.mechanism not in ALLOWED[self.mode]:
            raise ArgumentError(
                f"`mechanism={self.mechanism}` makes no sense with "
                f"`mode={self.mode}`; allowed: {ALLOWED[self.mode]}.")
        if self.mechanism == "laplace":
            if self.epsilon is None:
                raise ArgumentError("`epsilon` is required with mechanism "
                                 "laplace.")
            self.epsilon = validation.check_positive("epsilon", self.epsilon)
            laplace.laplace_scale(self.epsilon)  # finite float32 noise
            validation.check_choice("sensitivity", self.sensitivity,
                                    SENSITIVITIES)
        elif self.mechanism == "rr":
            if self.epsilon is None:
                raise ArgumentError("`epsilon` (per text) is required with "
                                    "`release=code` in mode robust.")
            self.epsilon = validation.check_positive("epsilon", self.epsilon)
        elif self.mode == "text_to_text":
            self._validate_text_mechanism()
        elif self.epsilon is not None:
            raise ArgumentError(f"`epsilon` is not used by mechanism "
                             f"{self.mechanism}; use `eta` for dchi.")
        if self.mode != "text_to_text":
            for name in ("codes", "mechanism_options"):
                if getattr(self, name) is not None:
                    raise ArgumentError(
                        f"`{name}` applies to mode text_to_text only "
                        f"(its mechanisms), received `mode={self.mode}`.")
        if self.mode == "text_to_text":
            pass  # the entry checked its parameter
        elif self.mechanism == "dchi":
            if self.eta is None:
                raise ArgumentError("`eta` is required with mechanism dchi.")
            self.eta = metric.check_float32_eta(self.eta)
        elif self.eta is not None:
            raise ArgumentError(f"`eta` is not used by mechanism "
                             f"{self.mechanism}.")
        self.dropout_rate = validation.check_rate("dropout_rate",
                                                  self.dropout_rate)
        if self.dropout_rate and self.mode not in ("robust", "seq_rep"):
            raise ArgumentError("`dropout_rate` > 0 (word dropout) applies to "
                             "modes robust and seq_rep only.")
        if self.dropout_rate and self.mechanism != "laplace":
            raise ArgumentError(
                "`dropout_rate` > 0 (word dropout) amplifies an epsilon-LDP "
                "release (mechanism laplace); with mechanism "
                f"{self.mechanism} there is no amplification theorem to "
                "state: set `dropout_rate` to 0 or use `epsilon`.")
        validation.check_int("max_length", self.max_length, 8)
        if self.batch_size is not None:
            validation.check_int("batch_size", self.batch_size, 1)
        validation.check_int("epochs", self.epochs, 1)
        self._validate_recipe()
        validation.check_choice("pooling", self.pooling, POOLINGS)
        self._validate_private_dim()
        for name in ("max_train_examples", "max_dev_examples"):
            if getattr(self, name) is not None:
                validation.check_int(name, getattr(self, name), 1)
        self._validate_adv()
        self._validate_training_release()
        self._validate_label_privacy()
        self._validate_data()
        return self

    def _validate_text_mechanism(self):
        """Mode text_to_text: the registry entry's privacy parameter (the
        other one absent), its table (`codes` exactly for the mechanisms
        that read codes) and its options, normalised to a dict."""
        entry = mechanisms.get(self.mechanism)
        other = "epsilon" if entry.parameter == "eta" else "eta"
        if getattr(self, other) is not None:
            raise ArgumentError(
                f"`{other}` is not used by mechanism {self.mechanism}; it "
                f"takes `{entry.parameter}`.")
        if entry.table == mechanisms.CODES:
            if self.codes is None:
                raise ArgumentError(
                    f"Mechanism {self.mechanism} needs `{entry.parameter}` "
                    "and `codes` (a tfdptext-binarize output directory).")
            if not os.path.isdir(self.codes):
                raise ArgumentError(f"`codes`: no directory {self.codes}.")
            self.codes = os.path.abspath(self.codes)
        elif self.codes is not None:
            raise ArgumentError(
                "`codes` is used by the mechanisms that read binary codes ("
                + ", ".join(m for m, e in mechanisms.REGISTRY.items()
                            if e.table == mechanisms.CODES)
                + f") only; received `mechanism={self.mechanism}`.")
        setattr(self, entry.parameter,
                entry.value(getattr(self, entry.parameter)))
        # None when the mechanism takes no option (as before options).
        self.mechanism_options = entry.parse_options(
            self.mechanism_options) or None

    def _validate_release(self):
        """A code release: modes none and robust only, mechanism rr (robust)
        or none, and none of the vector release's settings."""
        from tfdptext.privacy import categorical

        validation.check_choice("release", self.release, RELEASES)
        if self.release == "representation":
            if self.num_codes is not None:
                raise ArgumentError("`num_codes` applies to `release=code` "
                                    "only.")
            if self.mechanism == "rr":
                raise ArgumentError("Mechanism rr releases a code: set "
                                    "`release=code`.")
            return
        if self.mode not in CODE_MODES:
            raise ArgumentError(
                f"`release=code` applies to modes {CODE_MODES} (the code "
                f"head trains with the encoder), received "
                f"`mode={self.mode}`.")
        expected = "rr" if self.mode == "robust" else "none"
        if self.mechanism is None:
            self.mechanism = expected
        elif self.mechanism != expected:
            raise ArgumentError(
                f"`release=code` in mode {self.mode} takes mechanism "
                f"{expected}, received `mechanism={self.mechanism}`.")
        for name, default in REPRESENTATION_ONLY.items():
            if getattr(self, name) != default:
                raise ArgumentError(
                    f"`{name}` applies to `release=representation` (a "
                    f"vector release); a code release takes --num_codes "
                    f"and --epsilon only, received {name}="
                    f"{getattr(self, name)!r}.")
        if self.num_codes is not None and self.num_codes != AUTO_CODES:
            value = self.num_codes
            if isinstance(value, str):
                if not value.strip().isdigit():
                    raise ArgumentError(
                        f"`num_codes` must be an integer in [2, "
                        f"{categorical.MAX_VALUES}] or {AUTO_CODES!r}, "
                        f"received {value!r}.")
                value = int(value)
            self.num_codes = categorical.check_num_values("num_codes",
                                                          value)

    def _validate_training_release(self):
        """once by default where the training texts come from users; the
        other modes train their user side (or have no noise), so there is
        no fixed release to draw once."""
        if self.mode in USER_DATA_MODES:
            if self.training_release is None:
                self.training_release = "once"
            validation.check_choice("training_release",
                                    self.training_release,
                                    TRAINING_RELEASES)
        elif self.training_release is not None:
            raise ArgumentError(
                f"`training_release` applies to modes {USER_DATA_MODES}, "
                "whose frozen user side releases the training texts; mode "
                f"{self.mode} trains on the server's own texts (received "
                f"training_release={self.training_release!r}).")

    def _validate_label_privacy(self):
        if self.label_epsilon is None:
            return
        if self.mode not in LABEL_PRIVACY_MODES:
            raise ArgumentError(
                f"`label_epsilon` applies to modes {LABEL_PRIVACY_MODES}, "
                "where users contribute training examples, received "
                f"`mode={self.mode}`.")
        self.label_epsilon = validation.check_positive("label_epsilon",
                                                       self.label_epsilon)

    def _validate_private_dim(self):
        """The user-side projection trains with the encoder (modes none, adv,
        robust); a frozen user side (seq_rep) would release a random one."""
        validation.check_choice("normalization", self.normalization,
                                NORMALIZATIONS)
        if self.normalization == "sigmoid" and self.private_dim is None:
            raise ArgumentError("`normalization=sigmoid` squashes the "
                                "`private_dim` projection: set `private_dim`.")
        if self.private_dim is None:
            return
        self.private_dim = validation.check_int("private_dim",
                                                self.private_dim, 2)
        if self.mode not in PROJECTED_MODES:
            raise ArgumentError(
                f"`private_dim` applies to modes {PROJECTED_MODES}, whose "
                f"user side trains; received `mode={self.mode}`.")

    def _validate_recipe(self):
        """The optimisation settings: rate, schedule, weights, devices."""
        self.learning_rate = validation.check_positive("learning_rate",
                                                       self.learning_rate)
        validation.check_choice("lr_schedule", self.lr_schedule, SCHEDULES)
        self.warmup_fraction = validation.check_rate("warmup_fraction",
                                                     self.warmup_fraction)
        validation.check_choice("class_weight", self.class_weight,
                                CLASS_WEIGHTS)
        validation.check_choice("distribute", self.distribute, STRATEGIES)

    def _validate_data(self):
        """The file and column options, against `dataset`."""
        if self.dataset not in FILE_FORMATS:
            for name in FILE_FIELDS + (
                    COLUMN_FIELDS if self.dataset in FIXED_FORMATS else ()):
                if getattr(self, name) not in (None, False):
                    raise ArgumentError(
                        f"`{name}` applies to your own files (`dataset` "
                        f"csv, tsv or jsonl) only, received "
                        f"{getattr(self, name)!r} with "
                        f"`dataset={self.dataset}`.")
            return
        if self.train_file is None and self.data_dir is None:
            raise ArgumentError(
                f"`dataset={self.dataset}` needs `train_file` and "
                f"`test_file` (or a `data_dir` holding train.{self.dataset} "
                f"and test.{self.dataset}).")
        if (self.train_file is None) != (self.test_file is None) or (
                self.dev_file is not None and self.train_file is None):
            raise ArgumentError(
                "`train_file` and `test_file` go together (and `dev_file` "
                f"with them), received train_file={self.train_file!r}, "
                f"dev_file={self.dev_file!r}, test_file={self.test_file!r}.")
        for name in ("train_file", "dev_file", "test_file"):
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise ArgumentError(f"`{name}` must be a file path, "
                                     f"received {value!r}.")
                setattr(self, name, os.path.abspath(value))
        self.no_header = bool(self.no_header)
        if self.no_header and self.dataset == "jsonl":
            raise ArgumentError("`no_header` applies to csv and tsv files, "
                             "not jsonl.")
        columns = self.private_columns
        if isinstance(columns, str):  # "gender,age"
            columns = [c.strip() for c in columns.split(",")]
        if columns is not None:
            if not isinstance(columns, (list, tuple)) or any(
                    c in ("", None) for c in columns):
                raise ArgumentError(
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
                raise ArgumentError(
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
                    raise ArgumentError(
                        f"`{name}` applies to mode adv only, received "
                        f"{getattr(self, name)!r} with `mode={self.mode}`.")
            return
        if self.adv_lambda is None:
            raise ArgumentError("`adv_lambda` (the gradient-reversal weight, "
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
                raise ArgumentError(
                    "`adv_attributes` must be a non-empty list of private "
                    "attribute names (or None for all of the dataset's), "
                    f"received {self.adv_attributes!r}.")
            if len(set(names)) != len(names):
                raise ArgumentError(f"`adv_attributes` names an attribute "
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
        """The TrainConfig of a config.json. Fields it lacks because it
        predates them take LEGACY_VALUES (what such a run did), so that a
        resumed old run keeps its recipe."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ArgumentError(f"Unknown training config fields: "
                             f"{sorted(unknown)}.")
        legacy = dict(LEGACY_VALUES)
        if data.get("mode") in USER_DATA_MODES:
            # Written before `training_release`: privatized inside fit.
            legacy["training_release"] = "per_epoch"
        return cls(**{**legacy, **data})

    def run_identity(self):
        """The fields that must match to resume a run in the same dir."""
        data = self.to_dict()
        for name in ("adv_attributes", "private_columns"):
            if data[name] is not None:
                data[name] = list(data[name])
        data.pop("epochs")  # more epochs may be asked for on resume
        # The same global batches on other devices: the same run.
        data.pop("distribute")
        return data
