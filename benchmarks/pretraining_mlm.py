#!/usr/bin/env python
"""Privacy-adaptive pretraining, then privacy-constrained fine-tuning on SST-2.

The analogue of Qu et al. (2021), Table 6 (SST column) with MiniLM: for each
eta, pretrain the encoder with each MLM objective (vanilla, probabilistic,
denoising) on a public corpus whose tokens are privatized on the fly, then
fine-tune `--mode` (token_rep by default) on SST-2 at the same eta from
each pretrained preset and from the original encoder, and print the test
accuracy per objective per eta with steps and time.

Every run is an ordinary run directory under --output_dir: a rerun skips
finished runs and resumes interrupted ones.

    python benchmarks/pretraining_mlm.py --eta=80 --eta=120 \
        --pretrain_steps=2000 --output_dir=runs/pretraining_mlm

A quick check that everything runs (minutes on a CPU, numbers meaningless):

    python benchmarks/pretraining_mlm.py --eta=80 --pretrain_steps=2 \
        --max_length=32 --heldout_examples=32 --finetune_train_examples=64 \
        --finetune_dev_examples=32 --output_dir=/tmp/pretraining_mlm_smoke
"""

import datetime
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

OBJECTIVES = ("vanilla", "probabilistic", "denoising")
# Qu et al. Table 6, SST, token_rep, BERT-base (768-d): eta -> accuracy of
# (original BERT, vanilla, probabilistic, denoising). Their eta does not
# transfer to MiniLM's 384-d embeddings (docs/benchmarks.md, d_chi table).
QU_TABLE6_SST = {
    50: (0.5126, 0.5390, 0.5424, 0.5356),
    75: (0.5310, 0.5791, 0.5757, 0.6089),
    100: (0.5298, 0.6709, 0.6766, 0.7041),
    125: (0.5608, 0.7706, 0.7718, 0.7810),
    150: (0.5665, 0.8188, 0.8188, 0.8395),
    175: (0.5975, 0.8658, 0.8693, 0.8693),
}

FLAGS = flags.FLAGS
flags.DEFINE_multi_float("eta", [80.0, 120.0], "d_chi eta, the same for "
                         "pretraining and fine-tuning.")
flags.DEFINE_multi_enum("objective", list(OBJECTIVES), list(OBJECTIVES),
                        "Pretraining objectives to compare.")
flags.DEFINE_enum("mode", "token_rep", ["token_rep", "text_to_text"],
                  "User-side mechanism (pretraining and fine-tuning).")
flags.DEFINE_string("preset", "minilm", "Encoder to start from.")
flags.DEFINE_string("corpus", "ag_dpnr", "Public pretraining corpus.")
flags.DEFINE_string("corpus_dir", "../shared/data/ag_dpnr",
                    "Directory of the pretraining corpus.")
flags.DEFINE_integer("pretrain_steps", 1000, "Pretraining steps per run.")
flags.DEFINE_integer("checkpoint_every", 100, "Pretraining checkpoints.")
flags.DEFINE_integer("batch_size", None,
                     "Batch size (default: 32 on CPU, 128 on a GPU).")
flags.DEFINE_integer("max_length", 128, "Token length (pretraining).")
flags.DEFINE_float("learning_rate", 1e-4, "Peak pretraining learning rate.")
flags.DEFINE_float("head_rate_multiplier", 100.0, "The MLM head's rate over "
                   "--learning_rate (1 = the recipe before issue 21).")
flags.DEFINE_integer("heldout_examples", 256, "Held-out corpus texts.")
flags.DEFINE_string("sst2_dir", "../shared/data/sst2", "SST-2 directory.")
flags.DEFINE_integer("finetune_max_length", 64, "Token length (SST-2).")
flags.DEFINE_integer("finetune_train_examples", 5000,
                     "SST-2 training examples (the first N).")
flags.DEFINE_integer("finetune_dev_examples", 2000, "SST-2 dev examples.")
flags.DEFINE_integer("finetune_epochs", 1, "Fine-tuning epochs.")
flags.DEFINE_string("output_dir", "runs/pretraining_mlm",
                    "Where the run directories go.")
flags.DEFINE_string("plot", None, "Write the accuracy-against-eta plot "
                    "here (PNG), beside Qu et al.'s Table 6 at the eta of "
                    "matching inversion rate (--qu_eta).")
