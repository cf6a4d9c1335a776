"""Requests to TF Serving for privatized representations, and responses.

The server only ever receives what the phone's privatizer released: the
inputs here are the user model's outputs (a private representation, noisy
token embeddings, or privatized token ids, with the padding mask).

REST: POST `rest_url(host, model)` with `rest_request(inputs)` as JSON.
gRPC: `PredictionService.Predict(grpc_request(inputs, model))` (needs
tensorflow-serving-api, a dependency of tfdptext).
"""

import numpy as np

SIGNATURE = "serving_default"


def _arrays(inputs):
    if not isinstance(inputs, dict) or not inputs:
        raise ValueError("`inputs` must be a non-empty dict of name -> array.")
    out = {}
    for name, value in inputs.items():
        array = np.asarray(value)
        if array.dtype.kind == "f":
            array = array.astype(np.float32)
            if not np.isfinite(array).all():
                raise ValueError(f"`inputs['{name}']` holds NaN or inf.")
        elif array.dtype.kind in "iu":
            array = array.astype(np.int32)
        else:
            raise ValueError(f"`inputs['{name}']` must be numeric, got "
                             f"{array.dtype}.")
        out[name] = array
    return out


def rest_url(host, model_name, version=None, port=8501):
    """The REST predict URL, e.g. http://localhost:8501/v1/models/m:predict."""
    path = f"/v1/models/{model_name}"
    if version is not None:
        path += f"/versions/{int(version)}"
    return f"http://{host}:{port}{path}:predict"


def rest_request(inputs, signature=SIGNATURE):
    """The JSON body (columnar "inputs" format) for a batch of releases."""
    return {"signature_name": signature,
            "inputs": {k: v.tolist() for k, v in _arrays(inputs).items()}}


def parse_rest_response(body):
    """{"outputs": {...}} (as JSON text or dict) -> dict of numpy arrays."""
    import json

    if isinstance(body, (str, bytes)):
        body = json.loads(body)
    if "error" in body:
        raise RuntimeError(f"TF Serving error: {body['error']}")
    outputs = body.get("outputs")
    if not isinstance(outputs, dict):
        raise ValueError("The response has no named 'outputs'.")
    return {k: np.asarray(v) for k, v in outputs.items()}


def grpc_request(inputs, model_name, version=None, signature=SIGNATURE):
    """A tensorflow_serving PredictRequest for a batch of releases."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = int(version)
    for name, array in _arrays(inputs).items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(array))
    return request


def parse_grpc_response(response):
    """A PredictResponse -> dict of numpy arrays."""
    import tensorflow as tf

    out = {}
    for name, proto in response.outputs.items():
        array = tf.make_ndarray(proto)
        if array.dtype == object:  # strings (label_name) come as bytes
            array = np.array([v.decode("utf-8") if isinstance(v, bytes)
                              else v for v in array.ravel()],
                             dtype=object).reshape(array.shape)
        out[name] = array
    return out
