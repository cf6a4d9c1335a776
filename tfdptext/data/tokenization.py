r"""WordPiece tokenization matching an uncased BERT encoder.

The ids are a contract with every app that tokenizes on the phone
(docs/guides/tokenizer.md spells it out; web/tfdptext/tokenizer.js
implements it; every export ships test vectors). Two decisions here keep
that contract one thing:

- keras_hub's WordPieceTokenizer has two paths that disagree: inside
  tf.data / tf.function it runs TensorFlow (RE2's and ICU's Unicode data),
  on eager calls pure Python (Python 3.11's Unicode 14 data and an
  approximation of NFKC_Casefold). Training tokenized through tf.data and
  prediction eagerly, so a character new since Unicode 14 got other ids
  at prediction than in training (U+1E030 is 'a' in training, [UNK]
  eagerly; U+10D6E is a word of its own eagerly). TextTokenizer now always
  runs the TensorFlow path (a compiled tf.function: 0.3 ms a call).
- keras_hub splits words only at ASCII whitespace, control and format
  characters: a no-break space (U+00A0), the other Unicode spaces and the
  line and paragraph separators joined the words on both sides into one
  word, almost always [UNK] ('Full\u00a0width' -> [UNK]). With
  `unicode_spaces` (the default for new runs, recorded in the run's and
  the export's tokenizer settings) every space separator (\p{Z}) is a
  space. So is NUL: tf_text's regex_split takes it for the end of the
  text and dropped everything after it ('ab\x00cd' -> 'ab'). Runs and
  exports whose settings lack the key keep the old behaviour, so their
  ids do not change under a trained model.
"""

import hashlib
import os

import numpy as np
import tensorflow as tf

from tfdptext.privacy import validation

from tfdptext.vocabulary import SPECIAL_TOKENS  # noqa: F401 (re-exported)
# Unicode space separators (Zs, Zl, Zp) and NUL, mapped to ' ' with
# unicode_spaces.
UNICODE_SPACES = r"[\p{Z}\x00]"
# Where the rules are written down (tokenizer.json's "contract").
CONTRACT = "docs/guides/tokenizer.md"


def check_texts(texts, name="texts"):
    """`texts` (a str, or a list / array of str or UTF-8 bytes) as a list
    of UTF-8 bytes; ValueError naming the argument and the first bad
    element otherwise (None, a number, invalid UTF-8, a lone surrogate)."""
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"`{name}` must be a list of strings, received one "
                         f"string {texts[:40]!r}: wrap it in a list.")
    encoded = []
    for i, text in enumerate(texts):
        if isinstance(text, np.str_):
            text = str(text)
        if isinstance(text, (bytes, np.bytes_)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"`{name}[{i}]` is not valid UTF-8 (byte {err.start}: "
                    f"{bytes(text)[err.start:err.start + 4]!r}).") from None
        if not isinstance(text, str):
            raise ValueError(f"`{name}[{i}]` must be a string, received "
                             f"{type(text).__name__} {text!r:.40}.")
        try:
            encoded.append(text.encode("utf-8"))
        except UnicodeEncodeError as err:
            raise ValueError(
                f"`{name}[{i}]` holds a lone surrogate (U+{ord(text[err.start]):04X}) "
                f"at position {err.start}: it is not Unicode text; fix the "
                "text before tokenizing.") from None
    return encoded


def read_vocabulary(path):
    """The tokens of a vocab.txt, one per line."""
    if not os.path.isfile(path):
        raise ValueError(f"`vocabulary`: no such file {path}.")
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    while tokens and tokens[-1] == "":
        tokens.pop()
    if not tokens:
        raise ValueError(f"`vocabulary`: {path} is empty.")
    return tokens


class _Pieces:
    """keras_hub's WordPieceTokenizer on its TensorFlow path and `pieces`
    (string tensor of rank 1 -> ragged ids), compiled once. They do not
    depend on max_length: the engines of one vocabulary and normalisation
    at several lengths share one (`_Engine`; building the WordPiece
    lookup costs about 0.3 CPU-s, tracing `pieces` about 1)."""

    def __init__(self, tokenizer):
        import keras_hub

        self.unicode_spaces = tokenizer.unicode_spaces
        self.wordpiece = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=tokenizer.vocabulary, lowercase=tokenizer.lowercase,
            strip_accents=tokenizer.strip_accents, oov_token="[UNK]",
            dtype="int32", _allow_python_workflow=False)
        self.pieces = tf.function(self.split, autograph=False,
                                  input_signature=_SIGNATURE)

    def split(self, texts):
        if self.unicode_spaces:
            texts = tf.strings.regex_replace(texts, UNICODE_SPACES, " ")
        return self.wordpiece(texts)


