"""The GPU call of issue 37: calibration, then the Table 6 analogue cells.

Runs from the device package (`make gpu-package` writes `.gpu/`; its
`run.sh` calls this program) on any Keras backend, by default JAX, with
TensorFlow imported nowhere: the encoder from `.gpu/encoder`
(`tfdptext.models.portable_encoder`), pre-tokenized SST-2 and AG ids from
`.gpu/data`, fine-tuning with `tfdptext.training.portable` and MLM
pretraining with `tfdptext.pretraining.portable`.

The plan (`plan_cells`), under one wall-clock budget:

1. calibration: a short run of each kind of step (fine-tuning none,
   token_rep and text_to_text; MLM pretraining token_rep and
   text_to_text with the denoising objective): compile time (the first
   step) and steps per second;
2. the Table 6 analogue at eta 81 (MiniLM's match of Qu et al.'s 125):
   MLM pretraining of token_rep and of text_to_text with the denoising
   objective, then SST-2 fine-tuning of each mode from the plain encoder
   and from its pretrained one, 3 seeds, the same number of steps for
   all (sized from the calibration to fit the budget), and the
   non-private reference (mode none, plain encoder) after the first
   seed. text_to_text's nearest-token search is `tfdptext.layers.
   nearest` (full float32 precision under JAX).

After every cell the results JSON (`RESULTS`) is rewritten under --out,
so a run cut short returns what it did. --dry_run runs the same path on
CPU with a tiny budget (2 steps a cell, 1 seed, a few texts, no
calibration cells).

Run (from the package): OUT=/tmp/out bash .gpu/run.sh [--dry_run]
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

RESULTS = "gpu_cells.json"
ETA = 81.0
SEEDS = (0, 1, 2)
BATCH_SIZE = 32
FINETUNE_LEARNING_RATE = 5e-5
PRETRAIN_BATCH_SIZE = 64
CALIBRATION_STEPS = 30
# A dry run's batches (the test's checks use the same size: under eager
# JAX, ops of shapes seen before cost no new compilation).
DRY_RUN_BATCH_SIZE = 8
# Shares of the budget left after calibration.
PRETRAIN_SHARE = 0.35
# Seconds kept back at the end (writing, the release of the test split).
RESERVE_S = 30.0


def _versions():
    import keras

    versions = {"python": platform.python_version(),
                "keras": keras.__version__,
                "backend": keras.backend.backend(),
                "numpy": np.__version__}
    for name in ("keras_hub", "jax", "jaxlib", "torch"):
        module = sys.modules.get(name)
        if module is None and name in ("keras_hub", "jax"):
            try:
                module = __import__(name)
            except ImportError:
                continue
        if module is not None:
            versions[name] = getattr(module, "__version__", None)
    return versions


def _devices():
    try:
        import jax

        return [str(d) for d in jax.devices()]
    except ImportError:
        return []


class Results:
    """The results JSON, rewritten after every cell (atomically)."""

    def __init__(self, out_dir, header):
        self.path = os.path.join(out_dir, RESULTS)
        self.data = {**header, "cells": []}
        self.write()

    def add(self, cell):
        self.data["cells"].append(cell)
        self.write()

    def write(self):
        temporary = self.path + ".tmp"
        with open(temporary, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
        os.replace(temporary, self.path)


def _subset(values, count, seed):
    """`count` texts of a split, chosen with `seed` (all if count >= n)."""
    n = len(values["labels"])
    if count >= n:
        return values
    rows = np.sort(np.random.default_rng(seed).permutation(n)[:count])
    return {k: v[rows] for k, v in values.items()}


# The private modes of the Table 6 analogue, in order: each is pretrained
# (denoising) and fine-tuned from the plain and the pretrained encoder.
PRIVATE_MODES = ("token_rep", "text_to_text")


def _calibration_name(kind, mode):
    suffix = "_denoising" if kind == "pretrain" else ""
    return f"calibrate_{kind}_{mode}{suffix}"


def plan_cells(dry_run):
    """The cells in order: (name, kind, settings). A dry run leaves out
    the calibration cells (the same code as the cells after them, with
    fewer steps) and runs one seed.

    After calibration: the denoising pretraining of each private mode,
    then seed by seed the SST-2 fine-tuning of each mode from the plain
    and from its pretrained encoder, and after the first seed the
    non-private reference (plain MiniLM, mode none): a run cut short keeps
    whole seeds."""
    seeds = SEEDS[:1] if dry_run else SEEDS
    cells = [] if dry_run else [
        (_calibration_name("finetune", mode), "finetune",
         {"mode": mode, "encoder": "plain", "seed": 0})
        for mode in ("none",) + PRIVATE_MODES] + [
        (_calibration_name("pretrain", mode), "pretrain",
         {"mode": mode, "objective": "denoising"})
        for mode in PRIVATE_MODES]
    cells += [(f"pretrain_eta81_{mode}_denoising", "pretrain",
               {"mode": mode, "objective": "denoising"})
              for mode in PRIVATE_MODES]
    for seed in seeds:
        cells += [(f"sst2_eta81_{mode}_{encoder}_seed{seed}", "finetune",
                   {"mode": mode, "encoder": encoder, "seed": seed})
                  for mode in PRIVATE_MODES
                  for encoder in ("plain", "denoising")]
        if seed == seeds[0]:
            cells.append((f"sst2_none_seed{seed}", "finetune",
                          {"mode": "none", "encoder": "plain",
                           "seed": seed}))
    return cells


def size_cells(pretrains, finetunes, left_s):
    """(pretraining steps of each pretraining cell, steps of every
    fine-tuning cell) that fit `left_s` seconds.

    PRETRAIN_SHARE of the time goes to the pretraining cells, equally,
    each paying its compile time (its calibration's first step). The rest
    goes to the fine-tuning cells, which all run the same number of steps
    (plain and pretrained encoders compare at equal steps); each pays its
    compile time and, per step, its step time and the release of a
    batch's texts (drawn once, before training).

    Args:
        pretrains: the calibration result of each pretraining cell.
        finetunes: the calibration result of each fine-tuning cell (one
            entry per cell: a mode's calibration repeated).
        left_s: seconds.
    """
    pre_s = PRETRAIN_SHARE * left_s / max(len(pretrains), 1)
    pre_steps = [max(1, int((pre_s - c["first_step_s"]) * c["steps_per_s"]))
                 for c in pretrains]
    fixed = sum(c["first_step_s"] for c in finetunes)
    per_step = sum(1.0 / c["steps_per_s"] + BATCH_SIZE * c["inputs_s"] /
                   c["train_texts"] for c in finetunes)
    fine_steps = max(1, int(((1 - PRETRAIN_SHARE) * left_s - fixed) /
                            per_step))
    return pre_steps, fine_steps


class Runner:
    """Runs the cells of `plan_cells` from a package directory."""

    def __init__(self, package, out_dir, budget_s, dry_run,
                 jit_compile="auto"):
        from tfdptext.pretraining import portable as pretrain_portable
        from tfdptext.training import portable

        self.package = package
        self.dry_run = dry_run
        self.budget_s = budget_s
        self.jit_compile = jit_compile
        self.start = time.perf_counter()
        data = os.path.join(package, "data")
        self.sst2 = portable.load_ids(os.path.join(data, "sst2_ids.npz"))
        self.corpus = portable.load_ids(os.path.join(data, "ag_ids.npz"))
        self.vocabulary = pretrain_portable.Vocabulary.from_json(
            os.path.join(data, "vocab.json"))
        self.pretrained_dir = os.path.join(out_dir, "pretrained_encoder")
        self.speed = {}
        self.finetune_steps = None
        self.pretrain_steps = None
        with open(os.path.join(package, "manifest.json")) as f:
            manifest = json.load(f)
        self.results = Results(out_dir, {
            "issue": 37, "dry_run": dry_run, "budget_s": budget_s,
            "eta": ETA, "versions": _versions(), "devices": _devices(),
            "plan": [name for name, _, _ in plan_cells(dry_run)],
            "machine": platform.node(), "package": manifest,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                         time.gmtime())})

    def left_s(self):
        return self.budget_s - (time.perf_counter() - self.start)

    def _pretrained_dir(self, mode):
        return f"{self.pretrained_dir}_{mode}"

    def _encoder(self, name, mode):
        """The plain encoder, or the one `mode`'s pretraining wrote."""
        from tfdptext.models import portable_encoder

        directory = (self._pretrained_dir(mode) if name != "plain"
                     else os.path.join(self.package, "encoder"))
        return portable_encoder.load_encoder(directory)

    def _steps(self, name, kind, mode):
        if self.dry_run:
            return 2
        if name.startswith("calibrate"):
            return CALIBRATION_STEPS
        return self.pretrain_steps[mode] if kind == "pretrain" \
            else self.finetune_steps

    def _size_from_calibration(self):
        cells = {c["name"]: c for c in self.results.data["cells"]}
        plan = [(kind, settings) for name, kind, settings in
                plan_cells(self.dry_run) if not name.startswith("calibrate")]
        pretrains = [s["mode"] for kind, s in plan if kind == "pretrain"]
        pre_steps, self.finetune_steps = size_cells(
            [cells[_calibration_name("pretrain", m)] for m in pretrains],
            [cells[_calibration_name("finetune", s["mode"])]
             for kind, s in plan if kind == "finetune"],
            self.left_s() - RESERVE_S)
        self.pretrain_steps = dict(zip(pretrains, pre_steps))

    def run_cell(self, name, kind, settings):
        from tfdptext.pretraining import model as mlm_model
        from tfdptext.pretraining import portable as pretrain_portable
        from tfdptext.pretraining.config import PretrainConfig
        from tfdptext.training import portable

        cell = {"name": name, "kind": kind, **settings}
        steps = self._steps(name, kind, settings["mode"])
        cell["budget_left_s"] = self.left_s()
        if kind == "pretrain":
            config = PretrainConfig(
                mode=settings["mode"], objective=settings["objective"],
                eta=ETA, steps=steps, batch_size=(
                    DRY_RUN_BATCH_SIZE if self.dry_run
                    else PRETRAIN_BATCH_SIZE),
                learning_rate=1e-4, head_rate_multiplier=100.0).validate()
            backbone = self._encoder("plain", settings["mode"])
            mlm = mlm_model.build_mlm(config, backbone, self.vocabulary)
            cell.update(pretrain_portable.pretrain(
                mlm, self.corpus["train"], self.vocabulary, config,
                heldout=self.corpus["heldout"], jit_compile=self.jit_compile,
                time_budget_s=max(self.left_s() - RESERVE_S, 1.0)))
            if not name.startswith("calibrate"):
                from tfdptext.models import portable_encoder

                portable_encoder.save_encoder(
                    backbone, self._pretrained_dir(settings["mode"]),
                    dtype="float32")
            return cell
        batch = BATCH_SIZE if not self.dry_run else DRY_RUN_BATCH_SIZE
        used = steps * batch
        train = _subset(self.sst2["train"], used, settings["seed"])
        import keras

        keras.utils.set_random_seed(settings["seed"])
        split = portable.build_split(
            settings["mode"], self._encoder(settings["encoder"],
                                            settings["mode"]), 2, eta=ETA,
            special_token_ids=self.vocabulary.special_token_ids,
            passthrough_token_ids=self.vocabulary.passthrough_token_ids)
        cell["train_texts"] = int(len(train["labels"]))
        test = self.sst2["test"]
        if self.dry_run:
            test = _subset(test, 8, 0)
        cell.update(portable.fine_tune(
            split, train, test, steps=steps, batch_size=batch,
            learning_rate=FINETUNE_LEARNING_RATE, seed=settings["seed"],
            jit_compile=self.jit_compile,
            time_budget_s=max(self.left_s() - RESERVE_S, 1.0)))
        cell["accuracy_on"] = "sst2 test (GLUE dev)"
        return cell

    def run(self):
        for name, kind, settings in plan_cells(self.dry_run):
            if self.finetune_steps is None and not self.dry_run and \
                    not name.startswith("calibrate"):
                self._size_from_calibration()
                self.results.data["sizing"] = {
                    "pretrain_steps": self.pretrain_steps,
                    "finetune_steps": self.finetune_steps}
            if self.left_s() < RESERVE_S:
                self.results.add({"name": name, "kind": "not_run",
                                  "reason": "wall-clock budget spent"})
                continue
            started, cpu_started = time.perf_counter(), time.process_time()
            try:
                cell = self.run_cell(name, kind, settings)
            except Exception as err:  # recorded; the next cell runs
                cell = {"name": name, "kind": kind, "error":
                        f"{type(err).__name__}: {str(err)[:500]}"}
            cell["wall_s"] = time.perf_counter() - started
            cell["cpu_s"] = time.process_time() - cpu_started
            self.results.add(cell)
            print(f"{name}: {json.dumps(cell, default=str)[:300]}",
                  flush=True)
        self.results.data["finished_utc"] = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.results.write()
        return self.results.data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package", required=True,
                        help="the device package (.gpu)")
    parser.add_argument("--out", required=True, help="results directory")
    parser.add_argument("--budget_s", type=float, default=450.0,
                        help="wall-clock budget of the cells (seconds)")
    parser.add_argument("--dry_run", action="store_true",
                        help="the same path on CPU, 2 steps a cell")
    parser.add_argument("--eager", action="store_true",
                        help="steps without XLA compilation (the test's "
                        "tiny package: seconds instead of a minute a cell)")
    args = parser.parse_args(argv)
    if args.budget_s <= 0:
        parser.error("--budget_s must be > 0 (seconds).")
    os.makedirs(args.out, exist_ok=True)
    data = Runner(args.package, args.out, args.budget_s, args.dry_run,
                  jit_compile=False if args.eager else "auto").run()
    errors = [c["name"] for c in data["cells"] if "error" in c]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
