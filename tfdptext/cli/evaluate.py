"""Evaluates a trained run: utility, attackers, fairness, token-level privacy.

    tfdptext-eval --model_dir=runs/ag_eps0.05 --output_dir=runs/ag_eps0.05/eval

Writes eval.json (every number with its sample size), predictions.npz, PNG
plots and report.md (the release, the formal guarantee, and the measured
privacy and utility side by side). The data set is the run's own (its
recorded --dataset, --data_dir, files and columns) unless --dataset,
--data_dir, --train_file, --dev_file, --test_file, --text_column,
--label_column, --private_columns or --no_header (TrainConfig's fields, as
in tfdptext-train) say otherwise.

The output is written into a hidden `.<name>.partial-<pid>` beside
--output_dir and moved into place when complete: a killed evaluation never
leaves a directory that looks finished (the next run removes the partial
one). Re-running the same command on a finished evaluation says so and
changes nothing; an --output_dir holding another evaluation, or other
files, is refused.
"""

import dataclasses
import os

from absl import flags

from tfdptext.cli import flags as cli_flags
from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-eval"


def data_fields():
    """The TrainConfig fields that choose the data set: the run's unless
    a flag says otherwise."""
    return ("dataset", "data_dir") + _file_fields()


def _file_fields():
    """The TrainConfig fields of the user's own files and columns."""
    from tfdptext.training import config

    return config.FILE_FIELDS + config.COLUMN_FIELDS


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-eval's flags in `flag_values`."""
    from tfdptext.evaluation import attacker
    from tfdptext.training import TrainConfig

    flags.DEFINE_string("model_dir", None, "Run directory (tfdptext-train).",
                        required=True, flag_values=flag_values)
    flags.DEFINE_string("output_dir", None,
                        "Where to write; default <model_dir>/eval.",
                        flag_values=flag_values)
    fields = data_fields()
    cli_flags.define_flags(TrainConfig, names=fields,
                           defaults=dict.fromkeys(fields),
                           help_suffix=" Default: the run's.",
                           flag_values=flag_values)
    flags.DEFINE_list("private_attributes", None,
                      "Attributes to attack (default: all of the dataset's).",
                      flag_values=flag_values)
    flags.DEFINE_list("attackers", ["mlp"],
                      "Attacker kinds, comma-separated, from: "
                      f"{', '.join(attacker.KINDS)} (mlp: DPNR's).",
                      flag_values=flag_values)
    flags.DEFINE_integer("attacker_epochs", attacker.EPOCHS,
                         "The most epochs of the Keras attackers (mlp, "
                         "mlp_large), early-stopped on dev loss before "
                         f"(DPNR's: {attacker.EPOCHS}); fewer for a quick "
                         "look.",
                         flag_values=flag_values)
    flags.DEFINE_integer("repeats", 1, "Attacker seeds (mean and std).",
                         flag_values=flag_values)
    flags.DEFINE_integer("max_attack_examples", 5000,
                         "Train and dev examples released for the attackers.",
                         flag_values=flag_values)
    flags.DEFINE_integer("deniability_tokens", 100,
                         "Regular tokens for N_w / S_w (d_chi token runs).",
                         flag_values=flag_values)
    flags.DEFINE_integer("deniability_samples", 1000,
                         "Privatizations per token for N_w / S_w.",
                         flag_values=flag_values)
    flags.DEFINE_bool("membership", False,
                      "Membership inference on the server classifier.",
                      flag_values=flag_values)
    flags.DEFINE_string("baseline_eval", None,
                        "Another eval directory of the same test split: test "
                        "the change of each fairness gap against it.",
                        flag_values=flag_values)
    flags.DEFINE_string("reference_run", None,
                        "A finished NON-private run (mode none) of the same "
                        "data and budget: its test accuracy is the reference "
                        "of the randomized-response limit reported beside "
                        "this run's accuracy (default: --baseline_eval when "
                        "it evaluated a non-private run, else a perfect "
                        "classifier).", flag_values=flag_values)
    flags.DEFINE_string("vocab_file", None,
                        "Tokenizer vocabulary to check against the run's.",
                        flag_values=flag_values)
    flags.DEFINE_integer("seed", 0, "Seed of the attackers and token sample "
                         "(never of the privacy noise).",
                         flag_values=flag_values)
    flags.DEFINE_bool("plots", True, "Draw PNG plots.",
                      flag_values=flag_values)


