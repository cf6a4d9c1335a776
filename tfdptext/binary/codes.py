"""The binary codes directory: the one owner of its files.

A codes directory (written by `tfdptext-binarize`, read by BRR)::

    codes.npy     uint8, shape (V, bits // 8): row i is word i's code,
                  packed with `np.packbits(bits, axis=1)` (numpy's default
                  bit order: the first bit is the most significant bit of
                  the first byte)
    vocab.txt     the V words, one per line, UTF-8, in the same order
    codes.json    written last: format and version, bits, vocabulary
                  size, bit order, special token ids, the size and SHA-256
                  of codes.npy and vocab.txt, and the caller's metadata
                  (source, training settings, report)

`save_codes` writes the three files into a partial sibling directory
(`runfiles.start_partial`) and renames it into place, so a process killed
at any instant leaves either nothing or a complete directory. The target
must be absent or an empty directory. `load_codes` checks every file
(shape, size, checksum, version) and raises `CodesError` naming the file.

`hamming_distances` is the pure helper for distances between packed codes.

Pure numpy (no TensorFlow import).
"""

import dataclasses
import os
import shutil

import numpy as np

from tfdptext import runfiles
from tfdptext.errors import ArgumentError
from tfdptext.errors import TfdptextError
from tfdptext.rundir import write_json
from tfdptext.version import __version__

CODES = "codes.npy"
VOCAB = "vocab.txt"
METADATA = "codes.json"
FILES = (CODES, VOCAB, METADATA)

FORMAT = "tfdptext-binary-codes"
# The layout version in codes.json; readers refuse any other.
FORMAT_VERSION = 1
BIT_ORDER = "big"  # np.packbits' default
BITS_PER_BYTE = 8
# The keys save_codes writes itself; metadata may not replace them.
RESERVED_KEYS = ("format", "format_version", "tfdptext_version", "bits",
                 "vocabulary_size", "bit_order", "special_token_ids",
                 "files")
# Rows of the pairwise table hamming_distances builds at once (bounds its
# temporary XOR array to about 16 MiB per 1,000 columns of 256 bits).
_HAMMING_CHUNK = 512


class CodesError(TfdptextError):
    """A codes directory cannot be written or read; the message names the
    directory or file and what is wrong."""


def check_bits(bits, name="bits"):
    """`bits` as an int if it is a positive multiple of 8, else raises."""
    if isinstance(bits, bool) or not isinstance(
            bits, (int, np.integer)) or bits < BITS_PER_BYTE or \
            bits % BITS_PER_BYTE:
        raise ArgumentError(
            f"`{name}` must be a positive multiple of 8 (8, 16, ..., 256, "
            f"...), received {bits!r}.")
    return int(bits)


def check_bit_array(bits_array, name="bits_array"):
    """`bits_array` as a uint8 (V, bits) array of 0 and 1, else raises."""
    array = np.asarray(bits_array)
    if array.ndim != 2 or array.shape[0] < 1:
        raise ArgumentError(
            f"`{name}` must be a 2-D (words, bits) array with at least one "
            f"row, received shape {array.shape}.")
    check_bits(array.shape[1], f"{name}.shape[1]")
    if array.dtype == bool:
        return array.astype(np.uint8)
    if not np.issubdtype(array.dtype, np.integer) and not np.issubdtype(
            array.dtype, np.floating):
        raise ArgumentError(f"`{name}` must hold numbers 0 and 1, received "
                            f"dtype {array.dtype}.")
    if not np.isin(array, (0, 1)).all():
        raise ArgumentError(f"`{name}` must hold only 0 and 1; found "
                            f"{np.setdiff1d(np.unique(array), (0, 1))[:5]}.")
    return array.astype(np.uint8)


def pack(bits_array):
    """(V, bits) {0, 1} -> (V, bits // 8) uint8, numpy's default order."""
    return np.packbits(check_bit_array(bits_array), axis=1)


