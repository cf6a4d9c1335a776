#!/usr/bin/env python
"""The phone model in the browser (LiteRT.js, WebAssembly) beside the
Python LiteRT interpreter, on the same machine, at every exported length.

    python benchmarks/browser_latency.py [--export_dir=DIR]

Without --export_dir it makes the README quickstart's export with MiniLM
(code release, epsilon 4, max_length 64: lengths 16, 32, 64; 4-bit weights,
as the README exports it), from a run trained on 32 examples (latency does
not depend on the weights' values) in a temporary directory
(--quantization=int8 or float32: those weights). The
export is served by tfdptext-serve's app in
a thread and its page opened in headless Chromium (tests/chromium.py).

Per length, one call is what an app's call costs once it has its token
ids and its random words: the inputs copied in, the model run, the release
read out (browser: `new Tensor(...)` x 3, `model.run(signature, ...)`,
`toTypedArray`, `delete`; Python: ai-edge-litert's signature runner, 1
thread, XNNPACK). tfdptext-serve's page is cross-origin isolated, so
LiteRT.js runs its threaded wasm with its default thread count (the
browser's navigator.hardwareConcurrency, recorded). The random words are filled before
the timed section in both. The two runtimes take turns: every round runs a
block of --block calls of each (length, runtime) in a new random order, so
that the machine's load hits both alike; p50 pools all rounds, "paired"
is the median over rounds of the ratio of the two runtimes' round medians.
Also timed: a whole `privatize(text)` of the web client (tokenize, fill
the words from crypto.getRandomValues, run) beside ExportedPipeline's.
With --accuracy_file (a CSV with text and label columns, e.g. the
quickstart's examples/reviews_test.csv), every text also goes through both
runtimes with the SAME token ids and random words: the share of identical
releases, and each runtime's accuracy (the server's label for its release
against the CSV's label). Writes the results (benchmarks/results/
browser-latency-<quantization>.json, a table docs/benchmarks.md shows).
"""

import datetime
import os
import random
import sys
import tempfile
import threading
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import machine as host
import numpy as np
from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import chromium  # noqa: E402 (tests/chromium.py)

FLAGS = flags.FLAGS
flags.DEFINE_string("export_dir", None, "An export to time (default: make "
                    "the quickstart's with MiniLM in a temporary directory).")
flags.DEFINE_enum("quantization", "int4", ["int4", "int8", "float32"],
                  "The made export's weights (tfdptext-export's flag; int4: "
                  "the README quickstart's).")
flags.DEFINE_integer("rounds", 20, "Rounds.")
flags.DEFINE_integer("block", 10, "Timed calls per setting and round.")
flags.DEFINE_bool("isolated", True, "Serve the page cross-origin isolated "
                  "(tfdptext-serve's headers: LiteRT.js's threaded wasm); "
                  "--noisolated strips the headers (one thread).")
flags.DEFINE_string("accuracy_file", None, "A CSV (text, label) run "
                    "through both runtimes with the same inputs.")
flags.DEFINE_string("text", "The delivery was fast and the staff were "
                    "friendly.", "The sentence of the whole-privatize timing.")

BROWSER_BLOCK = """
const [signature, length, count, repeat] = args;
const {Tensor} = await import('@litertjs/core');
const client = window.tfdptextClient;
const ids = new Int32Array(length).fill(2307);
ids[0] = 101; ids[length - 1] = 102;
const mask = new Int32Array(length).fill(1);
const times = [];
for (let i = 0; i <= repeat; i++) {
  const words = new Int32Array(count);
  crypto.getRandomValues(new Uint8Array(words.buffer));
  const start = performance.now();
  const inputs = {token_ids: new Tensor(ids, [1, length]),
                  padding_mask: new Tensor(mask, [1, length]),
                  random_words: new Tensor(words, [1, count])};
  const outputs = await client.model.run(signature, inputs);
  for (const t of Object.values(outputs)) { t.toTypedArray(); t.delete(); }
  for (const t of Object.values(inputs)) t.delete();
  if (i > 0) times.push(performance.now() - start);  // the first warms up
}
return times;
"""

BROWSER_SETUP = """
return {crossOriginIsolated: self.crossOriginIsolated,
        hardwareConcurrency: navigator.hardwareConcurrency,
        wasm: performance.getEntriesByType('resource').map((e) => e.name)
          .filter((n) => n.endsWith('.wasm')).map((n) => n.split('/').pop())};
"""

BROWSER_PRIVATIZE = """
const [text, repeat] = args;
const times = [];
for (let i = 0; i <= repeat; i++) {
  const start = performance.now();
  await window.tfdptextClient.privatize(text);
  if (i > 0) times.push(performance.now() - start);
}
return times;
"""


