"""The privatized corpus directory: the one owner of its layout.

    <output_dir>/
        <output of input 1>   line i = the privatized text i of input 1
        <output of input 2>   ...
        manifest.json         written LAST: mechanism, parameters, the
                              guarantee, tokenization, the embedding table,
                              every input (lines, bytes, SHA-256) and output
                              (lines, bytes, SHA-256), tfdptext version,
                              the command
        .tfdptext-blocks/     while the job runs only: blocks of privatized
                              lines, removed before the manifest is written

An output file is named after its input (`texts.txt` -> `texts.txt`; a
TFRecord input `train.tfrecord` -> `train.tfrecord.txt`); when two inputs
share a name, or a name is taken by the layout, every output is prefixed
with its input's index (`00000-texts.txt`). The manifest maps each input to
its output. Each output line is one text, UTF-8, ended by "\\n": an
output has exactly as many lines as its input has texts.

A job writes only into an empty (or new) directory, and writes the
manifest after checking that every output is complete: a directory without
manifest.json is an unfinished or failed job. Files are written under a
temporary name and renamed (atomic on local disks).

manifest.json describes the raw inputs too (paths, line counts, SHA-256):
it is the data owner's record. Publish the privatized files without it, or
without its "inputs", when the raw corpus must stay unidentifiable (a
digest lets anyone who can guess a whole raw file confirm the guess).

Needs apache-beam (its FileSystems) when called; importing it does not.
"""

import json
import os
import uuid

from tfdptext import runfiles
from tfdptext.errors import TfdptextError
from tfdptext.version import __version__

MANIFEST = "manifest.json"
BLOCKS = ".tfdptext-blocks"
FORMAT = "tfdptext-privatized-corpus"
FORMAT_VERSION = 1
TEXT_SUFFIX = ".txt"
RESERVED = (MANIFEST, BLOCKS)
MANIFEST_KEYS = ("format", "format_version", "mechanism", "parameters",
                 "guarantee", "guarantee_text", "inputs", "outputs")
LAYOUT = ("one output line per input text, in order: line i (0-based) of "
          "an input's output file is the privatized text i of that input "
          "(line i of a text file, record i of a TFRecord file)")
RANDOMNESS = ("os.urandom, fresh noise for every token of every line (no "
              "seed: no two lines share noise)")


class OutputDirError(TfdptextError):
    """The output directory cannot be used, or a job's output is
    incomplete; the message names it."""


def _filesystems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def _is_local(path):
    return _filesystems().get_scheme(path) is None


def join(output_dir, *names):
    return _filesystems().join(output_dir, *names)


def output_names(paths, input_format):
    """The output file name of each input path (see the module doc)."""
    suffix = TEXT_SUFFIX if input_format == "tfrecord" else ""
    names = [_filesystems().split(p)[1] + suffix for p in paths]
    clash = len(set(names)) < len(names) or any(
        n in RESERVED or n.startswith(".") for n in names)
    if clash:
        names = [f"{i:05d}-{n}" for i, n in enumerate(names)]
    return names


def check_empty(output_dir, flag="output_dir"):
    """Raises OutputDirError unless `output_dir` is absent or an empty
    directory."""
    if _is_local(output_dir):
        runfiles.check_output_path(output_dir, flag, OutputDirError)
        entries = sorted(os.listdir(output_dir)) \
            if os.path.isdir(output_dir) else []
    else:
        [result] = _filesystems().match([join(output_dir, "*")])
        entries = sorted(m.path for m in result.metadata_list)
    if entries:
        raise OutputDirError(
            f"`{flag}` {output_dir} is not empty ({len(entries)} entries, "
            f"e.g. {entries[0]}); choose a new or empty directory: a corpus "
            "job never writes over files (a failed job leaves no "
            f"{MANIFEST}: remove its directory and run again).")


