"""Evaluating a trained run: utility, attackers, fairness, token-level
privacy and membership inference, side by side with the formal guarantee.

`evaluate` is what `tfdptext-eval` runs. It writes into `output_dir`
(atomically: into a hidden `.<name>.partial-<pid>` sibling, moved into
place when complete; see `evaluate`):
    rundir.EVAL_RESULT       every number, with its sample size
    rundir.EVAL_PREDICTIONS  test labels and predictions (gap-change tests)
    *.png                    plots (attackers, fairness, deniability)
    rundir.EVAL_REPORT       a readable report of all of it
"""

import json
import os

import numpy as np

from tfdptext import data as data_lib
from tfdptext import mechanisms
from tfdptext import metrics
from tfdptext import rundir
from tfdptext import runfiles
from tfdptext.errors import TfdptextError
from tfdptext.evaluation import attacker as attacker_lib
from tfdptext.evaluation import deniability
from tfdptext.evaluation import fairness
from tfdptext.evaluation import inversion
from tfdptext.evaluation.release import TrainedRun
from tfdptext.privacy.guarantee import Guarantee
from tfdptext.privacy import validation

EVAL = rundir.EVAL_RESULT
REPORT = rundir.EVAL_REPORT
PREDICTIONS = rundir.EVAL_PREDICTIONS
ATTACKER_EPOCHS = attacker_lib.EPOCHS


class EvaluationError(TfdptextError):
    """The evaluation cannot be done as asked (output directory, baseline,
    data set that does not fit the run)."""


def _sha256(path):
    """The file's SHA-256, or None when it is absent."""
    return runfiles.sha256_file(path) if os.path.isfile(path) else None


def evaluation_options(model_dir, dataset=None, private_attributes=None,
                       attackers=("mlp",), repeats=1,
                       max_attack_examples=5000, deniability_tokens=100,
                       deniability_samples=1000, membership=False,
                       baseline_eval=None, vocabulary=None, seed=0,
                       plots=True, reference_run=None,
                       attacker_epochs=ATTACKER_EPOCHS):
    """What identifies an evaluation (stored in eval.json as "options"):
    the run (its directory and metrics.json's SHA-256), the data set and
    every argument that changes the numbers. `attacker_epochs` is stored
    only when it is not the default, so that a finished evaluation with
    the default keeps the options it was written with."""
    options = {
        "model_dir": os.path.abspath(model_dir),
        "run_metrics_sha256": _sha256(
            rundir.RunDir(model_dir).file(rundir.METRICS)),
        "dataset": None if dataset is None else {
            "name": dataset.name,
            "sizes": {k: len(v) for k, v in dataset.splits.items()}},
        "private_attributes": (None if private_attributes is None
                               else list(private_attributes)),
        "attackers": list(attackers), "repeats": repeats,
        "max_attack_examples": max_attack_examples,
        "deniability_tokens": deniability_tokens,
        "deniability_samples": deniability_samples,
        "membership": bool(membership),
        "baseline_eval": (None if not baseline_eval
                          else os.path.abspath(baseline_eval)),
        "vocabulary": (vocabulary if vocabulary is None
                       or isinstance(vocabulary, str) else "<list>"),
        "seed": seed, "plots": bool(plots),
        "reference_run": (None if not reference_run
                          else os.path.abspath(reference_run)),
        "reference_run_metrics_sha256": (None if not reference_run else _sha256(
            rundir.RunDir(reference_run).file(rundir.METRICS))),
    }
    if attacker_epochs != ATTACKER_EPOCHS:
        options["attacker_epochs"] = attacker_epochs
    return json.loads(json.dumps(options))


