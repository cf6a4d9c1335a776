#!/usr/bin/env python
"""Utility of every text-to-text mechanism at matched shares of words
changed, on a frozen encoder: a budgeted stand-in for the fine-tuned sweeps
of benchmarks/mechanism_utility.py.

For each data set and mechanism (the registry's offline twin over the
preset's token embedding table, os.urandom):

1. calibrate: the mechanism's privacy parameter (eta or epsilon;
   TruncatedGumbel's noise `scale`, which is what sets its spread) is
   bisected on a log scale until the share of real (non-special) training
   tokens it changes is each of --targets, measured on --calibration_tokens
   tokens of the training split;
2. release: the training and test texts are privatized once at that
   value (their WordPiece ids, specials kept), encoded by the frozen
   pretrained encoder (mean pooling over the padding mask), and a
   multinomial logistic regression (scikit-learn, C=1) is trained on the
   released training features and scored on the released test features:
   the server sees only privatized text, as in --mode=text_to_text with a
   frozen encoder;
3. plausible deniability: --deniability_tokens distinct test tokens, each
   privatized --deniability_samples times; N_w / samples is the share of
   releases that return the token (median over tokens; Qu et al.'s
   statistic, lower is more private), S_w the number of distinct outputs
   (median).

The non-private reference (clean text, the same encoder and classifier)
is the first row of each data set. Prints the table of
benchmarks/mechanism_utility.py; --plot draws it; --json_out keeps the rows.

    taskset -c 1 .venv/bin/python benchmarks/mechanism_utility_frozen.py \\
        --threads=1 --json_out=runs/mechanism_utility/rows.json \\
        --plot=docs/img/mechanism_utility.png

(about 50 minutes on one core of a 2-core AMD EPYC for both data sets).

This is not the fine-tuned accuracy of tfdptext-train (the encoder never
adapts to the noise, which that mode does); it orders the mechanisms at
equal shares changed on the same server model.
"""

import json
import math
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import machine  # noqa: E402
from benchmarks import mechanism_utility  # noqa: E402

DATA = {"sst2": "../shared/data/sst2", "ag_dpnr": "../shared/data/ag_dpnr"}
MECHANISMS = ("dchi", "mahalanobis", "vickrey_dchi", "vickrey_mahalanobis",
              "tem", "santext", "santext_plus", "custext", "custext_plus",
              "truncated_gumbel")

FLAGS = flags.FLAGS
flags.DEFINE_multi_enum("dataset", list(DATA), list(DATA), "Data sets.")
flags.DEFINE_list("mechanisms", list(MECHANISMS), "Registry names.")
flags.DEFINE_list("targets", ["0.25", "0.5"],
                  "Shares of real tokens changed to calibrate to.")
flags.DEFINE_string("preset", "minilm", "The frozen encoder and its "
                    "token embedding table.")
flags.DEFINE_integer("max_train_examples", 1500, "Training texts.")
flags.DEFINE_integer("max_test_examples", 872, "Test texts.")
flags.DEFINE_integer("max_length", 48, "Token length.")
flags.DEFINE_integer("calibration_tokens", 2000, "Tokens of the "
                     "calibration sample.")
flags.DEFINE_integer("bisection_steps", 7, "Bisection steps per target.")
flags.DEFINE_integer("deniability_tokens", 100, "Tokens of the "
                     "plausible-deniability sample.")
flags.DEFINE_integer("deniability_samples", 200, "Releases per token.")
flags.DEFINE_integer("threads", 2, "Threads of TensorFlow, BLAS, FAISS.")
flags.DEFINE_string("json_out", None, "Write the rows here.")
# --plot: defined by benchmarks/mechanism_utility.py (the same figure).

# The parameter bisected and its starting bracket, per kind of entry.
# A larger value changes fewer tokens, except TruncatedGumbel's scale.
_BRACKET = {"eta": (1.0, 2000.0), "epsilon": (0.01, 500.0),
            "scale": (0.01, 100.0)}