def hamming_distances(packed_a, packed_b):
    """Hamming distances between packed codes: an (n, m) int32 array.

    Args:
        packed_a: (n, B) or (B,) uint8 packed codes.
        packed_b: (m, B) or (B,) uint8 packed codes, same B.

    Example:
    >>> a = np.packbits([[1, 0, 1, 0, 0, 0, 0, 0]], axis=1)
    >>> hamming_distances(a, np.zeros((2, 1), np.uint8))
    array([[2, 2]], dtype=int32)
    """
    a = np.atleast_2d(np.asarray(packed_a))
    b = np.atleast_2d(np.asarray(packed_b))
    for name, array in (("packed_a", a), ("packed_b", b)):
        if array.dtype != np.uint8 or array.ndim != 2:
            raise ArgumentError(
                f"`{name}` must be a (n, bytes) uint8 array of packed codes, "
                f"received dtype {array.dtype} and shape {array.shape}.")
    if a.shape[1] != b.shape[1]:
        raise ArgumentError(
            f"`packed_a` and `packed_b` must have the same code length, "
            f"received {a.shape[1]} and {b.shape[1]} bytes.")
    out = np.empty((a.shape[0], b.shape[0]), np.int32)
    for start in range(0, a.shape[0], _HAMMING_CHUNK):
        rows = a[start:start + _HAMMING_CHUNK, None, :]
        out[start:start + _HAMMING_CHUNK] = np.bitwise_count(
            rows ^ b[None, :, :]).sum(axis=2, dtype=np.int32)
    return out


@dataclasses.dataclass(frozen=True)
class BinaryCodes:
    """A vocabulary's binary codes as `load_codes` reads them.

    Attributes:
        words: the words, in code order (tuple of str).
        packed: (V, num_bits // 8) uint8, np.packbits order.
        num_bits: bits per code (a multiple of 8).
        special_token_ids: ids that are not words (a preset's [PAD],
            [CLS], ...); empty for word2vec tables.
        metadata: codes.json's object (source, training, report, ...).

    Example:
    >>> codes = load_codes("codes/glove256")
    >>> codes.bits.shape, codes.bits.dtype
    ((33860, 256), dtype('uint8'))
    >>> hamming_distances(codes.packed[:1], codes.packed).shape
    (1, 33860)
    """

    words: tuple
    packed: np.ndarray
    num_bits: int
    special_token_ids: tuple = ()
    metadata: dict = dataclasses.field(default_factory=dict)

    @property
    def bits(self):
        """The unpacked codes: (V, num_bits) uint8 of 0 and 1."""
        return np.unpackbits(self.packed, axis=1, count=self.num_bits)

    def __len__(self):
        return len(self.words)


def _check_words(words, num_rows):
    words = list(words)
    if len(words) != num_rows:
        raise ArgumentError(
            f"`words` has {len(words)} entries but `bits_array` has "
            f"{num_rows} rows; they must match.")
    seen = {}
    for i, word in enumerate(words):
        if not isinstance(word, str) or not word:
            raise ArgumentError(
                f"`words`[{i}] must be a non-empty string, received "
                f"{word!r}.")
        if "\n" in word or "\r" in word:
            raise ArgumentError(
                f"`words`[{i}] {word!r} holds a line break; vocab.txt "
                "stores one word per line.")
        if word in seen:
            raise ArgumentError(
                f"`words`[{i}] {word!r} repeats `words`[{seen[word]}]; a "
                "word must have one code.")
        seen[word] = i
    return words


def _check_special_ids(ids, size, error=ArgumentError, where=
                       "`special_token_ids`"):
    checked = []
    for value in ids:
        if isinstance(value, bool) or not isinstance(
                value, (int, np.integer)) or not 0 <= value < size:
            raise error(f"{where}: {value!r} is not a word id in "
                        f"[0, {size - 1}].")
        checked.append(int(value))
    return tuple(sorted(set(checked)))