flags.DEFINE_multi_string("qu_eta", ["50:75", "65:100", "80:125"],
                          "ours:theirs pairs for the plot: MiniLM eta -> the "
                          "BERT-base eta of about the same nearest-neighbour "
                          "inversion rate (docs/benchmarks.md, d_chi "
                          "table).")
flags.DEFINE_string("json_out", None, "Also write the results as JSON.")


def _eta_name(eta):
    return f"{eta:g}".replace(".", "p")


def pretrain_run(objective, eta):
    """Pretrains (or finds finished) one objective at one eta; returns
    (preset path, metrics, seconds spent in this invocation)."""
    from tfdptext import pretraining

    out = os.path.join(FLAGS.output_dir,
                       f"pretrain_{FLAGS.mode}_{objective}_eta"
                       f"{_eta_name(eta)}")
    config = pretraining.PretrainConfig(
        objective=objective, mode=FLAGS.mode, eta=eta, preset=FLAGS.preset,
        corpus=FLAGS.corpus, data_dir=FLAGS.corpus_dir,
        max_length=FLAGS.max_length, batch_size=FLAGS.batch_size,
        steps=FLAGS.pretrain_steps, checkpoint_every=FLAGS.checkpoint_every,
        learning_rate=FLAGS.learning_rate,
        head_rate_multiplier=FLAGS.head_rate_multiplier,
        heldout_examples=FLAGS.heldout_examples)
    start = time.perf_counter()
    metrics = pretraining.pretrain(config, out, verbose=0)
    return metrics["preset"], metrics, time.perf_counter() - start


def finetune_run(name, preset, eta):
    """Fine-tunes --mode on SST-2 from `preset`; returns (metrics, seconds
    spent in this invocation)."""
    from tfdptext import training

    out = os.path.join(FLAGS.output_dir,
                       f"sst2_{FLAGS.mode}_eta{_eta_name(eta)}_{name}")
    config = training.TrainConfig(
        mode=FLAGS.mode, eta=eta, dataset="sst2", data_dir=FLAGS.sst2_dir,
        preset=preset, max_length=FLAGS.finetune_max_length,
        epochs=FLAGS.finetune_epochs,
        max_train_examples=FLAGS.finetune_train_examples,
        max_dev_examples=FLAGS.finetune_dev_examples)
    start = time.perf_counter()
    metrics = training.train(config, out, verbose=0)
    return metrics, time.perf_counter() - start


def _row(eta, name, pretrained, finetuned, seconds):
    """One markdown row of the detail table."""
    if pretrained is None:
        steps, mlm, orig, speed = "0", "-", "-", "-"
    else:
        start, end = (pretrained["heldout"]["start"],
                      pretrained["heldout"]["end"])
        steps = str(pretrained["steps"])
        mlm = f"{start['mlm_loss']:.2f} -> {end['mlm_loss']:.2f}"
        orig = (f"{start['original_accuracy']:.3f} -> "
                f"{end['original_accuracy']:.3f}")
        speed = f"{pretrained['examples_per_second'] or 0:.1f}"
    return (f"| {eta:g} | {name} | {steps} | {mlm} | {orig} | {speed} | "
            f"{finetuned['test_accuracy']:.4f} | "
            f"{finetuned['wall_time_seconds']:.0f} | {seconds:.0f} |")


def _qu_accuracy(eta, name):
    """Qu et al.'s Table 6 accuracy at their `eta` for "original" (their
    BERT-base) or an objective."""
    row = QU_TABLE6_SST[int(eta)]
    return row[0 if name == "original" else 1 + OBJECTIVES.index(name)]


