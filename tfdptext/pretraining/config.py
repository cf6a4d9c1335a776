"""The configuration of a pretraining run, validated before anything starts.

Pure Python (no TensorFlow import): the program builds its flags from the
fields' metadata (`tfdptext.cli.flags.define_flags(PretrainConfig)`).
"""

import dataclasses
import math
import numbers
import os

from tfdptext.errors import ArgumentError
from tfdptext.fields import field_with_help
from tfdptext.privacy import metric
from tfdptext.privacy import validation

# The three MLM objectives of Qu et al. (2021), Sec. 3.4, by target at a
# masked position (tfdptext.pretraining.objectives holds their targets).
VANILLA = "vanilla"
PROBABILISTIC = "probabilistic"
DENOISING = "denoising"
OBJECTIVES = (VANILLA, PROBABILISTIC, DENOISING)
# The user-side mechanisms, named as tfdptext-train's modes: d_chi noise on
# the frozen token embeddings, or d_chi text-to-text on the token ids; or
# none: clean text, no mechanism (a baseline that adapts the encoder to no
# privatization; every objective's target is then the original token).
NONE = "none"
TOKEN_REP = "token_rep"
TEXT_TO_TEXT = "text_to_text"
MODES = (NONE, TOKEN_REP, TEXT_TO_TEXT)
PRIVATE_MODES = (TOKEN_REP, TEXT_TO_TEXT)
# Corpora read from the user's own files (labels are read, then ignored).
FILE_FORMATS = ("csv", "tsv", "jsonl")
FILE_FIELDS = ("train_file", "text_column", "label_column", "no_header")
# The paper's MLM settings (Qu et al. Sec. 6.1; BERT's defaults).
DEFAULT_NUM_PRIVATIZATIONS = 10
DEFAULT_MASK_RATE = 0.15
DEFAULT_MAX_PREDICTIONS = 20
DEFAULT_MAX_LENGTH = 128
DEFAULT_EVAL_EVERY = 100
# The MLM head's rate over the encoder's (docs/benchmarks.md, "Why the MLM
# learned slowly").
DEFAULT_HEAD_RATE_MULTIPLIER = 100.0
# Fields added after runs were first written, with the value those runs
# used: a pretrain_config.json without them reads back as what it ran.
WRITTEN_BEFORE = {"head_rate_multiplier": 1.0}
# Fields that may change when an interrupted run is resumed.
RESUMABLE_CHANGES = ("steps", "checkpoint_every", "eval_every")


_field = field_with_help


