"""Learns binary codes for a vocabulary (BRR's phi, Tissier et al. 2019).

    tfdptext-binarize --embeddings=glove.840B.300d_filtered.txt \\
        --bits=256 --epochs=20 --output_dir=codes/glove256
    tfdptext-binarize --embeddings=preset:minilm --output_dir=codes/minilm

--embeddings is a word2vec / GloVe TEXT file (optional "count dim" header,
then "word v1 ... vd" per line), or `preset:<name-or-dir>` for the token
embedding table and WordPiece vocabulary of a keras-hub BERT preset
(`preset:minilm` is the installed MiniLM; a local preset directory works
too). Trains tfdptext.binary.BinarizingAutoencoder (seeded: the codes are a
public, deterministic embedding, not privacy noise), prints a report
(reconstruction, top-k neighbour overlap between cosine and Hamming space
against chance, bits per word, distinct codes; a preset's special tokens
are left out of it) and writes the codes directory: codes.npy (packed
bits), vocab.txt, codes.json (settings and report). --output_dir must be
new or empty. Every flag is checked before anything is read.
"""

import time

from absl import flags

from tfdptext.cli import program
from tfdptext.cli import quiet

FLAGS = flags.FLAGS
NAME = "tfdptext-binarize"


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-binarize's flags in `flag_values`."""
    flags.DEFINE_string(
        "embeddings", None,
        "A word2vec / GloVe text file, or preset:<name-or-dir> for a "
        "keras-hub BERT preset's token embeddings (preset:minilm).",
        required=True, flag_values=flag_values)
    flags.DEFINE_integer("bits", 256, "Bits per code: a positive multiple "
                         "of 8.", flag_values=flag_values)
    flags.DEFINE_integer("epochs", 20, "Training epochs, >= 1.",
                         flag_values=flag_values)
    flags.DEFINE_integer("batch_size", 64, "Words per batch, >= 1.",
                         flag_values=flag_values)
    flags.DEFINE_float("learning_rate", 1e-3, "Adam's learning rate, > 0.",
                       flag_values=flag_values)
    flags.DEFINE_float("reg", 1e-3, "Weight of the orthogonality "
                       "regulariser ||W W^T - I||_F^2, >= 0.",
                       flag_values=flag_values)
    flags.DEFINE_integer("max_words", None, "Read only the first max_words "
                         "words (a preset: ids below it); default: all.",
                         flag_values=flag_values)
    flags.DEFINE_integer("seed", 0, "Seed of the initial weights, the "
                         "shuffling and the report's sample, >= 0.",
                         flag_values=flag_values)
    flags.DEFINE_integer("neighbours", 10, "k of the report's top-k "
                         "neighbour overlap, >= 1.", flag_values=flag_values)
    flags.DEFINE_integer("report_sample", 1000, "Words whose neighbours the "
                         "report compares, >= 1.", flag_values=flag_values)
    flags.DEFINE_string("output_dir", None, "The codes directory to write "
                        "(new or empty).", required=True,
                        flag_values=flag_values)


def _check_flags(argv):
    """Every flag checked (ArgumentError / CodesError / EmbeddingsError
    naming it); nothing is read or written."""
    from tfdptext.binary import codes
    from tfdptext.binary import embeddings
    from tfdptext.errors import ArgumentError
    from tfdptext.privacy import validation

    if len(argv) > 1:
        raise ArgumentError(f"Unexpected arguments: {argv[1:]}.")
    codes.check_bits(FLAGS.bits)
    for name in ("epochs", "batch_size", "neighbours", "report_sample"):
        validation.check_int(name, FLAGS[name].value)
    validation.check_int("seed", FLAGS.seed, minimum=0)
    if FLAGS.max_words is not None:
        validation.check_int("max_words", FLAGS.max_words, minimum=2)
    validation.check_positive("learning_rate", FLAGS.learning_rate)
    validation.check_nonnegative("reg", FLAGS.reg)
    codes.check_output_dir(FLAGS.output_dir)
    embeddings.parse_source(FLAGS.embeddings)


def binarize(argv):
    """The program: reads the table, trains, reports, writes the codes."""
    _check_flags(argv)
    import logging

    from tfdptext import binary

    # FAISS logs every CPU variant it tries to load; keep the report clear.
    logging.getLogger("faiss").setLevel(logging.WARNING)

    start = time.time()
    print(f"Reading {FLAGS.embeddings} ...", flush=True)
    table = binary.load_embeddings(FLAGS.embeddings,
                                   max_words=FLAGS.max_words)
    print(f"{table.matrix.shape[0]} words x {table.matrix.shape[1]} "
          f"dimensions ({len(table.special_token_ids)} special ids) in "
          f"{time.time() - start:.1f} s", flush=True)
    settings = {"bits": FLAGS.bits, "epochs": FLAGS.epochs,
                "batch_size": FLAGS.batch_size,
                "learning_rate": FLAGS.learning_rate, "reg": FLAGS.reg,
                "seed": FLAGS.seed, "max_words": FLAGS.max_words}
    print(f"Training {FLAGS.bits}-bit codes: " + ", ".join(
        f"{k}={v}" for k, v in settings.items() if k != "bits"), flush=True)
    trained = time.time()
    model = binary.fit_codes(
        table.matrix, FLAGS.bits, epochs=FLAGS.epochs,
        batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate,
        reg=FLAGS.reg, seed=FLAGS.seed, verbose=quiet.progress_verbosity())
    trained = time.time() - trained
    bits = binary.encode(model, table.matrix)
    report = binary.binarization_report(
        table.matrix, bits, scaled_inputs=binary.scaled(model, table.matrix),
        reconstruction=binary.decode(model, bits), k=FLAGS.neighbours,
        sample=FLAGS.report_sample, seed=FLAGS.seed,
        exclude_ids=table.special_token_ids)
    print(binary.format_report(report), flush=True)
    history = model.history.history
    settings.update({
        "input_scale": model.input_scale,
        "straight_through": "sigmoid derivative",
        "optimizer": "adam",
        "final_loss": {k: float(v[-1]) for k, v in history.items()},
        "training_seconds": round(trained, 1),
    })
    binary.save_codes(
        FLAGS.output_dir, table.words, bits,
        {"source": table.source, "dimensions": int(table.matrix.shape[1]),
         "training": settings, "report": report},
        special_token_ids=table.special_token_ids)
    print(f"Codes: {FLAGS.output_dir} ({time.time() - start:.0f} s in all)")
    return 0


def main():
    """The console entry point of tfdptext-binarize."""
    define_flags()
    program.run(NAME, __name__, binarize)


if __name__ == "__main__":
    main()
