"""Splitting a trained run into a phone model and a TF Serving model.

    export_run("runs/ag_eps0.05", "exports/ag_eps0.05")

writes, atomically (a failure leaves no directory behind):

    user/privatizer.tflite   token ids + padding mask + random words ->
                             the release
    user/vocab.txt           the WordPiece vocabulary
    user/tokenizer.json      settings to reproduce the ids in the app
    server/<name>/<version>/ SavedModel, signature `serving_default`
    manifest.json            mechanism, guarantee, specs, label names,
                             sizes, SHA-256

Everything is written into a hidden sibling `.<name>.partial-<pid>`
(the TFLite converter's intermediate SavedModel included, never the
system's temporary directory), renamed to `<name>` once complete. An export
killed with SIGKILL leaves that partial directory; the next export into the
same parent removes every `.<name>.partial-<pid>` there whose process is
no longer alive on this machine (`tfdptext.runfiles`), so re-running the
same command gives a clean export.
"""

import json
import os
import re
import shutil
import sys

import keras
import tensorflow as tf

from tfdptext import runfiles
from tfdptext.data.tokenization import TextTokenizer
from tfdptext.errors import TfdptextError
from tfdptext.export import text_input
from tfdptext.export import tflite
from tfdptext.models import secure
from tfdptext.models import split as split_lib
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import randomness
from tfdptext.version import __version__

# Importing registers the custom layers with Keras' deserializer.
import tfdptext.layers  # noqa: F401
import tfdptext.models  # noqa: F401

# "input" (the default): the phone model takes `random_words` from the
# app's secure generator. "internal": the model's own RANDOM_* ops, keyed
# from 32 bits per app process (predictable; opt-in only).
NOISE_INPUT = "input"
NOISE_INTERNAL = "internal"
NOISE_SOURCES = (NOISE_INPUT, NOISE_INTERNAL)
RANDOMNESS = {NOISE_INPUT: randomness.APP_SECURE_RNG,
              NOISE_INTERNAL: randomness.TFLITE_INTERNAL}
REQUIRED = ("config.json", "split.json", "metrics.json", "vocab.txt",
            "user_side.keras", "server_side.keras")
QUANTIZATIONS = ("int8", "float32")


class ExportError(TfdptextError):
    """The run cannot be exported; nothing was written."""


def _read_json(path, required=()):
    """A run file's JSON object; ExportError naming the file and what is
    wrong (missing, truncated, not JSON, a required key absent)."""
    return runfiles.read_json(path, ExportError, required=required)


# The keys of each run file the export reads.
_REQUIRED_KEYS = {
    "config.json": ("mode", "mechanism", "max_length"),
    "split.json": ("split_point", "guarantee", "tokenizer"),
    "metrics.json": ("versions", "parameters"),
}


def check_run_dir(model_dir):
    """Raises ExportError unless `model_dir` is an exportable run.

    Checks, before any work: the directory, its files (metrics.json, the
    "finished" marker, included), that every JSON file parses and holds the
    keys the export reads, and that both .keras files are complete
    archives. Every error names the file.
    """
    if not os.path.exists(model_dir):
        raise ExportError(f"`model_dir`: no such directory {model_dir}.")
    if not os.path.isdir(model_dir):
        raise ExportError(f"`model_dir` {model_dir} is a file, not a run "
                          "directory.")
    missing = [f for f in REQUIRED
               if not os.path.exists(os.path.join(model_dir, f))]
    if missing:
        raise ExportError(
            f"{model_dir} is not a finished tfdptext run with a user/server "
            f"split (missing {missing}); train it with tfdptext-train.")
    files = {name: _read_json(os.path.join(model_dir, name), keys)
             for name, keys in _REQUIRED_KEYS.items()}
    metrics, split = files["metrics.json"], files["split.json"]
    version = (metrics["versions"] or {}).get("tfdptext") \
        if isinstance(metrics["versions"], dict) else None
    if not isinstance(version, str) or \
            version.split(".")[:2] != __version__.split(".")[:2]:
        raise ExportError(
            f"{model_dir} was made by tfdptext {version}; this is "
            f"{__version__}. Re-train it or export with tfdptext {version}.")
    if split.get("split_point") not in split_lib.SPLIT_POINTS:
        raise ExportError(f"{model_dir}/split.json: unknown split point "
                          f"{split.get('split_point')!r}.")
    for name in ("user_side.keras", "server_side.keras"):
        runfiles.check_keras_file(os.path.join(model_dir, name), ExportError)
    vocab = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(vocab) or os.path.getsize(vocab) == 0:
        raise ExportError(f"{vocab} is empty or not a file.")
    return split, metrics


