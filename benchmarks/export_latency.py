#!/usr/bin/env python
"""Size and latency of the exported phone model, and server throughput.

Builds MiniLM split models (weights as loaded: latency does not depend on
training), wraps the user side as the exporter does (fixed length), converts
to TFLite float32 and dynamic-range int8, and times single-sentence invokes
in ai-edge-litert's plain Interpreter with 1 and 2 threads. Also times the
server side (as the exported SavedModel signature, any length) in
predictions per second.

    python benchmarks/export_latency.py --max_length=128 --rounds=30 --block=10

`--noise_source` picks the phone model's randomness: `input` (the default
export: `random_words` from the app, checked in the graph) and/or
`internal` (TFLite's own RANDOM_* ops).

With `--lengths`, it measures instead what the exporter's several input
lengths buy (issue 11), all in one run, int8, batch 1, 1 and 2 threads:

    python benchmarks/export_latency.py --max_length=128 \
        --lengths=16,32,64,128 --input_tokens=16 --noserver

- the DPNR phone model (mean pool + min-max + Laplace, random words in) as
  the exporter writes it (one .tflite, one signature per length), on an
  input of `--input_tokens` tokens ([CLS] and [SEP] included): through the
  shortest fitting length vs. the max_length signature (ratio of p50s);
- the plain encoder (the phone model of a mode-none run: encoder + mean
  pool) at the same two lengths vs. the DPNR one (overhead of the
  privatization layers, %);
- the file size of the one multi-signature .tflite vs. separate files.
The settings of one thread count are timed round-robin: every round runs a
block of `--block` invokes of each setting (one untimed invoke first), in
a new random order each round, so that the machine's load hits all alike
and no setting always follows the same one. p50/p95 pool all rounds;
"paired" is the median over rounds of the ratio of the two settings'
round medians.
"""

import datetime
import os
import random
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import machine as host
import numpy as np
from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("max_length", 128, "Sequence length.")
flags.DEFINE_integer("server_batch", 256, "Server batch size.")
flags.DEFINE_multi_string("split", ["sequence_representation",
                                    "token_representation"],
                          "Split points to measure.")
flags.DEFINE_multi_enum("noise_source", ["input"], ["input", "internal"],
                        "Phone model randomness to measure.")
flags.DEFINE_multi_enum("weights", ["float32", "int8"], ["float32", "int8"],
                        "Phone model weights to measure.")
flags.DEFINE_bool("server", True, "Also time the server side.")
flags.DEFINE_list("lengths", None, "Measure the phone model at these input "
                  "lengths (see the module docstring) instead of the "
                  "fixed-length table.")
flags.DEFINE_integer("input_tokens", 16, "With --lengths: tokens of the "
                     "timed input, [CLS] and [SEP] included.")
flags.DEFINE_integer("rounds", 30, "Round-robin rounds (every setting "
                     "once a round).")
flags.DEFINE_integer("block", 10, "Timed invokes per setting per round.")
flags.DEFINE_list("table_names", [], "The docs' regions the printed "
                  "tables fill, in the order printed ('' skips one): each "
                  "is written as benchmarks/results/NAME.json.")
flags.DEFINE_bool("compare_separate", True, "With --lengths: also convert "
                  "one file per length, for the size comparison.")

TEXT = ("the quarterly report said revenue grew while costs fell , and "
        "analysts expect the company to raise its forecast again ") * 4


def _dpnr_and_plain_users():
    """The user sides of a DPNR split (mean pool, min-max, Laplace) and a
    non-private one (mean pool), over ONE MiniLM backbone (weights as
    loaded), so the encoder weights are identical."""
    from tfdptext import layers, models

    backbone = models.load_backbone("minilm")
    dpnr = models.sequence_representation_split(
        backbone, 4, [layers.MinMaxNormalize(), layers.LaplaceNoise(1.0)])
    plain = models.sequence_representation_split(backbone, 4, [])
    return dpnr.user, plain.user