class _Encoder:
    """Frozen pretrained encoder, mean-pooled, on (ids, mask) arrays."""

    def __init__(self, preset, max_length):
        import keras

        from tfdptext.models import presets, split
        from tfdptext.models.pooling import MaskedMeanPooling

        inputs = split.feature_inputs()
        backbone = presets.load_backbone(preset)
        self.table = split.token_embedding_table(backbone)
        sequence = backbone(inputs)
        self.model = keras.Model(inputs, MaskedMeanPooling()(
            sequence["sequence_output"], inputs["padding_mask"]))
        self.tokenizer = presets.load_tokenizer(preset, max_length)

    def tokenize(self, texts):
        batch = self.tokenizer(list(texts))
        return (np.asarray(batch["token_ids"], np.int64),
                np.asarray(batch["padding_mask"], np.int64))

    def __call__(self, ids, mask, batch_size=64):
        lengths = mask.sum(1)
        order = np.argsort(lengths, kind="stable")
        out = np.zeros((len(ids), self.model.output_shape[-1]), np.float32)
        for i in range(0, len(ids), batch_size):
            idx = order[i:i + batch_size]
            width = int(lengths[idx].max())
            out[idx] = np.asarray(self.model({
                "token_ids": ids[idx, :width].astype(np.int32),
                "padding_mask": mask[idx, :width].astype(np.int32),
                "segment_ids": np.zeros((len(idx), width), np.int32)},
                training=False))
        return out


def _memoize_table_functions():
    """Cache the two table-only computations that the bisection would
    repeat for every value tried: CusText's output sets (they do not
    depend on epsilon) and TruncatedGumbel's distance range (not on the
    scale). Keyed by the table's bytes; the results are the functions'."""
    import hashlib

    from tfdptext.substitution import custext
    from tfdptext.substitution import truncated_gumbel

    def memo(module, name):
        function, cache = getattr(module, name), {}

        def cached(table, *args):
            array = np.ascontiguousarray(table)
            key = (hashlib.sha256(array.tobytes()).hexdigest(), array.shape,
                   tuple(np.asarray(a).tobytes() for a in args))
            if key not in cache:
                cache[key] = function(table, *args)
            return cache[key]
        setattr(module, name, cached)

    memo(custext, "output_sets")
    memo(truncated_gumbel, "distance_range")


def _accuracy(x_train, y_train, x_test, y_test):
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x_train)
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit(scaler.transform(x_train), y_train)
    return float((model.predict(scaler.transform(x_test)) == y_test).mean())


def _privatizer(entry, settings_of, value):
    """The offline twin at `value` (TruncatedGumbel: the scale)."""
    if entry.name == "truncated_gumbel":
        return entry.offline(settings_of(1.0, [f"scale={value!r}"]))
    return entry.offline(settings_of(value, []))


def _changed(privatize, tokens):
    return float((privatize(tokens) != tokens).mean())


def calibrate(entry, settings_of, tokens, target):
    """The parameter value whose changed share on `tokens` is `target`
    (bisection on a log scale)."""
    kind = "scale" if entry.name == "truncated_gumbel" else entry.parameter
    low, high = (math.log(v) for v in _BRACKET[kind])
    increasing = kind == "scale"
    for _ in range(FLAGS.bisection_steps):
        middle = (low + high) / 2
        share = _changed(_privatizer(entry, settings_of, math.exp(middle)),
                         tokens)
        if (share < target) == increasing:
            low = middle
        else:
            high = middle
    value = math.exp((low + high) / 2)
    return float(f"{value:.4g}")


