#!/usr/bin/env python
"""The tables and plot of the privacy-adaptive pretraining benchmark.

Reads the run directories that benchmarks/pretraining_mlm.py wrote under
--output_dir (its plan.json names them) and prints, in Markdown:

- the non-private reference of the same fine-tuning budget (mode none from
  the plain encoder), mean and sd over seeds;
- per mode (token_rep: Qu et al. Table 6; text_to_text: Table 7), per eta,
  the SST-2 test accuracy fine-tuned from the plain encoder, from the
  clean-text MLM control and from each objective's preset: mean and sd
  over the finished seeds, the difference from the plain encoder with its
  standard error, beside Qu et al.'s number at the eta of the same
  inversion rate and their gain over the original BERT;
- the pretraining runs: held-out MLM loss and masked-token accuracy
  before and after, speed and time;
- what the cells cost (minutes per kind of cell).

Unfinished cells are left out (the seed counts say how many finished), so
it runs on a directory in progress.

    python benchmarks/pretraining_table.py --output_dir=runs/pretraining_cpu \\
        --plot=docs/img/sst2_pretraining.png
"""

import math
import os

from absl import app
from absl import flags

import docs_tables
import machine
import pretraining_cells as cells_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", "runs/pretraining_cpu",
                    "The benchmark's directory (pretraining_mlm.py "
                    "--output_dir).")
flags.DEFINE_string("markdown_out", None, "Also write the tables here.")
flags.DEFINE_string("json_out", None, "Also write the numbers as JSON.")
flags.DEFINE_string("plot", None, "Write the accuracy plot here (PNG).")

ENCODER_NAMES = {
    cells_lib.PLAIN: "{preset}, not pretrained",
    cells_lib.CLEAN: "clean-text MLM (control, no noise)",
    "vanilla": "vanilla MLM",
    "probabilistic": "probabilistic MLM",
    "denoising": "denoising MLM",
}
# Qu et al.'s column of each encoder (their "Orig BERT" is our plain
# encoder; they have no clean-text control).
QU_COLUMN = {cells_lib.PLAIN: 0, "vanilla": 1, "probabilistic": 2,
             "denoising": 3}


def summarize(per_seed):
    """{"n", "mean", "sd", "per_seed"} of {seed: accuracy} (sd: n - 1 in
    the denominator, None below two values)."""
    values = list(per_seed.values())
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "sd": None, "per_seed": {}}
    mean = sum(values) / n
    sd = (math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
          if n > 1 else None)
    return {"n": n, "mean": mean, "sd": sd,
            "per_seed": {str(k): per_seed[k] for k in sorted(per_seed)}}


def paired(a, b):
    """{seed: a's accuracy minus b's} over the seeds both finished (the
    same fine-tuning seed: initialisation and order)."""
    return {seed: a["per_seed"][seed] - b["per_seed"][seed]
            for seed in a["per_seed"] if seed in b["per_seed"]}


