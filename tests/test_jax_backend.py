"""The backend-agnostic training path: under JAX with TensorFlow
unimportable, its parity with TensorFlow (word dropout included), the
noise laws, word dropout's law and the nearest-token search under both
backends, a model trained under JAX
exported under TensorFlow, and the device package's dry run (issue 37).

The JAX side runs in ONE subprocess (KERAS_BACKEND=jax, tests/no_tensorflow
first on PYTHONPATH: `import tensorflow` raises there, and so do the
imports of pandas, matplotlib and scikit-learn, which the device image
lacks and Keras imports only if installed): the device
package's `run.sh --dry_run`, whose $PYTHON runs tests/jax_backend_checks.py
before the package's program (`_PYTHON_WITH_CHECKS`). This process is the
TensorFlow side.
"""

import itertools
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import jax_backend_checks as checks  # noqa: E402
import nearest_ties  # noqa: E402

pytest.importorskip("jax")

BLOCKER = os.path.join(ROOT, "tests", "no_tensorflow")
# A correct sampler fails a KS test at this level with probability 1e-4.
KS_P_VALUE = 1e-4
# Word dropout's uniformity tests (chi-square): a uniform sampler fails
# each at this level with probability 1e-4; at most 8 run per backend
# (2 rates x 2 layouts x 2 tests), so together with probability <= 8e-4.
CHI_SQUARE_P_VALUE = 1e-4
# float32 losses of the same weights and batch on two backends (XLA and
# TensorFlow kernels sum in different orders): a few ulps of values ~1.
LOSS_TOLERANCE = 1e-5
# The subprocesses take about a minute of CPU; on a 2-core machine shared
# with the rest of the suite their wall time can be ten times that.
SUBPROCESS_TIMEOUT_S = 1200


def jax_environment():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([BLOCKER, ROOT]))
    # LLVM's optimization off: the tiny models run as fast, and XLA's
    # compilations (hundreds of them: every eager op of every shape) take
    # half the CPU or less (measured: the Laplace and d_chi draws 10.5 ->
    # 3.1 CPU-s, building a tiny split 12.0 -> 6.4); the losses still
    # equal TensorFlow's within LOSS_TOLERANCE. XLA's CPU fusion emitters
    # off (the older loop emitters): each compilation costs about half
    # the CPU (measured: the whole subprocess 133 -> 66 CPU-s, 839
    # compilations either way), the losses as close. And LLVM's module
    # split into 1 part (no parallel codegen of these tiny modules), the
    # concurrency scheduler, copy insertion's region analysis and LLVM's
    # expensive passes off: the compilations' CPU a third less again
    # (measured on a robust fine-tune and the noise: 7.1 -> 4.8 CPU-s of
    # compilation, 190 either way; the losses equal to 1e-7).
    env["XLA_FLAGS"] = ("--xla_backend_optimization_level=0 "
                        "--xla_cpu_use_fusion_emitters=false "
                        "--xla_cpu_parallel_codegen_split_count=1 "
                        "--xla_cpu_enable_concurrency_optimized_scheduler"
                        "=false "
                        "--xla_cpu_copy_insertion_use_region_analysis=false "
                        "--xla_llvm_disable_expensive_passes=true")
    return env


