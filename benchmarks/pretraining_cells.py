"""The cells of the privacy-adaptive pretraining benchmark, and the paper's
numbers they are compared with.

Not a benchmark: the library of `pretraining_mlm.py` (which runs the cells)
and `pretraining_table.py` (which reads them back). Pure Python (no
TensorFlow import): the plan, its flag files and the runner are checked
without training anything (tests/test_pretraining_benchmark.py).

A cell is one run of a program (`tfdptext-pretrain` or `tfdptext-train`) in
its own run directory, `<output_dir>/<cell name>`, described completely by
its flag file, `<output_dir>/flags/<cell name>.flags`: running

    tfdptext-train --flagfile=<output_dir>/flags/<cell name>.flags

anywhere (a GPU machine included) is that cell. The plan, in the order it
runs:

- `pretrain_none`: MLM on the clean corpus (the control: no privatization,
  so it does not depend on eta; shared by every eta);
- `sst2_none_seed<s>`: the non-private reference, fine-tuning mode none from
  the plain encoder on the same SST-2 budget;
- per eta, per mode (token_rep: Qu et al. Table 6; text_to_text: Table 7),
  `pretrain_eta<eta>_<mode>_<objective>`: MLM on the corpus privatized by
  that mode at that eta, one run per objective;
- then, for that eta and mode, per seed, `sst2_eta<eta>_<mode>_<encoder>_seed<s>`:
  fine-tuning at the same eta from the plain encoder (`plain`), from the
  clean control (`clean`) and from each objective's preset.
"""

import dataclasses
import datetime
import json
import os
import subprocess
import sys
import time

from tfdptext.fields import field_with_help as _field

# The pretraining objectives, in the paper's column order.
OBJECTIVES = ("vanilla", "probabilistic", "denoising")
# The fine-tuning modes; pretraining uses the same mechanism (Qu et al.
# pretrain with token_rep noise for Table 6, with text-to-text for Table 7).
MODES = ("token_rep", "text_to_text")
# The encoders each private mode is fine-tuned from.
PLAIN, CLEAN = "plain", "clean"
ENCODERS = (PLAIN, CLEAN) + OBJECTIVES
# Subdirectories of the output directory besides the run directories.
FLAGS_DIR, LOGS_DIR = "flags", "logs"
METRICS = "metrics.json"  # written last by both programs: "finished"
PLAN = "plan.json"  # the budget and what was asked for (pretraining_mlm.py)
LOCK = ".lock"  # held by the process running the cells
TIMINGS = "timings.jsonl"  # one line per program run: cell, seconds, status
PRESET = "preset"  # the pretraining run's encoder (tfdptext-pretrain)

# Qu et al. (CIKM 2021), BERT-base (768-d), SST-2 accuracy.
QU_NON_PRIVATE = 0.9289
# Table 4 is Table 6's and 7's "Orig BERT" column; eta -> (Orig BERT,
# Vanilla MLM, Prob MLM, Denoising MLM).
QU_SST = {
    "token_rep": {  # Table 6
        50: (0.5126, 0.5390, 0.5424, 0.5356),
        75: (0.5310, 0.5791, 0.5757, 0.6089),
        100: (0.5298, 0.6709, 0.6766, 0.7041),
        125: (0.5608, 0.7706, 0.7718, 0.7810),
        150: (0.5665, 0.8188, 0.8188, 0.8395),
        175: (0.5975, 0.8658, 0.8693, 0.8693),
    },
    "text_to_text": {  # Table 7
        50: (0.4920, 0.5218, 0.5310, 0.5092),
        75: (0.5906, 0.5963, 0.5734, 0.5906),
        100: (0.7030, 0.7190, 0.7259, 0.7225),
        125: (0.8360, 0.8429, 0.8429, 0.8406),
        150: (0.8968, 0.9048, 0.9071, 0.9025),
        175: (0.9151, 0.9209, 0.9209, 0.9220),
    },
}
QU_TABLES = {"token_rep": 6, "text_to_text": 7}
# Sec. 5.4: nearest-neighbour inversion accuracy of the token_rep release
# on SST-2 tokens (equal to the share of tokens text-to-text leaves
# unchanged), per eta.
QU_INVERSION = {50: 0.0154, 75: 0.1084, 100: 0.3402, 125: 0.6354,
                150: 0.8500, 175: 0.9511}
# MiniLM (384-d) eta -> (Qu et al.'s BERT-base eta of about the same
# inversion rate, MiniLM's measured unchanged share). Measured with
# benchmarks/dchi_unchanged_share.py on the first 2,000 SST-2 training
# sentences (22,588 regular tokens, one privatization each); see
# docs/benchmarks.md.
MATCHED_ETAS = {48.0: (75, 0.107), 65.0: (100, 0.343), 81.0: (125, 0.633)}


