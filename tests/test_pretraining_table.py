"""benchmarks/pretraining_table.py: the tables of the pretraining benchmark
from a directory in progress.

A hand-made directory (plan.json from the runner's own record_plan, and
metrics.json written as the programs write them) with known accuracies:
the means, sds and standard errors are checked against the closed forms,
unfinished cells show as missing, and a resumed pretraining run says how
many of its steps its time covers.
"""

import json
import math
import os
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)
import pretraining_cells as cells_lib  # noqa: E402
import pretraining_table  # noqa: E402

ACCURACY = {"sst2_none_seed0": 0.80, "sst2_none_seed1": 0.82,
            "sst2_eta81_token_rep_plain_seed0": 0.50,
            "sst2_eta81_token_rep_plain_seed1": 0.52,
            "sst2_eta81_token_rep_vanilla_seed0": 0.60,
            "sst2_eta81_token_rep_vanilla_seed1": 0.64}
# (steps run by the session that finished it, its training seconds)
PRETRAINED = {"pretrain_none": (500, 600.0),
              "pretrain_eta81_token_rep_vanilla": (100, 120.0)}


def _write(cell, output_dir, metrics):
    os.makedirs(cell.run_dir(output_dir), exist_ok=True)
    with open(os.path.join(cell.run_dir(output_dir), cells_lib.METRICS),
              "w") as f:
        json.dump(metrics, f)


@pytest.fixture()
def in_progress(tmp_path):
    out = str(tmp_path)
    cells_lib.record_plan(out, cells_lib.Budget(), {
        "eta": [81.0], "mode": ["token_rep"], "objective": ["vanilla"],
        "seed": [0, 1]}, {"argv": []})
    _, cells = cells_lib.read_plan(out)
    for cell in cells:
        if cell.name in ACCURACY:
            _write(cell, out, {"test_accuracy": ACCURACY[cell.name],
                               "majority_test_accuracy": 0.509})
        elif cell.name in PRETRAINED:
            timed, seconds = PRETRAINED[cell.name]
            point = {"mlm_loss": 10.0, "original_accuracy": 0.0,
                     "target_accuracy": 0.0}
            _write(cell, out, {
                "steps": 500, "steps_run_this_session": timed,
                "train_seconds_this_session": seconds,
                "examples_per_second": timed * 16 / seconds,
                "heldout": {"start": point, "end": dict(
                    point, mlm_loss=5.0, original_accuracy=0.3,
                    target_accuracy=0.25)}})
    # Two runs of the resumed cell ended (the killed one wrote nothing).
    with open(os.path.join(out, cells_lib.TIMINGS), "w") as f:
        for name, seconds in [("pretrain_eta81_token_rep_vanilla", 100.0),
                              ("pretrain_eta81_token_rep_vanilla", 50.0),
                              ("sst2_none_seed0", 30.0)]:
            f.write(json.dumps({"cell": name, "status": 0,
                                "seconds": seconds}) + "\n")
    return out


def test_tables_of_a_directory_in_progress(in_progress):
    results = pretraining_table.collect(in_progress)
    assert (results["finished"], results["cells"]) == (8, 10)
    plain = results["accuracy"][(81.0, "token_rep", cells_lib.PLAIN)]
    vanilla = results["accuracy"][(81.0, "token_rep", "vanilla")]
    assert plain["mean"] == pytest.approx(0.51)
    assert plain["sd"] == pytest.approx(math.sqrt(2 * 0.01 ** 2))
    assert vanilla["sd"] == pytest.approx(math.sqrt(2 * 0.02 ** 2))
    gain, error = pretraining_table.difference(vanilla, plain)
    assert gain == pytest.approx(0.11)
    assert error == pytest.approx(math.sqrt(
        vanilla["sd"] ** 2 / 2 + plain["sd"] ** 2 / 2))
    text = pretraining_table.markdown(results)
    assert "8 of 10 cells finished." in text
    assert "test accuracy 0.810 ± 0.014 (2)" in text  # the reference
    rows = {line.split(" | ")[2]: line for line in text.splitlines()
            if line.startswith("| 81") or line.startswith("|  |")}
    assert "| 0.510 ± 0.014 (2) | 0.500 / 0.520 | - | - | 0.5608 |" in rows[
        "minilm, not pretrained"]
    # Per seed, and paired with the same seed's run from MiniLM.
    assert (f"| 0.620 ± 0.028 (2) | 0.600 / 0.640 | +0.110 ± {error:.3f} | "
            "+0.100 / +0.120 | 0.7706 | +0.210 |") in rows["vanilla MLM"]
    # The clean-text control's fine-tuning never ran: shown as missing.
    assert "| - | - | - | - | - | - |" in rows[
        "clean-text MLM (control, no noise)"]
    pretrain = {line.split(" | ")[0][2:]: line for line in text.splitlines()
                if line.startswith("| pretrain")}
    assert pretrain["pretrain_none"].endswith("| 10.0 (all 500 steps) |")
    assert pretrain["pretrain_eta81_token_rep_vanilla"].endswith(
        "| 2.0 (100 of 500 steps) |")
    assert "| 10.00 -> 5.00 | 0.000 -> 0.300 | 0.250 | 13.3 |" in pretrain[
        "pretrain_none"]
    # Cost: the ended runs of the resumed cell add up; cells without a
    # recorded run are not counted.
    assert "| pretrain token_rep vanilla | 1 | 2.5 | 2 |" in text
    assert "| finetune none | 1 | 0.5 | 0 |" in text
    assert "| all | 2 | - | 3 |" in text


def test_the_tables_are_results_of_the_docs_regions(in_progress):
    results = pretraining_table.collect(in_progress)
    found = pretraining_table.tables(results)
    assert sorted(found) == ["pretraining-cost", "pretraining-runs",
                             "pretraining-token-rep"]
    summary = pretraining_table._jsonable(results)
    pairs = {(p["mode"], p["encoder"]): p
             for p in summary["paired_with_not_pretrained"]}
    vanilla = pairs[("token_rep", "vanilla")]
    assert vanilla["per_seed"] == {"0": pytest.approx(0.10),
                                   "1": pytest.approx(0.12)}
    assert vanilla["sign_test_p"] == pytest.approx(0.5)  # 2 of 2: 2 / 4


@pytest.mark.parametrize("differences, p", [
    ([-0.016, -0.031, -0.059], 0.25),  # 3 of 3 below: 2 / 8
    ([-0.1, 0.1, -0.2, 0.3], 1.0),
    ([-0.1] * 5 + [0.2], 2 * 7 / 64),  # P(at most 1 of 6) twice
    ([0.0, 0.0], None),
])
def test_sign_test_against_the_binomial_closed_form(differences, p):
    found = pretraining_table.sign_test(differences)
    assert found == (None if p is None else pytest.approx(p))
