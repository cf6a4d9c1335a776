"""Reading the real-valued embedding table to binarize.

Two sources, named by one string (`load_embeddings`, the program's
`--embeddings`):

- a word2vec TEXT file path: an optional header line "count dim", then
  one line per word, "word v1 ... vd", fields separated by single spaces
  (GloVe files are the same without the header). Words may hold any
  character but a space or a line break. Nothing is skipped: a line with
  the wrong number of values, a value that is not a number or not finite
  (in float32), an empty or repeated word, bytes that are not UTF-8, or a
  header whose count disagrees with the file is an `EmbeddingsError`
  naming the file and line.
- `preset:<name-or-dir>` (`preset:minilm`, `preset:/path/to/preset`): the
  token embedding table of a keras-hub BERT preset
  (`tfdptext.models.load_backbone`) with its WordPiece vocabulary, and the
  ids of its special tokens ([PAD], [UNK], [CLS], [SEP], [MASK] and the
  [unused*] slots). Nothing is excluded: the table keeps every id, so id i
  of the tokenizer is row i; callers decide what to do with the special
  ids.
"""

import dataclasses
import os

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.errors import TfdptextError
from tfdptext.privacy import validation

PRESET_PREFIX = "preset:"
DEFAULT_PRESET = "minilm"
# Any value: the tokenizer is only asked for its vocabulary.
_TOKENIZER_LENGTH = 16


class EmbeddingsError(TfdptextError):
    """An embedding table cannot be read; the message names the file (and
    line) or the preset and what is wrong."""


@dataclasses.dataclass(frozen=True)
class EmbeddingTable:
    """A vocabulary and its real-valued embeddings.

    Attributes:
        words: the V words (tuple of str); row i of `matrix` is words[i].
        matrix: (V, dim) float32, finite.
        special_token_ids: ids that are not words (presets); () otherwise.
        source: what was read, for the record ("word2vec:<path>",
            "preset:<name>").
    """

    words: tuple
    matrix: np.ndarray
    special_token_ids: tuple = ()
    source: str = ""


def _max_words(max_words):
    if max_words is None:
        return None
    return validation.check_int("max_words", max_words, minimum=1)


def _is_count(field):
    return field.isascii() and field.isdigit()


def _parse_values(fields, path, number, dim):
    if len(fields) != dim + 1:
        raise EmbeddingsError(
            f"{path}:{number}: {len(fields) - 1} values after the word, "
            f"expected {dim} (fields are separated by single spaces; words "
            "may not contain spaces).")
    try:
        values = np.asarray(fields[1:], dtype=np.float64)
    except ValueError:
        bad = next(v for v in fields[1:] if not _is_float(v))
        raise EmbeddingsError(f"{path}:{number}: value {bad!r} is not a "
                              "number.") from None
    with np.errstate(over="ignore"):  # too large for float32: refused
        values = values.astype(np.float32)
    if not np.isfinite(values).all():
        position = int(np.flatnonzero(~np.isfinite(values))[0])
        raise EmbeddingsError(
            f"{path}:{number}: value {fields[1 + position]!r} (dimension "
            f"{position + 1}) is not finite in float32; the table is "
            "refused.")
    return values


