"""Deployment end to end: an export's phone model in headless Chromium
(LiteRT.js, the web client), its server model behind tfdptext-serve (TF
Serving's REST API), and the phone model's checks of its inputs.

One small export is shared by every test here: the README quickstart's
settings (code release, default lengths 16/32/64 at max_length 64, 4-bit
weights: --quantization=int4) on the tiny encoder, at epsilon 1 so that the
channel test has power. The
browser tests skip, with the reason, where Debian's chromium, its driver
or web/node_modules are missing (`make test` installs them).
"""

import csv
import datetime
import gzip
import json
import os
import re
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest
import zstandard
from ai_edge_litert.interpreter import Interpreter
from scipy import stats

import chromium
import eager_training
from tfdptext import data
from tfdptext import rundir
from tfdptext import training
from tfdptext.data import tokenizer_vectors
from tfdptext.export import exporter
from tfdptext.export.local import ExportedPipeline
from tfdptext.export.local import PhoneInputError
from tfdptext.export.local import UnknownTokensWarning
from tfdptext.models import input_checks
from tfdptext.models import secure
from tfdptext.privacy import budget as budget_lib
from tfdptext.privacy import categorical
from tfdptext.privacy import text_checks
from tfdptext.rest import server as rest_server
from tfdptext.rest import static as rest_static
import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPSILON = 1.0
TEXT = "The delivery was fast and the staff were friendly."
# 10 of its 21 tokens are [UNK] for the MiniLM vocabulary.
JAPANESE = "東京株式市場で日経平均株価が大幅に反落した"


@pytest.fixture(scope="module")
def export(tmp_path_factory, tiny_preset):
    """(export directory, manifest): the quickstart's settings, tiny."""
    base = tmp_path_factory.mktemp("web")
    corpus = data.load_dataset(
        "csv", train_file=os.path.join(ROOT, "examples", "reviews_train.csv"),
        test_file=os.path.join(ROOT, "examples", "reviews_test.csv"))
    config = training.TrainConfig(
        mode="robust", release="code", epsilon=EPSILON, preset=tiny_preset,
        max_length=64, batch_size=32, epochs=1, learning_rate=3e-3,
        max_train_examples=64, max_dev_examples=32)
    run = str(base / "quickstart")
    with eager_training.eager_fit():  # what it exports, not fit's graph
        training.train(config, run, dataset=corpus, verbose=0)
    out = str(base / "export")
    return out, exporter.export_run(run, out, quantization="int4")


class _Counting:
    """A ServedModel whose predictions are counted (what reached the
    server)."""

    def __init__(self, model):
        self.model = model
        self.predictions = 0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def predict(self, document, *args):
        self.predictions += 1
        return self.model.predict(document, *args)


@pytest.fixture(scope="module")
def app(export):
    model = _Counting(rest_server.ServedModel(export[0]))
    # zstd's fastest level: the same encoding as served by default, without
    # level 19's 12 CPU-seconds on LiteRT.js's wasm.
    return rest_server.ServingApp(model, web_dir=chromium.WEB, zstd_level=1)


@pytest.fixture(scope="module")
def client(app):
    from werkzeug.test import Client

    return Client(app)


def _post(client, body, path="/v1/models/quickstart:predict"):
    response = client.post(path, data=body if isinstance(body, str)
                           else json.dumps(body))
    return response.status_code, response.get_json()


# The export and the phone model's input checks.


def test_export_ships_test_vectors_and_input_status(export):
    out, manifest = export
    user = manifest["user"]
    assert user["lengths"] == [16, 32, 64]
    # 4-bit weights, as the quickstart ships them: the tiny encoder's token
    # embeddings (its other weights are under 1,024 values), read through
    # DEQUANTIZE; the exporter's checks ran on the rewritten file.
    assert user["quantization"] == "int4"
    assert user["int4_weights"]["gather"] == 1
    assert "DEQUANTIZE" in user["tflite_ops"]
    assert not [op for op in user["tflite_ops"] if op.startswith("RANDOM")]
    assert user["tokenizer_vectors"] == rundir.TOKENIZER_VECTORS
    assert rundir.TOKENIZER_VECTORS in manifest["files"]
    assert user["tokenizer"]["unicode_spaces"] is True
    for model in user["models"]:
        assert model["outputs"] == {"private_code": [1, "int32"],
                                    "input_status": [1, "int32"]}
    assert user["input_status"]["1"] == input_checks.STATUS_MEANINGS[1]
    vectors = json.load(open(os.path.join(out, rundir.TOKENIZER_VECTORS)))
    pipeline = ExportedPipeline(out)
    assert len(vectors["vectors"]) == len(tokenizer_vectors.CASES)
    for vector in vectors["vectors"]:
        ids = pipeline.tokenizer([vector["text"]])["token_ids"].numpy()[0]
        assert [int(i) for i in ids[:len(vector["token_ids"])]] == \
            vector["token_ids"]
        assert vector["token_ids"][0] == 101 and \
            vector["token_ids"][-1] == 102
    by_what = {v["what"]: v for v in vectors["vectors"]}
    assert by_what["truncation keeps [SEP]"]["truncated"]
    assert len(by_what["truncation keeps [SEP]"]["token_ids"]) == 64
    # The no-break space splits words (it used to make one [UNK]).
    assert 100 not in by_what["no-break space between words"]["token_ids"]