def check_output_dir(output_dir, options, overwrite=False):
    """Checks where an evaluation goes, before any work; writes nothing.

    Returns the stored result when `output_dir` already holds a finished
    evaluation (eval.json) with the same `options` and `overwrite` is
    False (nothing to do), else None (absent or empty directory, or a
    finished evaluation to replace with `overwrite`). Raises
    EvaluationError when `output_dir` is a file, holds a finished
    evaluation with other options (and not `overwrite`), or holds files
    but no eval.json (not an evaluation, or one written by an old version
    and interrupted).
    """
    runfiles.check_output_path(output_dir, error=EvaluationError)
    if not os.path.isdir(output_dir) or not os.listdir(output_dir):
        return None
    path = os.path.join(output_dir, EVAL)
    if not os.path.exists(path):
        raise EvaluationError(
            f"`output_dir` {output_dir} is not empty and holds no {EVAL} "
            "(not a finished tfdptext evaluation); remove it or choose "
            "another directory.")
    if overwrite:
        return None
    stored = runfiles.read_json(path, EvaluationError)
    if stored.get("options") == options:
        return stored
    previous = stored.get("options") or {}
    changed = sorted(k for k in options if previous.get(k) != options[k])
    if not previous:
        changed = "unknown: written by an older version"
    raise EvaluationError(
        f"`output_dir` {output_dir} already holds a finished evaluation "
        f"with other settings (differ: {changed}); choose another "
        "directory or remove it.")


def _publish(partial, output_dir):
    """Moves the finished evaluation in `partial` to `output_dir`: one
    rename when `output_dir` is absent or empty; else (replacing an
    evaluation) eval.json is removed first and moved in last, so that
    `output_dir` never looks finished while it is not."""
    if not os.path.isdir(output_dir) or not os.listdir(output_dir):
        if os.path.isdir(output_dir):
            os.rmdir(output_dir)
        os.rename(partial, output_dir)
        return
    old = os.path.join(output_dir, EVAL)
    if os.path.exists(old):
        os.remove(old)
    for name in os.listdir(output_dir):  # the old evaluation's outputs
        if name in (PREDICTIONS, REPORT) or name.endswith(".png"):
            os.remove(os.path.join(output_dir, name))
    names = sorted(os.listdir(partial), key=lambda n: n == EVAL)
    for name in names:
        os.replace(os.path.join(partial, name), os.path.join(output_dir,
                                                             name))
    os.rmdir(partial)


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
           progress=None, epochs=ATTACKER_EPOCHS):
    """Attackers per attribute and kind, repeated over seeds.

    Args:
        features: {"train", "dev", "test"} -> (n, d) released features.
        private: {"train", "dev", "test"} -> {attribute: labels}.
        epochs: the most epochs of the Keras kinds (early-stopped on dev
            loss before that); the other kinds ignore it.

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
                    kind=kind, seed=seed + r, epochs=epochs))
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
    strongest attacker per attribute; the majority-class value beside.

    An attacker can always guess the train majority class, so "strongest"
    takes, per attribute, the best of the trained attackers AND that
    constant guess: an attacker that scores below it cannot make the
    release look more private than a constant guess allows. The attributes
    where every trained attacker scored below the majority guess are listed
    in "below_majority".
    """
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
        if group == "demographic":
            majority = {a: per_attribute[a][kinds[0]]["majority_accuracy"]
                        for a in attributes}
        else:
            majority = {a: _majority_f1(per_attribute[a][kinds[0]])
                        for a in attributes}
        best = {a: max(per_attribute[a][k][key]["mean"] for k in kinds)
                for a in attributes}
        row["strongest"] = 1.0 - float(np.mean(
            [max(best[a], majority[a]) for a in attributes]))
        row["majority"] = 1.0 - float(np.mean(list(majority.values())))
        row["below_majority"] = [a for a in attributes
                                 if best[a] < majority[a]]
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


def check_baseline(baseline_dir):
    """The baseline evaluation's predictions file, or EvaluationError (so
    that a wrong --baseline_eval is refused before any work)."""
    path = os.path.join(baseline_dir, PREDICTIONS)
    if not os.path.isfile(path):
        raise EvaluationError(
            f"`baseline_eval`: {baseline_dir} holds no {PREDICTIONS}; give "
            "a finished tfdptext-eval output directory.")
    return path


def check_classes(run, dataset):
    """EvaluationError unless the data set's classes are the run's: a
    2-class model scored on a 4-class data set gives an accuracy that
    means nothing."""
    predicted = int(run.server.output.shape[-1])
    if dataset.num_classes != predicted:
        raise EvaluationError(
            f"The run {run.model_dir} predicts {predicted} classes, but data "
            f"set {dataset.name!r} has {dataset.num_classes}: evaluate it on "
            "the data it was trained for (or one with the same labels).")


