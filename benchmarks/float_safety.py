#!/usr/bin/env python
"""Floating-point safety of every noise sampler, measured.

Draws --draws values per sampler (default 10^8) and counts the non-finite
ones (NaN, +inf, -inf), with the min and max of the finite ones and the wall
time, for every combination of

- path: TensorFlow (eager Python, one `tf.function` per chunk) or TFLite
  (a small Keras model converted with `tfdptext.export.tflite.convert`,
  batch 1, invoked with `ai_edge_litert`'s Interpreter until enough values
  are drawn);
- noise source: internal (the unseeded TF random ops / TFLite's
  RANDOM_UNIFORM and RANDOM_STANDARD_NORMAL) or input (uniforms made from
  int32 words from os.urandom, `tfdptext.models.secure.uniforms_from_words`,
  the words fed anew on every chunk / invoke);
- sampler: the functions of `tfdptext.layers.sampling` (exponential,
  Laplace with scale 1, the Gamma(n, 1) radius of d_chi, unit directions,
  d_chi vectors with eta 1) and the layers' outputs on zeros (LaplaceNoise
  with epsilon 1 per coordinate, i.e. scale 1; DChiNoise with eta 1;
  RandomizedResponse with epsilon 1). WordDropout is not numeric.

Vector samplers draw whole n-dimensional vectors (--dimension, 384), and
their draws are counted as coordinates; the last chunk is not cut, so they
draw slightly more than --draws. The Gamma radius is counted in radii
(--gamma_draws, default 10^7: each radius is a sum of n = 384
exponentials, so 10^8 radii would be 3.8 * 10^10 exponentials and, with
input noise, 154 GB of os.urandom words: too slow for this check).

A second check feeds the input-noise models the extreme words (U = 0 and
U = 1 - 2^-24, alternating, and their int32 aliases -2^31 and -1), and on
the TF path also uniforms of exactly 1.0 and 0.0 given directly (what a
faulty kernel or app could return), to show the clamp keeps every value
finite.

    KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2 \\
        .venv/bin/python benchmarks/float_safety.py \\
        --output docs/_fragments/float_safety.md
"""

import dataclasses
import datetime
import importlib.metadata
import math
import os
import shlex
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

PATHS = ("TF", "TFLite")
SOURCES = ("internal", "input")
SAMPLERS = ("exponential", "laplace", "gamma_integer_shape",
            "unit_directions", "dchi", "LaplaceNoise", "DChiNoise",
            "RandomizedResponse")
# What the draws of each sampler count.
UNITS = {"gamma_integer_shape": "radii", "unit_directions": "coordinates",
         "dchi": "coordinates", "DChiNoise": "coordinates"}
_VECTOR = ("unit_directions", "dchi", "DChiNoise")
_U_MAX = 2**24 - 1
# int32 words and the uniform (w mod 2^24) / 2^24 each gives.
EXTREME_WORDS = {
    "0 (U = 0)": (0,),
    "2^24 - 1 (U = 1 - 2^-24)": (_U_MAX,),
    "alternating 0, 2^24 - 1": (0, _U_MAX),
    "alternating 2^24 - 1, 0": (_U_MAX, 0),
    "-2^31 (U = 0)": (-2**31,),
    "-1 (U = 1 - 2^-24)": (-1,),
}
# Uniforms given directly (TF path only): what a faulty source could give.
EXTREME_UNIFORMS = {"U = 1.0 exactly": (1.0,), "U = 0.0 exactly": (0.0,),
                    "alternating 1.0, 0.0": (1.0, 0.0)}


@dataclasses.dataclass
class Tally:
    """Counts and range of the values seen so far."""

    draws: int = 0
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    min: float = math.inf
    max: float = -math.inf

    @property
    def non_finite(self):
        return self.nan + self.posinf + self.neginf

    def add(self, draws, nan, posinf, neginf, low, high):
        self.draws += int(draws)
        self.nan += int(nan)
        self.posinf += int(posinf)
        self.neginf += int(neginf)
        self.min = min(self.min, float(low))
        self.max = max(self.max, float(high))

    def add_array(self, values):
        values = np.asarray(values, np.float32).ravel()
        finite = np.isfinite(values)
        bad = values.size - int(np.count_nonzero(finite))
        if bad:
            nan = int(np.count_nonzero(np.isnan(values)))
            posinf = int(np.count_nonzero(np.isposinf(values)))
            neginf = bad - nan - posinf
            values = values[finite]
        else:
            nan = posinf = neginf = 0
        low = values.min() if values.size else math.inf
        high = values.max() if values.size else -math.inf
        self.add(finite.size, nan, posinf, neginf, low, high)