@dataclasses.dataclass
class PretrainConfig:
    """Everything that defines a privacy-adaptive pretraining run (Qu et
    al. 2021, Sec. 3.4); saved as pretrain_config.json beside it.

    The encoder (`preset`) continues masked-LM training on the texts of
    `corpus` (labels ignored) whose tokens are privatized on the fly by the
    user-side mechanism of `mode` at `eta`, with the user-side token
    embedding frozen. `objective` picks the target at a masked position:
    the privatized token (vanilla), the empirical distribution of
    `num_privatizations` privatizations of the original token
    (probabilistic), or the original token (denoising, the paper's
    recommendation). `mode="none"` is the clean-text baseline: no
    mechanism, no eta, every objective's target the original token; it
    shows what the encoder and head learn at a budget without noise.

    Each field's `metadata` holds its program flag's "help" and, for the
    fields that take one of a few values, its "choices".

    Example:
    >>> config = PretrainConfig(objective="denoising", mode="token_rep",
    ...                         eta=80.0, corpus="ag_dpnr",
    ...                         data_dir="../shared/data/ag_dpnr", steps=500)
    >>> config.validate().identity()["eta"]
    80.0
    >>> PretrainConfig(eta=0.0).validate()
    Traceback (most recent call last):
    tfdptext.errors.ArgumentError: `eta` must be finite and > 0 (allowed
    range: (0, inf)), received 0.0.
    """

    objective: str = _field(
        DENOISING, "MLM target at a masked position: vanilla (the privatized "
        "token), probabilistic (the distribution of --num_privatizations "
        "privatizations of the original token), denoising (the original "
        "token; Qu et al.'s recommendation).", OBJECTIVES)
    mode: str = _field(
        TOKEN_REP, "User-side mechanism, as in tfdptext-train: token_rep "
        "(d_chi noise on the frozen token embeddings), text_to_text "
        "(d_chi text-to-text on the token ids), or none (clean text: a "
        "baseline with no privatization and no guarantee; every objective "
        "then predicts the original token).", MODES)
    eta: float | None = _field(
        None, "d_chi eta (metric DP per token), > 0; use the eta that "
        "fine-tuning will use. Not used with --mode=none.")
    num_privatizations: int = _field(
        DEFAULT_NUM_PRIVATIZATIONS, "Objective probabilistic: privatizations "
        "K of each masked token (>= 2).")
    corpus: str = _field(
        "synthetic", "Public text to pretrain on (labels ignored): "
        "synthetic, ag_dpnr, sst2, trustpilot, csv/tsv/jsonl, or a TFDS "
        "name.")
    data_dir: str | None = _field(None, "Directory of the corpus files.")
    train_file: str | None = _field(
        None, "csv/tsv/jsonl: the corpus file (10% of it is held out).")
    text_column: str | int | None = _field(
        None, "csv/tsv/jsonl: column or JSON key of the text (default text; "
        "an index with --no_header).")
    label_column: str | int | None = _field(
        None, "csv/tsv/jsonl: column or JSON key of the label the data "
        "reader requires (default label); its values are ignored.")
    no_header: bool = _field(
        False, "csv/tsv: the file has no header line; columns are indices.")
    max_examples: int | None = _field(
        None, "Pretrain on the first N texts of the corpus' training split "
        "only.")
    heldout_examples: int = _field(
        256, "Held-out texts (the corpus' dev split) for the MLM loss and "
        "masked-token accuracy before, during and after training.")
    eval_every: int = _field(
        DEFAULT_EVAL_EVERY, "Evaluate on the held-out texts every N "
        "optimizer steps (>= 1), besides before and after training: the "
        "learning curve in TensorBoard and metrics.json.")
    preset: str = _field(
        "minilm", "Encoder to continue training: keras-hub preset, hf:// "
        "handle or local directory (a BERT-family backbone).")
    max_length: int = _field(DEFAULT_MAX_LENGTH, "Token length.")
    batch_size: int | None = _field(
        None, "Batch size (default: 32 on CPU, 128 on a GPU).")
    steps: int = _field(1000, "Optimizer steps (the budget).")
    checkpoint_every: int = _field(
        100, "Save a resumable checkpoint every N steps.")
    learning_rate: float = _field(
        1e-4, "Peak AdamW learning rate of the encoder (linear warm-up, "
        "then linear decay to 0 at --steps).")
    head_rate_multiplier: float = _field(
        DEFAULT_HEAD_RATE_MULTIPLIER, "The new MLM head's peak learning "
        "rate over --learning_rate, >= 1 (same schedule): the head starts "
        "from random weights, the encoder does not.")
    warmup_fraction: float = _field(
        0.1, "Fraction of --steps of linear learning-rate warm-up, in "
        "[0, 1).")
    mask_rate: float = _field(
        DEFAULT_MASK_RATE, "Share of the regular tokens selected for "
        "prediction, in (0, 1).")
    max_predictions: int = _field(
        DEFAULT_MAX_PREDICTIONS, "Most masked positions per sequence.")
    seed: int = _field(
        0, "Seed of the MLM head's initialisation, of the text order and "
        "of the held-out masks (never of the privacy noise).")

    def validate(self):
        """Checks every field and returns self; raises ArgumentError naming
        the field, the value received and the allowed range."""
        validation.check_choice("objective", self.objective, OBJECTIVES)
        validation.check_choice("mode", self.mode, MODES)
        self._validate_eta()
        validation.check_int("num_privatizations", self.num_privatizations,
                             minimum=2)
        validation.check_int("max_length", self.max_length, minimum=8)
        if self.batch_size is not None:
            validation.check_int("batch_size", self.batch_size, minimum=1)
        validation.check_int("steps", self.steps, minimum=1)
        validation.check_int("checkpoint_every", self.checkpoint_every,
                             minimum=1)
        validation.check_int("heldout_examples", self.heldout_examples,
                             minimum=1)
        validation.check_int("eval_every", self.eval_every, minimum=1)
        if self.max_examples is not None:
            validation.check_int("max_examples", self.max_examples, minimum=1)
        self.learning_rate = validation.check_positive("learning_rate",
                                                       self.learning_rate)
        multiplier = self.head_rate_multiplier
        if (isinstance(multiplier, bool)
                or not isinstance(multiplier, numbers.Real)
                or not 1.0 <= multiplier < math.inf):
            raise ArgumentError(
                f"`head_rate_multiplier` must be a finite number >= 1 "
                f"(allowed range: [1, inf)), received {multiplier!r}.")
        self.head_rate_multiplier = float(multiplier)
        self.warmup_fraction = validation.check_rate("warmup_fraction",
                                                     self.warmup_fraction)
        self.mask_rate = validation.check_rate("mask_rate", self.mask_rate)
        if self.mask_rate == 0.0:
            raise ArgumentError("`mask_rate` must be in (0, 1), received 0.0 "
                                "(nothing would be predicted).")
        validation.check_int("max_predictions", self.max_predictions,
                             minimum=1)
        validation.check_int("seed", self.seed, minimum=0)
        if not isinstance(self.preset, str) or not self.preset:
            raise ArgumentError(f"`preset` must be a preset name or "
                                f"directory, received {self.preset!r}.")
        self._validate_corpus()
        return self

    def _validate_eta(self):
        """eta is required by the private modes, refused by none."""
        if self.mode == NONE:
            if self.eta is not None:
                raise ArgumentError(
                    f"`eta` makes no sense with `mode={NONE}` (clean text, "
                    f"no mechanism), received {self.eta!r}; drop --eta or "
                    f"pick a mode of {PRIVATE_MODES}.")
            return
        if self.eta is None:
            raise ArgumentError(
                f"`eta` is required with `mode={self.mode}` (the d_chi "
                "privacy parameter, allowed range (0, inf)); use the eta "
                "fine-tuning will use.")
        self.eta = metric.check_float32_eta(self.eta)

    def _validate_corpus(self):
        """The corpus name and the file options that go with it."""
        if not isinstance(self.corpus, str) or not self.corpus:
            raise ArgumentError(f"`corpus` must be a dataset name, received "
                                f"{self.corpus!r}.")
        if self.corpus not in FILE_FORMATS:
            for name in FILE_FIELDS:
                if getattr(self, name) not in (None, False):
                    raise ArgumentError(
                        f"`{name}` applies to a corpus of your own files "
                        f"(`corpus` one of {FILE_FORMATS}), received "
                        f"{getattr(self, name)!r} with "
                        f"`corpus={self.corpus}`.")
            return
        if self.train_file is None and self.data_dir is None:
            raise ArgumentError(
                f"`corpus={self.corpus}` needs `train_file` (or a `data_dir` "
                f"holding train.{self.corpus} and test.{self.corpus}).")
        if self.train_file is not None:
            if not isinstance(self.train_file, str) or not self.train_file:
                raise ArgumentError(f"`train_file` must be a file path, "
                                    f"received {self.train_file!r}.")
            self.train_file = os.path.abspath(self.train_file)
        if self.no_header and self.corpus == "jsonl":
            raise ArgumentError("`no_header` applies to csv and tsv files, "
                                "not jsonl.")

    def dataset_options(self):
        """The options of `tfdptext.data.load_dataset` for the corpus
        (besides `data_dir`). A single `train_file` is also the test file:
        the held-out texts are the dev split the reader carves out of it."""
        if self.corpus not in FILE_FORMATS:
            return {}
        options = {}
        if self.train_file is not None:
            options["train_file"] = options["test_file"] = self.train_file
        for name in ("text_column", "label_column"):
            if getattr(self, name) is not None:
                options[name] = getattr(self, name)
        if self.no_header:
            options["has_header"] = False
            for name in ("text_column", "label_column"):
                value = options.get(name)
                if isinstance(value, str) and value.strip().isdigit():
                    options[name] = int(value)
        return options

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        """The PretrainConfig of a pretrain_config.json (ValueError on
        unknown fields); fields it lacks (written before they existed)
        take WRITTEN_BEFORE's values."""
        if not isinstance(data, dict):
            raise ValueError("a pretraining config is a JSON object.")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown pretraining config fields: "
                             f"{sorted(unknown)}")
        return cls(**{**WRITTEN_BEFORE, **data})

    def identity(self):
        """The fields that must match to resume a run in the same directory
        (all but RESUMABLE_CHANGES)."""
        data = self.to_dict()
        for name in RESUMABLE_CHANGES:
            data.pop(name)
        return data
