#!/usr/bin/env python
"""Cost of the privatization layers in a training step: robust vs none.

Builds the `none` and `robust` (MinMaxNormalize + LaplaceNoise, optionally
WordDropout) split models on the same MiniLM backbone, and times compiled
`train_on_batch` steps on the same fixed batch (batch x length), alternating
the two models so that machine noise hits both alike.

    python benchmarks/training_step_overhead.py --batch_size=32 --max_length=64
"""

import datetime
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine as host  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_integer("max_length", 64, "Sequence length (no padding).")
flags.DEFINE_integer("steps", 15, "Timed steps per model per round.")
flags.DEFINE_integer("rounds", 3, "Alternating rounds.")
flags.DEFINE_float("dropout_rate", 0.0, "Word dropout in the robust model.")


def main(argv):
    del argv
    import keras
    import numpy as np
    import tensorflow as tf

    from tfdptext import models, training

    tokenizer = models.load_tokenizer(max_length=FLAGS.max_length)
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, (FLAGS.batch_size, FLAGS.max_length))
    ids[:, 0], ids[:, -1] = tokenizer.cls_id, tokenizer.sep_id
    features = {"token_ids": tf.constant(ids, tf.int32),
                "padding_mask": tf.ones_like(ids, dtype=tf.int32),
                "segment_ids": tf.zeros_like(ids, dtype=tf.int32)}
    labels = tf.constant(rng.integers(0, 4, FLAGS.batch_size))
    compiled = {}
    for mode, kwargs in (("none", {}),
                         ("robust", {"epsilon": 1.0,
                                     "dropout_rate": FLAGS.dropout_rate})):
        config = training.TrainConfig(mode=mode, **kwargs).validate()
        split = training.build_split(config, models.load_backbone(),
                                     tokenizer, 4)
        split.model.compile(
            keras.optimizers.AdamW(5e-5),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        split.model.train_on_batch(features, labels)  # trace
        compiled[mode] = split.model
    seconds = {mode: [] for mode in compiled}
    for _ in range(FLAGS.rounds):
        for mode, model in compiled.items():
            for _ in range(FLAGS.steps):
                start = time.perf_counter()
                model.train_on_batch(features, labels)
                seconds[mode].append(time.perf_counter() - start)
    median = {mode: float(np.median(s)) for mode, s in seconds.items()}
    print(f"{datetime.date.today().isoformat()}, batch {FLAGS.batch_size} x "
          f"length {FLAGS.max_length}, {FLAGS.rounds} x {FLAGS.steps} steps "
          f"per model, word dropout {FLAGS.dropout_rate:g}")
    for mode in compiled:
        print(f"| {mode} | {median[mode] * 1000:.0f} ms/step | "
              f"{FLAGS.batch_size / median[mode]:.1f} examples/s |")
    overhead = median["robust"] / median["none"] - 1
    print(f"robust vs none: {overhead * 100:+.1f}% per step")
    host.write_json(None, {"seconds_per_step": seconds, "median": median,
                           "overhead": overhead})


if __name__ == "__main__":
    app.run(main)
