"""Splitting a trained run into a phone model and a TF Serving model.

    export_run("runs/ag_eps0.05", "exports/ag_eps0.05")

writes, atomically (a failure leaves no directory behind):

    user/privatizer.tflite   token ids + padding mask -> the release
    user/vocab.txt           the WordPiece vocabulary
    user/tokenizer.json      settings to reproduce the ids in the app
    server/<name>/<version>/ SavedModel, signature `serving_default`
    manifest.json            mechanism, guarantee, specs, sizes, SHA-256
"""

import hashlib
import json
import os
import shutil
import sys

import keras
import tensorflow as tf

from tfdptext.data.tokenization import TextTokenizer
from tfdptext.export import text_input
from tfdptext.export import tflite
from tfdptext.models import split as split_lib
from tfdptext.version import __version__

# Importing registers the custom layers with Keras' deserializer.
import tfdptext.layers  # noqa: F401
import tfdptext.models  # noqa: F401

NOISE_SOURCES = ("internal", "input")
SECURE_RNG_CONDITION = (
    "noise_source=input: the app must feed fresh, independent U[0, 1) "
    "numbers from the platform's cryptographically secure generator for "
    "every release; reusing or predicting them removes the privacy")
REQUIRED = ("config.json", "split.json", "metrics.json", "vocab.txt",
            "user_side.keras", "server_side.keras")
QUANTIZATIONS = ("int8", "float32")


class ExportError(ValueError):
    """The run cannot be exported; nothing was written."""


def _read_json(path):
    with open(path) as f:
        return json.load(f)


def check_run_dir(model_dir):
    """Raises ExportError unless `model_dir` is an exportable run."""
    if not os.path.isdir(model_dir):
        raise ExportError(f"`model_dir`: no such directory {model_dir}.")
    missing = [f for f in REQUIRED
               if not os.path.exists(os.path.join(model_dir, f))]
    if missing:
        raise ExportError(
            f"{model_dir} is not a finished tfdptext run with a user/server "
            f"split (missing {missing}); train it with tfdptext-train.")
    metrics = _read_json(os.path.join(model_dir, "metrics.json"))
    version = metrics.get("versions", {}).get("tfdptext")
    if version is None or version.split(".")[:2] != __version__.split(".")[:2]:
        raise ExportError(
            f"{model_dir} was made by tfdptext {version}; this is "
            f"{__version__}. Re-train it or export with tfdptext {version}.")
    split = _read_json(os.path.join(model_dir, "split.json"))
    if split.get("split_point") not in split_lib.SPLIT_POINTS:
        raise ExportError(f"{model_dir}: unknown split point "
                          f"{split.get('split_point')!r}.")
    return split, metrics


class _NoiseFromInput(keras.layers.Layer):
    """Applies a privatization layer's noise computed from given uniforms."""

    def __init__(self, privatizer, **kwargs):
        super().__init__(**kwargs)
        self.privatizer = privatizer

    def call(self, inputs, uniforms):
        return self.privatizer.apply(inputs, uniforms)

    def compute_output_spec(self, inputs, uniforms):
        return self.privatizer.compute_output_spec(inputs)


def _privatizers(model):
    from tfdptext.layers import base

    return [layer for layer in model._flatten_layers()
            if isinstance(layer, base.PrivatizationLayer)]


def _phone_model(user, split_point, max_length, noise_source="internal"):
    """Fixed-length wrapper: (token_ids, padding_mask[, uniforms]) -> release.

    With noise_source="input", the loaded noise layer is switched off inside
    the user model and applied again after it, fed by a `uniforms` input.
    """
    ids = keras.Input((max_length,), dtype="int32", name="token_ids")
    mask = keras.Input((max_length,), dtype="int32", name="padding_mask")
    inputs = {"token_ids": ids, "padding_mask": mask}
    privatizer = None
    if noise_source == "input":
        layers = _privatizers(user)
        if len(layers) != 1 or not hasattr(layers[0], "uniforms_shape") or \
                type(layers[0]).__name__ == "WordDropout":
            raise ExportError(
                "noise_source=input supports one noise layer and no word "
                f"dropout; this model has {[l.name for l in layers]}.")
        privatizer = layers[0]
        privatizer.noise = False
    released = user({"token_ids": ids, "padding_mask": mask,
                     "segment_ids": keras.ops.zeros_like(ids)})
    if split_point == split_lib.SEQUENCE:
        name, value = "private_representation", released
    elif split_point == split_lib.TOKEN:
        name, value = "token_embeddings", released["token_embeddings"]
    else:
        name, value = "token_ids", released["token_ids"]
    if privatizer is not None:
        uniforms = keras.Input(privatizer.uniforms_shape(value.shape),
                               name="uniforms")
        inputs["uniforms"] = uniforms
        value = _NoiseFromInput(privatizer, name="noise_from_uniforms")(
            value, uniforms)
    return keras.Model(inputs, {name: value}, name="privatizer")


