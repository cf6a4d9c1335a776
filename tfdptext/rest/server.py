"""An export's server model behind TF Serving's REST API, and the web page.

    app = ServingApp(ServedModel("exports/quickstart"), web_dir="web")
    server = make_server(app, host="127.0.0.1", port=8501)

answers what TensorFlow Serving answers for the same SavedModel (the same
paths, JSON bodies, error shape and HTTP statuses; `tfdptext.rest.
predict_json`), so an app or the web page written against it works against
TF Serving unchanged:

    POST /v1/models/NAME[/versions/N]:predict   the prediction
    GET  /v1/models/NAME[/versions/N]           the model's status
    GET  /v1/models/NAME[/versions/N]/metadata  its signature

A version label (`/labels/LABEL` in place of `/versions/N`) is answered
as TF Serving answers a label its model config does not define: 400,
"Unrecognized servable version label: LABEL" (an export is one version,
and tfdptext-serve defines no labels). A predict request holds at most
`max_rows` rows (400 above it), so the answer's size is bounded: per row
the signature's outputs only (probabilities, label, label name).

Besides, for the web client: `/` leads to the page (/web/index.html, its
query kept; the page takes a text from the URL's fragment, #text=..., which
never reaches a server), `/web/...` its scripts and LiteRT.js's files, and
`/export/...` the files an app ships (`manifest.json` without the training machine's paths, and the
manifest's files under user/: the phone model, vocabulary, tokenizer
settings and test vectors). Nothing else of the export is served. These
files go out zstd- or gzip-compressed to clients that accept it, with an
ETag and `Cache-Control: no-cache` (`tfdptext.rest.static`): a reload is
answered 304 with no body. They carry the cross-origin isolation headers
(ISOLATION_HEADERS), under which the browser lets the page load
LiteRT.js's threaded WebAssembly (SharedArrayBuffer); `warm()` compresses
the largest of them ahead of the first load.

A request for the page or its files that carries a `text` query parameter
is refused (400) without echoing it: a query reaches this server, its logs
and any proxy's. The request log prints paths without their query.

Every error reaches the client as {"error": "..."}: a bad request with TF
Serving's message kind and status 400 (404 for an unknown model or
version), a refused release with the signature's own message, which names
what was refused (a code, a vector, a token list); a body nested deeper than
`predict_json.MAX_DEPTH` is a 400 before it is parsed; an unexpected
failure is logged here with its traceback and answered 500 without one.
"""

import json
import logging
import mimetypes
import os
import re
import traceback

from werkzeug import exceptions as http_errors
from werkzeug import serving
from werkzeug import utils as http_utils
from werkzeug.wrappers import Request
from werkzeug.wrappers import Response

from tfdptext import rundir
from tfdptext.errors import TfdptextError
from tfdptext.rest import predict_json
from tfdptext.rest import static
from tfdptext.rest.predict_json import RestError

LOG = logging.getLogger("tfdptext.serve")
# TF Serving's paths (http_rest_api_handler.cc): a version or a version
# label after the model name.
_VERSION = r"(?:/versions/(\d+)|/labels/([^/:]+))?"
PREDICT = re.compile(r"(?i)/v1/models/([^/:]+)" + _VERSION +
                     r":(classify|regress|predict)")
METADATA = re.compile(r"(?i)/v1/models/([^/:]+)" + _VERSION + "/metadata")
STATUS = re.compile(r"(?i)/v1/models(?:/([^/:]+))?" + _VERSION)
# Releases are small (a code, a vector, at most max_length x dim floats).
MAX_BODY_BYTES = 64 * 2**20
# What the page needs of LiteRT.js (ES modules and the wasm files).
WEB_PACKAGES = ("node_modules/@litertjs/core/dist/",
                "node_modules/@litertjs/core/wasm/",
                "node_modules/@litertjs/wasm-utils/dist/")
# The page's largest files, compressed by `ServingApp.warm` before the
# first load asks for them: the runtime that a cross-origin-isolated page
# loads (LiteRT.js picks its threaded build there).
WARM_WEB_FILES = ("node_modules/@litertjs/core/wasm/"
                  "litert_wasm_threaded_internal.js",
                  "node_modules/@litertjs/core/wasm/"
                  "litert_wasm_threaded_internal.wasm")
