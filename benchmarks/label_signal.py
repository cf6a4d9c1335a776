#!/usr/bin/env python
"""Is there anything to learn? A linear probe of a dataset's labels.

Fits logistic regression (plain and class-balanced) on the frozen encoder's
mean-pooled representations of the training texts and scores it on the
test split, beside the majority class; prints the mean label of the texts
holding a few sentiment words. A probe at the majority baseline says the
labels carry little signal the encoder can see, whatever the fine-tuning
recipe.

    .venv/bin/python benchmarks/label_signal.py --dataset=trustpilot \\
        --data_dir=../shared/data/trustpilot \\
        --table_name=are-trustpilot-s-ratings-learnable-from

With --table_name, the two printed tables are also written as the docs'
results NAME (the probes) and NAME-2 (the words).
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine as host  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("dataset", "trustpilot", "Dataset name.")
flags.DEFINE_string("data_dir", "../shared/data/trustpilot", "Its files.")
flags.DEFINE_string("preset", "minilm", "Encoder.")
flags.DEFINE_integer("max_length", 64, "Token length.")
flags.DEFINE_list("words", ["great", "excellent", "poor", "terrible",
                            "worst", "awful", "refund"],
                  "Words whose texts' mean label is printed.")
flags.DEFINE_string("table_name", None, "Also write the probes' table as "
                    "the docs' result of this name and the words' table "
                    "as NAME-2.")


def _pooled(tokenizer, backbone, texts, batch=64):
    out = []
    for start in range(0, len(texts), batch):
        features = tokenizer(list(texts[start:start + batch]))
        hidden = backbone(features)["sequence_output"].numpy()
        mask = features["padding_mask"].numpy()[..., None]
        out.append((hidden * mask).sum(1) / np.maximum(mask.sum(1), 1))
    return np.concatenate(out)


def main(argv):
    del argv
    from sklearn.linear_model import LogisticRegression

    from tfdptext import data
    from tfdptext import metrics
    from tfdptext import models

    dataset = data.load_dataset(FLAGS.dataset, data_dir=FLAGS.data_dir)
    train, test = dataset.splits["train"], dataset.splits["test"]
    tokenizer = models.load_tokenizer(FLAGS.preset, FLAGS.max_length)
    backbone = models.load_backbone(FLAGS.preset)
    x_train = _pooled(tokenizer, backbone, train.texts)
    x_test = _pooled(tokenizer, backbone, test.texts)
    y_train, y_test = np.asarray(train.labels), np.asarray(test.labels)
    majority = np.bincount(y_test).max() / len(y_test)
    print(f"{dataset.name}: {len(y_train)} train / {len(y_test)} test; "
          f"majority class {majority:.4f} on test")
    print("| probe | test accuracy | test macro-F1 |\n|---|---|---|")
    probe_rows, word_rows = [], []
    result = {"dataset": dataset.name, "train": len(y_train),
              "test": len(y_test), "majority": float(majority),
              "probes": {}, "words": {}}
    for weight in (None, "balanced"):
        probe = LogisticRegression(max_iter=2000, class_weight=weight)
        predicted = probe.fit(x_train, y_train).predict(x_test)
        result["probes"][str(weight)] = {
            "accuracy": float((predicted == y_test).mean()),
            "macro_f1": float(metrics.macro_f1(y_test, predicted))}
        probe_rows.append([f"logistic regression, class_weight={weight}",
                           f"{(predicted == y_test).mean():.4f}",
                           f"{metrics.macro_f1(y_test, predicted):.4f}"])
        print("| " + " | ".join(probe_rows[-1]) + " |")
    texts = [t.lower() for t in (*train.texts, *test.texts)]
    labels = np.concatenate([y_train, y_test])
    print("| word | texts | mean label index |\n|---|---|---|")
    for word in FLAGS.words:
        hit = np.array([word in t for t in texts])
        if hit.any():
            result["words"][word] = {"texts": int(hit.sum()),
                                     "mean_label": float(labels[hit].mean())}
            word_rows.append([word, str(hit.sum()),
                              f"{labels[hit].mean():.2f}"])
            print("| " + " | ".join(word_rows[-1]) + " |")
    word_rows.append(["(all)", str(len(labels)), f"{labels.mean():.2f}"])
    print("| " + " | ".join(word_rows[-1]) + " |")
    host.write_json(None, result, name=f"label_signal_{dataset.name}")
    if FLAGS.table_name:
        for name, columns, rows in (
                (FLAGS.table_name, ["probe", "test accuracy",
                                    "test macro-F1"], probe_rows),
                (f"{FLAGS.table_name}-2", ["word", "texts",
                                           "mean label index"], word_rows)):
            host.write_json(None, {"from": f"label_signal_{dataset.name}"},
                            name=name, table={"columns": columns,
                                              "rows": rows})


if __name__ == "__main__":
    app.run(main)
