"""Splitting a trained run into a phone model and a TF Serving model.

    export_run("runs/ag_eps0.05", "exports/ag_eps0.05")

writes, atomically (a failure leaves no directory behind), the export
directory laid out in `tfdptext.rundir`: the phone model (token ids +
padding mask + random words -> the release), the vocabulary and tokenizer
settings, the server SavedModel (signature `serving_default`, whose inputs
are the release) and the manifest (mechanism, guarantee, specs, label
names, sizes, SHA-256). What is released, and what the server takes, comes
from the run's split point's `tfdptext.models.split_spec.SplitSpec`.

Input lengths. A phone model has a fixed input length, and its latency grows
with it (attention over every position), while real inputs are short
(SST-2's median is about 20 tokens). The export therefore converts the
phone model at several lengths (`lengths`; default 16, 32, 64, ... below the
run's max_length, plus max_length itself) and the app (like
`tfdptext.export.local.ExportedPipeline`) runs the shortest one that holds
all of a text's tokens ([CLS] and [SEP] included).

All lengths live in ONE .tflite (user/privatizer.tflite), one signature per
length: `serving_default` for max_length (what older exports and apps run)
and `length_<L>` for the others. We measured both layouts (MiniLM-L6, int8,
lengths 16/32/64/128, DPNR user side): four separate files are 21.8-22.0
MiB each, 87.5 MiB together, while the one file with four signatures is
23.2 MiB, because the converter stores each weight buffer once and every
signature reads it; a signature runs exactly as fast as the same length
converted alone (same p50 within noise) and returns bit-identical releases.
Memory (ai-edge-litert with XNNPACK, growth of the process's RSS after
loading and one invoke): one length of the one file 72 MiB, all four 76
MiB; one separate file 36-40 MiB, all four 118 MiB. For an app the one
file is better: a quarter of the download and storage, one file to ship,
hash and memory-map, one `Interpreter` whose signature runners are picked
per call, and less memory once inputs of several lengths have been seen
(separate files use less only in an app that loads a single length). An
app that runs the file's only signature without naming it must now name
it (`serving_default` keeps meaning the max_length model); `lengths=
[max_length]` writes a single-signature file as before.

What each length needs is in the manifest's `user.models` (file, signature,
inputs, outputs, random-words contract: the number of random words grows
with the length for token-level splits and with word dropout). The server
signature takes releases of any length up to max_length (`save_server`).

The export runs in named steps (`_export_into`): convert the user side,
state the guarantee over the table the phone model holds (d_chi, BRR:
`table_guarantee`, read back from the .tflite), write the tokenizer,
[convert the string-in phone model], save the server, write the manifest. Everything is written into a hidden sibling
`.<name>.partial-<pid>` (the TFLite converter's intermediate SavedModel
included, never the system's temporary directory), renamed to `<name>`
once complete. An export killed with SIGKILL leaves that partial
directory; the next export into the same parent removes every
`.<name>.partial-<pid>` there whose process is no longer alive on this
machine (`tfdptext.runfiles`), so re-running the same command gives a
clean export.
"""

import dataclasses
import numbers
import os
import re
import shutil
import sys

import keras
import numpy as np
import tensorflow as tf

from tfdptext import rundir
from tfdptext import runfiles
from tfdptext.privacy import text_checks
from tfdptext.data import tokenizer_vectors
from tfdptext.data.tokenization import TextTokenizer
from tfdptext.errors import TfdptextError
from tfdptext.export import int4
from tfdptext.export import tables
from tfdptext.export import text_input
from tfdptext.export import tflite
from tfdptext.models import input_checks
from tfdptext.models import saving_cache
from tfdptext.models import secure
from tfdptext.models import split as split_lib
from tfdptext.models import split_spec
from tfdptext.privacy import budget as budget_lib
from tfdptext.privacy import extraction
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import randomness
from tfdptext.privacy import words_contract
from tfdptext.version import __version__

# Importing registers the custom layers with Keras' deserializer.
import tfdptext.layers  # noqa: F401
import tfdptext.models  # noqa: F401

