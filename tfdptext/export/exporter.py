"""Splitting a trained run into a phone model and a TF Serving model.

    export_run("runs/ag_eps0.05", "exports/ag_eps0.05")

writes, atomically (a failure leaves no directory behind), the export
directory laid out in `tfdptext.rundir`: the phone model (token ids +
padding mask + random words -> the release), the vocabulary and tokenizer
settings, the server SavedModel (signature `serving_default`, whose inputs
are the release) and the manifest (mechanism, guarantee, specs, label
names, sizes, SHA-256). What is released, and what the server takes, comes
from the run's split point's `tfdptext.models.split_spec.SplitSpec`.

The export runs in named steps (`_export_into`): convert the user side,
write the tokenizer, [convert the string-in phone model], save the server,
write the manifest. Everything is written into a hidden sibling
`.<name>.partial-<pid>` (the TFLite converter's intermediate SavedModel
included, never the system's temporary directory), renamed to `<name>`
once complete. An export killed with SIGKILL leaves that partial
directory; the next export into the same parent removes every
`.<name>.partial-<pid>` there whose process is no longer alive on this
machine (`tfdptext.runfiles`), so re-running the same command gives a
clean export.
"""

import dataclasses
import os
import re
import shutil
import sys

import keras
import tensorflow as tf

from tfdptext import rundir
from tfdptext import runfiles
from tfdptext.data.tokenization import TextTokenizer
from tfdptext.errors import TfdptextError
from tfdptext.export import text_input
from tfdptext.export import tflite
from tfdptext.models import secure
from tfdptext.models import split as split_lib
from tfdptext.models import split_spec
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
QUANTIZATIONS = ("int8", "float32")
SIGNATURE = "serving_default"


class ExportError(TfdptextError):
    """The run cannot be exported; nothing was written."""


@dataclasses.dataclass(frozen=True)
class ExportSource:
    """A checked, finished run: what the export reads from it.

    Attributes:
        run: its `tfdptext.rundir.RunDir` (errors: ExportError).
        config, split, metrics: its JSON files.
        spec: the SplitSpec of its split point.
        max_length: the phone model's input length (config.json).
    """

    run: rundir.RunDir
    config: dict
    split: dict
    metrics: dict
    spec: split_spec.SplitSpec
    max_length: int


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """How to export (see `export_run`)."""

    quantization: str = "int8"
    model_name: str = None
    version: int = 1
    noise_source: str = NOISE_INPUT
    tokenizer_in_graph: bool = False
    command: str = None

    def check(self):
        """Raises ExportError for a value out of range; returns self."""
        if self.noise_source not in NOISE_SOURCES:
            raise ExportError(f"`noise_source` must be one of "
                              f"{NOISE_SOURCES}, received "
                              f"{self.noise_source!r}.")
        if self.quantization not in QUANTIZATIONS:
            raise ExportError(f"`quantization` must be one of "
                              f"{QUANTIZATIONS}, received "
                              f"{self.quantization!r}.")
        if not isinstance(self.version, int) or self.version < 1:
            raise ExportError(f"`version` must be an integer >= 1, got "
                              f"{self.version!r}.")
        return self

    @property
    def quantize(self):
        return self.quantization == "int8"


def check_run_dir(model_dir):
    """The ExportSource of `model_dir`; ExportError unless it is an
    exportable run.

    Checks, before any work (`tfdptext.rundir.RunDir.check_finished`): the
    directory, its files (metrics.json, the "finished" marker, included),
    that every JSON file parses and holds its keys, the tfdptext version
    and run layout, that both .keras files are complete archives and the
    vocabulary; then the split point and max_length. Every error names
    the file.
    """
    run = rundir.RunDir(model_dir, ExportError)
    config, split, metrics = run.check_finished("model_dir")
    spec = split_spec.get(split.get("split_point"), ExportError,
                          run.file(rundir.SPLIT))
    try:
        max_length = int(config["max_length"])
    except (TypeError, ValueError):
        raise ExportError(f"{run.file(rundir.CONFIG)}: max_length is "
                          f"{config['max_length']!r}, not an integer."
                          ) from None
    return ExportSource(run, config, split, metrics, spec, max_length)


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
    name = split_spec.get(split_point).release
    ids = keras.Input((max_length,), dtype="int32", name="token_ids")
    mask = keras.Input((max_length,), dtype="int32", name="padding_mask")
    released = user({"token_ids": ids, "padding_mask": mask,
                     "segment_ids": keras.ops.zeros_like(ids)})
    return keras.Model({"token_ids": ids, "padding_mask": mask},
                       {name: released[name]}, name="privatizer")


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
    """The TensorSpecs of the server signature's inputs (the release and,
    for token-level splits, the padding mask), in order."""
    return [tf.TensorSpec(info.shape, info.dtype, name=info.name)
            for info in split_spec.get(split_point).signature_inputs(
                max_length, dim)]


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
    run = rundir.RunDir(model_dir, ExportError)
    for name, record in ((rundir.METRICS, metrics), (rundir.SPLIT, split)):
        names = record.get("label_names")
        if names is None:
            continue
        if (not isinstance(names, list) or len(names) != num_classes
                or any(not isinstance(n, str) for n in names)):
            raise ExportError(
                f"{run.file(name)}: label_names {names!r} are not "
                f"{num_classes} strings (the model's classes).")
        return names
    return [str(i) for i in range(num_classes)]