def _is_float(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _lines(path):
    """(line number, text) of every line, decoded as UTF-8 (a leading byte
    order mark dropped), without its line break."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise EmbeddingsError(
                    f"{path}:{number}: bytes that are not UTF-8 "
                    f"({err.reason} at byte {err.start}).") from None
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield number, text.rstrip("\n").rstrip("\r").rstrip(" ")


def read_word2vec(path, *, max_words=None):
    """(words, matrix) from a word2vec / GloVe text file.

    Args:
        path: the file (UTF-8; header "count dim" optional).
        max_words: read only the first `max_words` words (>= 1); None: all
            (and a header's count must then match the file).

    Returns:
        words: list of V str, in file order.
        matrix: (V, dim) float32.

    Raises EmbeddingsError naming the file and line for anything the
    module docstring lists; ArgumentError for a bad `max_words`.

    Example:
    >>> words, matrix = read_word2vec("glove.840B.300d_filtered.txt")
    >>> len(words), matrix.shape
    (33860, (33860, 300))
    """
    limit = _max_words(max_words)
    if not isinstance(path, str) or not os.path.isfile(path):
        raise EmbeddingsError(f"`embeddings`: no such file {path!r}.")
    words, rows, seen = [], [], {}
    header_count, dim = None, None
    for number, text in _lines(path):
        if limit is not None and len(words) >= limit:
            break
        fields = text.split(" ")
        if not text:
            raise EmbeddingsError(f"{path}:{number}: empty line.")
        if number == 1 and len(fields) == 2 and all(map(_is_count, fields)):
            header_count, dim = int(fields[0]), int(fields[1])
            if header_count < 1 or dim < 1:
                raise EmbeddingsError(
                    f"{path}:1: header {text!r} must give a word count and "
                    "a dimension, both >= 1.")
            continue
        if dim is None:
            dim = len(fields) - 1
            if dim < 1:
                raise EmbeddingsError(f"{path}:{number}: a word without "
                                      "values.")
        if header_count is not None and len(words) == header_count:
            raise EmbeddingsError(
                f"{path}:{number}: the header says {header_count} words, but "
                "the file has more lines.")
        word = fields[0]
        if not word:
            raise EmbeddingsError(f"{path}:{number}: empty word (the line "
                                  "starts with a space).")
        rows.append(_parse_values(fields, path, number, dim))
        if word in seen:
            raise EmbeddingsError(f"{path}:{number}: the word {word!r} "
                                  f"repeats line {seen[word]}.")
        seen[word] = number
        words.append(word)
    if not words:
        raise EmbeddingsError(f"{path}: no words (empty file"
                              + (" after the header)." if dim else ")."))
    if limit is None and header_count is not None and \
            len(words) != header_count:
        raise EmbeddingsError(
            f"{path}: the header says {header_count} words, the file holds "
            f"{len(words)}; it is truncated or the header is wrong.")
    return words, np.stack(rows).astype(np.float32, copy=False)


def read_preset(preset=DEFAULT_PRESET, *, max_words=None):
    """(words, matrix, special_token_ids) of a keras-hub BERT preset.

    Args:
        preset: "minilm" (the default, installed MiniLM), a keras-hub
            preset name or handle, or a local preset directory
            (`tfdptext.models.resolve_preset`).
        max_words: keep only ids below `max_words`; None: all.

    Returns:
        words: the tokenizer's vocabulary (id order).
        matrix: (V, hidden) float32, the token embedding table.
        special_token_ids: sorted ids that are not words ([PAD], [UNK],
            [CLS], [SEP], [MASK], [unused*]).

    Example:
    >>> words, matrix, special = read_preset("minilm")
    >>> matrix.shape, words[special[0]]
    ((30522, 384), '[PAD]')
    """
    from tfdptext import models

    limit = _max_words(max_words)
    tokenizer = models.load_tokenizer(preset, max_length=_TOKENIZER_LENGTH)
    backbone = models.load_backbone(preset)
    matrix = np.asarray(models.token_embedding_table(backbone), np.float32)
    words = list(tokenizer.vocabulary)
    if matrix.ndim != 2 or matrix.shape[0] != len(words):
        raise EmbeddingsError(
            f"preset {preset!r}: the token embedding table has shape "
            f"{matrix.shape} but the vocabulary {len(words)} tokens; the "
            "preset is inconsistent.")
    if not np.isfinite(matrix).all():
        raise EmbeddingsError(f"preset {preset!r}: the token embedding "
                              "table holds non-finite values.")
    special = tuple(int(i) for i in tokenizer.special_token_ids)
    if limit is not None:
        words, matrix = words[:limit], matrix[:limit]
        special = tuple(i for i in special if i < limit)
    return words, matrix, special


def parse_source(spec):
    """("preset", name) or ("word2vec", path) for an `--embeddings` value;
    checks that the file exists or that the preset resolves (a missing
    MiniLM package or preset directory is an error), reading nothing."""
    if not isinstance(spec, str) or not spec:
        raise ArgumentError(
            "`embeddings` must be a word2vec text file path or "
            f"'{PRESET_PREFIX}<name-or-dir>', received {spec!r}.")
    if spec.startswith(PRESET_PREFIX):
        name = spec[len(PRESET_PREFIX):]
        if not name:
            raise ArgumentError(
                f"`embeddings` {spec!r}: name a preset after "
                f"'{PRESET_PREFIX}' (e.g. {PRESET_PREFIX}{DEFAULT_PRESET}).")
        from tfdptext.models import presets

        presets.resolve_preset(name)  # EncoderNotFoundError if unusable
        return "preset", name
    if not os.path.exists(spec):
        raise EmbeddingsError(
            f"`embeddings`: no such file {spec!r} (a word2vec text file, or "
            f"'{PRESET_PREFIX}<name-or-dir>' for a keras-hub preset).")
    if not os.path.isfile(spec):
        raise EmbeddingsError(f"`embeddings` {spec!r} is not a file.")
    return "word2vec", spec


def load_embeddings(spec, *, max_words=None):
    """The `EmbeddingTable` that `spec` names: a word2vec text file path
    or `preset:<name-or-dir>` (module docstring).

    Example:
    >>> table = load_embeddings("preset:minilm", max_words=5000)
    >>> table.matrix.shape, table.special_token_ids[:2]
    ((5000, 384), (0, 1))
    """
    kind, name = parse_source(spec)
    if kind == "preset":
        words, matrix, special = read_preset(name, max_words=max_words)
        return EmbeddingTable(tuple(words), matrix, special,
                              f"{PRESET_PREFIX}{name}")
    words, matrix = read_word2vec(name, max_words=max_words)
    return EmbeddingTable(tuple(words), matrix, (),
                          f"word2vec:{os.path.abspath(name)}")


__all__ = ["DEFAULT_PRESET", "EmbeddingTable", "EmbeddingsError",
           "PRESET_PREFIX", "load_embeddings", "parse_source", "read_preset",
           "read_word2vec"]
