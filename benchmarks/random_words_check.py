#!/usr/bin/env python
"""The random-words check: false alarms, what it catches, what it costs.

Three measurements (docs/benchmarks.md, "Random words: what the phone
model's check catches"):

- --false_alarms: --buffers os.urandom buffers per width in --alarm_widths
  through the per-row statistics (tfdptext.models.word_checks, TensorFlow,
  vectorised over rows) and the duplicate counts of each buffer alone (as a
  one-row call); prints, per check, its limits, the most extreme values
  seen and the failures.
- --generators: every generator of tfdptext.audit.word_generators, at each
  width of --widths (the buffer lengths we export), --generator_buffers
  buffers each (fresh bases, steps and seeds), through
  `words_look_random`; prints how many were refused.
- --cost: the check alone converted to TFLite (batch 1, builtins) at each
  width, median of --invokes invokes on one thread, beside the check
  before this change (mean + sorted or bucketed duplicates, rebuilt here).

    .venv/bin/python benchmarks/random_words_check.py --false_alarms \\
        --generators --cost
"""

import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

import machine as host

FLAGS = flags.FLAGS
flags.DEFINE_bool("false_alarms", False, "Count false alarms.")
flags.DEFINE_bool("generators", False, "Run the generator table.")
flags.DEFINE_bool("cost", False, "Time the check in TFLite.")
flags.DEFINE_list("alarm_widths", ["128:1000000", "1536:1000000",
                                   "12288:20000", "98304:2000"],
                  "width:buffers pairs for --false_alarms.")
flags.DEFINE_integer("chunk_words", 2**24,
                     "Words per TensorFlow call in --false_alarms.")
flags.DEFINE_list("widths", ["128", "1536", "2048", "12288", "98304"],
                  "Widths for --generators and --cost.")
flags.DEFINE_integer("generator_buffers", 200,
                     "Buffers per generator up to 4,096 words (a tenth "
                     "above).")
flags.DEFINE_integer("invokes", 50, "Timed invokes per model (--cost).")


