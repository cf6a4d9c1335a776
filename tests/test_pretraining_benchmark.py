"""benchmarks/pretraining_cells.py: the plan of the privacy-adaptive
pretraining benchmark (Qu et al. Tables 6 and 7) and its runner.

Nothing trains here (the programs have their own tests): the cells' flag
files must parse with the programs' own flags into valid configs, and a
rerun must skip finished cells, run interrupted ones again and never start
a fine-tuning cell whose pretraining did not finish.
"""

import json
import os
import sys

import pytest
from absl import flags

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)
import pretraining_cells as cells_lib  # noqa: E402
import pretraining_mlm  # noqa: E402

from tfdptext.cli import flags as cli_flags  # noqa: E402
from tfdptext.pretraining import PretrainConfig  # noqa: E402
from tfdptext.training import TrainConfig  # noqa: E402

ETAS, SEEDS = (81.0, 48.5), (0, 1)


def _plan(output_dir, budget=None):
    return cells_lib.plan(budget or cells_lib.Budget(), ETAS,
                          cells_lib.MODES, cells_lib.OBJECTIVES, SEEDS,
                          output_dir)


def _config(cell, output_dir):
    """The program's config from the cell's flag file, parsed by the
    program's own flag definitions."""
    config_class = {"pretrain": PretrainConfig, "train": TrainConfig}[
        cell.program]
    values = flags.FlagValues()
    cli_flags.define_flags(config_class, flag_values=values)
    flags.DEFINE_string("output_dir", None, "", flag_values=values)
    path = cells_lib.write_flag_file(cell, output_dir)
    values(["program", f"--flagfile={path}"])
    assert values.output_dir == cell.run_dir(output_dir)
    config = cli_flags.build(config_class, flag_values=values)
    config.validate()
    return config


def test_plan_covers_every_cell_once_after_what_it_needs(tmp_path):
    out = str(tmp_path)
    cells = _plan(out)
    names = [c.name for c in cells]
    assert len(names) == len(set(names))
    per_eta = 2 * 3 + len(SEEDS) * 2 * 5  # pretraining + fine-tuning
    assert len(cells) == 1 + len(SEEDS) + len(ETAS) * per_eta
    position = {name: i for i, name in enumerate(names)}
    for cell in cells:
        for need in cell.needs:
            assert position[need] < position[cell.name]
    # One clean pretraining, shared by every eta's "clean" column.
    clean = [c for c in cells if c.encoder == cells_lib.CLEAN]
    assert [c.name for c in clean if c.kind == "pretrain"] == [
        "pretrain_none"]
    assert all(c.needs == ("pretrain_none",) for c in clean
               if c.kind == "finetune")
    assert "sst2_eta48p5_text_to_text_denoising_seed1" in position
    # A (eta, mode) row's fine-tuning runs before the next row's pretraining.
    first_t2t = min(position[c.name] for c in cells
                    if c.kind == "pretrain" and c.mode == "text_to_text")
    assert all(position[c.name] < first_t2t for c in cells
               if c.kind == "finetune" and c.mode == "token_rep"
               and c.eta == cells[first_t2t].eta)


def test_flag_files_are_the_programs_configs(tmp_path):
    out = str(tmp_path)
    budget = cells_lib.Budget(finetune_dev_examples=0)  # 0: every text
    configs = {c.name: (c, _config(c, out)) for c in _plan(out, budget)}
    clean = configs["pretrain_none"][1]
    assert clean.mode == "none" and clean.eta is None
    assert clean.steps == budget.pretrain_steps
    assert clean.batch_size == budget.pretrain_batch_size
    for name, (cell, config) in configs.items():
        if cell.kind == "pretrain" and cell.mode:
            assert (config.mode, config.eta, config.objective) == (
                cell.mode, cell.eta, cell.encoder)
            continue
        if cell.kind != "finetune":
            continue
        assert config.seed == cell.seed
        assert config.max_train_examples == budget.finetune_train_examples
        assert config.max_dev_examples is None
        assert config.batch_size == budget.finetune_batch_size
        if cell.mode is None:  # the non-private reference
            assert config.mode == "none" and config.eta is None
            assert config.preset == budget.preset
            continue
        # Fine-tuned at the eta its encoder was adapted to, from its preset.
        assert (config.mode, config.eta) == (cell.mode, cell.eta)
        if cell.encoder == cells_lib.PLAIN:
            assert config.preset == budget.preset and not cell.needs
        else:
            source, pretrain_config = configs[cell.needs[0]]
            assert config.preset == os.path.join(source.run_dir(out),
                                                 cells_lib.PRESET)
            assert pretrain_config.mode in ("none", cell.mode)
            if pretrain_config.mode != "none":
                assert pretrain_config.eta == cell.eta