def test_phone_model_refuses_bad_token_inputs(export):
    out, manifest = export
    runner = Interpreter(model_path=os.path.join(
        out, rundir.PHONE_MODEL)).get_signature_runner("length_16")
    ids = np.array([[101, 2307, 2326, 102] + [0] * 12], np.int32)
    mask = (ids != 0).astype(np.int32)

    def run(token_ids, padding_mask):
        words = secure.os_random_words([1, manifest["user"]["models"][0][
            "randomness"]["words"]])
        out = runner(token_ids=np.asarray(token_ids, np.int32),
                     padding_mask=np.asarray(padding_mask, np.int32),
                     random_words=words)
        return int(out["input_status"][0]), int(out["private_code"][0])

    assert run(ids, mask)[0] == 0 and run(ids, mask)[1] >= 0
    other_sep = np.where(ids == 102, 2000, ids)
    for name, (token_ids, padding_mask, status) in {
            "larger vocabulary": (np.where(ids == 2307, 30522, ids), mask, 1),
            "negative id": (np.where(ids == 2307, -3, ids), mask, 1),
            "all-ones mask": (ids, np.ones_like(mask), 4),
            "mask of 2s": (ids, mask * 2, 2 | 4),
            "mask with a hole": (ids, mask * (np.arange(16) != 1), 2 | 4),
            "no [SEP]": (other_sep, mask, 8),
            "no [CLS]": (np.roll(ids, -1), np.roll(mask, -1), 8),
    }.items():
        got_status, code = run(token_ids, padding_mask)
        assert (got_status & status) == status and code == -1, name
    assert input_checks.describe_status(5) == [
        input_checks.STATUS_MEANINGS[1], input_checks.STATUS_MEANINGS[4]]
    # ExportedPipeline names the refusal instead of sending -1: here, a
    # tokenizer whose ids are off by the vocabulary's size.
    pipeline = ExportedPipeline(out)

    class Shifted:
        def __init__(self, tokenizer):
            self.tokenizer = tokenizer

        def __call__(self, texts):
            features = self.tokenizer(texts)
            return {**features, "token_ids": features["token_ids"] + 30522}

        def __getattr__(self, name):
            return getattr(self.tokenizer, name)

    pipeline.tokenizer = Shifted(pipeline.tokenizer)
    with pytest.raises(PhoneInputError, match="outside"):
        pipeline.privatize([TEXT])


