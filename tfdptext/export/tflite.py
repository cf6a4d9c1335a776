"""Converting Keras models to TFLite, and checking what a .tflite holds.

Conversion goes through the SavedModel of Keras' `ExportArchive` (what
`model.export(..., format="tf_saved_model")` uses underneath) and
`TFLiteConverter.from_saved_model`: on Keras 3 the concrete-function route,
and a tf.Module that does not hold the model's variables, convert but
silently output NaN (platform notes). The models are not `track`ed unless
they hold lookup tables (`convert`'s `track`): tracking walks every layer
and traces the Keras models inside again, for the same .tflite but for
tensor names. Untracked, the SavedModel is the archive's written with each
endpoint traced once instead of twice (`_write_traced_once`: the same
.tflite, byte for byte, tests/test_tflite.py).
"""

import contextlib
import dataclasses
import gc
import os
import tempfile

import keras
import tensorflow as tf

from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from tfdptext.errors import TfdptextError

_BUILTIN_NAMES = {
    code: name for name, code in vars(schema.BuiltinOperator).items()
    if not name.startswith("_")
}
RANDOM_OPS = ("RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL")


class ConversionError(TfdptextError):
    """The model cannot be converted as asked."""


@dataclasses.dataclass(frozen=True)
class Operator:
    """One operator of a .tflite graph."""

    name: str
    builtin: bool
    seed: int | None = None
    seed2: int | None = None

    @property
    def is_seeded_random(self):
        return self.name in RANDOM_OPS and (self.seed or self.seed2)


def convert(model, quantize=False, builtins_only=True, custom_ops=False,
            batch_size=None, temp_dir=None, track=None):
    """Converts a Keras model to .tflite bytes (one signature,
    "serving_default").

    Args:
        model: a built Keras model.
        quantize: True for dynamic-range int8 weights.
        builtins_only: refuse any op that would need the Flex delegate.
        custom_ops: allow TFLite custom ops (e.g. TF Text's tokenizer).
        batch_size: None keeps the batch dimension dynamic; an integer fixes
            it, which lets the converter fold the shape arithmetic of
            reshapes (about 10% faster for MiniLM, docs/benchmarks.md).
        temp_dir: where the intermediate SavedModel goes (a temporary
            directory made inside it, removed afterwards); default: the
            system's temporary directory. The exporter passes its partial
            output directory, so that a killed export leaves nothing in the
            system's temporary directory.
        track: True walks the model for lookup tables, as `model.export`
            does (a model holding them, e.g. the string-in phone model,
            needs it); False does not (the same .tflite but for tensor
            names, for about half the CPU time of a small phone model:
            tests/test_tflite.py); None (default): not, and again with
            the walk if the SavedModel writer finds a resource the walk
            would have tracked. A list of the model's layers walks those
            only, for a caller that knows the rest holds no lookup table
            (the exporter's string-in model: its phone model was saved
            untracked just before); the walk of a whole model traces every
            Keras model inside it again, most of the conversion's CPU time
            for the string-in model.

    Example:
    >>> x = keras.Input((16,), name="x")
    >>> model = keras.Model(x, layers.LaplaceNoise(1.0)(x))
    >>> tflite_bytes = convert(model)
    """
    if isinstance(track, (list, tuple)):
        valid = bool(track) and all(isinstance(layer, keras.layers.Layer)
                                    for layer in track)
    else:
        valid = track in (None, True, False)
    if not valid:
        raise ValueError(f"`track` must be None, True, False or a non-empty "
                         f"list of layers, got {track!r}.")
    batch_size = _check_batch_size(batch_size)
    options = dict(quantize=quantize, builtins_only=builtins_only,
                   custom_ops=custom_ops, temp_dir=temp_dir)
    models = {_SERVING: model}
    if track is None:
        try:
            return _convert_archive(models, batch_size, track=False,
                                    **options)
        except AssertionError as err:  # tf.saved_model.save's own type
            if "untracked" not in str(err):
                raise
        track = True
    return _convert_archive(models, batch_size, track=track, **options)


