"""Evaluating a trained run: utility, attackers, fairness, token-level
privacy and membership inference, side by side with the formal guarantee.

`evaluate` is what `tfdptext-eval` runs. It writes into `output_dir`:
    eval.json        every number, with its sample size
    predictions.npz  test labels and predictions (for gap-change tests)
    *.png            plots (attackers, fairness, deniability)
    report.md        a readable report of all of it
"""

import json
import os

import numpy as np

from tfdptext import data as data_lib
from tfdptext.evaluation import attacker as attacker_lib
from tfdptext.evaluation import deniability
from tfdptext.evaluation import fairness
from tfdptext.evaluation import inversion
from tfdptext.evaluation import metrics
from tfdptext.evaluation.release import TrainedRun
from tfdptext.models import split as split_lib
from tfdptext.privacy.guarantee import Guarantee
from tfdptext.privacy import validation

EVAL = "eval.json"
PREDICTIONS = "predictions.npz"


def is_entity(attribute):
    """DPNR scores entity presence by F1, demographics by accuracy."""
    return attribute.startswith("entity")


def _mean_std(values):
    values = np.asarray(values, np.float64)
    return {"mean": float(values.mean()),
            "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
            "runs": int(len(values))}


def utility(labels, probabilities, train_labels):
    predicted = np.asarray(probabilities).argmax(axis=1)
    return {"accuracy": metrics.accuracy(labels, predicted),
            "macro_f1": metrics.macro_f1(labels, predicted),
            "majority_accuracy": metrics.majority_accuracy(train_labels,
                                                           labels),
            "n_test": int(len(labels))}


def attack(features, private, attributes, kinds, repeats, seed=0,
           progress=None):
    """Attackers per attribute and kind, repeated over seeds.

    Args:
        features: {"train", "dev", "test"} -> (n, d) released features.
        private: {"train", "dev", "test"} -> {attribute: labels}.

    Returns:
        {attribute: {kind: {"accuracy": mean/std, "roc_auc": ..., runs}}},
        plus the empirical privacy per kind and for the strongest attacker.
    """
    out = {}
    for attribute in attributes:
        out[attribute] = {}
        for kind in kinds:
            runs = []
            for r in range(repeats):
                runs.append(attacker_lib.train_attacker(
                    features["train"], private["train"][attribute],
                    features["dev"], private["dev"][attribute],
                    features["test"], private["test"][attribute],
                    kind=kind, seed=seed + r))
                if progress:
                    progress()
            summary = {key: _mean_std([run[key] for run in runs])
                       for key in ("accuracy", "macro_f1", "roc_auc",
                                   "positive_f1") if key in runs[0]}
            for key in ("majority_accuracy", "majority_class", "n_train",
                        "n_dev", "n_test", "n_test_per_class"):
                summary[key] = runs[0][key]
            summary["per_class_accuracy"] = {
                c: float(np.mean([run["per_class_accuracy"][c]
                                  for run in runs]))
                for c in runs[0]["per_class_accuracy"]}
            out[attribute][kind] = summary
    return {"per_attribute": out,
            "empirical_privacy": empirical_privacy(out, kinds)}


def empirical_privacy(per_attribute, kinds):
    """DPNR's 1 - X (mean attacker accuracy over demographic attributes)
    and 1 - F (mean F1 of entity presence), per attacker kind and for the
    strongest attacker per attribute; the majority-class value beside."""
    result = {}
    groups = {"demographic": [a for a in per_attribute if not is_entity(a)],
              "entity": [a for a in per_attribute if is_entity(a)]}
    for group, attributes in groups.items():
        if not attributes:
            continue
        key = "positive_f1" if group == "entity" else "accuracy"
        row = {}
        for kind in kinds:
            row[kind] = 1.0 - float(np.mean(
                [per_attribute[a][kind][key]["mean"] for a in attributes]))
        row["strongest"] = 1.0 - float(np.mean(
            [max(per_attribute[a][k][key]["mean"] for k in kinds)
             for a in attributes]))
        if group == "demographic":
            row["majority"] = 1.0 - float(np.mean(
                [per_attribute[a][kinds[0]]["majority_accuracy"]
                 for a in attributes]))
        else:
            row["majority"] = 1.0 - float(np.mean(
                [_majority_f1(per_attribute[a][kinds[0]])
                 for a in attributes]))
        result[group] = {"measure": f"1 - mean {key.replace('_', ' ')}",
                         "attributes": attributes, **row}
    return result


def _majority_f1(summary):
    """F1 of "present" for always predicting the train majority class:
    0 when that is "absent", 2p / (1 + p) when it is "present" (p = share
    of "present" in test)."""
    if summary["majority_class"] != 1:
        return 0.0
    share = summary["n_test_per_class"].get("1", 0) / summary["n_test"]
    return 2 * share / (1 + share)


def fairness_report(labels, predicted, private, attributes):
    return {a: {"subgroups": fairness.subgroup_accuracy(labels, predicted,
                                                        private[a]),
                "gap": fairness.accuracy_gap(labels, predicted, private[a])}
            for a in attributes}


def gap_changes(labels, predicted, private, attributes, baseline_dir):
    """Paired permutation test of each gap against another evaluation of
    the same test split (its predictions.npz)."""
    path = os.path.join(baseline_dir, PREDICTIONS)
    if not os.path.exists(path):
        raise ValueError(f"`baseline_eval`: {baseline_dir} holds no "
                         f"{PREDICTIONS}; run tfdptext-eval there first.")
    baseline = np.load(path)
    if not np.array_equal(baseline["labels"], labels):
        raise ValueError(f"`baseline_eval`: {baseline_dir} evaluated a "
                         "different test split.")
    return {a: fairness.gap_change_test(labels, baseline["predicted"],
                                        predicted, private[a])
            for a in attributes}