@dataclasses.dataclass
class Row:
    path: str
    source: str
    sampler: str
    tally: Tally
    seconds: float
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Spec:
    """Shapes of one chunk of a sampler (batch 1)."""

    sampler: str
    value_shape: tuple    # the (dummy) input of internal-noise models
    uniforms_shape: tuple  # the uniforms of input-noise models, no batch
    values: int            # values counted per chunk

    @property
    def words(self):
        return int(np.prod(self.uniforms_shape))


def spec(sampler, chunk, dimension):
    """Chunk shapes: about `chunk` values (uniforms for the Gamma radius)."""
    from tfdptext.layers import sampling

    n = dimension
    vectors = max(1, chunk // n)
    if sampler in ("exponential", "RandomizedResponse"):
        return Spec(sampler, (chunk,), (chunk,), chunk)
    if sampler in ("laplace", "LaplaceNoise"):
        return Spec(sampler, (chunk,), (chunk, 2), chunk)
    if sampler == "gamma_integer_shape":
        return Spec(sampler, (vectors,), (vectors, n), vectors)
    if sampler == "unit_directions":
        return Spec(sampler, (vectors, n), (vectors, 2 * ((n + 1) // 2)),
                    vectors * n)
    if sampler in ("dchi", "DChiNoise"):
        return Spec(sampler, (vectors, n),
                    (vectors, sampling.dchi_uniforms_per_vector(n)),
                    vectors * n)
    raise ValueError(f"Unknown sampler {sampler!r}.")


def _noise_layer_class():
    import keras
    import tensorflow as tf

    from tfdptext import layers as dp_layers
    from tfdptext.layers import sampling
    from tfdptext.models import secure

    class NoiseBlock(keras.layers.Layer):
        """One chunk of a sampler's output, batch 1.

        Internal noise: called on float zeros of `value_shape` (only their
        shape is used). Input noise: called on int32 words (flat,
        `spec.words` per row) or on float uniforms of the same length.
        """

        def __init__(self, sampler, dimension, source, spec_, **kwargs):
            super().__init__(**kwargs)
            self.sampler = sampler
            self.n = dimension
            self.source = source
            self.spec = spec_
            self.inner = None
            value = (1, *spec_.value_shape)
            if sampler == "LaplaceNoise":
                self.inner = dp_layers.LaplaceNoise(epsilon=1.0)
            elif sampler == "DChiNoise":
                self.inner = dp_layers.DChiNoise(eta=1.0)
            elif sampler == "RandomizedResponse":
                self.inner = dp_layers.RandomizedResponse(epsilon=1.0)
            if self.inner is not None:
                self.inner.build(value)

        def call(self, x):
            s, n = self.sampler, self.n
            if self.source == "internal":
                shape = tf.shape(x)
                if self.inner is not None:
                    return self.inner.apply(x)
                if s == "exponential":
                    return sampling.exponential(shape)
                if s == "laplace":
                    return sampling.laplace(shape, 1.0)
                if s == "gamma_integer_shape":
                    return sampling.gamma_integer_shape(shape, n, 1.0)
                if s == "unit_directions":
                    return sampling.unit_directions(shape)
                if s == "dchi":
                    return sampling.dchi(shape, 1.0)
                raise ValueError(s)
            if x.dtype.is_integer:
                u = secure.uniforms_from_words(x)
            else:
                u = tf.cast(x, tf.float32)
            u = tf.reshape(u, [1, *self.spec.uniforms_shape])
            if self.inner is not None:
                zeros = tf.zeros([1, *self.spec.value_shape], tf.float32)
                return self.inner.apply(zeros, u)
            if s == "exponential":
                return sampling.exponential(None, u)
            if s == "laplace":
                return sampling.laplace(None, 1.0, u)
            if s == "gamma_integer_shape":
                return sampling.gamma_integer_shape(None, n, 1.0, u)
            if s == "unit_directions":
                return sampling.unit_directions(None, n, u)
            if s == "dchi":
                return sampling.dchi(None, 1.0, n, u)
            raise ValueError(s)

    return NoiseBlock


def _keras_model(sampler, source, spec_, dimension):
    import keras

    block = _noise_layer_class()(sampler, dimension, source, spec_,
                                 name="noise")
    if source == "internal":
        x = keras.Input(spec_.value_shape, dtype="float32", name="zeros")
    else:
        x = keras.Input((spec_.words,), dtype="int32", name="random_words")
    return keras.Model(x, block(x))


def _tf_stats():
    import tensorflow as tf

    def stats(x):
        x = tf.reshape(tf.cast(x, tf.float32), [-1])
        finite = tf.math.is_finite(x)
        count = lambda c: tf.reduce_sum(tf.cast(c, tf.int64))
        return (tf.size(x), count(tf.math.is_nan(x)),
                count(tf.equal(x, math.inf)), count(tf.equal(x, -math.inf)),
                tf.reduce_min(tf.where(finite, x, math.inf)),
                tf.reduce_max(tf.where(finite, x, -math.inf)),
                x[:256])
    return stats


class _Fresh:
    """Checks that consecutive chunks differ (fresh noise every call)."""

    def __init__(self, label):
        self.label = label
        self.previous = None

    def __call__(self, head):
        head = np.asarray(head).ravel()[:256].copy()
        if self.previous is not None and np.array_equal(head, self.previous):
            raise RuntimeError(f"{self.label}: two consecutive chunks start "
                               "with the same 256 values: the noise is not "
                               "fresh, so the count would be meaningless.")
        self.previous = head


def _chunks(target, per_chunk):
    return max(1, -(-int(target) // int(per_chunk)))


def run_tf(sampler, source, draws, chunk, dimension):
    """One TF row: ceil(draws / per-chunk values) chunks."""
    import tensorflow as tf

    from tfdptext.models import secure

    sp = spec(sampler, chunk, dimension)
    block = _noise_layer_class()(sampler, dimension, source, sp)
    stats = _tf_stats()
    fn = tf.function(lambda x: stats(block(x)))
    zeros = tf.zeros((1, *sp.value_shape), tf.float32)
    label = f"TF/{source}/{sampler}"
    fresh = _Fresh(label)
    tally = Tally()
    # Trace outside the timed loop (its draws are not counted).
    fn(zeros if source == "internal" else
       tf.constant(secure.os_random_words((1, sp.words))))
    start = time.perf_counter()
    for _ in range(_chunks(draws, sp.values)):
        if source == "internal":
            x = zeros
        else:
            x = tf.constant(secure.os_random_words((1, sp.words)))
        size, nan, posinf, neginf, low, high, head = fn(x)
        tally.add(size.numpy(), nan.numpy(), posinf.numpy(), neginf.numpy(),
                  low.numpy(), high.numpy())
        fresh(head.numpy())
    return Row("TF", source, sampler, tally, time.perf_counter() - start)


class TfliteNoise:
    """A converted NoiseBlock model and its interpreter."""

    def __init__(self, sampler, source, chunk, dimension):
        from ai_edge_litert.interpreter import Interpreter

        from tfdptext.export import tflite

        self.spec = spec(sampler, chunk, dimension)
        self.source = source
        start = time.perf_counter()
        model = _keras_model(sampler, source, self.spec, dimension)
        self.tflite_bytes = tflite.convert(model, quantize=False,
                                           batch_size=1)
        self.convert_seconds = time.perf_counter() - start
        self.op_names = sorted({op.name for op in
                                tflite.check_unseeded_builtins(
                                    self.tflite_bytes)})
        self.interpreter = Interpreter(model_content=self.tflite_bytes)
        self.interpreter.allocate_tensors()
        self.input = self.interpreter.get_input_details()[0]["index"]
        self.output = self.interpreter.get_output_details()[0]["index"]
        if source == "internal":
            self.interpreter.set_tensor(
                self.input, np.zeros((1, *self.spec.value_shape), np.float32))

    def __call__(self, words=None):
        if words is not None:
            self.interpreter.set_tensor(
                self.input, np.asarray(words, np.int32).reshape(
                    1, self.spec.words))
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self.output)


def run_tflite(sampler, source, draws, chunk, dimension, noise=None):
    """One TFLite row: invokes until `draws` values are drawn."""
    from tfdptext.models import secure

    noise = noise or TfliteNoise(sampler, source, chunk, dimension)
    fresh = _Fresh(f"TFLite/{source}/{sampler}")
    tally = Tally()
    start = time.perf_counter()
    for _ in range(_chunks(draws, noise.spec.values)):
        words = (secure.os_random_words((1, noise.spec.words))
                 if source == "input" else None)
        out = noise(words)
        tally.add_array(out)
        fresh(out)
    return Row("TFLite", source, sampler, tally, time.perf_counter() - start,
               note=f"conversion {noise.convert_seconds:.1f} s")


def _pattern(values, count, dtype):
    reps = -(-count // len(values))
    return np.tile(np.asarray(values, dtype), reps)[:count].reshape(1, count)


def extreme_rows(samplers, chunk, dimension, paths=PATHS, tflite_models=None):
    """One row per (path, sampler): every extreme pattern, counted together.

    `tflite_models`: optional {sampler: TfliteNoise} (input source) to reuse.
    """
    import tensorflow as tf

    rows = []
    stats = _tf_stats()
    for path in paths:
        for sampler in samplers:
            sp = spec(sampler, chunk, dimension)
            tally = Tally()
            start = time.perf_counter()
            if path == "TF":
                block = _noise_layer_class()(sampler, dimension, "input", sp)
                fn = tf.function(lambda x: stats(block(x)),
                                 reduce_retracing=True)
                inputs = [_pattern(v, sp.words, np.int32)
                          for v in EXTREME_WORDS.values()]
                inputs += [_pattern(v, sp.words, np.float32)
                           for v in EXTREME_UNIFORMS.values()]
                for x in inputs:
                    size, nan, posinf, neginf, low, high, _ = fn(
                        tf.constant(x))
                    tally.add(size.numpy(), nan.numpy(), posinf.numpy(),
                              neginf.numpy(), low.numpy(), high.numpy())
                patterns = len(inputs)
            else:
                noise = (tflite_models or {}).get(sampler) or TfliteNoise(
                    sampler, "input", chunk, dimension)
                for v in EXTREME_WORDS.values():
                    tally.add_array(noise(_pattern(v, sp.words, np.int32)))
                patterns = len(EXTREME_WORDS)
            rows.append(Row(path, "input (extreme)", sampler, tally,
                            time.perf_counter() - start,
                            note=f"{patterns} patterns"))
    return rows


def run_all(draws, chunk, dimension=384, gamma_draws=None, paths=PATHS,
            sources=SOURCES, samplers=SAMPLERS, extremes=True, log=print):
    """Every (path, source, sampler) row, then the extreme-word rows."""
    gamma_draws = draws if gamma_draws is None else gamma_draws
    rows = []
    kept = {}
    for path in paths:
        for source in sources:
            for sampler in samplers:
                target = gamma_draws if sampler == "gamma_integer_shape" \
                    else draws
                if path == "TF":
                    row = run_tf(sampler, source, target, chunk, dimension)
                else:
                    noise = TfliteNoise(sampler, source, chunk, dimension)
                    if source == "input":
                        kept[sampler] = noise
                    row = run_tflite(sampler, source, target, chunk,
                                     dimension, noise)
                rows.append(row)
                if log:
                    log(_line(row))
    if extremes and "input" in sources:
        for row in extreme_rows(samplers, chunk, dimension, paths, kept):
            rows.append(row)
            if log:
                log(_line(row))
    return rows


def _line(row):
    t = row.tally
    return (f"{row.path:6s} {row.source:16s} {row.sampler:20s} "
            f"draws={t.draws:,} non-finite={t.non_finite} "
            f"min={t.min:.7g} max={t.max:.7g} {row.seconds:.1f} s")


def _fmt(x):
    return f"{x:.7g}"


def _non_finite(t):
    if not t.non_finite:
        return "0"
    return (f"**{t.non_finite:,}** (NaN {t.nan:,}, +inf {t.posinf:,}, "
            f"-inf {t.neginf:,})")


COLUMNS = ["path", "noise source", "sampler", "draws", "non-finite", "min",
           "max", "seconds"]
# The docs regions (docs/benchmarks.md) of the two tables: the draws, then
# the extreme words.
REGIONS = ("floating-point-safety-of-the-samplers-10",
           "floating-point-safety-of-the-samplers-10-2")


def table_cells(rows):
    """The docs' table of `rows` ({"columns", "rows"} of strings)."""
    cells = []
    for r in rows:
        unit = UNITS.get(r.sampler, "")
        draws = f"{r.tally.draws:,}" + (f" {unit}" if unit else "")
        if r.source.endswith("(extreme)"):
            draws += f" ({r.note})"
        cells.append([r.path, r.source, r.sampler, draws,
                      _non_finite(r.tally), _fmt(r.tally.min),
                      _fmt(r.tally.max), f"{r.seconds:.1f}"])
    return {"columns": COLUMNS, "rows": cells}


def table(rows):
    found = table_cells(rows)
    lines = ["| " + " | ".join(found["columns"]) + " |",
             "|" + "---|" * len(found["columns"])]
    return "\n".join(lines + ["| " + " | ".join(row) + " |"
                              for row in found["rows"]])


def write_results(rows):
    """benchmarks/results/float_safety.json (every row's counts, range and
    seconds) and the two docs tables as provenance records."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))))
    from benchmarks import machine

    machine.write_json(None, {"rows": [
        {"path": r.path, "source": r.source, "sampler": r.sampler,
         "note": r.note, "seconds": r.seconds,
         **dataclasses.asdict(r.tally)} for r in rows]})
    extreme = [r for r in rows if r.source.endswith("(extreme)")]
    main = [r for r in rows if r not in extreme]
    for name, part in zip(REGIONS, (main, extreme)):
        machine.write_json(None, {"from": "float_safety"}, name=name,
                           table=table_cells(part))


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("Model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def _version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def fragment(rows, command, total_seconds, draws, chunk, dimension,
             gamma_draws):
    main = [r for r in rows if not r.source.endswith("(extreme)")]
    extreme = [r for r in rows if r.source.endswith("(extreme)")]
    bad = [r for r in rows if r.tally.non_finite]
    cores = os.cpu_count()
    text = [
        "## Floating-point safety of the samplers (10^8 draws each)",
        "",
        "Command (from the repository root):",
        "",
        f"    {command}",
        "",
        f"Machine: {cpu_name()}, {cores} cores shared with other jobs; "
        f"TF {_version('tensorflow')}, Keras {_version('keras')}, "
        f"ai-edge-litert {_version('ai-edge-litert')}. Date: "
        f"{datetime.date.today().isoformat()}. Whole run: "
        f"{total_seconds / 60:.1f} minutes.",
        "",
        f"Each row draws {draws:,} values (vector samplers: whole "
        f"{dimension}-d vectors, counted as coordinates, so slightly more; "
        f"the Gamma({dimension}, 1) radius of d_chi: {gamma_draws:,} radii, "
        f"i.e. {gamma_draws * dimension:,} exponentials, as 10^8 radii "
        "would be 3.8 * 10^10 exponentials, 10 times the time of the four "
        "gamma rows below) "
        f"in chunks of about "
        f"{chunk:,} values: one `tf.function` call (TF) or one invoke of a "
        "model converted with `tfdptext.export.tflite.convert(model, "
        "quantize=False, batch_size=1)` (TFLite, default interpreter "
        "options). Internal noise: the unseeded random ops; input noise: "
        "fresh int32 words from os.urandom every chunk, through "
        "`uniforms_from_words`. Scales: laplace and LaplaceNoise "
        "(epsilon 1 per coordinate) have b = 1, gamma_integer_shape has "
        "scale 1, dchi and DChiNoise eta = 1; the layers run on zeros, so "
        "their output is the noise (RandomizedResponse: bits). min and max "
        "are over the finite values; seconds is drawing and checking "
        "(conversion and tracing excluded). Every run also checks that "
        "consecutive chunks differ, i.e. that the noise is fresh on every "
        "call.",
        "",
        table(main),
        "",
        "Extreme words (input noise): each input-noise model fed whole "
        "chunks of the words " + ", ".join(EXTREME_WORDS) +
        "; on the TF path also the uniforms " + ", ".join(EXTREME_UNIFORMS) +
        " given directly (what a faulty kernel or app could return), "
        "all patterns of a row counted together:",
        "",
        table(extreme),
        "",
    ]
    if bad:
        text += [
            f"**{len(bad)} row(s) above hold non-finite values: a bug.**",
            "",
        ]
    else:
        text += [
            "No sampler gave a non-finite value, on either path, from "
            "either noise source, nor from the extreme words.",
            "",
        ]
    internal_max = max((r.tally.max for r in main
                        if r.sampler == "exponential"
                        and r.source == "internal"), default=None)
    internal = ("" if internal_max is None else
                f"; the internal ops' floats carry 23 random bits, so their "
                f"exponentials stop at 23 ln 2 = 15.94: measured maximum "
                f"{_fmt(internal_max)}")
    text += [
        "Why none can be infinite: every uniform, drawn by "
        "`tf.random.uniform` / RANDOM_UNIFORM or made from a word as "
        "(w mod 2^24) / 2^24, is clamped to [0, 1 - 2^-24], so an "
        "exponential -log1p(-U) lies in [0, 24 ln 2] = [0, 16.64] and the "
        "log never sees 0 (the extreme rows reach exactly 24 ln 2 = "
        f"16.63553{internal}). "
        "Laplace is the difference of two such exponentials, "
        "b (E1 - E2), so |value| <= 16.64 b, not the inverse-CDF form "
        "-b sign(U - 1/2) log(1 - 2 |U - 1/2|), whose log argument is 0 "
        "at U = 0. "
        f"The d_chi radius is a sum of n exponentials (at most 16.64 n = "
        f"{24 * math.log(2) * dimension:.0f} for n = {dimension} and scale "
        "1, reached above), the input-noise Box-Muller multiplies "
        "sqrt(-2 log1p(-U1)) <= 5.77 of a clamped U1 by cos / sin of "
        "2 pi U2, and TensorFlow's own normal kernel (tsl "
        "random_distributions_utils.h) raises its U1 to at least 1e-7 "
        "before the log, so |z| <= 5.68. "
        "The unit direction divides by max(norm, 1e-30), so the all-zero "
        "vector that U1 = 0 gives (words 0 or -2^31) comes out as zeros "
        "rather than 0 / 0 = NaN.",
        "",
    ]
    return "\n".join(text)


def _define_flags():
    from absl import flags

    flags.DEFINE_integer("draws", 100_000_000,
                         "Values per sampler (coordinates for vectors).")
    flags.DEFINE_integer("gamma_draws", 10_000_000,
                         "Gamma radii (each a sum of --dimension "
                         "exponentials).")
    flags.DEFINE_integer("chunk", 1_000_000,
                         "Values per tf.function call / TFLite invoke.")
    flags.DEFINE_integer("dimension", 384, "Vector length n.")
    flags.DEFINE_list("paths", list(PATHS), "TF and/or TFLite.")
    flags.DEFINE_list("sources", list(SOURCES), "internal and/or input.")
    flags.DEFINE_list("samplers", list(SAMPLERS), "Samplers to run.")
    flags.DEFINE_bool("extremes", True, "Run the extreme-words check.")
    flags.DEFINE_string("output", "",
                        "Write the markdown docs section here ('' to skip).")


def main(argv):
    from absl import flags

    from absl import logging

    del argv
    logging.set_verbosity(logging.WARNING)
    FLAGS = flags.FLAGS
    for name, allowed in (("paths", PATHS), ("sources", SOURCES),
                          ("samplers", SAMPLERS)):
        unknown = set(FLAGS[name].value) - set(allowed)
        if unknown:
            raise app_usage_error(f"--{name}: unknown {sorted(unknown)}.")
    start = time.perf_counter()
    rows = run_all(FLAGS.draws, FLAGS.chunk, FLAGS.dimension,
                   FLAGS.gamma_draws, FLAGS.paths, FLAGS.sources,
                   FLAGS.samplers, FLAGS.extremes)
    total = time.perf_counter() - start
    command = ("KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2 "
               ".venv/bin/python " + " ".join(
                   shlex.quote(a) for a in
                   [os.path.relpath(sys.argv[0])] + sys.argv[1:]))
    text = fragment(rows, command, total, FLAGS.draws, FLAGS.chunk,
                    FLAGS.dimension, FLAGS.gamma_draws)
    print(text)
    write_results(rows)
    if FLAGS.output:
        os.makedirs(os.path.dirname(FLAGS.output) or ".", exist_ok=True)
        with open(FLAGS.output, "w") as handle:
            handle.write(text)
    if any(r.tally.non_finite for r in rows):
        sys.exit(1)


def app_usage_error(message):
    from absl import app

    return app.UsageError(message)


if __name__ == "__main__":
    from absl import app

    _define_flags()
    app.run(main)