def _write_server(server, split_point, max_length, dim, path,
                  label_names=None):
    """Saves `server` as a SavedModel at `path` with one signature,
    `serving_default`: the spec's signature inputs -> probabilities,
    label, label_name. A release holding NaN, inf or negative ids is
    refused (`_refuse_unusable`)."""
    spec = split_spec.get(split_point)
    if label_names is None:
        label_names = [str(i) for i in range(int(server.output.shape[-1]))]
    names = tf.constant(label_names, dtype=tf.string)
    input_specs = server_input_specs(split_point, max_length, dim)
    input_names = [s.name for s in input_specs]

    def serve(*tensors):
        inputs = dict(zip(input_names, tensors))
        inputs[spec.release] = _refuse_unusable(inputs[spec.release])
        logits = server(spec.server_feed(inputs), training=False)
        probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
        label = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"probabilities": probabilities, "label": label,
                "label_name": tf.gather(names, label)}

    archive = keras.export.ExportArchive()
    archive.track(server)
    archive.add_endpoint(SIGNATURE, serve, input_signature=input_specs)
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


def export_run(model_dir, output_dir, quantization="int8", model_name=None,
               version=1, *, command=None, noise_source=NOISE_INPUT,
               tokenizer_in_graph=False):
    """Exports a training run (see the module docstring).

    Args:
        model_dir: a finished tfdptext-train run.
        output_dir: the new export directory (must not exist).
        quantization: "int8" (dynamic-range weights) or "float32".
        model_name: the TF Serving model name (default: the run
            directory's name).
        version: the TF Serving version (>= 1).
        command: recorded in the manifest (default: this process's argv).
        noise_source: "input" (default: the phone model takes
            `random_words` that the app fills from the platform's secure
            generator, and makes its release unusable when they look bad)
            or "internal" (opt-in: the model's own TFLite RANDOM_* ops,
            keyed from 32 bits per app process, so the noise is
            predictable; the manifest's guarantee says so).
        tokenizer_in_graph: also write the string-in phone model.

    Returns the manifest dict. Raises ExportError before writing anything
    when the output exists or the run cannot be exported.
    """
    options = ExportOptions(quantization, model_name, version, noise_source,
                            tokenizer_in_graph, command).check()
    runfiles.check_output_path(output_dir, error=ExportError)
    if os.path.exists(output_dir):
        raise ExportError(f"`output_dir` {output_dir} exists; choose a new "
                          "directory (exports are never overwritten).")
    source = check_run_dir(model_dir)
    options = dataclasses.replace(options, model_name=_check_model_name(
        model_name or os.path.basename(
            os.path.normpath(model_dir)).replace(".", "_")))
    # Removes the partial directories of exports killed earlier (their
    # process is gone). Everything, the TFLite converter's intermediate
    # SavedModel included, is written inside `tmp`.
    tmp = runfiles.start_partial(output_dir)
    try:
        _export_into(rundir.ExportDir(tmp, ExportError), source, options)
        os.rename(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return rundir.ExportDir(output_dir, ExportError).read_manifest()


def _export_into(out, source, options):
    """The export's steps, each writing into `out` (an ExportDir)."""
    # A global seed (e.g. keras.utils.set_random_seed in a training run in
    # this process) would give every traced random op a fixed seed, and every
    # phone the same noise. Clear it; check_unseeded_builtins still guards.
    tf.random.set_seed(None)
    user = keras.models.load_model(source.run.file(rundir.USER))
    server = keras.models.load_model(source.run.file(rundir.SERVER))
    guarantee = _export_guarantee(user, source.split, source.max_length,
                                  options.noise_source)
    phone = _phone_model(user, source.spec.name, source.max_length,
                         options.noise_source)
    user_record = convert_user_side(phone, out, options)
    tokenizer = write_tokenizer(source, out)
    user_record["tokenizer"] = tokenizer.config()
    user_record["text_in"] = (
        convert_text_input(phone, tokenizer, out, options)
        if options.tokenizer_in_graph else None)
    dim = source.spec.dim_of(phone.output[source.spec.release].shape)
    label_names = label_names_of(source.run.path, source.metrics,
                                 source.split, int(server.output.shape[-1]))
    server_record = save_server(server, source, out, options,
                                dim=dim, label_names=label_names)
    write_manifest(out, source=source, options=options, guarantee=guarantee,
                   user_record=user_record, server_record=server_record,
                   label_names=label_names)


def _tensor_record(tensor):
    """[1, *dims, dtype] of a phone model tensor (one text per call)."""
    return [1, *[int(d) for d in tensor.shape[1:]], str(tensor.dtype)]


def _write_bytes(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content)


def convert_user_side(phone, out, options):
    """Step 1: the phone model as TFLite (PHONE_MODEL), checked for seeded
    or, with noise_source=input, any random op. Returns the manifest's
    "user" record so far."""
    # One sentence per invoke, as an app runs it; a fixed batch lets the
    # converter fold the reshape shape arithmetic (faster on the phone).
    tflite_bytes = tflite.convert(phone, quantize=options.quantize,
                                  batch_size=1, temp_dir=out.path)
    ops = tflite.check_unseeded_builtins(tflite_bytes)
    if options.noise_source == NOISE_INPUT and any(
            op.name in tflite.RANDOM_OPS for op in ops):
        raise ExportError("noise_source=input, but the model still draws "
                          "its own random numbers.")
    _write_bytes(out.file(rundir.PHONE_MODEL), tflite_bytes)
    return {
        "file": rundir.PHONE_MODEL,
        "quantization": options.quantization,
        "noise_source": options.noise_source,
        "inputs": {name: _tensor_record(t)
                   for name, t in phone.input.items()},
        "outputs": {name: _tensor_record(t)
                    for name, t in phone.output.items()},
        "tflite_ops": sorted({op.name for op in ops}),
        "randomness": _randomness_contract(phone, options.noise_source),
    }


def write_tokenizer(source, out):
    """Step 2: the vocabulary (EXPORT_VOCAB) and tokenizer settings
    (TOKENIZER) the app reproduces the ids with; returns the tokenizer."""
    tokenizer = TextTokenizer.from_config(source.run.file(rundir.VOCAB),
                                          source.split["tokenizer"])
    os.makedirs(out.file(rundir.USER_DIR), exist_ok=True)
    tokenizer.save_vocabulary(out.file(rundir.EXPORT_VOCAB))
    rundir.write_json(out.file(rundir.TOKENIZER), tokenizer.config())
    return tokenizer


def convert_text_input(phone, tokenizer, out, options):
    """Optional step: the string-in phone model (TEXT_PHONE_MODEL, TF Text
    custom ops); returns its manifest record."""
    text_model = text_input.text_input_model(phone, tokenizer)
    text_bytes = tflite.convert(text_model, quantize=options.quantize,
                                custom_ops=True, temp_dir=out.path)
    tflite.check_unseeded_builtins(text_bytes, text_input.TFTEXT_CUSTOM_OPS)
    _write_bytes(out.file(rundir.TEXT_PHONE_MODEL), text_bytes)
    return {
        "file": rundir.TEXT_PHONE_MODEL,
        "inputs": {"text": [1, "string"], **{
            name: _tensor_record(t)
            for name, t in text_model.input.items() if name != "text"}},
        "custom_ops": sorted({op.name for op in tflite.operators(text_bytes)
                              if not op.builtin}),
        "note": "needs the TF Text TFLite kernels in the app",
    }


def save_server(server, source, out, options, *, dim, label_names):
    """Step 3: the server SavedModel under SERVER_DIR/<name>/<version>;
    returns the manifest's "server" record."""
    path = out.server_path(options.model_name, options.version)
    _write_server(server, source.spec.name, source.max_length, dim,
                  out.file(path), label_names)
    return {
        "model_name": options.model_name,
        "version": options.version,
        "path": path,
        "signature": SIGNATURE,
        "inputs": {info.name: [*info.shape, info.dtype]
                   for info in source.spec.signature_inputs(
                       source.max_length, dim)},
        "outputs": {"probabilities": "float32 (batch, classes)",
                    "label": "int32 (batch,)",
                    "label_name": "string (batch,)"},
    }


def write_manifest(out, *, source, options, guarantee, user_record,
                   server_record, label_names):
    """Step 4, last: the manifest, with the size and SHA-256 of every file
    written before it."""
    out.write_manifest({
        "tfdptext_version": __version__,
        "source_run": os.path.abspath(source.run.path),
        "mode": source.config["mode"],
        "mechanism": source.config["mechanism"],
        "parameters": source.metrics["parameters"],
        "guarantee": guarantee.to_dict(),
        "guarantee_text": str(guarantee),
        "split_point": source.spec.name,
        "user": user_record,
        "server": server_record,
        "label_names": label_names,
        "files": out.file_records(),
        "versions": {"tfdptext": __version__, "tensorflow": tf.__version__,
                     "keras": keras.__version__},
        "command": options.command or " ".join(sys.argv),
    })