@dataclasses.dataclass
class Budget:
    """What every cell costs: the pretraining and fine-tuning settings.

    Every field is a flag of pretraining_mlm.py; its flag files
    (benchmarks/flags/pretraining_*.flags) give one budget per machine.
    The defaults are the CPU budget.
    """

    preset: str = _field("minilm", "Encoder to start from (pretraining, "
                         "and the plain column).")
    corpus: str = _field("ag_dpnr", "Public pretraining corpus "
                         "(tfdptext-pretrain --corpus; labels ignored).")
    corpus_dir: str = _field("../shared/data/ag_dpnr",
                             "Directory of the pretraining corpus.")
    sst2_dir: str = _field("../shared/data/sst2", "SST-2 directory.")
    pretrain_steps: int = _field(500, "Pretraining optimizer steps.")
    pretrain_batch_size: int = _field(16, "Pretraining batch size.")
    pretrain_max_length: int = _field(64, "Pretraining token length.")
    pretrain_learning_rate: float = _field(
        1e-4, "Peak pretraining rate of the encoder.")
    head_rate_multiplier: float = _field(
        100.0, "The new MLM head's rate over the encoder's.")
    pretrain_warmup_fraction: float = _field(
        0.1, "Pretraining warm-up, a fraction of the steps.")
    num_privatizations: int = _field(
        10, "Objective probabilistic: privatizations K per masked token.")
    checkpoint_every: int = _field(50, "Pretraining checkpoint interval "
                                   "(steps).")
    eval_every: int = _field(100, "Held-out MLM evaluation interval "
                             "(steps).")
    heldout_examples: int = _field(256, "Held-out corpus texts.")
    finetune_train_examples: int = _field(
        2000, "SST-2 training texts (the first N; 0: all).")
    finetune_dev_examples: int = _field(
        500, "SST-2 dev texts (the first N; 0: all).")
    finetune_epochs: int = _field(1, "Fine-tuning epochs.")
    finetune_batch_size: int = _field(32, "Fine-tuning batch size.")
    finetune_max_length: int = _field(64, "Fine-tuning token length.")
    finetune_learning_rate: float = _field(
        1e-4, "Peak fine-tuning rate.")
    finetune_warmup_fraction: float = _field(
        0.1, "Fine-tuning warm-up, a fraction of the steps.")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One run: `program` ("pretrain" or "train") with `flags` (flag name
    -> value, --output_dir excluded), into `<output_dir>/<name>`.

    needs: the cells whose output this one reads (a fine-tuning cell needs
    its pretraining cell's preset). kind, eta, mode, encoder, seed: what
    the table groups by (None where they do not apply).
    """

    name: str
    program: str
    flags: tuple
    needs: tuple = ()
    kind: str = "finetune"
    eta: float | None = None
    mode: str | None = None
    encoder: str | None = None
    seed: int | None = None

    def run_dir(self, output_dir):
        return os.path.join(output_dir, self.name)

    def flag_file(self, output_dir):
        return os.path.join(output_dir, FLAGS_DIR, f"{self.name}.flags")

    def log_file(self, output_dir):
        return os.path.join(output_dir, LOGS_DIR, f"{self.name}.log")

    def flag_lines(self, output_dir):
        """The program's flags, one per line (absl --flagfile format)."""
        lines = [f"--{name}={_flag_value(value)}"
                 for name, value in self.flags if value is not None]
        return lines + [f"--output_dir={self.run_dir(output_dir)}"]

    def finished(self, output_dir):
        """Whether the program wrote its metrics.json (it writes it last)."""
        return os.path.isfile(os.path.join(self.run_dir(output_dir),
                                           METRICS))

    def started(self, output_dir):
        return os.path.isdir(self.run_dir(output_dir))


def _flag_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}" if value.is_integer() else repr(value)
    return str(value)


def eta_name(eta):
    """An eta as it appears in cell names: 65 -> "65", 48.5 -> "48p5"."""
    return f"{eta:g}".replace(".", "p")


def pretrain_cell_name(eta, mode, objective):
    if mode is None:
        return "pretrain_none"
    return f"pretrain_eta{eta_name(eta)}_{mode}_{objective}"


def finetune_cell_name(eta, mode, encoder, seed):
    if mode is None:
        return f"sst2_none_seed{seed}"
    return f"sst2_eta{eta_name(eta)}_{mode}_{encoder}_seed{seed}"