def _multi_length_tflite(user, lengths):
    """(tflite bytes, {length: phone model}) as tfdptext-export writes the
    phone model: int8, batch 1, one signature per length."""
    from tfdptext.export import exporter, tflite

    max_length = max(lengths)
    phones = {length: exporter._phone_model(
        user, "sequence_representation", length) for length in lengths}
    model_bytes = tflite.convert_signatures(
        {exporter.phone_signature(length, max_length): phone
         for length, phone in phones.items()},
        quantize=True, batch_size=1)
    tflite.check_unseeded_builtins(model_bytes)
    return model_bytes, phones


def _feeds(phones, input_tokens, max_length):
    """{length: feed} of one input with `input_tokens` tokens, [CLS] and
    [SEP] included, cut to each length that holds it."""
    from tfdptext import models
    from tfdptext.models import secure

    ids = models.load_tokenizer(max_length=input_tokens)(
        [TEXT])["token_ids"].numpy()
    full_ids = np.zeros((1, max_length), np.int32)
    full_ids[:, :input_tokens] = ids
    full_mask = (np.arange(max_length) < input_tokens).astype(
        np.int32)[None]
    feeds = {}
    for length, phone in phones.items():
        if length < input_tokens:
            continue
        feed = {"token_ids": full_ids[:, :length],
                "padding_mask": full_mask[:, :length]}
        if secure.RANDOM_WORDS in phone.input:
            feed[secure.RANDOM_WORDS] = secure.os_random_words(
                (1, int(phone.input[secure.RANDOM_WORDS].shape[-1])))
        feeds[length] = feed
    return feeds


class _Setting:
    """One timed setting: a signature runner and its feed."""

    def __init__(self, name, runner, feed):
        self.name, self.runner, self.feed = name, runner, feed
        self.rounds = []  # per round: the block's invoke times (s)

    def run_block(self, invokes):
        self.runner(**self.feed)  # untimed: the previous setting ran
        times = []
        for _ in range(invokes):
            start = time.perf_counter()
            self.runner(**self.feed)
            times.append(time.perf_counter() - start)
        self.rounds.append(times)

    def percentiles(self):
        pooled = np.concatenate(self.rounds)
        return (np.percentile(pooled, 50) * 1e3,
                np.percentile(pooled, 95) * 1e3)

    def round_medians(self):
        return np.array([np.median(r) for r in self.rounds])


def _round_robin(settings, rounds, block, seed=0):
    """Times every setting `rounds` times, a block of `block` invokes each,
    in a new random order every round (seeded): no setting always follows
    the same one (a predecessor's thread pool may still spin, and its
    weights fill the cache)."""
    order = list(settings)
    shuffle = random.Random(seed).shuffle
    for setting in order:
        for _ in range(10):
            setting.runner(**setting.feed)
    for _ in range(rounds):
        shuffle(order)
        for setting in order:
            setting.run_block(block)


def _paired(a, b):
    """Median over rounds of a's round median / b's."""
    return float(np.median(a.round_medians() / b.round_medians()))