def make_export(base):
    """The quickstart's export with MiniLM, from a short run."""
    from tfdptext import data
    from tfdptext import training
    from tfdptext.export import exporter

    corpus = data.load_dataset(
        "csv", train_file=os.path.join(ROOT, "examples", "reviews_train.csv"),
        test_file=os.path.join(ROOT, "examples", "reviews_test.csv"))
    config = training.TrainConfig(
        mode="robust", release="code", epsilon=4.0, max_length=64,
        batch_size=16, epochs=1, max_train_examples=32, max_dev_examples=16)
    run = os.path.join(base, "run")
    training.train(config, run, dataset=corpus, verbose=0)
    out = os.path.join(base, "export")
    exporter.export_run(run, out, quantization=FLAGS.quantization)
    return out


def python_block(runner, length, count, repeat):
    from tfdptext.models import secure

    ids = np.full((1, length), 2307, np.int32)
    ids[0, 0], ids[0, -1] = 101, 102
    mask = np.ones((1, length), np.int32)
    times = []
    for i in range(repeat + 1):
        words = secure.os_random_words([1, count])
        start = time.perf_counter()
        runner(token_ids=ids, padding_mask=mask, random_words=words)
        if i:
            times.append(1000 * (time.perf_counter() - start))
    return times


def python_privatize(pipeline, text, repeat):
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        pipeline.privatize([text])
        if i:
            times.append(1000 * (time.perf_counter() - start))
    return times


def not_isolated(wsgi_app):
    """`wsgi_app` without the cross-origin isolation headers."""
    from tfdptext.rest import server

    def call(environ, start_response):
        def start(status, headers, exc_info=None):
            return start_response(status, [
                (k, v) for k, v in headers
                if k not in server.ISOLATION_HEADERS], exc_info)
        return wsgi_app(environ, start)
    return call


def labelled_feeds(pipeline, path):
    """The CSV `path`'s texts as an app feeds them: (true label indices,
    [(PhoneModel, {token_ids, padding_mask, random_words})]), the random
    words fresh from the secure generator, once per text."""
    import csv

    from tfdptext.models import secure

    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    names = pipeline.label_names
    truth = np.array([names.index(r["label"]) if r["label"] in names
                      else int(r["label"]) for r in rows])
    features = pipeline.tokenizer([r["text"] for r in rows])
    ids = features["token_ids"].numpy()
    mask = features["padding_mask"].numpy()
    feeds = []
    for i in range(len(rows)):
        model = pipeline.model_for(int(mask[i].sum()))
        feeds.append((model, {
            "token_ids": ids[i:i + 1, :model.length],
            "padding_mask": mask[i:i + 1, :model.length],
            "random_words": secure.os_random_words(
                [1, model.random_words])}))
    return truth, feeds


def same_input_releases(driver, pipeline, path):
    """Each text of the CSV `path` through both runtimes with the same
    token ids and random words: {agreement, accuracy per runtime, n}."""
    truth, feeds = labelled_feeds(pipeline, path)
    python = [pipeline.runners[model.length](**feed)[pipeline.spec.release]
              for model, feed in feeds]
    browser = [np.array(r[pipeline.spec.release]).reshape(p.shape).astype(
        p.dtype) for r, p in zip(chromium.run_phone_model(
            driver, [(model.signature, feed) for model, feed in feeds]),
            python)]
    same = sum(bool(np.array_equal(a, b)) for a, b in zip(browser, python))
    accuracy = {}
    for where, releases in (("browser", browser), ("python", python)):
        labels = pipeline.serve({pipeline.spec.release: np.concatenate(
            releases)})["label"]
        accuracy[where] = float(np.mean(np.array(labels) == truth))
    return {"texts": len(feeds), "identical_releases": same,
            "accuracy": accuracy, "file": path}