def _pretrain_cell(budget, eta, mode, objective):
    flags = (("mode", mode or "none"), ("objective", objective),
             ("eta", eta),
             ("num_privatizations", budget.num_privatizations
              if objective == "probabilistic" else None),
             ("preset", budget.preset), ("corpus", budget.corpus),
             ("data_dir", budget.corpus_dir),
             ("max_length", budget.pretrain_max_length),
             ("batch_size", budget.pretrain_batch_size),
             ("steps", budget.pretrain_steps),
             ("checkpoint_every", budget.checkpoint_every),
             ("eval_every", budget.eval_every),
             ("heldout_examples", budget.heldout_examples),
             ("learning_rate", budget.pretrain_learning_rate),
             ("head_rate_multiplier", budget.head_rate_multiplier),
             ("warmup_fraction", budget.pretrain_warmup_fraction),
             ("seed", 0))
    return Cell(name=pretrain_cell_name(eta, mode, objective),
                program="pretrain", flags=flags, kind="pretrain", eta=eta,
                mode=mode, encoder=CLEAN if mode is None else objective)


def _finetune_cell(budget, eta, mode, encoder, seed, source, output_dir):
    """Fine-tuning `mode` (None: mode none) at `eta` from `source` (None:
    the plain encoder, else the pretraining cell whose preset it reads)."""
    preset = budget.preset if source is None else os.path.join(
        source.run_dir(output_dir), PRESET)
    flags = (("mode", mode or "none"), ("eta", eta), ("dataset", "sst2"),
             ("data_dir", budget.sst2_dir), ("preset", preset),
             ("max_length", budget.finetune_max_length),
             ("batch_size", budget.finetune_batch_size),
             ("epochs", budget.finetune_epochs),
             ("learning_rate", budget.finetune_learning_rate),
             ("warmup_fraction", budget.finetune_warmup_fraction),
             ("max_train_examples", budget.finetune_train_examples or None),
             ("max_dev_examples", budget.finetune_dev_examples or None),
             ("seed", seed))
    return Cell(name=finetune_cell_name(eta, mode, encoder, seed),
                program="train", flags=flags,
                needs=() if source is None else (source.name,),
                kind="finetune", eta=eta, mode=mode, encoder=encoder,
                seed=seed)


def plan(budget, etas, modes, objectives, seeds, output_dir):
    """Every cell, in the order they run (a cell after those it needs)."""
    clean = _pretrain_cell(budget, None, None, "vanilla")
    cells = [clean]
    cells += [_finetune_cell(budget, None, None, PLAIN, seed, None,
                             output_dir) for seed in seeds]
    # One table row (eta, mode) complete before the next row's pretraining:
    # a session that stops early leaves whole rows, not halves of many.
    for eta in etas:
        for mode in modes:
            pretrained = {o: _pretrain_cell(budget, eta, mode, o)
                          for o in objectives}
            cells += pretrained.values()
            sources = {PLAIN: None, CLEAN: clean, **pretrained}
            for seed in seeds:
                for encoder, source in sources.items():
                    cells.append(_finetune_cell(budget, eta, mode, encoder,
                                                seed, source, output_dir))
    return cells


def read_plan(output_dir):
    """(budget, cells) of the directory's plan.json: every cell asked for
    there so far, finished or not."""
    path = os.path.join(output_dir, PLAN)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path} is missing: {output_dir} was not written by "
            "benchmarks/pretraining_mlm.py.")
    with open(path) as f:
        recorded = json.load(f)
    budget = Budget(**recorded["budget"])
    return budget, plan(budget, recorded["eta"], recorded["mode"],
                        recorded["objective"], recorded["seed"], output_dir)


def read_metrics(cell, output_dir):
    """The finished cell's metrics.json, or None."""
    if not cell.finished(output_dir):
        return None
    with open(os.path.join(cell.run_dir(output_dir), METRICS)) as f:
        return json.load(f)


class PlanError(Exception):
    """The directory cannot take this command (the message says why)."""


def record_plan(output_dir, budget, asked, command):
    """Writes <output_dir>/plan.json: the budget, and every eta, mode,
    objective and seed asked for there so far (`asked`: name -> list), and
    `command` (a dict: argv, start time, machine) appended to its history.
    Raises PlanError when the directory holds another budget: its cells
    would be other runs."""
    path = os.path.join(output_dir, PLAN)
    recorded = {"budget": dataclasses.asdict(budget), "eta": [], "mode": [],
                "objective": [], "seed": [], "commands": []}
    if os.path.exists(path):
        with open(path) as f:
            recorded = json.load(f)
        if recorded["budget"] != dataclasses.asdict(budget):
            changed = sorted(
                name for name, value in dataclasses.asdict(budget).items()
                if recorded["budget"].get(name) != value)
            raise PlanError(
                f"{output_dir} holds the cells of another budget (it "
                f"differs in {', '.join(changed)}); use another output "
                "directory.")
    for name in ("eta", "mode", "objective", "seed"):
        recorded[name] = list(dict.fromkeys(recorded[name]
                                            + list(asked[name])))
    recorded["commands"].append(command)
    _write_atomically(path, json.dumps(recorded, indent=2) + "\n")
    return recorded