def _phone_model(user, split_point, max_length, noise_source=NOISE_INPUT):
    """Fixed-length phone model: (token_ids, padding_mask[, random_words])
    -> {release name: release}.

    noise_source="input": `tfdptext.models.secure.secure_user_model` (every
    random choice from the app's words, checked, failing closed).
    "internal": the user side as trained, with its own RANDOM_* ops.
    """
    if noise_source == NOISE_INPUT:
        dropout, privatizer = secure.find_layers(user)
        if dropout is not None or privatizer is not None:
            return secure.secure_user_model(user, split_point, max_length)
    ids = keras.Input((max_length,), dtype="int32", name="token_ids")
    mask = keras.Input((max_length,), dtype="int32", name="padding_mask")
    released = user({"token_ids": ids, "padding_mask": mask,
                     "segment_ids": keras.ops.zeros_like(ids)})
    name = secure.RELEASE_NAMES[split_point]
    value = released[name] if isinstance(released, dict) else released
    return keras.Model({"token_ids": ids, "padding_mask": mask},
                       {name: value}, name="privatizer")


def _export_guarantee(user, split, max_length, noise_source):
    """The guarantee of the phone model, from the layers it holds, with
    the randomness the export gives them."""
    stored = guarantee_lib.Guarantee.from_dict(split["guarantee"])
    dropout, privatizer = secure.find_layers(user)
    if privatizer is None or not stored.is_private:
        return stored
    return split_lib.user_side_guarantee(
        privatizer, dropout, max_tokens=max_length - 2,
        randomness=RANDOMNESS[noise_source])


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


def _refuse_unusable(release):
    """Server-side check: a release holding NaN/inf (or, for token ids, a
    negative id) was made with failed randomness or a broken
    representation; the signature refuses it rather than classify it."""
    if release.dtype.is_integer:
        ok = tf.reduce_all(release >= 0)
        message = ("tfdptext: refused release: negative token ids (the "
                   "phone model's random words failed their checks)")
    else:
        ok = tf.reduce_all(tf.math.is_finite(release))
        message = ("tfdptext: refused release: NaN or inf (the phone "
                   "model's random words failed their checks, or its input "
                   "was not finite)")
    with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
        return tf.identity(release)


def label_names_of(model_dir, metrics, split, num_classes):
    """The run's label names (metrics.json or split.json "label_names");
    "0".."K-1" for runs that recorded none. ExportError when they do not
    fit the model's classes."""
    for name, record in (("metrics.json", metrics), ("split.json", split)):
        names = record.get("label_names")
        if names is None:
            continue
        if (not isinstance(names, list) or len(names) != num_classes
                or any(not isinstance(n, str) for n in names)):
            raise ExportError(
                f"{model_dir}/{name}: label_names {names!r} are not "
                f"{num_classes} strings (the model's classes).")
        return names
    return [str(i) for i in range(num_classes)]


def _write_server(server, split_point, max_length, dim, path,
                  label_names=None):
    if label_names is None:
        label_names = [str(i) for i in range(int(server.output.shape[-1]))]
    names = tf.constant(label_names, dtype=tf.string)

    def outputs(logits):
        probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
        label = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"probabilities": probabilities, "label": label,
                "label_name": tf.gather(names, label)}

    if split_point == split_lib.SEQUENCE:
        def serve(private_representation):
            return outputs(server(_refuse_unusable(private_representation),
                                  training=False))
    elif split_point == split_lib.TOKEN:
        def serve(token_embeddings, padding_mask):
            return outputs(server({
                "token_embeddings": _refuse_unusable(token_embeddings),
                "padding_mask": padding_mask,
                "segment_ids": tf.zeros_like(padding_mask)}, training=False))
    else:
        def serve(token_ids, padding_mask):
            return outputs(server({
                "token_ids": _refuse_unusable(token_ids),
                "padding_mask": padding_mask,
                "segment_ids": tf.zeros_like(padding_mask)}, training=False))
    archive = keras.export.ExportArchive()
    archive.track(server)
    archive.add_endpoint(
        "serving_default", serve,
        input_signature=server_input_specs(split_point, max_length, dim))
    archive.write_out(path, verbose=False)


