"""The GPU call of issue 37: calibration, then the Table 6 analogue cells.

Runs from the device package (`make gpu-package` writes `.gpu/`; its
`run.sh` calls this program) on any Keras backend, by default JAX, with
TensorFlow imported nowhere: the encoder from `.gpu/encoder`
(`tfdptext.models.portable_encoder`), pre-tokenized SST-2 and AG ids from
`.gpu/data`, fine-tuning with `tfdptext.training.portable` and MLM
pretraining with `tfdptext.pretraining.portable`.

The plan (`plan_cells`), under one wall-clock budget:

1. calibration: a short run of each kind of step (fine-tuning none and
   token_rep, MLM pretraining token_rep/denoising): compile time (the
   first step) and steps per second;
2. the Table 6 analogue at eta 81 (MiniLM's match of Qu et al.'s 125):
   MLM pretraining token_rep with the denoising objective, then SST-2
   fine-tuning token_rep from the plain encoder and from the pretrained
   one, 3 seeds each, the same number of steps for both (sized from the
   calibration to fit the budget), and the non-private reference (mode
   none, plain encoder). text_to_text cells are listed and skipped with
   the reason while its privatizer needs TensorFlow.

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


def plan_cells(dry_run):
    """The cells in order: (name, kind, settings). A dry run leaves out
    the calibration cells (the same code as the cells after them, with
    fewer steps) and runs one seed."""
    seeds = SEEDS[:1] if dry_run else SEEDS
    cells = [] if dry_run else [
        ("calibrate_finetune_none", "finetune",
         {"mode": "none", "encoder": "plain", "seed": 0}),
        ("calibrate_finetune_token_rep", "finetune",
         {"mode": "token_rep", "encoder": "plain", "seed": 0}),
        ("calibrate_pretrain_token_rep_denoising", "pretrain",
         {"mode": "token_rep", "objective": "denoising"}),
    ]
    cells += [
        ("pretrain_eta81_token_rep_denoising", "pretrain",
         {"mode": "token_rep", "objective": "denoising"}),
    ]
    for encoder in ("plain", "denoising"):
        cells += [(f"sst2_eta81_token_rep_{encoder}_seed{s}", "finetune",
                   {"mode": "token_rep", "encoder": encoder, "seed": s})
                  for s in seeds]
    cells += [(f"sst2_none_seed{s}", "finetune",
               {"mode": "none", "encoder": "plain", "seed": s})
              for s in seeds[:1]]
    cells += [(f"{kind}_eta81_text_to_text_denoising", "skipped",
               {"reason": "d_chi text-to-text (DChiTextPrivatizer) is a "
                "TensorFlow layer: its nearest-token search does not run "
                "on this backend yet"})
              for kind in ("pretrain", "sst2")]
    return cells


def size_cells(pretrain, finetune, left_s, finetunes):
    """(pretraining steps, steps of each fine-tuning cell) that fit
    `left_s` seconds: PRETRAIN_SHARE of it for the pretraining cell, the
    rest shared by `finetunes` cells, each paying its compile time (the
    calibration's first step) and, per step, its own time and the release
    of its batch's texts (drawn once, before training). `pretrain` and
    `finetune` are the calibration cells' results."""
    pre_s = PRETRAIN_SHARE * left_s - pretrain["first_step_s"]
    fine_s = (1 - PRETRAIN_SHARE) * left_s / finetunes - \
        finetune["first_step_s"]
    release_per_text = finetune["inputs_s"] / finetune["train_texts"]
    step_s = 1.0 / finetune["steps_per_s"] + BATCH_SIZE * release_per_text
    return (max(1, int(pre_s * pretrain["steps_per_s"])),
            max(1, int(fine_s / step_s)))


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
        with open(os.path.join(data, "vocab.json")) as f:
            vocab = json.load(f)
        self.vocabulary = pretrain_portable.Vocabulary(
            mask_id=vocab["mask_id"], pad_id=vocab["pad_id"],
            special_token_ids=tuple(vocab["special_token_ids"]))
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

    def _encoder(self, name):
        from tfdptext.models import portable_encoder

        directory = (self.pretrained_dir if name != "plain"
                     else os.path.join(self.package, "encoder"))
        return portable_encoder.load_encoder(directory)

    def _steps(self, name, kind):
        if self.dry_run:
            return 2
        if name.startswith("calibrate"):
            return CALIBRATION_STEPS
        return self.pretrain_steps if kind == "pretrain" \
            else self.finetune_steps

    def _size_from_calibration(self):
        cells = {c["name"]: c for c in self.results.data["cells"]}
        finetunes = sum(1 for name, kind, _ in plan_cells(self.dry_run)
                        if kind == "finetune" and not
                        name.startswith("calibrate"))
        self.pretrain_steps, self.finetune_steps = size_cells(
            cells["calibrate_pretrain_token_rep_denoising"],
            cells["calibrate_finetune_token_rep"],
            self.left_s() - RESERVE_S, finetunes)

    def run_cell(self, name, kind, settings):
        from tfdptext.pretraining import model as mlm_model
        from tfdptext.pretraining import portable as pretrain_portable
        from tfdptext.pretraining.config import PretrainConfig
        from tfdptext.training import portable

        cell = {"name": name, "kind": kind, **settings}
        if kind == "skipped":
            return cell
        steps = self._steps(name, kind)
        cell["budget_left_s"] = self.left_s()
        if kind == "pretrain":
            config = PretrainConfig(
                mode=settings["mode"], objective=settings["objective"],
                eta=ETA, steps=steps, batch_size=PRETRAIN_BATCH_SIZE
                if not self.dry_run else 4, learning_rate=1e-4,
                head_rate_multiplier=100.0).validate()
            backbone = self._encoder("plain")
            mlm = mlm_model.build_mlm(config, backbone, self.vocabulary)
            cell.update(pretrain_portable.pretrain(
                mlm, self.corpus["train"], self.vocabulary, config,
                heldout=self.corpus["heldout"], jit_compile=self.jit_compile,
                time_budget_s=max(self.left_s() - RESERVE_S, 1.0)))
            if not name.startswith("calibrate"):
                from tfdptext.models import portable_encoder

                portable_encoder.save_encoder(backbone, self.pretrained_dir,
                                              dtype="float32")
            return cell
        batch = BATCH_SIZE if not self.dry_run else 4
        used = steps * batch
        train = _subset(self.sst2["train"], used, settings["seed"])
        import keras

        keras.utils.set_random_seed(settings["seed"])
        split = portable.build_split(settings["mode"],
                                     self._encoder(settings["encoder"]), 2,
                                     eta=ETA)
        cell["train_texts"] = int(len(train["labels"]))
        test = self.sst2["test"]
        if self.dry_run:
            test = _subset(test, 8, 0)
        cell.update(portable.fine_tune(
            split, train, test, steps=steps, batch_size=batch,
            learning_rate=FINETUNE_LEARNING_RATE, seed=settings["seed"],
            jit_compile=self.jit_compile, time_budget_s=max(self.left_s() - RESERVE_S, 1.0)))
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
            if kind != "skipped" and self.left_s() < RESERVE_S:
                self.results.add({"name": name, "kind": "not_run",
                                  "reason": "wall-clock budget spent"})
                continue
            started = time.perf_counter()
            try:
                cell = self.run_cell(name, kind, settings)
            except Exception as err:  # recorded; the next cell runs
                cell = {"name": name, "kind": kind, "error":
                        f"{type(err).__name__}: {str(err)[:500]}"}
            cell["wall_s"] = time.perf_counter() - started
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
