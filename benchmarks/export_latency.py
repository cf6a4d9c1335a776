#!/usr/bin/env python
"""Size and latency of the exported phone model, and server throughput.

Builds MiniLM split models (weights as loaded: latency does not depend on
training), wraps the user side as the exporter does (fixed length), converts
to TFLite float32 and dynamic-range int8, and times single-sentence invokes
in ai-edge-litert's plain Interpreter with 1 and 2 threads. Also times the
server side (as a SavedModel signature) in predictions per second.

    python benchmarks/export_latency.py --max_length=128 --invokes=200

`--noise_source` picks the phone model's randomness: `input` (the default
export: `random_words` from the app, checked in the graph) and/or
`internal` (TFLite's own RANDOM_* ops).
"""

import datetime
import os
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("max_length", 128, "Sequence length.")
flags.DEFINE_integer("invokes", 200, "Timed invokes per setting.")
flags.DEFINE_integer("server_batch", 256, "Server batch size.")
flags.DEFINE_multi_string("split", ["sequence_representation",
                                    "token_representation"],
                          "Split points to measure.")
flags.DEFINE_multi_enum("noise_source", ["input"], ["input", "internal"],
                        "Phone model randomness to measure.")
flags.DEFINE_multi_enum("weights", ["float32", "int8"], ["float32", "int8"],
                        "Phone model weights to measure.")
flags.DEFINE_bool("server", True, "Also time the server side.")


def _latency(tflite_bytes, feed, threads, invokes):
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=tflite_bytes,
                         num_threads=threads).get_signature_runner()
    for _ in range(10):
        runner(**feed)
    times = []
    for _ in range(invokes):
        start = time.perf_counter()
        runner(**feed)
        times.append(time.perf_counter() - start)
    return np.percentile(times, 50) * 1e3, np.percentile(times, 95) * 1e3


def main(argv):
    del argv
    import tensorflow as tf

    from tfdptext import layers, models
    from tfdptext.export import exporter, tflite
    from tfdptext.models import secure

    length = FLAGS.max_length
    tokenizer = models.load_tokenizer(max_length=length)
    text = ("the quarterly report said revenue grew while costs fell , and "
            "analysts expect the company to raise its forecast again ") * 4
    features = tokenizer([text])
    feed = {"token_ids": features["token_ids"].numpy(),
            "padding_mask": features["padding_mask"].numpy()}
    print(f"{datetime.date.today().isoformat()}; MiniLM-L6-H384, length "
          f"{length}, batch 1, {FLAGS.invokes} invokes after 10 warm-up; "
          f"{int(feed['padding_mask'].sum())} real tokens")
    print("| user model | randomness | weights | size MiB | threads | p50 ms "
          "| p95 ms |")
    print("|---|---|---|---|---|---|---|")
    server_rows = []
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
                    p50, p95 = _latency(model_bytes, model_feed, threads,
                                        FLAGS.invokes)
                    print(f"| {name} | {source} | {weights} | "
                          f"{len(model_bytes) / 2**20:.1f} | {threads} | "
                          f"{p50:.2f} | {p95:.2f} |")
        if not FLAGS.server:
            continue
        released = split.user(features)
        dim = 384
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "server")
            exporter._write_server(split.server, split_point, length, dim,
                                   path)
            serve = tf.saved_model.load(path).signatures["serving_default"]
            batch = FLAGS.server_batch
            if split_point == "sequence_representation":
                inputs = {"private_representation": tf.repeat(
                    released, batch, axis=0)}
            else:
                inputs = {"token_embeddings": tf.repeat(
                    released["token_embeddings"], batch, axis=0),
                          "padding_mask": tf.repeat(
                    features["padding_mask"], batch, axis=0)}
            serve(**inputs)
            start = time.perf_counter()
            repeats = 3
            for _ in range(repeats):
                serve(**inputs)["label"].numpy()
            rate = repeats * batch / (time.perf_counter() - start)
            server_rows.append((name, batch, rate))
    print("\n| server side of | batch | predictions / s |")
    print("|---|---|---|")
    for name, batch, rate in server_rows:
        print(f"| {name} | {batch} | {rate:,.0f} |")


if __name__ == "__main__":
    app.run(main)