def _plot(path, accuracy, etas, objectives):
    """Our accuracy against eta, one line per encoder, beside Qu et al.'s
    at the eta of the same inversion rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = dict(tuple(float(v) for v in p.split(":")) for p in FLAGS.qu_eta)
    names = ["original", *objectives]
    if len(etas) == 1:
        # One eta: bars per encoder, ours beside Qu et al.'s at the eta of
        # the same inversion rate.
        eta, theirs = etas[0], pairs.get(etas[0])
        fig, ax = plt.subplots(figsize=(7, 4))
        x = list(range(len(names)))
        ax.bar([i - 0.2 for i in x], [accuracy[(eta, n)] for n in names],
               0.4, label=f"ours: {FLAGS.preset}, eta {eta:g}, "
               f"{FLAGS.pretrain_steps} steps")
        if theirs in QU_TABLE6_SST:
            ax.bar([i + 0.2 for i in x],
                   [_qu_accuracy(theirs, n) for n in names], 0.4,
                   label=f"Qu et al. Table 6: BERT-base, eta {theirs:g}")
        ax.set_xticks(x, [FLAGS.preset if n == "original" else n
                          for n in names])
        ax.axhline(0.509, color="grey", lw=0.8, ls=":",
                   label="majority class")
        ax.set_ylim(0.4, 0.85)
        ax.set_ylabel(f"SST-2 test accuracy ({FLAGS.mode})")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for name in names:
        axes[0].plot(etas, [accuracy[(eta, name)] for eta in etas], "o-",
                     label=FLAGS.preset if name == "original" else name)
        theirs = [e for e in etas if pairs.get(e) in QU_TABLE6_SST]
        axes[1].plot([pairs[e] for e in theirs],
                     [_qu_accuracy(pairs[e], name) for e in theirs],
                     "o--", label="BERT-base" if name == "original" else name)
    axes[0].set_title(f"ours: {FLAGS.preset}, {FLAGS.mode}, "
                      f"{FLAGS.pretrain_steps} pretraining steps")
    axes[0].set_xlabel("eta (MiniLM)")
    axes[0].set_ylabel("SST-2 test accuracy")
    axes[1].set_title("Qu et al. Table 6 (BERT-base, token_rep)")
    axes[1].set_xlabel("eta (BERT-base, same inversion rate)")
    for ax in axes:
        ax.axhline(0.509, color="grey", lw=0.8, ls=":")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    objectives = list(dict.fromkeys(FLAGS.objective))
    rows, accuracy = [], {}
    for eta in FLAGS.eta:
        finetuned, seconds = finetune_run("original", FLAGS.preset, eta)
        accuracy[(eta, "original")] = finetuned["test_accuracy"]
        rows.append(_row(eta, f"{FLAGS.preset} (not pretrained)", None,
                         finetuned, seconds))
        for objective in objectives:
            preset, pretrained, pretrain_seconds = pretrain_run(objective,
                                                                eta)
            finetuned, seconds = finetune_run(objective, preset, eta)
            accuracy[(eta, objective)] = finetuned["test_accuracy"]
            rows.append(_row(eta, objective, pretrained, finetuned,
                             pretrain_seconds + seconds))
    print(f"Privacy-adaptive pretraining ({FLAGS.corpus}, "
          f"{FLAGS.pretrain_steps} steps, length {FLAGS.max_length}) then "
          f"{FLAGS.mode} fine-tuning on SST-2 ({FLAGS.finetune_train_examples}"
          f" examples, {FLAGS.finetune_epochs} epoch(s)); encoder "
          f"{FLAGS.preset}; {datetime.date.today().isoformat()}")
    print()
    print(f"| eta | {FLAGS.preset} | " + " | ".join(objectives) + " |")
    print("|---|---|" + "---|" * len(objectives))
    for eta in FLAGS.eta:
        cells = [f"{accuracy[(eta, name)]:.4f}"
                 for name in ["original", *objectives]]
        print(f"| {eta:g} | " + " | ".join(cells) + " |")
    print()
    print("| eta | encoder | pretrain steps | held-out MLM loss | held-out "
          "original-token acc | pretrain ex/s | SST-2 test acc | fine-tune "
          "s | s this invocation |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    print()
    if FLAGS.plot:
        _plot(FLAGS.plot, accuracy, sorted(FLAGS.eta), objectives)
    if FLAGS.json_out:
        with open(FLAGS.json_out, "w") as f:
            json.dump({"flags": {name: FLAGS[name].value for name in (
                "eta", "objective", "mode", "preset", "corpus",
                "pretrain_steps", "batch_size", "max_length",
                "learning_rate", "head_rate_multiplier", "finetune_max_length",
                "finetune_train_examples", "finetune_dev_examples",
                "finetune_epochs")},
                "test_accuracy": [
                    {"eta": eta, "encoder": name, "accuracy": value}
                    for (eta, name), value in accuracy.items()]},
                f, indent=2)
    print("Qu et al. Table 6, SST, token_rep, BERT-base (their eta; not "
          "comparable with MiniLM's):")
    print("| eta | BERT | vanilla | probabilistic | denoising |")
    print("|---|---|---|---|---|")
    for eta, values in QU_TABLE6_SST.items():
        print(f"| {eta} | " + " | ".join(f"{v:.4f}" for v in values) + " |")


if __name__ == "__main__":
    app.run(main)
