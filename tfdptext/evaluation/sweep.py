"""A grid of training + evaluation runs that resumes, and its curves.

Each cell of the grid (e.g. epsilon x dropout_rate, or mode x eta) gets a
directory `<output_dir>/<cell name>/` holding the training run, with its
evaluation in `eval/`. Re-running the sweep skips cells whose eval.json
exists, evaluates cells that trained but were not evaluated, and lets an
interrupted training resume from its checkpoint (tfdptext-train does).
A killed sweep (SIGKILL included) re-run with the same command resumes the
same way: an evaluation is complete exactly when its eval.json exists
(tfdptext-eval moves it into place last), a training run when its
metrics.json does. Only one sweep runs in a directory at a time
(`.sweep.lock`).

Example:
>>> cells = parse_grid(["epsilon=0.05,0.5,5"])
>>> Sweep("sweeps/ag_eps", cells, train_fn, eval_fn).run()
"""

import itertools
import os

import numpy as np

from tfdptext import rundir
from tfdptext import runfiles
from tfdptext.errors import ArgumentError
from tfdptext.errors import TfdptextError

LOCK = ".sweep.lock"
# The descriptors of the sweep locks this process holds.
_HELD = set()


def _close_held_locks():
    """In a child forked while a lock is held (a cell's program): its copy
    of the descriptor is closed, so that the lock ends with the sweep
    (closing a copy never releases the sweep's own)."""
    for fd in _HELD:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_locks)


class SweepError(TfdptextError):
    """The sweep directory cannot be used (the message says why)."""


class _Lock:
    """An exclusive flock on `<output_dir>/.sweep.lock` while a sweep runs
    (released by the kernel when the process dies, SIGKILL included), so
    that two sweeps never train into the same cells."""

    def __init__(self, output_dir):
        self.path = os.path.join(output_dir, LOCK)
        self.fd = None

    def __enter__(self):
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise SweepError(
                f"Another sweep is running in {os.path.dirname(self.path)} "
                "(it holds .sweep.lock); wait for it or stop it.") from None
        _HELD.add(self.fd)
        return self

    def __exit__(self, *exc):
        _HELD.discard(self.fd)
        os.close(self.fd)
        self.fd = None