def _finishing(ran, fail=()):
    """A stand-in for the programs: records the cell and writes its
    metrics.json, except for the cells in `fail`."""
    def execute(cell, output_dir):
        ran.append(cell.name)
        if cell.name in fail:
            os.makedirs(cell.run_dir(output_dir), exist_ok=True)
            return 1
        os.makedirs(cell.run_dir(output_dir), exist_ok=True)
        with open(os.path.join(cell.run_dir(output_dir),
                               cells_lib.METRICS), "w") as f:
            json.dump({"test_accuracy": 0.5,
                       "heldout": {"end": {"original_accuracy": 0.1,
                                           "mlm_loss": 5.0}}}, f)
        return 0
    return execute


def test_rerun_skips_finished_resumes_interrupted_blocks_dependants(
        tmp_path):
    out = str(tmp_path)
    cells = _plan(out)
    failing = "pretrain_eta81_token_rep_denoising"
    first = []
    states = cells_lib.run_plan(cells, out, _finishing(first, {failing}),
                                say=lambda line: None)
    blocked = {c.name for c in cells if failing in c.needs}
    assert blocked == {f"sst2_eta81_token_rep_denoising_seed{s}"
                       for s in SEEDS}
    assert {n for n, s in states.items() if s == "blocked"} == blocked
    assert states[failing] == "failed"
    assert first == [c.name for c in cells if c.name not in blocked]
    # The rerun: the failed cell (its directory is there: the program
    # resumes it) and what it blocked run, nothing else.
    second, lines = [], []
    states = cells_lib.run_plan(cells, out, _finishing(second),
                                say=lines.append)
    assert second == [failing] + sorted(
        blocked, key=[c.name for c in cells].index)
    assert any(failing in line and "resuming" in line for line in lines)
    assert all(s in ("done", "ran") for s in states.values())
    third = []
    cells_lib.run_plan(cells, out, _finishing(third), say=lambda line: None)
    assert third == []
    # Each program run that ended recorded its wall time.
    assert set(cells_lib.read_timings(out)) == set(first) | set(second)


def test_plan_file_refuses_another_budget(tmp_path):
    out = str(tmp_path)
    asked = {"eta": [81.0], "mode": ["token_rep"], "objective": ["vanilla"],
             "seed": [0]}
    cells_lib.record_plan(out, cells_lib.Budget(), asked, {"argv": []})
    more = dict(asked, eta=[48.0], seed=[1, 0])
    cells_lib.record_plan(out, cells_lib.Budget(), more, {"argv": []})
    budget, cells = cells_lib.read_plan(out)
    assert budget == cells_lib.Budget()
    assert {c.eta for c in cells} == {None, 81.0, 48.0}
    assert {c.seed for c in cells} == {None, 0, 1}
    with pytest.raises(cells_lib.PlanError, match="pretrain_steps"):
        cells_lib.record_plan(out, cells_lib.Budget(pretrain_steps=9),
                              asked, {"argv": []})
    held = cells_lib.lock(out)
    try:
        with pytest.raises(cells_lib.PlanError, match=f"pid {os.getpid()}"):
            cells_lib.lock(out)
    finally:
        held.close()
    cells_lib.lock(out).close()  # released with its file


@pytest.mark.parametrize("budget_file", ["pretraining_cpu.flags",
                                         "pretraining_gpu.flags"])
def test_budget_flag_files_plan_valid_cells(budget_file, tmp_path):
    """The command's budget files parse with its own flags, and every cell
    they plan is a valid run of its program."""
    values = flags.FlagValues()
    pretraining_mlm.define_flags(values)
    values(["pretraining_mlm.py", "--flagfile=" + os.path.join(
        BENCHMARKS, "flags", budget_file)])
    budget, asked = pretraining_mlm.parsed(values)
    assert values.require_gpu == ("gpu" in budget_file)
    assert sorted(asked["eta"]) == sorted(cells_lib.MATCHED_ETAS)
    assert asked["seed"] == [0, 1, 2]
    out = str(tmp_path)
    cells = cells_lib.plan(budget, asked["eta"], asked["mode"],
                           asked["objective"], asked["seed"], out)
    assert len(cells) == 1 + 3 + 3 * (2 * 3 + 3 * 2 * 5)
    for cell in cells:
        config = _config(cell, out)
        if cell.kind == "pretrain":
            assert config.steps == budget.pretrain_steps
        else:
            assert config.epochs == budget.finetune_epochs
    if "gpu" in budget_file:  # Qu et al.'s batch sizes and lengths
        assert (budget.pretrain_batch_size, budget.pretrain_max_length) == (
            256, 128)
        assert (budget.finetune_batch_size, budget.finetune_max_length,
                budget.finetune_epochs) == (32, 128, 3)
        assert budget.finetune_train_examples == 0  # the whole split