# Cross-origin isolation: the page and its files may share memory between
# threads (SharedArrayBuffer, LiteRT.js's threaded wasm) because no other
# origin's window or resource can enter the page's process.
ISOLATION_HEADERS = {"Cross-Origin-Opener-Policy": "same-origin",
                     "Cross-Origin-Embedder-Policy": "require-corp",
                     "Cross-Origin-Resource-Policy": "same-origin"}
# The manifest's keys that describe the machine that exported, not the
# model: left out of the copy the page reads.
PRIVATE_MANIFEST_KEYS = ("source_run", "command")
TYPES = {".wasm": "application/wasm", ".js": "text/javascript",
         ".mjs": "text/javascript", ".tflite": "application/octet-stream",
         ".json": "application/json", ".txt": "text/plain; charset=utf-8",
         ".html": "text/html; charset=utf-8", ".css": "text/css"}
# The page's text travels in the URL's fragment, never in a query.
TEXT_PARAMETER = "text"
TEXT_IN_QUERY = (
    "Refused: a text in the query (?text=) reaches the server and its logs. "
    "Open the page with the text after #text= (a fragment never leaves the "
    "browser), or type it in the page's form. The text was not used or "
    "kept.")
_ASSERTION = re.compile(r"assertion failed: \[(.*?)\](?: \[(.*?)\])?\s*"
                        r"(?:\[\[|$)", re.S)


class ServeError(TfdptextError):
    """The export cannot be served (the message names the file)."""


def _dtype_enum(dtype):
    return "DT_" + dtype.upper().replace("FLOAT32", "FLOAT").replace(
        "FLOAT64", "DOUBLE")


def refusal_message(err):
    """The signature's own message in a TensorFlow error ("tfdptext:
    refused release (a code): ..."), without TensorFlow's node names; its
    first line for other errors."""
    text = getattr(err, "message", str(err))
    match = _ASSERTION.search(text)
    if match:
        message = match.group(1).replace("\\'", "'")
        if match.group(2):
            message += f" {match.group(2)}"
        return message
    lines = [line for line in text.splitlines() if line.strip()
             and not line.startswith(("Graph execution error",
                                      "Detected at node", "<stack"))]
    return lines[0].strip() if lines else type(err).__name__