def sign_test(differences):
    """Two-sided sign test p-value of the nonzero paired differences."""
    signs = [d for d in differences if d != 0]
    n, below = len(signs), sum(d < 0 for d in signs)
    if n == 0:
        return None
    tail = sum(math.comb(n, k) for k in range(min(below, n - below) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def difference(a, b):
    """Mean of a minus mean of b and its standard error (None when either
    has fewer than two values)."""
    if not a["n"] or not b["n"]:
        return None, None
    if a["sd"] is None or b["sd"] is None:
        return a["mean"] - b["mean"], None
    return a["mean"] - b["mean"], math.sqrt(a["sd"] ** 2 / a["n"]
                                            + b["sd"] ** 2 / b["n"])


def collect(output_dir):
    """Everything the tables need from the directory's finished cells."""
    budget, cells = cells_lib.read_plan(output_dir)
    finetuned, pretrained, seconds, majority = {}, {}, {}, None
    walls = cells_lib.read_timings(output_dir)
    for cell in cells:
        metrics = cells_lib.read_metrics(cell, output_dir)
        if metrics is None:
            continue
        kind = f"{cell.kind} {cell.mode or 'none'}" + (
            f" {cell.encoder}" if cell.kind == "pretrain" and cell.mode
            else "")
        if cell.name in walls:
            seconds.setdefault(kind, []).append(walls[cell.name])
        if cell.kind == "pretrain":
            pretrained[cell.name] = (cell, metrics)
            continue
        key = (cell.eta, cell.mode, cell.encoder)
        finetuned.setdefault(key, {})[cell.seed] = metrics["test_accuracy"]
        majority = metrics["majority_test_accuracy"]
    plan = {"eta": sorted({c.eta for c in cells if c.eta is not None}),
            "mode": [m for m in cells_lib.MODES
                     if any(c.mode == m for c in cells)],
            "encoder": [e for e in cells_lib.ENCODERS
                        if any(c.encoder == e and c.mode for c in cells)],
            "seeds": sorted({c.seed for c in cells if c.seed is not None})}
    return {"budget": budget, "plan": plan, "cells": len(cells),
            "finished": sum(c.finished(output_dir) for c in cells),
            "accuracy": {k: summarize(v) for k, v in finetuned.items()},
            "pretrained": pretrained, "seconds": seconds,
            "majority": majority}


def _acc(stats):
    if not stats or not stats["n"]:
        return "-"
    sd = "" if stats["sd"] is None else f" ± {stats['sd']:.3f}"
    return f"{stats['mean']:.3f}{sd} ({stats['n']})"


def _signed(value, error=None):
    if value is None:
        return "-"
    return f"{value:+.3f}" + ("" if error is None else f" ± {error:.3f}")


def _qu(mode, qu_eta, encoder):
    row = cells_lib.QU_SST[mode].get(qu_eta)
    if row is None or encoder not in QU_COLUMN:
        return None, None
    value = row[QU_COLUMN[encoder]]
    return value, (None if encoder == cells_lib.PLAIN else value - row[0])


ACCURACY_COLUMNS = [
    "MiniLM eta (tokens unchanged)", "Qu et al. eta (inversion)",
    "encoder fine-tuned", "ours", "ours per seed",
    "ours minus not pretrained (± se)", "the same seed minus not pretrained",
    "Qu et al.", "Qu et al. minus Orig BERT"]


def _per_seed(values):
    return " / ".join(f"{v:+.3f}" if signed else f"{v:.3f}"
                      for signed, v in values) or "-"


def accuracy_table(results, mode):
    """{"columns", "rows"}: one mode's accuracies (Qu et al.'s Table 6 or
    7), per eta and encoder, per seed and paired with not pretrained."""
    budget, plan, accuracy = (results["budget"], results["plan"],
                              results["accuracy"])
    rows = []
    for eta in plan["eta"]:
        qu_eta, share = cells_lib.MATCHED_ETAS.get(eta, (None, None))
        ours_eta = f"{eta:g}" + ("" if share is None else f" ({share:.3f})")
        theirs_eta = "-" if qu_eta is None else \
            f"{qu_eta} ({cells_lib.QU_INVERSION[qu_eta]:.3f})"
        plain = accuracy.get((eta, mode, cells_lib.PLAIN)) or summarize({})
        for index, encoder in enumerate(plan["encoder"]):
            stats = accuracy.get((eta, mode, encoder)) or summarize({})
            mine = encoder == cells_lib.PLAIN
            gain = (None, None) if mine else difference(stats, plain)
            pairs = {} if mine else paired(stats, plain)
            theirs, their_gain = _qu(mode, qu_eta, encoder)
            rows.append([
                ours_eta if index == 0 else "",
                theirs_eta if index == 0 else "",
                ENCODER_NAMES[encoder].format(preset=budget.preset),
                _acc(stats),
                _per_seed([(False, v) for v in stats["per_seed"].values()]),
                _signed(*gain),
                _per_seed([(True, v) for v in pairs.values()]),
                "-" if theirs is None else f"{theirs:.4f}",
                _signed(their_gain)])
    return {"columns": ACCURACY_COLUMNS, "rows": rows}


def runs_table(results):
    """{"columns", "rows"}: the pretraining runs."""
    rows = []
    for name, (cell, metrics) in sorted(results["pretrained"].items()):
        start, end = metrics["heldout"]["start"], metrics["heldout"]["end"]
        rows.append([
            name, str(metrics["steps"]),
            f"{start['mlm_loss']:.2f} -> {end['mlm_loss']:.2f}",
            f"{start['original_accuracy']:.3f} -> "
            f"{end['original_accuracy']:.3f}",
            f"{end['target_accuracy']:.3f}",
            f"{metrics['examples_per_second'] or 0:.1f}",
            f"{metrics['train_seconds_this_session'] / 60:.1f} "
            f"({_steps_timed(metrics)})"])
    return {"columns": [
        "run", "steps", "held-out MLM loss (start -> end)",
        "masked original-token accuracy (start -> end)",
        "objective's target accuracy (end)", "examples/s",
        "training minutes (steps timed)"], "rows": rows}


def cost_table(results):
    """{"columns", "rows"}: minutes per kind of cell."""
    rows = [[kind, str(len(values)), f"{sum(values) / len(values) / 60:.1f}",
             f"{sum(values) / 60:.0f}"]
            for kind, values in sorted(results["seconds"].items())]
    total = sum(sum(v) for v in results["seconds"].values())
    rows.append(["all", str(sum(len(v) for v in results["seconds"].values())),
                 "-", f"{total / 60:.0f}"])
    return {"columns": ["cells", "finished", "minutes per cell",
                        "total minutes"], "rows": rows}


def tables(results):
    """{result name: {"columns", "rows"}}: the docs' regions of the same
    names (benchmarks/docs_tables.py)."""
    found = {f"pretraining-{mode.replace('_', '-')}":
             accuracy_table(results, mode) for mode in results["plan"]["mode"]}
    found["pretraining-runs"] = runs_table(results)
    found["pretraining-cost"] = cost_table(results)
    return found


def markdown(results):
    budget, accuracy = results["budget"], results["accuracy"]
    found = tables(results)
    lines = [f"{results['finished']} of {results['cells']} cells finished.",
             ""]
    reference = accuracy.get((None, None, cells_lib.PLAIN))
    lines.append(
        f"Non-private reference of the same budget (mode none, "
        f"{budget.preset}, {budget.finetune_train_examples or 'all'} texts): "
        f"test accuracy {_acc(reference)}. Qu et al. non-private "
        f"(BERT-base, full training set, 3 epochs): {cells_lib.QU_NON_PRIVATE}."
        + (f" Majority class: {results['majority']:.3f}."
           if results["majority"] is not None else ""))
    for mode in results["plan"]["mode"]:
        lines += ["", f"{mode} (Qu et al. Table {cells_lib.QU_TABLES[mode]}"
                  "), SST-2 test accuracy, mean ± sd (seeds):", "",
                  docs_tables.table_markdown(
                      {"name": mode, "table": found[
                          f"pretraining-{mode.replace('_', '-')}"]})]
    lines += ["", "Pretraining runs (held-out texts of the corpus):", "",
              docs_tables.table_markdown(
                  {"name": "runs", "table": found["pretraining-runs"]}),
              "", "A resumed run's examples/s and minutes are those of "
              "the session that finished it (the steps timed); the earlier "
              "sessions' share is not in them.", "",
              "What the finished cells cost (wall minutes of their "
              "programs, start-up and evaluation included, summed over the "
              "program runs that ended; a run killed with its session "
              "recorded no time, so a resumed cell's total is too low):",
              "", docs_tables.table_markdown(
                  {"name": "cost", "table": found["pretraining-cost"]})]
    return "\n".join(lines)


def _steps_timed(metrics):
    """'all 500 steps', or '100 of 500 steps' for a resumed run."""
    timed = metrics.get("steps_run_this_session", metrics["steps"])
    if timed == metrics["steps"]:
        return f"all {timed} steps"
    return f"{timed} of {metrics['steps']} steps"


def plot(results, path):
    """Accuracy against eta, one panel per mode: ours (mean, sd bars) in
    solid lines, Qu et al.'s at the matched eta dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan, accuracy, budget = (results["plan"], results["accuracy"],
                              results["budget"])
    etas = plan["eta"]
    colours = dict(zip(cells_lib.ENCODERS, ("black", "grey", "tab:blue",
                                            "tab:orange", "tab:green")))
    fig, axes = plt.subplots(1, len(plan["mode"]), sharey=True,
                             figsize=(5.5 * len(plan["mode"]), 4.5),
                             squeeze=False)
    reference = accuracy.get((None, None, cells_lib.PLAIN))
    for ax, mode in zip(axes[0], plan["mode"]):
        for offset, encoder in enumerate(plan["encoder"]):
            points = [(i, accuracy[(eta, mode, encoder)])
                      for i, eta in enumerate(etas)
                      if accuracy.get((eta, mode, encoder), {}).get("n")]
            shift = (offset - 2) * 0.04
            if points:
                ax.errorbar([i + shift for i, _ in points],
                            [s["mean"] for _, s in points],
                            yerr=[s["sd"] or 0 for _, s in points],
                            color=colours[encoder], marker="o", capsize=3,
                            label=ENCODER_NAMES[encoder].format(
                                preset=budget.preset))
            theirs = [(i, _qu(mode, cells_lib.MATCHED_ETAS[eta][0],
                              encoder)[0]) for i, eta in enumerate(etas)
                      if eta in cells_lib.MATCHED_ETAS]
            theirs = [(i, v) for i, v in theirs if v is not None]
            if theirs:
                ax.plot([i for i, _ in theirs], [v for _, v in theirs],
                        color=colours[encoder], ls="--", marker="x",
                        alpha=0.6)
        if reference and reference["n"]:
            ax.axhline(reference["mean"], color="tab:red", lw=1,
                       label=f"non-private, same budget "
                             f"({reference['mean']:.3f})")
        if results["majority"] is not None:
            ax.axhline(results["majority"], color="grey", lw=0.8, ls=":",
                       label="majority class")
        ax.set_xlim(-0.5, len(etas) - 0.5)
        ax.set_ylim(0.4, 1.0)
        ax.set_xticks(range(len(etas)), [
            f"{eta:g}" + (f"\n(Qu {cells_lib.MATCHED_ETAS[eta][0]})"
                          if eta in cells_lib.MATCHED_ETAS else "")
            for eta in etas])
        ax.set_xlabel("eta (MiniLM; Qu et al.'s BERT-base eta of the same "
                      "inversion rate)", fontsize=8)
        ax.set_title(f"{mode} (Table {cells_lib.QU_TABLES[mode]} analogue)",
                     fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("SST-2 test accuracy (solid: ours, mean ± sd; "
                          "dashed: Qu et al.)", fontsize=8)
    from matplotlib.lines import Line2D

    # One legend for both panels, every encoder's colour in it (a panel
    # may have no finished cell yet).
    handles = [Line2D([], [], color=colours[encoder], marker="o",
                      label=ENCODER_NAMES[encoder].format(
                          preset=budget.preset))
               for encoder in plan["encoder"]]
    handles += [h for h in axes[0][0].get_legend_handles_labels()[0]
                if h.get_label().startswith(("non-private", "majority"))]
    handles.append(Line2D([], [], color="grey", ls="--", marker="x",
                          label="Qu et al. (BERT-base), same colours"))
    axes[0][-1].legend(handles=handles, fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _jsonable(results):
    return {"budget": results["budget"].__dict__, "plan": results["plan"],
            "cells": results["cells"], "finished": results["finished"],
            "majority": results["majority"],
            "accuracy": [{"eta": k[0], "mode": k[1], "encoder": k[2], **v}
                         for k, v in sorted(results["accuracy"].items(),
                                            key=str)],
            "paired_with_not_pretrained": [
                {"eta": k[0], "mode": k[1], "encoder": k[2],
                 "per_seed": pairs,
                 "sign_test_p": sign_test(list(pairs.values()))}
                for k, v in sorted(results["accuracy"].items(), key=str)
                if k[1] and k[2] != cells_lib.PLAIN
                for pairs in [paired(v, results["accuracy"].get(
                    (k[0], k[1], cells_lib.PLAIN)) or summarize({}))]],
            "seconds": results["seconds"],
            "pretraining": {name: {"steps": m["steps"],
                                   "heldout": m["heldout"]["end"],
                                   "examples_per_second":
                                       m["examples_per_second"]}
                            for name, (_, m) in
                            results["pretrained"].items()}}


def main(argv):
    del argv
    results = collect(FLAGS.output_dir)
    text = markdown(results)
    print(text)
    if FLAGS.markdown_out:
        with open(FLAGS.markdown_out, "w") as f:
            f.write(text + "\n")
    summary = _jsonable(results)
    machine.write_json(FLAGS.json_out, summary, name="pretraining")
    # One result per docs region (benchmarks/docs_tables.py writes them
    # into docs/benchmarks.md), each with the summary it comes from.
    for name, table in tables(results).items():
        machine.write_json(None, {"from": "pretraining"}, name=name,
                           table=table)
    if FLAGS.plot:
        os.makedirs(os.path.dirname(FLAGS.plot) or ".", exist_ok=True)
        plot(results, FLAGS.plot)


if __name__ == "__main__":
    app.run(main)
