"""Recovering TFLite's internal noise seed from one privatized release.

A DPNR-style phone model (`MinMaxNormalize` -> `LaplaceNoise`, exported
with internal noise) releases y = x + b * (E1 - E2), with x in [0, 1]^k and
E = -log(1 - U) for U from two unseeded RANDOM_UNIFORM ops. Their numbers
depend on one 32-bit `std::random_device` value per process (`seed_chain`).
For every candidate value the attack replays the noise n and keeps the
candidate when y - n lies in [0, 1] on every coordinate: a wrong candidate
passes one coordinate with probability at most 1 / (2b) (1/2 at epsilon =
1), so a 384-d (or a 32-d) release leaves only the true seed, and y - n is
the clean x.

The search screens all candidates on the first few coordinates (one Philox
call per op), vectorised over a chunk of candidates, and checks the whole
vector only for the survivors; with `normalized` (MinMaxNormalize first) it
also asks that y - n has minimum 0 and maximum 1, which a wrong candidate
all but never meets even when the noise is small.

Example:
>>> spec = LaplacePrivatizer(dimension=384, scale=1.0)
>>> found = recover(release, spec, start=0, stop=2**20)
>>> found.seeds          # the true value, if it lies in [0, 2**20)
(123456,)
>>> clean = found.clean[0]
"""

import dataclasses
import numbers
import time

import numpy as np

from tfdptext.audit import seed_chain

# LaplaceNoise clamps U at the largest float32 below 1 (layers/sampling.py).
_BELOW_ONE = np.float32(1.0 - 2.0**-24)
_RANDOM_OPS = ("RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL")


