#!/usr/bin/env python
"""Training texts released once vs privatized again every epoch, at the
same budget: the Qu et al. Table 3-4 analogue (SST-2 token_rep and
text_to_text at several eta) and the label-privacy rows (text_to_text with
randomized labels), several seeds each, beside the non-private reference
of the same budget.

Every run is an ordinary `tfdptext-train` run directory under
--output_dir (a rerun skips finished runs and resumes an interrupted one),
run one at a time, every seed of a setting before the next setting (so
that a partial grid holds whole cells). The seed sets the initial weights and the order of the
batches; the releases are fresh from os.urandom in every run.

    nice -n 10 .venv/bin/python benchmarks/training_release.py \\
        --output_dir=runs/training_release --markdown=runs/training_release/tables.md

--collect_only prints the tables of the finished runs without training.
"""

import json
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASES = ("once", "per_epoch")

FLAGS = flags.FLAGS
flags.DEFINE_list("modes", ["text_to_text", "token_rep"], "Qu et al. modes.")
flags.DEFINE_list("eta", ["40", "80", "120"], "d_chi eta per token.")
flags.DEFINE_list("label_epsilon", ["1", "2", "4"],
                  "Label epsilons (text_to_text at --label_eta).")
flags.DEFINE_float("label_eta", 80.0, "eta of the label-privacy rows.")
flags.DEFINE_integer("seeds", 3, "Seeds per setting (0 .. seeds-1).")
flags.DEFINE_string("dataset", "sst2", "Data set.")
flags.DEFINE_string("data_dir", "../shared/data/sst2", "Its directory.")
flags.DEFINE_integer("max_train_examples", 2000, "Training texts (budget).")
flags.DEFINE_integer("max_dev_examples", 500, "Dev texts.")
flags.DEFINE_integer("epochs", 2, "Epochs (budget).")
flags.DEFINE_integer("max_length", 64, "Token length.")
flags.DEFINE_string("output_dir", "runs/training_release", "Where runs go.")
flags.DEFINE_string("markdown", None, "Write the tables here.")
flags.DEFINE_bool("collect_only", False, "Only print the finished runs.")
flags.DEFINE_string("only", None, "Train only the settings whose name "
                    "matches this regular expression (two runners on "
                    "disjoint settings share the machine).")
flags.DEFINE_string("skip", None, "Train no setting whose name matches this "
                    "regular expression.")


def _settings():
    """(name, flags) of every setting in priority order: the reference,
    text_to_text at the label rows' eta (both releases), the label rows,
    then the other modes and etas."""
    out = [("none", ["--mode=none"])]
    label_eta = f"{FLAGS.label_eta:g}"
    # The label rows' eta first, then the others from the largest (where
    # the modes learn) down.
    etas = [label_eta] + sorted([e for e in FLAGS.eta if e != label_eta],
                                key=float, reverse=True)
    modes = {eta: list(FLAGS.modes) for eta in etas}
    if "text_to_text" in modes[label_eta]:
        modes[label_eta].remove("text_to_text")
        for release in RELEASES:
            out.append((f"text_to_text_eta{label_eta}_{release}",
                        ["--mode=text_to_text", f"--eta={label_eta}",
                         f"--training_release={release}"]))
    for eps in FLAGS.label_epsilon:
        for release in RELEASES:
            out.append((f"text_to_text_eta{label_eta}_label{eps}_{release}",
                        ["--mode=text_to_text", f"--eta={label_eta}",
                         f"--label_epsilon={eps}",
                         f"--training_release={release}"]))
    for eta in etas:
        for mode in modes[eta]:
            for release in RELEASES:
                out.append((f"{mode}_eta{eta}_{release}",
                            [f"--mode={mode}", f"--eta={eta}",
                             f"--training_release={release}"]))
    return out


def _run_dir(name, seed):
    return os.path.join(FLAGS.output_dir, f"{name}_seed{seed}")


