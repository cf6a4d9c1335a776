"""A corpus job's input files: finding, reading and checking them.

`--input` is a path, a glob or a comma-separated list of them, on any file
system Apache Beam reads (local paths, gs://, ...). Each file is read in
order, one text per unit:

- `text`: one text per line, UTF-8, lines ended by "\\n" (a last line
  without one counts; a "\\r" before it is whitespace to the tokenizer; a
  UTF-8 byte-order mark is dropped). Line i (0-based) of the file is
  text i.
- `tfrecord`: tf.train.Example records; record i's text is its bytes
  feature `--tfrecord_feature` (exactly one value, UTF-8).

Every error is a `CorpusInputError` naming the file and, for a bad line or
record, its number (1-based). The same readers serve the check before the
job (`check_inputs`: every file read through once, with its line count,
size and SHA-256) and the pipeline's workers.

Needs apache-beam (its FileSystems) when called; importing it does not.
"""

import dataclasses
import hashlib
import os

from tfdptext.corpus import config as config_lib
from tfdptext.corpus import outdir
from tfdptext.errors import TfdptextError

_GLOB_CHARACTERS = "*?["
_BOM = "\ufeff"


class CorpusInputError(TfdptextError):
    """An input file is missing, unreadable or not what --input_format
    says; the message names the file (and the line or record)."""


@dataclasses.dataclass(frozen=True)
class InputFile:
    """One checked input file.

    Args:
        index: its position in the job's input list (0-based).
        path: where it is.
        lines: its texts (lines or records).
        bytes: its size.
        sha256: the SHA-256 of its bytes.
        output: the name of its output file in the output directory.
    """

    index: int
    path: str
    lines: int
    bytes: int
    sha256: str
    output: str

    def to_dict(self):
        return dataclasses.asdict(self)


def _filesystems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def _is_local(path):
    return _filesystems().get_scheme(path) is None


def _match(pattern):
    """The files a glob matches, sorted (directories left out)."""
    from apache_beam.io.filesystem import BeamIOError

    if _is_local(pattern):
        pattern = os.path.abspath(pattern)
    try:
        [result] = _filesystems().match([pattern])
    except BeamIOError:
        return []
    paths = sorted(m.path for m in result.metadata_list)
    return [p for p in paths if not (_is_local(p) and os.path.isdir(p))]


def expand(spec):
    """The files `--input` names, in order, each once.

    Raises CorpusInputError naming `input` for a path that does not exist
    or is a directory, and for a glob that matches no file.
    """
    paths = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if any(c in part for c in _GLOB_CHARACTERS):
            found = _match(part)
            if not found:
                raise CorpusInputError(
                    f"`input`: the pattern {part!r} matches no file.")
        else:
            if _is_local(part):
                part = os.path.abspath(part)
                if os.path.isdir(part):
                    raise CorpusInputError(
                        f"`input`: {part} is a directory; name its files "
                        "(e.g. with a glob: dir/*.txt).")
            if not _filesystems().exists(part):
                raise CorpusInputError(f"`input`: no such file {part!r}.")
            found = [part]
        paths += [p for p in found if p not in paths]
    return paths


def _open(path):
    from apache_beam.io.filesystem import CompressionTypes

    try:
        return _filesystems().open(
            path, compression_type=CompressionTypes.UNCOMPRESSED)
    except OSError as err:
        raise CorpusInputError(f"{path} cannot be read: "
                               f"{_first_line(err)}.") from None


def _first_line(err):
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def read_lines(path, digest=None):
    """(line number, text) of every line of a UTF-8 text file, 0-based;
    `digest` (a hashlib object), when given, is fed the file's bytes."""
    with _open(path) as f:
        try:
            for number, raw in enumerate(f):
                if digest is not None:
                    digest.update(raw)
                yield number, _decode_line(path, number, raw)
        except OSError as err:
            raise CorpusInputError(f"{path} cannot be read: "
                                   f"{_first_line(err)}.") from None


def _decode_line(path, number, raw):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorpusInputError(
            f"{path}: line {number + 1} is not UTF-8 (byte {err.start + 1} "
            "of the line); convert the file to UTF-8.") from None
    if number == 0 and text.startswith(_BOM):
        text = text[1:]
    return text.rstrip("\n")


def read_records(path, feature):
    """(record number, text) of every tf.train.Example of a TFRecord file,
    0-based; the text is the bytes feature `feature`."""
    import tensorflow as tf

    iterator = iter(tf.data.TFRecordDataset(path))
    number = 0
    while True:
        try:
            record = next(iterator)
        except StopIteration:
            return
        except tf.errors.OpError as err:
            raise CorpusInputError(
                f"{path}: record {number + 1} cannot be read "
                f"({_first_line(err.message)}); the file is truncated or "
                "not a TFRecord file.") from None
        yield number, _record_text(path, number, record.numpy(), feature)
        number += 1


def _record_text(path, number, data, feature):
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    where = f"{path}: record {number + 1}"
    try:
        example = tf.train.Example.FromString(data)
    except DecodeError:
        raise CorpusInputError(f"{where} is not a tf.train.Example."
                               ) from None
    features = example.features.feature
    if feature not in features:
        raise CorpusInputError(
            f"{where} has no feature {feature!r} (it has "
            f"{sorted(features)}); set --tfrecord_feature.")
    kind = features[feature].WhichOneof("kind")
    values = features[feature].bytes_list.value
    if kind != "bytes_list" or len(values) != 1:
        count = len(getattr(features[feature], kind).value) if kind else 0
        raise CorpusInputError(
            f"{where}: feature {feature!r} must be a bytes feature with one "
            f"value (the text), found {kind or 'no value'} with {count} "
            "value(s).")
    try:
        return values[0].decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorpusInputError(
            f"{where}: feature {feature!r} is not UTF-8 (byte "
            f"{err.start + 1}).") from None


def read_texts(path, input_format,
               feature=config_lib.DEFAULT_TFRECORD_FEATURE):
    """(number, text) of every text of an input file, in order."""
    if input_format == config_lib.TFRECORD:
        return read_records(path, feature)
    return read_lines(path)


class _Digest:
    """SHA-256 and size of the bytes fed to it."""

    def __init__(self):
        self.sha256 = hashlib.sha256()
        self.size = 0

    def update(self, data):
        self.sha256.update(data)
        self.size += len(data)


def _digest_file(path, digest):
    """Feeds the bytes of `path` to `digest`."""
    with _open(path) as f:
        try:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        except OSError as err:
            raise CorpusInputError(f"{path} cannot be read: "
                                   f"{_first_line(err)}.") from None


def scan(path, input_format, feature=config_lib.DEFAULT_TFRECORD_FEATURE):
    """(texts, bytes, sha256) of an input file, read through once; raises
    CorpusInputError at its first bad line or record."""
    digest = _Digest()
    if input_format == config_lib.TFRECORD:
        _digest_file(path, digest)
        texts = read_records(path, feature)
    else:
        texts = read_lines(path, digest)
    count = sum(1 for _ in texts)
    return count, digest.size, digest.sha256.hexdigest()


def check_inputs(config):
    """The job's InputFiles, every file read through and checked."""
    paths = expand(config.input)
    names = outdir.output_names(paths, config.input_format)
    files = []
    for index, (path, name) in enumerate(zip(paths, names)):
        lines, size, sha256 = scan(path, config.input_format,
                                   config.tfrecord_feature)
        files.append(InputFile(index, path, lines, size, sha256, name))
    return files
