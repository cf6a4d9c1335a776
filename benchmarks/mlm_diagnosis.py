#!/usr/bin/env python
"""Why the pretraining MLM learned slowly: short training probes (issue 21).

Trains the clean-text MLM (`--mode=none`: no privatization, the target the
original token) of `tfdptext.pretraining` on a corpus for `--steps` steps
and prints the held-out masked-token accuracy and loss every
`--eval_every` steps, with one thing changed at a time:

- `--head_rate_multiplier`: the MLM head's learning rate over the
  encoder's (1 = the recipe before issue 21);
- `--freeze_encoder`: only the head trains;
- `--head_only_steps`: only the head trains for the first N steps (a
  head-only warm-up), then everything;
- `--answer_at_input`: the server's input is the original text (no
  [MASK], no random token), so the token to predict is at the input: a
  model whose labels are aligned with the masked positions reaches near
  100% (label alignment);
- `--learning_rate`, `--warmup_fraction`, `--decay` and `--schedule_steps`
  (the budget the schedule spans: a 150-step probe of a 500-step run
  follows the first 150 steps of the 500-step schedule).

The held-out texts are the corpus' dev split, masked once (seeded), the
same for every probe of the same flags.

    python benchmarks/mlm_diagnosis.py --data_dir=../shared/data/ag_dpnr \\
        --steps=150 --schedule_steps=500 --head_rate_multiplier=1 \\
        --json_out=runs/mlm_diagnosis/baseline.json
"""

import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "minilm", "Encoder.")
flags.DEFINE_string("corpus", "ag_dpnr", "Corpus (labels ignored).")
flags.DEFINE_string("data_dir", "../shared/data/ag_dpnr", "Its files.")
flags.DEFINE_integer("max_length", 64, "Token length.")
flags.DEFINE_integer("batch_size", 32, "Texts per step.")
flags.DEFINE_integer("heldout_examples", 256, "Held-out texts.")
flags.DEFINE_integer("steps", 150, "Optimizer steps of the probe.")
flags.DEFINE_integer("schedule_steps", None, "Steps the learning-rate "
                     "schedule spans (default --steps).")
flags.DEFINE_integer("eval_every", 50, "Held-out evaluation every N steps.")
flags.DEFINE_float("learning_rate", 1e-4, "Peak rate (the encoder's).")
flags.DEFINE_float("head_rate_multiplier", 1.0, "The head's peak rate over "
                   "--learning_rate.")
flags.DEFINE_float("warmup_fraction", 0.1, "Warm-up share of "
                   "--schedule_steps.")
flags.DEFINE_enum("decay", "linear", ["linear", "cosine", "constant"],
                  "Decay after warm-up.")
flags.DEFINE_bool("freeze_encoder", False, "Train the head only.")
flags.DEFINE_integer("head_only_steps", 0, "Train the head only for the "
                     "first N steps (the schedule counts them).")
flags.DEFINE_bool("answer_at_input", False, "Feed the original text (the "
                  "answer at every masked position).")
flags.DEFINE_integer("seed", 0, "Seed of the head and the text order.")
flags.DEFINE_string("json_out", None, "Also write the results as JSON.")


def with_answer_at_input(batch):
    """The batch with the server's input replaced by the original ids."""
    return {**batch, "masked_ids": batch["token_ids"]}