def check_reference_run(reference_run, dataset_name=None, n_test=None):
    """The test accuracy of a finished NON-private run (the reference the
    limit is computed from), or EvaluationError naming what is wrong."""
    run = rundir.RunDir(reference_run, EvaluationError)
    if not run.exists(rundir.METRICS):
        raise EvaluationError(
            f"`reference_run`: {reference_run} holds no {rundir.METRICS}; "
            "give a finished tfdptext-train run (mode none).")
    metrics = run.read(rundir.METRICS, required=(
        "test_accuracy", "guarantee", "dataset", "sizes"))
    if Guarantee.from_dict(metrics["guarantee"]).is_private:
        raise EvaluationError(
            f"`reference_run`: {reference_run} is a private run; the "
            "reference is the NON-private run of the same budget (mode "
            "none).")
    if dataset_name is not None and metrics["dataset"] != dataset_name:
        raise EvaluationError(
            f"`reference_run`: {reference_run} was trained on "
            f"{metrics['dataset']!r}, this evaluation is on "
            f"{dataset_name!r}.")
    if n_test is not None and metrics["sizes"].get("test") != n_test:
        raise EvaluationError(
            f"`reference_run`: {reference_run} was tested on "
            f"{metrics['sizes'].get('test')} texts, this evaluation on "
            f"{n_test}: not the same test split.")
    return float(metrics["test_accuracy"])


def reference_confusion(reference_run):
    """The reference run's test confusion matrix (metrics.json's
    `test_confusion`; None for a run trained before it was recorded)."""
    run = rundir.RunDir(reference_run, EvaluationError)
    return run.read(rundir.METRICS).get("test_confusion")


def baseline_confusion(baseline_dir, num_classes):
    """The confusion matrix of a --baseline_eval's predictions.npz (None
    when it has none)."""
    from tfdptext.privacy import limit

    path = os.path.join(baseline_dir, PREDICTIONS)
    if not os.path.isfile(path):
        return None
    stored = np.load(path)
    return limit.confusion_matrix(stored["labels"], stored["predicted"],
                                  num_classes)


def baseline_reference(baseline_dir, n_test):
    """The accuracy of a --baseline_eval that evaluated a NON-private run
    on the same test split (a reference for the limit), else None."""
    stored = runfiles.read_json(os.path.join(baseline_dir, EVAL),
                                EvaluationError,
                                required=("utility.accuracy", "guarantee"))
    if Guarantee.from_dict(stored["guarantee"]).is_private or \
            stored["utility"].get("n_test") != n_test:
        return None
    return float(stored["utility"]["accuracy"])


def limit_of(run, accuracy, dataset, reference_run=None, baseline_eval=None):
    """The randomized-response limit beside a private accuracy
    (`tfdptext.privacy.limit.limit_report`), with the test split's class
    frequencies as the prior and the reference accuracy of
    `reference_run` (a non-private run), else of `baseline_eval` when it
    evaluated a non-private run, else that of a perfect classifier."""
    from tfdptext.privacy import limit

    test, num_classes = dataset.splits["test"], dataset.num_classes
    reference, source, confusion = None, None, None
    if reference_run:
        reference = check_reference_run(reference_run, dataset.name,
                                        len(test))
        source = os.path.abspath(reference_run)
        confusion = reference_confusion(reference_run)
    elif baseline_eval:
        reference = baseline_reference(baseline_eval, len(test))
        if reference is not None:
            source = os.path.abspath(baseline_eval)
            confusion = baseline_confusion(baseline_eval, num_classes)
    prior = np.bincount(test.labels, minlength=num_classes)
    report = limit.limit_report(Guarantee.from_dict(run.guarantee),
                                accuracy, num_classes, reference, prior,
                                num_texts=len(test),
                                reference_confusion=confusion)
    report["reference_source"] = source
    return report