# The choices (noise source, quantization) live in a pure module.
from tfdptext.export.choices import INT4_SPLITS  # noqa: E402
from tfdptext.export.choices import NOISE_INPUT  # noqa: E402
from tfdptext.export.choices import NOISE_INTERNAL  # noqa: E402
from tfdptext.export.choices import NOISE_SOURCES  # noqa: E402
from tfdptext.export.choices import QUANTIZATIONS  # noqa: E402
from tfdptext.export.choices import RANDOMNESS  # noqa: E402
SIGNATURE = "serving_default"
# Phone model lengths: the shortest accepted ([CLS] + one token + [SEP]),
# and the shortest of the default set (then doubling below max_length).
MIN_LENGTH = 3
DEFAULT_SHORTEST_LENGTH = 16
# How the app picks the phone model (manifest.json, user.selection).
SELECTION_RULE = (
    "tokenize to user.length (max_length) as user.tokenizer says; let n be "
    "the number of real tokens ([CLS] and [SEP] included: the sum of "
    "padding_mask); run the model of user.models with the smallest length "
    ">= n on the first `length` entries of token_ids and padding_mask, "
    "with that model's number of random words")


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
    lengths: tuple = None  # None: default_lengths(max_length)
    budget_per_day: float = None  # None: tfdptext.privacy.budget's default
    budget_total: float = None
    no_budget: bool = False

    def check(self):
        """Raises ExportError for a value out of range; returns self.
        (`lengths` is checked against the run's max_length by
        `resolve_lengths`.)"""
        _check_length_values(self.lengths)
        if self.noise_source not in NOISE_SOURCES:
            raise ExportError(f"`noise_source` must be one of "
                              f"{NOISE_SOURCES}, received "
                              f"{self.noise_source!r}.")
        if self.quantization not in QUANTIZATIONS:
            raise ExportError(f"`quantization` must be one of "
                              f"{QUANTIZATIONS}, received "
                              f"{self.quantization!r}.")
        if self.int4 and self.tokenizer_in_graph:
            raise ExportError(
                "`quantization`=int4 (--quantization=int4) rewrites the "
                "token-id phone model only; --tokenizer_in_graph needs "
                "--quantization=int8 or float32.")
        if not isinstance(self.version, int) or self.version < 1:
            raise ExportError(f"`version` must be an integer >= 1, got "
                              f"{self.version!r}.")
        return self

    @property
    def quantize(self):
        """The converter's dynamic-range int8 quantization."""
        return self.quantization == "int8"

    @property
    def int4(self):
        """4-bit weights, rewritten into the float32 conversion
        (`tfdptext.export.int4`)."""
        return self.quantization == "int4"

    def check_split(self, split_point):
        """ExportError unless the quantization fits the run's split point:
        int4 only where the guarantee does not read the weights
        (INT4_SPLITS)."""
        if self.int4 and split_point not in INT4_SPLITS:
            raise ExportError(
                f"`quantization`=int4 (--quantization=int4) is allowed for "
                f"the split points {list(INT4_SPLITS)} only (min-max or "
                f"sigmoid + Laplace or d_chi on the text's vector, and the "
                f"code release), whose guarantee does not depend on the "
                f"weights; this run's split point is {split_point!r}, whose "
                f"privatizer reads rows of an embedding table that 4-bit "
                f"weights would change. Export it with "
                f"--quantization=int8 (the guarantee is then stated over the "
                f"int8 table) or float32.")
        return self


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


def default_lengths(max_length):
    """16, 32, 64, ... (doubling) below `max_length`, then `max_length`."""
    lengths = []
    length = DEFAULT_SHORTEST_LENGTH
    while length < max_length:
        lengths.append(length)
        length *= 2
    return lengths + [max_length]


def _check_length_values(lengths):
    """`lengths` as a tuple (None stays None); ExportError unless it is
    None or a non-empty list of integers (their range needs the run:
    `resolve_lengths`)."""
    if lengths is None:
        return None
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise ExportError(f"`lengths` must be a list of integers, received "
                          f"{lengths!r}.")
    values = list(lengths)
    if not values or any(isinstance(v, bool)
                         or not isinstance(v, numbers.Integral)
                         for v in values):
        raise ExportError(f"`lengths` must be a non-empty list of integers "
                          f"(input lengths of the phone model), received "
                          f"{lengths!r}.")
    return tuple(int(v) for v in values)


