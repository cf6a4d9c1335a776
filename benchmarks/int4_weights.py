#!/usr/bin/env python
"""The phone model with 4-bit weights (tfdptext-export --quantization=int4)
beside the int8 and float32 exports of the same run: sizes, releases and
accuracy on the same inputs, Python's interpreter latency.

    python benchmarks/int4_weights.py --int4_dir=DIR --int8_dir=DIR \
        --float32_dir=DIR --accuracy_file=examples/reviews_test.csv \
        [--rounds=10 --block=5]

The three directories are tfdptext-export outputs of the SAME run
(`--quantization=int4`, `int8`, `float32`; the int4 one is the float32
conversion with its weights rewritten by `tfdptext.export.int4`). Reported:
the phone models' sizes and zstd (level 3) sizes; on the CSV's texts with
the SAME token ids and random words for all three, how many releases equal
the int8 model's and the float32 model's, and each model's accuracy (the
server's label for its release against the CSV's label); whether the int4
file is exactly `tfdptext.export.int4.rewrite` of the float32 one; Python's
interpreter latency of int8 and int4 (1 thread, interleaved rounds). The
page's first load with the int4 model: benchmarks/page_size.py; the
browser beside Python: benchmarks/browser_latency.py.
"""

import os
import random
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import browser_latency  # noqa: E402 (labelled_feeds; its flags)
import machine as host  # noqa: E402
import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("int4_dir", None, "The int4 export.", required=True)
flags.DEFINE_string("int8_dir", None, "The int8 export of the same run.",
                    required=True)
flags.DEFINE_string("float32_dir", None, "The float32 export of the same "
                    "run.", required=True)
# --accuracy_file, --rounds and --block: browser_latency.py's flags.

PHONE = os.path.join("user", "privatizer.tflite")
MODELS = ("int4", "int8", "float32")


def main(argv):
    del argv
    if not FLAGS.accuracy_file:
        raise SystemExit("int4_weights: give --accuracy_file (a CSV with "
                         "text and label columns).")
    import zstandard
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import int4
    from tfdptext.export.local import ExportedPipeline
    from tfdptext.models import secure

    pipeline = ExportedPipeline(FLAGS.int8_dir, num_threads=1)
    files = {name: os.path.join(getattr(FLAGS, f"{name}_dir"), PHONE)
             for name in MODELS}
    interpreters = {name: Interpreter(model_path=path, num_threads=1)
                    for name, path in files.items()}
    sizes, content = {}, {}
    for name, path in files.items():
        with open(path, "rb") as f:
            content[name] = f.read()
        sizes[name] = {"bytes": len(content[name]), "zstd_3": len(
            zstandard.ZstdCompressor(level=3).compress(content[name]))}
    # The int4 export is the float32 export's file with its weights
    # rewritten, nothing else (both converted from the same run).
    rewritten = int4.rewrite(content["float32"])[0] == content["int4"]
    truth, feeds = browser_latency.labelled_feeds(pipeline,
                                                  FLAGS.accuracy_file)
    releases = {name: [] for name in interpreters}
    for model, feed in feeds:
        for name, interpreter in interpreters.items():
            releases[name].append(interpreter.get_signature_runner(
                model.signature)(**feed)[pipeline.spec.release])
    same = {}
    for name, released in releases.items():
        labels = pipeline.serve({pipeline.spec.release: np.concatenate(
            released)})["label"]
        same[name] = {
            **{f"identical_to_{other}": sum(
                bool(np.array_equal(a, b))
                for a, b in zip(released, releases[other]))
               for other in ("int8", "float32")},
            "accuracy": float(np.mean(np.array(labels) == truth))}
    latency = time_python(pipeline, interpreters, secure)
    result = {"sizes": sizes, "int4_is_rewrite_of_float32": rewritten,
              "texts": len(feeds),
              "file": FLAGS.accuracy_file,
              "same_inputs": same, "python_ms_round_medians": latency}
    host.write_json(None, result, name="web-int4-weights",
                    table=accuracy_table(sizes, same, len(feeds)))
    print({k: result[k] for k in ("sizes", "int4_is_rewrite_of_float32",
                                  "same_inputs")})
    for key, values in latency.items():
        print(key, f"{np.median(values):.2f} ({min(values):.2f}-"
              f"{max(values):.2f})")


def accuracy_table(sizes, same, texts):
    """The docs' table: each export's phone model, its size and, on the
    same inputs, its releases and accuracy."""
    rows = []
    for name in MODELS:
        size = sizes[name]
        rows.append([
            name + (" (the page's)" if name == "int4" else ""),
            f"{size['bytes'] / 2**20:.2f}", f"{size['zstd_3'] / 2**20:.2f}",
            f"{same[name]['identical_to_int8']} / {texts}",
            f"{same[name]['identical_to_float32']} / {texts}",
            f"{same[name]['accuracy']:.3f}"])
    return {"columns": ["weights", "phone model MiB", "zstd (level 3) MiB",
                        "releases equal to int8's", "equal to float32's",
                        f"accuracy ({texts} test texts)"],
            "rows": rows}


def time_python(pipeline, interpreters, secure):
    """{"LENGTH NAME": [round medians, ms]} for int8 and int4."""
    settings = [(m.length, name) for m in pipeline.models
                for name in ("int8", "int4")]
    medians = {f"{length} {name}": [] for length, name in settings}
    rng = random.Random(0)
    for _ in range(FLAGS.rounds):
        rng.shuffle(settings)
        for length, name in settings:
            model = pipeline.model_for(length)
            run = interpreters[name].get_signature_runner(model.signature)
            ids = np.full((1, length), 2307, np.int32)
            ids[0, 0], ids[0, -1] = 101, 102
            mask = np.ones((1, length), np.int32)
            times = []
            for i in range(FLAGS.block + 1):
                words = secure.os_random_words([1, model.random_words])
                start = time.perf_counter()
                run(token_ids=ids, padding_mask=mask, random_words=words)
                if i:
                    times.append(1000 * (time.perf_counter() - start))
            medians[f"{length} {name}"].append(float(np.median(times)))
    return medians


if __name__ == "__main__":
    app.run(main)