def lengths_benchmark(lengths):
    """The issue-11 measurement (module docstring); prints Markdown."""
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import exporter, tflite

    max_length = max(lengths)
    dpnr_user, plain_user = _dpnr_and_plain_users()
    start = time.perf_counter()
    files = {"DPNR": _multi_length_tflite(dpnr_user, lengths),
             "plain encoder": _multi_length_tflite(plain_user, lengths)}
    convert_s = time.perf_counter() - start
    short = min(n for n in lengths if n >= FLAGS.input_tokens)
    settings = {}
    for threads in (1, 2):
        for kind, (model_bytes, phones) in files.items():
            interpreter = Interpreter(model_content=model_bytes,
                                      num_threads=threads)
            feeds = _feeds(phones, FLAGS.input_tokens, max_length)
            for length in sorted({short, max_length}):
                runner = interpreter.get_signature_runner(
                    exporter.phone_signature(length, max_length))
                settings[kind, length, threads] = _Setting(
                    f"{kind} @ {length}", runner, feeds[length])
    for threads in (1, 2):  # 1-thread runs never share the CPU with a
        # 2-thread interpreter's pool
        _round_robin([s for key, s in settings.items() if key[2] == threads],
                     FLAGS.rounds, FLAGS.block)

    print(f"{datetime.date.today().isoformat()}; {host.cpu_name()}; "
          f"MiniLM-L6-H384 (weights as loaded), int8, batch 1; input of "
          f"{FLAGS.input_tokens} tokens ([CLS] and [SEP] included); "
          f"lengths {lengths}; {FLAGS.rounds} rounds x {FLAGS.block} "
          f"invokes per setting, round-robin; conversion of both files "
          f"{convert_s:.0f} s")
    print("\n| phone model | signature length | threads | p50 ms | p95 ms |")
    print("|---|---|---|---|---|")
    for (kind, length, threads), setting in settings.items():
        p50, p95 = setting.percentiles()
        print(f"| {kind} | {length} | {threads} | {p50:.2f} | {p95:.2f} |")
    print(f"\n| threads | DPNR p50 @{short} / @{max_length} (target <= 0.2) "
          f"| paired | plain p50 @{short} / @{max_length} |")
    print("|---|---|---|---|")
    for threads in (1, 2):
        d_short, d_long = (settings["DPNR", n, threads]
                           for n in (short, max_length))
        p_short, p_long = (settings["plain encoder", n, threads]
                           for n in (short, max_length))
        ratio = d_short.percentiles()[0] / d_long.percentiles()[0]
        plain = p_short.percentiles()[0] / p_long.percentiles()[0]
        print(f"| {threads} | {ratio:.3f} | {_paired(d_short, d_long):.3f} "
              f"| {plain:.3f} |")
    print("\n| threads | length | DPNR p50 ms | plain p50 ms | overhead % "
          "(target <= 3) | paired % |")
    print("|---|---|---|---|---|---|")
    for threads in (1, 2):
        for length in sorted({short, max_length}):
            dpnr = settings["DPNR", length, threads]
            plain = settings["plain encoder", length, threads]
            d50, p50 = dpnr.percentiles()[0], plain.percentiles()[0]
            print(f"| {threads} | {length} | {d50:.2f} | {p50:.2f} | "
                  f"{100 * (d50 / p50 - 1):+.1f} | "
                  f"{100 * (_paired(dpnr, plain) - 1):+.1f} |")
    print("\n| DPNR phone model file(s), int8 | MiB |")
    print("|---|---|")
    print(f"| one .tflite, signatures {lengths} (what tfdptext-export "
          f"writes) | {len(files['DPNR'][0]) / 2**20:.1f} |")
    if FLAGS.compare_separate:
        sizes = {length: len(tflite.convert(
            phone, quantize=True, batch_size=1))
            for length, phone in files["DPNR"][1].items()}
        for length, size in sorted(sizes.items()):
            print(f"| separate file, length {length} | {size / 2**20:.1f} |")
        print(f"| separate files together | "
              f"{sum(sizes.values()) / 2**20:.1f} |")