def resolve_lengths(lengths, max_length):
    """The phone model's input lengths, ascending, max_length included.

    Args:
        lengths: integers from MIN_LENGTH to `max_length`, or None for
            `default_lengths(max_length)`. `max_length` is always added:
            its model serves every text (longer ones are truncated).
        max_length: the run's max_length.

    Raises ExportError, naming `lengths` and the allowed range, for a value
    out of range.
    """
    lengths = _check_length_values(lengths)
    if lengths is None:
        return default_lengths(max_length)
    bad = sorted({v for v in lengths if not MIN_LENGTH <= v <= max_length})
    if bad:
        raise ExportError(
            f"`lengths` must lie from {MIN_LENGTH} ([CLS], one token, "
            f"[SEP]) to {max_length} (the run's max_length); {bad} "
            f"{'is' if len(bad) == 1 else 'are'} outside, in {list(lengths)}.")
    return sorted(set(lengths) | {max_length})


def phone_signature(length, max_length):
    """The signature key of the phone model of `length` in the .tflite:
    SIGNATURE for max_length (as in single-length exports), else
    `length_<length>`."""
    return SIGNATURE if length == max_length else f"length_{length}"


def _phone_model(user, split_point, length, noise_source=NOISE_INPUT):
    """Phone model of a fixed input `length`: (token_ids, padding_mask[,
    random_words]) -> {release name: release}.

    noise_source="input": `tfdptext.models.secure.secure_user_model` (every
    random choice from the app's words, checked, failing closed).
    "internal": the user side as trained, with its own RANDOM_* ops.
    """
    if noise_source == NOISE_INPUT:
        dropout, privatizer = secure.find_layers(user)
        if dropout is not None or privatizer is not None:
            return secure.secure_user_model(user, split_point, length)
    name = split_spec.get(split_point).release
    ids = keras.Input((length,), dtype="int32", name="token_ids")
    mask = keras.Input((length,), dtype="int32", name="padding_mask")
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


def server_input_specs(split_point, max_length, dim, *, any_length=False):
    """The TensorSpecs of the server signature's inputs (the release and,
    for token-level splits, the padding mask), in order. With
    `any_length`, the length axis is None (releases of any length up to
    max_length; see `_write_server`)."""
    length = None if any_length else max_length
    return [tf.TensorSpec(info.shape, info.dtype, name=info.name)
            for info in split_spec.get(split_point).signature_inputs(
                length, dim)]


# What a refused release is, by split point (the server's messages name it).
RELEASE_KINDS = {
    split_spec.SEQUENCE: "vector",
    split_spec.TOKEN: "list of token vectors",
    split_spec.TEXT_TO_TEXT: "token list",
    split_spec.CODE: "code",
}
_PHONE_REFUSAL = ("the phone model's refusal: its token inputs or its "
                  "random words failed their checks (its input_status "
                  "output says which); discard it and privatize the text "
                  "again with fresh random words")


def _refuse_unusable(release, spec, num_codes=None):
    """Server-side check: a release holding NaN/inf (or, for integers, -1)
    is the phone model's refusal, and a code outside [0, num_codes) no
    code at all; the signature refuses it, naming what was refused,
    rather than classify it."""
    kind = RELEASE_KINDS[spec.name]
    prefix = f"tfdptext: refused release (a {kind}): {spec.release}"
    checks = []
    if release.dtype.is_integer:
        negative = tf.reduce_all(release >= 0)
        checks.append(tf.debugging.Assert(negative, [
            f"{prefix} holds a negative value: -1 is {_PHONE_REFUSAL}"]))
        if num_codes is not None:
            checks.append(tf.debugging.Assert(
                tf.reduce_all(release < num_codes), [
                    f"{prefix} holds a code above {num_codes - 1}: the "
                    f"model has {num_codes} codes, 0 to {num_codes - 1}; "
                    "got", tf.reduce_max(release)]))
    else:
        finite = tf.reduce_all(tf.math.is_finite(release))
        checks.append(tf.debugging.Assert(finite, [
            f"{prefix} holds NaN or inf, {_PHONE_REFUSAL} (or the value "
            "sent was not a number)"]))
    with tf.control_dependencies(checks):
        return tf.identity(release)


def _refuse_non_finite(probabilities):
    """Server-side check of the answer: it must be finite (the release
    checks above come first; this is the last guard)."""
    ok = tf.reduce_all(tf.math.is_finite(probabilities))
    message = ("tfdptext: refused release: the server's answer is not "
               "finite")
    with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
        return tf.identity(probabilities)


def _num_codes(server):
    """m, the number of codes the server's CodeDecoder reads."""
    from tfdptext.models.code import CodeDecoder

    for layer in server._flatten_layers():
        if isinstance(layer, CodeDecoder):
            return int(layer.num_codes)
    raise ExportError("The code release's server model has no "
                      "CodeDecoder.")


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