_SIGNATURE = [tf.TensorSpec([None], tf.string)]


class _Engine:
    """`pieces` (`_Pieces`) and keras_hub's StartEndPacker on their
    TensorFlow path, compiled once (`pieces`, `packed`: string tensor of
    rank 1 -> ragged ids, or (ids, mask)). Building one costs about 0.1 s
    and its first call 0.6 s of tracing, so TextTokenizers of the same
    vocabulary and settings share one (`_engine`)."""

    def __init__(self, tokenizer):
        import keras_hub

        self._split = _cached(_PIECES, _settings_key(tokenizer),
                              lambda: _Pieces(tokenizer))
        self.packer = keras_hub.layers.StartEndPacker(
            sequence_length=tokenizer.max_length,
            start_value=tokenizer.cls_id, end_value=tokenizer.sep_id,
            pad_value=tokenizer.pad_id, return_padding_mask=True,
            _allow_python_workflow=False)
        self.pieces = self._split.pieces
        self.packed = tf.function(self._packed, autograph=False,
                                  input_signature=_SIGNATURE)

    def _packed(self, texts):
        return self.packer(self._split.split(texts))


# Engines by (vocabulary SHA-256, lowercase, strip_accents, unicode_spaces,
# max_length), and their `_Pieces` by the same without max_length; the
# oldest goes past _MAX_ENGINES.
_ENGINES = {}
_PIECES = {}
_MAX_ENGINES = 16


def _settings_key(tokenizer):
    return (tokenizer.vocabulary_sha256(), tokenizer.lowercase,
            tokenizer.strip_accents, tokenizer.unicode_spaces)


def _cached(cache, key, build):
    """cache[key], built first if missing (the oldest entry dropped past
    _MAX_ENGINES)."""
    if key not in cache:
        if len(cache) >= _MAX_ENGINES:
            cache.pop(next(iter(cache)))
        cache[key] = build()
    return cache[key]


def _engine(tokenizer):
    key = _settings_key(tokenizer) + (tokenizer.max_length,)
    return _cached(_ENGINES, key, lambda: _Engine(tokenizer))