def test_pipeline_and_predict_release_each_text_once(export, tmp_path,
                                                     monkeypatch):
    """ExportedPipeline.release and tfdptext-predict under the export's
    budget: nothing is charged for an empty text or a refused release; the
    same text again resends its stored release; [UNK] is warned about."""
    out, manifest = export
    assert manifest["budget"] == budget_lib.Budget.for_guarantee(
        manifest["guarantee"]).to_dict()
    assert manifest["budget"]["per_day"] == 10.0
    assert manifest["user"]["text_checks"]["unknown_share_limit"] == 0.25
    with pytest.raises(exporter.ExportError, match=r"`budget_per_day` "
                       r"\(0\.5\) is below the cost of one release"):
        exporter.export_run(os.path.join(os.path.dirname(out), "quickstart"),
                            str(tmp_path / "refused"), budget_per_day=0.5)
    assert not os.path.exists(tmp_path / "refused")
    pipeline = ExportedPipeline(out)
    path = tmp_path / "ledger.json"
    ledger = pipeline.ledger(str(path))
    for text in ("", "  \n\t", "\u200b"):
        with pytest.raises(text_checks.EmptyTextError, match="no token"):
            pipeline.release(text, ledger)
        with pytest.raises(text_checks.EmptyTextError, match=r"\[1\]"):
            pipeline.privatize([TEXT, text])
    assert not path.exists()  # nothing was ever charged
    with pytest.warns(UnknownTokensWarning, match="10 of 21 tokens"):
        pipeline.privatize([JAPANESE])
    first = pipeline.release(TEXT, ledger)
    again = pipeline.release(TEXT, ledger)
    assert (first.resent, again.resent) == (False, True)
    np.testing.assert_array_equal(first.release["private_code"],
                                  again.release["private_code"])
    assert ledger.spent() == pytest.approx((1.0, 1.0))

    def refused(*args):
        raise secure.RandomnessError("the words failed their checks")

    monkeypatch.setattr(pipeline, "_privatize_one", refused)
    with pytest.raises(secure.RandomnessError):
        pipeline.release("another text", ledger)
    assert ledger.spent() == pytest.approx((1.0, 1.0))  # returned
    predict = [sys.executable, os.path.join(ROOT, "export",
                                            "tfdptext-predict"),
               f"--export_dir={out}", f"--ledger={tmp_path / 'cli.json'}"]
    result = zygote.run([*predict, TEXT, TEXT, JAPANESE],
                        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("  released private_code") == 2
    assert "... (the release stored for this text today: a repeat, " \
        "nothing charged)" in result.stdout
    assert "warning: 10 of 21 tokens (48%, above 25%)" in result.stdout
    assert "epsilon 2 spent today (UTC day), 2 in total" in result.stdout
    empty = zygote.run([*predict, "new text", "   "],
                       capture_output=True, text=True, timeout=300)
    assert empty.returncode == 2 and "Text(s) [1] hold no token" in \
        empty.stderr and "Traceback" not in empty.stderr
    cli = pipeline.ledger(str(tmp_path / "cli.json"))
    assert cli.spent() == pytest.approx((2.0, 2.0))


# tfdptext-serve: TF Serving's REST API.


def test_rest_predict_in_row_and_columnar_form(client, export):
    _, manifest = export
    names = manifest["label_names"]
    status, body = _post(client, {"instances": [0, 1]})
    assert status == 200
    rows = body["predictions"]
    assert [r["label_name"] for r in rows] == [
        names[r["label"]] for r in rows]
    assert all(abs(sum(r["probabilities"]) - 1) < 1e-5 for r in rows)
    # Per row only what differs per row (what a code release's
    # probabilities are is said once, in the manifest).
    assert all(set(r) == {"probabilities", "label", "label_name"}
               for r in rows)
    assert "decoder's table row" in manifest["server"]["outputs"][
        "probabilities"]
    status, named = _post(client, {"instances": [{"private_code": 0},
                                                 {"private_code": 1}]})
    assert status == 200 and named == body
    status, columns = _post(client, {"signature_name": "serving_default",
                                     "inputs": {"private_code": [0, 1]}},
                            "/v1/models/quickstart/versions/1:predict")
    assert status == 200
    assert columns["outputs"]["label"] == [r["label"] for r in rows]
    assert columns["outputs"]["probabilities"] == [
        r["probabilities"] for r in rows]
    status, bare = _post(client, {"inputs": [1]})
    assert status == 200 and bare["outputs"]["label"] == [rows[1]["label"]]


@pytest.mark.parametrize("body, path, status, message", [
    ({"inputs": {"private_code": [-1]}}, None, 400,
     r"^tfdptext: refused release \(a code\): private_code holds a "
     r"negative value: -1 is the phone model's refusal"),
    ({"inputs": {"private_code": [0, 2]}}, None, 400,
     r"refused release \(a code\).*the model has 2 codes, 0 to 1; got 2$"),
    ({"inputs": {"private_code": [1.5]}}, None, 400,
     r"JSON Value: 1.5 Type: Number is not of expected type: int32"),
    ({"inputs": {"private_code": ["1"]}}, None, 400,
     r"Type: String is not of expected type: int32"),
    ({"inputs": {"private_code": [[1]]}}, None, 400,
     r"shape \[1, 1\]; the signature takes \[-1\]"),
    ({"inputs": {"private_code": [2**40]}}, None, 400, r"int32's range"),
    ({"inputs": {"token_ids": [1]}}, None, 400,
     r"input tensor alias not found in signature: token_ids\. Inputs "
     r"expected to be in the set \{private_code\}"),
    ({"instances": [[1], 2]}, None, 400, r"ragged"),
    ({"instances": []}, None, 400, r"non-empty"),
    ({"x": 1}, None, 400, r"Missing 'inputs' or 'instances' key"),
    ({"inputs": [1], "instances": [1]}, None, 400, r"Not both"),
    ({"inputs": [1], "signature_name": "other"}, None, 400,
     r'Serving signature name: "other" not found'),
    ("{not json", None, 400, r"JSON Parse error"),
    ("[1, 2]", None, 400, r"must be a JSON object"),
    ({"inputs": [1]}, "/v1/models/other:predict", 404,
     r"Servable not found for request: Latest\(other\)"),
    ({"inputs": [1]}, "/v1/models/quickstart/versions/2:predict", 404,
     r"Servable not found for request: Specific\(quickstart, 2\)"),
    ({"inputs": [1]}, "/v1/models/quickstart:classify", 400,
     r"predict signature"),
    ({"inputs": [1]}, "/v1/models/quickstart:explain", 400,
     r"Malformed request: POST"),
])
def test_rest_errors_take_tf_serving_shape(client, body, path, status,
                                           message):
    got_status, got = _post(client, body,
                            path or "/v1/models/quickstart:predict")
    assert got_status == status
    assert list(got) == ["error"] and re.search(message, got["error"]), got
    assert "Traceback" not in got["error"]


def test_status_metadata_and_files(client, export):
    out, manifest = export
    assert client.get("/v1/models/quickstart").get_json() == {
        "model_version_status": [{"version": "1", "state": "AVAILABLE",
                                  "status": {"error_code": "OK",
                                             "error_message": ""}}]}
    missing = client.get("/v1/models/quickstart/versions/3")
    assert missing.status_code == 404 and missing.get_json() == {
        "error": "Could not find version 3 of model quickstart"}
    signature = client.get("/v1/models/quickstart/metadata").get_json()[
        "metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["inputs"]["private_code"]["dtype"] == "DT_INT32"
    assert set(signature["outputs"]) == {"probabilities", "label",
                                         "label_name"}
    served = client.get("/export/manifest.json").get_json()
    assert "source_run" not in served and "command" not in served
    assert served["user"] == manifest["user"]
    model = client.get("/export/" + rundir.PHONE_MODEL)
    assert model.status_code == 200 and model.data == open(
        os.path.join(out, rundir.PHONE_MODEL), "rb").read()
    for path in ("/export/" + manifest["server"]["path"] + "/saved_model.pb",
                 "/export/../manifest.json", "/web/../setup.py",
                 "/web/node_modules/.package-lock.json", "/nothing"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "error" in response.get_json()
    page = client.get("/?export=/export/")
    assert page.status_code == 302
    assert page.headers["Location"].endswith("/web/index.html?export=/export/")
    # A text in the query is refused, never echoed (it would reach logs).
    for path in ("/?text=my+secret+diagnosis", "/web/index.html?text=my+"
                 "secret+diagnosis", "/web/?export=x&text=my%20secret"):
        refused = client.get(path)
        assert refused.status_code == 400, path
        assert refused.get_json() == {"error": rest_server.TEXT_IN_QUERY}
        assert b"secret" not in refused.data and "Location" not in \
            refused.headers
    if not chromium.missing():
        wasm = client.get("/web/node_modules/@litertjs/core/wasm/"
                          "litert_wasm_internal.wasm")
        assert wasm.headers["Content-Type"] == "application/wasm"


def test_an_internal_error_reaches_the_client_without_traceback(
        export, monkeypatch):
    from werkzeug.test import Client

    model = rest_server.ServedModel(export[0])

    def broken(document, *args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(model, "predict", broken)
    response = Client(rest_server.ServingApp(model)).post(
        "/v1/models/quickstart:predict", data='{"inputs": [1]}')
    assert response.status_code == 500
    assert response.get_json() == {"error": "Internal error in "
                                   "tfdptext-serve (its log has the "
                                   "details)."}


# Hardening: nesting, rows, the answer's size, version labels.


def test_deeply_nested_json_is_a_400_without_traceback(client, caplog):
    caplog.set_level("DEBUG", logger="tfdptext.serve")
    for body in ("[" * 100000 + "]" * 100000,
                 '{"inputs": ' + "[" * 100000 + "1" + "]" * 100000 + "}",
                 '{"inputs": {"private_code": "' + "[" * 50 + '"}}'):
        status, got = _post(client, body)
        assert status == 400, got
        assert "Traceback" not in got["error"]
    status, got = _post(client, "[" * 100000 + "]" * 100000)
    assert got == {"error": "JSON Parse error: the body nests arrays or "
                   "objects deeper than 16 levels (a release needs at "
                   "most 4)."}
    assert "Traceback" not in caplog.text and "Recursion" not in caplog.text


def test_rows_per_request_are_limited_and_answers_bounded(export):
    from werkzeug.test import Client

    model = rest_server.ServedModel(export[0])
    limited = Client(rest_server.ServingApp(model, max_rows=50))
    status, body = _post(limited, {"instances": [1] * 50})
    assert status == 200 and len(body["predictions"]) == 50
    # Per row: two probabilities, the label and its name; nothing that
    # repeats a sentence per row.
    assert len(json.dumps(body)) < 50 * 100
    for request in ({"instances": [1] * 51},
                    {"inputs": {"private_code": [0] * 51}},
                    {"inputs": [0] * 51}):
        status, got = _post(limited, request)
        assert status == 400
        assert got == {"error": "The request holds 51 rows; this server "
                       "takes at most 50 per request (tfdptext-serve "
                       "--max_rows): send them in several requests."}
    assert rest_server.ServingApp(model).max_rows == 1000
    with pytest.raises(rest_server.ServeError, match="max_rows"):
        rest_server.ServingApp(model, max_rows=0)


@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/models/quickstart/labels/stable:predict"),
    ("GET", "/v1/models/quickstart/labels/stable"),
    ("GET", "/v1/models/quickstart/labels/stable/metadata"),
])
def test_version_labels_answer_tf_servings_error(client, method, path):
    response = client.open(path, method=method, data='{"inputs": [1]}')
    assert response.status_code == 400
    assert response.get_json() == {
        "error": "Unrecognized servable version label: stable"}


def test_page_files_are_compressed_and_cacheable(client, export):
    path = "/export/" + rundir.TOKENIZER
    plain = client.get(path)
    packed = client.get(path, headers={"Accept-Encoding": "gzip, br"})
    assert plain.status_code == packed.status_code == 200
    assert "Content-Encoding" not in plain.headers
    assert packed.headers["Content-Encoding"] == "gzip"
    assert packed.headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(packed.data) == plain.data == open(
        os.path.join(export[0], rundir.TOKENIZER), "rb").read()
    assert len(packed.data) < len(plain.data)
    assert int(packed.headers["Content-Length"]) == len(packed.data)
    for response in (plain, packed):
        assert response.headers["Cache-Control"] == "no-cache"
        etag = response.headers["ETag"]
        again = client.get(path, headers={
            "If-None-Match": etag, "Accept-Encoding": response.headers.get(
                "Content-Encoding", "identity")})
        assert again.status_code == 304 and again.data == b""
    assert plain.headers["ETag"] != packed.headers["ETag"]
    head = client.head(path, headers={"Accept-Encoding": "gzip"})
    assert head.status_code == 200 and head.data == b""
    served = client.get("/export/manifest.json",
                        headers={"Accept-Encoding": "gzip"})
    assert served.headers["Content-Encoding"] == "gzip"
    assert client.get("/export/manifest.json", headers={
        "Accept-Encoding": "gzip", "If-None-Match": served.headers["ETag"]}
                      ).status_code == 304
    page = client.get("/web/index.html", headers={"Accept-Encoding": "gzip"})
    assert page.headers["Content-Encoding"] == "gzip"
    assert b"<html" in gzip.decompress(page.data).lower()
    # zstd where the client accepts it (browsers do), preferred to gzip.
    vocab = client.get(f"/export/{rundir.USER_DIR}/vocab.txt",
                       headers={"Accept-Encoding": "gzip, deflate, br, zstd"})
    assert vocab.headers["Content-Encoding"] == "zstd"
    assert vocab.headers["ETag"].endswith('-zstd"')
    raw = open(os.path.join(export[0], rundir.USER_DIR, "vocab.txt"),
               "rb").read()
    assert zstandard.ZstdDecompressor().decompress(vocab.data) == raw
    assert client.get(f"/export/{rundir.USER_DIR}/vocab.txt", headers={
        "Accept-Encoding": "zstd;q=0, gzip"}).headers[
            "Content-Encoding"] == "gzip"
    for level in (0, 20, True, "19"):
        with pytest.raises(ValueError, match="`zstd_level` must be None or "
                           r"an integer in \[1, 19\]"):
            rest_static.StaticFiles(zstd_level=level)
    # Cross-origin isolation on the page's files (LiteRT.js's threads).
    for response in (page, vocab, served):
        for name, value in rest_server.ISOLATION_HEADERS.items():
            assert response.headers[name] == value, name
    for outside in ("/web/../setup.py", "/web/%2e%2e/setup.py"):
        assert client.get(outside).status_code == 404


def _guide_command(program):
    """The argv of `program`'s command in docs/guides/export.md (an
    indented or fenced line starting with .venv/bin/<program>)."""
    text = open(os.path.join(ROOT, "docs", "guides", "export.md"),
                encoding="utf-8").read().replace("\\\n", " ")
    [line] = [line.strip() for line in text.splitlines()
              if line.strip().startswith(f".venv/bin/{program} ")]
    return line.split()[1:]


def _free_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_program_answers_the_guides_request(export):
    """`tfdptext-serve` as the export guide runs it (--port= a free port
    added), answering the guide's curl request. It runs forked from the
    zygote (no import of TensorFlow of its own); its first line says where
    it listens."""
    import signal
    import time

    port = _free_port()
    argv = [a.replace("exports/quickstart", export[0])
            for a in _guide_command("tfdptext-serve")] + [f"--port={port}"]
    process = zygote.Background(
        [sys.executable, os.path.join(ROOT, "export", "tfdptext-serve"),
         *argv], capture_output=True, text=True, timeout=300)
    url = f"http://127.0.0.1:{port}"
    try:
        request = urllib.request.Request(
            f"{url}/v1/models/quickstart:predict",
            data=json.dumps({"instances": [{"private_code": 1}]}).encode(),
            headers={"Content-Type": "application/json"})
        deadline = time.monotonic() + 240
        while True:
            try:
                answer = json.load(urllib.request.urlopen(request,
                                                          timeout=60))
                break
            except urllib.error.URLError as err:
                if isinstance(err, urllib.error.HTTPError) or \
                        time.monotonic() > deadline or \
                        not process.running():
                    raise
                time.sleep(0.2)
        assert answer["predictions"][0]["label_name"] in export[1][
            "label_names"]
        bad = urllib.request.Request(
            f"{url}/v1/models/quickstart:predict", data=b"{")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(bad, timeout=60)
        assert err.value.code == 400
        assert "JSON Parse error" in json.load(err.value)["error"]
    finally:
        if process.wait_started(60) and process.running():
            os.kill(process.pid, signal.SIGTERM)
    result = process.result(60)
    first = result.stdout.splitlines()[0]
    assert re.search(rf"serving {re.escape(url)}/ \(model quickstart, "
                     r"version 1\)", first), first + result.stderr[-2000:]


def test_guide_web_snippet_is_the_tested_code():
    """The export guide's web snippet is web/tfdptext/client.js's, verbatim
    (between its [guide:web] markers)."""
    source = open(os.path.join(chromium.WEB, "tfdptext", "client.js"),
                  encoding="utf-8").read()
    snippet = source.split("// [guide:web begin]\n")[1].split(
        "// [guide:web end]")[0]
    guide = open(os.path.join(ROOT, "docs", "guides", "export.md"),
                 encoding="utf-8").read()
    assert f"```js\n{snippet}```" in guide


# In the browser.


@pytest.fixture(scope="module")
def http(app):
    """The app on a free local port, in a thread: its base URL."""
    httpd = rest_server.make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    reason = chromium.missing()
    if reason:
        pytest.skip(reason)
    driver = chromium.launch(str(tmp_path_factory.mktemp("chromium")))
    yield driver
    driver.quit()


# The ledger's localStorage key (web/tfdptext/ledger.js).
LEDGER = "tfdptext.ledger/1"
SECRET = "Quokkas adore zanzibari marmalade at the harbour"


def _fresh_page(browser, http, fragment=""):
    """The page with an empty ledger (this origin's storage cleared)."""
    chromium.open_page(browser, f"{http}/web/index.html")
    browser.execute_script("localStorage.clear();")
    if fragment:
        chromium.open_page(browser, f"{http}/{fragment}")


def _ledger(browser):
    """The page's ledger as stored (None when none was written)."""
    raw = browser.execute_script(f"return localStorage.getItem('{LEDGER}');")
    return raw if raw is None else json.loads(raw)


def _spent(browser):
    """(spent today, spent in total) in the export's scope, in releases
    (the export's epsilon is 1 up to float32)."""
    state = _ledger(browser) or {"scopes": {}}
    scope = state["scopes"].get("epsilon/per_text", {"days": {},
                                                     "total": 0})
    return (round(sum(scope["days"].values()), 3), round(scope["total"], 3))


def _submit(browser, *texts):
    """Submits `texts` at once in the page: their outcomes."""
    return chromium.run_async(browser, "return await Promise.all("
                              "args.map((t) => window.tfdptextSubmit(t)));",
                              *texts)


def test_page_privatizes_and_the_text_never_leaves(browser, http, app,
                                                   export, caplog):
    """#text= is privatized on the device: no request the page makes (URL,
    headers, body; Chrome's Network events) holds a word of the text, while
    the page shows the server's label for its release."""
    _, manifest = export
    _fresh_page(browser, http)
    before = app.model.predictions
    chromium.requests(browser)  # drained: only this load's requests below
    chromium.open_page(browser, f"{http}/#text={urllib.parse.quote(SECRET)}")
    assert chromium.text_of(browser, "status") == \
        "sent; the server answered", chromium.text_of(browser, "status")
    assert chromium.text_of(browser, "label") in manifest["label_names"]
    sent = chromium.requests(browser)
    predict = [r for r in sent if r["method"] == "POST"]
    assert len(predict) == 1 and predict[0]["url"].endswith(
        "/v1/models/quickstart/versions/1:predict")
    assert json.loads(predict[0]["body"])["inputs"].keys() == {
        "private_code"}  # the release alone
    assert len(sent) >= 6  # the page, its scripts, the export's files
    # Cross-origin isolated: LiteRT.js's threaded WebAssembly ran it.
    assert browser.execute_script("return self.crossOriginIsolated;")
    assert [r for r in sent if r["url"].endswith(
        "/litert_wasm_threaded_internal.wasm")]
    words = {w.lower() for w in re.findall(r"\w+", SECRET) if len(w) > 2}
    for request in sent:
        seen = " ".join([request["url"], urllib.parse.unquote_plus(
            request["url"]), json.dumps(request["headers"]),
            request["body"]]).lower()
        assert not [w for w in words if w in seen], request
    # The fragment is gone from the address bar and history entry.
    assert "text=" not in browser.current_url
    release = chromium.text_of(browser, "release")
    assert re.match(r"code [01] \(one of 2 codes; private_code\) \(phone "
                    r"model of length 32, 17 tokens\)", release), release
    assert app.model.predictions == before + 1
    assert "table row for the released code" in chromium.text_of(
        browser, "answer")
    assert "1-LDP per text" in chromium.text_of(browser, "guarantee")
    assert chromium.text_of(browser, "budget") == (
        "Budget: epsilon 10 per UTC day and 100 in total (per_text; 10 and "
        "100 release(s) of epsilon 1).")
    assert re.search(r": epsilon 1 spent today, 1 in total .* Left: "
                     r"epsilon 9 today, 99 in total\.$",
                     chromium.text_of(browser, "ledger"))
    assert "Clearing this site's data (or a private window, another " \
        "browser or another device) erases it: the budget starts again" in \
        " ".join(chromium.text_of(browser, "storage").split())
    assert f"all {len(tokenizer_vectors.CASES)} test vectors" in \
        chromium.text_of(browser, "model")
    # The stored release is keyed by a keyed hash: no word of the text.
    stored = json.dumps(_ledger(browser)).lower()
    assert not [w for w in words if w in stored]
    # A text sent in a query anyway: refused, and the request log (werkzeug's
    # lines, captured here) prints the path without it.
    caplog.set_level("INFO", logger="werkzeug")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{http}/?text=quokkas+adore", timeout=60)
    assert refused.value.code == 400
    assert "quokkas" not in refused.value.read().decode().lower()
    logged = [r.getMessage() for r in caplog.records
              if r.name == "werkzeug"]
    assert any("GET /?<query not logged> HTTP/1.1" in m and "400" in m
               for m in logged), logged
    assert not any("quokkas" in m.lower() for m in logged)


def test_page_ledger_holds_the_budget(browser, http, app, export):
    """Empty text refused and uncharged; [UNK] warned; with one release
    left, a double submit and two tabs each send exactly one; the same text
    again resends its stored release for free; a new model version keeps
    what was spent; no budget is shown as the exporter's choice."""
    _fresh_page(browser, http)
    before = app.model.predictions
    for text in ("", "   \n\t ", "\u200b\u00ad"):
        [out] = _submit(browser, text)
        assert out["state"] == "refused" and "no token" in out["message"]
    assert _spent(browser) == (0, 0) and app.model.predictions == before
    [out] = _submit(browser, JAPANESE)
    assert out["state"] == "sent"
    assert chromium.text_of(browser, "warning").startswith(
        "warning: 10 of 21 tokens (48%, above 25%) are unknown")
    # Eight more distinct texts: 9 of 10 spent today, one release left.
    assert {o["state"] for o in _submit(
        browser, *[f"text number {i}" for i in range(8)])} == {"sent"}
    assert _spent(browser) == (9, 9)
    outs = _submit(browser, "double submit one", "double submit two")
    assert sorted(o["state"] for o in outs) == ["refused", "sent"]
    [refusal] = [o["message"] for o in outs if o["state"] == "refused"]
    tomorrow = (datetime.datetime.now(datetime.timezone.utc).date()
                + datetime.timedelta(days=1)).isoformat()
    assert "epsilon 0 of today's budget 10 is left" in refusal
    assert f"renews at {tomorrow}T00:00:00Z" in refusal
    assert app.model.predictions == before + 10 and _spent(browser) == (
        10, 10)
    # A repeat is free: the stored request, resent.
    stored = [r["release"]["request"] for r in _ledger(browser)[
        "releases"].values()]
    [again] = _submit(browser, "text number 3")
    assert again == {"state": "sent", "resent": True, "message": ""}
    assert json.loads(chromium.text_of(browser, "request")) in stored
    assert "resent" in chromium.text_of(browser, "release")
    assert app.model.predictions == before + 11 and _spent(browser) == (
        10, 10)
    # Two tabs, one release left: tab A reserves and is held inside the
    # phone model; tab B's submit is refused; A's goes out.
    browser.execute_script(f"""
        const s = JSON.parse(localStorage.getItem('{LEDGER}'));
        const day = new Date().toISOString().slice(0, 10);
        s.scopes['epsilon/per_text'].days[day] = 9;
        localStorage.setItem('{LEDGER}', JSON.stringify(s));""")
    tab_a = browser.current_window_handle
    browser.execute_script("""
        const client = window.tfdptextClient;
        const privatize = client.privatize.bind(client);
        client.privatize = async (t) => {
          await new Promise((go) => { window.go = go; });
          return privatize(t);
        };
        window.pending = window.tfdptextSubmit('from tab a');""")
    browser.switch_to.new_window("tab")
    try:
        chromium.open_page(browser, f"{http}/web/index.html")
        [b] = _submit(browser, "from tab b")
        assert b["state"] == "refused", b
        assert "epsilon 0 of today's budget" in b["message"]
    finally:
        browser.close()
        browser.switch_to.window(tab_a)
    a = chromium.run_async(browser, "window.go(); return await "
                           "window.pending;")
    assert a["state"] == "sent" and app.model.predictions == before + 12
    # Across model versions the spending carries over (the ledger's key is
    # the origin and the privacy unit); releases are per model.
    carried = chromium.run_async(browser, """
        const {Budget, PrivacyLedger} = await import(
          '/web/tfdptext/ledger.js');
        const budget = Budget.of(window.tfdptextClient.manifest);
        const v2 = new PrivacyLedger(localStorage, budget, 'quickstart/2');
        const spent = v2.spent().map((x) => Math.round(x * 1000) / 1000);
        let refused = '';
        try {
          await v2.reserve('text number 3');
        } catch (err) {
          refused = err.name;
        }
        return {spent, refused};""")
    assert carried == {"spent": [10, 11], "refused": "BudgetExhausted"}
    # No budget, chosen at export: shown as such.
    record = app.model.manifest["budget"]
    app.model.manifest["budget"] = dict(
        record, per_day=None, total=None, none_reason=budget_lib.CHOSEN_NONE)
    try:
        chromium.open_page(browser, f"{http}/web/index.html")
    finally:
        app.model.manifest["budget"] = record
    assert chromium.text_of(browser, "budget") == (
        "No budget: chosen at export (--no_budget). Releases are counted "
        "here but never refused.")


def test_browser_releases_follow_the_python_channel(browser, http, export):
    """2,000 releases of one sentence in the browser (LiteRT.js, random
    words from crypto.getRandomValues) and 2,000 from the Python path
    (ai-edge-litert, os.urandom): both follow randomized response at
    epsilon 1 around the same code (chi-square against the stated
    probabilities, and the two samples against each other)."""
    out, _ = export
    draws = 2000
    chromium.open_page(browser, f"{http}/")
    browser_codes = chromium.run_async(browser, """
        const codes = [];
        for (let i = 0; i < args[1]; i++) {
          const made = await window.tfdptextClient.privatize(args[0]);
          codes.push(made.release[made.releaseName][0]);
        }
        return codes;""", TEXT, draws)
    python_codes = ExportedPipeline(out).privatize([TEXT] * draws)[
        "private_code"]
    web = np.bincount(browser_codes, minlength=2)
    py = np.bincount(python_codes, minlength=2)
    assert web.sum() == py.sum() == draws
    clean = int(py.argmax())  # the text's code (kept with p = 0.73)
    assert int(web.argmax()) == clean
    expected = draws * categorical.transition_matrix(EPSILON, 2)[clean]
    assert stats.chisquare(web, expected).pvalue > 1e-4, (web, expected)
    assert stats.chi2_contingency(np.stack([web, py])).pvalue > 1e-4
    # The int4 model in LiteRT.js computes Python's releases: 60 test texts
    # with the same token ids and random words give the same outputs.
    pipeline = ExportedPipeline(out)
    with open(os.path.join(ROOT, "examples", "reviews_test.csv"),
              newline="") as f:
        texts = [row["text"] for row in csv.DictReader(f)][:60]
    features = pipeline.tokenizer(texts)
    feeds = []
    for ids, mask in zip(features["token_ids"].numpy(),
                         features["padding_mask"].numpy()):
        model = pipeline.model_for(int(mask.sum()))
        feeds.append((model, {
            "token_ids": ids[None, :model.length],
            "padding_mask": mask[None, :model.length],
            "random_words": secure.os_random_words([1, model.random_words])}))
    python = [pipeline.runners[model.length](**feed) for model, feed in feeds]
    web = chromium.run_phone_model(
        browser, [(model.signature, feed) for model, feed in feeds])
    assert [{k: [int(v) for v in made[k].reshape(-1)] for k in made}
            for made in python] == web
    assert len({r["private_code"][0] for r in web}) == 2


def test_browser_tokenizer_matches_python_on_hard_strings(browser, http,
                                                          export):
    out, _ = export
    texts = tokenizer_vectors.hard_strings(600)
    chromium.open_page(browser, f"{http}/")
    got = chromium.run_async(browser, """
        const tokenizer = window.tfdptextClient.tokenizer;
        return args[0].map((t) => Array.from(tokenizer.encode(t).tokenIds));
        """, texts)
    expected = ExportedPipeline(out).tokenizer(texts)["token_ids"].numpy()
    mismatches = [t for t, a, b in zip(texts, got, expected.tolist())
                  if a != b]
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("source", [
    "a.fill(0); return a;",
    "new Uint8Array(a.buffer, a.byteOffset, a.byteLength).fill(0x5a); "
    "return a;",
])
def test_a_broken_random_source_fails_closed(browser, http, app, source):
    """crypto.getRandomValues replaced before the page runs (zeros, a
    constant byte): the phone model refuses, the page says so, nothing
    reaches the server and the ledger's reservation is returned."""
    _fresh_page(browser, http)
    script = browser.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument",
        {"source": f"Crypto.prototype.getRandomValues = function (a) "
                   f"{{ {source} }};"})
    before = app.model.predictions
    try:
        chromium.open_page(browser, f"{http}/#text=hello")
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument",
                                script)
    status = chromium.text_of(browser, "status")
    assert status.startswith("refused on this device: The phone model "
                             "refused to release: its random words failed "
                             "their checks"), status
    assert chromium.text_of(browser, "release") == \
        "nothing: the release was refused on this device"
    assert chromium.text_of(browser, "label") == ""
    assert app.model.predictions == before
    assert _spent(browser) == (0, 0) and not _ledger(browser)["reserved"]


