#!/usr/bin/env python
"""What the web page transfers: its first load and a reload, in Chromium.

    python benchmarks/page_size.py [--export_dir=DIR]

Without --export_dir it makes the README quickstart's export with MiniLM
(code release, epsilon 4, max_length 64: lengths 16, 32, 64; int4, as the
README exports it) as
benchmarks/browser_latency.py does. The export is served by
tfdptext-serve's app in a thread and its page opened in headless Chromium
(tests/chromium.py) with a fresh profile, then loaded again. Each load's
bytes come from the browser's Resource Timing entries of the page and
every file it fetched: `transferSize` (what crossed the network, headers
included: gzip bodies where the server compressed them, only headers for
a 304), `encodedBodySize` (the body as sent) and `decodedBodySize` (the
file's own size, what an uncompressed server sends). Writes the JSON
(with the machine and date) that docs/guides/export.md quotes:
benchmarks/results/page_size.json for an int4 export (the README's),
page_size-<quantization>.json for another.
"""

import datetime
import json
import os
import sys
import tempfile
import threading

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import browser_latency  # noqa: E402 (its flags and make_export)
import machine as host  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

FLAGS = flags.FLAGS

ENTRIES = """
const entries = [...performance.getEntriesByType('navigation'),
                 ...performance.getEntriesByType('resource')];
return entries.map((e) => ({url: e.name, transfer: e.transferSize,
  encoded: e.encodedBodySize, decoded: e.decodedBodySize}));
"""


def load(driver, url):
    """The Resource Timing entries of one load of the page."""
    import chromium

    chromium.open_page(driver, url)
    rows = chromium.run_async(driver, ENTRIES)
    origin = url.rstrip("/")
    for row in rows:
        row["url"] = row["url"].replace(origin, "")
    return {"files": rows,
            "transfer_bytes": sum(r["transfer"] for r in rows),
            "encoded_bytes": sum(r["encoded"] for r in rows),
            "decoded_bytes": sum(r["decoded"] for r in rows)}


def mib(n):
    return round(n / 2**20, 2)


def _bytes(n):
    return f"{n:,} bytes ({mib(n):.2f} MiB)"


def size_table(first, again, quantization):
    """The docs' table: each load, and the phone model in the first."""
    [model] = [f for f in first["files"]
               if f["url"].endswith("/privatizer.tflite")]
    return {"columns": ["load", "transferred", "the files' own size"],
            "rows": [
                ["first (empty cache)", _bytes(first["transfer_bytes"]),
                 _bytes(first["decoded_bytes"])],
                [f"of which the phone model ({quantization})",
                 _bytes(model["transfer"]), _bytes(model["decoded"])],
                [f"again (cached; {len(again['files'])} requests)",
                 _bytes(again["transfer_bytes"]), "-"]]}


def main(argv):
    del argv
    import chromium
    from tfdptext.rest import server

    reason = chromium.missing()
    if reason:
        sys.exit(f"page_size: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        out = FLAGS.export_dir or browser_latency.make_export(tmp)
        with open(os.path.join(out, "manifest.json")) as f:
            quantization = json.load(f)["user"]["quantization"]
        httpd = server.make_server(server.ServingApp(
            server.ServedModel(out), chromium.WEB), "127.0.0.1", 0)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_port}/"
        driver = chromium.launch(os.path.join(tmp, "profile"))
        try:
            first = load(driver, url)
            again = load(driver, url)
        finally:
            driver.quit()
            httpd.shutdown()
    result = {
        "command": "python benchmarks/page_size.py" + (
            f" --export_dir={FLAGS.export_dir}" if FLAGS.export_dir else ""),
        "export": FLAGS.export_dir or (
            "the README quickstart's, MiniLM, code release, lengths 16, "
            "32, 64"),
        "quantization": quantization,
        "date": datetime.date.today().isoformat(),
        "machine": host.cpu_name(),
        "first_load": first, "reload": again,
        "summary_mib": {
            "first_load_transferred": mib(first["transfer_bytes"]),
            "first_load_uncompressed": mib(first["decoded_bytes"]),
            "reload_transferred": mib(again["transfer_bytes"])},
    }
    # The page's model (the README's, int4) is "page_size"; others are
    # named by their weights.
    host.write_json(None, result, name="page_size" + (
        "" if quantization == "int4" else f"-{quantization}"),
                    table=size_table(first, again, quantization))
    print(json.dumps(result["summary_mib"]))


if __name__ == "__main__":
    app.run(main)
