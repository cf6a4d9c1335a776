"""Evaluation building blocks against hand-computed values."""

import json

import numpy as np
import pytest

from tfdptext import evaluation


def test_roc_auc_hand_computed_and_ties():
    assert evaluation.roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
    assert evaluation.roc_auc([0, 1, 0, 1], [0.5] * 4) == 0.5
    assert evaluation.roc_auc([0, 1], [0.2, 0.9]) == 1.0
    with pytest.raises(ValueError, match="both classes"):
        evaluation.roc_auc([1, 1], [0.2, 0.3])


def test_macro_f1_and_majority():
    # class 0: tp 1, fp 1, fn 1 -> F1 0.5; class 1: tp 1, fp 1, fn 1 -> 0.5
    assert evaluation.macro_f1([0, 0, 1, 1], [0, 1, 1, 0]) == 0.5
    assert evaluation.majority_accuracy([1, 1, 0], [1, 0, 1, 1]) == 0.75
    with pytest.raises(ValueError, match="equal length"):
        evaluation.accuracy([0, 1], [0])


def test_subgroup_accuracy_and_gap_hand_computed():
    y_true = [1, 1, 1, 1, 0, 0]
    y_pred = [1, 1, 0, 0, 0, 1]
    groups = [0, 0, 0, 1, 1, 1]
    per_group = evaluation.subgroup_accuracy(y_true, y_pred, groups)
    assert per_group == {0: {"accuracy": pytest.approx(2 / 3), "n": 3},
                         1: {"accuracy": pytest.approx(1 / 3), "n": 3}}
    assert evaluation.accuracy_gap(y_true, y_pred, groups) == \
        pytest.approx(1 / 3)


def test_gap_change_test_detects_real_change_only():
    rng = np.random.default_rng(0)
    n = 2000
    y = rng.integers(0, 2, n)
    groups = rng.integers(0, 2, n)
    fair = np.where(rng.random(n) < 0.8, y, 1 - y)
    same = evaluation.gap_change_test(y, fair, fair, groups, 300)
    assert same["gap_change"] == 0 and same["p_value"] > 0.5
    unfair = fair.copy()
    hurt = (groups == 1) & (rng.random(n) < 0.3)
    unfair[hurt] = 1 - y[hurt]
    changed = evaluation.gap_change_test(y, fair, unfair, groups, 300)
    assert changed["gap_change"] > 0.15 and changed["p_value"] < 0.01


def test_plausible_deniability_exact_on_toy_mechanisms():
    identity = lambda ids: ids  # noqa: E731
    n_w, s_w = evaluation.plausible_deniability(identity, [5, 7], 1000)
    assert n_w.tolist() == [1000, 1000] and s_w.tolist() == [1, 1]

    def cycle(ids):  # the i-th sample of w becomes (w + i) mod 10
        return (ids + np.arange(ids.shape[-1])) % 10

    n_w, s_w = evaluation.plausible_deniability(cycle, [3], 1000)
    assert n_w.tolist() == [100] and s_w.tolist() == [10]
    assert evaluation.changed_share([101, 5, 6, 102], [101, 5, 9, 102],
                                    ignore_ids=[101, 102]) == 0.5


# The Keras kinds at 256 units (half and a quarter of their defaults): the
# same code paths (two layers, standardization, dropout, early stopping
# for mlp_large) for a fraction of the CPU; one unit separates the leak.
# Batches of 125 divide the train and dev splits (2000, 500): no partial
# batch, so each step function is traced once per architecture (128 gave
# the same accuracies within 0.005 and ROC-AUCs within 0.007, measured).
FAST_KERAS = {"epochs": 8, "batch_size": 125, "hidden_units": 256}


def _leaky(n, rng):
    y = rng.integers(0, 2, n)
    x = rng.normal(size=(n, 16)).astype(np.float32) * 0.3
    x[:, 0] += 2.0 * y
    return x, y