# run.sh's $PYTHON: the package's program (gpu_cells.py) runs in the same
# process as the checks, after them (one import of JAX, Keras, keras-hub).
_PYTHON_WITH_CHECKS = """#!/usr/bin/env bash
case "$1" in
  *gpu_cells.py) shift
    exec "$REAL_PYTHON" "$CHECKS" "$CHECKS_OUT" -- "$@";;
  *) exec "$REAL_PYTHON" "$@";;
esac
"""


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory):
    """(checks directory, checks.json, the dry run's gpu_cells.json)."""
    root = tmp_path_factory.mktemp("jax")
    package, out = str(root / "gpu"), str(root / "out")
    _tiny_package(package)
    python = root / "python_with_checks"
    python.write_text(_PYTHON_WITH_CHECKS)
    python.chmod(0o755)
    env = dict(jax_environment(), OUT=out, PYTHON=str(python),
               REAL_PYTHON=sys.executable, CHECKS_OUT=str(root),
               CHECKS=os.path.join(ROOT, "tests", "jax_backend_checks.py"),
               TFDPTEXT_REPO=ROOT)
    env.pop("JAX_PLATFORMS")  # run.sh sets it for --dry_run
    done = subprocess.run(
        ["bash", os.path.join(package, "run.sh"), "--dry_run", "--eager"],
        env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(os.path.join(root, "checks.json")) as f:
        result = json.load(f)
    with open(os.path.join(out, "gpu_cells.json")) as f:
        return str(root), result, json.load(f)


def test_jax_path_trains_without_tensorflow(jax_run):
    _, result, _ = jax_run
    assert result["backend"] == "jax"
    assert result["tensorflow_blocked"], "the blocker did not block"
    assert result["tensorflow_modules"] == []
    trained = result["trained"]
    assert sorted(trained) == sorted(
        ["robust", "seq_rep"] + [f"mlm_{m}_{o}" for m, o in checks.MLMS])
    for name, run in trained.items():
        assert run["steps"] == (1 if name.startswith("mlm") else 2), name
        assert np.isfinite(run["final_train_loss"]), name
    # keras.random with a seed state: stated as seeded, never as a
    # source fit for users' releases.
    assert result["laplace_randomness"] == "seeded"
    assert trained["robust"]["guarantee"]["randomness"] == "seeded"
    # robust trained with word dropout (compiled: jax.jit), its guarantee
    # the amplified one
    assert trained["robust"]["guarantee"]["mechanism"] == \
        "word_dropout+laplace"
    assert trained["robust"]["guarantee"]["details"]["dropout_rate"] == \
        checks.DROPOUT_RATE
    assert trained["seq_rep"]["guarantee"]["mechanism"] == "laplace"
    # the labels: released once by randomized response from os.urandom
    assert trained["seq_rep"]["label_guarantee"]["randomness"] == \
        "os_entropy"


def test_nearest_tokens_under_jax_equal_float64(jax_run):
    # JAX's product at Precision.HIGHEST, and a TF32 one, both re-ranked
    # exactly (TensorFlow's side: tests/test_nearest.py).
    reference = nearest_ties.float64_nearest(*nearest_ties.ties())
    for name, chosen in jax_run[1]["nearest"].items():
        np.testing.assert_array_equal(chosen, reference, err_msg=name)


def _noise(source, jax_run):
    if source == "jax":
        with np.load(os.path.join(jax_run[0], "noise.npz")) as store:
            return {"laplace": store["laplace"], "dchi": store["dchi"]}
    return checks.noise_samples()  # this process: TensorFlow's draws


@pytest.mark.parametrize("source", ["jax", "tensorflow"])
def test_noise_laws_match_closed_forms(source, jax_run):
    noise = _noise(source, jax_run)
    # Laplace(b = 1 / epsilon) per coordinate (per_coordinate sensitivity).
    laplace = noise["laplace"]
    assert len(laplace) == checks.NOISE_SAMPLES
    scale = 1.0 / checks.LAPLACE_EPSILON
    assert stats.kstest(laplace, stats.laplace(scale=scale).cdf).pvalue > \
        KS_P_VALUE
    # d_chi: the norm is Gamma(n, 1 / eta), the direction uniform on the
    # sphere (each coordinate of a unit vector has mean 0, variance 1/n).
    dchi = noise["dchi"]
    norms = np.linalg.norm(dchi, axis=1)
    assert stats.kstest(norms, stats.gamma(
        checks.DCHI_DIM, scale=1.0 / checks.DCHI_ETA).cdf).pvalue > \
        KS_P_VALUE
    directions = dchi / norms[:, None]
    # 5 standard errors of a mean of len(dchi) values of variance 1 / n.
    bound = 5.0 / np.sqrt(checks.DCHI_DIM * len(dchi))
    assert np.abs(directions.mean(axis=0)).max() < bound
    # The broken one-scalar noise (the same draw on every coordinate)
    # fails this: every direction would be (1, ..., 1) / sqrt(n).
    assert np.abs(directions.mean(axis=0)).max() < \
        1.0 / np.sqrt(checks.DCHI_DIM) / 2


def _dropout(source, jax_run):
    if source == "jax":
        with np.load(os.path.join(jax_run[0], "noise.npz")) as store:
            return {rate: store[f"dropout_{rate}"]
                    for rate in checks.DROPOUT_RATES}
    return checks.dropout_samples()  # this process: TensorFlow's draws


def _subset_counts(dropped):
    """How often each subset of k of the n positions was the one dropped
    (rows of (R, n) booleans with k True each), every subset listed."""
    n, k = dropped.shape[1], int(dropped[0].sum())
    codes = dropped.astype(np.int64) @ (2 ** np.arange(n))
    subsets = [sum(2 ** i for i in c)
               for c in itertools.combinations(range(n), k)]
    return np.array([(codes == c).sum() for c in subsets])


def _position_p_value(dropped):
    """p-value of "each of the n positions is dropped with probability
    q = k / n": Pearson's statistic X over the n position counts. k of n
    per row without replacement makes the counts negatively correlated:
    X (n - 1) / (n (1 - q)) is chi-square with n - 1 degrees of freedom
    (the counts' covariance is R q (1 - q) n / (n - 1) (I - 11^T / n))."""
    rows, n = dropped.shape
    q = dropped[0].sum() / n
    counts = dropped.sum(axis=0)
    x = ((counts - rows * q) ** 2).sum() / (rows * q)
    return stats.chi2.sf(x * (n - 1) / (n * (1 - q)), n - 1)


@pytest.mark.parametrize("source", ["jax", "tensorflow"])
def test_word_dropout_law(source, jax_run):
    from tfdptext.privacy import dropout

    inputs = checks.dropout_inputs()
    ids = inputs["token_ids"]
    real = (inputs["padding_mask"] == 1) & ~np.isin(ids, checks.SPECIAL_IDS)
    for rate, out in _dropout(source, jax_run).items():
        dropped = out != ids
        # real tokens only (never padding, even with a word's id, nor
        # [CLS], [SEP], [MASK]), each replaced by [MASK]
        assert not (dropped & ~real).any(), rate
        assert (out[dropped] == checks.MASK_ID).all(), rate
        # exactly floor(n * rate + 0.5) of the n real tokens of each row
        np.testing.assert_array_equal(
            dropped.sum(axis=1),
            [dropout.num_dropped(n, rate) for n in real.sum(axis=1)])
        if rate == 0.0:
            assert not dropped.any()
        if rate == 0.99:  # every real token of rows of <= 50
            np.testing.assert_array_equal(dropped, real)
        start = len(checks.DROPOUT_COUNT_LENGTHS)
        for layout in checks.DROPOUT_LAYOUTS:
            rows = slice(start, start + checks.DROPOUT_SAMPLES)
            start += checks.DROPOUT_SAMPLES
            sample = dropped[rows][:, real[rows][0]]  # (R, n) real ones
            n, k = sample.shape[1], int(sample[0].sum())
            if not 0 < k < n:
                continue
            # each real position equally likely, wherever the [MASK] is
            assert _position_p_value(sample) > CHI_SQUARE_P_VALUE, \
                (rate, layout)
            # each of the C(n, k) subsets equally likely (where every
            # subset expects >= 5 rows: Pearson's approximation holds)
            if checks.DROPOUT_SAMPLES / math.comb(n, k) >= 5:
                assert stats.chisquare(_subset_counts(sample)).pvalue > \
                    CHI_SQUARE_P_VALUE, (rate, layout)


def test_word_dropout_arguments_are_checked():
    from tfdptext import layers
    from tfdptext.errors import ArgumentError
    from tfdptext.training import portable

    with pytest.raises(ArgumentError, match=r"rate.*\[0, 1\)"):
        layers.WordDropout(1.0, checks.MASK_ID)
    common = dict(epsilon=1.0, mask_token_id=checks.MASK_ID,
                  passthrough_token_ids=checks.PASSTHROUGH_IDS)
    # refused before the backbone is read (None here)
    for bad in (1.0, -0.1, float("nan"), "0.3"):
        with pytest.raises(ArgumentError, match="dropout_rate"):
            portable.build_split("robust", None, 2, dropout_rate=bad,
                                 **common)
    for mode, extra in (("none", {}), ("token_rep", {"eta": 1.0}),
                        ("seq_rep", {"epsilon": None, "eta": 1.0})):
        with pytest.raises(ArgumentError, match="modes robust and seq_rep"):
            portable.build_split(mode, None, 2, dropout_rate=0.3,
                                 **{**common, **extra})
    with pytest.raises(ArgumentError, match="mask_token_id"):
        portable.build_split("robust", None, 2, dropout_rate=0.3,
                             epsilon=1.0)
    # seq_rep with Laplace takes it too (as the TensorFlow trainer): the
    # frozen user side drops, then releases once; [PAD], [CLS], [SEP] and
    # [MASK] are never dropped.
    split = portable.build_split("seq_rep", checks.tiny_backbone(), 2,
                                 dropout_rate=0.3, **common)
    assert not split.user.trainable
    assert split.input_dropout.rate == 0.3
    assert sorted(split.input_dropout.special_token_ids) == \
        sorted(checks.SPECIAL_IDS)
    g = split.guarantee(max_tokens=checks.LENGTH)
    assert g.mechanism == "word_dropout+laplace"
    assert g.details["token_range"] == [1, checks.LENGTH]


def _load_split(out, mode):
    """A split model trained under JAX, loaded here (TensorFlow)."""
    import keras

    from tfdptext import models  # noqa: F401 (registers its layers)

    return keras.models.load_model(os.path.join(out, f"{mode}.keras"),
                                   compile=False)


@pytest.mark.parametrize("mode", checks.SPLITS)
def test_classifier_loss_equals_tensorflow(jax_run, mode):
    out, result, _ = jax_run
    model = _load_split(out, mode)
    dev = checks.tiny_split(16, 2)
    assert abs(checks.classifier_loss(model, dev) - result["losses"][mode]) \
        < LOSS_TOLERANCE


def test_robust_word_dropout_equals_tensorflow(jax_run):
    # The same uniforms give the same drop mask under both backends, and
    # the robust model's loss on the texts so dropped is TensorFlow's.
    from tfdptext.layers import base

    out, result, _ = jax_run
    model = _load_split(out, "robust")
    layer = model.get_layer("user_side").get_layer(base.INPUT_PERTURBATION)
    assert layer.rate == checks.DROPOUT_RATE
    assert sorted(layer.special_token_ids) == sorted(checks.SPECIAL_IDS)
    dev = checks.tiny_split(16, 2)
    dropped = checks.dropped_texts(layer, dev)
    np.testing.assert_array_equal(dropped["token_ids"],
                                  result["dropped_token_ids"])
    assert (dropped["token_ids"] == checks.MASK_ID).sum() > 16
    assert abs(checks.classifier_loss(model, dropped) -
               result["losses"]["robust_dropped"]) < LOSS_TOLERANCE


@pytest.mark.parametrize("mode, objective", checks.MLMS)
def test_mlm_loss_equals_tensorflow(jax_run, mode, objective):
    # token_rep vanilla reads its targets off the release with the
    # nearest-token search; text_to_text probabilistic draws them through
    # the text privatizer (noise off here: both are deterministic).
    out, result, _ = jax_run
    mlm = checks.build_mlm(mode, objective)
    with np.load(os.path.join(out, "batch.npz")) as store:
        batch = {k: store[k] for k in store.files}
    mlm(batch)  # builds every layer before the weights load
    mlm.load_weights(os.path.join(out, checks.mlm_file(mode, objective)))
    assert abs(checks.mlm_loss(mlm, batch) -
               result["losses"][f"mlm_{mode}_{objective}"]) < LOSS_TOLERANCE


def test_model_trained_under_jax_exports_to_tflite(jax_run):
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import exporter
    from tfdptext.export import tflite
    from tfdptext.export.choices import NOISE_INTERNAL
    from tfdptext.layers import base
    from tfdptext.models.split_spec import SEQUENCE

    user = _load_split(jax_run[0], "robust").get_layer("user_side")
    # The exporter's phone model (one text of a fixed length per invoke),
    # with the layers' own TensorFlow random ops.
    phone = exporter._phone_model(user, SEQUENCE, checks.LENGTH,
                                  noise_source=NOISE_INTERNAL)
    tflite_bytes = tflite.convert(phone, batch_size=1)
    tflite.check_unseeded_builtins(tflite_bytes)  # no seed baked in
    runner = Interpreter(model_content=tflite_bytes).get_signature_runner()
    # Texts of one real token: word dropout at rate 0.3 masks
    # floor(0.3 + 0.5) = 0 of it, so the release is the clean
    # representation plus the Laplace noise alone.
    dev = checks.tiny_split(4, 3)
    first = (np.arange(checks.LENGTH) == 0).astype(np.int32)
    inputs = {"token_ids": dev["token_ids"] * first,
              "padding_mask": np.tile(first, (4, 1))}
    release = np.concatenate([
        runner(**{k: v[i:i + 1] for k, v in inputs.items()})[
            "private_representation"] for i in range(4)])
    with base.randomness_from_caller():
        clean = np.asarray(phone(inputs)["private_representation"])
    assert release.shape == clean.shape and np.isfinite(release).all()
    # The phone model adds fresh Laplace noise (b = 1 at epsilon 1) to the
    # min-max normalised representation, computed like Keras: the mean
    # |noise| of these 64 draws is 1 +- 4 standard errors (1 / 8).
    assert 0.5 < np.abs(release - clean).mean() < 1.5


def _tiny_package(directory):
    """A device package of the tiny model: encoder, ids, run.sh."""
    from tfdptext.models import portable_encoder
    from tfdptext.training import portable

    portable_encoder.save_encoder(checks.tiny_backbone(),
                                  os.path.join(directory, "encoder"))
    data = os.path.join(directory, "data")
    os.makedirs(data)
    portable.save_ids(os.path.join(data, "sst2_ids.npz"), {
        "train": checks.tiny_split(32, 4), "dev": checks.tiny_split(8, 5),
        "test": checks.tiny_split(8, 6)})
    portable.save_ids(os.path.join(data, "ag_ids.npz"), {
        "train": checks.tiny_split(32, 7),
        "heldout": checks.tiny_split(8, 8)})
    with open(os.path.join(data, "vocab.json"), "w") as f:
        json.dump({"mask_id": checks.MASK_ID, "pad_id": 0,
                   "special_token_ids": list(checks.SPECIAL_IDS),
                   "passthrough_token_ids": list(checks.PASSTHROUGH_IDS)},
                  f)
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump({"test": "tiny package"}, f)
    shutil.copy(os.path.join(ROOT, "benchmarks", "gpu_run.sh"),
                os.path.join(directory, "run.sh"))


def test_device_package_dry_run_without_tensorflow(jax_run):
    result = jax_run[2]
    assert result["dry_run"] and result["versions"]["backend"] == "jax"
    cells = {c["name"]: c for c in result["cells"]}
    assert not [c for c in cells.values() if "error" in c]
    # each private mode's pretraining, fine-tuning from the plain and the
    # pretrained encoder, the non-private reference (a dry run: 1 seed,
    # no calibration)
    assert sorted(cells) == sorted(
        [f"pretrain_eta81_{m}_denoising" for m in ("token_rep",
                                                   "text_to_text")] +
        [f"sst2_eta81_{m}_{e}_seed0" for m in ("token_rep", "text_to_text")
         for e in ("plain", "denoising")] + ["sst2_none_seed0"])
    assert all(c["steps"] == 2 for c in cells.values())
    assert result["plan"] == [c["name"] for c in result["cells"]]
    assert cells["sst2_eta81_token_rep_denoising_seed0"]["guarantee"][
        "mechanism"] == "dchi"
    assert cells["sst2_eta81_text_to_text_denoising_seed0"]["guarantee"][
        "mechanism"] == "dchi_text_to_text"
    assert all(0.0 <= c["accuracy"] <= 1.0 for c in cells.values()
               if c["kind"] == "finetune")


def test_device_cells_are_sized_to_fit_the_budget():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import gpu_cells

    pretrains = [{"first_step_s": 20.0, "steps_per_s": 10.0},
                 {"first_step_s": 30.0, "steps_per_s": 4.0}]
    fast = {"first_step_s": 15.0, "steps_per_s": 40.0, "inputs_s": 2.0,
            "train_texts": 960}
    slow = dict(fast, inputs_s=20.0)  # text_to_text's release
    finetunes = [fast] * 4 + [slow] * 3
    left = 800.0
    pre_steps, fine_steps = gpu_cells.size_cells(pretrains, finetunes, left)
    pre_time = sum(c["first_step_s"] + n / c["steps_per_s"]
                   for c, n in zip(pretrains, pre_steps))
    fine_time = sum(c["first_step_s"] + fine_steps * (
        1 / c["steps_per_s"] + gpu_cells.BATCH_SIZE * c["inputs_s"] /
        c["train_texts"]) for c in finetunes)
    assert pre_time + fine_time <= left
    # the pretraining cells share their part equally
    assert abs(pre_time - gpu_cells.PRETRAIN_SHARE * left) < 1.0
    # and the whole uses most of the budget (within a step of each cell)
    assert pre_time + fine_time > left - 1.0 - 7 * 0.8
