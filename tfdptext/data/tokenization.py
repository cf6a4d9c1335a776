"""WordPiece tokenization matching an uncased BERT encoder."""

import hashlib
import os

import tensorflow as tf

from tfdptext.privacy import validation
from tfdptext.vocabulary import SPECIAL_TOKENS  # noqa: F401 (re-exported)


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


class TextTokenizer:
    """Text -> {"token_ids", "padding_mask", "segment_ids"} for BERT models.

    Lowercases and strips accents (as the uncased models were trained; the
    keras-hub tokenizer loaded from a Hugging Face directory does not strip
    accents, so accented words would become [UNK]), splits with WordPiece,
    adds [CLS] ... [SEP], truncates to `max_length` (keeping [SEP]) and pads.

    Args:
        vocabulary: path to a vocab.txt or a list of tokens.
        max_length: output length, >= 3.
        lowercase, strip_accents: the uncased model's normalisation.

    Example:
    >>> tok = TextTokenizer("vocab.txt", max_length=16)
    >>> features = tok(["A café review."])
    >>> features["token_ids"].shape
    TensorShape([1, 16])
    """

    def __init__(self, vocabulary, max_length=128, lowercase=True,
                 strip_accents=True):
        import keras_hub

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
        index = {t: i for i, t in enumerate(self.vocabulary)}
        self.pad_id = index["[PAD]"]
        self.unk_id = index["[UNK]"]
        self.cls_id = index["[CLS]"]
        self.sep_id = index["[SEP]"]
        self.mask_id = index["[MASK]"]
        self._wordpiece = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=self.vocabulary, lowercase=self.lowercase,
            strip_accents=self.strip_accents, oov_token="[UNK]",
            dtype="int32")
        self._packer = keras_hub.layers.StartEndPacker(
            sequence_length=self.max_length, start_value=self.cls_id,
            end_value=self.sep_id, pad_value=self.pad_id,
            return_padding_mask=True)

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

    def tokenize(self, texts):
        """WordPiece ids without special tokens (ragged)."""
        return self._wordpiece(tf.convert_to_tensor(texts))

    def __call__(self, texts):
        token_ids, padding_mask = self._packer(self.tokenize(texts))
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
                        strip_accents=config["strip_accents"])
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
