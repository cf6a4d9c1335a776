"""Splits a trained run into a TFLite phone model and a TF Serving model.

    tfdptext-export --model_dir=runs/ag_eps0.05 --output_dir=exports/ag_eps0.05

Writes user/privatizer.tflite (builtin ops only, no seeded random op;
dynamic-range int8 by default, --quantization=float32 on request,
--quantization=int4 for 4-bit weights (sequence and code releases); one
signature per input length, --lengths, default 16, 32, 64, ... below the
run's max_length plus max_length, so the app runs the shortest that fits), the
vocabulary and tokenizer settings, server/<name>/<version>/ (a SavedModel
with a `serving_default` signature whose inputs are the release only) and
manifest.json. The output directory must not exist; a failed export leaves
nothing behind. The export is written into a hidden
`.<name>.partial-<pid>` beside --output_dir (the TFLite converter's
temporary files included) and renamed when complete; one left by a killed
export is removed by the next export into the same parent, so re-running
the same command gives a clean export.
"""

import os
import sys

from absl import flags

from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-export"


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-export's flags in `flag_values`."""
    from tfdptext.export import choices as exporter

    flags.DEFINE_string("model_dir", None, "A tfdptext-train run directory.",
                        required=True, flag_values=flag_values)
    flags.DEFINE_string("output_dir", None, "New directory for the export.",
                        required=True, flag_values=flag_values)
    flags.DEFINE_enum("quantization", "int8", exporter.QUANTIZATIONS,
                      "Weights of the phone model: int8 (dynamic range), "
                      "float32, or int4 (4-bit weights, one scale per row: "
                      "about 60% of int8's size; for the sequence and code "
                      "split points, whose guarantee does not read the "
                      "weights).",
                      flag_values=flag_values)
    flags.DEFINE_string("model_name", None, "TF Serving model name "
                        "(default: the run directory's name).",
                        flag_values=flag_values)
    flags.DEFINE_integer("version", 1, "TF Serving model version.",
                         flag_values=flag_values)
    flags.DEFINE_list(
        "lengths", None,
        "Comma-separated input lengths of the phone model, from 3 to the "
        "run's max_length (always added), e.g. 32,64,128; one signature "
        "each in user/privatizer.tflite; the app runs the shortest that "
        "holds a text's tokens. Default: 16, 32, 64, ... below max_length, "
        "plus max_length.", flag_values=flag_values)
    flags.DEFINE_bool("tokenizer_in_graph", False,
                      "Also write user/privatizer_text_in.tflite, which takes "
                      "the sentence as a string (TF Text's FastBertTokenizer; "
                      "needs the TF Text TFLite kernels in the app).",
                      flag_values=flag_values)
    flags.DEFINE_enum(
        "noise_source", exporter.NOISE_INPUT, exporter.NOISE_SOURCES,
        f"{exporter.NOISE_INPUT} (default): the phone model takes an int32 "
        "`random_words` tensor that the app fills from the platform's "
        "secure generator for every release; bad words make the release "
        f"unusable (NaN / id -1). {exporter.NOISE_INTERNAL} (opt-in, NOT "
        "recommended): the model draws its noise with TFLite's RANDOM_* "
        "kernels, keyed from one 32-bit seed per app process, so an "
        "attacker with the .tflite and one release can recover the seed and "
        "remove the noise; the manifest's guarantee says so.",
        flag_values=flag_values)
    flags.DEFINE_float(
        "budget_per_day", None, "The user's privacy budget per UTC day, in "
        "the guarantee's parameter and unit (epsilon, or eta for metric "
        "DP), recorded in manifest.json for every client's ledger. "
        "Default: epsilon 10 (metric DP: 10 releases' worth).",
        flag_values=flag_values)
    flags.DEFINE_float(
        "budget_total", None, "The user's privacy budget in total (never "
        "renews). Default: epsilon 100 (metric DP: 100 releases' worth).",
        flag_values=flag_values)
    flags.DEFINE_bool(
        "no_budget", False, "Export without a privacy budget, "
        "deliberately: the clients count releases but never refuse one, "
        "and say that the exporter chose no budget.",
        flag_values=flag_values)


