"""Text <-> token ids for corpus jobs: WordPiece, or whole words.

A codec turns a batch of texts into one int64 id array per text
(`encode`) and ids back into a line of text (`decode`); `describe()` is
what the manifest records about it. Decoded text never holds a newline,
so one input line gives one output line.

- `WordPieceCodec` (dchi, and brr over a preset's codes): uncased WordPiece
  (lowercased, accents stripped, punctuation split off); no [CLS] / [SEP]
  / [PAD] is added; characters WordPiece does not know become [UNK], which
  the mechanism privatizes like any token. Decoding joins "##" pieces to
  the piece before them (a "##" piece that starts a line loses its "##")
  and puts one space between words, so the output is lowercase,
  space-separated text ("hello , world !").
- `WordCodec` (brr over a word list, e.g. GloVe codes): words (\\w+)
  and single punctuation marks, looked up in the list as written, else
  lowercased; a word not in it becomes one fixed word, the list's unknown
  token (<unk>, [UNK] or <UNK>) or, when it has none, its first word that
  is not special (for a frequency-ordered list like GloVe's, its most
  frequent word), and is privatized like any word: never left unchanged
  (that would release it) nor dropped (that would release where it was).
  Decoding joins words with single spaces.

`for_word_list` picks the codec of a codes vocabulary: WordPiece when it
holds BERT's special tokens (codes made from a preset), words otherwise.
"""

import hashlib
import re

import numpy as np

WORDPIECE = "wordpiece"
WORDS = "words"
# The unknown-word tokens WordCodec looks for in a word list, in order.
UNKNOWN_TOKENS = ("<unk>", "[UNK]", "<UNK>")
_WORD = re.compile(r"\w+|[^\w\s]")


def vocabulary_sha256(tokens):
    """The SHA-256 of a vocabulary written one token per line."""
    text = "\n".join(tokens) + "\n"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _as_lists(ids):
    """A tokenizer's output (ragged tensor or nested lists) as lists."""
    return ids.to_list() if hasattr(ids, "to_list") else ids


class WordPieceCodec:
    """WordPiece over a `tfdptext.data.tokenization.TextTokenizer`.

    Example:
    >>> codec = WordPieceCodec(models.load_tokenizer())
    >>> codec.decode(codec.encode(["Hello, World!"])[0])
    'hello , world !'
    """

    kind = WORDPIECE

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.vocabulary = list(tokenizer.vocabulary)

    @property
    def special_token_ids(self):
        """Ids that are not words ([PAD], [UNK], [CLS], [SEP], [MASK],
        [unused*]): never output."""
        return self.tokenizer.special_token_ids

    def encode(self, texts):
        if not texts:
            return []
        ids = _as_lists(self.tokenizer.tokenize(list(texts)))
        return [np.asarray(row, dtype=np.int64) for row in ids]

    def decode(self, ids):
        words = []
        for i in ids:
            piece = self.vocabulary[int(i)]
            if piece.startswith("##"):
                if words:
                    words[-1] += piece[2:]
                    continue
                piece = piece[2:]
            words.append(piece)
        return " ".join(words)

    def describe(self):
        return {
            "kind": self.kind,
            "vocabulary_size": len(self.vocabulary),
            "vocabulary_sha256": vocabulary_sha256(self.vocabulary),
            "lowercase": self.tokenizer.lowercase,
            "strip_accents": self.tokenizer.strip_accents,
            "special_tokens": "no [CLS] / [SEP] / [PAD] added; special "
            "tokens and [unused*] are never output",
            "unknown_words": "characters WordPiece does not know become "
            "[UNK], privatized like any token",
            "detokenization": "'##' pieces joined to the piece before; one "
            "space between words; lowercase output",
        }


class WordCodec:
    """Words and punctuation marks over a word list.

    Args:
        words: the vocabulary, id = position.
        unknown_id: the id every word not in `words` becomes (privatized
            like any word).
    """

    kind = WORDS

    def __init__(self, words, unknown_id):
        self.vocabulary = list(words)
        self.unknown_id = int(unknown_id)
        self.index = {}
        for i, word in enumerate(self.vocabulary):
            self.index.setdefault(word, i)

    def lookup(self, word):
        """The id of `word` as written, else lowercased, else the unknown
        id."""
        found = self.index.get(word)
        if found is None:
            found = self.index.get(word.lower(), self.unknown_id)
        return found

    def encode(self, texts):
        return [np.asarray([self.lookup(w) for w in _WORD.findall(text)],
                           dtype=np.int64) for text in texts]

    def decode(self, ids):
        return " ".join(self.vocabulary[int(i)] for i in ids)

    def describe(self):
        return {
            "kind": self.kind,
            "vocabulary_size": len(self.vocabulary),
            "vocabulary_sha256": vocabulary_sha256(self.vocabulary),
            "lowercase": "words looked up as written, else lowercased",
            "split": "words (\\w+) and single punctuation marks",
            "unknown_words": "mapped to "
            f"{self.vocabulary[self.unknown_id]!r} (id {self.unknown_id}) "
            "and privatized like any word",
            "detokenization": "one space between words",
        }


def unknown_id(words, special_token_ids=()):
    """The id unknown words become in `words`: the first of UNKNOWN_TOKENS
    it holds, else its first word that is not special."""
    for token in UNKNOWN_TOKENS:
        if token in words:
            return words.index(token)
    special = set(int(i) for i in special_token_ids)
    return next(i for i in range(len(words)) if i not in special)


def for_word_list(words, special_token_ids=()):
    """The codec of a codes vocabulary: WordPieceCodec (uncased) when it
    holds [PAD] [UNK] [CLS] [SEP] [MASK] (a BERT preset's vocabulary),
    else WordCodec."""
    from tfdptext.vocabulary import SPECIAL_TOKENS

    words = list(words)
    if all(token in words for token in SPECIAL_TOKENS):
        from tfdptext.data import tokenization  # TensorFlow

        return WordPieceCodec(tokenization.TextTokenizer(words))
    return WordCodec(words, unknown_id(words, special_token_ids))