def _refuse_bad_length(inputs, release_name, max_length):
    """Server-side check of a token-level release of any length: its
    length axis must equal the padding mask's and be at most
    `max_length` (the server encoder's positions); refused otherwise."""
    release = inputs[release_name]
    mask = inputs[split_spec.PADDING_MASK]
    length = tf.shape(release)[1]
    ok = tf.logical_and(tf.equal(length, tf.shape(mask)[1]),
                        length <= max_length)
    message = (f"tfdptext: refused release: its length must equal the "
               f"padding mask's and be at most {max_length}; got")
    check = tf.debugging.Assert(ok, [message, length, tf.shape(mask)[1]])
    with tf.control_dependencies([check]):
        return {name: tf.identity(t) for name, t in inputs.items()}


def _write_server(server, split_point, max_length, dim, path,
                  label_names=None, *, any_length=False):
    """Saves `server` as a SavedModel at `path` with one signature,
    `serving_default`: the spec's signature inputs -> probabilities,
    label, label_name. A release holding NaN, inf or negative ids is
    refused (`_refuse_unusable`).

    `any_length` (what the exporter uses): token-level releases (and their
    padding mask) may have any length from 1 to `max_length`, so releases
    of every phone model length are servable without padding; a longer
    one, or a mask of another length, is refused. Otherwise the length is
    fixed to `max_length`. The sequence split's release has no length
    axis either way.
    """
    spec = split_spec.get(split_point)
    num_codes = _num_codes(server) if spec.name == split_spec.CODE else None
    if label_names is None:
        label_names = [str(i) for i in range(int(server.output.shape[-1]))]
    names = tf.constant(label_names, dtype=tf.string)
    input_specs = server_input_specs(split_point, max_length, dim,
                                     any_length=any_length)
    input_names = [s.name for s in input_specs]
    check_length = any_length and spec.per_token

    def serve(*tensors):
        inputs = dict(zip(input_names, tensors))
        if check_length:
            inputs = _refuse_bad_length(inputs, spec.release, max_length)
        inputs[spec.release] = _refuse_unusable(inputs[spec.release], spec,
                                                num_codes)
        logits = server(spec.server_feed(inputs), training=False)
        probabilities = _refuse_non_finite(
            tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1))
        label = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        # Per row only what differs per row: what the probabilities of a
        # code release are is said once, in the manifest
        # (server.outputs.probabilities), not repeated in every answer.
        return {"probabilities": probabilities, "label": label,
                "label_name": tf.gather(names, label)}

    # The SavedModel Keras' ExportArchive writes, with `serve` traced once
    # (the archive traces it twice, and walks the model for lookup
    # tables, which a server model holds none of).
    tflite.save_traced_once({SIGNATURE: (serve, input_specs)}, path)


