"""Runs an export end to end on this machine, no TF Serving binary needed.

    tfdptext-predict --export_dir=exports/ag_eps0.05 "some text" ...

The TFLite user model privatizes each sentence (as the phone would, with the
phone model of the shortest input length that holds its tokens); its output
alone goes to the SavedModel's serving_default signature. Prints the length
used, what was released, the predicted label's name (and index), the
probabilities (for a code release: the decoder's table row for the code,
the same for every text that released it) and the guarantee.

Every release goes through this machine's privacy ledger (--ledger;
`tfdptext.privacy.ledger`) under the export's budget (manifest.json
"budget"): a text with no token is refused before anything is charged; a
release that would exceed the budget is refused, naming what is left and
when it renews; the same text again on the same UTC day resends its stored
release, for free; a text with too many [UNK] tokens is released with a
warning.
"""

from absl import flags

from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-predict"


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-predict's flags in `flag_values`."""
    flags.DEFINE_string("export_dir", None, "A tfdptext-export directory.",
                        required=True, flag_values=flag_values)
    flags.DEFINE_string(
        "ledger", None, "This device's privacy ledger file (what was "
        "spent, and today's releases keyed by a keyed hash of their text). "
        "Default: $TFDPTEXT_LEDGER, else ~/.local/share/tfdptext/"
        "ledger.json. Deleting it resets the budget.",
        flag_values=flag_values)


def _describe(pipeline, answer, sent, main_output):
    """What was released for one text and the server's answer."""
    import numpy as np

    shown = np.array2string(np.ravel(sent.release[main_output][0])[:6],
                            precision=3)
    probabilities = np.array2string(answer["probabilities"][0], precision=3)
    from tfdptext.models import split_spec

    if pipeline.spec.name == split_spec.CODE:  # a code release: a lookup
        code = int(np.ravel(sent.release[main_output][0])[0])
        probabilities = (f"P(class | code {code}) {probabilities} (the "
                         "decoder's table row for this code, not a "
                         "confidence about this text)")
    else:
        probabilities = f"probabilities {probabilities}"
    how = (f"resent {main_output}: {shown} ... (the release stored for "
           "this text today: a repeat, nothing charged)" if sent.resent
           else f"released {main_output}: {shown} ...")
    length = pipeline.length_for(sent.check.tokens + 2)
    lines = [f"  phone model of length {length}", f"  {how}",
             f"  label {answer['label_name'][0]} "
             f"({int(answer['label'][0])}), {probabilities}"]
    if sent.check.warns:
        lines.append(f"  {sent.check.warning()}")
    return "\n".join(lines)


def predict(argv):
    """The program: classifies the sentences given as arguments."""
    from tfdptext.errors import ArgumentError

    texts = argv[1:]
    if not texts:
        raise ArgumentError("Give at least one sentence to classify.")
    from tfdptext.privacy import text_checks
    from tfdptext.export.local import ExportedPipeline
    from tfdptext.privacy import Guarantee
    from tfdptext.privacy import headline

    pipeline = ExportedPipeline(FLAGS.export_dir)
    # Every text is checked before anything is charged.
    text_checks.refuse_empty(pipeline.check_texts(texts))
    ledger = pipeline.ledger(FLAGS.ledger)
    guarantee = Guarantee.from_dict(pipeline.manifest["guarantee"])
    print("\n".join(headline.lines(guarantee)))
    print(f"Each text is released once per UTC day: a text given again "
          f"today resends its stored release, for free; a new text costs "
          f"{ledger.budget.parameter} {ledger.budget.per_release:g}. "
          f"{ledger.budget.describe()}\n")
    main_output = pipeline.spec.release
    for text in texts:
        sent = pipeline.release(text, ledger)
        answer = pipeline.serve(sent.release)
        print(f"{text!r}\n{_describe(pipeline, answer, sent, main_output)}")
    print(guarantee)
    print(ledger.describe())


def main():
    """The console entry point of tfdptext-predict."""
    define_flags()
    program.run(NAME, __name__, predict)


if __name__ == "__main__":
    main()