def _check_paths():
    """A new --output_dir and an existing --model_dir, before any work."""
    from tfdptext import runfiles
    from tfdptext.errors import ArgumentError

    runfiles.check_output_path(FLAGS.output_dir)
    if os.path.exists(FLAGS.output_dir):
        raise ArgumentError(
            f"`output_dir` {FLAGS.output_dir} exists; choose a new "
            "directory (exports are never overwritten).")
    if not os.path.isdir(FLAGS.model_dir):
        raise ArgumentError(f"`model_dir`: {FLAGS.model_dir} is not a "
                            "directory.")


def _parse_lengths(values):
    """--lengths as integers (None when not given); ArgumentError naming
    `lengths` for a value that is not an integer (the range is checked by
    the exporter against the run's max_length)."""
    from tfdptext.errors import ArgumentError

    if not values:
        return None
    try:
        return [int(v) for v in values]
    except ValueError:
        raise ArgumentError(
            f"`lengths` must be comma-separated integers (e.g. 32,64,128), "
            f"received {','.join(values)!r}.") from None


def _announce(model_dir):
    """The run's epsilon per text (its split.json), printed before the
    conversion starts; nothing when the file cannot be read (the exporter
    then says why)."""
    from tfdptext import rundir
    from tfdptext.errors import TfdptextError
    from tfdptext.privacy import Guarantee
    from tfdptext.privacy import headline

    try:
        split = rundir.RunDir(model_dir).read(rundir.SPLIT,
                                              required=("guarantee",))
        guarantee = Guarantee.from_dict(split["guarantee"])
    except TfdptextError:
        return
    print("\n".join(headline.lines(guarantee)), flush=True)


def export(argv):
    """The program: exports --model_dir into --output_dir."""
    del argv
    _check_paths()
    lengths = _parse_lengths(FLAGS.lengths)
    _announce(FLAGS.model_dir)
    from tfdptext.export import exporter

    manifest = exporter.export_run(
        FLAGS.model_dir, FLAGS.output_dir, quantization=FLAGS.quantization,
        model_name=FLAGS.model_name, version=FLAGS.version,
        noise_source=FLAGS.noise_source,
        tokenizer_in_graph=FLAGS.tokenizer_in_graph, lengths=lengths,
        budget_per_day=FLAGS.budget_per_day,
        budget_total=FLAGS.budget_total, no_budget=FLAGS.no_budget,
        command=" ".join([NAME] + sys.argv[1:]))
    _print_summary(manifest)


def _print_summary(manifest):
    """What was written, and where the phone model's randomness comes
    from."""
    record = manifest["user"]
    size = manifest["files"][record["file"]]["bytes"]
    lengths = ", ".join(str(n) for n in record["lengths"])
    print(f"Exported {FLAGS.model_dir} -> {FLAGS.output_dir}")
    print(f"  {record['file']}: {size / 2**20:.1f} MiB "
          f"({record['quantization']}), input lengths {lengths} (one "
          "signature each; the app runs the shortest that fits)")
    contract = manifest["user"]["randomness"]
    if "input" in contract:
        print(f"  randomness: the app fills `{contract['input']}` with "
              f"{contract['bytes']} fresh bytes from its secure generator "
              "for every call (see manifest.json)")
    else:
        print("  WARNING: noise from the model's own TFLite RANDOM_* ops, "
              "keyed from 32 bits per app process: predictable by an "
              "attacker who has the .tflite and one release.")
    print(f"  {manifest['server']['path']}: signature serving_default, "
          f"inputs {list(manifest['server']['inputs'])}")
    from tfdptext.privacy import budget

    print("  " + budget.Budget.from_dict(manifest["budget"]).describe())


def main():
    """The console entry point of tfdptext-export."""
    define_flags()
    program.run(NAME, __name__, export)


if __name__ == "__main__":
    main()