def test_attacker_learns_leak_and_fails_under_heavy_noise():
    rng = np.random.default_rng(0)
    (xa, ya), (xb, yb), (xc, yc) = (_leaky(n, rng) for n in (1000, 250, 400))
    # DPNR's kind as FAST_KERAS trains it (the model the kind tests below
    # then reuse, traced once: 125 divides the train and dev splits):
    # accuracy 0.99 and ROC-AUC 1.00 measured (10 epochs of batches of 40
    # on 600 train texts at 32 units: 0.98 and 1.00). Under the noise
    # below: accuracy 0.48 against a majority of 0.475, ROC-AUC 0.47.
    clean = evaluation.train_attacker(xa, ya, xb, yb, xc, yc, **FAST_KERAS)
    assert clean["accuracy"] > 0.95 and clean["roc_auc"] > 0.97
    assert clean["n_test"] == 400

    def noisy(x):
        return x + rng.laplace(scale=50.0, size=x.shape).astype(np.float32)

    heavy = evaluation.train_attacker(noisy(xa), ya, noisy(xb), yb,
                                      noisy(xc), yc, **FAST_KERAS)
    assert abs(heavy["accuracy"] - heavy["majority_accuracy"]) < 0.1
    assert heavy["roc_auc"] < 0.65


# Stronger attackers: every kind must find a leak and find nothing where
# there is none.

def _attribute_splits(leak, seed, sizes=(2000, 500, 2000), positive=0.35):
    rng = np.random.default_rng(seed)
    splits = []
    for n in sizes:
        y = (rng.random(n) < positive).astype(np.int32)
        x = rng.normal(size=(n, 16)).astype(np.float32)
        if leak:
            x[:, 3] = 3.0 * y + 0.5 * rng.normal(size=n)
        splits += [x, y]
    return splits