class ServedModel:
    """The server SavedModel of a tfdptext export, loaded as TF Serving
    loads `server/<model_name>/<version>`.

    Attributes:
        name, version: the TF Serving model name and version (manifest).
        manifest: the export's checked manifest.
        specs: {signature key: [InputSpec]}.
    """

    def __init__(self, export_dir):
        import tensorflow as tf

        self.export = rundir.ExportDir(export_dir, ServeError)
        self.manifest = self.export.check()
        server = self.manifest["server"]
        self.name = str(server["model_name"])
        self.version = int(server["version"])
        path = self.export.file(server["path"])
        try:
            self._loaded = tf.saved_model.load(path)
        except Exception as err:  # noqa: BLE001 (TF raises many types)
            raise ServeError(f"{path} is not a loadable SavedModel "
                             f"({refusal_message(err)}).") from None
        self.signatures = dict(self._loaded.signatures)
        self.specs = {key: self._input_specs(fn)
                      for key, fn in self.signatures.items()}

    @staticmethod
    def _input_specs(fn):
        _, inputs = fn.structured_input_signature
        return [predict_json.InputSpec(name, tuple(spec.shape.as_list()),
                                       spec.dtype.name)
                for name, spec in inputs.items()]

    def check_version(self, name, version, servable=True, label=None):
        """RestError (NOT_FOUND) unless `name` and `version` (None: the
        latest) are this model's, in TF Serving's words; a version `label`
        is TF Serving's INVALID_ARGUMENT (no labels are defined)."""
        if label is not None:
            raise predict_json.invalid(
                f"Unrecognized servable version label: {label}")
        if name == self.name and version in (None, self.version):
            return
        if servable:
            request = (f"Latest({name})" if version is None
                       else f"Specific({name}, {version})")
            raise RestError("NOT_FOUND",
                            f"Servable not found for request: {request}")
        if name != self.name:
            raise RestError("NOT_FOUND",
                            f"Could not find any versions of model {name}")
        raise RestError("NOT_FOUND",
                        f"Could not find version {version} of model {name}")

    def predict(self, document, max_rows=predict_json.MAX_ROWS):
        """The JSON answer to a predict body (a dict); RestError for a
        request the signature refuses, or of more than `max_rows` rows."""
        import tensorflow as tf

        key = predict_json.signature_name(document)
        if key not in self.signatures:
            raise predict_json.invalid(
                f'Serving signature name: "{key}" not found in signature '
                "def")
        request = predict_json.parse_request(document, self.specs[key],
                                             max_rows)
        try:
            outputs = self.signatures[key](**{
                name: tf.constant(value)
                for name, value in request.inputs.items()})
        except (tf.errors.InvalidArgumentError, ValueError,
                TypeError) as err:
            raise predict_json.invalid(refusal_message(err)) from None
        return predict_json.response(
            {name: value.numpy() for name, value in outputs.items()},
            request.row_format)

    def status(self):
        """GET /v1/models/NAME's answer."""
        return {"model_version_status": [{
            "version": str(self.version), "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""}}]}

    def metadata(self):
        """GET /v1/models/NAME/metadata's answer: the signatures."""
        def info(name, spec):
            return {"dtype": _dtype_enum(spec.dtype.name),
                    "tensor_shape": {
                        "dim": [{"size": str(-1 if d is None else d),
                                 "name": ""} for d in spec.shape.as_list()],
                        "unknown_rank": False},
                    "name": name}

        defs = {}
        for key, fn in self.signatures.items():
            _, inputs = fn.structured_input_signature
            defs[key] = {
                "inputs": {n: info(n, s) for n, s in inputs.items()},
                "outputs": {n: info(n, s) for n, s in
                            fn.structured_outputs.items()},
                "method_name": "tensorflow/serving/predict"}
        return {"model_spec": {"name": self.name, "signature_name": "",
                               "version": str(self.version)},
                "metadata": {"signature_def": {"signature_def": defs}}}

    def client_manifest(self):
        """The manifest the page reads: all but PRIVATE_MANIFEST_KEYS."""
        return {k: v for k, v in self.manifest.items()
                if k not in PRIVATE_MANIFEST_KEYS}

    def user_files(self):
        """The export's files an app ships (the manifest's, under user/)."""
        return {path for path in self.manifest["files"]
                if path.startswith(rundir.USER_DIR + "/")}


def _json(body, status=200):
    return Response(json.dumps(body), status=status,
                    mimetype="application/json")


class ServingApp:
    """The WSGI application (module docstring).

    Args:
        model: a ServedModel.
        web_dir: the web client's folder (web/ of a checkout, with its
            node_modules installed), or None to serve the REST API only.
        max_rows: the most rows (texts) one predict request may hold.
        zstd_level: the page's files' zstd level (`static.StaticFiles`;
            None: its defaults).
    """

    def __init__(self, model, web_dir=None, max_rows=predict_json.MAX_ROWS,
                 zstd_level=None):
        if isinstance(max_rows, bool) or not isinstance(max_rows, int) or \
                max_rows < 1:
            raise ServeError(f"`max_rows` must be an integer >= 1, got "
                             f"{max_rows!r}.")
        self.model = model
        self.web_dir = os.path.abspath(web_dir) if web_dir else None
        self.max_rows = max_rows
        self.files = static.StaticFiles(zstd_level)

    def __call__(self, environ, start_response):
        request = Request(environ)
        request.max_content_length = MAX_BODY_BYTES
        try:
            response = self.dispatch(request)
        except RestError as err:
            response = _json(err.body(), err.http_status)
        except http_errors.RequestEntityTooLarge:
            response = _json({"error": f"The request body is larger than "
                              f"{MAX_BODY_BYTES} bytes."}, 413)
        except Exception:  # noqa: BLE001 (no traceback to the client)
            LOG.error("%s %s failed:\n%s", request.method, request.path,
                      traceback.format_exc())
            response = _json({"error": "Internal error in tfdptext-serve "
                              "(its log has the details)."}, 500)
        return response(environ, start_response)

    def dispatch(self, request):
        path = request.path
        if path.lower().startswith("/v1/"):
            return self.rest(request)
        if request.method not in ("GET", "HEAD"):
            raise RestError("NOT_FOUND", f"Nothing to {request.method} at "
                            f"{path}.")
        if TEXT_PARAMETER in request.args:
            raise RestError("INVALID_ARGUMENT", TEXT_IN_QUERY)
        if path in ("/", "/web", "/web/"):
            query = request.query_string.decode("latin-1")
            return http_utils.redirect(
                "/web/index.html" + (f"?{query}" if query else ""), 302)
        response = self.page_file(path, request)
        response.headers.update(ISOLATION_HEADERS)
        return response

    def page_file(self, path, request):
        """The page's file at `path` (/web/... or /export/...)."""
        if path.startswith("/web/"):
            return self.web_file(path[len("/web/"):], request)
        if path == "/export/" + rundir.MANIFEST:
            return self.files.data_response(
                rundir.MANIFEST, json.dumps(self.model.client_manifest(
                )).encode("utf-8"), "application/json", request)
        if path.startswith("/export/"):
            relative = path[len("/export/"):]
            if relative not in self.model.user_files():
                raise RestError("NOT_FOUND", f"{path}: not a file of the "
                                "export that an app ships.")
            return self._send(self.model.export.path, relative, request)
        raise RestError("NOT_FOUND", f"Nothing at {path}.")

    def warm(self):
        """Compresses the page's largest files (the export's user files,
        WARM_WEB_FILES) now, so that the first load does not wait for it
        (tfdptext-serve runs this in a thread at start)."""
        paths = [os.path.join(self.model.export.path, relative)
                 for relative in sorted(self.model.user_files())]
        if self.web_dir:
            paths += [os.path.join(self.web_dir, relative)
                      for relative in WARM_WEB_FILES]
        for path in paths:
            if os.path.isfile(path):
                self.files.entry(path)

    def rest(self, request):
        """TF Serving's paths (its http_rest_api_handler)."""
        path, method = request.path, request.method
        match = PREDICT.fullmatch(path)
        if method == "POST" and match:
            name, version, label, verb = match.groups()
            self.model.check_version(name, _version(version), label=label)
            if verb.lower() != "predict":
                raise predict_json.invalid(
                    f"The signature of model {name} is a predict "
                    f"signature; :{verb} needs a {verb} signature.")
            document = predict_json.parse_body(request.get_data())
            return _json(self.model.predict(document, self.max_rows))
        match = METADATA.fullmatch(path)
        if method == "GET" and match:
            name, version, label = match.groups()
            self.model.check_version(name, _version(version), label=label)
            return _json(self.model.metadata())
        match = STATUS.fullmatch(path)
        if method == "GET" and match:
            name, version, label = match.groups()
            if not name:
                raise predict_json.invalid("Missing model name in request.")
            self.model.check_version(name, _version(version),
                                     servable=False, label=label)
            return _json(self.model.status())
        raise predict_json.invalid(f"Malformed request: {method} {path}")

    def web_file(self, relative, request):
        if self.web_dir is None or not os.path.isfile(
                os.path.join(self.web_dir, "index.html")):
            raise RestError("NOT_FOUND", "No web client here: start "
                            "tfdptext-serve from a checkout (its web/ "
                            "folder) or give --web_dir.")
        if relative.startswith("node_modules/") and not relative.startswith(
                WEB_PACKAGES):
            raise RestError("NOT_FOUND", f"/web/{relative}: not a file "
                            "the page needs.")
        if relative.startswith("node_modules/") and not os.path.isdir(
                os.path.join(self.web_dir, WEB_PACKAGES[0])):
            raise RestError("NOT_FOUND", f"/web/{relative}: LiteRT.js is "
                            "not installed; run `npm ci` in "
                            f"{self.web_dir} (make test does).")
        return self._send(self.web_dir, relative, request)

    def _send(self, directory, relative, request):
        """The file `relative` inside `directory` (never outside it),
        compressed and cacheable (`static.StaticFiles`)."""
        kind = TYPES.get(os.path.splitext(relative)[1].lower())
        path = http_utils.safe_join(directory, relative)
        if path is None or not os.path.isfile(path):
            raise RestError("NOT_FOUND", f"{request.path}: no such file.")
        return self.files.response(
            path, kind or mimetypes.guess_type(relative)[0]
            or "application/octet-stream", request)


def _version(text):
    return None if text is None else int(text)


class _QuietQueryHandler(serving.WSGIRequestHandler):
    """werkzeug's request handler, logging each request's path without its
    query string (a query may hold what a user typed)."""

    def log_request(self, code="-", size="-"):
        hidden = "?<query not logged>"
        if "?" in getattr(self, "path", ""):
            self.path = self.path.split("?", 1)[0] + hidden
        self.requestline = re.sub(r"\?\S*", hidden, self.requestline)
        super().log_request(code, size)


def make_server(app, host="127.0.0.1", port=8501):
    """A threaded WSGI server for `app` (werkzeug's), not yet serving;
    `.server_port` is the port it bound (port 0: a free one). Its request
    log leaves queries out."""
    return serving.make_server(host, port, app, threaded=True,
                               request_handler=_QuietQueryHandler)