def run_dataset(name, encoder):
    from tfdptext import data as data_lib
    from tfdptext import mechanisms
    from tfdptext.evaluation import deniability

    ds = data_lib.load_dataset(name, data_dir=DATA[name])
    train = ds.splits["train"]
    test = ds.splits["test"]
    n_train, n_test = FLAGS.max_train_examples, FLAGS.max_test_examples
    ids_train, mask_train = encoder.tokenize(train.texts[:n_train])
    ids_test, mask_test = encoder.tokenize(test.texts[:n_test])
    y_train = np.asarray(train.labels[:n_train])
    y_test = np.asarray(test.labels[:n_test])
    special = set(int(i) for i in encoder.tokenizer.special_token_ids)
    real = mask_train.astype(bool) & ~np.isin(ids_train, list(special))
    rng = np.random.default_rng(0)
    sample = rng.choice(ids_train[real], FLAGS.calibration_tokens,
                        replace=False)
    real_test = mask_test.astype(bool) & ~np.isin(ids_test, list(special))
    deniability_ids = rng.choice(np.unique(ids_test[real_test]),
                                 FLAGS.deniability_tokens, replace=False)

    start = time.time()
    rows = [{"dataset": name, "mechanism": "none (clean text)",
             "parameter": "-", "value": 0.0, "target": 0.0,
             "accuracy": _accuracy(encoder(ids_train, mask_train), y_train,
                                   encoder(ids_test, mask_test), y_test),
             "changed_share": 0.0, "kept_share": 1.0, "s_w_median": 1.0,
             "seconds": time.time() - start}]
    print(json.dumps(rows[-1]), flush=True)
    for mechanism in FLAGS.mechanisms:
        entry = mechanisms.get(mechanism)

        def settings_of(value, given, entry=entry):
            return mechanisms.Settings(
                value, entry.parse_options(given), encoder.table,
                tuple(encoder.tokenizer.special_token_ids),
                tuple(encoder.tokenizer.passthrough_token_ids),
                f"{FLAGS.preset} token embeddings",
                tuple(encoder.tokenizer.vocabulary))

        for target in (float(t) for t in FLAGS.targets):
            start = time.time()
            value = calibrate(entry, settings_of, sample, target)
            privatize = _privatizer(entry, settings_of, value)
            released_train = privatize(ids_train)
            released_test = privatize(ids_test)
            accuracy = _accuracy(encoder(released_train, mask_train),
                                 y_train, encoder(released_test, mask_test),
                                 y_test)
            n_w, s_w = deniability.plausible_deniability(
                privatize, deniability_ids, FLAGS.deniability_samples)
            row = {"dataset": name, "mechanism": mechanism,
                   "parameter": "scale" if mechanism == "truncated_gumbel"
                   else entry.parameter, "value": value, "target": target,
                   "accuracy": accuracy,
                   "changed_share": float(
                       (released_test != ids_test)[real_test].mean()),
                   "kept_share": float(np.median(n_w))
                   / FLAGS.deniability_samples,
                   "s_w_median": float(np.median(s_w)),
                   "seconds": time.time() - start}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv):
    del argv
    machine.fix_threads(FLAGS.threads)
    _memoize_table_functions()
    encoder = _Encoder(FLAGS.preset, FLAGS.max_length)
    result = {"machine": machine.cpu_name(),
              "date": time.strftime("%Y-%m-%d"),
              "flags": {k: FLAGS[k].value for k in (
                  "dataset", "mechanisms", "targets", "preset",
                  "max_train_examples", "max_test_examples", "max_length",
                  "calibration_tokens", "deniability_tokens",
                  "deniability_samples", "threads")},
              "rows": []}
    for name in FLAGS.dataset:
        result["rows"].extend(run_dataset(name, encoder))
        if FLAGS.json_out:
            os.makedirs(os.path.dirname(os.path.abspath(FLAGS.json_out)),
                        exist_ok=True)
            with open(FLAGS.json_out, "w") as f:
                json.dump(result, f, indent=2)
    machine.write_json(None, result)
    print(mechanism_utility.table(result["rows"]))
    if FLAGS.plot:
        mechanism_utility.plot(result["rows"], FLAGS.plot)


if __name__ == "__main__":
    app.run(main)
