"""The backend-agnostic path under JAX, for tests/test_jax_backend.py.

Run by that test in ONE subprocess with KERAS_BACKEND=jax and
tests/no_tensorflow first on PYTHONPATH (TensorFlow, pandas, matplotlib
and scikit-learn unimportable, as on the device image), as the
program of the device package's `run.sh --dry_run` (the test's $PYTHON
hands it gpu_cells.py's arguments):

    python tests/jax_backend_checks.py OUT_DIR [-- GPU_CELLS_ARGS...]

It writes to OUT_DIR:
- noise.npz: Laplace and d_chi noise drawn by the layers under JAX (the
  test checks their laws against the closed forms), and word dropout's
  outputs on `dropout_inputs` at each of DROPOUT_RATES (its law);
- robust.keras and text_to_text.keras: tiny split models (robust with
  word dropout, fine-tuned 2 compiled steps; text_to_text as built: the
  dry run trains it), a
  seq_rep model with label privacy fine-tuned 2 steps, and
  mlm_<mode>_<objective>.weights.h5: tiny MLMs pretrained 1 step
  (token_rep vanilla, text_to_text probabilistic);
- batch.npz and checks.json: a fixed batch and the losses of these models
  on it with the noise off (the test recomputes them under TensorFlow),
  robust's word dropout of the dev texts from fixed uniforms
  (`dropout_uniforms`) and the loss on those texts,
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
# [CLS], [SEP] (the others: [PAD] 0, [MASK] MASK_ID).
CLS_ID, SEP_ID = 1, 2
# The robust split's word dropout rate.
DROPOUT_RATE = 0.3
# Word dropout's law: the rates (0 and 0.99, which drops every real token
# of up to 50, are the edge cases; 1 is refused), the length of the rows
# and how many rows of each layout the uniformity tests read.
DROPOUT_RATES = (0.0, 0.3, 0.5, 0.99)
DROPOUT_LENGTH = 14
DROPOUT_SAMPLES = 2000
# The uniformity layouts: (real tokens, position of a [MASK] among them
# or None).
DROPOUT_LAYOUTS = ((10, 4), (5, None))
# The count rows: 0 to 11 real tokens, each 4 times.
DROPOUT_COUNT_LENGTHS = tuple(range(12)) * 4
# The MLMs whose losses are compared with TensorFlow's: (mode, objective).
MLMS = (("token_rep", "vanilla"), ("text_to_text", "probabilistic"))
# The split models saved under JAX and loaded under TensorFlow.
SPLITS = ("robust", "text_to_text")


def mlm_config(mode, objective, steps=1):
    """The tiny MLMs' config: batches of 8 and the default
    max_predictions, as the dry run's pretraining (benchmarks/gpu_cells.py):
    under eager JAX the MLM head's ops of those shapes compile once for
    both."""
    from tfdptext.pretraining.config import PretrainConfig

    return PretrainConfig(mode=mode, objective=objective, eta=DCHI_ETA,
                          steps=steps, batch_size=8,
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
        special_token_ids=SPECIAL_IDS, passthrough_token_ids=PASSTHROUGH_IDS,
        mask_token_id=MASK_ID,
        dropout_rate=DROPOUT_RATE if mode == "robust" else 0.0)


def _dropout_row(real, mask_at=None, padding_id=0, seed=0):
    """([CLS] real tokens [SEP] padding, its padding mask), of length
    DROPOUT_LENGTH, with a [MASK] at `mask_at` (never dropped) and
    `padding_id` in the padding (never dropped either)."""
    tokens = list(np.random.default_rng(seed).integers(
        len(SPECIAL_IDS), VOCABULARY_SIZE, real))
    if mask_at is not None:
        tokens.insert(mask_at, MASK_ID)
    ids = [CLS_ID] + tokens + [SEP_ID]
    pad = DROPOUT_LENGTH - len(ids)
    return ids + [padding_id] * pad, [1] * len(ids) + [0] * pad


def dropout_inputs():
    """Word dropout's test rows: the count rows (0 to 11 real tokens,
    [MASK] among them from 2 on, odd lengths padded with a word's id),
    then DROPOUT_SAMPLES rows of each of DROPOUT_LAYOUTS."""
    rows = [_dropout_row(n, 2 if n >= 2 else None, 5 * (n % 2), i)
            for i, n in enumerate(DROPOUT_COUNT_LENGTHS)]
    for real, mask_at in DROPOUT_LAYOUTS:
        rows += [_dropout_row(real, mask_at)] * DROPOUT_SAMPLES
    ids, mask = zip(*rows)
    return {"token_ids": np.array(ids, np.int32),
            "padding_mask": np.array(mask, np.int32)}


def dropout_samples():
    """{rate: the token ids WordDropout outputs on `dropout_inputs`},
    drawn by the layer on this backend."""
    from tfdptext import layers

    inputs = dropout_inputs()
    return {rate: np.asarray(layers.WordDropout(
        rate, MASK_ID, SPECIAL_IDS)(inputs)["token_ids"])
        for rate in DROPOUT_RATES}


def dropout_uniforms(values):
    """Fixed U[0, 1) numbers for word dropout on `values`' texts."""
    return np.random.default_rng(3).random(
        values["token_ids"].shape).astype(np.float32)


