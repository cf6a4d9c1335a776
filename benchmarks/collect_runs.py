#!/usr/bin/env python
"""Prints a markdown table of finished training runs (their metrics.json).

    python benchmarks/collect_runs.py runs/ag_dpnr_*
"""

import os
import sys

from tfdptext import rundir


def _row(run_dir):
    m = rundir.RunDir(run_dir).read(rundir.METRICS, required=())
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
    return (f"| {os.path.basename(run_dir.rstrip('/'))} | {m['mode']} | "
            f"{', '.join(setting) or '-'} | {guarantee} | "
            f"{m['sizes']['train']:,} / {m['sizes']['dev']:,} / "
            f"{m['sizes']['test']:,} | {m['epochs']} | "
            f"{m['dev_accuracy']:.4f} | {m['test_accuracy']:.4f} | "
            f"{speed:.1f} | {m['wall_time_seconds'] / 60:.1f} |")


def main(run_dirs):
    print("| run | mode | setting | guarantee | train / dev / test | epochs |"
          " dev acc | test acc | train ex/s | train min |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run_dir in run_dirs:
        if rundir.RunDir(run_dir).is_finished():
            print(_row(run_dir))


if __name__ == "__main__":
    main(sys.argv[1:])
