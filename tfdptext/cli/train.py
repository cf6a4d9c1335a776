"""Trains a classifier whose user side privatizes, with Keras model.fit.

    tfdptext-train --mode=robust --epsilon=0.05 \\
        --dataset=ag_dpnr --data_dir=../shared/data/ag_dpnr \\
        --output_dir=runs/ag_eps0.05

    tfdptext-train --flagfile=train/flags/ag_dpnr_eps0.05.flags

    tfdptext-train --mode=robust --epsilon=1 --dataset=tsv \\
        --train_file=train.tsv --test_file=test.tsv \\
        --text_column=text --label_column=label --output_dir=runs/mine

The flags are the fields of tfdptext.training.TrainConfig, plus
--output_dir. Modes: none (non-private baseline), adv (adversarial-training
baseline: attacker heads behind a gradient reversal, no noise, so no DP
guarantee), robust (DPNR: noise in the training graph, encoder and
classifier train), seq_rep / token_rep / text_to_text (privacy-constrained
fine-tuning: the user side is frozen). Re-running the same command in the
same --output_dir resumes after an interruption (a kill included) from the
last finished epoch; re-running a finished run (metrics.json, written last)
says so and trains nothing. config.json is written only once the data and
encoder have loaded, so a failed start never blocks the corrected command.
Writes user_side.keras, server_side.keras, split.json and metrics.json.
"""

from absl import flags

from tfdptext.cli import flags as cli_flags
from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-train"


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-train's flags in `flag_values`."""
    from tfdptext.training import TrainConfig

    cli_flags.define_flags(TrainConfig, flag_values=flag_values)
    flags.DEFINE_string("output_dir", None, "Run directory.",
                        required=True, flag_values=flag_values)


def train(argv):
    """The program: trains the configuration that the flags give."""
    del argv
    from tfdptext import runfiles

    runfiles.check_output_path(FLAGS.output_dir)  # before any work
    from tfdptext import training

    config = cli_flags.build(training.TrainConfig)
    config.validate()
    from tfdptext.cli import quiet
    from tfdptext.privacy import headline

    def announce(guarantee):
        print("\n".join(headline.lines(guarantee)), flush=True)

    metrics = training.train(config, FLAGS.output_dir,
                             verbose=quiet.progress_verbosity(),
                             announce=announce)
    from tfdptext.evaluation import report

    print("\n" + _accuracy_line(metrics))
    print(metrics["guarantee_text"])
    if metrics.get("limit"):
        print(report.limit_text(metrics["limit"]))
    training_data = metrics.get("training_release")
    if training_data:
        print(f"Training data ({training_data['mode']}): "
              + training_data["guarantee_text"].splitlines()[0])
    if metrics.get("label_privacy"):
        labels = metrics["label_privacy"]
        print(labels.get("example_guarantee_text",
                         labels["guarantee_text"]))
    print(f"Run directory: {FLAGS.output_dir}")


def _accuracy_line(metrics):
    """Dev and test accuracy, saying which labels they are measured on
    when the training labels were randomized (--label_epsilon)."""
    labels = metrics.get("label_privacy")
    clean = " on the clean labels" if labels else ""
    line = f"dev accuracy{clean} {metrics['dev_accuracy']:.4f}"
    if labels and labels.get("dev_accuracy_randomized_labels") is not None:
        line += (f" ({labels['dev_accuracy_randomized_labels']:.4f} on the "
                 "randomized dev labels, the only ones a server holds)")
    return (line + f", test accuracy{clean} {metrics['test_accuracy']:.4f} "
            f"(majority class {_majority(metrics)} on the test split: "
            f"{metrics['majority_test_accuracy']:.4f})")


def _majority(metrics):
    """The name of the test split's most frequent class (metrics.json)."""
    names = metrics.get("label_names") or []
    index = metrics.get("majority_test_class")
    if index is None or index >= len(names):
        return "(its most frequent)"
    return repr(names[index])


def main():
    """The console entry point of tfdptext-train."""
    define_flags()
    program.run(NAME, __name__, train)


if __name__ == "__main__":
    main()
