"""TF Serving's REST predict API, as JSON in and out (no HTTP here).

The request and response bodies of `POST /v1/models/NAME:predict`, as TF
Serving defines them (https://www.tensorflow.org/tfx/serving/api_rest):

    {"signature_name": "serving_default",        optional
     "instances": [row, ...]}                    row format, or
     "inputs": {name: batch} | batch}            columnar format
    -> {"predictions": [{output: value}, ...]}   row format (one output:
                                                 [value, ...])
    -> {"outputs": {output: batch}}              columnar (one output: batch)
    -> {"error": "message"}                      a request it refuses

A row of "instances" is an object {input name: value} or, when the
signature has a single input, the value itself. Every input of the
signature must be given; integer inputs take JSON integers only, float
inputs numbers (NaN and Infinity included, as TF Serving's parser takes
them: the signature then refuses the release by name). `parse_request`
returns the arrays to feed, `response` the JSON of the answer;
`RestError` carries TF Serving's status code (INVALID_ARGUMENT, NOT_FOUND,
...) and the HTTP status it maps to (tensorflow_serving/model_servers/
http_server.cc).
"""

import dataclasses
import json
import re

import numpy as np

# TF Serving's mapping of status codes to HTTP statuses, for those we use.
HTTP_STATUS = {"OK": 200, "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400,
               "NOT_FOUND": 404, "UNIMPLEMENTED": 501, "INTERNAL": 500}
# How deep a request's arrays and objects may nest: a release needs at
# most 4 levels ({"inputs": {name: [rows [tokens [features]]]}}, or
# {"instances": [{name: [tokens [features]]}]}); a deeper body is refused
# before it is parsed (Python's parser would recurse once per level).
MAX_DEPTH = 16
# The default of how many rows (texts) one predict request may hold
# (tfdptext-serve --max_rows): it bounds the work and the answer's size.
MAX_ROWS = 1000
# JSON strings (skipped whole, escapes included) and brackets.
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_TYPES = {"int32": "int32", "int64": "int64", "float32": "float",
          "float64": "double", "string": "string"}


class RestError(Exception):
    """A request TF Serving would refuse: `code` (a status code name of
    HTTP_STATUS) and the message of its {"error": ...} body."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self):
        return HTTP_STATUS[self.code]

    def body(self):
        return {"error": self.message}


def invalid(message):
    return RestError("INVALID_ARGUMENT", message)


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One input of a signature: its shape (None for free axes, batch
    first) and dtype name ("int32", "float32", ...)."""

    name: str
    shape: tuple
    dtype: str


@dataclasses.dataclass(frozen=True)
class Request:
    """A parsed predict request: the arrays to feed, by input name, and
    the format the answer must take ("row" or "columnar")."""

    signature_name: str
    inputs: dict
    row_format: bool


def _depth_exceeds(body, limit):
    """Whether brackets outside strings nest deeper than `limit` in the
    JSON text `body` (a scan by regular expression, no recursion)."""
    depth = 0
    for match in _BRACKETS.finditer(body):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def parse_body(body):
    """The request body (bytes or str) as a JSON object; RestError
    otherwise (not UTF-8, not JSON, nested deeper than MAX_DEPTH, not an
    object)."""
    try:
        if isinstance(body, bytes):
            body = body.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("The request body is not UTF-8 text.") from None
    if _depth_exceeds(body, MAX_DEPTH):
        raise invalid(f"JSON Parse error: the body nests arrays or objects "
                      f"deeper than {MAX_DEPTH} levels (a release needs at "
                      "most 4).")
    try:
        document = json.loads(body)
    except json.JSONDecodeError as err:
        raise invalid(f"JSON Parse error: {err.msg} at offset {err.pos}"
                      ) from None
    except RecursionError:  # defence in depth: the scan prevents it
        raise invalid("JSON Parse error: nested too deeply.") from None
    if not isinstance(document, dict):
        raise invalid("The request body must be a JSON object with "
                      "'instances' or 'inputs'.")
    return document


def signature_name(document, default="serving_default"):
    """The request's "signature_name" (default: serving_default)."""
    name = document.get("signature_name", default)
    if not isinstance(name, str):
        raise invalid(f"'signature_name' must be a string, got "
                      f"{json.dumps(name)[:40]}.")
    return name or default


def parse_request(document, specs, max_rows=MAX_ROWS):
    """The Request of a predict body for a signature of `specs` (a list of
    InputSpec, in order). RestError (INVALID_ARGUMENT) for a missing or
    unknown key, a missing or unknown input, more than `max_rows` rows, a
    value of the wrong type, ragged rows or a shape the signature does not
    take."""
    has_rows, has_columns = "instances" in document, "inputs" in document
    if has_rows == has_columns:
        raise invalid("Missing 'inputs' or 'instances' key" if not has_rows
                      else "Not both 'instances' and 'inputs' may be "
                      "given in one request.")
    unknown = sorted(set(document) - {"instances", "inputs",
                                      "signature_name"})
    if unknown:
        raise invalid(f"Unknown key(s) {unknown} in the request; expected "
                      "'signature_name' and one of 'instances' / 'inputs'.")
    by_name = {spec.name: spec for spec in specs}
    if has_rows:
        _check_rows(document["instances"], max_rows)
        values = _columns_of_rows(document["instances"], specs)
    else:
        values = _columns(document["inputs"], specs)
        for value in values.values():
            _check_rows(value, max_rows)
    missing = [name for name in by_name if name not in values]
    extra = sorted(set(values) - set(by_name))
    if extra:
        raise invalid(f"input tensor alias not found in signature: "
                      f"{extra[0]}. Inputs expected to be in the set "
                      f"{{{','.join(by_name)}}}.")
    if missing:
        raise invalid(f"Missing input(s) {missing}: the signature takes "
                      f"{{{','.join(by_name)}}}.")
    arrays = {name: _array(values[name], by_name[name]) for name in by_name}
    batches = {name: a.shape[0] for name, a in arrays.items()}
    if len(set(batches.values())) > 1:
        raise invalid(f"Inputs have different batch sizes {batches}: every "
                      "input must hold the same number of rows.")
    return Request(signature_name(document), arrays, has_rows)


