#!/usr/bin/env python
"""The Pareto front of benchmarks/pareto_front.py on FROZEN encoder features.

Every text is encoded once by the frozen pretrained encoder (mean pooling
over the padding mask, cached in an npz under --output_dir); each cell then
trains only a head: the library's user-side release layers and the
server's classifier, the noise in training (robust training). Releases:

- none: the non-private reference (dropout 0.1 + logits on the features);
- dpnr_384: MinMaxNormalize + LaplaceNoise(sensitivity="vector"), b = 384/eps;
- laplace_k8_sigmoid: a trained 8-d sigmoid projection + Laplace, b = 8/eps;
- code_m_K, code_m_2K: argmax of m trained logits (m = K, 2K) released by
  CodeRandomizedResponse, trained with the exact expected loss over the
  channel, the decoder refitted in closed form (`tfdptext.models.code`);
- code_auto: the same with m and the classes sharing a code read off the
  best LDP channel for the training prior at that epsilon
  (`tfdptext.privacy.identification.code_grouping`, `--num_codes=auto`).

The trained projections read features standardised with the training
split's statistics; the Laplace servers divide the release by the public
noise standard deviation. Test accuracy: the mean over --test_releases
fresh releases of the test split (os.urandom), beside the limit of the
`none` classifier: the best LDP channel on its test predictions, for its
confusion matrix (`tfdptext.privacy.limit.reference_limit`), the bound
for the test prior (`limit.bound`, a theorem for every release) and
K-ary randomized response on the same predictions (`limit.rr_reference`).

    taskset -c 1 .venv/bin/python benchmarks/pareto_frozen.py \\
        --output_dir=runs/pareto_frozen \\
        --markdown=runs/pareto_frozen/table.md \\
        --json_out=runs/pareto_frozen/rows.json \\
        --plot=runs/pareto_frozen/pareto_frozen.png

Smoke run: --preset=<a tiny local preset> --max_train_examples=200.
"""

import os
import re
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from tfdptext import data as data_lib, layers, metrics  # noqa: E402
from tfdptext.models import code, presets, secure, split  # noqa: E402
from tfdptext.models.pooling import MaskedMeanPooling  # noqa: E402
from tfdptext.privacy import identification  # noqa: E402
from tfdptext.privacy import limit as limit_lib, randomness  # noqa: E402
from tfdptext.training import pipeline  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

DATA = {"ag_dpnr": "../shared/data/ag_dpnr", "sst2": "../shared/data/sst2"}
REFERENCE = "none"
RELEASES = ("dpnr_384", "laplace_k8_sigmoid", "code_m_K", "code_m_2K",
            "code_auto")
SPLITS = ("train", "dev", "test")

FLAGS = flags.FLAGS
flags.DEFINE_multi_enum("dataset", list(DATA), list(DATA), "Data sets.")
flags.DEFINE_list("epsilon", ["0.5", "1", "2", "4", "8"],
                  "Epsilons per text.")
flags.DEFINE_list("release", list(RELEASES), "Releases to run.")
flags.DEFINE_string("preset", "minilm", "The frozen encoder.")
flags.DEFINE_integer("max_train_examples", 3000, "Training texts (budget).")
flags.DEFINE_integer("max_dev_examples", 500, "Dev texts (early stopping).")
flags.DEFINE_integer("max_length", 64, "Token length.")
flags.DEFINE_integer("epochs", 40, "Most epochs per head.")
flags.DEFINE_integer("patience", 4, "Epochs without a better dev loss.")
flags.DEFINE_integer("batch_size", 32, "Batch size of the heads.")
flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate.")
flags.DEFINE_integer("test_releases", 5, "Fresh releases of the test split.")
flags.DEFINE_integer("seed", 0, "Seed of the head training.")
flags.DEFINE_integer("threads", 1, "TensorFlow threads.")
flags.DEFINE_string("output_dir", "runs/pareto_frozen", "Feature cache.")
flags.DEFINE_string("markdown", None, "Write the tables here.")
flags.DEFINE_string("plot", None, "Write the plot here.")
flags.DEFINE_string("json_out", None, "Write the rows here.")


def _encode(encoder, tokenizer, texts, batch_size=64):
    """(n, dim) pooled features, in batches of texts of similar length."""
    order = np.argsort([len(t) for t in texts], kind="stable")
    out = np.zeros((len(texts), encoder.output_shape[-1]), np.float32)
    for i in range(0, len(texts), batch_size):
        idx = order[i:i + batch_size]
        batch = pipeline.trim_padding(tokenizer([texts[j] for j in idx]))
        out[idx] = np.asarray(encoder(batch, training=False))
    return out


