"""The backend-agnostic path under JAX, for tests/test_jax_backend.py.

Run by that test in ONE subprocess with KERAS_BACKEND=jax and
tests/no_tensorflow first on PYTHONPATH (TensorFlow unimportable), as the
program of the device package's `run.sh --dry_run` (the test's $PYTHON
hands it gpu_cells.py's arguments):

    python tests/jax_backend_checks.py OUT_DIR [-- GPU_CELLS_ARGS...]

It writes to OUT_DIR:
- noise.npz: Laplace and d_chi noise drawn by the layers under JAX (the
  test checks their laws against the closed forms);
- robust.keras and text_to_text.keras: tiny split models (robust
  fine-tuned 2 steps; text_to_text as built: the dry run trains it), a
  seq_rep model with label privacy fine-tuned 2 steps, and
  mlm_<mode>_<objective>.weights.h5: tiny MLMs pretrained 1 step
  (token_rep vanilla, text_to_text probabilistic);
- batch.npz and checks.json: a fixed batch and the losses of these models
  on it with the noise off (the test recomputes them under TensorFlow),
  the nearest tokens of tests/nearest_ties.py's near-ties, the training
  results, the process's CPU seconds after each part (`cpu_s`), and the
  modules imported (no TensorFlow);
then runs benchmarks/gpu_cells.py's main with GPU_CELLS_ARGS, if given.
"""

import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# Tiny models: a BERT of 1 layer over 64 ids, texts of 12 tokens.
VOCABULARY_SIZE = 64
LENGTH = 12
MASK_ID = 3
SPECIAL_IDS = (0, 1, 2, 3)
LAPLACE_EPSILON = 2.0
DCHI_ETA = 10.0
DCHI_DIM = 8
NOISE_SAMPLES = 20000


def tiny_backbone():
    import keras_hub

    return keras_hub.models.BertBackbone(
        vocabulary_size=VOCABULARY_SIZE, num_layers=1, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=LENGTH)


def tiny_split(count, seed):
    """A split of random texts whose label is whether the first token is
    in the upper half of the vocabulary."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(len(SPECIAL_IDS), VOCABULARY_SIZE,
                       (count, LENGTH)).astype(np.int32)
    lengths = rng.integers(4, LENGTH + 1, count)
    mask = (np.arange(LENGTH)[None] < lengths[:, None]).astype(np.int32)
    ids = ids * mask
    return {"token_ids": ids, "padding_mask": mask,
            "segment_ids": np.zeros_like(ids),
            "labels": (ids[:, 0] >= VOCABULARY_SIZE // 2).astype(np.int32)}


PASSTHROUGH_IDS = (0, 1, 2)
# The MLMs whose losses are compared with TensorFlow's: (mode, objective).
MLMS = (("token_rep", "vanilla"), ("text_to_text", "probabilistic"))
# The split models saved under JAX and loaded under TensorFlow.
SPLITS = ("robust", "text_to_text")


def mlm_config(mode, objective, steps=1):
    from tfdptext.pretraining.config import PretrainConfig

    return PretrainConfig(mode=mode, objective=objective, eta=DCHI_ETA,
                          steps=steps, batch_size=8, max_predictions=4,
                          num_privatizations=3).validate()


def vocabulary():
    from tfdptext.pretraining import portable

    return portable.Vocabulary(mask_id=MASK_ID, special_token_ids=SPECIAL_IDS,
                               passthrough_token_ids=PASSTHROUGH_IDS)


def build_mlm(mode, objective):
    from tfdptext.pretraining import model as mlm_model

    return mlm_model.build_mlm(mlm_config(mode, objective), tiny_backbone(),
                               vocabulary())


def mlm_file(mode, objective):
    return f"mlm_{mode}_{objective}.weights.h5"


def build_split(mode):
    from tfdptext.training import portable

    return portable.build_split(
        mode, tiny_backbone(), 2, epsilon=1.0, eta=DCHI_ETA,
        special_token_ids=SPECIAL_IDS, passthrough_token_ids=PASSTHROUGH_IDS)


def masked_batch(values):
    """One fixed masked batch of `values` (seed 0)."""
    from tfdptext.pretraining import portable

    return next(portable.masked_batches(
        values, vocabulary(), VOCABULARY_SIZE, batch_size=8,
        rng=np.random.default_rng(0), mask_rate=0.15, max_predictions=4))


def classifier_loss(model, values):
    """Mean cross-entropy of `model` on `values`, noise off."""
    import keras

    from tfdptext.layers import base
    from tfdptext.training import portable

    with base.randomness_from_caller():
        logits = model(portable.features_of(values), training=False)
    return float(keras.ops.mean(keras.losses.sparse_categorical_crossentropy(
        values["labels"], logits, from_logits=True)))


def mlm_loss(model, batch):
    from tfdptext.layers import base

    with base.randomness_from_caller():
        out = model(batch, training=False)
    return float(model.compute_loss(x=batch, y_pred=out))


def noise_samples():
    """Noise of LaplaceNoise and DChiNoise called directly under JAX."""
    from tfdptext import layers

    laplace = layers.LaplaceNoise(LAPLACE_EPSILON)
    half = np.full((NOISE_SAMPLES // 10, 10), 0.5, np.float32)
    dchi = layers.DChiNoise(DCHI_ETA)
    zeros = np.zeros((NOISE_SAMPLES // 10, 10, DCHI_DIM), np.float32)
    return {"laplace": np.asarray(laplace(half)).ravel() - 0.5,
            "dchi": np.asarray(dchi(zeros)).reshape(-1, DCHI_DIM),
            "laplace_randomness": laplace.guarantee().randomness}


def _tensorflow_blocked():
    """Whether importing TensorFlow fails here (the blocker works)."""
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return True
    return False


def nearest_ties():
    """The nearest tokens of the near-ties under this backend: with its
    own product (JAX: Precision.HIGHEST) and with a TF32 one."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import nearest_ties as ties

    from tfdptext.layers import nearest

    queries, table, candidates = ties.ties()
    return {name: np.asarray(nearest.nearest_tokens(
        queries, table, candidates, **kwargs)).tolist()
        for name, kwargs in (("default", {}),
                             ("tf32", {"product": ties.tf32_product}))}


