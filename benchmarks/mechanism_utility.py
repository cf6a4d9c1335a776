#!/usr/bin/env python
"""Utility at matched privacy of every text-to-text mechanism: test
accuracy against the share of words changed and against plausible
deniability, from tfdptext-sweep directories.

The sweeps (one per dataset and privacy parameter family; each cell is a
tfdptext-train run, frozen MiniLM user side, then tfdptext-eval with its
token-level metrics; hours on a 2-core CPU, minutes per cell on a GPU):

    for data in sst2 ag; do
      tfdptext-sweep --train_flagfile=train/flags/${data}_text_to_text.flags \\
          --grid=mechanism=dchi,mahalanobis,vickrey_dchi,vickrey_mahalanobis \\
          --grid=eta=40,60,80,100,120 \\
          --eval_args=--deniability_tokens=100,--deniability_samples=200 \\
          --output_dir=sweeps/${data}_noise
      tfdptext-sweep --train_flagfile=train/flags/${data}_text_to_text.flags \\
          --grid=mechanism=tem,santext,santext_plus,custext,custext_plus \\
          --grid=epsilon=1,2,4,8,16 \\
          --eval_args=--deniability_tokens=100,--deniability_samples=200 \\
          --output_dir=sweeps/${data}_exponential
    done
    python benchmarks/mechanism_utility.py sweeps/sst2_noise \\
        sweeps/sst2_exponential sweeps/ag_noise sweeps/ag_exponential \\
        --plot=docs/img/mechanism_utility.png

The options are the defaults (lam 0.2, t 0.5, beta 0.001,
sensitive_fraction 0.5, p 0.2, top_k 20). "Changed" is the share of real,
non-special test tokens the released text changed; N_w / samples the share
of privatizations of a token that return it (Qu et al.'s plausible
deniability, lower is more private). Prints a Markdown table; --plot draws
one panel per dataset and x axis.
"""

import glob
import json
import os
import sys

from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_string("plot", None, "Write the figure here (PNG).")


def collect(directories):
    """One row per finished cell of the sweeps: dataset, mechanism, its
    parameter, accuracy, changed share, N_w and S_w medians."""
    rows = []
    for directory in directories:
        for path in sorted(glob.glob(os.path.join(directory, "*", "eval",
                                                  "eval.json"))):
            with open(path) as f:
                result = json.load(f)
            token = result.get("token_level")
            if not token:
                continue
            parameter = "eta" if "eta" in token else "epsilon"
            deniability = token["deniability"]
            rows.append({
                "dataset": result["dataset"],
                "mechanism": result["mechanism"],
                "parameter": parameter, "value": token[parameter],
                "accuracy": result["utility"]["accuracy"],
                "changed_share": token["changed_share"],
                "kept_share": deniability["n_w_median"]
                / deniability["samples_per_token"],
                "s_w_median": deniability["s_w_median"],
                "run": os.path.dirname(os.path.dirname(path))})
    return rows


def table(rows):
    lines = ["| dataset | mechanism | parameter | accuracy | changed | "
             "N_w / samples | S_w |", "|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["dataset"], r["mechanism"],
                                         r["value"])):
        lines.append(
            f"| {r['dataset']} | {r['mechanism']} | {r['parameter']} "
            f"{r['value']:g} | {r['accuracy']:.4f} | {r['changed_share']:.3f}"
            f" | {r['kept_share']:.3f} | {r['s_w_median']:g} |")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({r["dataset"] for r in rows})
    figure, axes = plt.subplots(len(datasets), 2, squeeze=False,
                                figsize=(11, 4.2 * len(datasets)))
    for row_axes, dataset in zip(axes, datasets):
        mine = [r for r in rows if r["dataset"] == dataset]
        for axis, key, label in (
                (row_axes[0], "changed_share", "share of words changed"),
                (row_axes[1], "kept_share",
                 "N_w / samples (plausible deniability; lower is more "
                 "private)")):
            colours = plt.get_cmap("tab20").colors
            for i, mechanism in enumerate(sorted({r["mechanism"]
                                                  for r in mine})):
                points = sorted((r[key], r["accuracy"]) for r in mine
                                if r["mechanism"] == mechanism)
                axis.plot(*zip(*points), marker="osD^v<>ph*"[i % 10],
                          color=colours[(2 * i) % 20 + (i >= 10)],
                          label=mechanism)
            axis.set_xlabel(label)
            axis.set_ylabel(f"{dataset} test accuracy")
            axis.grid(alpha=0.3)
        row_axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv):
    rows = collect(argv[1:])
    if not rows:
        sys.exit("No finished sweep cells with token-level results in "
                 f"{argv[1:]}.")
    print(table(rows))
    if FLAGS.plot:
        plot(rows, FLAGS.plot)


if __name__ == "__main__":
    app.run(main)
