"""Runs an export end to end on this machine, no TF Serving binary needed.

    tfdptext-predict --export_dir=exports/ag_eps0.05 "some text" ...

The TFLite user model privatizes each sentence (as the phone would, with the
phone model of the shortest input length that holds its tokens); its output
alone goes to the SavedModel's serving_default signature. Prints the length
used, what was released, the predicted label's name (and index), the
probabilities (for a code release: the decoder's table row for the code,
the same for every text that released it) and the guarantee.
"""

from absl import flags

from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-predict"


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-predict's flags in `flag_values`."""
    flags.DEFINE_string("export_dir", None, "A tfdptext-export directory.",
                        required=True, flag_values=flag_values)


def predict(argv):
    """The program: classifies the sentences given as arguments."""
    from tfdptext.errors import ArgumentError

    texts = argv[1:]
    if not texts:
        raise ArgumentError("Give at least one sentence to classify.")
    import numpy as np

    from tfdptext.export.local import ExportedPipeline
    from tfdptext.models import split_spec
    from tfdptext.privacy import Guarantee

    from tfdptext.privacy import headline

    pipeline = ExportedPipeline(FLAGS.export_dir)
    guarantee = Guarantee.from_dict(pipeline.manifest["guarantee"])
    print("\n".join(headline.lines(guarantee)))
    print(f"Each call is a fresh private release of every text given: "
          f"predicting a text again releases it again, with new noise, and "
          f"costs its epsilon again ({len(texts)} text(s) released now).\n")
    lengths = pipeline.lengths_for(texts)
    released = pipeline.privatize(texts)
    answer = pipeline.serve(released)
    main_output = pipeline.spec.release
    for i, text in enumerate(texts):
        shown = np.array2string(np.ravel(released[main_output][i])[:6],
                                precision=3)
        probabilities = np.array2string(answer["probabilities"][i],
                                        precision=3)
        if pipeline.spec.name == split_spec.CODE:  # a lookup
            code = int(np.ravel(released[main_output][i])[0])
            probabilities = (f"P(class | code {code}) {probabilities} (the "
                             "decoder's table row for this code, not a "
                             "confidence about this text)")
        else:
            probabilities = f"probabilities {probabilities}"
        print(f"{text!r}\n  phone model of length {lengths[i]}\n"
              f"  released {main_output}: {shown} ...\n"
              f"  label {answer['label_name'][i]} "
              f"({int(answer['label'][i])}), {probabilities}")
    print(Guarantee.from_dict(pipeline.manifest["guarantee"]))


def main():
    """The console entry point of tfdptext-predict."""
    define_flags()
    program.run(NAME, __name__, predict)


if __name__ == "__main__":
    main()