def _randomness_contract(phone, noise_source):
    """What the app must do for the model's randomness (manifest.json)."""
    if secure.RANDOM_WORDS not in phone.input:
        return {"source": RANDOMNESS[noise_source],
                "description": randomness.DESCRIPTIONS[
                    RANDOMNESS[noise_source]]}
    count = int(phone.input[secure.RANDOM_WORDS].shape[-1])
    return {
        "source": randomness.APP_SECURE_RNG,
        "input": secure.RANDOM_WORDS,
        "dtype": "int32",
        "words": count,
        "bytes": 4 * count,
        "fill": ("for every call, fill all the words with fresh bytes from "
                 "the platform's cryptographically secure generator "
                 "(Android: SecureRandom.nextBytes; iOS: "
                 "SecRandomCopyBytes); never reuse or derive them"),
        "checks": ("the model makes its release unusable (all NaN; token "
                   "ids all -1) when the words look unfilled, constant or "
                   "repeated within the call (false alarm below 2^-40 for "
                   "good words); the server refuses such releases: discard "
                   "it and call again with fresh words"),
        "not_detectable": "reuse of a buffer across calls",
    }


_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


def _check_model_name(name):
    """The TF Serving model name, which becomes a directory under server/:
    letters, digits, '_' and '-' only (no '/', no '..': it must not write
    outside the export)."""
    if not isinstance(name, str) or not _MODEL_NAME.match(name):
        raise ExportError(
            f"`model_name` must be 1-128 letters, digits, '_' or '-', "
            f"starting with a letter or digit, received {name!r} (give "
            "--model_name).")
    return name


_sha256 = runfiles.sha256_file


def export_run(model_dir, output_dir, quantization="int8", model_name=None,
               version=1, command=None, noise_source=NOISE_INPUT,
               tokenizer_in_graph=False):
    """Exports a training run (see the module docstring).

    noise_source: "input" (default: the phone model takes `random_words`
    that the app fills from the platform's secure generator, and makes its
    release unusable when they look bad) or "internal" (opt-in: the model's
    own TFLite RANDOM_* ops, keyed from 32 bits per app process, so the
    noise is predictable; the manifest's guarantee says so).

    Returns the manifest dict. Raises ExportError before writing anything
    when the output exists or the run cannot be exported.
    """
    if noise_source not in NOISE_SOURCES:
        raise ExportError(f"`noise_source` must be one of {NOISE_SOURCES}, "
                          f"received {noise_source!r}.")
    if quantization not in QUANTIZATIONS:
        raise ExportError(f"`quantization` must be one of {QUANTIZATIONS}, "
                          f"received {quantization!r}.")
    runfiles.check_output_path(output_dir, error=ExportError)
    if os.path.exists(output_dir):
        raise ExportError(f"`output_dir` {output_dir} exists; choose a new "
                          "directory (exports are never overwritten).")
    if not isinstance(version, int) or version < 1:
        raise ExportError(f"`version` must be an integer >= 1, got "
                          f"{version!r}.")
    split, metrics = check_run_dir(model_dir)
    config = _read_json(os.path.join(model_dir, "config.json"))
    model_name = _check_model_name(model_name or os.path.basename(
        os.path.normpath(model_dir)).replace(".", "_"))
    try:
        max_length = int(config["max_length"])
    except (TypeError, ValueError):
        raise ExportError(f"{model_dir}/config.json: max_length is "
                          f"{config['max_length']!r}, not an integer."
                          ) from None
    # Removes the partial directories of exports killed earlier (their
    # process is gone). Everything, the TFLite converter's intermediate
    # SavedModel included, is written inside `tmp`.
    tmp = runfiles.start_partial(output_dir)
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
    guarantee = _export_guarantee(user, split, max_length, noise_source)
    phone = _phone_model(user, split_point, max_length, noise_source)
    # One sentence per invoke, as an app runs it; a fixed batch lets the
    # converter fold the reshape shape arithmetic (faster on the phone).
    tflite_bytes = tflite.convert(phone, quantize=quantization == "int8",
                                  batch_size=1, temp_dir=tmp)
    ops = tflite.check_unseeded_builtins(tflite_bytes)
    if noise_source == NOISE_INPUT and any(
            op.name in tflite.RANDOM_OPS for op in ops):
        raise ExportError("noise_source=input, but the model still draws "
                          "its own random numbers.")
    os.makedirs(os.path.join(tmp, "user"), exist_ok=True)
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
                                    custom_ops=True, temp_dir=tmp)
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
    label_names = label_names_of(model_dir, metrics, split,
                                 int(server.output.shape[-1]))
    _write_server(server, split_point, max_length, dim, server_dir,
                  label_names)
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
        "guarantee": guarantee.to_dict(),
        "guarantee_text": str(guarantee),
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
            "randomness": _randomness_contract(phone, noise_source),
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
                        "label": "int32 (batch,)",
                        "label_name": "string (batch,)"},
        },
        "label_names": label_names,
        "files": files,
        "versions": {"tfdptext": __version__, "tensorflow": tf.__version__,
                     "keras": keras.__version__},
        "command": command or " ".join(sys.argv),
    }
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
