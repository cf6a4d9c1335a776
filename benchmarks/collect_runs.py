#!/usr/bin/env python
"""A table of finished training runs (their metrics.json): printed as
Markdown and kept as a provenance record (benchmarks/results/NAME.json,
NAME from --name) that `make benchmark-docs` writes into the docs' region
of the same name.

    python benchmarks/collect_runs.py --name=training-dpnr-on-the-ag-data-minilm \
        runs/ag_dpnr_*
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import docs_tables  # noqa: E402
from benchmarks import machine  # noqa: E402
from tfdptext import rundir  # noqa: E402

COLUMNS = ["run", "mode", "setting", "guarantee", "train / dev / test",
           "epochs", "dev acc", "test acc", "train ex/s", "train min"]


def _row(m, run_dir):
    """The table's cells for one run's metrics `m`."""
    p = m["parameters"]
    g = m["guarantee"]
    if g["unit"] == "none":
        guarantee = "none"
    else:
        guarantee = f"{g['parameter']} = {g['value']:.4g} {g['unit']}"
        whole = g.get("details", {}).get("representation_epsilon")
        if whole:
            guarantee += f" ({whole:.4g} per representation)"
    setting = []
    if p.get("epsilon") is not None:
        setting.append(f"eps={p['epsilon']:g}")
    if p.get("eta") is not None:
        setting.append(f"eta={p['eta']:g}")
    if p.get("dropout_rate"):
        setting.append(f"mu={p['dropout_rate']:g}")
    speed = m.get("train_examples_per_second")
    return [os.path.basename(run_dir.rstrip("/")), m["mode"],
            ", ".join(setting) or "-", guarantee,
            f"{m['sizes']['train']:,} / {m['sizes']['dev']:,} / "
            f"{m['sizes']['test']:,}", str(m["epochs"]),
            f"{m['dev_accuracy']:.4f}", f"{m['test_accuracy']:.4f}",
            f"{speed:.1f}", f"{m['wall_time_seconds'] / 60:.1f}"]


def collect(run_dirs):
    """({run: its metrics}, the table) of the finished runs."""
    metrics, rows = {}, []
    for run_dir in run_dirs:
        run = rundir.RunDir(run_dir)
        if not run.is_finished():
            continue
        m = run.read(rundir.METRICS, required=())
        metrics[os.path.basename(run_dir.rstrip("/"))] = {
            key: m.get(key) for key in (
                "mode", "parameters", "guarantee", "sizes", "epochs",
                "dev_accuracy", "test_accuracy",
                "train_examples_per_second", "wall_time_seconds")}
        rows.append(_row(m, run_dir))
    return metrics, {"columns": COLUMNS, "rows": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="collect_runs",
                        help="the result's name (the docs region's)")
    parser.add_argument("run_dirs", nargs="+", help="training run folders")
    args = parser.parse_args(argv)
    metrics, table = collect(args.run_dirs)
    if not table["rows"]:
        sys.exit("collect_runs.py: no finished run among run_dirs")
    print(docs_tables.table_markdown({"name": args.name, "table": table}))
    machine.write_json(None, {"runs": metrics}, name=args.name, table=table)


if __name__ == "__main__":
    main()
