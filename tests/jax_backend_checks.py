"""The backend-agnostic path under JAX, for tests/test_jax_backend.py.

Run by that test in a subprocess with KERAS_BACKEND=jax and
tests/no_tensorflow first on PYTHONPATH (TensorFlow unimportable):

    python tests/jax_backend_checks.py OUT_DIR

It writes to OUT_DIR:
- noise.npz: Laplace and d_chi noise drawn by the layers under JAX (the
  test checks their laws against the closed forms);
- robust.keras: a tiny DPNR split (mode robust) fine-tuned 2 steps, and
  mlm.weights.h5: a tiny token_rep MLM pretrained 2 steps (denoising);
- batch.npz and checks.json: a fixed batch and the losses of both models
  on it with the noise off (the test recomputes them under TensorFlow),
  the training results, and the modules imported (no TensorFlow).
"""

import json
import os
import sys

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


def mlm_config(steps):
    from tfdptext.pretraining.config import PretrainConfig

    return PretrainConfig(mode="token_rep", objective="denoising",
                          eta=DCHI_ETA, steps=steps, batch_size=8,
                          max_predictions=4).validate()


def vocabulary():
    from tfdptext.pretraining import portable

    return portable.Vocabulary(mask_id=MASK_ID, special_token_ids=SPECIAL_IDS)


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


def main(out_dir):
    import keras

    from tfdptext.pretraining import model as mlm_model
    from tfdptext.pretraining import portable as pretrain_portable
    from tfdptext.training import portable

    keras.utils.set_random_seed(0)
    noise = noise_samples()
    np.savez(os.path.join(out_dir, "noise.npz"), laplace=noise["laplace"],
             dchi=noise["dchi"])
    train, dev = tiny_split(64, 1), tiny_split(16, 2)
    split = portable.build_split(portable.ROBUST, tiny_backbone(), 2,
                                 epsilon=1.0)
    # Eager (no XLA compile: seconds, not a minute each on a shared
    # 2-core CPU). The compiled steps ran on MiniLM in the package's dry
    # run (docs/guides/pretraining.md) and benchmarks/jax_tf_steps.py.
    robust = portable.fine_tune(split, train, dev, steps=2, batch_size=8,
                                learning_rate=1e-3, jit_compile=False)
    split.model.save(os.path.join(out_dir, "robust.keras"))
    mlm = mlm_model.build_mlm(mlm_config(2), tiny_backbone(), vocabulary())
    pretrained = pretrain_portable.pretrain(mlm, train, vocabulary(),
                                            mlm_config(2), heldout=dev,
                                            jit_compile=False)
    mlm.save_weights(os.path.join(out_dir, "mlm.weights.h5"))
    batch = masked_batch(dev)
    np.savez(os.path.join(out_dir, "batch.npz"), **batch)
    checks = {
        "backend": keras.backend.backend(),
        "laplace_randomness": noise["laplace_randomness"],
        "robust": robust, "pretrain": pretrained,
        "robust_loss": classifier_loss(split.model, dev),
        "mlm_loss": mlm_loss(mlm, batch),
        "tensorflow_modules": sorted(m for m in sys.modules
                                     if m.split(".")[0] in
                                     ("tensorflow", "tensorflow_text")),
        "tensorflow_blocked": _tensorflow_blocked(),
    }
    with open(os.path.join(out_dir, "checks.json"), "w") as f:
        json.dump(checks, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1])
