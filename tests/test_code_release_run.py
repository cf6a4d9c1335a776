"""The code release end to end (train, export, phone model, server,
evaluation with the limit, programs) and label privacy runs, on the tiny
backbone and the synthetic corpus."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from scipy import stats

from tfdptext import data
from tfdptext import rundir
from tfdptext import training
from tfdptext.errors import ArgumentError
from tfdptext.evaluation import evaluate as evaluation
from tfdptext.evaluation.release import TrainedRun
from tfdptext.export import exporter
from tfdptext.export.local import ExportedPipeline
from tfdptext.models import secure
from tfdptext.privacy import categorical
from tfdptext.training import label_privacy

import eager_training


def _config(preset, **kwargs):
    defaults = dict(preset=preset, max_length=16, batch_size=32, epochs=2,
                    learning_rate=3e-3)
    defaults.update(kwargs)
    return training.TrainConfig(**defaults)


@pytest.fixture(scope="module")
def corpus():
    return data.load_synthetic(num_examples=320)


@pytest.fixture(scope="module")
def runs_corpus():
    """The runs' corpus: 100 test texts for the comparison of accuracies."""
    return data.load_synthetic(num_examples=1000)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_preset, runs_corpus):
    """A non-private run trained to convergence (the reference of the
    accuracy comparison and of the limit; 4 epochs: its dev loss is at
    0.001 from the third and its test accuracy 1.0, as with 6, measured)
    and a code run (m = 2K = 4, eps 1 per text; 1 epoch on the first 64
    train texts: nothing asserted needs it to learn; it is tested on the
    same 100 texts)."""
    base = tmp_path_factory.mktemp("code")
    out = {"base": base}
    out["none"] = str(base / "none")
    training.train(_config(tiny_preset, mode="none", epochs=4), out["none"],
                   dataset=runs_corpus, verbose=0)
    out["code"] = str(base / "code")
    # Two steps: eagerly (tests/eager_training.py); the code release's
    # traced training is test_a_code_without_noise_trains_as_well_as_mode_
    # none's.
    with eager_training.eager_fit():
        training.train(_config(tiny_preset, mode="robust", release="code",
                               epsilon=1.0, num_codes=4, epochs=1,
                               max_train_examples=64), out["code"],
                       dataset=runs_corpus, verbose=0)
    return out


def test_a_code_without_noise_trains_as_well_as_mode_none(
        runs, tiny_preset, runs_corpus, tmp_path):
    # 6 epochs: with 4 its test accuracy was 1.0 in 3 runs but 0.94 in
    # one of two sessions (the tiny preset is drawn afresh per session;
    # dev accuracy 0.56, 0.87, 1.0, 1.0 in a good one), so the last two
    # epochs are the margin.
    metrics = training.train(
        _config(tiny_preset, mode="none", release="code", epochs=6),
        str(tmp_path / "code"), dataset=runs_corpus, verbose=0)
    accuracy = {"code": metrics["test_accuracy"], "none": json.load(open(
        os.path.join(runs["none"], rundir.METRICS)))["test_accuracy"]}
    # The reference has converged (its 4 epochs reach what 6 did), so the
    # code's run is compared with mode none at its best.
    assert accuracy["none"] >= 0.99, accuracy
    assert accuracy["code"] >= accuracy["none"] - 0.01, accuracy


def test_code_run_records_its_guarantee_and_limit(runs):
    metrics = json.load(open(os.path.join(runs["code"], rundir.METRICS)))
    split = json.load(open(os.path.join(runs["code"], rundir.SPLIT)))
    assert split["split_point"] == "code"
    assert metrics["guarantee"]["unit"] == "per_text"
    assert metrics["guarantee"]["mechanism"] == "code_randomized_response"
    assert metrics["parameters"]["num_codes"] == 4
    assert metrics["limit"]["applies"]
    assert metrics["limit"]["epsilon_per_text"] == pytest.approx(1.0,
                                                                 abs=1e-5)
    assert metrics["limit"]["share_of_limit"] == pytest.approx(
        metrics["test_accuracy"] / metrics["limit"]["limit"])