def _randomness_contract(phone, noise_source):
    """What the app must do for the model's randomness (manifest.json)."""
    if secure.RANDOM_WORDS not in phone.input:
        return {"source": RANDOMNESS[noise_source],
                "description": randomness.DESCRIPTIONS[
                    RANDOMNESS[noise_source]]}
    count = int(phone.input[secure.RANDOM_WORDS].shape[-1])
    lay = extraction.layout(secure.phone_consumed_words(phone))
    if lay.words != count:
        raise ExportError(f"The phone model takes {count} random words but "
                          f"its mechanism's layout needs {lay.words}.")
    return {
        "source": randomness.APP_SECURE_RNG,
        "input": secure.RANDOM_WORDS,
        "dtype": "int32",
        "words": count,
        "bytes": 4 * count,
        "extraction": lay.to_dict(),
        **words_contract.contract(lay.consumed),
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


def export_run(model_dir, output_dir, *, quantization="int8",
               model_name=None, version=1, command=None,
               noise_source=NOISE_INPUT, tokenizer_in_graph=False,
               lengths=None, budget_per_day=None, budget_total=None,
               no_budget=False):
    """Exports a training run (see the module docstring).

    Args:
        model_dir: a finished tfdptext-train run.
        output_dir: the new export directory (must not exist).
        quantization: "int8" (dynamic-range weights), "float32", or "int4"
            (4-bit weights, `tfdptext.export.int4`; sequence and code
            splits only, without `tokenizer_in_graph`).
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
        tokenizer_in_graph: also write the string-in phone model (at
            max_length only: it tokenizes in the graph).
        lengths: the phone model's input lengths, integers from 3 to the
            run's max_length (max_length is always added); default: 16,
            32, 64, ... below max_length, plus max_length. One signature
            per length in user/privatizer.tflite (module docstring).
        budget_per_day, budget_total: the user's privacy budget per UTC
            day and in total, in the guarantee's parameter and unit,
            recorded in the manifest ("budget") for every client's ledger
            (default: `tfdptext.privacy.budget.Budget.for_guarantee`).
        no_budget: export without a budget, deliberately (recorded and
            shown by the clients); excludes the two above.

    Returns the manifest dict. Raises ExportError before writing anything
    when the output exists or the run cannot be exported.
    """
    options = ExportOptions(quantization, model_name, version, noise_source,
                            tokenizer_in_graph, command,
                            _check_length_values(lengths),
                            budget_per_day=budget_per_day,
                            budget_total=budget_total,
                            no_budget=bool(no_budget)).check()
    runfiles.check_output_path(output_dir, error=ExportError)
    if os.path.exists(output_dir):
        raise ExportError(f"`output_dir` {output_dir} exists; choose a new "
                          "directory (exports are never overwritten).")
    source = check_run_dir(model_dir)
    options.check_split(source.spec.name)
    _budget(source.split["guarantee"], options)  # refused before any work
    options = dataclasses.replace(
        options,
        model_name=_check_model_name(model_name or os.path.basename(
            os.path.normpath(model_dir)).replace(".", "_")),
        lengths=tuple(resolve_lengths(options.lengths, source.max_length)))
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
    """The export's steps, each writing into `out` (an ExportDir);
    `options.lengths` is resolved (`resolve_lengths`)."""
    # A global seed (e.g. keras.utils.set_random_seed in a training run in
    # this process) would give every traced random op a fixed seed, and every
    # phone the same noise. Clear it; check_unseeded_builtins still guards.
    tf.random.set_seed(None)
    saving_cache.cache_skipsets()  # loads at a fraction of the cost
    user = keras.models.load_model(source.run.file(rundir.USER))
    server = keras.models.load_model(source.run.file(rundir.SERVER))
    guarantee = _export_guarantee(user, source.split, source.max_length,
                                  options.noise_source)
    phones = {length: _phone_model(user, source.spec.name, length,
                                   options.noise_source)
              for length in options.lengths}
    # Issue 29: every phone model checks its token inputs in the graph and
    # says why it refused them (`tfdptext.models.input_checks`).
    phones = {length: input_checks.checked_phone_model(
        phone, source.spec.release, source.split["tokenizer"])
        for length, phone in phones.items()}
    phone = phones[source.max_length]
    user_record = convert_user_side(phones, out, options)
    guarantee, table = table_guarantee(user, source.spec, guarantee, out)
    if table is not None:
        user_record["privatizer_table"] = table
    tokenizer = write_tokenizer(source, out)
    user_record["tokenizer"] = tokenizer.config()
    user_record["tokenizer_vectors"] = rundir.TOKENIZER_VECTORS
    user_record["text_checks"] = text_checks.manifest_record()
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


def convert_user_side(phones, out, options):
    """Step 1: the phone models, {length: Keras model}, as ONE TFLite file
    (PHONE_MODEL) with a signature per length (`phone_signature`), checked
    for seeded or, with noise_source=input, any random op. Returns the
    manifest's "user" record so far (`_user_record`)."""
    max_length = max(phones)
    # One sentence per invoke, as an app runs it; a fixed batch lets the
    # converter fold the reshape shape arithmetic (faster on the phone).
    tflite_bytes = tflite.convert_signatures(
        {phone_signature(length, max_length): phone
         for length, phone in sorted(phones.items())},
        quantize=options.quantize, batch_size=1, temp_dir=out.path)
    weights = None
    if options.int4:  # the float32 conversion's weights, in 4 bits
        tflite_bytes, weights = int4.rewrite(tflite_bytes)
    ops = tflite.check_unseeded_builtins(tflite_bytes)
    if options.noise_source == NOISE_INPUT and any(
            op.name in tflite.RANDOM_OPS for op in ops):
        raise ExportError("noise_source=input, but the model still draws "
                          "its own random numbers.")
    _write_bytes(out.file(rundir.PHONE_MODEL), tflite_bytes)
    record = _user_record(phones, options, sorted({op.name for op in ops}))
    if weights is not None:
        record["int4_weights"] = weights
    return record


def _table_kind(privatizer, spec):
    """"dchi" or "brr" when the privatizer reads a table whose rows the
    guarantee is over (d_chi text-to-text, BRR, d_chi on the token split's
    embeddings), else None."""
    from tfdptext import layers

    if isinstance(privatizer, layers.BRRTextPrivatizer):
        return "brr"
    if isinstance(privatizer, layers.DChiTextPrivatizer):
        return "dchi"
    if isinstance(privatizer, layers.DChiNoise) and \
            spec.name == split_spec.TOKEN:
        return "dchi"
    return None


def table_guarantee(user, spec, guarantee, out):
    """Step 1b: the guarantee over the table the phone model holds.

    For a privatizer that reads a table (`_table_kind`), reads it back out
    of PHONE_MODEL as the kernel dequantizes it (`tfdptext.export.tables`)
    and returns (guarantee, manifest record). d_chi: the metric is the
    distance between THOSE rows (int8 exports quantize the table); the
    guarantee says so, with the table's SHA-256 and how far it moved. BRR:
    the signs read back must be the trained codes (ExportError otherwise).
    Other splits: (guarantee, None).
    """
    _, privatizer = secure.find_layers(user)
    kind = _table_kind(privatizer, spec)
    if kind is None or not guarantee.is_private:
        return guarantee, None
    trained = split_lib.release_embedding_table(user)
    with open(out.file(rundir.PHONE_MODEL), "rb") as f:
        held = tables.read_table(f.read(), trained.shape)
    record = tables.record(held, trained)
    where = (f"the table the phone model holds ({rundir.PHONE_MODEL}, "
             f"{held.dtype}, SHA-256 of its float32 values "
             f"{held.sha256[:16]}...; tfdptext.export.tables."
             "read_export_table)")
    if kind == "brr":
        if not np.array_equal(np.sign(held.values), np.sign(trained)):
            raise ExportError(
                "The BRR codes read back from the phone model differ from "
                "the trained codes (their signs changed in conversion); "
                "export with --quantization=float32.")
        condition = (f"the codes are the signs of {where}: equal to the "
                     "trained codes (checked at export)")
        metric = guarantee.metric
    else:
        same = held.dtype == "float32" and np.array_equal(held.values,
                                                          trained)
        condition = (
            f"distances are between the rows of {where}" + (
                ": the float32 table as trained" if same else
                f": the guarantee is over those rows as dequantized "
                f"(largest change of an entry from the trained float32 "
                f"table {record['max_abs_change']:.3g}), not over the "
                "trained table"))
        metric = (guarantee.metric + " as held by the phone model"
                  + ("" if same else f" ({held.dtype}, dequantized)"))
    return dataclasses.replace(
        guarantee, metric=metric,
        conditions=guarantee.conditions + (condition,),
        details={**guarantee.details, "table": record}), record


def _length_record(length, phone, max_length, options):
    """The manifest's record of the phone model of one length."""
    return {
        "length": length,
        "file": rundir.PHONE_MODEL,
        "signature": phone_signature(length, max_length),
        "inputs": {name: _tensor_record(t)
                   for name, t in phone.input.items()},
        "outputs": {name: _tensor_record(t)
                    for name, t in phone.output.items()},
        "randomness": _randomness_contract(phone, options.noise_source),
    }


def _user_record(phones, options, tflite_ops):
    """The manifest's "user" record: `models`, one record per length
    (ascending), and, at the top level as in single-length exports, the
    max_length model's file, signature, inputs, outputs and randomness."""
    max_length = max(phones)
    models = [_length_record(length, phones[length], max_length, options)
              for length in sorted(phones)]
    longest = models[-1]
    return {
        "file": longest["file"],
        "signature": longest["signature"],
        "length": max_length,
        "about": (
            "file/signature/inputs/outputs/randomness describe the "
            "max_length model, which serves every text (longer texts are "
            "truncated); `models` lists every length, each a signature of "
            "the same file; pick one by `selection`"),
        "quantization": options.quantization,
        "noise_source": options.noise_source,
        "inputs": longest["inputs"],
        "outputs": longest["outputs"],
        "tflite_ops": tflite_ops,
        "randomness": longest["randomness"],
        "lengths": sorted(phones),
        "selection": SELECTION_RULE,
        "models": models,
        input_checks.INPUT_STATUS: {
            "about": ("0: the token inputs follow the contract; otherwise "
                      "the sum of the bits below, and the release is "
                      "unusable (NaN, or -1). An unusable release with "
                      "input_status 0 failed its random words' checks"),
            **{str(bit): text for bit, text in
               input_checks.STATUS_MEANINGS.items()}},
    }


def write_tokenizer(source, out):
    """Step 2: the vocabulary (EXPORT_VOCAB) and tokenizer settings
    (TOKENIZER) the app reproduces the ids with, and test vectors
    (TOKENIZER_VECTORS: strings and their ids) it checks itself against;
    returns the tokenizer."""
    tokenizer = TextTokenizer.from_config(source.run.file(rundir.VOCAB),
                                          source.split["tokenizer"])
    os.makedirs(out.file(rundir.USER_DIR), exist_ok=True)
    tokenizer.save_vocabulary(out.file(rundir.EXPORT_VOCAB))
    rundir.write_json(out.file(rundir.TOKENIZER), tokenizer.config())
    rundir.write_json(out.file(rundir.TOKENIZER_VECTORS),
                      tokenizer_vectors.vectors(tokenizer))
    return tokenizer


def convert_text_input(phone, tokenizer, out, options):
    """Optional step: the string-in phone model (TEXT_PHONE_MODEL, TF Text
    custom ops); returns its manifest record."""
    text_model = text_input.text_input_model(phone, tokenizer)
    # The tokenizer's lookup tables are tracked (`convert`'s `track`): its
    # layer only, as the phone model holds none (step 1 saved it
    # untracked); walking the whole model would trace every Keras model
    # in it again, for the same .tflite byte for byte (9.1 against 4.6
    # CPU-s for the tiny test encoder's string-in model).
    text_bytes = tflite.convert(text_model, quantize=options.quantize,
                                custom_ops=True, temp_dir=out.path,
                                track=[text_model.get_layer(
                                    text_input.TOKENIZER_LAYER)])
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
    returns the manifest's "server" record. Token-level releases of any
    length up to max_length are accepted (`_write_server`'s
    `any_length`)."""
    path = out.server_path(options.model_name, options.version)
    _write_server(server, source.spec.name, source.max_length, dim,
                  out.file(path), label_names, any_length=True)
    record = {
        "model_name": options.model_name,
        "version": options.version,
        "path": path,
        "signature": SIGNATURE,
        "inputs": {info.name: [*info.shape, info.dtype]
                   for info in source.spec.signature_inputs(None, dim)},
        "outputs": _server_outputs(source.spec),
        "max_length": source.max_length,
    }
    record["release_length"] = _server_length_contract(source)
    return record


def _server_outputs(spec):
    """The manifest's description of the server signature's outputs."""
    outputs = {"probabilities": "float32 (batch, classes)",
               "label": "int32 (batch,)",
               "label_name": "string (batch,)"}
    if spec.name == split_spec.CODE:
        outputs["probabilities"] += (
            ": P(class | code), the decoder's table row for the released "
            "code, the same for every text that released it; not a "
            "confidence about one text")
    return outputs


def _server_length_contract(source):
    """What the server signature accepts along the length axis
    (manifest.json, server.release_length)."""
    if not source.spec.per_token:
        return ("no length axis: one vector per text, whatever the phone "
                "model's length")
    return (
        f"any length from 1 to {source.max_length} (max_length): send the "
        "release and padding_mask as the phone model of user.models made "
        "them; both must have the same length. A batch shares one length: "
        "pad shorter rows to the longest (release 0, or the pad id for "
        "token ids; padding_mask 0), which leaves their answer unchanged. "
        "Longer releases, or a mask of another length, are refused")


def _budget(guarantee, options):
    """The export's budget record (`tfdptext.privacy.budget`);
    ExportError naming the flag for bounds that cannot hold."""
    try:
        return budget_lib.Budget.for_guarantee(
            guarantee, options.budget_per_day, options.budget_total,
            options.no_budget).to_dict()
    except TfdptextError as err:
        raise ExportError(str(err)) from None


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
        "budget": _budget(guarantee.to_dict(), options),
        "split_point": source.spec.name,
        "user": user_record,
        "server": server_record,
        "label_names": label_names,
        "files": out.file_records(),
        "versions": {"tfdptext": __version__, "tensorflow": tf.__version__,
                     "keras": keras.__version__},
        "command": options.command or " ".join(sys.argv),
    })