def _features(dataset):
    """{split: (x, y), "K": classes}, from the cache or encoded once."""
    tag = re.sub(r"\W+", "_", os.path.basename(FLAGS.preset.rstrip("/")))
    path = os.path.join(FLAGS.output_dir, f"features_{dataset}_{tag}_L"
                        f"{FLAGS.max_length}_{FLAGS.max_train_examples}_"
                        f"{FLAGS.max_dev_examples}.npz")
    if not os.path.isfile(path):
        ds = data_lib.load_dataset(dataset, data_dir=DATA[dataset])
        inputs = split.feature_inputs()
        sequence = presets.load_backbone(FLAGS.preset)(inputs)
        encoder = keras.Model(inputs, MaskedMeanPooling()(
            sequence["sequence_output"], inputs["padding_mask"]))
        tokenizer = presets.load_tokenizer(FLAGS.preset, FLAGS.max_length)
        sizes = (FLAGS.max_train_examples, FLAGS.max_dev_examples, None)
        arrays, start = {"K": ds.num_classes}, time.time()
        for name, n in zip(SPLITS, sizes):
            examples = ds.splits[name]
            arrays[f"x_{name}"] = _encode(encoder, tokenizer,
                                          examples.texts[:n])
            arrays[f"y_{name}"] = examples.labels[:n]
        print(f"encoded {dataset} in {time.time() - start:.0f} s", flush=True)
        os.makedirs(FLAGS.output_dir, exist_ok=True)
        np.savez(path, **arrays)
    with np.load(path) as f:
        return {"K": int(f["K"]), **{s: (f[f"x_{s}"], f[f"y_{s}"])
                                     for s in SPLITS}}


def _standardize(x, stats):
    """Per-coordinate standardisation with the training split's mean and
    variance, before a trained projection: a fixed affine map of the user
    side (the same function class; it lets Adam saturate the projection)."""
    return keras.layers.Normalization(mean=stats[0], variance=stats[1])(x)


def _continuous(release, epsilon, stats, num_classes):
    """(training model, loss, release(x), server, privatizer, calibrate)
    of none and the Laplace releases. The server rescales the release by
    the public noise standard deviation, then dropout 0.1 and logits (the
    split's default head)."""
    x = keras.Input((len(stats[0]),))
    pre = {"dpnr_384": lambda: layers.MinMaxNormalize()(x),
           "laplace_k8_sigmoid": lambda: keras.layers.Dense(
               8, activation="sigmoid", name=split.PRIVATE_PROJECTION)(
                   _standardize(x, stats)),
           REFERENCE: lambda: x}[release]()
    noise = None if release == REFERENCE else layers.LaplaceNoise(
        epsilon, sensitivity="vector")
    released = noise(pre) if noise else pre
    user_pre = keras.Model(x, pre)
    server = keras.Sequential([
        keras.layers.Rescaling(1.0 / max(1.0, 2**0.5 * noise.scale)
                               if noise else 1.0),
        keras.layers.Dropout(0.1), keras.layers.Dense(num_classes)])
    model = keras.Model(x, server(released))

    def release_fn(features):
        z = user_pre(features, training=False)
        return z if noise is None else noise.apply(
            z, uniforms=_uniforms(tuple(z.shape) + (2,)))

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return model, loss, release_fn, server, noise, None


def _code(epsilon, num_codes, stats, num_classes, prior, groups=None):
    """The same for the code release, wired as `split.code_split`: the
    training model outputs the expected log-likelihoods over the channel,
    the server is the decoder table, refitted after training."""
    x = keras.Input((len(stats[0]),))
    logits = keras.layers.Dense(num_codes, name=code.CODE_LOGITS)(
        _standardize(x, stats))
    head = keras.Model(x, logits)
    rr = layers.CodeRandomizedResponse(epsilon, num_codes)
    transition = rr.transition_matrix()
    decoder = code.CodeDecoder(num_codes, num_classes, table=code.bayes_table(
        prior, transition, num_codes, groups))
    model = keras.Model(x, decoder(code.CodeChannel(transition)(logits)))
    argmax = code.ArgmaxCode()

    def release_fn(features):
        codes = argmax(head(features, training=False))
        return rr.apply(codes, uniforms=_uniforms((len(features), 2)))

    def calibrate(x_train, y_train):
        code.refit_decoder(head, decoder, transition, [(x_train, y_train)],
                           prior)

    return (model, code.ExpectedNegativeLogLikelihood(), release_fn, decoder,
            rr, calibrate)


def _uniforms(shape):
    """U[0, 1) from os.urandom words, as a phone's release draws them."""
    return secure.uniforms_from_words(secure.os_random_words(shape))