@pytest.fixture(scope="module")
def code_export(runs):
    out = str(runs["base"] / "exp_code")
    # float32: the release of a code is the test's, not int8 weights.
    manifest = exporter.export_run(runs["code"], out, lengths=[16],
                                   quantization="float32")
    return out, manifest


FEED = {"token_ids": np.array([[101, 2307, 2326, 102] + [0] * 12], np.int32),
        "padding_mask": np.array([[1] * 4 + [0] * 12], np.int32)}


def test_phone_model_releases_codes_by_randomized_response(code_export):
    out, manifest = code_export
    assert manifest["split_point"] == "code"
    assert manifest["guarantee"]["unit"] == "per_text"
    assert manifest["guarantee"]["randomness"] == "app_secure_rng"
    assert manifest["user"]["outputs"]["private_code"] == [1, "int32"]
    assert not {"RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"} & set(
        manifest["user"]["tflite_ops"])
    runner = Interpreter(model_path=os.path.join(
        out, rundir.PHONE_MODEL)).get_signature_runner()
    words = manifest["user"]["randomness"]["words"]
    released = np.array([int(runner(**FEED, random_words=secure.os_random_words(
        (1, words)))["private_code"][0]) for _ in range(4000)])
    counts = np.bincount(released, minlength=4)
    clean = int(counts.argmax())  # the text's code (kept with p ~ 0.48)
    row = categorical.transition_matrix(1.0, 4)[clean]
    expected = counts.sum() * row
    assert stats.chisquare(counts, expected).pvalue > 1e-4
    # Bad words fail closed: the code is -1 and the server refuses it.
    bad = runner(**FEED, random_words=np.zeros((1, words), np.int32))
    assert int(bad["private_code"][0]) == -1
    pipeline = ExportedPipeline(out)
    for code in (-1, 4):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="refused release"):
            pipeline.serve({"private_code": np.array([code], np.int32)})
    answer = pipeline.serve({"private_code": np.arange(4, dtype=np.int32)})
    assert set(answer["label_name"]) <= {"negative", "positive"}


def test_evaluation_reports_the_limit_from_the_reference(
        runs, runs_corpus, tmp_path):
    # One attribute, 200 train texts and logistic regression: the attack
    # on the one-hot code for a fraction of the CPU of DPNR's MLP on all.
    result = evaluation.evaluate(runs["code"], str(tmp_path / "eval"),
                                 dataset=runs_corpus,
                                 reference_run=runs["none"],
                                 private_attributes=["gender"],
                                 attackers=["logistic_regression"],
                                 max_attack_examples=200,
                                 progress=False, plots=False)
    limit = result["utility"]["limit"]
    reference = json.load(open(os.path.join(runs["none"], rundir.METRICS)))
    assert limit["applies"] and limit["reference_given"]
    assert limit["reference_accuracy"] == reference["test_accuracy"]
    assert limit["share_of_limit"] == pytest.approx(
        result["utility"]["accuracy"] / limit["limit"])
    # The attackers read the one-hot code.
    assert "empirical_privacy" in result["attack"]
    attacker = result["attack"]["per_attribute"]["gender"][
        "logistic_regression"]
    assert (attacker["n_train"], attacker["n_test"]) == (200, 100)
    report = open(tmp_path / "eval" / rundir.EVAL_REPORT).read()
    assert "Limit at" in report
    with pytest.raises(evaluation.EvaluationError, match="private run"):
        evaluation.evaluate(runs["none"], str(tmp_path / "eval2"),
                            dataset=runs_corpus, reference_run=runs["code"],
                            progress=False, plots=False)
    # Another test split than the reference's (the run's own data set,
    # 200 test texts) is refused before any text is released.
    def no_release(*args, **kwargs):
        raise AssertionError("released texts before checking the reference")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TrainedRun, "releases", no_release)
        with pytest.raises(evaluation.EvaluationError, match="test split"):
            evaluation.evaluate(runs["code"], str(tmp_path / "eval3"),
                                reference_run=runs["none"], progress=False,
                                plots=False)
    assert not os.path.exists(tmp_path / "eval3")


