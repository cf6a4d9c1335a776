#!/usr/bin/env python
"""Privatization throughput on this machine.

- d_chi text-to-text over the MiniLM WordPiece vocabulary (30,522 x 384),
  exact nearest neighbour, a batch of 10,000 tokens: FAISS (offline path,
  1 and 2 threads) and in-graph (`DChiTextPrivatizer` in a tf.function).
- LaplaceNoise (with MinMaxNormalize) on 384-d representations.

    python benchmarks/privatization_throughput.py [--eta=100] [--repeats=5]

Prints a markdown table and writes JSON to --output (optional).
"""

import datetime
import os
import platform
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine as host  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_float("eta", 100.0, "d_chi eta.")
flags.DEFINE_integer("num_tokens", 10000, "Tokens per batch.")
flags.DEFINE_integer("num_representations", 10000,
                     "384-d representations per Laplace batch.")
flags.DEFINE_integer("repeats", 5, "Timed repeats (best and median kept).")
flags.DEFINE_string("output", None, "Optional JSON output path.")


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _time(fn, repeats):
    fn()  # warm-up (tracing, index warm-up)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[0], times[len(times) // 2]


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    import faiss
    import numpy as np
    import tensorflow as tf

    from tfdptext import data, layers, models, offline

    tokenizer = models.load_tokenizer(max_length=64)
    table = models.token_embedding_table(models.load_backbone())
    special = tokenizer.special_token_ids
    # Real tokens: the synthetic corpus tokenized, regular tokens only.
    texts = data.load_synthetic(num_examples=4000).splits["train"].texts
    ids = tokenizer(texts)["token_ids"].numpy().ravel()
    ids = ids[~np.isin(ids, special)]
    ids = np.resize(ids, FLAGS.num_tokens).astype(np.int32)
    n = FLAGS.num_tokens
    results = []

    for threads in (1, 2):
        corpus = offline.DChiCorpusPrivatizer(table, FLAGS.eta, special,
                                              num_threads=threads)
        best, median = _time(lambda: corpus(ids), FLAGS.repeats)
        unchanged = float((corpus(ids) == ids).mean())
        results.append({"what": f"d_chi text-to-text, FAISS IndexFlatL2, "
                        f"{threads} thread{'s' if threads > 1 else ''}",
                        "items": n, "unit": "tokens",
                        "best_s": best, "median_s": median,
                        "unchanged_share": unchanged})

    privatizer = layers.DChiTextPrivatizer(FLAGS.eta, table,
                                           special_token_ids=special)
    batch = tf.constant(ids[None, :])
    run = tf.function(lambda x: privatizer(x))
    best, median = _time(lambda: run(batch).numpy(), FLAGS.repeats)
    unchanged = float((run(batch).numpy()[0] == ids).mean())
    results.append({"what": "d_chi text-to-text, in-graph "
                    "(`DChiTextPrivatizer`: matmul + ARG_MIN), tf.function, "
                    f"TF default threads ({os.cpu_count()})",
                    "items": n, "unit": "tokens", "best_s": best,
                    "median_s": median, "unchanged_share": unchanged})

    reps = np.random.default_rng(0).normal(
        size=(FLAGS.num_representations, 384)).astype(np.float32)
    for name, stack in (
            ("`LaplaceNoise`", [layers.LaplaceNoise(1.0)]),
            ("`MinMaxNormalize` + `LaplaceNoise`",
             [layers.MinMaxNormalize(), layers.LaplaceNoise(1.0)])):
        def apply(x, stack=stack):
            for layer in stack:
                x = layer(x)
            return x
        fn = tf.function(apply)
        x = tf.constant(reps)
        best, median = _time(lambda: fn(x).numpy(), FLAGS.repeats)
        results.append({"what": f"{name} on 384-d representations, "
                        "tf.function", "items": len(reps),
                        "unit": "representations", "best_s": best,
                        "median_s": median})

    machine = (f"{_cpu_name()}, {os.cpu_count()} cores, "
               f"TF {tf.__version__}, faiss {faiss.__version__}")
    date = datetime.date.today().isoformat()
    print(f"Machine: {machine}; date: {date}; eta = {FLAGS.eta:g}")
    print("| what | batch | per second (best) | per second (median) | "
          "unchanged share |")
    print("|---|---|---|---|---|")
    rows = []
    for r in results:
        r["per_second_best"] = r["items"] / r["best_s"]
        r["per_second_median"] = r["items"] / r["median_s"]
        share = (f"{r['unchanged_share']:.3f}" if "unchanged_share" in r
                 else "")
        rows.append([r["what"], f"{r['items']:,} {r['unit']}",
                     f"{r['per_second_best']:,.0f}",
                     f"{r['per_second_median']:,.0f}", share])
        print("| " + " | ".join(rows[-1]) + " |")
    # The docs' table (docs/benchmarks.md, "Privatization throughput").
    host.write_json(FLAGS.output, {"machine": machine, "date": date,
                                   "eta": FLAGS.eta, "results": results},
                    name="privatization-throughput-foundation",
                    table={"columns": ["what", "batch", "per second (best)",
                                       "per second (median)",
                                       "unchanged share"], "rows": rows})


if __name__ == "__main__":
    app.run(main)