@pytest.fixture
def one_openmp_thread():
    """scikit-learn's gradient boosting on one OpenMP thread: the same
    trees (its histograms and gradients do not depend on the thread
    count), without the spin-waiting of its two threads on a shared, loaded
    2-core machine (measured: 34 CPU-s against 1.2 for one fit here)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="openmp"):
        yield


@pytest.mark.parametrize("kind", evaluation.ATTACKER_KINDS)
def test_every_attacker_kind_learns_a_leaky_attribute(kind,
                                                      one_openmp_thread):
    result = evaluation.train_attacker(*_attribute_splits(True, 0),
                                       kind=kind, **FAST_KERAS)
    assert result["kind"] == kind
    assert result["accuracy"] > 0.9 and result["roc_auc"] > 0.95
    assert (result["n_train"], result["n_dev"], result["n_test"]) == \
        (2000, 500, 2000)


@pytest.mark.parametrize("kind", evaluation.ATTACKER_KINDS)
def test_every_attacker_kind_stays_at_majority_without_leak(
        kind, one_openmp_thread):
    result = evaluation.train_attacker(*_attribute_splits(False, 1),
                                       kind=kind, **FAST_KERAS)
    assert result["majority_accuracy"] > 0.6
    assert abs(result["accuracy"] - result["majority_accuracy"]) < 0.05
    assert abs(result["roc_auc"] - 0.5) < 0.05


def test_attacker_logits_are_keras_predict_bit_for_bit():
    """The attackers' eager prediction (no traced predict function) gives
    what `model.predict` gives, bit for bit, over more than one batch."""
    import keras

    from tfdptext.evaluation import attacker_models

    x = np.random.default_rng(3).normal(size=(1100, 6)).astype(np.float32)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Normalization(
        mean=0.5, variance=2.0), keras.layers.Dense(9, activation="relu"),
        keras.layers.Dropout(0.3), keras.layers.Dense(3)])
    np.testing.assert_array_equal(
        attacker_models._eager_logits(model, x),
        model.predict(x, verbose=0, batch_size=1024))


def test_attacker_reusing_a_compiled_model_trains_as_a_fresh_one():
    """A Keras attacker fitted on a cached compiled model (weights,
    dropout seed state and optimizer put back) gives the fresh model's
    probabilities bit for bit, after a fit of the same architecture on
    other data (other standardization statistics) compiled and traced
    it."""
    from tfdptext.evaluation import attacker_models

    rng = np.random.default_rng(4)
    (xa, ya), (xb, yb), (xc, _) = (_leaky(n, rng) for n in (60, 20, 20))
    # Batches of 20 divide both splits: each step function is traced once.
    kwargs = dict(hidden=(8, 8), dropout=0.3, standardize=True, epochs=3,
                  batch_size=20)
    attacker_models._COMPILED.clear()
    attacker_models.fit_keras_mlp(xb, yb, xa, ya, xc, 2, seed=6, **kwargs)
    (model, _), = attacker_models._COMPILED.values()
    reused = attacker_models.fit_keras_mlp(xa, ya, xb, yb, xc, 2, seed=5,
                                           **kwargs)
    (same, _), = attacker_models._COMPILED.values()
    assert same is model
    attacker_models._COMPILED.clear()
    fresh = attacker_models.fit_keras_mlp(xa, ya, xb, yb, xc, 2, seed=5,
                                          **kwargs)
    np.testing.assert_array_equal(reused, fresh)


def test_attacker_fit_loop_is_keras_fit_bit_for_bit(monkeypatch):
    """The attackers' training loop (no tf.data) trains as Keras' `fit`
    does, bit for bit: the same shuffled order, partial batches of both
    splits, dropout, and the same early stop and
    restored best weights."""
    import keras

    from tfdptext.evaluation import attacker_models

    stops = []
    record = keras.callbacks.EarlyStopping.on_train_end

    def on_train_end(self, logs=None):
        stops.append((self.stopped_epoch, self.best_epoch))
        return record(self, logs)

    def keras_fit(model, x_train, y_train, x_dev, y_dev, epochs,
                  batch_size, early_stopping):
        model.fit(x_train, y_train, validation_data=(x_dev, y_dev),
                  epochs=epochs, batch_size=batch_size, verbose=0,
                  callbacks=[early_stopping])

    monkeypatch.setattr(keras.callbacks.EarlyStopping, "on_train_end",
                        on_train_end)
    rng = np.random.default_rng(8)
    # No leak: the dev loss is lowest after epoch 4 of 20, the fit stops
    # after epoch 6. Batches of
    # 16 leave partial ones in both splits (50 = 3 * 16 + 2, 30 = 16 + 14).
    # The architecture of the tests above (its compiled model reused).
    splits = []
    for n in (50, 30, 10):
        splits += [rng.normal(size=(n, 16)).astype(np.float32) * 0.3,
                   rng.integers(0, 2, n)]
    splits = (*splits[:5], 2)
    kwargs = dict(hidden=(8, 8), dropout=0.3, standardize=True, epochs=20,
                  batch_size=16, patience=2, seed=2)
    ours = attacker_models.fit_keras_mlp(*splits, **kwargs)
    monkeypatch.setattr(attacker_models, "_fit", keras_fit)
    theirs = attacker_models.fit_keras_mlp(*splits, **kwargs)
    np.testing.assert_array_equal(ours, theirs)
    # Stopped early, after its best epoch (whose weights both restored).
    assert (5, 3) == stops[0] == stops[1]
    # The shuffle is one seeded permutation, another for another seed.
    from tfdptext import seeding

    orders = []
    for seed in (2, 2, 3):
        with seeding.scoped_seed(seed):
            orders.append(attacker_models._fit_order(50))
    assert sorted(orders[0]) == list(range(50))
    assert (orders[0] == orders[1]).all() and (orders[0] != orders[2]).any()
    assert (orders[0] != np.arange(50)).any()


def test_attacker_rejects_unknown_kind_and_bad_input():
    splits = _attribute_splits(True, 0, sizes=(20, 10, 10))
    with pytest.raises(ValueError, match="`kind` must be one of.*mlp_large"):
        evaluation.train_attacker(*splits, kind="svm")
    splits[1] = splits[1][:-1]
    with pytest.raises(ValueError, match="`x_train` and `y_train`"):
        evaluation.train_attacker(*splits, kind="logistic_regression")


# Membership inference on the server classifier.

def _classifier_outputs(n, classes, rng, margin):
    labels = rng.integers(0, classes, n)
    logits = rng.normal(size=(n, classes))
    logits[np.arange(n), labels] += margin
    return logits, labels


def test_membership_inference_detects_an_overfit_classifier():
    rng = np.random.default_rng(0)
    # Members: confident and correct; non-members: close to uniform.
    members = _classifier_outputs(1000, 4, rng, margin=5.0)
    others = _classifier_outputs(1000, 4, rng, margin=0.5)
    result = evaluation.membership_inference(*members, *others)
    assert set(result["attacks"]) == {"threshold", "logistic_regression"}
    for attack in result["attacks"].values():
        assert attack["auc"] > 0.8 and attack["attacker_advantage"] > 0.5
    assert result["max_auc"] == max(a["auc"]
                                    for a in result["attacks"].values())
    assert result["best_attack"] in result["attacks"]
    assert (result["n_train"], result["n_test"]) == (1000, 1000)
    json.dumps(result)  # plain types only


def test_membership_inference_finds_nothing_without_overfitting():
    rng = np.random.default_rng(1)
    members = _classifier_outputs(3000, 4, rng, margin=1.0)
    others = _classifier_outputs(3000, 4, rng, margin=1.0)
    result = evaluation.membership_inference(*members, *others)
    for attack in result["attacks"].values():
        assert abs(attack["auc"] - 0.5) < 0.05
    assert result["max_attacker_advantage"] < 0.1
    assert result["attacks"]["threshold"]["n_train"] == 3000


def test_membership_inference_rejects_bad_input():
    rng = np.random.default_rng(2)
    logits, labels = _classifier_outputs(50, 3, rng, margin=1.0)
    mia = evaluation.membership_inference
    with pytest.raises(ValueError, match="`logits_train` must be 2-D"):
        mia(logits[:, 0], labels, logits, labels)
    with pytest.raises(ValueError, match="`labels_test` must be 1-D"):
        mia(logits, labels, logits, labels[:-1])
    nan = logits.copy()
    nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="`logits_test` contains NaN"):
        mia(logits, labels, nan, labels)
    with pytest.raises(ValueError, match="`logits_test` has 2 classes"):
        mia(logits, labels, logits[:, :2], np.minimum(labels, 1))
    with pytest.raises(ValueError, match="`labels_train` must lie in"):
        mia(logits, labels + 1, logits, labels)
    with pytest.raises(ValueError, match="`attacks` must be.*threshold"):
        mia(logits, labels, logits, labels, attacks=("random_forest",))


def test_attacker_leaves_no_global_seed_for_later_noise():
    """A seeded attacker must not seed noise ops traced after it: the
    conversion of a noise layer afterwards stays unseeded."""
    import keras
    import tensorflow as tf

    from tfdptext import export
    from tfdptext import layers

    rng = np.random.default_rng(1)
    (xa, ya), (xb, yb), (xc, yc) = (_leaky(n, rng) for n in (60, 20, 20))
    before = np.random.get_state()[1].copy()
    # The architecture and batches of the attacker the test above fitted
    # (traced once: its compiled model is reused).
    evaluation.train_attacker(xa, ya, xb, yb, xc, yc, kind="mlp_large",
                              hidden_units=8, epochs=2, batch_size=20,
                              seed=3)
    assert tf.compat.v1.get_seed(None) == (None, None)
    np.testing.assert_array_equal(np.random.get_state()[1], before)
    x = keras.Input((4,), name="x")
    model = keras.Model(x, layers.LaplaceNoise(1.0)(x))
    export.check_unseeded_builtins(export.convert(model))