def _metrics(name, seed):
    path = os.path.join(_run_dir(name, seed), "metrics.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def _train(name, extra, seed):
    if _metrics(name, seed) is not None:
        return
    command = [sys.executable, "-m", "tfdptext.cli.train",
               f"--dataset={FLAGS.dataset}", f"--data_dir={FLAGS.data_dir}",
               f"--max_length={FLAGS.max_length}", f"--epochs={FLAGS.epochs}",
               f"--max_train_examples={FLAGS.max_train_examples}",
               f"--max_dev_examples={FLAGS.max_dev_examples}",
               f"--seed={seed}", *extra,
               f"--output_dir={_run_dir(name, seed)}"]
    print("  $ " + " ".join(command), flush=True)
    start = time.time()
    subprocess.run(command, check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    print(f"  {name} seed {seed}: {time.time() - start:.0f} s", flush=True)


def _stat(values):
    """"mean ± sd (n)" of the finished seeds, or "-"."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    sd = np.std(values, ddof=1) if len(values) > 1 else float("nan")
    return f"{np.mean(values):.3f} ± {sd:.3f} ({len(values)})"


def _accuracies(name, key="test_accuracy"):
    found = [_metrics(name, s) for s in range(FLAGS.seeds)]
    return [m[key] for m in found if m is not None]


def _qu_table():
    reference = _stat(_accuracies("none"))
    lines = ["| eta | mode | once: test acc (seeds) | per_epoch: test acc "
             "(seeds) | non-private (same budget) |", "|---|---|---|---|---|"]
    for eta in FLAGS.eta:
        for mode in FLAGS.modes:
            cells = [_stat(_accuracies(f"{mode}_eta{eta}_{r}"))
                     for r in RELEASES]
            lines.append(f"| {eta} | {mode} | {cells[0]} | {cells[1]} | "
                         f"{reference} |")
    return lines


def _label_table():
    eta = f"{FLAGS.label_eta:g}"
    lines = ["| labels | once: test acc | per_epoch: test acc | training "
             "labels changed (expected) | what one training example "
             "guarantees (once; per_epoch: none) |", "|---|---|---|---|---|"]
    rows = [("clean", f"text_to_text_eta{eta}_{{}}")] + [
        (f"label eps {e}", f"text_to_text_eta{eta}_label{e}_{{}}")
        for e in FLAGS.label_epsilon]
    for label, pattern in rows:
        cells = [_stat(_accuracies(pattern.format(r))) for r in RELEASES]
        found = [m for m in (_metrics(pattern.format("once"), s)
                             for s in range(FLAGS.seeds)) if m]
        changed = "0" if label == "clean" else "-"
        guarantee = "-"
        if found:
            # The latest seed's statement (the library's current wording).
            privacy = found[-1].get("label_privacy")
            release = found[-1].get("training_release") or {}
            if privacy:
                shares = [m["label_privacy"]["changed_share"]["train"]
                          for m in found]
                changed = (f"{np.mean(shares):.3f} "
                           f"({privacy['expected_changed_share']:.3f})")
                guarantee = privacy.get("example_guarantee_text", "")
            else:
                guarantee = release.get("guarantee_text", "")
            guarantee = guarantee.splitlines()[0] if guarantee else "-"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {changed} | "
                     f"{guarantee} |")
    return lines


def _costs():
    """Mean wall time of fit per run and the recorded release's size and
    drawing time, per setting (the finished seeds)."""
    lines = ["| run | fit wall s (mean) | release drawn: texts, real "
             "tokens, bytes, seconds |", "|---|---|---|"]
    for name, _ in _settings():
        found = [m for m in (_metrics(name, s) for s in range(FLAGS.seeds))
                 if m]
        if not found:
            continue
        release = found[0].get("training_release") or {}
        size = "-"
        if release.get("mode") == "once":
            seconds = [m["training_release"]["draw_seconds"] for m in found
                       if m["training_release"].get("draw_seconds")]
            size = (f"{sum(release['texts'].values())}, "
                    f"{sum(release['real_tokens'].values())}, "
                    f"{release['bytes']:,}, "
                    + (f"{np.mean(seconds):.0f}" if seconds else "-"))
        wall = np.mean([m["wall_time_seconds"] for m in found])
        lines.append(f"| {name} | {wall:.0f} | {size} |")
    return lines


def main(argv):
    del argv
    print(f"machine: {machine.cpu_name()}")
    if not FLAGS.collect_only:
        # Setting by setting, every seed of one before the next (the
        # settings in priority order), so that a partial grid holds whole
        # cells.
        for name, extra in _settings():
            if (FLAGS.only and not re.search(FLAGS.only, name)) or (
                    FLAGS.skip and re.search(FLAGS.skip, name)):
                continue
            for seed in range(FLAGS.seeds):
                _train(name, extra, seed)
    text = "\n".join(
        [f"Budget: {FLAGS.dataset}, the first {FLAGS.max_train_examples} "
         f"training and {FLAGS.max_dev_examples} dev texts, "
         f"{FLAGS.epochs} epochs, max length {FLAGS.max_length}; cells: "
         "mean ± sd of the test accuracy over the finished seeds (n).", "",
         "Qu et al. Table 4 analogue:", ""] + _qu_table()
        + ["", "Label privacy (text_to_text, eta "
           f"{FLAGS.label_eta:g}):", ""] + _label_table()
        + ["", "Costs:", ""] + _costs())
    print(text)
    # Every setting's accuracy per seed (None: not finished).
    machine.write_json(None, {
        "budget": {name: FLAGS[name].value for name in (
            "dataset", "max_train_examples", "max_dev_examples", "epochs",
            "max_length", "seeds")},
        "test_accuracy_per_seed": {
            name: [None if m is None else m["test_accuracy"]
                   for m in (_metrics(name, s) for s in range(FLAGS.seeds))]
            for name, _ in _settings()}})
    if FLAGS.markdown:
        os.makedirs(os.path.dirname(FLAGS.markdown) or ".", exist_ok=True)
        with open(FLAGS.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    app.run(main)