def _check_target(output_dir):
    """Raises CodesError unless `output_dir` is absent or an empty
    directory."""
    runfiles.check_output_path(output_dir, error=CodesError)
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        held = sorted(os.listdir(output_dir))
        shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
        raise CodesError(
            f"`output_dir` {output_dir} is not empty (it holds {shown}); "
            "codes are written only into a new or empty directory: choose "
            "another or empty it.")


def check_output_dir(output_dir):
    """Raises CodesError unless `save_codes` can write `output_dir` (absent
    or an empty directory, under a parent that is a directory)."""
    if not isinstance(output_dir, str) or not output_dir:
        raise ArgumentError("`output_dir` must be a non-empty path, "
                            f"received {output_dir!r}.")
    _check_target(output_dir)


def save_codes(output_dir, words, bits_array, metadata=None, *,
               special_token_ids=()):
    """Writes a codes directory atomically; returns codes.json's object.

    Args:
        output_dir: absent or an empty directory (anything else is
            refused with a CodesError naming it).
        words: the V words (non-empty, unique, no line breaks).
        bits_array: (V, bits) array of 0 and 1, bits a multiple of 8.
        metadata: JSON-serialisable dict stored in codes.json beside the
            format's own keys (e.g. "source", "training", "report").
        special_token_ids: ids of `words` that are not words ([PAD], ...).
    """
    check_output_dir(output_dir)
    bits_array = check_bit_array(bits_array)
    words = _check_words(words, bits_array.shape[0])
    special = _check_special_ids(special_token_ids, len(words))
    metadata = dict(metadata or {})
    clash = sorted(set(metadata) & set(RESERVED_KEYS))
    if clash:
        raise ArgumentError(f"`metadata` may not set {clash}; save_codes "
                            "writes those keys itself.")
    packed = np.packbits(bits_array, axis=1)
    partial = runfiles.start_partial(output_dir)
    try:
        np.save(os.path.join(partial, CODES), packed, allow_pickle=False)
        with open(os.path.join(partial, VOCAB), "w", encoding="utf-8",
                  newline="\n") as f:
            f.write("".join(word + "\n" for word in words))
        record = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "tfdptext_version": __version__,
            "bits": int(bits_array.shape[1]),
            "vocabulary_size": len(words),
            "bit_order": BIT_ORDER,
            "special_token_ids": list(special),
            "files": {name: {"bytes": os.path.getsize(
                os.path.join(partial, name)), "sha256": runfiles.sha256_file(
                    os.path.join(partial, name))} for name in (CODES, VOCAB)},
            **metadata,
        }
        write_json(os.path.join(partial, METADATA), record)
        os.rename(partial, output_dir)  # replaces an empty directory
    except OSError as err:
        shutil.rmtree(partial, ignore_errors=True)
        raise CodesError(f"`output_dir` {output_dir}: cannot write the "
                         f"codes ({err.strerror or err}).") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return record