def _check_rows(batch, max_rows):
    """RestError when `batch` (a JSON list, batch first) holds more than
    `max_rows` rows."""
    if isinstance(batch, list) and len(batch) > max_rows:
        raise invalid(
            f"The request holds {len(batch)} rows; this server takes at "
            f"most {max_rows} per request (tfdptext-serve --max_rows): send "
            "them in several requests.")


def _columns_of_rows(instances, specs):
    """"instances" -> {name: list of rows}."""
    if not isinstance(instances, list) or not instances:
        raise invalid("'instances' must be a non-empty JSON list of rows.")
    single = specs[0].name if len(specs) == 1 else None
    columns = {}
    for i, row in enumerate(instances):
        if not isinstance(row, dict):
            if single is None:
                raise invalid(
                    f"instances[{i}] must be an object of named inputs "
                    f"({', '.join(s.name for s in specs)}): the signature "
                    "has several.")
            row = {single: row}
        if i and set(row) != set(columns):
            raise invalid(f"instances[{i}] has inputs {sorted(row)}, "
                          f"instances[0] {sorted(columns)}: every row must "
                          "name the same inputs.")
        for name, value in row.items():
            columns.setdefault(name, []).append(value)
    return columns


def _columns(inputs, specs):
    """"inputs" -> {name: batch}."""
    if isinstance(inputs, dict):
        return inputs
    if len(specs) != 1:
        raise invalid("'inputs' must be an object of named inputs ("
                      f"{', '.join(s.name for s in specs)}): the signature "
                      "has several.")
    return {specs[0].name: inputs}


def _shape_of(value, name):
    """The shape of a nested list of scalars; RestError when ragged."""
    if not isinstance(value, list):
        return ()
    if not value:
        return (0,)
    shapes = {_shape_of(v, name) for v in value}
    if len(shapes) != 1:
        raise invalid(f"Input '{name}' is ragged: its rows have different "
                      "shapes; pad them to one shape.")
    return (len(value),) + shapes.pop()


def _check_scalars(value, spec, where=""):
    """RestError for the first element that is not of the input's type."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            _check_scalars(v, spec, f"{where}[{i}]")
        return
    integer = spec.dtype.startswith("int")
    ok = (isinstance(value, int) and not isinstance(value, bool)) or (
        not integer and isinstance(value, float))
    if not ok:
        raise invalid(
            f"JSON Value: {json.dumps(value)[:40]} Type: "
            f"{_json_type(value)} is not of expected type: "
            f"{_TYPES.get(spec.dtype, spec.dtype)} (input '{spec.name}'"
            f"{where})")


def _json_type(value):
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, (int, float)):
        return "Number"
    if isinstance(value, str):
        return "String"
    if value is None:
        return "Null"
    return "Object"


def _array(value, spec):
    """One input's batch as a numpy array of its dtype and shape."""
    _check_scalars(value, spec)
    shape = _shape_of(value, spec.name)
    if len(shape) != len(spec.shape) or any(
            want is not None and got != want
            for got, want in zip(shape, spec.shape)):
        want = ", ".join("-1" if d is None else str(d) for d in spec.shape)
        raise invalid(
            f"Input '{spec.name}' has shape [{', '.join(map(str, shape))}]; "
            f"the signature takes [{want}] (-1: any size; the first axis is "
            "the batch).")
    if shape and shape[0] == 0:
        raise invalid(f"Input '{spec.name}' holds no rows.")
    if spec.dtype.startswith("int"):
        limit = np.iinfo(spec.dtype)
        flat = np.asarray(value, dtype=object).ravel() if shape else [value]
        if any(not limit.min <= int(v) <= limit.max for v in flat):
            raise invalid(f"Input '{spec.name}' holds a value outside "
                          f"{spec.dtype}'s range.")
    return np.asarray(value, dtype=spec.dtype)


def _json_value(array):
    """A numpy output as JSON values (float32 at its own precision,
    strings as text)."""
    if array.dtype == object or array.dtype.kind in "SU":
        return np.vectorize(
            lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes)
            else str(v), otypes=[object])(array).tolist()
    if array.dtype.kind == "f":
        return np.vectorize(_float, otypes=[object])(array).tolist()
    return array.tolist()


def _float(v):
    """float32 at its shortest decimal (NaN and inf as JSON's extension)."""
    return float(str(np.float32(v)))


def response(outputs, row_format):
    """The JSON object of an answer: `outputs` {name: numpy array, batch
    first}, in TF Serving's row ("predictions") or columnar ("outputs")
    form."""
    values = {name: _json_value(np.asarray(a)) for name, a in
              outputs.items()}
    if not row_format:
        if len(values) == 1:
            return {"outputs": next(iter(values.values()))}
        return {"outputs": values}
    rows = len(next(iter(values.values())))
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    return {"predictions": [{name: v[i] for name, v in values.items()}
                            for i in range(rows)]}
