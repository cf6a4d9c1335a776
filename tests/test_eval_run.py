"""Evaluating trained runs (tfdptext-eval's library), sweeps and bad input."""

import contextlib
import json
import os
import re
import shutil
import sys

import numpy as np
import eager_training
import pytest
import still_preset as still_preset_lib
import zygote

from tfdptext import data
from tfdptext import training
from tfdptext.errors import ArgumentError
from tfdptext.evaluation import evaluate
from tfdptext.evaluation import inversion
from tfdptext.evaluation import sweep
from tfdptext.evaluation.release import RunError
from tfdptext.evaluation.release import TrainedRun

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The seed of `still_preset`'s weights: its clean run's attacker reads
# gender at 0.61 (majority 0.42; see test_attackers_see_clean_leak_and_
# not_heavy_noise), the same in each of the 3 repeats measured.
STILL_SEED = 20261128


@pytest.fixture(scope="module")
def still_preset(tmp_path_factory):
    """conftest's tiny encoder without dropout, its weights drawn from
    STILL_SEED (scoped: no global seed is left for later noise ops), as a
    keras-hub preset directory. An unseeded draw made how much of the
    leak the clean run keeps vary from one suite run to the next (its
    attacker read gender at 0.52 to 0.61 over three seeds, 1, 7 and
    STILL_SEED, against 0.47 asserted); the runs' own seeds (`TrainConfig.seed`) fix the rest."""
    return still_preset_lib.save(
        str(tmp_path_factory.mktemp("still") / "tiny"), STILL_SEED)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, still_preset):
    """Tiny trained runs on the synthetic corpus (which leaks gender and
    age through word choice) from `still_preset`: clean, heavily noised,
    and token-level.

    Only the clean run's encoder must learn (its attackers must see the
    leak): it trains 1 epoch as the product does (its 25 traced steps;
    test accuracy 1.0). The others only produce artefacts: 1 epoch on the
    first 64 train and 16 dev texts of `corpus`, eagerly
    (tests/eager_training.py: for their 2 steps, cheaper than tracing
    fit's steps). The heavily noised one's release at epsilon 0.01
    carries nothing whatever it learned; it is evaluated on `heavy_corpus`
    (400 test texts: see test_attackers_see_clean_leak_and_not_heavy_noise).
    The token-level runs' users' texts are released once through the user
    side (what they cost): the tests read their releases of `corpus`, and
    membership inference the first 60 texts of the release t2t trained
    on."""
    base = tmp_path_factory.mktemp("eval")
    corpus = data.load_synthetic(num_examples=1000)
    out = {"base": base, "corpus": corpus,
           "heavy_corpus": data.load_synthetic(num_examples=4000)}
    few = {"epochs": 1, "max_train_examples": 64, "max_dev_examples": 16}
    for name, kwargs in (
            ("none", {"mode": "none", "epochs": 1}),
            ("heavy", {"mode": "robust", "epsilon": 0.01, **few}),
            ("t2t", {"mode": "text_to_text", "eta": 20.0, **few}),
            ("token", {"mode": "token_rep", "eta": 20.0, **few})):
        config = training.TrainConfig(preset=still_preset, max_length=16,
                                      batch_size=32, learning_rate=3e-3,
                                      **kwargs)
        out[name] = str(base / name)
        with contextlib.ExitStack() as stack:
            if name != "none":
                stack.enter_context(eager_training.eager_fit())
            training.train(config, out[name], dataset=corpus, verbose=0)
    return out


def _evaluate(runs, name, output="", **kwargs):
    """Evaluates run `name` on the corpus (unless another `dataset` is
    given) into eval_<name><output>; no plots unless asked (the clean
    evaluation checks them)."""
    out = str(runs["base"] / f"eval_{name}{output}")
    kwargs.setdefault("dataset", runs["corpus"])
    kwargs.setdefault("plots", False)
    kwargs.setdefault("deniability_tokens", 10)
    kwargs.setdefault("deniability_samples", 50)
    return out, evaluate.evaluate(runs[name], out, progress=False, **kwargs)


