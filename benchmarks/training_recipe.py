#!/usr/bin/env python
"""Does the default training recipe learn? Non-private MiniLM runs.

Trains mode none (no privatization) with TrainConfig's default recipe
(AdamW, linear warm-up over 10% of the steps to the peak rate, then linear
decay to 0) on TrustPilot, with and without balanced class weights, and on
AG (DPNR's 4-class subset), then prints test accuracy, macro-F1 and the
majority-class accuracy of each run as a markdown table. All cells run in
this one process, one after the other; a finished cell (its metrics.json)
is read back instead of trained again, so an interrupted benchmark resumes.

    nice python benchmarks/training_recipe.py --output_root=runs/recipe \
        --trustpilot_dir=../shared/data/trustpilot \
        --ag_dir=../shared/data/ag_dpnr --ag_epochs=1
"""

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine as host  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("output_root", "runs/recipe", "Where the runs go (one "
                    "directory per cell).")
flags.DEFINE_string("trustpilot_dir", "../shared/data/trustpilot",
                    "TrustPilot's valid.csv and test.csv.")
flags.DEFINE_string("ag_dir", "../shared/data/ag_dpnr", "AG's ag_data.txt.")
flags.DEFINE_integer("epochs", None, "Epochs of the TrustPilot cells "
                     "(default: TrainConfig's).")
flags.DEFINE_integer("ag_epochs", None, "Epochs of the AG cell (default: "
                     "TrainConfig's; one AG epoch is about 15 min on 2 CPU "
                     "cores).")
flags.DEFINE_list("cells", ["trustpilot", "trustpilot_balanced", "ag"],
                  "Which cells to run, in order.")
flags.DEFINE_integer("max_length", 64, "Token length.")


def cell_configs():
    """{cell name: TrainConfig keyword arguments} of the benchmark."""
    trustpilot = dict(dataset="trustpilot", data_dir=FLAGS.trustpilot_dir)
    if FLAGS.epochs is not None:
        trustpilot["epochs"] = FLAGS.epochs
    ag = dict(dataset="ag_dpnr", data_dir=FLAGS.ag_dir)
    if FLAGS.ag_epochs is not None:
        ag["epochs"] = FLAGS.ag_epochs
    return {
        "trustpilot": trustpilot,
        "trustpilot_balanced": dict(trustpilot, class_weight="balanced"),
        "ag": ag,
    }


def run_cell(name, kwargs):
    """Trains (or reads back) one cell; returns (metrics, seconds)."""
    from tfdptext import training

    config = training.TrainConfig(mode="none", max_length=FLAGS.max_length,
                                  **kwargs)
    start = time.perf_counter()
    metrics = training.train(config, os.path.join(FLAGS.output_root, name),
                             verbose=2)
    return metrics, time.perf_counter() - start


def row(name, metrics, seconds):
    """One markdown table row of a finished cell."""
    schedule = metrics["learning_rate_schedule"]
    return (f"| {name} | {metrics['dataset']} | {metrics['class_weight']} | "
            f"{metrics['epochs']} | {schedule['peak_learning_rate']:g} "
            f"{schedule['decay']}, warm-up {schedule['warmup_steps']}/"
            f"{schedule['total_steps']} steps | "
            f"{metrics['test_accuracy']:.4f} | {metrics['test_macro_f1']:.4f} "
            f"| {metrics['dev_accuracy']:.4f} | {metrics['dev_macro_f1']:.4f} "
            f"| {metrics['majority_test_accuracy']:.4f} | "
            f"{metrics['wall_time_seconds'] / 60:.1f} | {seconds / 60:.1f} |")


HEADER = ("| cell | dataset | class weight | epochs | schedule | test acc | "
          "test macro-F1 | dev acc | dev macro-F1 | majority (test) | fit "
          "min | total min |\n|---|---|---|---|---|---|---|---|---|---|---|"
          "---|")


def main(argv):
    del argv
    configs = cell_configs()
    unknown = [c for c in FLAGS.cells if c not in configs]
    if unknown:
        raise app.UsageError(f"--cells: unknown {unknown}; known: "
                             f"{sorted(configs)}.")
    rows, found = [], {}
    for name in FLAGS.cells:
        metrics, seconds = run_cell(name, configs[name])
        rows.append(row(name, metrics, seconds))
        found[name] = {"metrics": metrics, "seconds": seconds}
        print(f"\n{name}: " + rows[-1], flush=True)
    print("\n" + HEADER)
    print("\n".join(rows))
    host.write_json(None, found)


if __name__ == "__main__":
    app.run(main)