def gap_changes(labels, predicted, private, attributes, baseline_dir):
    """Paired permutation test of each gap against another evaluation of
    the same test split (its predictions.npz)."""
    baseline = np.load(check_baseline(baseline_dir))
    if not np.array_equal(baseline["labels"], labels):
        raise EvaluationError(f"`baseline_eval`: {baseline_dir} evaluated "
                              "a different test split.")
    return {a: fairness.gap_change_test(labels, baseline["predicted"],
                                        predicted, private[a])
            for a in attributes}


def token_recovery(spec, released, ids, mask, table, special):
    """{"accuracy", "n_tokens"}: the share of real, non-special input
    tokens an eavesdropper recovers from a token-level release. Released
    ids are read as they are (the changed share's complement); released
    embeddings are inverted by their nearest table row."""
    value = released[spec.release]
    if not spec.releases_token_ids:
        return inversion.inversion_accuracy(value, ids, mask, table, special)
    keep = mask > 0
    changed = deniability.changed_share(ids[keep], value[keep], special)
    count = int((keep & ~np.isin(ids, special)).sum())
    return {"accuracy": 1.0 - changed, "n_tokens": count}


def corpus_privatizer(run):
    """The run's token mechanism off device, to sample it many times: the
    offline twin of its text-to-text privatizer (`tfdptext.offline`, the
    same parameters and table, os.urandom); for d_chi noise on token
    embeddings (token_rep), d_chi text-to-text on the same table and eta
    (its noisy vectors' nearest tokens, Qu et al. Sec. 5.4)."""
    from tfdptext.models import secure
    from tfdptext.offline import DChiCorpusPrivatizer

    _, privatizer = secure.find_layers(run.user)
    if hasattr(privatizer, "corpus_privatizer"):
        return privatizer.corpus_privatizer()
    return DChiCorpusPrivatizer(
        run.embedding_table(), run.config["eta"],
        special_token_ids=run.tokenizer.special_token_ids)