def write_atomically(path, chunks):
    """Writes the byte strings `chunks` to `path` under a temporary name in
    the same directory, then renames it."""
    from apache_beam.io.filesystem import CompressionTypes

    directory, name = _filesystems().split(path)
    tmp = _filesystems().join(directory,
                              f".{name}.tmp-{uuid.uuid4().hex[:12]}")
    with _filesystems().create(
            tmp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        for chunk in chunks:
            f.write(chunk)
    _filesystems().rename([tmp], [path])


def _open(path):
    from apache_beam.io.filesystem import CompressionTypes

    return _filesystems().open(path,
                               compression_type=CompressionTypes.UNCOMPRESSED)


def lines_bytes(lines):
    """Lines as the bytes of a UTF-8 text file ("\\n" after each)."""
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def block_path(output_dir, file_index, block):
    return join(output_dir, BLOCKS, f"{file_index:05d}", f"{block:09d}.txt")


def write_block(output_dir, file_index, block, lines):
    """Writes a block of privatized lines; returns its path."""
    path = block_path(output_dir, file_index, block)
    write_atomically(path, [lines_bytes(lines)])
    return path


def assemble(output_dir, name, blocks):
    """Writes the output file `name` as the concatenation of the block
    files `blocks` (in order), then removes them."""
    def chunks():
        for path in blocks:
            with _open(path) as f:
                yield from iter(lambda: f.read(1 << 20), b"")

    write_atomically(join(output_dir, name), chunks())
    if blocks:
        _filesystems().delete(list(blocks))


def remove_blocks(output_dir):
    """Removes the blocks folder (empty once every output is assembled)."""
    path = join(output_dir, BLOCKS)
    if _filesystems().exists(path):
        _filesystems().delete([path])


def check_outputs(output_dir, input_files):
    """{output name: {"lines", "bytes", "sha256"}} of every output file;
    raises OutputDirError when one is missing or does not have one line
    per input text."""
    import hashlib

    records = {}
    for source in input_files:
        path = join(output_dir, source.output)
        if not _filesystems().exists(path):
            raise OutputDirError(f"{path}: no such file; the job did not "
                                 "write every output.")
        digest, lines, size = hashlib.sha256(), 0, 0
        with _open(path) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
                lines += chunk.count(b"\n")
                size += len(chunk)
        if lines != source.lines:
            raise OutputDirError(
                f"{path} has {lines} lines, its input {source.path} has "
                f"{source.lines} texts; the output is incomplete.")
        records[source.output] = {"lines": lines, "bytes": size,
                                  "sha256": digest.hexdigest()}
    return records


def make_manifest(*, config, mechanism, input_files, outputs, command=None,
                  pipeline_args=(), statistics=None):
    """The manifest of a finished job (a JSON-able dict)."""
    from tfdptext.corpus import mechanisms

    guarantee = mechanism.guarantee()
    parameters = mechanisms.spec(config.mechanism).parameters(config)
    parameters.update(max_tokens=config.max_tokens,
                      batch_size=config.batch_size)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "tfdptext_version": __version__,
        "command": command,
        "mechanism": config.mechanism,
        "parameters": parameters,
        "guarantee": guarantee.to_dict(),
        "guarantee_text": str(guarantee),
        "randomness": RANDOMNESS,
        "long_lines": f"a text of more than {config.max_tokens} tokens is "
        f"privatized in consecutive pieces of at most {config.max_tokens} "
        "tokens, all of them: nothing is dropped",
        **mechanism.describe(),
        "input_format": config.input_format,
        "tfrecord_feature": config.tfrecord_feature
        if config.input_format == "tfrecord" else None,
        "layout": LAYOUT,
        "inputs": [f.to_dict() for f in input_files],
        "outputs": outputs,
        "statistics": statistics or {},
        "pipeline_options": list(pipeline_args),
        "config": config.to_dict(),
    }


def write_manifest(output_dir, manifest):
    """Writes manifest.json (atomically): call it last."""
    text = json.dumps(manifest, indent=2, sort_keys=False) + "\n"
    write_atomically(join(output_dir, MANIFEST), [text.encode("utf-8")])


def read_manifest(output_dir):
    """The manifest of a finished job in a local `output_dir`; raises
    OutputDirError naming the file when it is missing, corrupt or lacks a
    key."""
    return runfiles.read_json(os.path.join(output_dir, MANIFEST),
                              OutputDirError, required=MANIFEST_KEYS,
                              what="corpus manifest")
