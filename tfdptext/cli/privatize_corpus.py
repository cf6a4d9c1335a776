"""Privatizes a text corpus off device, as an Apache Beam pipeline.

    tfdptext-privatize-corpus --mechanism=dchi --eta=100 \\
        --input=texts.txt --output_dir=out/

    tfdptext-privatize-corpus --mechanism=dchi --eta=100 \\
        --input='gs://bucket/corpus/*.tfrecord' --input_format=tfrecord \\
        --output_dir=gs://bucket/private/ -- \\
        --runner=DataflowRunner --project=P --region=R \\
        --temp_location=gs://bucket/tmp --setup_file=./setup.py

Reads --input (a file, a glob or a comma-separated list; text files with
one text per line, or TFRecord files of tf.train.Example with the text in
--tfrecord_feature) and writes one privatized text file per input into
--output_dir (a new or empty directory): line i of an output is the
privatized line (record) i of its input; an empty line stays empty; a line
longer than --max_tokens tokens is privatized in pieces, none dropped.
manifest.json (mechanism, parameters, guarantee, tokenization, inputs and
outputs with line counts and SHA-256, command) is written last: a directory
without it is an unfinished or failed job.

Mechanisms: dchi (--eta; the encoder's WordPiece tokens, --preset, default
MiniLM, or --embeddings; output lowercase, pieces joined back into words)
and brr (--epsilon, --codes). Noise comes from os.urandom, fresh for every
token of every line; there is no seed.

Arguments after `--` are Beam pipeline options (default: the DirectRunner
on this machine). Needs apache-beam: pip install "tfdptext[beam]".
"""

import sys

from absl import flags

from tfdptext.cli import flags as cli_flags
from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-privatize-corpus"
BEAM_HINT = ('pip install "tfdptext[beam]" (or apache-beam>=2.77,<2.78); '
             "see setup.py's beam extra")


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-privatize-corpus's flags in `flag_values`."""
    from tfdptext.corpus import CorpusConfig

    cli_flags.define_flags(CorpusConfig, flag_values=flag_values)
    flags.DEFINE_string("output_dir", None,
                        "New or empty directory for the privatized files "
                        "and manifest.json.", required=True,
                        flag_values=flag_values)


def _pipeline_args(argv):
    """The Beam options: the arguments after `--` (each an --option)."""
    from tfdptext.errors import ArgumentError

    args = list(argv[1:])
    stray = [a for a in args if not a.startswith("--")]
    if stray:
        raise ArgumentError(
            f"Unexpected arguments {stray}: Beam pipeline options go after "
            "`--`, each as --name=value.")
    return args


def _pipeline_module():
    """tfdptext.corpus.pipeline, or a usage error when Beam is missing."""
    from tfdptext.errors import TfdptextError

    try:
        from tfdptext.corpus import pipeline
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("apache_beam"):
            raise
        raise TfdptextError(f"{NAME} needs Apache Beam, which is not "
                            f"installed: {BEAM_HINT}.") from None
    return pipeline


def privatize_corpus(argv):
    """The program: checks everything, runs the pipeline, prints where the
    output and its guarantee are."""
    from tfdptext.corpus import CorpusConfig

    config = cli_flags.build(CorpusConfig).validate()
    pipeline_args = _pipeline_args(argv)
    pipeline = _pipeline_module()
    input_files = pipeline.prepare(config, FLAGS.output_dir)
    manifest = pipeline.run(
        config, FLAGS.output_dir, pipeline_args=pipeline_args,
        input_files=input_files, command=" ".join([NAME] + sys.argv[1:]))
    lines = sum(f.lines for f in input_files)
    print(f"Privatized {lines} lines of {len(input_files)} file(s) -> "
          f"{FLAGS.output_dir} (one output line per input line; "
          "manifest.json)")
    print(manifest["guarantee_text"])


def main():
    """The console entry point of tfdptext-privatize-corpus."""
    define_flags()
    program.run(NAME, __name__, privatize_corpus)


if __name__ == "__main__":
    main()