def convert_signatures(models, *, quantize=False, builtins_only=True,
                       custom_ops=False, batch_size=None, temp_dir=None):
    """Converts several Keras models into ONE .tflite, one signature each.

    The models may share layers (e.g. the same user side wrapped at several
    input lengths): their variables are saved once in the intermediate
    SavedModel, and the converter stores each weight buffer once, so the
    file grows only by the extra graphs (for MiniLM int8 at lengths 16, 32,
    64 and 128: 23.2 MiB against 22.0 MiB for one length).

    Args:
        models: {signature key: built Keras model}; each model's inputs
            become its signature's inputs (by name).
        quantize, builtins_only, custom_ops, batch_size, temp_dir: as in
            `convert`.
    """
    if not models:
        raise ValueError("`models` must hold at least one model.")
    # The endpoints capture the variables they read, and only those reach
    # the .tflite, so the models are not `track`ed: tracking makes
    # `write_out` walk every layer for lookup tables (the phone models
    # hold none; a model that does needs `convert`, which tracks it), and
    # that walk traces every Keras model inside again
    # (`_default_save_signature`): about a third of an export's CPU time,
    # for the same .tflite but for tensor names (tests/test_tflite.py).
    return _convert_archive(models, _check_batch_size(batch_size),
                            track=False, quantize=quantize,
                            builtins_only=builtins_only,
                            custom_ops=custom_ops, temp_dir=temp_dir)


_SERVING = "serving_default"


def _convert_archive(models, batch_size, *, track, quantize, builtins_only,
                     custom_ops, temp_dir):
    """{signature key: model} through one ExportArchive (each model
    `track`ed if `track` is True; the layers listed if it is a list), its
    SavedModel and the converter."""
    with _saved_model_dir(temp_dir) as saved:
        if track:
            archive = keras.export.ExportArchive()
            for layer in (track if isinstance(track, (list, tuple)) else ()):
                archive.track(layer)
            for key, model in models.items():
                if track is True:
                    archive.track(model)
                archive.add_endpoint(
                    key, _endpoint(model),
                    input_signature=_input_signature(model, batch_size))
            archive.write_out(saved, verbose=False)
        else:
            _write_traced_once(models, batch_size, saved)
        return _convert_saved_model(saved, list(models), quantize=quantize,
                                    builtins_only=builtins_only,
                                    custom_ops=custom_ops)


def _write_traced_once(models, batch_size, path):
    """The SavedModel Keras' ExportArchive writes for untracked models
    ({signature key: model}, each `_endpoint` on `_input_signature`), with
    each endpoint traced once instead of twice (`save_traced_once`)."""
    save_traced_once({key: (_endpoint(model),
                            _input_signature(model, batch_size))
                      for key, model in models.items()}, path)


def save_traced_once(endpoints, path):
    """Writes a SavedModel at `path` whose signatures are `endpoints`,
    {signature key: (function, input signature)}, each traced once.

    Keras' ExportArchive adds each endpoint as a tf.function, traces it to
    list the variables it reads, and `tf.saved_model.save` traces it
    again: inside the save, a context the first trace is not cached for.
    Here the signatures are the traced concrete functions themselves, and
    the root object holds the variables they read, in the archive's order
    (trainable first): the same graph, weights and signatures (the phone
    model's .tflite is the archive's byte for byte: tests/test_tflite.py)
    for less CPU time. A function capturing a resource the root does not
    hold (a lookup table) fails the save with an AssertionError (`convert`
    then converts with the archive, tracking the model)."""
    signatures, trainable, other = {}, {}, {}
    for key, (function, input_signature) in endpoints.items():
        concrete = tf.function(function, input_signature=input_signature,
                               autograph=False).get_concrete_function()
        signatures[key] = concrete
        for variable in concrete.trainable_variables:
            trainable.setdefault(id(variable), variable)
        for variable in concrete.variables:
            if id(variable) not in trainable:
                other.setdefault(id(variable), variable)
    root = tf.Module()
    root._all_variables = [*trainable.values(), *other.values()]
    tf.saved_model.save(root, path, signatures=signatures)


def signature_keys(tflite_bytes):
    """The signature keys of a .tflite, in file order."""
    model = flatbuffer_utils.convert_bytearray_to_object(tflite_bytes)
    return [s.signatureKey.decode() for s in model.signatureDefs or []]


