#!/usr/bin/env python
"""Training labels randomized on the users' devices (--label_epsilon),
against clean labels at the same budget.

Trains SST-2 text_to_text (d_chi text-to-text at --eta, frozen user side)
with clean labels and with each label epsilon (K-ary randomized response,
drawn once, forward-corrected loss), then prints test accuracy (clean test
labels), the share of training labels changed, and what one training
example guarantees (the text's release composed with its label). The
texts are released once (`--training_release=once`, the default in these
modes); benchmarks/training_release.py compares once with per_epoch over
several seeds. Every run is an ordinary run directory: a rerun skips
finished runs.

    python benchmarks/label_privacy.py --output_dir=runs/label_privacy \\
        --markdown=runs/label_privacy/table.md
"""

import json
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEAN = "clean"

FLAGS = flags.FLAGS
flags.DEFINE_list("label_epsilon", ["1", "2", "4"], "Label epsilons.")
flags.DEFINE_string("mode", "text_to_text", "token_rep, text_to_text or "
                    "seq_rep.")
flags.DEFINE_float("eta", 80.0, "d_chi eta of the text release.")
flags.DEFINE_string("dataset", "sst2", "Data set.")
flags.DEFINE_string("data_dir", "../shared/data/sst2", "Its directory.")
flags.DEFINE_integer("max_train_examples", 5000, "Training texts (budget).")
flags.DEFINE_integer("max_dev_examples", 2000, "Dev texts.")
flags.DEFINE_integer("epochs", 1, "Epochs (budget).")
flags.DEFINE_integer("max_length", 64, "Token length.")
flags.DEFINE_string("output_dir", "runs/label_privacy", "Where runs go.")
flags.DEFINE_string("markdown", None, "Write the table here.")


def _run(name, extra):
    run = os.path.join(FLAGS.output_dir, name)
    if not os.path.isfile(os.path.join(run, "metrics.json")):
        command = [sys.executable, "-m", "tfdptext.cli.train",
                   f"--mode={FLAGS.mode}", f"--eta={FLAGS.eta}",
                   f"--dataset={FLAGS.dataset}", f"--data_dir={FLAGS.data_dir}",
                   f"--max_length={FLAGS.max_length}",
                   f"--epochs={FLAGS.epochs}",
                   f"--max_train_examples={FLAGS.max_train_examples}",
                   f"--max_dev_examples={FLAGS.max_dev_examples}", *extra,
                   f"--output_dir={run}"]
        print("  $ " + " ".join(command), flush=True)
        subprocess.run(command, check=True, cwd=ROOT)
    with open(os.path.join(run, "metrics.json")) as f:
        return json.load(f)


def main(argv):
    del argv
    print(f"machine: {machine.cpu_name()}")
    rows = [("clean labels", _run(CLEAN, []))]
    for eps in FLAGS.label_epsilon:
        rows.append((f"label eps {eps}",
                     _run(f"label_eps{eps}", [f"--label_epsilon={eps}"])))
    lines = ["| labels | test acc | test macro-F1 | train labels changed "
             "(expected) | one training example guarantees |",
             "|---|---|---|---|---|"]
    for name, m in rows:
        labels = m.get("label_privacy")
        changed = "0" if labels is None else (
            f"{labels['changed_share']['train']:.3f} "
            f"({labels['expected_changed_share']:.3f})")
        text = (m["guarantee_text"] if labels is None else
                labels["example_guarantee_text"])
        summary = text.splitlines()[0]
        if labels is not None:
            summary += f"; label: {labels['guarantee_text'].splitlines()[0]}"
        lines.append(f"| {name} | {m['test_accuracy']:.4f} | "
                     f"{m['test_macro_f1']:.4f} | {changed} | {summary} |")
    table = "\n".join(lines)
    print(table)
    machine.write_json(None, {"rows": [
        {"labels": name, "test_accuracy": m["test_accuracy"],
         "test_macro_f1": m["test_macro_f1"],
         "label_privacy": m.get("label_privacy")} for name, m in rows]})
    if FLAGS.markdown:
        with open(FLAGS.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    app.run(main)
