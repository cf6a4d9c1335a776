"""How often matrix-product precision changes d_chi's nearest token on
MiniLM at eta 81 (issue 37), and whether `tfdptext.layers.nearest` is
exact there.

MiniLM's token table (float32, from the packaged safetensors), `--draws`
tokens drawn uniformly from the candidates (no special or [unused*] id),
each plus d_chi noise at `--eta` (numpy, seeded: a measurement, not a
release). For each noisy vector the nearest candidate by:

- float64 distances of the float32 values (the reference);
- `nearest.nearest_tokens` under this process's Keras backend (its own
  product: JAX's Precision.HIGHEST), and with a TF32 product (inputs
  rounded to 10 mantissa bits, what a GPU's default float32 product
  reads: tests/nearest_ties.py);
- the product alone (argmin of ||t||^2 - 2 v.t, no re-ranking), in
  float32 and in TF32.

Run (no TensorFlow needed): KERAS_BACKEND=jax python
benchmarks/nearest_precision.py [--draws=2000] [--eta=81]
Writes benchmarks/results/nearest_precision.json.
"""

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"),
                os.path.join(ROOT, "benchmarks")]

import machine  # noqa: E402
import nearest_ties  # noqa: E402


def minilm_table():
    from safetensors import safe_open

    from tfdptext.models import presets

    path = os.path.join(presets.minilm_directory(), "model.safetensors")
    with safe_open(path, "np") as f:
        table = f.get_tensor("embeddings.word_embeddings.weight")
    with open(os.path.join(presets.minilm_directory(), "vocab.txt")) as f:
        words = f.read().splitlines()
    special = np.array([w.startswith("[") and w.endswith("]")
                        for w in words])
    return np.asarray(table, np.float32), ~special


def noisy_vectors(table, candidates, draws, eta, seed):
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.flatnonzero(candidates), draws)
    n = table.shape[1]
    direction = rng.normal(size=(draws, n))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    noise = rng.gamma(n, 1.0 / eta, size=(draws, 1)) * direction
    return (table[ids].astype(np.float64) + noise).astype(np.float32)


def float64_nearest(vectors, table, candidates):
    """The reference: float64 squared distances of the float32 values (the
    expanded form, whose cancellation in float64, about 1e-14 here, is far
    below any gap float32 can resolve)."""
    v, t = vectors.astype(np.float64), table.astype(np.float64)
    d = (np.sum(v * v, -1)[:, None] + np.sum(t * t, -1)[None]
         - 2.0 * (v @ t.T))
    d[:, ~candidates] = np.inf
    return d.argmin(axis=1)


def product_argmin(vectors, table, candidates, round_inputs):
    v, t = vectors, table
    if round_inputs:
        v, t = nearest_ties.round_to_tf32(v), nearest_ties.round_to_tf32(t)
    scores = np.sum(np.square(table), -1)[None] - 2.0 * (v @ t.T)
    scores[:, ~candidates] = np.inf
    return scores.argmin(axis=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--eta", type=float, default=81.0)
    parser.add_argument("--chunk", type=int, default=250)
    args = parser.parse_args(argv)
    import keras

    from tfdptext.layers import nearest

    table, candidates = minilm_table()
    vectors = noisy_vectors(table, candidates, args.draws, args.eta, 0)
    found = {k: [] for k in ("reference", "nearest", "nearest_tf32",
                             "product_float32", "product_tf32")}
    for start in range(0, args.draws, args.chunk):
        v = vectors[start:start + args.chunk]
        found["reference"].append(float64_nearest(v, table, candidates))
        found["nearest"].append(np.asarray(
            nearest.nearest_tokens(v, table, candidates)))
        found["nearest_tf32"].append(np.asarray(nearest.nearest_tokens(
            v, table, candidates, product=nearest_ties.tf32_product)))
        found["product_float32"].append(
            product_argmin(v, table, candidates, False))
        found["product_tf32"].append(
            product_argmin(v, table, candidates, True))
    found = {k: np.concatenate(v) for k, v in found.items()}
    reference = found.pop("reference")
    result = {
        "backend": keras.backend.backend(), "eta": args.eta,
        "draws": args.draws, "table": list(table.shape),
        "shortlist": nearest.SHORTLIST,
        "differs_from_float64": {k: int(np.sum(v != reference))
                                 for k, v in found.items()},
    }
    print(result)
    machine.write_json(None, result, argv=[sys.argv[0], *(argv or
                                                          sys.argv[1:])])
    return result


if __name__ == "__main__":
    main()
