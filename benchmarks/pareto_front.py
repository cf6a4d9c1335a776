#!/usr/bin/env python
"""Accuracy against epsilon per text for every release of one text, beside
the non-private run of the same budget, the limit (the best LDP channel on
its predictions) and the bound (`tfdptext.privacy.limit`).

For each data set, trains (tfdptext-train) and evaluates (tfdptext-eval
--reference_run=<the non-private run>) at each epsilon per text:

- dpnr_384: the pooled 384-d MiniLM vector, min-max + Laplace with
  --sensitivity=vector (b = 384 / eps: eps for the whole vector);
- laplace_k8_sigmoid: an 8-d sigmoid projection + Laplace (b = 8 / eps);
- code_m_K: a learned code of K values by K-ary randomized response;
- code_m_2K: the same with 2K codes;

and prints (and writes with --markdown / --plot / --json_out) one row per
cell: accuracy, macro-F1, the limit from the non-private run's confusion
matrix, the share of it, the entity attackers' 1 - F (AG) and the guarantee as the run
recorded it. Every run is an ordinary run directory under --output_dir: a
rerun skips finished cells and resumes an interrupted one.

    python benchmarks/pareto_front.py --output_dir=runs/pareto \\
        --markdown=runs/pareto/table.md --plot=docs/img/pareto_front.png

A quick check that everything runs (minutes, numbers meaningless):

    python benchmarks/pareto_front.py --dataset=sst2 --epsilon=1 \\
        --max_train_examples=64 --max_dev_examples=32 \\
        --output_dir=/tmp/pareto_smoke
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
DATA = {"ag_dpnr": "../shared/data/ag_dpnr", "sst2": "../shared/data/sst2"}
CLASSES = {"ag_dpnr": 4, "sst2": 2}
REFERENCE = "none"
RELEASES = {
    "dpnr_384": ["--mode=robust", "--sensitivity=vector"],
    "laplace_k8_sigmoid": ["--mode=robust", "--sensitivity=vector",
                           "--private_dim=8", "--normalization=sigmoid"],
    "code_m_K": ["--mode=robust", "--release=code"],
    "code_m_2K": ["--mode=robust", "--release=code", "--num_codes={2K}"],
}

FLAGS = flags.FLAGS
flags.DEFINE_multi_enum("dataset", list(DATA), list(DATA), "Data sets.")
flags.DEFINE_list("epsilon", ["0.5", "1", "2", "4", "8"],
                  "Epsilons per text.")
flags.DEFINE_list("release", list(RELEASES), "Releases to run.")
flags.DEFINE_integer("max_train_examples", 3000, "Training texts (budget).")
flags.DEFINE_integer("max_dev_examples", 500, "Dev texts (best epoch).")
flags.DEFINE_integer("epochs", 1, "Epochs (budget).")
flags.DEFINE_integer("max_length", 64, "Token length.")
flags.DEFINE_integer("max_attack_examples", 3000,
                     "Train/dev texts released for the attackers (AG).")
flags.DEFINE_string("output_dir", "runs/pareto", "Where the runs go.")
flags.DEFINE_bool("collect_only", False, "Only read finished cells.")
flags.DEFINE_string("markdown", None, "Write the table here.")
flags.DEFINE_string("plot", None, "Write the plot here.")
flags.DEFINE_string("json_out", None, "Write the rows here.")


def _call(module, args):
    command = [sys.executable, "-m", module, *args]
    print("  $ " + " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)


def _budget(dataset):
    return [f"--dataset={dataset}", f"--data_dir={DATA[dataset]}",
            f"--max_length={FLAGS.max_length}", f"--epochs={FLAGS.epochs}",
            f"--max_train_examples={FLAGS.max_train_examples}",
            f"--max_dev_examples={FLAGS.max_dev_examples}"]


def _cell(dataset, release, epsilon=None):
    name = release if epsilon is None else f"{release}_eps{epsilon}"
    return os.path.join(FLAGS.output_dir, dataset, name)


def _run(dataset, release, epsilon, reference):
    """Trains and evaluates one cell unless its eval.json exists."""
    run = _cell(dataset, release, epsilon)
    if os.path.isfile(os.path.join(run, "eval", "eval.json")):
        return run
    flags_ = ([f"--epsilon={epsilon}"] if epsilon is not None else []) + [
        f.replace("{2K}", str(2 * CLASSES[dataset]))
        for f in RELEASES.get(release, ["--mode=none"])]
    _call("tfdptext.cli.train", [*_budget(dataset), *flags_,
                                 f"--output_dir={run}"])
    _call("tfdptext.cli.evaluate", [
        f"--model_dir={run}", f"--output_dir={os.path.join(run, 'eval')}",
        f"--max_attack_examples={FLAGS.max_attack_examples}",
        *([f"--reference_run={reference}"] if reference else [])])
    return run


def _reference_confusion(dataset):
    """The non-private run's test confusion matrix, from its evaluation's
    predictions (runs made before metrics.json recorded it included)."""
    import numpy as np

    from tfdptext.privacy import limit as limit_lib

    stored = np.load(os.path.join(_cell(dataset, REFERENCE), "eval",
                                  "predictions.npz"))
    return limit_lib.confusion_matrix(stored["labels"], stored["predicted"],
                                      CLASSES[dataset])


def _limit_of(dataset, limit, accuracy):
    """The cell's limit from the reference's confusion matrix (the best
    LDP channel on its predictions, `limit.reference_limit`), whatever
    model its eval.json used, with K-ary randomized response on them
    beside (`limit.rr_reference`)."""
    from tfdptext.privacy import limit as limit_lib

    if not limit.get("applies"):
        return limit
    confusion = _reference_confusion(dataset)
    value = limit_lib.reference_limit(limit["epsilon_per_text"], confusion,
                                      limit["delta"])
    return {**limit, "limit": value, "share_of_limit": accuracy / value,
            "reference_model": "confusion",
            "randomized_response": limit_lib.rr_reference(
                limit["epsilon_per_text"], confusion, limit["delta"])}


def _row(dataset, release, epsilon, run):
    with open(os.path.join(run, "metrics.json")) as f:
        metrics = json.load(f)
    with open(os.path.join(run, "eval", "eval.json")) as f:
        result = json.load(f)
    utility = result["utility"]
    limit = _limit_of(dataset, utility.get("limit") or {},
                      utility["accuracy"])
    entity = result.get("attack", {}).get("empirical_privacy", {}).get(
        "entity", {})
    return {"dataset": dataset, "release": release,
            "epsilon": None if epsilon is None else float(epsilon),
            "accuracy": utility["accuracy"], "macro_f1": utility["macro_f1"],
            "majority": utility["majority_accuracy"],
            "n_test": utility["n_test"],
            "limit": limit.get("limit"),
            "share_of_limit": limit.get("share_of_limit"),
            "epsilon_per_text": limit.get("epsilon_per_text"),
            "limit_kind": limit.get("kind"),
            "entity_privacy": entity.get("strongest"),
            "entity_privacy_majority": entity.get("majority"),
            "guarantee": metrics["guarantee_text"].splitlines()[0],
            "train_seconds": metrics["wall_time_seconds"]}


def _fmt(value):
    return "-" if value is None else f"{value:.3f}"


def _table(rows):
    lines = ["| data | release | eps per text | accuracy | macro-F1 | "
             "limit | share of limit | entity 1 - F (majority) | guarantee "
             "(the run's) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        eps = "-" if r["epsilon"] is None else f"{r['epsilon']:g}"
        entity = "-" if r["entity_privacy"] is None else (
            f"{r['entity_privacy']:.3f} ({r['entity_privacy_majority']:.3f})")
        lines.append(
            f"| {r['dataset']} | {r['release']} | {eps} | "
            f"{_fmt(r['accuracy'])} | {_fmt(r['macro_f1'])} | "
            f"{_fmt(r['limit'])} | {_fmt(r['share_of_limit'])} | {entity} | "
            f"{r['guarantee']} |")
    return "\n".join(lines)


def _plot(rows, path):
    """One panel per data set: accuracy against epsilon per text per
    release, the non-private accuracy, the limit from it (Bayes decoding
    for the test split's class frequencies) and the majority class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from tfdptext.privacy import limit as limit_lib

    datasets = sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.4 * len(datasets),
                                                        3.8), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = [r for r in rows if r["dataset"] == dataset]
        for release in RELEASES:
            line = sorted([r for r in part if r["release"] == release],
                          key=lambda r: r["epsilon"])
            if line:
                ax.plot([r["epsilon"] for r in line],
                        [r["accuracy"] for r in line], "o-", label=release)
        reference = [r for r in part if r["release"] == REFERENCE]
        limited = [r for r in part if r.get("limit") is not None]
        if reference and limited:
            a = reference[0]["accuracy"]
            confusion = _reference_confusion(dataset)
            eps = [r["epsilon"] for r in limited]
            grid = np.geomspace(min(eps) / 1.3, max(eps) * 1.3, 80)
            ax.plot(grid, [limit_lib.reference_limit(e, confusion)
                           for e in grid], "k--", linewidth=1,
                    label="limit (best LDP channel on the non-private "
                    "prediction)")
            prior = confusion.sum(axis=1)
            ax.plot(grid, [limit_lib.bound(e, len(prior), prior)
                           for e in grid], "k:", linewidth=1,
                    label="bound (any release)")
            ax.axhline(a, color="grey", linestyle=":",
                       label=f"non-private ({a:.3f})")
            ax.axhline(reference[0]["majority"], color="red", linewidth=0.8,
                       linestyle="-.", label="majority class")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon per text")
        ax.set_ylabel("test accuracy")
        ax.set_title(dataset)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    del argv
    print(f"machine: {machine.cpu_name()}; "
          f"{machine.versions(['tensorflow', 'keras', 'keras-hub'])}")
    rows = []
    for dataset in FLAGS.dataset:
        reference = _cell(dataset, REFERENCE)
        cells = [(REFERENCE, None)] + [(release, epsilon)
                                       for release in FLAGS.release
                                       for epsilon in FLAGS.epsilon]
        for release, epsilon in cells:
            run = _cell(dataset, release, epsilon)
            if not FLAGS.collect_only:
                _run(dataset, release, epsilon,
                     None if release == REFERENCE else reference)
            if os.path.isfile(os.path.join(run, "eval", "eval.json")):
                rows.append(_row(dataset, release, epsilon, run))
    table = _table(rows)
    print(table)
    if FLAGS.markdown:
        with open(FLAGS.markdown, "w") as f:
            f.write(table + "\n")
    machine.write_json(FLAGS.json_out, rows)
    if FLAGS.plot and rows:
        _plot(rows, FLAGS.plot)


if __name__ == "__main__":
    app.run(main)
