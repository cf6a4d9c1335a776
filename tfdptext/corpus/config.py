"""What a corpus privatization job is asked to do: `CorpusConfig`.

The fields are the flags of `tfdptext-privatize-corpus` (help from the
fields' metadata, through `tfdptext.cli.flags`). `validate()` checks them
before any work, each error naming the flag, the value and what is allowed;
the mechanism's own parameters are checked by its entry in
`tfdptext.corpus.mechanisms`.

Pure Python (no TensorFlow, no Beam import).
"""

import dataclasses

from tfdptext import mechanisms as text_mechanisms
from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

TEXT = "text"
TFRECORD = "tfrecord"
INPUT_FORMATS = (TEXT, TFRECORD)
DEFAULT_MECHANISM = "dchi"
DEFAULT_MAX_TOKENS = 512
DEFAULT_BATCH_SIZE = 64
DEFAULT_TFRECORD_FEATURE = "text"


def _help(text):
    return dataclasses.field(default=None, metadata={"help": text})


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    """A corpus privatization job (the job's flags, less --output_dir).

    Args:
        input: the input files: a path, a glob, or a comma-separated list
            of them.
        input_format: `text` (one text per line, UTF-8) or `tfrecord`
            (tf.train.Example records, the text in `tfrecord_feature`).
        tfrecord_feature: the bytes feature holding each record's text.
        mechanism: a name in `tfdptext.corpus.mechanisms.MECHANISMS`.
        eta: the privacy parameter of the mechanisms that take eta (d_chi
            and the other metric-noise mechanisms).
        epsilon: the privacy parameter of the others (BRR, ...).
        codes: BRR's codes directory (mechanism `brr`).
        mechanism_options: the mechanism's own settings, "name=value"
            strings (`tfdptext.mechanisms`).
        preset: the encoder whose WordPiece tokenizer and token embedding
            table `dchi` uses (default: MiniLM).
        embeddings: a .npy (vocabulary_size, dim) table replacing the
            preset's token embeddings for `dchi` (rows index the preset's
            vocabulary).
        max_tokens: the longest token sequence handed to the mechanism in
            one piece; a longer line is privatized in consecutive pieces of
            at most `max_tokens` tokens, all of them (nothing is dropped).
        batch_size: lines (pieces) per call of the mechanism in a worker.
    """

    input: str = dataclasses.field(metadata={
        "help": "Input files: a path, a glob, or a comma-separated list of "
        "them (local, or any file system Beam reads, e.g. gs://)."})
    input_format: str = dataclasses.field(default=TEXT, metadata={
        "help": f"{TEXT}: one text per line, UTF-8; {TFRECORD}: "
        "tf.train.Example records, the text in --tfrecord_feature."})
    tfrecord_feature: str = dataclasses.field(
        default=DEFAULT_TFRECORD_FEATURE, metadata={
            "help": "The bytes feature (one value) that holds each "
            "record's text, for --input_format=tfrecord."})
    mechanism: str = dataclasses.field(default=DEFAULT_MECHANISM, metadata={
        "help": "A text-to-text mechanism of tfdptext.mechanisms: "
        + " ".join(entry.help() for entry in
                   text_mechanisms.REGISTRY.values())})
    eta: float | None = _help(
        "The privacy parameter of the mechanisms that take eta (dchi, ...), "
        "finite and > 0.")
    epsilon: float | None = _help(
        "The privacy parameter of the mechanisms that take epsilon (brr, "
        "...), finite and > 0.")
    codes: str | None = _help("BRR's codes directory (its vocab.txt is the "
                              "vocabulary) (--mechanism=brr).")
    mechanism_options: tuple | None = _help(
        "The mechanism's own settings as name=value pairs, comma-separated "
        "(e.g. lam=0.2,t=0.5).")
    preset: str | None = _help(
        "Encoder whose WordPiece tokenizer and token embedding table "
        "--mechanism=dchi uses: a keras-hub preset or directory (default: "
        "MiniLM, `minilm`).")
    embeddings: str | None = _help(
        "A .npy (vocabulary_size, dim) float table replacing the preset's "
        "token embeddings for --mechanism=dchi; row i is token i of the "
        "preset's vocabulary.")
    max_tokens: int = dataclasses.field(default=DEFAULT_MAX_TOKENS, metadata={
        "help": "Longest token sequence privatized in one piece; longer "
                "lines are privatized in consecutive pieces (nothing is "
                "dropped)."})
    batch_size: int = dataclasses.field(default=DEFAULT_BATCH_SIZE, metadata={
        "help": "Pieces (lines) per call of the mechanism in a worker."})

    def validate(self):
        """Raises ArgumentError naming the first bad field; returns self."""
        from tfdptext.corpus import mechanisms

        if not isinstance(self.input, str) or not any(
                part.strip() for part in self.input.split(",")):
            raise ArgumentError(
                "`input` must name input files (a path, a glob or a "
                f"comma-separated list), received {self.input!r}.")
        validation.check_choice("input_format", self.input_format,
                                INPUT_FORMATS)
        if not self.tfrecord_feature:
            raise ArgumentError("`tfrecord_feature` must be a feature name, "
                                "received an empty string.")
        validation.check_int("max_tokens", self.max_tokens)
        validation.check_int("batch_size", self.batch_size)
        mechanisms.spec(self.mechanism).check(self)
        return self

    def to_dict(self):
        """Every field, for the manifest."""
        return dataclasses.asdict(self)

