"""Audits the privatization mechanisms: an empirical lower bound on epsilon.

    tfdptext-audit --samples=200000 --tflite --include_broken \\
        --output=audit.md

For every mechanism, draws --samples releases per neighbouring input at the
worst case for the mechanism's unit, and bounds epsilon from below with
threshold tests and Clopper-Pearson intervals (the family holds with
probability --confidence). A claim below its bound is refuted (FAIL).
--include_broken adds deliberately broken Laplace variants, which must
FAIL; the exit status is 1 when any row is not as expected.

    tfdptext-audit --random_words --export_dir=exports/ag_eps0.05

--random_words instead feeds phone models buffers of random words filled
as apps fill them (tfdptext.audit.word_generators: os.urandom; counters,
Weyl and LCG sequences, stuck bits, ASCII text, a buffer filled by bytes
not words, repeated blocks; fresh words with the first or last k words
zero for k = 1..16, a header word, a counter in the first words, spread
zeros; java.util.Random and a buffer from an earlier call), --word_buffers
of each for the refusals and --word_releases of each for the law of what
is released: every length of --export_dir's phone model, or without it
the phone model of every mechanism we export (--word_models, a
privatizer alone on a small input: the code release, 384-d Laplace,
d_chi on a vector and on 16 tokens, every text-to-text mechanism).
Buffers with a defect of the whole buffer must be refused; partly bad
buffers whose every extraction group keeps a fresh word must be refused
or released by the good buffers' law (a two-sample test per output
position); os.urandom must pass. The buffers no check can see
(java.util.Random, a replayed buffer) ought to be refused too, since
their releases are predictable or repeat: every model releases them, and
their rows say UNSAFE. The exit status is 1 when a row is not as
expected: a defective buffer released, a release that follows another
channel, or an undetectable buffer released (unless
--allow_undetectable, which lets only what a model can catch decide it).
"""

import sys
import time

from absl import flags

from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-audit"
ALL = "all"
# The fewest releases per side the auditor accepts.
MIN_SAMPLES = 100


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-audit's flags in `flag_values`."""
    flags.DEFINE_list("mechanisms", [ALL],
                      f"Mechanisms to audit, or '{ALL}' (the Python layers, "
                      "plus the TFLite models with --tflite and the broken "
                      "variants with --include_broken).",
                      flag_values=flag_values)
    flags.DEFINE_integer("samples", 200000,
                         "Releases per neighbouring input (half select the "
                         "tests, half evaluate them).",
                         lower_bound=MIN_SAMPLES, flag_values=flag_values)
    flags.DEFINE_float("confidence", 0.95,
                       "Probability that every bound holds, in (0, 1).",
                       flag_values=flag_values)
    flags.register_validator("confidence", lambda c: 0.0 < c < 1.0,
                             "--confidence must be in (0, 1).",
                             flag_values=flag_values)
    flags.DEFINE_string("output", None,
                        "Also write the results: JSON if the path ends in "
                        ".json, else markdown.", flag_values=flag_values)
    flags.DEFINE_bool("include_broken", False,
                      "Also audit the deliberately broken variants "
                      "(tfdptext.audit.broken), which must FAIL.",
                      flag_values=flag_values)
    flags.DEFINE_bool("random_words", False,
                      "Audit the random-words checks instead: feed the "
                      "phone model structured buffers "
                      "(tfdptext.audit.word_generators) and report which "
                      "releases fail closed.", flag_values=flag_values)
    flags.DEFINE_string("export_dir", None,
                        "With --random_words: the export whose phone model "
                        "(every length) is audited; default a 384-d Laplace "
                        "phone model built here.", flag_values=flag_values)
    flags.DEFINE_integer("word_buffers", 10,
                         "With --random_words: buffers per generator.",
                         lower_bound=1, flag_values=flag_values)
    flags.DEFINE_integer("word_releases", 300,
                         "With --random_words: releases per generator "
                         "(and of os.urandom) for the two-sample test of "
                         "what is released; 0 skips it.", lower_bound=0,
                         flag_values=flag_values)
    flags.DEFINE_bool("allow_undetectable", False,
                      "With --random_words: still print the UNSAFE rows of "
                      "the buffers no check can see (java.util.Random, a "
                      "replayed buffer), but leave them out of the exit "
                      "status, so that it says whether the model refuses "
                      "or mixes what a model can catch.",
                      flag_values=flag_values)
    flags.DEFINE_list("word_models", [ALL],
                      "With --random_words and no --export_dir: the phone "
                      "models to audit (tfdptext.audit.word_generators."
                      "mechanism_phones), or 'all'.",
                      flag_values=flag_values)
    flags.DEFINE_bool("tflite", False,
                      "Also audit privatizer models converted to TFLite, run "
                      "in ai-edge-litert's Interpreter.",
                      flag_values=flag_values)


