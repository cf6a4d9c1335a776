#!/usr/bin/env python
"""Privacy-adaptive pretraining, then privacy-constrained fine-tuning on
SST-2: Qu et al. (CIKM 2021) Tables 6 (token_rep) and 7 (text_to_text),
with MiniLM, resumable across sessions.

For each eta and mode (token_rep, text_to_text), pretrain the encoder with
each MLM objective (vanilla, probabilistic, denoising) on a public corpus
privatized on the fly by that mode at that eta; then fine-tune the mode on
SST-2 at the same eta from each preset, from the clean-text control
(pretrained once with --mode=none: shared by every eta) and from the plain
encoder, once per seed; and the non-private reference (mode none) on the
same budget. Every cell is a run directory of `tfdptext-pretrain` or
`tfdptext-train` under --output_dir with its own flag file
(<output_dir>/flags/<cell>.flags: that program's --flagfile, the whole
cell) and log (<output_dir>/logs/<cell>.log); benchmarks/pretraining_cells.py
lists them. A rerun skips finished cells and resumes interrupted ones; one
process at a time holds the directory. Relative paths (--output_dir, the
data directories) are taken from the repository root, wherever the command
is started.

The budget comes from a flag file, one per machine:

    # CPU (the budget of docs/benchmarks.md)
    python benchmarks/pretraining_mlm.py \\
        --flagfile=benchmarks/flags/pretraining_cpu.flags
    # GPU (the paper's recipe; refuses to start without a GPU; each cell
    # runs in mixed float16)
    python benchmarks/pretraining_mlm.py \\
        --flagfile=benchmarks/flags/pretraining_gpu.flags

Then `python benchmarks/pretraining_table.py --output_dir=...` writes the
tables (mean and sd over seeds, beside the paper) and the plot.
--dry_run writes the flag files and prints each cell's state, running
nothing.
"""

import datetime
import os
import signal
import sys

from absl import app
from absl import flags

from tfdptext.cli import flags as cli_flags

import machine
import pretraining_cells as cells_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = {"pretrain": os.path.join(ROOT, "train", "tfdptext-pretrain"),
            "train": os.path.join(ROOT, "train", "tfdptext-train")}

FLAGS = flags.FLAGS
ASKED = ("eta", "mode", "objective", "seed")


def define_flags(flag_values=FLAGS):
    """The command's flags: what to run (eta, mode, objective, seed), where,
    and the budget (one flag per field of pretraining_cells.Budget)."""
    flags.DEFINE_multi_float(
        "eta", sorted(cells_lib.MATCHED_ETAS, reverse=True),
        "d_chi eta, the same for pretraining and fine-tuning; the defaults "
        "match Qu et al.'s 125, 100 and 75 by inversion rate on MiniLM.",
        flag_values=flag_values)
    flags.DEFINE_multi_enum(
        "mode", list(cells_lib.MODES), list(cells_lib.MODES),
        "Privacy-constrained fine-tuning modes (pretraining uses the same "
        "mechanism).", flag_values=flag_values)
    flags.DEFINE_multi_enum("objective", list(cells_lib.OBJECTIVES),
                            list(cells_lib.OBJECTIVES), "MLM objectives.",
                            flag_values=flag_values)
    flags.DEFINE_multi_integer(
        "seed", [0, 1, 2], "Fine-tuning seeds (initialisation and order, "
        "never the noise).", flag_values=flag_values)
    flags.DEFINE_string("output_dir", "runs/pretraining_cpu",
                        "Where the cells' run directories go.",
                        flag_values=flag_values)
    flags.DEFINE_bool("require_gpu", False, "Refuse to start without a GPU "
                      "(the GPU budget would take weeks on a CPU).",
                      flag_values=flag_values)
    flags.DEFINE_bool("dry_run", False, "Write the flag files and print "
                      "each cell's state; run nothing.",
                      flag_values=flag_values)
    cli_flags.define_flags(cells_lib.Budget, flag_values=flag_values)


def parsed(flag_values=FLAGS):
    """(budget, asked) of parsed flags: the Budget, and the eta, mode,
    objective and seed lists."""
    return (cli_flags.build(cells_lib.Budget, flag_values=flag_values),
            {name: list(flag_values[name].value) for name in ASKED})


def _stop_on_sigterm():
    """SIGTERM (kill <pid>) ends this process like Ctrl-C, so that the
    running cell's program is stopped with it."""
    def stop(signum, frame):
        del signum, frame
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, stop)


def _check_gpu():
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        raise cells_lib.PlanError(
            "--require_gpu: TensorFlow sees no GPU here; run the CPU budget "
            "(--flagfile=benchmarks/flags/pretraining_cpu.flags).")


def main(argv):
    del argv
    # The cells' flag files name paths relative to the repository root
    # (--output_dir, ../shared/data): the same in every session.
    os.chdir(ROOT)
    output_dir = FLAGS.output_dir
    budget, asked = parsed()
    try:
        if FLAGS.require_gpu:
            _check_gpu()
        os.makedirs(output_dir, exist_ok=True)
        held = cells_lib.lock(output_dir)
        cells_lib.record_plan(output_dir, budget, asked, {
            "argv": sys.argv, "started": datetime.datetime.now().isoformat(
                timespec="seconds"), "machine": machine.cpu_name()})
    except cells_lib.PlanError as err:
        sys.exit(f"pretraining_mlm.py: error: {err}")
    _, cells = cells_lib.read_plan(output_dir)
    for cell in cells:
        cells_lib.write_flag_file(cell, output_dir)
    print(f"{machine.cpu_name()}; {datetime.datetime.now():%Y-%m-%d %H:%M}; "
          f"{len(cells)} cells in {output_dir}, "
          f"{sum(c.finished(output_dir) for c in cells)} finished.",
          flush=True)
    if FLAGS.dry_run:
        for cell in cells:
            state = ("finished" if cell.finished(output_dir) else
                     "interrupted" if cell.started(output_dir) else "to run")
            print(f"{cell.name}: {state} ({cell.flag_file(output_dir)})")
        return
    _stop_on_sigterm()
    states = cells_lib.run_plan(
        cells, output_dir,
        lambda cell, out: cells_lib.run_cell(cell, out, PROGRAMS),
        say=lambda line: print(line, flush=True))
    unfinished = [n for n, s in states.items() if s in ("failed", "blocked")]
    print(f"{len(cells) - len(unfinished)} of {len(cells)} cells finished; "
          f"{len(unfinished)} failed or blocked. Tables: python "
          f"benchmarks/pretraining_table.py --output_dir={output_dir}",
          flush=True)
    held.close()
    if unfinished:
        sys.exit(1)


if __name__ == "__main__":
    define_flags()
    app.run(main)
