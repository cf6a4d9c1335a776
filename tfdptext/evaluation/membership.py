"""Membership inference against the server classifier (as in BRR's evaluation).

Given the classifier's logits and true labels on its training examples
(members) and on held-out examples (non-members), tensorflow-privacy's
attack library tries to tell members from non-members. An AUC near 0.5 and
an attacker advantage (max |TPR - FPR| over thresholds) near 0 mean the
classifier leaks little about who was in its training set.
"""

import sys
import warnings

import numpy as np

# Our attack names -> tensorflow-privacy AttackType member names. The random
# forest attack of tensorflow-privacy 0.7.3 is left out: its grid uses
# max_features="auto", which current scikit-learn rejects.
ATTACKS = {
    "threshold": "THRESHOLD_ATTACK",
    "threshold_entropy": "THRESHOLD_ENTROPY_ATTACK",
    "logistic_regression": "LOGISTIC_REGRESSION",
    "mlp": "MULTI_LAYERED_PERCEPTRON",
    "knn": "K_NEAREST_NEIGHBORS",
}
MIN_EXAMPLES = 10


def _mia_library():
    """Imports tensorflow-privacy's attack code without its package init.

    `import tensorflow_privacy` fails on TF 2.21 (it imports
    tensorflow_estimator); the flag below is the package's own switch to
    skip those imports, and must be set before the first import.
    """
    sys.skip_tf_privacy_import = True
    from tensorflow_privacy.privacy.privacy_tests.membership_inference_attack import (  # noqa: E501
        data_structures)
    from tensorflow_privacy.privacy.privacy_tests.membership_inference_attack import (  # noqa: E501
        membership_inference_attack)
    return membership_inference_attack, data_structures


def _check_logits(logits, name):
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(f"`{name}` must be 2-D (examples, classes) with at "
                         f"least 2 classes, got shape {logits.shape}.")
    if logits.shape[0] < MIN_EXAMPLES:
        raise ValueError(f"`{name}` needs at least {MIN_EXAMPLES} examples, "
                         f"got {logits.shape[0]}.")
    if not np.isfinite(logits).all():
        raise ValueError(f"`{name}` contains NaN or infinite values.")
    return logits


def _check_labels(labels, name, logits, logits_name):
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != len(logits):
        raise ValueError(f"`{name}` must be 1-D with one label per row of "
                         f"`{logits_name}` ({len(logits)}), got shape "
                         f"{labels.shape}.")
    if not np.issubdtype(labels.dtype, np.integer):
        if (not np.issubdtype(labels.dtype, np.number)
                or not np.isfinite(labels).all()
                or (labels != np.round(labels)).any()):
            raise ValueError(f"`{name}` must hold integer class ids (no NaN).")
    labels = labels.astype(np.int64)
    if labels.min() < 0 or labels.max() >= logits.shape[1]:
        raise ValueError(f"`{name}` must lie in [0, {logits.shape[1]}), the "
                         f"classes of `{logits_name}`; got values in "
                         f"[{labels.min()}, {labels.max()}].")
    return labels


def membership_inference(logits_train, labels_train, logits_test, labels_test,
                         attacks=("threshold", "logistic_regression"), seed=0):
    """Runs membership inference attacks on a classifier's outputs.

    Args:
        logits_train, labels_train: logits (n, classes) and true labels (n,)
            of the classifier's training examples (the members).
        logits_test, labels_test: the same for held-out examples.
        attacks: names from ATTACKS. "threshold" thresholds the per-example
            loss; the trained attacks (logistic_regression, mlp, knn) learn
            from logits + loss on a class-balanced 75% split and are scored
            on the other 25%.
        seed: seeds the random splits of the trained attacks (numpy's
            global generator is restored afterwards).

    Returns:
        A JSON-able dict: "attacks" maps each attack to its "auc",
        "attacker_advantage", "n_train" and "n_test" (members and
        non-members it used); "max_auc", "max_attacker_advantage" and
        "best_attack" (the attack with the max AUC) summarize the worst
        case; "n_train", "n_test" are the input sizes.
    """
    if isinstance(attacks, str):
        attacks = (attacks,)
    attacks = tuple(dict.fromkeys(attacks))  # unique, in order
    unknown = [a for a in attacks if a not in ATTACKS]
    if not attacks or unknown:
        raise ValueError(f"`attacks` must be a non-empty subset of "
                         f"{sorted(ATTACKS)}, got {list(attacks)}.")
    logits_train = _check_logits(logits_train, "logits_train")
    logits_test = _check_logits(logits_test, "logits_test")
    if logits_test.shape[1] != logits_train.shape[1]:
        raise ValueError(
            f"`logits_test` has {logits_test.shape[1]} classes but "
            f"`logits_train` has {logits_train.shape[1]}.")
    labels_train = _check_labels(labels_train, "labels_train", logits_train,
                                 "logits_train")
    labels_test = _check_labels(labels_test, "labels_test", logits_test,
                                "logits_test")

    mia, data_structures = _mia_library()
    attack_input = data_structures.AttackInputData(
        logits_train=logits_train, logits_test=logits_test,
        labels_train=labels_train, labels_test=labels_test)
    attack_types = [getattr(data_structures.AttackType, ATTACKS[a])
                    for a in attacks]
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            # The attack library's MLP grid does not always converge.
            warnings.filterwarnings("ignore", message=".*converge.*")
            results = mia.run_attacks(attack_input, attack_types=attack_types)
    finally:
        np.random.set_state(state)

    names = {type_name: name for name, type_name in ATTACKS.items()}
    per_attack = {}
    for result in results.single_attack_results:
        per_attack[names[result.attack_type.name]] = {
            "auc": float(result.get_auc()),
            "attacker_advantage": float(result.get_attacker_advantage()),
            "n_train": int(result.data_size.ntrain),
            "n_test": int(result.data_size.ntest),
        }
    best = max(per_attack, key=lambda a: per_attack[a]["auc"])
    return {
        "attacks": per_attack,
        "max_auc": per_attack[best]["auc"],
        "max_attacker_advantage": max(
            r["attacker_advantage"] for r in per_attack.values()),
        "best_attack": best,
        "n_train": int(len(labels_train)),
        "n_test": int(len(labels_test)),
    }