def _endpoint(model):
    """The function one signature runs: the model on its input dict."""

    def call(inputs):
        return model(inputs)

    return call


def _check_batch_size(batch_size):
    if batch_size is not None and (not isinstance(batch_size, int)
                                   or batch_size < 1):
        raise ValueError(f"`batch_size` must be None or an integer >= 1, "
                         f"got {batch_size!r}.")
    return batch_size


def _input_signature(model, batch_size):
    """[TensorSpecs shaped like the model's inputs, batch fixed to
    `batch_size` (None: dynamic)]."""
    return [keras.tree.map_structure(
        lambda t: tf.TensorSpec((batch_size, *t.shape[1:]), t.dtype,
                                name=t.name), model.input)]


@contextlib.contextmanager
def _saved_model_dir(temp_dir):
    """A fresh path for the intermediate SavedModel inside a temporary
    directory made in `temp_dir` (default: the system's), removed
    afterwards."""
    if temp_dir is not None and not os.path.isdir(temp_dir):
        raise ValueError(f"`temp_dir`: no such directory {temp_dir}.")
    with tempfile.TemporaryDirectory(prefix="tflite-convert-",
                                     dir=temp_dir) as tmp:
        yield os.path.join(tmp, "saved_model")


def _convert_saved_model(saved, keys, *, quantize, builtins_only,
                         custom_ops):
    """TFLiteConverter.from_saved_model on `saved` (signatures `keys`;
    None: serving_default) with our settings."""
    converter = tf.lite.TFLiteConverter.from_saved_model(
        saved, signature_keys=keys)
    ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if not builtins_only:
        ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    converter.target_spec.supported_ops = ops
    if quantize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.allow_custom_ops = custom_ops
    try:
        with _older_objects_frozen():
            return converter.convert()
    except Exception as err:  # The converter raises several types.
        raise ConversionError(
            f"TFLite conversion with builtins only failed: {err}"
        ) from err


@contextlib.contextmanager
def _older_objects_frozen():
    """Within it, the garbage collector leaves the objects that existed
    before it alone (`gc.freeze`; unfrozen afterwards, and collected as
    before from then on).

    The converter runs a full `gc.collect()` to free the SavedModel it
    loaded: in a process holding TensorFlow, Keras and a few models that
    full collection walks every object there is (half a CPU-second in a
    fresh process, more in one that has trained), while what it frees was
    made during the conversion. The .tflite does not depend on it (the
    same bytes: tests/test_tflite.py). A process that froze objects
    itself (a forking server's children) is left as it is."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def operators(tflite_bytes):
    """The operators of every subgraph, with random-op seeds read out."""
    model = flatbuffer_utils.convert_bytearray_to_object(tflite_bytes)
    found = []
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            builtin_code = max(code.builtinCode, code.deprecatedBuiltinCode)
            if builtin_code == schema.BuiltinOperator.CUSTOM:
                name = code.customCode.decode() if code.customCode else "?"
                found.append(Operator(name, builtin=False))
                continue
            name = _BUILTIN_NAMES.get(builtin_code, str(builtin_code))
            seed = seed2 = None
            if name in RANDOM_OPS and op.builtinOptions is not None:
                seed = int(getattr(op.builtinOptions, "seed", 0))
                seed2 = int(getattr(op.builtinOptions, "seed2", 0))
            found.append(Operator(name, True, seed, seed2))
    return found


def check_unseeded_builtins(tflite_bytes, allowed_custom=()):
    """Raises ConversionError if any op is custom/Flex (other than
    `allowed_custom`) or a seeded random op.

    Returns the list of operators otherwise.
    """
    ops = operators(tflite_bytes)
    custom = sorted({op.name for op in ops
                     if not op.builtin and op.name not in allowed_custom})
    if custom:
        raise ConversionError(f"Non-builtin ops in the model: {custom}.")
    seeded = [op for op in ops if op.is_seeded_random]
    if seeded:
        raise ConversionError(
            "The model holds seeded random ops, so every device would draw "
            f"the same noise: {seeded}. Export without seeds.")
    return ops
