"""Training labels that users contribute, randomized on their device.

With `--label_epsilon` (modes token_rep, text_to_text, seq_rep), each
training and dev example's label is released by K-ary randomized response
(`tfdptext.offline.categorical`, integer arithmetic on os.urandom words),
ONCE: the draw is recorded in the run directory (RANDOMIZED_LABELS) and a
resumed run reads it back, since drawing again would release every label
a second time. The model trains with the forward-corrected loss for the
known channel (`tfdptext.training.losses.ForwardCorrectedCrossentropy`);
the test split stays clean, for measuring.
"""

import dataclasses
import json

import numpy as np

from tfdptext import rundir
from tfdptext.offline import categorical as categorical_rr
from tfdptext.privacy import categorical

# The splits whose labels come from users (the test split is the
# experimenter's, to measure accuracy with clean labels).
USER_SPLITS = ("train", "dev")


def transition(config, num_classes):
    """The (K, K) channel P[noisy = j | clean = i] of the run's labels."""
    return categorical.transition_matrix(config.label_epsilon, num_classes)


def _draw(dataset, epsilon):
    return {name: categorical_rr.randomized_response(
        dataset.splits[name].labels.astype(np.int64), dataset.num_classes,
        epsilon).tolist() for name in USER_SPLITS}


def _matches(record, dataset, epsilon):
    """Whether recorded labels belong to this run's data and epsilon."""
    sizes = {name: len(dataset.splits[name]) for name in USER_SPLITS}
    if (record.get("label_epsilon") != epsilon
            or record.get("num_classes") != dataset.num_classes
            or {n: len(record.get(n, ())) for n in USER_SPLITS} != sizes):
        return False
    return True


def _check_values(path, record, num_classes, error):
    """Raises `error` naming `path` unless every label is an integer
    class id (no floats, booleans, or ids outside the classes)."""
    for name in USER_SPLITS:
        for i, v in enumerate(record[name]):
            if isinstance(v, bool) or not isinstance(v, int) or \
                    not 0 <= v < num_classes:
                raise error(
                    f"{path}: {name}[{i}] is {json.dumps(v)}, not a class "
                    f"id in [0, {num_classes}); the file is damaged: use a "
                    "new output directory.")


def randomized_labels(run, config, dataset, error):
    """{"train", "dev"} -> noisy label arrays: read from the run directory
    when a previous start drew them, else drawn once and written there
    (atomically, its SHA-256 and the run id recorded) before any training
    step. `error` (an exception class) is raised when the recorded file is
    not this run's draw (digest or run id), does not match the data or
    epsilon, or holds something other than class ids; and when it is
    missing from a run that already drew it (`RunDir.check_may_draw`)."""
    name = rundir.RANDOMIZED_LABELS
    run_id = run.run_id(create=True)
    if run.exists(name):
        run.check_draw(name)
        record = run.read(name, required=USER_SPLITS)
        if record.get("run_id") != run_id:
            raise error(
                f"{run.file(name)} was drawn by run "
                f"{record.get('run_id')!r}, not this run ({run_id!r}); "
                "labels are released once: use a new output directory.")
        if not _matches(record, dataset, config.label_epsilon):
            raise error(
                f"{run.file(name)} holds labels drawn for other data or "
                f"another label_epsilon than this run's "
                f"({config.label_epsilon:g}, {dataset.num_classes} classes, "
                f"sizes { {n: len(dataset.splits[n]) for n in USER_SPLITS} });"
                " they were released once and are never drawn again: use a "
                "new output directory.")
        _check_values(run.file(name), record, dataset.num_classes, error)
    else:
        run.check_may_draw(name)
        record = {"label_epsilon": config.label_epsilon,
                  "num_classes": dataset.num_classes, "run_id": run_id,
                  **_draw(dataset, config.label_epsilon)}
        run.write_draw(name, lambda path: rundir.write_json(path, record,
                                                            indent=None))
    return {n: np.asarray(record[n], np.int32) for n in USER_SPLITS}


def noisy_dataset(dataset, labels):
    """`dataset` with its train and dev labels replaced by `labels`."""
    splits = dict(dataset.splits)
    for name, values in labels.items():
        splits[name] = dataclasses.replace(splits[name], labels=values)
    return dataclasses.replace(dataset, splits=splits)


# What the experimenter's numbers are measured against (metrics.json).
CLEAN_LABELS_NOTE = (
    "the data set's clean labels, which only the experimenter holds: a "
    "deployment's server has the randomized labels alone and can compute "
    "neither these shares nor accuracy on clean dev labels")


def summary(config, dataset, labels, text_guarantee,
            dev_accuracy_randomized=None):
    """metrics.json's "label_privacy": the label guarantee, the share of
    labels changed (against the clean labels, and said so), the dev
    accuracy on the randomized labels, and what one training example
    guarantees (`text_guarantee`: what the training texts guarantee; no
    example guarantee when they guarantee nothing)."""
    label = categorical.label_guarantee(config.label_epsilon,
                                        dataset.num_classes)
    changed = {name: float(np.mean(labels[name]
                                   != dataset.splits[name].labels))
               for name in USER_SPLITS}
    out = {"label_epsilon": config.label_epsilon,
           "guarantee": label.to_dict(), "guarantee_text": str(label),
           "changed_share": changed,
           "changed_share_against": CLEAN_LABELS_NOTE,
           "expected_changed_share": 1.0 - label.details["keep_probability"],
           "dev_accuracy_randomized_labels": dev_accuracy_randomized,
           "clean_label_metrics": ["dev_accuracy", "dev_macro_f1",
                                   "test_accuracy", "test_macro_f1",
                                   "label_privacy.changed_share"],
           "splits": list(USER_SPLITS)}
    if text_guarantee is not None and text_guarantee.is_private:
        example = categorical.with_label(text_guarantee, label)
        out["example_guarantee"] = example.to_dict()
        out["example_guarantee_text"] = str(example)
    return out