def main(out_dir):
    import keras

    from tfdptext.pretraining import portable as pretrain_portable
    from tfdptext.training import portable

    keras.utils.set_random_seed(0)
    noise = noise_samples()
    np.savez(os.path.join(out_dir, "noise.npz"), laplace=noise["laplace"],
             dchi=noise["dchi"])
    train, dev = tiny_split(64, 1), tiny_split(16, 2)
    checks = {"backend": keras.backend.backend(),
              "laplace_randomness": noise["laplace_randomness"],
              "nearest": nearest_ties(), "trained": {}, "losses": {},
              "cpu_s": {"start": time.process_time()}}
    # Compiled steps (Keras' jit_compile "auto"): eager JAX compiles every
    # op of every shape on its own, about 0.1 CPU-s each (cProfile: 407
    # compilations, 43 of the 68 CPU-s of robust's first eager fine-tune;
    # compiled, 7.7 CPU-s with the test's XLA_FLAGS). The dry run after
    # these checks trains token_rep and text_to_text, eagerly (--eager).
    for mode in SPLITS + ("seq_rep",):
        split = build_split(mode)
        if mode != "text_to_text":  # trained in the dry run
            checks["trained"][mode] = portable.fine_tune(
                split, train, dev, steps=2, batch_size=8,
                learning_rate=1e-3,
                label_epsilon=2.0 if mode == "seq_rep" else None)
        if mode in SPLITS:
            split.model.save(os.path.join(out_dir, f"{mode}.keras"))
            checks["losses"][mode] = classifier_loss(split.model, dev)
        checks["cpu_s"][mode] = time.process_time()
    batch = masked_batch(dev)
    np.savez(os.path.join(out_dir, "batch.npz"), **batch)
    for mode, objective in MLMS:
        mlm = build_mlm(mode, objective)
        checks["trained"][f"mlm_{mode}_{objective}"] = \
            pretrain_portable.pretrain(
                mlm, train, vocabulary(), mlm_config(mode, objective),
                heldout=dev)
        mlm.save_weights(os.path.join(out_dir, mlm_file(mode, objective)))
        checks["losses"][f"mlm_{mode}_{objective}"] = mlm_loss(mlm, batch)
        checks["cpu_s"][f"mlm_{mode}_{objective}"] = time.process_time()
    checks["tensorflow_modules"] = sorted(
        m for m in sys.modules
        if m.split(".")[0] in ("tensorflow", "tensorflow_text"))
    checks["tensorflow_blocked"] = _tensorflow_blocked()
    with open(os.path.join(out_dir, "checks.json"), "w") as f:
        json.dump(checks, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1])
    if "--" in sys.argv:  # then the device package's program, here
        sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
        import gpu_cells

        sys.exit(gpu_cells.main(sys.argv[sys.argv.index("--") + 1:]))