# DPNR's MLP attacker trained at most 10 epochs (default 50, early-stopped
# on dev loss): on the clean run's release it reached 0.66 on gender
# against 0.70 at 50 (majority 0.42), for a third of the CPU (measured on
# an earlier run from an unseeded tiny encoder).
ATTACKER_EPOCHS = 10


@pytest.fixture(scope="module")
def clean_eval(runs):
    """The clean run evaluated with the defaults (every attribute, DPNR's
    MLP attacker) but ATTACKER_EPOCHS: (output directory, result, the
    epochs each Keras attacker was given)."""
    from tfdptext.evaluation import attacker_models

    epochs = []
    original = attacker_models.fit_keras_mlp

    def spy(*args, **kwargs):
        epochs.append(kwargs["epochs"])
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(attacker_models, "fit_keras_mlp", spy)
        return _evaluate(runs, "none", plots=True,
                         attacker_epochs=ATTACKER_EPOCHS) + (epochs,)


def test_attackers_see_clean_leak_and_not_heavy_noise(runs, clean_eval):
    out, clean, epochs = clean_eval
    gender = clean["attack"]["per_attribute"]["gender"]["mlp"]
    # The tiny encoder keeps part of the leak: above majority (n = 100,
    # standard error about 0.05). 0.61 measured: the run and its attacker
    # are seeded (`still_preset`), so this is the same number every time.
    assert gender["accuracy"]["mean"] > gender["majority_accuracy"] + 0.05
    assert gender["n_train"] == 800 and gender["n_test"] == 100
    # --attacker_epochs reached both attackers and is recorded (absent
    # from the options at the default: those of earlier evaluations).
    assert epochs == [ATTACKER_EPOCHS] * 2
    assert clean["options"]["attacker_epochs"] == ATTACKER_EPOCHS
    assert "attacker_epochs" not in evaluate.evaluation_options(runs["none"])
    # The heavily noised release on 400 test texts (the corpus' 100 gave
    # ROC-AUC standard errors of about 0.06: |AUC - 0.5| reached 0.17 in
    # one of 8 fits) and 200 train and dev texts (what the attacker
    # learns from noise does not matter; the test split sets the error).
    _, noisy = _evaluate(runs, "heavy", attacker_epochs=ATTACKER_EPOCHS,
                         dataset=runs["heavy_corpus"],
                         max_attack_examples=200)
    for attribute in ("gender", "age"):
        r = noisy["attack"]["per_attribute"][attribute]["mlp"]
        assert (r["n_train"], r["n_test"]) == (200, 400)
        # No better than a constant guess, and no ranking skill (n = 400,
        # classes near 50:50: the standard errors are about 0.025 and
        # 0.029, so the bounds are 6 and 7 of them).
        best_constant = max(r["n_test_per_class"].values()) / r["n_test"]
        assert r["accuracy"]["mean"] <= best_constant + 0.15
        assert abs(r["roc_auc"]["mean"] - 0.5) < 0.2
    # (The majority guesses score 0.54 and 0.495 on heavy_corpus' test
    # split, 0.42 and 0.46 on the corpus': the clean attacker's reading of
    # gender, 0.61 measured, is what keeps the clean run below.)
    privacy = noisy["attack"]["empirical_privacy"]["demographic"]
    assert privacy["strongest"] > \
        clean["attack"]["empirical_privacy"]["demographic"]["strongest"]
    # Files: eval.json equals the returned dict, report and plots exist.
    saved = json.load(open(os.path.join(out, "eval.json")))
    assert saved["utility"] == clean["utility"]
    assert saved["utility"]["n_test"] == 100
    report = open(os.path.join(out, "report.md")).read()
    assert "NO privacy guarantee" in report and "gender" in report
    for name in ("attackers.png", "fairness.png"):
        with open(os.path.join(out, name), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_utility_and_fairness_match_direct_computation(runs, clean_eval):
    # Gap change against the clean evaluation of the same noise-free run
    # (the same predictions). The attacker is not checked here: logistic
    # regression (DPNR's MLP costs about 15 CPU-s: 50 epochs) on the
    # first 200 train texts (utility and fairness are the test split's).
    out, result = _evaluate(runs, "none", output="_gender",
                            private_attributes=["gender"],
                            baseline_eval=clean_eval[0],
                            attackers=["logistic_regression"],
                            max_attack_examples=200)
    saved = np.load(os.path.join(out, "predictions.npz"))
    test = runs["corpus"].splits["test"]
    np.testing.assert_array_equal(saved["labels"], test.labels)
    assert result["utility"]["accuracy"] == pytest.approx(
        (saved["predicted"] == test.labels).mean())
    groups = test.private["gender"]
    for g in (0, 1):
        expected = (saved["predicted"] == test.labels)[groups == g].mean()
        sub = result["fairness"]["gender"]["subgroups"][g]
        assert sub["accuracy"] == pytest.approx(expected)
        assert sub["n"] == int((groups == g).sum())
    assert list(result["attack"]["per_attribute"]) == ["gender"]
    # The same noise-free run's predictions as the baseline's: no change.
    np.testing.assert_array_equal(np.load(os.path.join(
        clean_eval[0], "predictions.npz"))["predicted"], saved["predicted"])
    assert list(result["gap_change"]) == ["gender"]
    assert result["gap_change"]["gender"]["gap_change"] == 0


@pytest.fixture(scope="module")
def t2t_eval(runs):
    """The released-once d_chi run (t2t) evaluated with membership
    inference on 60 train texts, the arguments membership inference was
    called with recorded: (output directory, result, arguments)."""
    from tfdptext.evaluation import membership as membership_lib

    seen = {}
    original = membership_lib.membership_inference

    def spy(logits_train, labels_train, *rest, **kwargs):
        seen.update(logits=logits_train, labels=labels_train)
        # The threshold attack alone (the trained ones take seconds more;
        # tests/test_evaluation.py covers them).
        return original(logits_train, labels_train, *rest,
                        attacks=("threshold",))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(membership_lib, "membership_inference", spy)
        out, result = _evaluate(runs, "t2t", private_attributes=[],
                                membership=True, max_attack_examples=60)
    return out, result, seen


def test_token_level_runs_report_inversion_and_deniability(runs, t2t_eval):
    token = t2t_eval[1]["token_level"]
    assert 0.0 <= token["inversion_accuracy"] <= 1.0
    den = token["deniability"]
    assert len(den["n_w"]) == len(den["tokens"]) == 10
    assert all(0 <= n <= 50 for n in den["n_w"])
    assert all(1 <= s <= 50 for s in den["s_w"])
    # The attackers read the token-level release (logistic regression:
    # the features are the attacker's input whatever its kind) of the
    # first 200 train texts.
    _, tok = _evaluate(runs, "token", private_attributes=["age"],
                       attackers=["logistic_regression"],
                       max_attack_examples=200)
    assert 0.0 <= tok["token_level"]["inversion_accuracy"] <= 1.0
    attacker = tok["attack"]["per_attribute"]["age"]["logistic_regression"]
    assert (attacker["n_train"], attacker["n_test"]) == (200, 100)


def test_membership_attacks_the_release_the_model_trained_on(
        runs, t2t_eval, tmp_path):
    """A released-once run (t2t: --training_release=once) trained on one
    recorded release: membership inference attacks those releases (the
    same member logits as the server's answer to the recorded file, never
    fresh releases of the train texts) and says which, in eval.json and
    report.md. A release that is not the run's own is refused."""
    from tfdptext import rundir

    out, result, seen = t2t_eval
    run = TrainedRun(runs["t2t"])
    released, labels, record = run.trained_release(limit=60)
    assert labels is None  # no --label_epsilon: the data set's labels
    np.testing.assert_allclose(
        seen["logits"], np.log(np.clip(run.predict(released), 1e-12, 1)),
        rtol=1e-6)
    np.testing.assert_array_equal(
        seen["labels"], runs["corpus"].splits["train"].labels[:60])
    members = result["membership"]["members"]
    stored = rundir.RunDir(runs["t2t"])
    assert members == record and members["texts"] == 60
    assert members["sha256"] == stored.recorded_draw(rundir.TRAINING_RELEASE)
    assert members["run_id"] == stored.run_id()
    with open(os.path.join(out, "report.md")) as f:
        assert "the release the model trained on, training_release.npz " \
            f"(SHA-256 {members['sha256'][:12]}" in f.read()
    # Fresh releases of the same texts would give other member logits.
    fresh, _ = run.releases(runs["corpus"].splits["train"].texts[:60])
    assert not np.allclose(seen["logits"], np.log(np.clip(
        run.predict(fresh), 1e-12, 1)))
    # Another file in its place is refused, naming it.
    copy = tmp_path / "t2t"
    shutil.copytree(runs["t2t"], copy)
    meta, splits = rundir.RunDir(str(copy)).read_training_release()
    os.remove(copy / rundir.RUN_RECORD)
    rundir.RunDir(str(copy)).write_training_release(
        {k: v for k, v in meta.items() if k not in ("format", "splits")},
        splits)  # the same content, drawn as another run
    shutil.copy(os.path.join(runs["t2t"], rundir.RUN_RECORD), copy)
    with pytest.raises(RunError, match=re.escape(
            str(copy / rundir.TRAINING_RELEASE)) + " has SHA-256"):
        TrainedRun(str(copy)).trained_release()


def test_inversion_exact_on_a_toy_table():
    table = np.eye(4, dtype=np.float32) * 10
    vectors = table[[2, 3, 1]] + 0.1
    assert inversion.nearest_tokens(vectors, table).tolist() == [2, 3, 1]
    released = np.stack([table[[0, 1, 2]], table[[3, 3, 3]]])
    ids = np.array([[0, 1, 2], [3, 2, 1]])
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    # Special id 0 is not counted; of 1, 2 | 3, 2: three of four recovered.
    result = inversion.inversion_accuracy(released, ids, mask, table,
                                          special_token_ids=[0])
    assert result == {"accuracy": 0.75, "n_tokens": 4}
    sample = inversion.regular_token_sample(ids, mask, [0], 10)
    assert sample.tolist() == [1, 2, 3]


def test_bad_input_is_refused_before_work(runs, tmp_path):
    with pytest.raises(data.DataError, match="salary"):
        evaluate.evaluate(runs["none"], str(tmp_path / "a"),
                          dataset=runs["corpus"],
                          private_attributes=["salary"], progress=False)
    other_vocab = tmp_path / "vocab.txt"
    other_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    with pytest.raises(RunError, match="not the model's"):
        evaluate.evaluate(runs["none"], str(tmp_path / "b"),
                          dataset=runs["corpus"],
                          vocabulary=str(other_vocab), progress=False)
    with pytest.raises(RunError, match="not a finished"):
        TrainedRun(str(tmp_path))
    with pytest.raises(ValueError, match="attackers"):
        evaluate.evaluate(runs["none"], str(tmp_path / "c"),
                          dataset=runs["corpus"], attackers=["oracle"],
                          progress=False)
    for epochs in (0, 2.5):
        with pytest.raises(ArgumentError,
                           match="`attacker_epochs` must be an integer >= 1"):
            evaluate.evaluate(runs["none"], str(tmp_path / "d"),
                              dataset=runs["corpus"], attacker_epochs=epochs,
                              progress=False)
    assert not os.path.exists(tmp_path / "a")
    assert not os.path.exists(tmp_path / "d")


def test_eval_program_usage_error(runs, tmp_path):
    # Forked from tests/zygote.py's server, which imported TensorFlow once.
    result = zygote.run(
        [sys.executable, os.path.join(ROOT, "eval", "tfdptext-eval"),
         f"--model_dir={runs['none']}", f"--output_dir={tmp_path / 'x'}",
         "--private_attributes=salary", "--attacker_epochs=3"],
        capture_output=True, text=True, cwd=ROOT)
    # (--attacker_epochs is one of its flags: an unknown one would be
    # refused first.)
    assert result.returncode != 0
    assert "salary" in result.stderr and "Traceback" not in result.stderr


def test_sweep_resumes_without_redoing_finished_cells(tmp_path):
    cells = sweep.parse_grid(["epsilon=0.1,1,5"])
    assert cells == [{"epsilon": 0.1}, {"epsilon": 1}, {"epsilon": 5}]
    calls = []

    def train_fn(cell, run_dir):
        calls.append(("train", cell["epsilon"]))
        os.makedirs(run_dir, exist_ok=True)
        open(os.path.join(run_dir, "metrics.json"), "w").write("{}")

    def eval_fn(cell, run_dir, fail_at=[1]):
        calls.append(("eval", cell["epsilon"]))
        if cell["epsilon"] in fail_at:
            fail_at.clear()
            raise KeyboardInterrupt  # killed while evaluating cell 2
        os.makedirs(os.path.join(run_dir, "eval"), exist_ok=True)
        json.dump({"utility": {"accuracy": 0.5 + cell["epsilon"] / 20,
                               "n_test": 10},
                   "attack": {"empirical_privacy": {"demographic": {
                       "strongest": 0.5 - cell["epsilon"] / 20,
                       "majority": 0.5}}}},
                  open(os.path.join(run_dir, "eval", "eval.json"), "w"))

    runner = sweep.Sweep(str(tmp_path), cells, train_fn, eval_fn)
    with pytest.raises(KeyboardInterrupt):
        runner.run(log=lambda _: None)
    assert calls == [("train", 0.1), ("eval", 0.1), ("train", 1),
                     ("eval", 1)]
    calls.clear()
    rows = runner.run(log=lambda _: None)
    # Cell 1 untouched, cell 2 evaluated only, cell 3 trained + evaluated.
    assert calls == [("eval", 1), ("train", 5), ("eval", 5)]
    assert [r["epsilon"] for r in rows] == [0.1, 1, 5]
    path = sweep.write_summary(rows, str(tmp_path), "epsilon")
    assert open(path, "rb").read(4) == b"\x89PNG"
    assert "privacy_demographic" in open(tmp_path / "summary.md").read()
    with pytest.raises(ValueError, match="name=v1"):
        sweep.parse_grid(["epsilon"])


def test_empirical_privacy_hand_computed():
    def summary(acc, f1, majority_class, present, n=100):
        return {"accuracy": {"mean": acc}, "positive_f1": {"mean": f1},
                "majority_accuracy": max(present, n - present) / n,
                "majority_class": majority_class, "n_test": n,
                "n_test_per_class": {"0": n - present, "1": present}}

    per = {"gender": {"mlp": summary(0.7, 0.6, 0, 40),
                      "lr": summary(0.8, 0.7, 0, 40)},
           "age": {"mlp": summary(0.6, 0.5, 1, 55),
                   "lr": summary(0.5, 0.4, 1, 55)},
           "entity_0": {"mlp": summary(0.9, 0.4, 1, 60),
                        "lr": summary(0.9, 0.2, 1, 60)},
           "entity_1": {"mlp": summary(0.9, 0.1, 0, 10),
                        "lr": summary(0.9, 0.3, 0, 10)}}
    result = evaluate.empirical_privacy(per, ["mlp", "lr"])
    demo, entity = result["demographic"], result["entity"]
    assert demo["mlp"] == pytest.approx(1 - (0.7 + 0.6) / 2)
    assert demo["strongest"] == pytest.approx(1 - (0.8 + 0.6) / 2)
    assert demo["majority"] == pytest.approx(1 - (0.6 + 0.55) / 2)
    assert entity["lr"] == pytest.approx(1 - (0.2 + 0.3) / 2)
    # Majority "present" for entity_0 (share 0.6): F1 = 1.2 / 1.6 = 0.75,
    # above both attackers (0.4, 0.2): the strongest attacker is that guess.
    assert entity["majority"] == pytest.approx(1 - (0.75 + 0.0) / 2)
    assert entity["strongest"] == pytest.approx(1 - (0.75 + 0.3) / 2)
    assert entity["below_majority"] == ["entity_0"]
    assert demo["below_majority"] == []


def test_release_batches_cut_to_longest_text_match_full_length(runs):
    """Cutting a batch to its longest text changes nothing (noise off)."""
    run = TrainedRun(runs["none"])
    texts = ["the staff was great .", "mary said the delivery was slow "
             "after school and really bad , she told us ."]
    released, features = run.releases(texts, batch_size=1)
    full = np.asarray(run.user(features, training=False)
                      ["private_representation"])
    np.testing.assert_allclose(released["private_representation"], full,
                               atol=1e-5)