def _dataset(run):
    """The data set to evaluate on: None (the run's, loaded by evaluate)
    for a run on a named dataset without overrides; else the run's
    recorded dataset, files and columns (config.json) with the flags'
    overrides. Another --dataset starts from none of the run's files."""
    from tfdptext.evaluation.release import RunError
    from tfdptext.training import TrainConfig
    from tfdptext.training import trainer

    given = {name: value for name, value in cli_flags.values(
        TrainConfig, names=data_fields()).items() if value is not None}
    try:
        config = TrainConfig.from_dict(run)
    except (TypeError, ValueError) as err:
        raise RunError(f"{FLAGS.model_dir}/config.json is not a tfdptext "
                       f"training config ({err}).") from None
    file_fields = _file_fields()
    if not given and all(getattr(config, n) in (None, False)
                         for n in file_fields):
        return None
    if given.get("dataset", config.dataset) != config.dataset:
        config = dataclasses.replace(
            config, data_dir=None,
            **{**dict.fromkeys(file_fields), "no_header": False})
    config = dataclasses.replace(config, **given)
    config.validate()
    return trainer.load_config_dataset(config)


def evaluate_run(argv):
    """The program: evaluates --model_dir into --output_dir."""
    del argv
    from tfdptext import runfiles
    from tfdptext.errors import ArgumentError

    output_dir = FLAGS.output_dir or os.path.join(FLAGS.model_dir, "eval")
    runfiles.check_output_path(output_dir)  # before any work
    if not os.path.isdir(FLAGS.model_dir):
        raise ArgumentError(f"`model_dir`: {FLAGS.model_dir} is not a "
                            "directory.")
    from tfdptext.evaluation import evaluate as evaluation

    result = evaluation.evaluate(
        FLAGS.model_dir, output_dir,
        dataset=_dataset(evaluation.TrainedRun.read_config(FLAGS.model_dir)),
        private_attributes=FLAGS.private_attributes,
        attackers=FLAGS.attackers, repeats=FLAGS.repeats,
        attacker_epochs=FLAGS.attacker_epochs,
        max_attack_examples=FLAGS.max_attack_examples,
        deniability_tokens=FLAGS.deniability_tokens,
        deniability_samples=FLAGS.deniability_samples,
        membership=FLAGS.membership, baseline_eval=FLAGS.baseline_eval,
        vocabulary=FLAGS.vocab_file, seed=FLAGS.seed, plots=FLAGS.plots,
        overwrite=False, reference_run=FLAGS.reference_run)
    _print_summary(result, output_dir)


def _print_summary(result, output_dir):
    """Utility, empirical privacy and the guarantee, in a few lines."""
    if result.get("already_done"):
        print(f"{output_dir} already holds this evaluation (same run, data "
              "and options): nothing to do. Remove it to evaluate again.")
    from tfdptext.evaluation import report

    u = result["utility"]
    print(f"\ntest accuracy {u['accuracy']:.4f} (n = {u['n_test']}); "
          f"always answering the training split's most frequent class "
          f"scores {u['majority_accuracy']:.4f} on the test split")
    if u.get("limit"):
        print(report.limit_text(u["limit"]))
    for group, row in result.get("attack", {}).get(
            "empirical_privacy", {}).items():
        print(f"empirical privacy ({group}, {row['measure']}): strongest "
              f"attacker {row['strongest']:.4f}; the attacker that always "
              f"answers the training split's most frequent value "
              f"{row['majority']:.4f} (on the test split)")
    if result.get("guarantee_text"):
        print(result["guarantee_text"])
    print(f"Report: {os.path.join(output_dir, 'report.md')}")


def main():
    """The console entry point of tfdptext-eval."""
    define_flags()
    program.run(NAME, __name__, evaluate_run)


if __name__ == "__main__":
    main()