def server_input_specs(split_point, max_length, dim):
    """The TensorSpecs of the server signature's inputs (the release)."""
    if split_point == split_lib.SEQUENCE:
        return [tf.TensorSpec((None, dim), tf.float32,
                              name="private_representation")]
    mask = tf.TensorSpec((None, max_length), tf.int32, name="padding_mask")
    if split_point == split_lib.TOKEN:
        return [tf.TensorSpec((None, max_length, dim), tf.float32,
                              name="token_embeddings"), mask]
    return [tf.TensorSpec((None, max_length), tf.int32, name="token_ids"),
            mask]


def _write_server(server, split_point, max_length, dim, path):
    def outputs(logits):
        probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
        return {"probabilities": probabilities,
                "label": tf.argmax(probabilities, axis=-1,
                                   output_type=tf.int32)}

    if split_point == split_lib.SEQUENCE:
        def serve(private_representation):
            return outputs(server(private_representation, training=False))
    elif split_point == split_lib.TOKEN:
        def serve(token_embeddings, padding_mask):
            return outputs(server({
                "token_embeddings": token_embeddings,
                "padding_mask": padding_mask,
                "segment_ids": tf.zeros_like(padding_mask)}, training=False))
    else:
        def serve(token_ids, padding_mask):
            return outputs(server({
                "token_ids": token_ids, "padding_mask": padding_mask,
                "segment_ids": tf.zeros_like(padding_mask)}, training=False))
    archive = keras.export.ExportArchive()
    archive.track(server)
    archive.add_endpoint(
        "serving_default", serve,
        input_signature=server_input_specs(split_point, max_length, dim))
    archive.write_out(path, verbose=False)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def export_run(model_dir, output_dir, quantization="int8", model_name=None,
               version=1, command=None, noise_source="internal",
               tokenizer_in_graph=False):
    """Exports a training run (see the module docstring).

    Returns the manifest dict. Raises ExportError before writing anything
    when the output exists or the run cannot be exported.
    """
    if noise_source not in NOISE_SOURCES:
        raise ExportError(f"`noise_source` must be one of {NOISE_SOURCES}, "
                          f"received {noise_source!r}.")
    if quantization not in QUANTIZATIONS:
        raise ExportError(f"`quantization` must be one of {QUANTIZATIONS}, "
                          f"received {quantization!r}.")
    if os.path.exists(output_dir):
        raise ExportError(f"`output_dir` {output_dir} exists; choose a new "
                          "directory (exports are never overwritten).")
    if not isinstance(version, int) or version < 1:
        raise ExportError(f"`version` must be an integer >= 1, got "
                          f"{version!r}.")
    split, metrics = check_run_dir(model_dir)
    config = _read_json(os.path.join(model_dir, "config.json"))
    model_name = model_name or os.path.basename(
        os.path.normpath(model_dir)).replace(".", "_")
    max_length = int(config["max_length"])
    parent = os.path.dirname(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(output_dir)}.partial-"
                       f"{os.getpid()}")
    try:
        _export_into(tmp, model_dir, split, metrics, config, quantization,
                     model_name, version, max_length, command, noise_source,
                     tokenizer_in_graph)
        os.rename(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _read_json(os.path.join(output_dir, "manifest.json"))


def _export_into(tmp, model_dir, split, metrics, config, quantization,
                 model_name, version, max_length, command, noise_source,
                 tokenizer_in_graph):
    # A global seed (e.g. keras.utils.set_random_seed in a training run in
    # this process) would give every traced random op a fixed seed, and every
    # phone the same noise. Clear it; check_unseeded_builtins still guards.
    tf.random.set_seed(None)
    user = keras.models.load_model(os.path.join(model_dir, "user_side.keras"))
    server = keras.models.load_model(
        os.path.join(model_dir, "server_side.keras"))
    split_point = split["split_point"]
    phone = _phone_model(user, split_point, max_length, noise_source)
    # One sentence per invoke, as an app runs it; a fixed batch lets the
    # converter fold the reshape shape arithmetic (faster on the phone).
    tflite_bytes = tflite.convert(phone, quantize=quantization == "int8",
                                  batch_size=1)
    ops = tflite.check_unseeded_builtins(tflite_bytes)
    guarantee = dict(split["guarantee"])
    if noise_source == "input":
        if any(op.name.startswith("RANDOM") for op in ops):
            raise ExportError("noise_source=input, but the model still "
                              "draws its own random numbers.")
        guarantee["conditions"] = list(guarantee.get("conditions", [])) + [
            SECURE_RNG_CONDITION]
    os.makedirs(os.path.join(tmp, "user"))
    tflite_path = os.path.join(tmp, "user", "privatizer.tflite")
    with open(tflite_path, "wb") as f:
        f.write(tflite_bytes)
    tokenizer = TextTokenizer.from_config(
        os.path.join(model_dir, "vocab.txt"), split["tokenizer"])
    tokenizer.save_vocabulary(os.path.join(tmp, "user", "vocab.txt"))
    text_in = None
    if tokenizer_in_graph:
        text_model = text_input.text_input_model(phone, tokenizer)
        text_bytes = tflite.convert(text_model,
                                    quantize=quantization == "int8",
                                    custom_ops=True)
        tflite.check_unseeded_builtins(text_bytes,
                                       text_input.TFTEXT_CUSTOM_OPS)
        with open(os.path.join(tmp, "user", "privatizer_text_in.tflite"),
                  "wb") as f:
            f.write(text_bytes)
        text_in = {
            "file": "user/privatizer_text_in.tflite",
            "inputs": {"text": [1, "string"], **{
                name: [1, *[int(d) for d in t.shape[1:]], str(t.dtype)]
                for name, t in text_model.input.items() if name != "text"}},
            "custom_ops": sorted({op.name for op in tflite.operators(
                text_bytes) if not op.builtin}),
            "note": "needs the TF Text TFLite kernels in the app",
        }
    with open(os.path.join(tmp, "user", "tokenizer.json"), "w") as f:
        json.dump(tokenizer.config(), f, indent=2)
    released = next(iter(phone.output.values()))
    dim = (None if split_point == split_lib.TEXT_TO_TEXT
           else int(released.shape[-1]))
    server_dir = os.path.join(tmp, "server", model_name, str(version))
    _write_server(server, split_point, max_length, dim, server_dir)
    files = {}
    for root, _, names in os.walk(tmp):
        for name in sorted(names):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, tmp)
            files[rel] = {"bytes": os.path.getsize(path),
                          "sha256": _sha256(path)}
    manifest = {
        "tfdptext_version": __version__,
        "source_run": os.path.abspath(model_dir),
        "mode": config["mode"],
        "mechanism": config["mechanism"],
        "parameters": metrics["parameters"],
        "guarantee": guarantee,
        "split_point": split_point,
        "user": {
            "file": "user/privatizer.tflite",
            "quantization": quantization,
            "noise_source": noise_source,
            "inputs": {name: [1, *[int(d) for d in t.shape[1:]],
                              str(t.dtype)]
                       for name, t in phone.input.items()},
            "outputs": {name: [1, *[int(d) for d in t.shape[1:]],
                               str(t.dtype)]
                        for name, t in phone.output.items()},
            "tflite_ops": sorted({op.name for op in ops}),
            "tokenizer": tokenizer.config(),
            "text_in": text_in,
        },
        "server": {
            "model_name": model_name,
            "version": version,
            "path": f"server/{model_name}/{version}",
            "signature": "serving_default",
            "inputs": {spec.name: [None if d is None else int(d)
                                   for d in spec.shape] + [spec.dtype.name]
                       for spec in server_input_specs(split_point,
                                                      max_length, dim)},
            "outputs": {"probabilities": "float32 (batch, classes)",
                        "label": "int32 (batch,)"},
        },
        "files": files,
        "versions": {"tfdptext": __version__, "tensorflow": tf.__version__,
                     "keras": keras.__version__},
        "command": command or " ".join(sys.argv),
    }
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