@dataclasses.dataclass(frozen=True)
class LaplacePrivatizer:
    """What an attacker knows about the model from its public .tflite.

    Attributes:
        dimension: k, the length of one released vector (batch of 1).
        scale: the Laplace scale b (1 / epsilon per coordinate).
        positive_op: which of the two RANDOM_UNIFORM ops, in Prepare order,
            gives E1 (the term added); see `find_positive_op`.
        draws_before: mt19937_64 outputs used before this interpreter's
            first random op was prepared: 0 for the first interpreter of a
            process, 4 more for every earlier preparation of this model
            (each random op takes 2 per Prepare).
        invokes_before: invokes of the same interpreter before the release;
            each moved both generators on by ceil(k / 4) Philox calls.
        normalized: MinMaxNormalize comes first, so the clean vector's
            smallest coordinate is 0 and its largest 1. The full check then
            asks for that too, which keeps wrong candidates out even when
            the noise is small (large epsilon).
    """

    dimension: int
    scale: float
    positive_op: int = 0
    draws_before: int = 0
    invokes_before: int = 0
    normalized: bool = True

    def __post_init__(self):
        for name in ("dimension",):
            _check_int(name, getattr(self, name), 1)
        for name in ("draws_before", "invokes_before"):
            _check_int(name, getattr(self, name), 0)
        if not isinstance(self.normalized, bool):
            raise ValueError("`normalized` must be True or False, got "
                             f"{self.normalized!r}.")
        if self.positive_op not in (0, 1):
            raise ValueError("`positive_op` must be 0 or 1, got "
                             f"{self.positive_op!r}.")
        if (not isinstance(self.scale, numbers.Real)
                or not np.isfinite(self.scale) or self.scale <= 0):
            raise ValueError(f"`scale` must be finite and > 0, got "
                             f"{self.scale!r}.")

    @property
    def blocks_per_invoke(self):
        """Philox calls one invoke makes per op: ceil(k / 4)."""
        return -(-self.dimension // 4)


@dataclasses.dataclass(frozen=True)
class SeedRecovery:
    """The result of `recover`.

    Attributes:
        seeds: every candidate consistent with the release (normally one).
        clean: for each seed, the recovered clean vector, float32 in [0, 1].
        candidates: how many candidates were searched.
        seconds: wall time of the search.
    """

    seeds: tuple
    clean: tuple
    candidates: int
    seconds: float

    @property
    def candidates_per_second(self):
        return self.candidates / max(self.seconds, 1e-9)


def _check_int(name, value, minimum):
    if (not isinstance(value, numbers.Integral) or isinstance(value, bool)
            or value < minimum):
        raise ValueError(f"`{name}` must be an integer >= {minimum}, "
                         f"got {value!r}.")
    return int(value)


def exponentials(words):
    """E = -log(1 - U) for the uint32 `words`, in float32 like the model.

    U = Uint32ToFloat(word) is clamped to [0, 1 - 2**-24] (a no-op: U is at
    most 1 - 2**-23); 1 - U is exact in float32.
    """
    u = np.minimum(np.maximum(seed_chain.uint32_to_float(words),
                              np.float32(0)), _BELOW_ONE)
    return -np.log(np.float32(1) - u)


def laplace_noise(device_seeds, spec, num_blocks=None, first_block=0):
    """The noise b * (E1 - E2) the model adds, for each candidate seed.

    Args:
        device_seeds: int or integer array of 32-bit random_device values.
        spec: a `LaplacePrivatizer`.
        num_blocks: Philox calls per op to replay (4 coordinates each);
            None for the whole vector.
        first_block: calls to skip within this release.

    Returns:
        float32 array `shape + (min(4 * num_blocks, k - 4 * first_block),)`.
    """
    if num_blocks is None:
        num_blocks = spec.blocks_per_invoke - first_block
    _check_int("num_blocks", num_blocks, 1)
    _check_int("first_block", first_block, 0)
    pairs = seed_chain.op_seeds(np.asarray(device_seeds), 2,
                                spec.draws_before)
    position = spec.invokes_before * spec.blocks_per_invoke + first_block
    terms = []
    for op in (spec.positive_op, 1 - spec.positive_op):
        words = seed_chain.philox_words(pairs[..., op, 0], pairs[..., op, 1],
                                        num_blocks, position)
        terms.append(exponentials(words))
    noise = np.float32(spec.scale) * (terms[0] - terms[1])
    width = min(4 * num_blocks, spec.dimension - 4 * first_block)
    return noise[..., :width]


def _inside(values, tolerance):
    return np.all((values >= -tolerance) & (values <= 1 + tolerance),
                  axis=-1)


def _explains(residuals, spec, tolerance):
    """Which rows of release - noise can be the clean vector."""
    keep = _inside(residuals, tolerance)
    if spec.normalized:
        keep &= np.abs(residuals.min(axis=-1)) <= tolerance
        keep &= np.abs(residuals.max(axis=-1) - 1) <= tolerance
    return keep


def recover(release, spec, start=0, stop=2**32, chunk=2**13,
            screen_blocks=1, tolerance=1e-4):
    """Searches device seeds in [start, stop) that explain `release`.

    Args:
        release: the released vector, shape (k,) (or (1, k)).
        spec: the public structure, a `LaplacePrivatizer`.
        start, stop: the candidate range of 32-bit random_device values.
        chunk: candidates per vectorised step (memory ~ 1.3 KB each).
        screen_blocks: Philox calls per op checked for every candidate
            (4 coordinates each) before the full check.
        tolerance: float slack on the [0, 1] bounds.

    Returns:
        A `SeedRecovery`.

    Example:
    >>> found = recover(y, LaplacePrivatizer(32, 1.0), 0, 2**16)
    >>> found.seeds
    (40503,)
    """
    release = np.asarray(release, np.float32).reshape(-1)
    if release.shape != (spec.dimension,):
        raise ValueError(f"`release` must hold {spec.dimension} numbers "
                         f"(spec.dimension), got {release.size}.")
    start = _check_int("start", start, 0)
    stop = _check_int("stop", stop, start + 1)
    if stop > 2**32:
        raise ValueError(f"`stop` must be <= 2**32, got {stop}.")
    chunk = _check_int("chunk", chunk, 1)
    screen_blocks = _check_int("screen_blocks", screen_blocks, 1)
    screen_blocks = min(screen_blocks, spec.blocks_per_invoke)
    if not np.isfinite(tolerance) or tolerance < 0:
        raise ValueError(f"`tolerance` must be finite and >= 0, got "
                         f"{tolerance!r}.")
    began = time.perf_counter()
    head = release[:4 * screen_blocks]
    seeds, clean = [], []
    for low in range(start, stop, chunk):
        candidates = np.arange(low, min(low + chunk, stop), dtype=np.uint64)
        noise = laplace_noise(candidates, spec, screen_blocks)
        survivors = candidates[_inside(head - noise, tolerance)]
        if not survivors.size:
            continue
        residuals = release - laplace_noise(survivors, spec)
        keep = _explains(residuals, spec, tolerance)
        seeds.extend(int(seed) for seed in survivors[keep])
        clean.extend(np.clip(r, 0.0, 1.0).astype(np.float32)
                     for r in residuals[keep])
    return SeedRecovery(tuple(seeds), tuple(clean), stop - start,
                        time.perf_counter() - began)


def random_op_indices(tflite_bytes):
    """Indices (in subgraph 0) of the random ops, in Prepare order.

    TFLite prepares the nodes in execution-plan order, which is the order
    of the operators in the flatbuffer (delegates keep the order of the
    nodes they leave to the CPU kernels). Reads the flatbuffer with
    ai_edge_litert only (no TensorFlow import).
    """
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    codes = {getattr(schema.BuiltinOperator, name) for name in _RANDOM_OPS}
    model = flatbuffer_utils.convert_bytearray_to_object(
        bytearray(tflite_bytes))
    found = []
    for index, op in enumerate(model.subgraphs[0].operators):
        code = model.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) in codes:
            found.append(index)
    return found