def dropped_texts(layer, values):
    """`values` with word dropout (`layer`) applied from
    `dropout_uniforms` (the same drop mask under every backend)."""
    features = {k: values[k] for k in ("token_ids", "padding_mask")}
    dropped = layer.apply(features, dropout_uniforms(values))
    return dict(values, token_ids=np.asarray(dropped["token_ids"]))


def masked_batch(values):
    """One fixed masked batch of `values` (seed 0)."""
    from tfdptext.pretraining import portable

    config = mlm_config("token_rep", "vanilla")
    return next(portable.masked_batches(
        values, vocabulary(), VOCABULARY_SIZE, batch_size=config.batch_size,
        rng=np.random.default_rng(0), mask_rate=config.mask_rate,
        max_predictions=config.max_predictions))


# The rows of one forward pass of `classifier_loss`: the dry run's batch
# size (benchmarks/gpu_cells.py DRY_RUN_BATCH_SIZE), so that under eager
# JAX the split models' forward ops are compiled once for both (a 16-row
# call compiled about 75 ops of its own: 2.4 CPU-s).
LOSS_BATCH = 8


def classifier_loss(model, values):
    """Mean cross-entropy of `model` on `values`, noise off (the model
    called on LOSS_BATCH rows at a time)."""
    import keras

    from tfdptext.layers import base
    from tfdptext.training import portable

    features = portable.features_of(values)
    count = len(values["labels"])
    with base.randomness_from_caller():
        logits = keras.ops.concatenate([
            model({k: v[start:start + LOSS_BATCH]
                   for k, v in features.items()}, training=False)
            for start in range(0, count, LOSS_BATCH)])
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
             dchi=noise["dchi"], **{f"dropout_{rate}": out for rate, out
                                    in dropout_samples().items()})
    # 16 training texts: the 2 steps of 8 read 16, and a frozen user
    # side releases them with one compiled predict step for both splits.
    train, dev = tiny_split(16, 1), tiny_split(16, 2)
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
                learning_rate=1e-3, jit_compile=True,  # jax.jit
                label_epsilon=2.0 if mode == "seq_rep" else None)
        if mode in SPLITS:
            split.model.save(os.path.join(out_dir, f"{mode}.keras"))
            checks["losses"][mode] = classifier_loss(split.model, dev)
        if split.input_dropout is not None:
            dropped = dropped_texts(split.input_dropout, dev)
            checks["dropped_token_ids"] = dropped["token_ids"].tolist()
            checks["losses"][f"{mode}_dropped"] = classifier_loss(
                split.model, dropped)
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