def build(texts):
    """(model, training batches (skip_steps -> dataset), held-out batches)
    of the flags."""
    import keras

    from tfdptext import models
    from tfdptext import seeding
    from tfdptext.pretraining import PretrainConfig
    from tfdptext.pretraining import masking
    from tfdptext.pretraining.model import MLM_HEAD
    from tfdptext.pretraining.model import build_mlm
    from tfdptext.pretraining.optimizer import HeadRateAdamW
    from tfdptext.training.schedules import WarmupDecay

    config = PretrainConfig(
        mode="none", objective="vanilla", preset=FLAGS.preset,
        max_length=FLAGS.max_length, batch_size=FLAGS.batch_size,
        seed=FLAGS.seed).validate()
    tokenizer = models.load_tokenizer(config.preset, config.max_length)
    with seeding.scoped_seed(config.seed):
        backbone = models.load_backbone(config.preset)
        model = build_mlm(config, backbone, tokenizer)
    encode = masking.batch_encoder(tokenizer, masking.masker_for(
        tokenizer, mask_rate=config.mask_rate,
        max_predictions=config.max_predictions))

    def train(skip_steps):
        batches = masking.training_batches(
            texts["train"], encode, batch_size=config.batch_size,
            seed=config.seed, skip_steps=skip_steps)
        if FLAGS.answer_at_input:
            return batches.map(with_answer_at_input)
        return batches

    heldout = masking.heldout_batches(
        texts["heldout"], tokenizer, mask_rate=config.mask_rate,
        max_predictions=config.max_predictions,
        batch_size=config.batch_size, seed=config.seed)
    if FLAGS.answer_at_input:
        heldout = heldout.map(with_answer_at_input)
    first = next(iter(train(0)))
    with seeding.scoped_seed(config.seed):
        model(first)
    total = FLAGS.schedule_steps or FLAGS.steps
    model.compile(optimizer=HeadRateAdamW(
        WarmupDecay(FLAGS.learning_rate, total_steps=total,
                    warmup_steps=int(round(FLAGS.warmup_fraction * total)),
                    decay=FLAGS.decay),
        head_name=MLM_HEAD, head_rate_multiplier=FLAGS.head_rate_multiplier),
        jit_compile=False)
    # Built on every variable, so that a head-only warm-up can hand the
    # encoder's variables to the same optimizer (and schedule) later.
    model.optimizer.build(model.trainable_variables)
    return model, train, heldout


def set_encoder_trainable(model, trainable):
    """Freezes or unfreezes the encoder (the user-side token embedding
    stays frozen) and retraces the training step."""
    model.backbone.trainable = trainable
    model.token_embedding.trainable = False
    model.backbone.pooled_dense.trainable = False
    model.train_function = None


def evaluate(model, heldout, step):
    logs = model.evaluate(heldout, verbose=0, return_dict=True)
    return {"step": step, "mlm_loss": float(logs["loss"]),
            "original_accuracy": float(logs["original_accuracy"])}


def main(argv):
    del argv
    from tfdptext.pretraining import PretrainConfig
    from tfdptext.pretraining.pretrainer import load_corpus

    texts = load_corpus(PretrainConfig(
        mode="none", corpus=FLAGS.corpus, data_dir=FLAGS.data_dir,
        batch_size=FLAGS.batch_size,
        heldout_examples=FLAGS.heldout_examples).validate())
    model, train, heldout = build(texts)
    curve = [evaluate(model, heldout, 0)]
    print(json.dumps(curve[-1]), flush=True)
    step, seconds = 0, 0.0
    set_encoder_trainable(model, not (FLAGS.freeze_encoder
                                      or FLAGS.head_only_steps))
    while step < FLAGS.steps:
        if step == FLAGS.head_only_steps and not FLAGS.freeze_encoder:
            set_encoder_trainable(model, True)
        segment = min(FLAGS.eval_every, FLAGS.steps - step)
        if step < FLAGS.head_only_steps:
            segment = min(segment, FLAGS.head_only_steps - step)
        started = time.perf_counter()
        model.fit(train(step), steps_per_epoch=segment, epochs=1, verbose=0,
                  shuffle=False)
        seconds += time.perf_counter() - started
        step += segment
        curve.append(evaluate(model, heldout, step))
        print(json.dumps(curve[-1]), flush=True)
    settings = {name: FLAGS[name].value for name in (
        "preset", "corpus", "max_length", "batch_size", "heldout_examples",
        "steps", "schedule_steps", "learning_rate", "head_rate_multiplier",
        "warmup_fraction", "decay", "freeze_encoder", "head_only_steps",
        "answer_at_input",
        "seed")}
    print(f"{settings}\n{machine.cpu_name()}; {seconds:.0f} s training, "
          f"{seconds / FLAGS.steps:.2f} s/step")
    print("| step | held-out MLM loss | held-out masked-token accuracy |")
    print("|---|---|---|")
    for point in curve:
        print(f"| {point['step']} | {point['mlm_loss']:.3f} | "
              f"{point['original_accuracy']:.3f} |")
    machine.write_json(FLAGS.json_out, {
        "flags": settings, "machine": machine.cpu_name(),
        "train_seconds": seconds, "curve": curve})


if __name__ == "__main__":
    app.run(main)