def token_level(run, released, features, num_tokens, num_samples, seed=0):
    """Inversion accuracy, changed share and plausible deniability of a
    token-level run, d_chi or BRR (Qu et al. Sec. 5.3-5.4)."""
    table = run.embedding_table()
    special = run.tokenizer.special_token_ids
    ids, mask = features["token_ids"], features["padding_mask"]
    inv = token_recovery(run.spec, released, ids, mask, table, special)
    privatizer = corpus_privatizer(run)
    tokens = inversion.regular_token_sample(ids, mask, special, num_tokens,
                                            seed)
    n_w, s_w = deniability.plausible_deniability(privatizer, tokens,
                                                 num_samples)
    parameter = mechanisms.get(run.config["mechanism"]).parameter
    return {parameter: run.config[parameter],
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
             seed=0, progress=True, plots=True, overwrite=True,
             reference_run=None, attacker_epochs=ATTACKER_EPOCHS):
    """Evaluates the run in `model_dir`; returns and writes eval.json.

    The output is written into a hidden sibling `.<name>.partial-<pid>`
    and moved to `output_dir` when complete, so a killed evaluation never
    leaves an `output_dir` that looks finished; the next evaluation into
    the same parent removes partial directories whose process is gone.
    With `overwrite=False` (tfdptext-eval), an `output_dir` that already
    holds this same evaluation (same run, data and options) is left as it
    is and its stored result returned, with "already_done": True added; one
    holding another evaluation is refused. `overwrite=True` replaces a
    finished evaluation. A non-empty `output_dir` without eval.json is
    always refused.

    `reference_run` (a finished non-private run on the same test split)
    gives the reference accuracy of the randomized-response limit reported
    beside the accuracy (`utility.limit`); without it, a `baseline_eval`
    of a non-private run does, else the limit is a perfect classifier's.

    `attacker_epochs` caps the training of the Keras attackers (mlp,
    mlp_large; early-stopped on dev loss before it): DPNR's 50 by default,
    fewer for a quick look (an attacker stopped early may under-state the
    leak: empirical privacy is then an upper estimate).
    """
    validation.check_int("repeats", repeats, 1)
    validation.check_int("max_attack_examples", max_attack_examples, 10)
    validation.check_int("deniability_tokens", deniability_tokens, 1)
    validation.check_int("deniability_samples", deniability_samples, 1)
    validation.check_int("attacker_epochs", attacker_epochs, 1)
    for kind in attackers:
        validation.check_choice("attackers", kind, attacker_lib.KINDS)
    options = evaluation_options(
        model_dir, dataset, private_attributes, attackers, repeats,
        max_attack_examples, deniability_tokens, deniability_samples,
        membership, baseline_eval, vocabulary, seed, plots, reference_run,
        attacker_epochs)
    done = check_output_dir(output_dir, options, overwrite)
    if done is not None:
        done["already_done"] = True
        return done
    if baseline_eval:
        check_baseline(baseline_eval)
    if reference_run:
        check_reference_run(reference_run)
    run = TrainedRun(model_dir, vocabulary)
    if dataset is not None:
        check_classes(run, dataset)
    # Partial output of evaluations killed earlier (process gone), then
    # this one's: everything is written there and moved when complete.
    partial = runfiles.start_partial(output_dir)
    try:
        if dataset is None:
            dataset = data_lib.load_dataset(
                run.config["dataset"], data_dir=run.config.get("data_dir"))
            check_classes(run, dataset)
        if reference_run:  # its test split is this one: before any release
            check_reference_run(reference_run, dataset.name,
                                len(dataset.splits["test"]))
        attributes = (sorted(dataset.private_attributes)
                      if private_attributes is None
                      else list(private_attributes))
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
            "mode": run.config["mode"],
            "mechanism": run.config["mechanism"],
            "parameters": run.metrics.get("parameters"),
            "split_point": run.split_point,
            "guarantee": run.guarantee,
            "guarantee_text": str(Guarantee.from_dict(run.guarantee)),
            "dataset": dataset.name,
            "sizes": {name: len(ex) for name, ex in splits.items()},
            "utility": utility(test.labels, probabilities,
                               dataset.splits["train"].labels),
        }
        result["utility"]["limit"] = limit_of(
            run, result["utility"]["accuracy"], dataset, reference_run,
            baseline_eval)
        if attributes:
            private = {name: ex.private for name, ex in splits.items()}
            result["attack"] = attack(feats, private, attributes,
                                      list(attackers), repeats, seed,
                                      epochs=attacker_epochs)
            result["fairness"] = fairness_report(test.labels, predicted,
                                                 test.private, attributes)
            if baseline_eval:
                result["gap_change"] = gap_changes(
                    test.labels, predicted, test.private, attributes,
                    baseline_eval)
        if run.spec.per_token and \
                run.config["mechanism"] in mechanisms.names():
            result["token_level"] = token_level(
                run, released["test"], features["test"],
                deniability_tokens, deniability_samples, seed)
        if membership:
            result["membership"] = membership_attack(
                run, released["train"], splits["train"].labels,
                probabilities, test.labels, max_attack_examples)
        result["options"] = options
        write(result, partial, test.labels, predicted, plots)
        _publish(partial, output_dir)
    except BaseException:
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
        raise
    return result


def membership_attack(run, fresh, fresh_labels, test_probabilities, test_labels,
                      limit):
    """Membership inference on the server classifier: members are the
    train texts as the model saw them, non-members the test split.

    A run that released its texts once (--training_release=once) trained
    on one recorded release: that release is attacked (its first `limit`
    texts, with the labels it trained on), never fresh releases of the
    same texts, and the result's "members" says so (file, SHA-256, run id).
    Otherwise the model saw fresh noise at every epoch, and `fresh` (a
    fresh release of the train texts, `fresh_labels`) stands for it.
    """
    from tfdptext.evaluation import membership as membership_lib

    trained = run.trained_release(limit)
    if trained is None:
        members, labels = fresh, fresh_labels
        record = {"release": "fresh releases of the train texts (the run "
                  "privatized them anew at every epoch)",
                  "texts": len(fresh_labels), "labels": "the data set's "
                  "train labels"}
    else:
        members, labels, record = trained
        if labels is None:
            labels = fresh_labels[:record["texts"]]
    result = membership_lib.membership_inference(
        _log_probabilities(run.predict(members)), labels,
        _log_probabilities(test_probabilities), test_labels)
    result["members"] = record
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