def set_op_seeds(tflite_bytes, seeds):
    """A copy of the model whose random ops carry the given seeds.

    Args:
        tflite_bytes: a .tflite flatbuffer (subgraph 0 holds the ops).
        seeds: one (seed, seed2) pair of ints in [0, 2**64) per random op,
            in Prepare order; stored as the int64 with the same bits.

    Returns:
        bytes of the patched model.
    """
    from ai_edge_litert.tools import flatbuffer_utils

    indices = random_op_indices(tflite_bytes)
    seeds = list(seeds)
    if len(seeds) != len(indices):
        raise ValueError(f"`seeds` must hold one pair per random op "
                         f"({len(indices)}), got {len(seeds)}.")
    model = flatbuffer_utils.convert_bytearray_to_object(
        bytearray(tflite_bytes))
    operators = model.subgraphs[0].operators
    for index, pair in zip(indices, seeds):
        if len(pair) != 2:
            raise ValueError(f"`seeds` must be (seed, seed2) pairs, got "
                             f"{pair!r}.")
        options = operators[index].builtinOptions
        options.seed = seed_chain.signed_int64(pair[0])
        options.seed2 = seed_chain.signed_int64(pair[1])
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def find_positive_op(tflite_bytes, dimension, scale, feed=None):
    """Which RANDOM_UNIFORM op (0 or 1, Prepare order) gives the added E1.

    The attacker can learn it offline from the public model: fix both ops'
    seeds and compare the output with both assignments. For a privatizer
    alone (one input) a zero vector is fed (MinMaxNormalize maps it to
    zeros); for a whole phone model give `feed` (any input): with both ops
    on the same seeds E1 = E2, so that run gives the clean output.

    Returns:
        0 or 1.
    """
    from ai_edge_litert.interpreter import Interpreter

    def run(pairs):
        runner = Interpreter(model_content=set_op_seeds(
            tflite_bytes, pairs)).get_signature_runner()
        inputs = feed
        if inputs is None:
            name = next(iter(runner.get_input_details()))
            inputs = {name: np.zeros((1, dimension), np.float32)}
        return list(runner(**inputs).values())[0].reshape(-1)

    pairs = [(1, 2), (3, 4)]
    clean = 0.0 if feed is None else run([pairs[0], pairs[0]])
    out = run(pairs) - clean
    blocks = -(-dimension // 4)
    e = [exponentials(seed_chain.philox_words(a, b, blocks))[:dimension]
         for a, b in pairs]
    errors = [np.abs(out - np.float32(scale) * (e[p] - e[1 - p])).max()
              for p in (0, 1)]
    if min(errors) > 1e-3:
        raise ValueError("The model's noise is not b * (E1 - E2) from its "
                         f"two random ops (errors {errors}).")
    return int(np.argmin(errors))


# A shared library that replaces libstdc++'s std::random_device::_M_getval
# (what `device()` calls) by the value of an environment variable, so that a
# child process's "unpredictable" seed is known: the end-to-end check of the
# chain against the real kernels.
_SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

unsigned int _ZNSt13random_device9_M_getvalEv(void *self) {
  const char *value = getenv("TFDPTEXT_RANDOM_DEVICE");
  if (value != NULL) {
    setenv("TFDPTEXT_RANDOM_DEVICE_USED", "1", 1);
    return (unsigned int)strtoul(value, NULL, 0);
  }
  unsigned int (*real)(void *) = (unsigned int (*)(void *))dlsym(
      RTLD_NEXT, "_ZNSt13random_device9_M_getvalEv");
  return real(self);
}
"""
SHIM_VARIABLE = "TFDPTEXT_RANDOM_DEVICE"
# Set (in the C environment, not os.environ) once the shim answered.
SHIM_USED_VARIABLE = "TFDPTEXT_RANDOM_DEVICE_USED"


def build_random_device_shim(directory, compiler="cc"):
    """Compiles the std::random_device override into `directory`.

    Run a child process with LD_PRELOAD=<returned path> and
    TFDPTEXT_RANDOM_DEVICE=<32-bit value> and its TFLite mt19937_64 is
    seeded with that value (libstdc++ on Linux; the TFLite library must
    link libstdc++ dynamically, as ai-edge-litert's wheels do). Once used,
    the shim sets TFDPTEXT_RANDOM_DEVICE_USED=1 in the C environment
    (`ctypes.CDLL(None).getenv` sees it; os.environ does not).

    Args:
        directory: an existing folder for the source and the .so.
        compiler: a C compiler on PATH.

    Returns:
        The path of the shared library.

    Raises:
        RuntimeError: if the compiler is missing or fails.
    """
    import os
    import shutil
    import subprocess

    if shutil.which(compiler) is None:
        raise RuntimeError(f"No C compiler `{compiler}` on PATH.")
    source = os.path.join(directory, "random_device_shim.c")
    library = os.path.join(directory, "random_device_shim.so")
    with open(source, "w", encoding="utf-8") as handle:
        handle.write(_SHIM_SOURCE)
    result = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"],
        capture_output=True, text=True, check=False)
    if result.returncode:
        raise RuntimeError(f"Compiling the shim failed: {result.stderr}")
    return library