def _selected(mechanisms):
    """The mechanisms that --mechanisms, --tflite and --include_broken
    name, in order, each once."""
    from tfdptext.errors import ArgumentError

    if not FLAGS.mechanisms:
        raise ArgumentError(f"`mechanisms` must name at least one "
                            f"mechanism (or {ALL}).")
    names = []
    for name in FLAGS.mechanisms:
        if name == ALL:
            names += list(mechanisms.MECHANISMS)
            if FLAGS.tflite:
                names += list(mechanisms.TFLITE_MECHANISMS)
            if FLAGS.include_broken:
                names += list(mechanisms.BROKEN_MECHANISMS)
        elif name in mechanisms.ALL_MECHANISMS:
            names.append(name)
        else:
            raise ArgumentError(
                f"--mechanisms: unknown mechanism {name!r}; choose from "
                f"{ALL}, {', '.join(mechanisms.ALL_MECHANISMS)}.")
    return list(dict.fromkeys(names))


def audit(argv):
    """The program: audits every selected mechanism; exit status 1 when a
    row is not as expected."""
    from tfdptext.errors import ArgumentError

    if len(argv) > 1:
        raise ArgumentError(f"Unexpected arguments: {argv[1:]}.")
    if FLAGS.random_words:
        models = None if ALL in FLAGS.word_models else FLAGS.word_models
        return audit_random_words(FLAGS.export_dir, FLAGS.word_buffers,
                                  FLAGS.output, FLAGS.word_releases, models,
                                  FLAGS.allow_undetectable)
    from tfdptext.audit import auditor
    from tfdptext.audit import mechanisms

    results = []
    for name in _selected(mechanisms):
        start = time.time()
        result = auditor.audit(mechanisms.ALL_MECHANISMS[name](),
                               FLAGS.samples, FLAGS.confidence)
        results.append(result)
        print(f"{name}: claim {result.claim:.4g}, lower bound "
              f"{result.lower_bound:.4f}, {result.verdict.upper()} "
              f"({time.time() - start:.1f} s)", flush=True)
    _report(auditor, results)
    unexpected = [r.mechanism for r in results if not r.as_expected]
    if unexpected:
        print(f"\nNot as expected (a correct mechanism refuted or a broken "
              f"one not caught): {', '.join(unexpected)}", file=sys.stderr)
        return 1
    return 0


def audit_random_words(export_dir=None, buffers=10, output=None,
                       releases=300, models=None, allow_undetectable=False):
    """--random_words: the generators against the phone model of
    `export_dir` (every length) or, without it, against the phone model
    of every mechanism (`models`: a subset), `buffers` each for the
    refusals and `releases` each for the channel test; prints the table
    (and writes it to `output`). Returns the exit status: 1 when a row is
    not as expected (the UNSAFE rows of undetectable buffers count unless
    `allow_undetectable`)."""
    import json

    from tfdptext.audit import word_generators

    sections = {}
    if export_dir:
        for length, verdicts in word_generators.check_export(
                export_dir, buffers=buffers, releases=releases).items():
            sections[f"phone model of {export_dir}, length {length}"] = \
                verdicts
    else:
        for name, phone in word_generators.mechanism_phones(models).items():
            start = time.time()
            sections[f"{name} ({phone.width:,} words, {phone.consumed:,} "
                     f"read)"] = word_generators.check_phone(
                         phone, buffers=buffers, releases=releases)
            print(f"{name}: {time.time() - start:.1f} s", flush=True)
    table = "\n\n".join(f"{title}\n\n" + word_generators.markdown_table(
        verdicts) for title, verdicts in sections.items())
    print(table)
    if output:
        with open(output, "w") as f:
            if output.endswith(".json"):
                json.dump({title: [v.__dict__ for v in vs]
                           for title, vs in sections.items()}, f, indent=2)
            else:
                f.write(table + "\n")
    unsafe = sorted({f"{title}: {v.generator}"
                     for title, vs in sections.items() for v in vs
                     if v.unsafe})
    if unsafe:
        print("\nUNSAFE, released undetected (no check inside a model can "
              "see these buffers; only the app's contract, fresh words from "
              f"the platform's secure generator, rules them out): "
              f"{', '.join(unsafe)}", file=sys.stderr)
    unexpected = sorted({f"{title}: {v.generator}"
                         for title, vs in sections.items()
                         for v in vs if not v.as_expected
                         and not (allow_undetectable and v.unsafe)})
    if unexpected:
        print(f"\nNot as expected: {', '.join(unexpected)}",
              file=sys.stderr)
        return 1
    return 0


def _report(auditor, results):
    """The results table, printed and written to --output."""
    table = auditor.markdown_table(results)
    print("\n" + table)
    if FLAGS.output:
        with open(FLAGS.output, "w") as f:
            if FLAGS.output.endswith(".json"):
                f.write(auditor.to_json(results, indent=2) + "\n")
            else:
                f.write(table + "\n")


def main():
    """The console entry point of tfdptext-audit."""
    define_flags()
    program.run(NAME, __name__, audit)


if __name__ == "__main__":
    main()