def load_codes(directory, expected_words=None, source="that vocabulary"):
    """The `BinaryCodes` in `directory`, every file checked.

    Raises CodesError naming the file when one is missing, truncated,
    replaced (size or SHA-256 differ from codes.json), of another format
    version, or inconsistent with the others (shape, vocabulary length).
    With `expected_words`, the codes must be of exactly those words in
    that order (row i = token id i), else CodesError names `directory` and
    `source` (what the words are, e.g. "preset minilm").
    """
    if not isinstance(directory, str) or not os.path.isdir(directory):
        raise CodesError(f"`codes_dir`: no such directory {directory!r}.")
    meta_path = os.path.join(directory, METADATA)
    record = runfiles.read_json(
        meta_path, CodesError, what="codes metadata",
        required=("format", "format_version", "bits", "vocabulary_size",
                  "bit_order", "special_token_ids", "files"))
    if record["format"] != FORMAT:
        raise CodesError(f"{meta_path}: format {record['format']!r} is not "
                         f"{FORMAT!r}; is this a tfdptext codes directory?")
    if record["format_version"] != FORMAT_VERSION:
        raise CodesError(
            f"{meta_path}: format version {record['format_version']!r}; this "
            f"tfdptext reads version {FORMAT_VERSION}: run tfdptext-binarize "
            "again.")
    try:
        num_bits = check_bits(record["bits"], "bits")
    except ArgumentError as err:
        raise CodesError(f"{meta_path}: {err}") from None
    size = record["vocabulary_size"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise CodesError(f"{meta_path}: vocabulary_size {size!r} is not a "
                         "positive integer.")
    if record["bit_order"] != BIT_ORDER:
        raise CodesError(f"{meta_path}: bit_order {record['bit_order']!r}; "
                         f"only {BIT_ORDER!r} (np.packbits) is read.")
    _check_files(directory, record)
    packed = _read_packed(os.path.join(directory, CODES), size, num_bits)
    words = _read_vocab(os.path.join(directory, VOCAB), size)
    special = record["special_token_ids"]
    if not isinstance(special, list):
        raise CodesError(f"{meta_path}: special_token_ids must be a list.")
    special = _check_special_ids(special, size, CodesError,
                                 f"{meta_path}: special_token_ids")
    if expected_words is not None and tuple(words) != tuple(expected_words):
        raise CodesError(
            f"{directory} holds codes for {len(words)} words that are not "
            f"the vocabulary of {source} ({len(expected_words)} words, in "
            "id order); binarize that table with tfdptext-binarize.")
    return BinaryCodes(words=tuple(words), packed=packed, num_bits=num_bits,
                       special_token_ids=special, metadata=record)


def _check_files(directory, record):
    files = record["files"]
    for name in (CODES, VOCAB):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise CodesError(f"{path}: no such file; the codes directory is "
                             "incomplete.")
        entry = files.get(name) if isinstance(files, dict) else None
        if not isinstance(entry, dict):
            raise CodesError(f"{os.path.join(directory, METADATA)}: no size "
                             f"and SHA-256 for {name}; the file is damaged.")
        if os.path.getsize(path) != entry.get("bytes"):
            raise CodesError(
                f"{path} is {os.path.getsize(path)} bytes, {METADATA} says "
                f"{entry.get('bytes')}: it was truncated or replaced.")
        if runfiles.sha256_file(path) != entry.get("sha256"):
            raise CodesError(f"{path}: SHA-256 differs from {METADATA}'s: the "
                             "file was replaced or corrupted.")


def _read_packed(path, size, num_bits):
    try:
        packed = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise CodesError(f"{path} is not a readable .npy array ({err}); it "
                         "is truncated or corrupt.") from None
    expected = (size, num_bits // BITS_PER_BYTE)
    if packed.dtype != np.uint8 or packed.shape != expected:
        raise CodesError(
            f"{path}: dtype {packed.dtype}, shape {packed.shape}; codes.json "
            f"says uint8 of shape {expected} ({size} words of {num_bits} "
            "bits).")
    return packed


def _read_vocab(path, size):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise CodesError(f"{path}:{line}: bytes that are not UTF-8 "
                         f"({err.reason}).") from None
    if not text.endswith("\n"):
        raise CodesError(f"{path} does not end with a line break; it is "
                         "truncated.")
    words = text[:-1].split("\n")
    if len(words) != size:
        raise CodesError(f"{path} holds {len(words)} words; {METADATA} and "
                         f"{CODES} hold {size}.")
    for line, word in enumerate(words, start=1):
        if not word:
            raise CodesError(f"{path}:{line}: empty word.")
    return words


__all__ = ["BinaryCodes", "CodesError", "FILES", "check_bits",
           "check_output_dir", "hamming_distances", "load_codes", "pack",
           "save_codes"]