def _value(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _grid_fields():
    import dataclasses

    from tfdptext.training.config import TrainConfig

    return tuple(f.name for f in dataclasses.fields(TrainConfig))


# What a grid may vary: the training config's fields (tfdptext-train flags).
GRID_FIELDS = _grid_fields()


def parse_grid(specs):
    """["epsilon=0.05,0.1", "mode=a,b"] -> the list of cells (dicts),
    the Cartesian product in the order given."""
    if not specs:
        raise ArgumentError(
            "`grid` needs at least one name=v1,v2,... entry.")
    axes = []
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip().lstrip("-")
        parts = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not parts:
            raise ArgumentError(f"`grid` entry {spec!r} must look like "
                                "name=v1,v2,...")
        if name in [a for a, _ in axes]:
            raise ArgumentError(f"`grid` names {name!r} twice.")
        if name not in GRID_FIELDS:
            raise ArgumentError(
                f"`grid` entry {spec!r}: {name!r} is not a training setting; "
                f"allowed: {', '.join(GRID_FIELDS)}.")
        values = [_value(v) for v in parts]
        if len(set(values)) != len(values):
            raise ArgumentError(f"`grid` entry {spec!r} repeats a value.")
        axes.append((name, values))
    return [dict(zip([a for a, _ in axes], combo))
            for combo in itertools.product(*[v for _, v in axes])]


def cell_name(cell):
    return "_".join(f"{k}{v:g}" if isinstance(v, (int, float)) else f"{k}{v}"
                    for k, v in cell.items())


class Sweep:
    """Runs `train_fn(cell, run_dir)` then `eval_fn(cell, run_dir)` per cell.

    `train_fn` must leave `run_dir/metrics.json` when done and `eval_fn`
    `run_dir/eval/eval.json` (tfdptext-train and tfdptext-eval do).
    """

    def __init__(self, output_dir, cells, train_fn, eval_fn):
        if not cells:
            raise ValueError("`cells` is empty.")
        names = [cell_name(c) for c in cells]
        if len(set(names)) != len(names):
            raise ValueError("Two cells of the grid have the same name.")
        self.output_dir = output_dir
        self.cells = list(cells)
        self.train_fn = train_fn
        self.eval_fn = eval_fn

    def run_dir(self, cell):
        return os.path.join(self.output_dir, cell_name(cell))

    def eval_path(self, cell):
        return os.path.join(self.run_dir(cell), rundir.EVAL,
                            rundir.EVAL_RESULT)

    def run(self, log=print):
        runfiles.check_output_path(self.output_dir, error=SweepError)
        os.makedirs(self.output_dir, exist_ok=True)
        with _Lock(self.output_dir):
            return self._run(log)

    def _run(self, log):
        state = self._load_state()
        for cell in self.cells:
            name, run_dir = cell_name(cell), self.run_dir(cell)
            if os.path.exists(self.eval_path(cell)):
                log(f"{name}: done, skipped")
                continue
            if not rundir.RunDir(run_dir).is_finished():
                log(f"{name}: training")
                self.train_fn(cell, run_dir)
            log(f"{name}: evaluating")
            self.eval_fn(cell, run_dir)
            if not os.path.exists(self.eval_path(cell)):
                raise RuntimeError(f"{name}: evaluation wrote no eval.json.")
            state[name] = cell
            self._save_state(state)
        return self.summary()

    def _load_state(self):
        path = os.path.join(self.output_dir, rundir.SWEEP_STATE)
        if os.path.exists(path):
            return runfiles.read_json(path, SweepError,
                                      required=("finished",))["finished"]
        return {}

    def _save_state(self, state):
        rundir.write_json(os.path.join(self.output_dir, rundir.SWEEP_STATE),
                          {"finished": state})

    def summary(self):
        """One row per finished cell: parameters, utility, privacy."""
        rows = []
        for cell in self.cells:
            if not os.path.exists(self.eval_path(cell)):
                continue
            result = runfiles.read_json(self.eval_path(cell), SweepError,
                                        required=("utility.accuracy",
                                                  "utility.n_test"))
            row = {"cell": cell_name(cell), **cell,
                   "test_accuracy": result["utility"]["accuracy"],
                   "n_test": result["utility"]["n_test"],
                   "guarantee": result.get("guarantee_text")}
            privacy = result.get("attack", {}).get("empirical_privacy", {})
            for group, values in privacy.items():
                row[f"privacy_{group}"] = values["strongest"]
                row[f"privacy_{group}_majority"] = values["majority"]
            token = result.get("token_level")
            if token:
                row["inversion_accuracy"] = token["inversion_accuracy"]
            limit = result["utility"].get("limit") or {}
            if limit.get("applies"):
                row["epsilon_per_text"] = limit["epsilon_per_text"]
                row["limit"] = limit["limit"]
                row["share_of_limit"] = limit["share_of_limit"]
                row["_limit"] = limit
            rows.append(row)
        return rows


def write_summary(rows, output_dir, x_name):
    """summary.md and curves.png (utility and privacy against `x_name`,
    one line per value of the other grid parameters)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("No finished cells to summarise.")
    hidden = ("cell", "guarantee", "_limit")
    columns = [k for k in rows[0] if k not in hidden]
    for row in rows[1:]:
        columns += [k for k in row if k not in columns and k not in hidden]
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(
            f"{row.get(c):.4g}" if isinstance(row.get(c), float)
            else str(row.get(c, "")) for c in columns) + " |")
    with open(os.path.join(output_dir, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    measures = [c for c in columns if c == "test_accuracy"
                or (c.startswith("privacy_") and not c.endswith("majority"))
                or c == "inversion_accuracy"]
    others = [c for c in rows[0] if c not in measures + [x_name, "n_test"]
              + list(hidden) + list(_LIMIT_COLUMNS)
              and not c.startswith("privacy_")]
    fig, axes = plt.subplots(1, len(measures), figsize=(4 * len(measures),
                                                        3.2), squeeze=False)
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row.get(o) for o in others), []).append(row)
    for ax, measure in zip(axes[0], measures):
        for key, group in groups.items():
            group = sorted(group, key=lambda r: r[x_name])
            label = ", ".join(f"{o}={v}" for o, v in zip(others, key)) or None
            ax.plot([r[x_name] for r in group],
                    [r.get(measure, np.nan) for r in group], "o-",
                    label=label)
        ax.set_xlabel(x_name)
        ax.set_ylabel(measure.replace("_", " "))
        if all(isinstance(r[x_name], (int, float)) and r[x_name] > 0
               for r in rows) and len({r[x_name] for r in rows}) > 2:
            ax.set_xscale("log")
        if len(groups) > 1:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(output_dir, "curves.png"), dpi=110)
    plt.close(fig)
    limited = [row for row in rows if "_limit" in row]
    if limited:
        plot_against_limit(plt, groups, others, limited,
                           os.path.join(output_dir, "limit.png"))
    return os.path.join(output_dir, "curves.png")


# The summary's columns of the randomized-response limit.
_LIMIT_COLUMNS = ("epsilon_per_text", "limit", "share_of_limit")


def limit_curve(limit, epsilons):
    """The limit of `limit` (an eval.json "utility.limit") at each of
    `epsilons` per text, same K, reference, prior and delta
    (`tfdptext.privacy.limit.limit_at`: the best LDP channel on the
    reference's predictions, or the bound without a reference)."""
    from tfdptext.privacy import limit as limit_lib

    given = limit.get("reference_given", True)
    return [limit_lib.limit_at(
        e, limit["num_classes"], limit["prior"], limit["delta"],
        limit["reference_accuracy"] if given else None,
        limit.get("reference_confusion")) for e in epsilons]


def plot_against_limit(plt, groups, others, rows, path):
    """Test accuracy against epsilon per text (log axis), one line per
    group of the other grid values, with the limit curve of each distinct
    reference drawn dashed and the bound (no reference) dotted."""
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for key, group in groups.items():
        group = sorted([r for r in group if "_limit" in r],
                       key=lambda r: r["epsilon_per_text"])
        if not group:
            continue
        label = ", ".join(f"{o}={v}" for o, v in zip(others, key)) or None
        ax.plot([r["epsilon_per_text"] for r in group],
                [r["test_accuracy"] for r in group], "o-", label=label)
    eps = [r["epsilon_per_text"] for r in rows]
    grid = np.geomspace(min(eps) / 1.5, max(eps) * 1.5, 100)
    curves = {}
    for row in rows:
        limit = row["_limit"]
        key = (limit["reference_accuracy"], tuple(limit["prior"] or ()),
               limit["num_classes"])
        curves.setdefault(key, limit)
    for (reference, _, _), limit in curves.items():
        label = (f"limit: best LDP channel on the reference's predictions "
                 f"(accuracy {reference:.3f})" if limit.get(
                     "reference_given", True) else
                 "bound: best LDP release (linear program)")
        ax.plot(grid, limit_curve(limit, grid), "k--", linewidth=1,
                label=label)
    bounds = {(tuple(lim["prior"] or ()), lim["num_classes"], lim["delta"]):
              lim for lim in curves.values() if lim.get("reference_given",
                                                         True)}
    for limit in bounds.values():
        ax.plot(grid, limit_curve({**limit, "reference_given": False,
                                   "reference_confusion": None}, grid),
                "k:", linewidth=1,
                label="bound: no LDP release does better (any classifier)")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon per text")
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
