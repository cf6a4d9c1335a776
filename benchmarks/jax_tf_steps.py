"""CPU steps per second of the same MiniLM fine-tuning step under JAX and
under TensorFlow, side by side (issue 37).

Each backend runs in its own process (Keras picks its backend at import):
MiniLM (the packaged weights), mode none (encoder + mean pooling +
classifier), `tfdptext.training.portable.fine_tune` on the same random
batch of token ids (batch 32, length 64, all positions real), compiled
(XLA under JAX, tf.function under TensorFlow); the first step (compile
included) timed apart from the next `--steps`. The backends alternate
`--rounds` times so that a change of the machine's load hits both.

Run: python benchmarks/jax_tf_steps.py [--steps=10] [--rounds=1]
Writes benchmarks/results/jax_tf_steps.json.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = os.path.join(ROOT, "benchmarks", "results", "jax_tf_steps.json")
BACKENDS = ("jax", "tensorflow")
BATCH_SIZE = 32
LENGTH = 64


def one_backend(steps):
    """Runs in the child: times `steps` steps after the first."""
    import keras
    import numpy as np

    from tfdptext import models
    from tfdptext.training import portable

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    count = BATCH_SIZE * (steps + 1)
    ids = rng.integers(1000, 30000, (count, LENGTH)).astype(np.int32)
    values = {"token_ids": ids, "padding_mask": np.ones_like(ids),
              "segment_ids": np.zeros_like(ids),
              "labels": rng.integers(0, 2, count).astype(np.int32)}
    dev = {k: v[:BATCH_SIZE] for k, v in values.items()}
    split = portable.build_split(portable.NONE, models.load_backbone(), 2)
    result = portable.fine_tune(split, values, dev, steps=steps + 1,
                                batch_size=BATCH_SIZE, learning_rate=2e-5)
    return {"backend": keras.backend.backend(),
            "first_step_s": result["first_step_s"],
            "steps_timed": steps, "steps_per_s": result["steps_per_s"],
            "sequences_per_s": result["steps_per_s"] * BATCH_SIZE}


def _load():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", choices=BACKENDS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(one_backend(args.steps)))
        return
    runs = []
    for _ in range(args.rounds):
        for backend in BACKENDS:
            env = dict(os.environ, KERAS_BACKEND=backend,
                       JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2",
                       PYTHONPATH=os.pathsep.join(
                           [ROOT, os.environ.get("PYTHONPATH", "")]))
            load_before = _load()
            done = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--child",
                 backend, f"--steps={args.steps}"], env=env,
                capture_output=True, text=True, check=True)
            run = json.loads(done.stdout.strip().splitlines()[-1])
            run["load_before"] = load_before
            run["load_after"] = _load()
            runs.append(run)
            print(run, flush=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    machine.write_json(RESULT, {
        "command": "python benchmarks/jax_tf_steps.py " + " ".join(
            argv if argv is not None else sys.argv[1:]),
        "commit": commit, "machine": machine.cpu_name(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": machine.versions(["keras", "keras-hub", "jax",
                                      "tensorflow"]),
        "shared_machine": "a shared 2-core machine with other jobs "
                          "running (load averages recorded per run): "
                          "timings are indicative only",
        "batch_size": BATCH_SIZE, "length": LENGTH, "runs": runs})


if __name__ == "__main__":
    main()