def _write_atomically(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def write_flag_file(cell, output_dir):
    """Writes the cell's flag file (unchanged if it already says the same);
    returns its path."""
    path = cell.flag_file(output_dir)
    text = "\n".join(cell.flag_lines(output_dir)) + "\n"
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return path
    _write_atomically(path, text)
    return path


def lock(output_dir):
    """Holds <output_dir>/.lock until the returned file is closed or this
    process ends (the kernel drops the lock of a killed process). Raises
    PlanError when another process holds it."""
    import fcntl

    handle = open(os.path.join(output_dir, LOCK), "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "pid unknown"
        handle.close()
        raise PlanError(f"Another benchmark process is running in "
                        f"{output_dir} ({holder}); wait for it or stop it "
                        "first.") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} since {_now()}\n")
    handle.flush()
    return handle


def _now():
    return datetime.datetime.now().isoformat(timespec="seconds")


def run_cell(cell, output_dir, programs):
    """Runs the cell's program (`programs[cell.program]`, a launcher path)
    with its flag file, appending its output to the cell's log; returns
    the exit status. The program itself resumes an interrupted run. When
    this process is stopped (Ctrl-C, SIGTERM made SystemExit), the program
    is stopped with it."""
    log_path = cell.log_file(output_dir)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    command = [sys.executable, programs[cell.program],
               f"--flagfile={cell.flag_file(output_dir)}"]
    with open(log_path, "a") as log:
        log.write(f"\n=== {_now()} {' '.join(command)}\n")
        log.flush()
        child = subprocess.Popen(command, stdout=log,
                                 stderr=subprocess.STDOUT)
        try:
            return child.wait()
        finally:
            if child.poll() is None:
                child.terminate()
                child.wait()


def summary(cell, output_dir):
    """A few words on a finished cell's result."""
    metrics = read_metrics(cell, output_dir)
    if cell.kind == "pretrain":
        end = metrics["heldout"]["end"]
        return (f"held-out masked-token accuracy "
                f"{end['original_accuracy']:.3f}, MLM loss "
                f"{end['mlm_loss']:.2f}")
    return f"SST-2 test accuracy {metrics['test_accuracy']:.4f}"


def _append_timing(output_dir, cell, status, seconds):
    with open(os.path.join(output_dir, TIMINGS), "a") as f:
        f.write(json.dumps({"cell": cell.name, "status": status,
                            "seconds": round(seconds, 1),
                            "ended": _now()}) + "\n")


def read_timings(output_dir):
    """{cell name: wall seconds of its program runs, summed over the runs
    that ended} from timings.jsonl. A run killed with its session wrote no
    line, so a cell resumed after one counts only the later runs."""
    path = os.path.join(output_dir, TIMINGS)
    seconds = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    entry = json.loads(line)
                    seconds[entry["cell"]] = (seconds.get(entry["cell"], 0.0)
                                              + entry["seconds"])
    return seconds


def run_plan(cells, output_dir, execute, say=print):
    """Runs every unfinished cell in order with `execute(cell,
    output_dir)` (-> exit status): a finished cell is skipped, an
    interrupted one run again (its program resumes it), and a cell whose
    needs did not finish is skipped. Returns {cell name: "done" (finished
    before), "ran", "failed" or "blocked"}."""
    states = {}
    for index, cell in enumerate(cells, 1):
        tag = f"[{index}/{len(cells)}] {cell.name}"
        if cell.finished(output_dir):
            states[cell.name] = "done"
            continue
        missing = [n for n in cell.needs
                   if states.get(n) not in ("done", "ran")]
        if missing:
            states[cell.name] = "blocked"
            say(f"{tag}: skipped, {missing[0]} did not finish")
            continue
        verb = "resuming" if cell.started(output_dir) else "starting"
        say(f"{tag}: {verb} at {_now()}")
        started = time.perf_counter()
        status = execute(cell, output_dir)
        seconds = time.perf_counter() - started
        _append_timing(output_dir, cell, status, seconds)
        if status == 0 and cell.finished(output_dir):
            states[cell.name] = "ran"
            say(f"{tag}: finished in {seconds:.0f} s, "
                f"{summary(cell, output_dir)}")
        else:
            states[cell.name] = "failed"
            say(f"{tag}: FAILED (exit status {status}) after "
                f"{seconds:.0f} s; see {cell.log_file(output_dir)}")
    return states