def _false_alarms(width, buffers):
    """(buffers, {check: [min, max, failures]}) for os.urandom rows."""
    import numpy as np
    import tensorflow as tf

    from tfdptext.models import secure
    from tfdptext.models import word_checks
    from tfdptext.privacy import word_statistics as ws

    limits = ws.row_limits(width)
    rows = max(1, min(buffers, FLAGS.chunk_words // width))
    seen = {}

    @tf.function(reduce_retracing=True)
    def measure(words):
        stats = word_checks.row_statistics(words)
        verdicts = word_checks.row_verdicts(words, limits)
        counts = word_checks.duplicate_counts(words)
        dup = word_checks.duplicate_verdicts(counts, width)
        return stats, verdicts, counts, dup

    done = 0
    while done < buffers:
        n = min(rows, buffers - done)
        stats, verdicts, counts, dup = measure(tf.constant(
            secure.os_random_words((n, width))))
        values = {k: v.numpy() for k, v in stats.items()}
        values["word_repeats"] = counts[0].numpy()
        values["pair_repeats"] = counts[1].numpy()
        passed = {k: v.numpy() for k, v in verdicts.items()}
        passed["word_repeats"] = dup.numpy()[:, 0]
        passed["pair_repeats"] = dup.numpy()[:, 1]
        for name in ws.TESTS:
            low, high, fails = seen.get(name, (np.inf, -np.inf, 0))
            seen[name] = (min(low, float(values[name].min())),
                          max(high, float(values[name].max())),
                          fails + int((~passed[name]).sum()))
        done += n
    return seen, limits


def _limit_text(name, limits, width):
    from tfdptext.privacy import word_statistics as ws

    if name == "near_equal":
        return f">= {limits.near_equal}"
    if name == "word_repeats":
        return f">= {ws.word_repeat_limit(width)}"
    if name == "pair_repeats":
        return f">= {ws.pair_repeat_limit(width)}"
    low, high = getattr(limits, name)
    fmt = (lambda v: f"{v:.4g}") if name.startswith(("mean", "serial")) \
        else (lambda v: f"{v:,}")
    parts = [f"<= {fmt(low)}" if low is not None else None,
             f">= {fmt(high)}" if high is not None else None]
    return " or ".join(p for p in parts if p)


def _report_false_alarms():
    from tfdptext.privacy import word_statistics as ws

    for pair in FLAGS.alarm_widths:
        width, buffers = (int(v) for v in pair.split(":"))
        began = time.time()
        seen, limits = _false_alarms(width, buffers)
        print(f"\n{width:,} words, {buffers:,} os.urandom buffers "
              f"({time.time() - began:.0f} s); per row, each alone:\n")
        print("| check | fails when | smallest seen | largest seen | "
              "failures |\n|---|---|---|---|---|")
        for name in ws.TESTS:
            low, high, fails = seen[name]
            fmt = "{:.4g}" if name.startswith(("mean", "serial")) else "{:,.0f}"
            print(f"| {name} | {_limit_text(name, limits, width)} | "
                  f"{fmt.format(low)} | {fmt.format(high)} | {fails} |",
                  flush=True)


def _report_generators():
    import numpy as np
    import tensorflow as tf

    from tfdptext.audit import word_generators
    from tfdptext.models import secure

    def run(words):
        ok = secure.words_look_random(tf.constant(words)).numpy()
        return np.where(ok, 0.0, np.nan)

    widths = [int(w) for w in FLAGS.widths]
    verdicts = {}
    for width in widths:
        buffers = FLAGS.generator_buffers if width <= 4096 else max(
            1, FLAGS.generator_buffers // 10)
        began = time.time()
        verdicts[width] = {v.generator: v for v in word_generators.check_model(
            run, width, buffers=buffers, seed=width, max_rows=2)}
        logging.warning("generators at %d words: %.0f s", width,
                        time.time() - began)
    names = list(word_generators.GENERATORS)
    print("\n| generator | " + " | ".join(f"{w:,} words" for w in widths)
          + " | can be caught |")
    print("|---|" + "---|" * (len(widths) + 1))
    for name in names:
        cells = []
        for width in widths:
            v = verdicts[width][name]
            mark = "" if v.as_expected else " (UNEXPECTED)"
            cells.append(f"{v.refused}/{v.buffers} refused{mark}")
        generator = word_generators.GENERATORS[name]
        can = ("good: must pass" if generator.good else
               "no: " + generator.why if not generator.catchable else
               "yes, up to 4,096 words per call" if generator.max_words else
               "yes")
        print(f"| {name} | " + " | ".join(cells) + f" | {can} |", flush=True)


def _previous_check(words):
    """The check before this change (tfdptext 2026-11-22): mean within
    Hoeffding's tolerance, and duplicates by sorting up to 4,096 words,
    by 2^17 low-bit buckets above."""
    import tensorflow as tf

    from tfdptext.privacy import randomness

    num_words = int(words.shape[-1])
    low = tf.cast(tf.math.floormod(words, 2**24), tf.float32) * 2.0**-24
    mean = tf.reduce_mean(low, axis=-1, keepdims=True)
    ok = tf.abs(mean - 0.5) <= randomness.mean_tolerance(num_words)
    if num_words <= 4096:
        ordered = tf.math.top_k(words, k=num_words).values
        pairs = tf.reduce_sum(tf.cast(tf.equal(
            ordered[:, 1:], ordered[:, :-1]), tf.float32), -1, keepdims=True)
        limit = 3.0
    else:
        ids = tf.reshape(tf.math.floormod(words, 2**17), [-1])
        counts = tf.math.unsorted_segment_sum(
            tf.ones_like(ids, tf.float32), ids, 2**17)
        pairs = tf.reshape(tf.reduce_sum(counts * (counts - 1.0)) / 2.0,
                           [1, 1])
        limit = num_words * (num_words - 1) / 2**18 + 1400.0
    return tf.logical_and(ok, pairs <= limit)


def _report_cost():
    import keras
    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import tflite
    from tfdptext.models import secure

    class Check(keras.layers.Layer):
        def __init__(self, fn, **kwargs):
            super().__init__(**kwargs)
            self.fn = fn

        def call(self, words):
            return tf.cast(self.fn(words), tf.float32)

    print("\n| words | this check: ms (median) | ops | previous check: ms "
          "(median) |\n|---|---|---|---|")
    for width in (int(w) for w in FLAGS.widths):
        words = secure.os_random_words((1, width))
        times = []
        for fn in (secure.words_look_random, _previous_check):
            inputs = keras.Input((width,), dtype="int32", name="w")
            model = keras.Model(inputs, Check(fn)(inputs))
            data = tflite.convert(model, batch_size=1)
            ops = tflite.check_unseeded_builtins(data)
            runner = Interpreter(model_content=data,
                                 num_threads=1).get_signature_runner()
            for _ in range(5):
                runner(w=words)
            spent = []
            for _ in range(FLAGS.invokes):
                began = time.perf_counter()
                runner(w=words)
                spent.append(time.perf_counter() - began)
            times.append((1e3 * float(np.median(spent)), len(ops)))
        print(f"| {width:,} | {times[0][0]:.3f} | {times[0][1]} | "
              f"{times[1][0]:.3f} |", flush=True)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    print(f"Machine: {host.cpu_name()}")
    if FLAGS.false_alarms:
        _report_false_alarms()
    if FLAGS.generators:
        _report_generators()
    if FLAGS.cost:
        _report_cost()


if __name__ == "__main__":
    app.run(main)