@pytest.mark.parametrize("kwargs,message", [
    (dict(mode="token_rep", release="code", eta=10.0), "release=code"),
    (dict(mode="robust", release="code"), "epsilon"),
    (dict(mode="robust", release="code", epsilon=1.0, num_codes=1),
     "num_codes"),
    (dict(mode="robust", release="code", epsilon=1.0, num_codes=70000),
     "num_codes"),
    (dict(mode="robust", release="code", epsilon=1.0, num_codes="three"),
     "auto"),
    (dict(mode="robust", release="code", epsilon=1.0, private_dim=8),
     "private_dim"),
    (dict(mode="robust", release="code", epsilon=float("inf")), "epsilon"),
    (dict(mode="robust", epsilon=1.0, num_codes=4), "num_codes"),
    (dict(mode="robust", mechanism="rr", epsilon=1.0), "release=code"),
    (dict(mode="robust", epsilon=1.0, label_epsilon=1.0), "label_epsilon"),
    (dict(mode="text_to_text", eta=10.0, label_epsilon=0.0),
     "label_epsilon"),
])
def test_bad_code_and_label_configs_fail_before_training(kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        training.TrainConfig(**kwargs).validate()


def test_fewer_codes_than_classes_from_the_prior(tiny_preset, corpus,
                                                 tmp_path):
    """--num_codes=auto on three classes of which one never occurs: two
    codes, read off the best channel for the training prior; the phone
    releases codes 0 and 1 only, and the run records the plan."""
    import dataclasses

    three = dataclasses.replace(corpus, num_classes=3,
                                label_names=["a", "b", "c"])
    out = str(tmp_path / "auto")
    # The plan reads the prior of the 64 training texts used (class c
    # never occurs in any); two steps, eagerly.
    with eager_training.eager_fit():
        metrics = training.train(
            _config(tiny_preset, mode="robust", release="code",
                    epsilon=1.0, num_codes="auto", epochs=1,
                    max_train_examples=64), out, dataset=three, verbose=0)
    plan = metrics["parameters"]["code_plan"]
    assert metrics["parameters"]["num_codes"] == plan["num_codes"] == 2
    assert plan["requested"] == "auto" and plan["source"] == "program"
    assert plan["perfect_head_accuracy"] == pytest.approx(plan["bound"],
                                                          abs=1e-6)
    assert metrics["guarantee"]["details"]["num_values"] == 2
    import keras

    from tfdptext import models

    user = keras.models.load_model(rundir.RunDir(out).file(rundir.USER))
    tokens = models.load_tokenizer(tiny_preset, 16)(
        list(three.splits["test"].texts[:64]))
    codes = np.asarray(user(tokens)["private_code"])
    assert set(codes.tolist()) <= {0, 1}


def test_label_privacy_run_draws_labels_once(tiny_preset, corpus, tmp_path):
    out = str(tmp_path / "labels")
    # Labels are drawn for the whole train and dev splits whatever the
    # texts trained on (64: two steps, eagerly; 32 dev texts released).
    config = _config(tiny_preset, mode="text_to_text", eta=1000.0,
                     label_epsilon=1.0, epochs=1, max_train_examples=64,
                     max_dev_examples=32)
    with eager_training.eager_fit():
        metrics = training.train(config, out, dataset=corpus, verbose=0)
    privacy = metrics["label_privacy"]
    assert privacy["label_epsilon"] == 1.0
    changed = privacy["changed_share"]["train"]
    n = len(corpus.splits["train"])
    assert abs(changed - privacy["expected_changed_share"]) < 4 * np.sqrt(
        0.25 / n)
    # d_chi is metric DP per token: the label's epsilon is composed in
    # words, the text's guarantee kept.
    assert "training label" in privacy["example_guarantee"]["composition"]
    run = rundir.RunDir(out)
    first = run.read(rundir.RANDOMIZED_LABELS, required=("train",))
    again = label_privacy.randomized_labels(run, config, corpus, ValueError)
    np.testing.assert_array_equal(again["train"], first["train"])
    other = _config(tiny_preset, mode="text_to_text", eta=1000.0,
                    label_epsilon=2.0)
    with pytest.raises(ValueError, match="never drawn again"):
        label_privacy.randomized_labels(run, other, corpus, ValueError)
