#!/usr/bin/env python
"""AG accuracy and empirical privacy against the per-representation epsilon,
one line per private dimension k: the table and plot of docs/benchmarks.md.

Reads the cells of the sweeps that `tfdptext-sweep` wrote (each a training
run with its evaluation in eval/), e.g.

    tfdptext-sweep --train_flagfile=train/flags/ag_private_dim.flags \
        --grid=epsilon=19.2,5,50,10 --grid=private_dim=8,384,32,16 \
        --x=epsilon --eval_args=--max_attack_examples=3000 \
        --output_dir=runs/sweep_ag_private_dim
    tfdptext-sweep --train_flagfile=train/flags/ag_private_dim.flags \
        --grid=epsilon=19.2,5,50,10 --x=epsilon \
        --eval_args=--max_attack_examples=3000 \
        --output_dir=runs/sweep_ag_no_projection
    python benchmarks/private_dim_table.py runs/sweep_ag_private_dim \
        runs/sweep_ag_no_projection --plot=docs/img/ag_private_dim.png

Cells without a finished evaluation are skipped (a sweep still running).
"""

import json
import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import docs_plots  # noqa: E402
from benchmarks import docs_tables  # noqa: E402
from benchmarks import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("plot", None, "Where to write the PNG (none: no plot).")


def _read(path):
    with open(path) as f:
        return json.load(f)


def cells(sweep_dir):
    """One row per finished cell of a sweep directory."""
    rows = []
    for name in sorted(os.listdir(sweep_dir)):
        run = os.path.join(sweep_dir, name)
        eval_path = os.path.join(run, "eval", "eval.json")
        if not os.path.isfile(eval_path):
            continue
        metrics = _read(os.path.join(run, "metrics.json"))
        result = _read(eval_path)
        guarantee = metrics["guarantee"]
        dim = metrics["parameters"].get("private_dim")
        privacy = result.get("attack", {}).get("empirical_privacy", {})
        entity = privacy.get("entity", {})
        rows.append({
            "k": dim,
            "projected": dim is not None,
            "normalization": metrics["parameters"].get("normalization",
                                                       "minmax"),
            "epsilon": guarantee["value"],
            "unit": guarantee["unit"],
            "scale": guarantee["details"].get("noise_scale"),
            "train_test_accuracy": metrics["test_accuracy"],
            "test_accuracy": result["utility"]["accuracy"],
            "macro_f1": result["utility"]["macro_f1"],
            "majority": result["utility"]["majority_accuracy"],
            "privacy": entity.get("strongest"),
            "privacy_majority": entity.get("majority"),
            "train_examples": metrics["sizes"]["train"],
        })
    return rows


def _k_label(row):
    if not row["projected"]:
        return "384 (no projection)"
    return f"{row['k']}, {row['normalization']}"


# The docs region (docs/benchmarks.md) this table is written into.
REGION = "training-a-private-representation-of-k"


def table(rows):
    """The docs' table ({"columns", "rows"} of strings)."""
    cells = []
    for row in sorted(rows, key=lambda r: (not r["projected"],
                                           r["k"] or 384, r["normalization"],
                                           r["epsilon"])):
        cells.append([
            _k_label(row), f"{row['epsilon']:g}", f"{row['scale']:.3g}",
            f"{row['train_test_accuracy']:.4f}",
            f"{row['test_accuracy']:.4f}", f"{row['macro_f1']:.4f}",
            *([f"{row['privacy']:.4f}", f"{row['privacy_majority']:.4f}"]
              if row["privacy"] is not None else ["-", "-"])])
    return {"columns": [
        "k, normalization", "epsilon per representation",
        "Laplace scale b = k / eps", "test acc (run)",
        "test acc (eval, fresh noise)", "macro-F1",
        "entity 1 - F (strongest attacker)", "1 - F of majority guess"],
        "rows": cells}


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: private_dim_table.py SWEEP_DIR [SWEEP_DIR ...]")
    rows = [row for sweep_dir in argv[1:] for row in cells(sweep_dir)]
    if not rows:
        sys.exit("no finished cells")
    found = table(rows)
    print(docs_tables.table_markdown({"name": REGION, "table": found}))
    # Every cell's values, then the docs' region (make benchmark-docs).
    machine.write_json(None, {"rows": rows})
    machine.write_json(None, {"from": "private_dim_table"}, name=REGION,
                       table=found)
    if FLAGS.plot:
        # Drawn from the result just written, as `make benchmark-docs`
        # draws docs/img/ag_private_dim.png.
        with open(FLAGS.plot, "wb") as f:
            f.write(docs_plots.draw("ag_private_dim.png"))
        print(f"plot: {FLAGS.plot}")


if __name__ == "__main__":
    app.run(main)