def _subset(shown, real, where="manifest"):
    """Every key and value the guide shows is the real manifest's."""
    if isinstance(shown, dict):
        assert isinstance(real, dict), where
        for key, value in shown.items():
            assert key in real, f"{where}.{key} is not in the export"
            _subset(value, real[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(real, list) and len(shown) == len(real), where
        for i, (a, b) in enumerate(zip(shown, real)):
            _subset(a, b, f"{where}[{i}]")
    else:
        assert shown == real, f"{where}: the guide shows {shown!r}, the " \
            f"export has {real!r}"


def test_guide_manifest_example_is_the_quickstarts(export):
    """docs/guides/export.md's manifest example is an export of the
    quickstart's settings (its random words included: when their number
    changes, this fails until the example is updated)."""
    guide = open(os.path.join(ROOT, "docs", "guides", "export.md"),
                 encoding="utf-8").read()
    [block] = [b for b in re.findall(r"```json\n(.*?)```", guide, re.S)
               if b.startswith('{"user"')]
    _subset(json.loads(block), export[1])


def test_guide_states_the_measured_page_size():
    """docs/guides/export.md's download sizes are those of
    benchmarks/results/page_size.json (benchmarks/page_size.py)."""
    with open(os.path.join(ROOT, "benchmarks", "results",
                           "page_size.json")) as f:
        record = json.load(f)
    measured = record["result"]
    with open(os.path.join(ROOT, "docs", "guides", "export.md"),
              encoding="utf-8") as f:
        guide = f.read()
    first, again = measured["first_load"], measured["reload"]
    for number in (first["transfer_bytes"], first["decoded_bytes"],
                   again["transfer_bytes"]):
        assert f"{number:,} bytes" in guide, number
    for key, mib in measured["summary_mib"].items():
        if mib:
            assert f"{mib:.2f} MiB" in guide, key
    assert measured["date"] in guide
    assert f"{len(first['files']) - 1} files it fetches" in guide