def _fit(model, loss, data):
    """Adam on the training features, the best epoch by dev loss."""
    model.compile(keras.optimizers.Adam(FLAGS.learning_rate), loss)
    stop = keras.callbacks.EarlyStopping(patience=FLAGS.patience,
                                         restore_best_weights=True)
    history = model.fit(*data["train"], batch_size=FLAGS.batch_size,
                        epochs=FLAGS.epochs, validation_data=data["dev"],
                        callbacks=[stop], verbose=0)
    return len(history.history["loss"])


def _cell(data, release, epsilon, reference):
    """Trains one cell's head, releases the test split, returns its row."""
    keras.utils.set_random_seed(FLAGS.seed)
    (x_tr, y_tr), (x_te, y_te), k = data["train"], data["test"], data["K"]
    stats = (x_tr.mean(axis=0), x_tr.var(axis=0) + 1e-6)
    plan = None
    if release.startswith("code_"):
        prior = np.bincount(y_tr, minlength=k) / len(y_tr)
        m, groups = k * (2 if release.endswith("2K") else 1), None
        if release == "code_auto":
            plan = identification.code_grouping(
                prior, epsilon, lambda n: layers.CodeRandomizedResponse(
                    epsilon, n).transition_matrix())
            m, groups = plan.num_codes, plan.groups
        parts = _code(epsilon, m, stats, k, prior, groups)
    else:
        parts = _continuous(release, epsilon, stats, k)
    model, loss, release_fn, server, privatizer, calibrate = parts
    start = time.time()
    epochs = _fit(model, loss, data)
    if calibrate:
        calibrate(x_tr, y_tr)
    seconds = time.time() - start
    predictions = [np.argmax(server(release_fn(x_te), training=False), 1)
                   for _ in range(FLAGS.test_releases if privatizer else 1)]
    accuracy = [metrics.accuracy(y_te, p) for p in predictions]
    guarantee = split.user_side_guarantee(
        privatizer, randomness=randomness.OS_ENTROPY, name=release)
    row = {"dataset": data["name"], "release": release, "epsilon": epsilon,
           "accuracy": float(np.mean(accuracy)),
           "accuracy_sd": float(np.std(accuracy)),
           "test_releases": len(predictions),
           "macro_f1": float(np.mean([metrics.macro_f1(y_te, p)
                                      for p in predictions])),
           "majority": metrics.majority_accuracy(y_tr, y_te),
           "test_prior": (np.bincount(y_te, minlength=k) / len(y_te)).tolist(),
           "n_train": len(y_tr), "n_dev": len(data["dev"][1]),
           "n_test": len(y_te), "epochs_run": epochs,
           "train_seconds": round(seconds, 1),
           "guarantee": str(guarantee).splitlines()[0]}
    if plan is not None:
        row.update({"num_codes": plan.num_codes, "groups": list(plan.groups),
                    "plan_accuracy_train_prior": plan.accuracy,
                    "plan_source": plan.source})
    if privatizer is None:
        # The limit of every private cell: randomized response on THIS
        # classifier's test predictions (limit.rr_reference).
        row["confusion"] = limit_lib.confusion_matrix(
            y_te, predictions[0], k).tolist()
    else:
        report = limit_lib.limit_report(guarantee, row["accuracy"], k,
                                        prior=row["test_prior"],
                                        num_texts=len(y_te),
                                        reference_confusion=reference)
        row.update({key: report[key] for key in (
            "limit", "share_of_limit", "share_of_limit_95",
            "epsilon_per_text", "kind", "bound_any_classifier",
            "randomized_response")})
    return row


def _fmt(value):
    return "-" if value is None else f"{value:.3f}"


def _wide(part, k):
    """One data set: rows releases, columns eps, "accuracy (share)"."""
    ref = next(r for r in part if r["release"] == REFERENCE)
    eps = sorted({r["epsilon"] for r in part if r["epsilon"]})
    lines = [f"**{ref['dataset']}** (K = {k}, none = {ref['accuracy']:.3f}, "
             f"majority class = {ref['majority']:.3f}, n_test = "
             f"{ref['n_test']})", "",
             "| release | " + " | ".join(f"eps {e:g}" for e in eps) + " |",
             "|---" * (len(eps) + 1) + "|",
             "| bound (any release, test prior) | " + " | ".join(
                 _fmt(limit_lib.bound(e, k, ref["test_prior"]))
                 for e in eps) + " |",
             "| limit (best channel on the reference's predictions) | "
             + " | ".join(_fmt(limit_lib.reference_limit(
                 e, ref["confusion"])) for e in eps) + " |",
             "| K-ary randomized response on them | " + " | ".join(
                 _fmt(limit_lib.rr_reference(e, ref["confusion"]))
                 for e in eps) + " |",
             "| none | " + " | ".join(_fmt(ref["accuracy"]) for _ in eps)
             + " |"]
    for release in [r for r in RELEASES if r in FLAGS.release]:
        cells = {r["epsilon"]: r for r in part if r["release"] == release}
        lines.append(f"| {release} | " + " | ".join(
            f"{cells[e]['accuracy']:.3f} ({cells[e]['share_of_limit']:.3f})"
            + (f" m={cells[e]['num_codes']}" if "num_codes" in cells[e]
               else "") if e in cells else "-" for e in eps) + " |")
    return lines + [""]