class TextTokenizer:
    """Text -> {"token_ids", "padding_mask", "segment_ids"} for BERT models.

    Lowercases and strips accents (as the uncased models were trained; the
    keras-hub tokenizer loaded from a Hugging Face directory does not strip
    accents, so accented words would become [UNK]), splits with WordPiece,
    adds [CLS] ... [SEP], truncates to `max_length` (keeping [SEP]) and pads.
    Always on keras_hub's TensorFlow path (module docstring).

    Args:
        vocabulary: path to a vocab.txt or a list of tokens.
        max_length: output length, >= 3.
        lowercase, strip_accents: the uncased model's normalisation.
        unicode_spaces: every Unicode space separator, and NUL, is a
            space (module docstring); False reproduces runs made before
            it.

    Example:
    >>> tok = TextTokenizer("vocab.txt", max_length=16)
    >>> features = tok(["A café review."])
    >>> features["token_ids"].shape
    TensorShape([1, 16])
    """

    def __init__(self, vocabulary, max_length=128, lowercase=True,
                 strip_accents=True, unicode_spaces=True):
        self.max_length = validation.check_int("max_length", max_length, 3)
        if isinstance(vocabulary, str):
            self.vocabulary_path = vocabulary
            vocabulary = read_vocabulary(vocabulary)
        else:
            self.vocabulary_path = None
        self.vocabulary = list(vocabulary)
        missing = [t for t in SPECIAL_TOKENS if t not in self.vocabulary]
        if missing:
            raise ValueError(
                f"`vocabulary` lacks the special tokens {missing}.")
        self.lowercase = bool(lowercase)
        self.strip_accents = bool(strip_accents)
        self.unicode_spaces = bool(unicode_spaces)
        index = {t: i for i, t in enumerate(self.vocabulary)}
        self.pad_id = index["[PAD]"]
        self.unk_id = index["[UNK]"]
        self.cls_id = index["[CLS]"]
        self.sep_id = index["[SEP]"]
        self.mask_id = index["[MASK]"]
        self._engine = _engine(self)

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    @property
    def structural_token_ids(self):
        """[PAD], [CLS], [SEP], [MASK]: never real words."""
        return (self.pad_id, self.cls_id, self.sep_id, self.mask_id)

    @property
    def passthrough_token_ids(self):
        """[PAD], [CLS], [SEP]: released unchanged by text-to-text
        privatizers (they reveal only the length). [UNK] is not among
        them: it is privatized like any word."""
        return (self.pad_id, self.cls_id, self.sep_id)

    @property
    def special_token_ids(self):
        """Ids that are not words: the special tokens and [unused*] slots.

        Text-to-text privatizers never output these.
        """
        ids = {self.pad_id, self.unk_id, self.cls_id, self.sep_id,
               self.mask_id}
        ids.update(i for i, t in enumerate(self.vocabulary)
                   if t.startswith("[unused") and t.endswith("]"))
        return tuple(sorted(ids))

    @staticmethod
    def _as_tensor(texts):
        """A list of texts (checked: `check_texts`) as a string tensor; a
        tensor (e.g. in a tf.data map) as it is."""
        if isinstance(texts, tf.Tensor):
            return texts
        encoded = check_texts(texts)
        return tf.constant(encoded, dtype=tf.string, shape=[len(encoded)])

    def tokenize(self, texts):
        """WordPiece ids without special tokens (ragged), for a list of
        texts or a string tensor of rank 1."""
        return self._engine.pieces(self._as_tensor(texts))

    def __call__(self, texts):
        token_ids, padding_mask = self._engine.packed(self._as_tensor(texts))
        return {
            "token_ids": tf.cast(token_ids, tf.int32),
            "padding_mask": tf.cast(padding_mask, tf.int32),
            "segment_ids": tf.zeros_like(token_ids, dtype=tf.int32),
        }

    def decode(self, token_ids, skip_structural=True):
        """Ids back to text: WordPiece pieces joined, '##' merged."""
        skip = set(self.structural_token_ids) if skip_structural else set()
        words = []
        for i in token_ids:
            i = int(i)
            if i in skip:
                continue
            token = self.vocabulary[i]
            if token.startswith("##") and words:
                words[-1] += token[2:]
            else:
                words.append(token)
        return " ".join(words)

    def save_vocabulary(self, path):
        """Writes the vocabulary as vocab.txt (one token per line)."""
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(self.vocabulary) + "\n")
        os.replace(tmp, path)

    @classmethod
    def from_config(cls, vocabulary, config):
        """A tokenizer from a vocabulary and `config()`'s settings; the
        vocabulary must match the recorded SHA-256."""
        tokenizer = cls(vocabulary, max_length=config["max_length"],
                        lowercase=config["lowercase"],
                        strip_accents=config["strip_accents"],
                        unicode_spaces=config.get("unicode_spaces", False))
        if tokenizer.vocabulary_sha256() != config["vocabulary_sha256"]:
            raise ValueError("`vocabulary` does not match the SHA-256 "
                             "recorded with the tokenizer settings.")
        return tokenizer

    def vocabulary_sha256(self):
        text = "\n".join(self.vocabulary) + "\n"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def config(self):
        """What an app needs to produce identical ids (see export)."""
        return {
            "max_length": self.max_length,
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "unicode_spaces": self.unicode_spaces,
            "contract": CONTRACT,
            "vocabulary_size": self.vocabulary_size,
            "vocabulary_sha256": self.vocabulary_sha256(),
            "cls_id": self.cls_id, "sep_id": self.sep_id,
            "pad_id": self.pad_id, "mask_id": self.mask_id,
            "unk_id": self.unk_id,
        }

    def encode_dataset(self, dataset, batch_size=32):
        """Maps a TextDataset.tf_dataset(...) to (features, label) batches.

        Private attributes are kept as a third element: (features, label,
        private).
        """
        def encode(batch):
            features = self(batch["text"])
            return features, batch["label"], batch["private"]

        return dataset.batch(batch_size).map(
            encode, num_parallel_calls=tf.data.AUTOTUNE)
