"""Trains and evaluates over a grid, resumably, and draws the curves.

    tfdptext-sweep --train_flagfile=train/flags/ag_dpnr_eps1.flags \\
        --grid=epsilon=0.05,0.1,0.5,1,5 --output_dir=sweeps/ag_eps

    tfdptext-sweep --train_flagfile=train/flags/sst2_token_rep_eta80.flags \\
        --grid=mode=token_rep,text_to_text --grid=eta=40,60,80,100,120 \\
        --x=eta --output_dir=sweeps/sst2_eta

Each cell runs tfdptext-train (the flag file, then the cell's values, then
--output_dir=<output_dir>/<cell>) and tfdptext-eval (--eval_args added),
the commands `python -m tfdptext.cli.train` and `python -m
tfdptext.cli.evaluate` with this Python, printed as they start. Each runs
as a child process forked from the sweep once it has imported TensorFlow
(on Linux: once per sweep instead of twice per cell, about 10 CPU-s each),
starting as a fresh interpreter would (tfdptext.cli.children);
--nofork_cells starts each as a fresh interpreter. Your own data: put
--dataset=tsv --train_file=... --test_file=... --text_column=...
--label_column=... in the flag file (or
pass them with --train_args); tfdptext-eval reloads each run's data from its
config.json. Re-running the same command after an interruption skips
finished cells and resumes the interrupted one, a SIGKILL included (the
cell's training or evaluation is killed with the sweep). Writes sweep.json,
summary.md and curves.png, and limit.png (accuracy against epsilon per text
beside the randomized-response limit) when the cells' guarantees have one
epsilon per text; --reference_run names the non-private run of the same
budget whose accuracy the limit starts from.
"""

import os

from absl import flags

from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-sweep"
TRAIN_MODULE = "tfdptext.cli.train"
EVAL_MODULE = "tfdptext.cli.evaluate"


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-sweep's flags in `flag_values`."""
    flags.DEFINE_string("train_flagfile", None,
                        "Base tfdptext-train flag file.", required=True,
                        flag_values=flag_values)
    flags.DEFINE_multi_string("grid", None, "name=v1,v2,... (a "
                              "tfdptext-train flag, i.e. a TrainConfig "
                              "field, and its values); several make a "
                              "Cartesian product.", required=True,
                              flag_values=flag_values)
    flags.DEFINE_string("x", None, "Grid name on the curves' x axis "
                        "(default: the last --grid).",
                        flag_values=flag_values)
    flags.DEFINE_multi_string("train_args", [], "Extra tfdptext-train flags "
                              "for every cell, e.g. --train_args=--train_file="
                              "data/train.tsv (your own data: --dataset, "
                              "--train_file, --test_file, --text_column, "
                              "...).", flag_values=flag_values)
    flags.DEFINE_list("eval_args", [], "Extra tfdptext-eval flags, e.g. "
                      "--eval_args=--attackers=mlp,logistic_regression",
                      flag_values=flag_values)
    flags.DEFINE_string("reference_run", None,
                        "A finished non-private run of the same data and "
                        "budget: every cell's evaluation reports the "
                        "randomized-response limit from its accuracy "
                        "(tfdptext-eval --reference_run), and limit.png "
                        "draws accuracy against epsilon per text with the "
                        "limit curve.", flag_values=flag_values)
    flags.DEFINE_string("output_dir", None, "Sweep directory.",
                        required=True, flag_values=flag_values)
    flags.DEFINE_bool("fork_cells", True, "Run each cell's tfdptext-train "
                      "and tfdptext-eval forked from this process, which "
                      "imports TensorFlow once (Linux, TensorFlow backend); "
                      "--nofork_cells: a fresh `python -m` each (about 10 "
                      "CPU-s more per program, to import TensorFlow).",
                      flag_values=flag_values)


def _own_flags():
    """The names of tfdptext-sweep's own flags (a forked cell's program
    defines its own in their place)."""
    probe = flags.FlagValues()
    define_flags(probe)
    return list(probe)


def _call(module, args):
    """Runs `python -m module args` as a child that dies with the sweep
    (forked from this process, which imports TensorFlow once, unless
    --nofork_cells: `tfdptext.cli.children`); a SweepError if it fails."""
    from tfdptext.cli import children
    from tfdptext.evaluation.sweep import SweepError

    print("  $ " + " ".join(children.command(module, args)), flush=True)
    code = children.run(module, args, own_flags=_own_flags(),
                        fork=FLAGS.fork_cells)
    if code:
        raise SweepError(f"{module} failed with exit code {code}; fix it "
                         "and re-run to resume.")


def _train(cell, run_dir):
    _call(TRAIN_MODULE, [f"--flagfile={FLAGS.train_flagfile}",
                         *FLAGS.train_args,
                         *[f"--{k}={v}" for k, v in cell.items()],
                         f"--output_dir={run_dir}"])


def _evaluate(cell, run_dir):
    del cell
    reference = ([f"--reference_run={FLAGS.reference_run}"]
                 if FLAGS.reference_run else [])
    _call(EVAL_MODULE, [f"--model_dir={run_dir}",
                        f"--output_dir={os.path.join(run_dir, 'eval')}",
                        *reference, *FLAGS.eval_args])


def _cells():
    """The grid's cells and the curves' x axis, checked before any work."""
    from tfdptext import runfiles
    from tfdptext.errors import ArgumentError
    from tfdptext.evaluation import sweep

    if not os.path.isfile(FLAGS.train_flagfile):
        raise ArgumentError(f"`train_flagfile`: no file "
                            f"{FLAGS.train_flagfile}.")
    runfiles.check_output_path(FLAGS.output_dir)
    if FLAGS.reference_run:
        from tfdptext.evaluation import evaluate

        evaluate.check_reference_run(FLAGS.reference_run)
    cells = sweep.parse_grid(FLAGS.grid)
    x_name = FLAGS.x or list(cells[0])[-1]
    if x_name not in cells[0]:
        raise ArgumentError(f"`x`: {x_name} is not a --grid name "
                            f"({list(cells[0])}).")
    return cells, x_name


def run_sweep(argv):
    """The program: every cell trained and evaluated, then the summary."""
    del argv
    from tfdptext.evaluation import sweep

    cells, x_name = _cells()
    rows = sweep.Sweep(FLAGS.output_dir, cells, _train, _evaluate).run()
    sweep.write_summary(rows, FLAGS.output_dir, x_name)
    with open(os.path.join(FLAGS.output_dir, "summary.md")) as f:
        print(f.read())
    print(f"Curves: {os.path.join(FLAGS.output_dir, 'curves.png')}")


def main():
    """The console entry point of tfdptext-sweep."""
    define_flags()
    program.run(NAME, __name__, run_sweep)


if __name__ == "__main__":
    main()