def _tables(rows, classes):
    """The wide table per data set, then one line per cell."""
    out = []
    for dataset in classes:
        out += _wide([r for r in rows if r["dataset"] == dataset],
                     classes[dataset])
    out += ["| data | release | eps per text | accuracy (sd over releases) | "
            "macro-F1 | limit | share of limit (95%) | guarantee |",
            "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        share = "-" if r["release"] == REFERENCE else (
            "{:.3f} ({:.3f}-{:.3f})".format(r["share_of_limit"],
                                            *r["share_of_limit_95"]))
        eps = "-" if r["epsilon"] is None else f"{r['epsilon']:g}"
        out.append(f"| {r['dataset']} | {r['release']} | {eps} | "
                   f"{r['accuracy']:.3f} ({r['accuracy_sd']:.3f}) | "
                   f"{r['macro_f1']:.3f} | {_fmt(r.get('limit'))} | "
                   f"{share} | {r['guarantee']} |")
    return "\n".join(out)


def _plot(rows, classes, path):
    """One panel per data set, drawn as benchmarks/pareto_front.py does."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(classes), figsize=(5.4 * len(classes),
                                                       3.8), squeeze=False)
    for ax, dataset in zip(axes[0], classes):
        data_k = classes[dataset]
        part = [r for r in rows if r["dataset"] == dataset]
        for release in RELEASES:
            line = sorted([r for r in part if r["release"] == release],
                          key=lambda r: r["epsilon"])
            if line:
                ax.plot([r["epsilon"] for r in line],
                        [r["accuracy"] for r in line], "o-", label=release)
        ref = next(r for r in part if r["release"] == REFERENCE)
        eps = [r["epsilon"] for r in part if r["epsilon"]]
        grid = np.geomspace(min(eps) / 1.3, max(eps) * 1.3, 80)
        ax.plot(grid, [limit_lib.reference_limit(e, ref["confusion"])
                       for e in grid], "k--", linewidth=1,
                label="limit (best LDP channel on the non-private "
                "prediction)")
        ax.plot(grid, [limit_lib.bound(e, data_k, ref["test_prior"])
                       for e in grid], "k:", linewidth=1,
                label="bound (any release)")
        ax.axhline(ref["accuracy"], color="grey", linestyle=":",
                   label=f"non-private ({ref['accuracy']:.3f})")
        ax.axhline(ref["majority"], color="red", linewidth=0.8,
                   linestyle="-.", label="majority class")
        ax.set(xscale="log", xlabel="epsilon per text", ylabel="test "
               "accuracy", title=f"{dataset}, frozen encoder features")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    del argv
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
    print(f"machine: {machine.cpu_name()}; "
          f"{machine.versions(['tensorflow', 'keras', 'keras-hub'])}")
    print(f"budget: {FLAGS.max_train_examples} training texts, "
          f"{FLAGS.max_dev_examples} dev texts (early stopping), the whole "
          f"test split; frozen {FLAGS.preset} features (mean pooling, "
          f"max_length {FLAGS.max_length})", flush=True)
    start, rows, classes = time.time(), [], {}
    for dataset in FLAGS.dataset:
        data = {"name": dataset, **_features(dataset)}
        classes[dataset] = data["K"]
        reference = None
        for release, eps in [(REFERENCE, None)] + [
                (r, float(e)) for r in FLAGS.release for e in FLAGS.epsilon]:
            row = _cell(data, release, eps, reference)
            reference = reference or row["confusion"]
            rows.append(row)
            print(f"{dataset} {release} eps={eps} acc={row['accuracy']:.3f} "
                  f"limit={_fmt(row.get('limit'))} share="
                  f"{_fmt(row.get('share_of_limit'))} epochs="
                  f"{row['epochs_run']} | {row['guarantee']}", flush=True)
    table = _tables(rows, classes)
    print(f"{table}\nwall time: {time.time() - start:.0f} s")
    if FLAGS.markdown:
        with open(FLAGS.markdown, "w") as f:
            f.write(table + "\n")
    machine.write_json(FLAGS.json_out, rows)
    if FLAGS.plot and rows:
        _plot(rows, classes, FLAGS.plot)


if __name__ == "__main__":
    app.run(main)