def token_level(run, released, features, num_tokens, num_samples, seed=0):
    """Inversion accuracy, changed share and plausible deniability of a
    d_chi token-level run (Qu et al. Sec. 5.3-5.4)."""
    from tfdptext import offline

    table = run.embedding_table()
    special = run.tokenizer.special_token_ids
    ids, mask = features["token_ids"], features["padding_mask"]
    if run.split_point == split_lib.TOKEN:
        inv = inversion.inversion_accuracy(released["token_embeddings"], ids,
                                           mask, table, special)
    else:
        keep = mask > 0
        changed = deniability.changed_share(ids[keep],
                                            released["token_ids"][keep],
                                            special)
        count = int((keep & ~np.isin(ids, special)).sum())
        inv = {"accuracy": 1.0 - changed, "n_tokens": count}
    eta = run.config["eta"]
    privatizer = offline.DChiCorpusPrivatizer(table, eta, special)
    tokens = inversion.regular_token_sample(ids, mask, special, num_tokens,
                                            seed)
    n_w, s_w = deniability.plausible_deniability(privatizer, tokens,
                                                 num_samples)
    return {"eta": eta,
            "inversion_accuracy": inv["accuracy"],
            "changed_share": 1.0 - inv["accuracy"],
            "n_tokens": inv["n_tokens"],
            "deniability": {"tokens": tokens.tolist(),
                            "n_w": n_w.tolist(), "s_w": s_w.tolist(),
                            "samples_per_token": num_samples,
                            "n_w_median": float(np.median(n_w)),
                            "s_w_median": float(np.median(s_w))}}


def _log_probabilities(probabilities):
    return np.log(np.clip(probabilities, 1e-12, 1.0))


def evaluate(model_dir, output_dir, dataset=None, private_attributes=None,
             attackers=("mlp",), repeats=1, max_attack_examples=5000,
             deniability_tokens=100, deniability_samples=1000,
             membership=False, baseline_eval=None, vocabulary=None,
             seed=0, progress=True, plots=True):
    """Evaluates the run in `model_dir`; returns and writes eval.json."""
    validation.check_int("repeats", repeats, 1)
    validation.check_int("max_attack_examples", max_attack_examples, 10)
    validation.check_int("deniability_tokens", deniability_tokens, 1)
    validation.check_int("deniability_samples", deniability_samples, 1)
    for kind in attackers:
        validation.check_choice("attackers", kind, attacker_lib.KINDS)
    run = TrainedRun(model_dir, vocabulary)
    if dataset is None:
        dataset = data_lib.load_dataset(run.config["dataset"],
                                        data_dir=run.config["data_dir"])
    attributes = (sorted(dataset.private_attributes)
                  if private_attributes is None else list(private_attributes))
    dataset.require_private(attributes)
    splits = {"test": dataset.splits["test"]}
    if attributes or membership:
        for name in ("train", "dev"):
            examples = dataset.splits[name]
            splits[name] = examples.subset(
                np.arange(min(len(examples), max_attack_examples)))
    released, features, feats = {}, {}, {}
    for name, examples in splits.items():
        if progress:
            print(f"Releasing the {name} split ({len(examples)} texts, "
                  "fresh noise per text)")
        released[name], features[name] = run.releases(examples.texts,
                                                      progress=progress)
        feats[name] = run.attack_features(released[name])
    test = splits["test"]
    probabilities = run.predict(released["test"])
    predicted = probabilities.argmax(axis=1)
    result = {
        "model_dir": os.path.abspath(model_dir),
        "mode": run.config["mode"], "mechanism": run.config["mechanism"],
        "parameters": run.metrics.get("parameters"),
        "split_point": run.split_point,
        "guarantee": run.guarantee,
        "guarantee_text": str(Guarantee.from_dict(run.guarantee)),
        "dataset": dataset.name,
        "sizes": {name: len(ex) for name, ex in splits.items()},
        "utility": utility(test.labels, probabilities,
                           dataset.splits["train"].labels),
    }
    if attributes:
        private = {name: ex.private for name, ex in splits.items()}
        result["attack"] = attack(feats, private, attributes,
                                  list(attackers), repeats, seed)
        result["fairness"] = fairness_report(test.labels, predicted,
                                             test.private, attributes)
        if baseline_eval:
            result["gap_change"] = gap_changes(
                test.labels, predicted, test.private, attributes,
                baseline_eval)
    if run.split_point != split_lib.SEQUENCE and \
            run.config["mechanism"] == "dchi":
        result["token_level"] = token_level(
            run, released["test"], features["test"], deniability_tokens,
            deniability_samples, seed)
    if membership:
        from tfdptext.evaluation import membership as membership_lib

        member = run.predict(released["train"])
        result["membership"] = membership_lib.membership_inference(
            _log_probabilities(member), splits["train"].labels,
            _log_probabilities(probabilities), test.labels)
    write(result, output_dir, test.labels, predicted, plots)
    return result


def write(result, output_dir, labels, predicted, plots=True):
    """eval.json, predictions.npz, plots and report.md, each atomically."""
    from tfdptext.evaluation import report

    os.makedirs(output_dir, exist_ok=True)
    tmp = os.path.join(output_dir, PREDICTIONS + ".tmp.npz")
    np.savez(tmp, labels=np.asarray(labels), predicted=predicted)
    os.replace(tmp, os.path.join(output_dir, PREDICTIONS))
    result["plots"] = report.plots(result, output_dir) if plots else []
    report.write_report(result, output_dir)
    tmp = os.path.join(output_dir, EVAL + ".tmp")
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp, os.path.join(output_dir, EVAL))