def main(argv):
    del argv
    from tfdptext.export.local import ExportedPipeline
    from tfdptext.rest import server

    reason = chromium.missing()
    if reason:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory() as tmp:
        out = FLAGS.export_dir or make_export(tmp)
        pipeline = ExportedPipeline(out, num_threads=1)
        models = [m for m in pipeline.manifest["user"]["models"]]
        served = server.ServingApp(server.ServedModel(out), chromium.WEB)
        httpd = server.make_server(served if FLAGS.isolated else
                                   not_isolated(served), "127.0.0.1", 0)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        driver = chromium.launch(os.path.join(tmp, "profile"))
        try:
            chromium.open_page(
                driver, f"http://127.0.0.1:{httpd.server_port}/")
            setup = chromium.run_async(driver, BROWSER_SETUP)
            same = (same_input_releases(driver, pipeline,
                                        FLAGS.accuracy_file)
                    if FLAGS.accuracy_file else None)
            times = {(m["length"], where): [] for m in models
                     for where in ("browser", "python")}
            rounds = {key: [] for key in times}
            rng = random.Random(0)
            for _ in range(FLAGS.rounds):
                settings = list(times)
                rng.shuffle(settings)
                for length, where in settings:
                    [model] = [m for m in models if m["length"] == length]
                    count = model["randomness"]["words"]
                    if where == "browser":
                        block = chromium.run_async(
                            driver, BROWSER_BLOCK, model["signature"],
                            length, count, FLAGS.block)
                    else:
                        block = python_block(pipeline.runners[length],
                                             length, count, FLAGS.block)
                    times[(length, where)] += block
                    rounds[(length, where)].append(float(np.median(block)))
            whole = {"browser": [], "python": []}
            for _ in range(FLAGS.rounds):
                whole["browser"] += chromium.run_async(
                    driver, BROWSER_PRIVATIZE, FLAGS.text, FLAGS.block)
                whole["python"] += python_privatize(pipeline, FLAGS.text,
                                                    FLAGS.block)
        finally:
            driver.quit()
            httpd.shutdown()
        report(models, times, rounds, whole, pipeline, setup, same)


def _range(values, digits):
    """'median (min-max)' of `values`."""
    return (f"{np.median(values):.{digits}f} ({np.min(values):.{digits}f}-"
            f"{np.max(values):.{digits}f})")


def report(models, times, rounds, whole, pipeline, setup, same):
    import importlib.metadata

    threads = setup["hardwareConcurrency"] if setup[
        "crossOriginIsolated"] else 1
    quantization = pipeline.manifest["user"]["quantization"]
    print(f"Phone model: {quantization}, "
          f"{pipeline.manifest['split_point']} release, "
          f"{pipeline.manifest['mechanism']}.")
    print(f"Machine: {host.cpu_name()}; load average "
          f"{os.getloadavg()[0]:.1f}. Date: "
          f"{datetime.date.today().isoformat()}. Chromium "
          f"{os.popen('chromium --version 2>/dev/null').read().split()[1:2]}"
          f", @litertjs/core 2.5.3 ({', '.join(setup['wasm'])}, "
          f"cross-origin isolated: {setup['crossOriginIsolated']}), "
          f"ai-edge-litert {importlib.metadata.version('ai-edge-litert')} "
          f"(1 thread). {FLAGS.rounds} rounds x {FLAGS.block} calls per "
          "setting.\n")
    columns = ["weights", "length", "browser ms, median of rounds (range)",
               "Python ms, median of rounds (range)",
               "browser / Python, median over rounds (range)"]
    rows = []
    for model in models:
        length = model["length"]
        web, py = (np.array(rounds[(length, w)])
                   for w in ("browser", "python"))
        rows.append([f"{quantization}, {threads} browser thread"
                     f"{'s' if threads > 1 else ''}", str(length),
                     _range(web, 2),
                     _range(py, 2), _range(web / py, 1)])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    host.write_json(None, {
        "browser": {**setup, "litert_threads": threads},
        "ms": {f"{length} {where}": [float(t) for t in values]
               for (length, where), values in times.items()},
        "round_medians": {f"{length} {where}": values
                          for (length, where), values in rounds.items()},
        "whole_privatize_ms": {k: [float(t) for t in v]
                               for k, v in whole.items()},
        "same_input_releases": same},
        name=f"browser-latency-{quantization}"
        + ("" if FLAGS.isolated else "-one-thread"),
        table={"columns": columns, "rows": rows})
    web, py = np.median(whole["browser"]), np.median(whole["python"])
    tokens = int(pipeline.tokenizer([FLAGS.text])["padding_mask"]
                 .numpy().sum())
    print(f"\nWhole privatize({FLAGS.text!r}) ({tokens} tokens, length "
          f"{pipeline.length_for(tokens)}): browser p50 {web:.2f} ms "
          f"(tokenize, crypto.getRandomValues, run), Python "
          f"ExportedPipeline.privatize p50 {py:.2f} ms; ratio "
          f"{web / py:.2f}.")
    if same:
        print(f"Same inputs, {same['texts']} texts of {same['file']}: "
              f"{same['identical_releases']} identical releases; accuracy "
              f"browser {same['accuracy']['browser']:.3f}, Python "
              f"{same['accuracy']['python']:.3f}.")


if __name__ == "__main__":
    app.run(main)