def fixed_length_table(features):
    """The size and latency table at one length (--max_length), every
    setting timed round-robin (`_round_robin`, --rounds blocks of --block
    invokes, one thread count at a time): p50 and p95 of all invokes, and
    the range (min to max) of the rounds' medians. Returns the server rows
    to time: (name, split)."""
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext import layers, models
    from tfdptext.export import exporter, tflite
    from tfdptext.models import secure

    length = FLAGS.max_length
    feed = {"token_ids": features["token_ids"].numpy(),
            "padding_mask": features["padding_mask"].numpy()}
    splits, settings = [], {}
    for split_point in FLAGS.split:
        backbone = models.load_backbone()
        if split_point == "sequence_representation":
            split = models.sequence_representation_split(
                backbone, 4, [layers.MinMaxNormalize(),
                              layers.LaplaceNoise(1.0)])
            name = "encoder + mean pool + min-max + Laplace"
        else:
            split = models.token_representation_split(
                backbone, 4, layers.DChiNoise(50.0))
            name = "token embedding + d_chi"
        splits.append((name, split))
        for source in FLAGS.noise_source:
            phone = exporter._phone_model(split.user, split_point, length,
                                          noise_source=source)
            model_feed = dict(feed)
            if secure.RANDOM_WORDS in phone.input:
                model_feed[secure.RANDOM_WORDS] = secure.os_random_words(
                    (1, int(phone.input[secure.RANDOM_WORDS].shape[-1])))
            for weights in FLAGS.weights:
                model_bytes = tflite.convert(
                    phone, quantize=weights == "int8", batch_size=1)
                tflite.check_unseeded_builtins(model_bytes)
                for threads in (1, 2):
                    runner = Interpreter(
                        model_content=model_bytes,
                        num_threads=threads).get_signature_runner()
                    settings[name, source, weights, threads] = (
                        len(model_bytes), _Setting(name, runner, model_feed))
    for threads in (1, 2):  # as in lengths_benchmark
        _round_robin([s for key, (_, s) in settings.items()
                      if key[3] == threads], FLAGS.rounds, FLAGS.block)
    print(f"{datetime.date.today().isoformat()}; {host.cpu_name()}; "
          f"MiniLM-L6-H384, length {length}, batch 1; "
          f"{int(feed['padding_mask'].sum())} real tokens; {FLAGS.rounds} "
          f"rounds x {FLAGS.block} invokes per setting, round-robin")
    print("| user model | randomness | weights | size MiB | threads | p50 ms "
          "| round medians ms (min to max) | p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, source, weights, threads), (size, setting) in \
            settings.items():
        p50, p95 = setting.percentiles()
        medians = setting.round_medians() * 1e3
        print(f"| {name} | {source} | {weights} | {size / 2**20:.1f} | "
              f"{threads} | {p50:.2f} | {medians.min():.2f} to "
              f"{medians.max():.2f} | {p95:.2f} |")
    return splits


def server_throughput(splits, features):
    """Predictions per second of each split's server signature, as the
    exporter writes it (token-level releases of any length)."""
    import tensorflow as tf

    from tfdptext.export import exporter

    length, dim, batch = FLAGS.max_length, 384, FLAGS.server_batch
    rows = []
    for name, split in splits:
        released = split.user(features)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "server")
            exporter._write_server(split.server, split.split_point, length,
                                   dim, path, any_length=True)
            serve = tf.saved_model.load(path).signatures["serving_default"]
            inputs = {info.name: tf.repeat(released[info.name], batch,
                                           axis=0)
                      for info in split.spec.signature_inputs(length, dim)}
            serve(**inputs)
            start = time.perf_counter()
            repeats = 3
            for _ in range(repeats):
                serve(**inputs)["label"].numpy()
            rows.append((name, batch,
                         repeats * batch / (time.perf_counter() - start)))
    print("\n| server side of | batch | predictions / s |")
    print("|---|---|---|")
    for name, batch, rate in rows:
        print(f"| {name} | {batch} | {rate:,.0f} |")


def main(argv):
    del argv
    from tfdptext import models

    # What it prints (its tables) is kept as a provenance record,
    # benchmarks/results/export_latency_lengths.json or
    # export_latency_<max_length>.json.
    if FLAGS.lengths:
        lengths = sorted({int(n) for n in FLAGS.lengths} |
                         {FLAGS.max_length})
        with host.recording(name="export_latency_lengths",
                            table_names=FLAGS.table_names):
            lengths_benchmark(lengths)
        return
    with host.recording(name=f"export_latency_{FLAGS.max_length}",
                        table_names=FLAGS.table_names):
        features = models.load_tokenizer(max_length=FLAGS.max_length)(
            [TEXT])
        splits = fixed_length_table(features)
        if FLAGS.server:
            server_throughput(splits, features)


if __name__ == "__main__":
    app.run(main)
