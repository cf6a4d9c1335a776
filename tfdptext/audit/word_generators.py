"""Buffers of random words as apps fill them, well and badly, and what a
phone model does with each.

Every generator fills an int32 (rows, width) buffer from a numpy Generator
(its own randomness: bases, seeds, steps) and says whether the model's
checks can refuse it (`catchable`). The structured ones must fail closed
(NaN / token id -1); the good one must pass; and some bad ones cannot be
caught by any check inside the model (`catchable=False`, with the reason),
which is why the contract is the platform's secure generator:

- a predictable generator whose output looks uniform (java.util.Random
  seeded with the time: `tfdptext.audit.java_random`);
- a buffer reused from an earlier call (the model has no memory of
  earlier calls).

`check_model` runs them against a phone model (any function of the
words), `check_tflite` against a .tflite signature and `check_export`
against every length of an export, and reports which fail closed;
`tfdptext-audit --random_words [--export_dir=...]` prints the table.

Example:
>>> model, width = laplace_phone_model()
>>> rows = check_tflite(model, {"x": np.random.rand(1, 384).astype("float32")},
...                     width)
>>> [(r.generator, r.refused) for r in rows][:2]
[('os_urandom', 0), ('counter', 1)]
"""

import dataclasses
import os
import time

import numpy as np

from tfdptext.audit import java_random

# The golden-ratio Weyl step and Numerical Recipes' 32-bit LCG.
WEYL_STEP = 0x9E3779B9
LCG_MULTIPLIER, LCG_INCREMENT = 1664525, 1013904223
# glibc's rand()-style LCG modulo 2^31.
LCG31_MULTIPLIER, LCG31_INCREMENT = 1103515245, 12345
# One token's words for d_chi on 384-d embeddings.
TOKEN_WORDS = 768


@dataclasses.dataclass(frozen=True)
class Generator:
    """How an app fills the words.

    Attributes:
        name: short name (the report's row).
        description: what it is.
        fill: fill(rng, rows, width) -> int32 (rows, width).
        catchable: whether the model's checks can refuse it; False for
            the good generator and for the bad ones no check can see.
        why: for catchable=False bad generators: why no check sees them.
        rows: the rows it needs (2 for a batch whose rows share words:
            phone models take one row, so it runs on Keras models only).
        good: the generator the contract asks for.
        max_words: catchable only in calls of at most this many words
            (None: any): a single reused 2-word block fails up to 4,096
            words (`tfdptext.privacy.word_statistics`, pair_repeats).
    """

    name: str
    description: str
    fill: object
    catchable: bool = True
    why: str = ""
    rows: int = 1
    good: bool = False
    max_words: int = None

    def expected_refused(self, width):
        """Whether a call of `rows` x `width` words must be refused."""
        if self.max_words is not None and self.rows * width > self.max_words:
            return False
        return self.catchable


def _random32(rng, shape):
    return rng.integers(0, 2**32, size=shape, dtype=np.uint64)


def _as_words(values):
    return (np.asarray(values, np.uint64) & np.uint64(0xFFFFFFFF)).astype(
        np.uint32).view(np.int32)


def _progression(rng, rows, width, step):
    base = _random32(rng, (rows, 1))
    return _as_words(base + np.uint64(step) * np.arange(width,
                                                        dtype=np.uint64))


def _os_urandom(rng, rows, width):
    del rng
    return np.frombuffer(os.urandom(4 * rows * width), np.int32).reshape(
        rows, width).copy()


def _counter(rng, rows, width):
    return _progression(rng, rows, width, 1)


def _counter_random_step(rng, rows, width):
    return _progression(rng, rows, width, int(rng.integers(1, 2**32)))


def _counter_even_step(rng, rows, width):
    shift = int(rng.integers(1, 24))
    odd = int(rng.integers(0, 2**(32 - shift - 1))) * 2 + 1
    return _progression(rng, rows, width, (odd << shift) % 2**32)


def _weyl(rng, rows, width):
    del rng
    return _as_words(np.arange(width, dtype=np.uint64)[None].repeat(
        rows, 0) * np.uint64(WEYL_STEP))


def _lcg(multiplier, increment, modulus):
    def fill(rng, rows, width):
        state = _random32(rng, (rows,)) % np.uint64(modulus)
        out = np.empty((rows, width), np.uint64)
        for i in range(width):
            state = (state * np.uint64(multiplier) + np.uint64(increment)) \
                % np.uint64(modulus)
            out[:, i] = state
        return _as_words(out)
    return fill


def _java(rng, rows, width):
    now = int(time.time() * 1000) + int(rng.integers(-60000, 60001))
    return np.stack([java_random.java_words(now + r, width)
                     for r in range(rows)])


def _previous_call(rng, rows, width):
    # An earlier call's buffer, sent again: it is a good buffer, and the
    # model sees only this call.
    return _os_urandom(rng, rows, width)


def _half_repeated(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    half = width // 2
    words[:, half:2 * half] = words[:, :half]
    return words


def _one_byte_per_word(rng, rows, width):
    return rng.integers(0, 256, size=(rows, width)).astype(np.int32)


def _byte_replicated(rng, rows, width):
    byte = rng.integers(0, 256, size=(rows, width)).astype(np.uint64)
    return _as_words(byte * np.uint64(0x01010101))


def _low_24_bits(rng, rows, width):
    return (_os_urandom(rng, rows, width) & 0xFFFFFF).astype(np.int32)


def _zeros(rng, rows, width):
    del rng
    return np.zeros((rows, width), np.int32)


def _constant(rng, rows, width):
    return np.full((rows, width), int(rng.integers(-2**31, 2**31)),
                   np.int32)


def _each_word_twice(rng, rows, width):
    return np.repeat(_os_urandom(rng, rows, (width + 1) // 2), 2,
                     axis=1)[:, :width]


def _block_tiled(rng, rows, width):
    return np.tile(_os_urandom(rng, rows, 8), (1, -(-width // 8)))[:, :width]


def _token_block_reused(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    block = min(TOKEN_WORDS, width // 2)
    words[:, block:2 * block] = words[:, :block]
    return words


def _pair_repeated(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    words[:, 2:4] = words[:, 0:2]
    return words


def _block_of_3_repeated(rng, rows, width):
    words = _os_urandom(rng, rows, width)
    words[:, width // 2:width // 2 + 3] = words[:, 0:3]
    return words


def _rows_identical(rng, rows, width):
    return np.repeat(_os_urandom(rng, 1, width), rows, axis=0)


GENERATORS = {g.name: g for g in (
    Generator("os_urandom", "os.urandom (the contract: the platform's "
              "secure generator)", _os_urandom, catchable=False, good=True),
    Generator("counter", "a counter base + i from a random base",
              _counter),
    Generator("counter_random_step", "base + i * s, random base and step",
              _counter_random_step),
    Generator("counter_even_step", "base + i * s, s = odd * 2^j, j in "
              "1..23", _counter_even_step),
    Generator("weyl", "i * 0x9E3779B9 (Weyl sequence)", _weyl),
    Generator("lcg32", "consecutive outputs of a 32-bit LCG (1664525 x + "
              "1013904223 mod 2^32), random seed",
              _lcg(LCG_MULTIPLIER, LCG_INCREMENT, 2**32)),
    Generator("lcg31", "consecutive outputs of rand()'s LCG (1103515245 x "
              "+ 12345 mod 2^31)", _lcg(LCG31_MULTIPLIER, LCG31_INCREMENT,
                                        2**31)),
    Generator("java_util_random", "java.util.Random seeded with the time "
              "in ms, nextInt() per word", _java, catchable=False,
              why="its output looks uniform to every test; it is "
              "predictable from the seed, which the clock gives away "
              "(tfdptext.audit.java_random finds it from one release)"),
    Generator("previous_call", "a good buffer already sent with an earlier "
              "call", _previous_call, catchable=False,
              why="each call is checked alone: the model keeps no memory "
              "of earlier buffers"),
    Generator("half_repeated", "the first half of the buffer copied into "
              "the second", _half_repeated),
    Generator("one_byte_per_word", "a random byte per word (0..255)",
              _one_byte_per_word),
    Generator("byte_replicated", "a random byte copied into the 4 bytes of "
              "each word", _byte_replicated),
    Generator("low_24_bits_only", "random words with the high byte zero",
              _low_24_bits),
    Generator("zeros", "an unfilled buffer", _zeros),
    Generator("constant", "one random word everywhere", _constant),
    Generator("each_word_twice", "every random word written twice",
              _each_word_twice),
    Generator("block_of_8_tiled", "8 random words repeated over the buffer",
              _block_tiled),
    Generator("token_block_reused", "one token's 768 words (or half the "
              "buffer) used again for the next token", _token_block_reused),
    Generator("pair_repeated", "the first Laplace pair (2 words) used twice "
              "(refused up to 4,096 words per call: every Laplace buffer we "
              "export)", _pair_repeated, max_words=4096),
    Generator("block_of_3_repeated", "3 words used again half a buffer "
              "later", _block_of_3_repeated),
    Generator("rows_identical", "a batch of 2 rows with the same words",
              _rows_identical, rows=2),
)}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a model did with one generator's buffers."""

    generator: str
    width: int
    buffers: int
    refused: int
    expected_refused: bool
    catchable: bool
    why: str = ""

    @property
    def as_expected(self):
        """Catchable generators refused every time, the others never."""
        target = self.buffers if self.expected_refused else 0
        return self.refused == target


def refused(release):
    """Whether a release (numpy) is unusable: NaN / inf, or ids < 0."""
    release = np.asarray(release)
    if np.issubdtype(release.dtype, np.integer):
        return bool((release < 0).any())
    return bool((~np.isfinite(release)).any())


def check_model(run, width, generators=None, buffers=1, seed=0,
                max_rows=1):
    """Feeds each generator's buffers to `run(words) -> release` and
    counts the refusals.

    Args:
        run: a function of int32 (rows, width) words returning the release
            (numpy) for fixed other inputs.
        width: the model's number of words per row.
        generators: names (default: all that need at most `max_rows` rows).
        buffers: buffers per generator (fresh bases, seeds and steps).
        seed: the numpy seed of the generators' own randomness.
        max_rows: the batch the model takes (phone models: 1).

    Returns:
        A list of `Verdict`.
    """
    rng = np.random.default_rng(seed)
    names = generators or [n for n, g in GENERATORS.items()
                           if g.rows <= max_rows]
    out = []
    for name in names:
        generator = GENERATORS[name]
        count = 0
        for _ in range(buffers):
            words = generator.fill(rng, generator.rows, width)
            count += refused(run(words))
        out.append(Verdict(name, width, buffers, count,
                           generator.expected_refused(width),
                           generator.catchable, generator.why))
    return out


def laplace_phone_model(dimension=384, epsilon=1.0):
    """A DPNR-like phone model without an encoder: x (1, dimension) ->
    MinMaxNormalize -> LaplaceNoise(epsilon), noise from `random_words`
    (4 words per coordinate) checked as a phone model checks them,
    converted to TFLite (batch 1). Returns (tflite bytes, number of
    words)."""
    from tfdptext import layers
    from tfdptext.export import tflite
    from tfdptext.models import secure

    model = secure.secure_privatizer_model(
        layers.LaplaceNoise(epsilon), (dimension,),
        before=layers.MinMaxNormalize())
    width = int(model.input[secure.RANDOM_WORDS].shape[-1])
    return tflite.convert(model, batch_size=1), width


def check_tflite(tflite_bytes, feed, width, output=None, signature=None,
                 **kwargs):
    """`check_model` on a .tflite signature: `feed` holds its inputs other
    than `random_words`."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=tflite_bytes).get_signature_runner(
        signature)

    def run(words):
        out = runner(**feed, random_words=words)
        return out[output] if output else next(iter(out.values()))

    return check_model(run, width, **kwargs)


def check_export(export_dir, text="the staff was friendly", **kwargs):
    """`check_model` on every phone model (length) of an export that takes
    random words, with `text` as the input: {length: [Verdict]}."""
    from tfdptext.export.local import ExportedPipeline

    pipeline = ExportedPipeline(export_dir)
    features = pipeline.tokenizer([text])
    ids = features["token_ids"].numpy()
    mask = features["padding_mask"].numpy()
    out = {}
    for model in pipeline.models:
        if not model.random_words:
            continue
        runner = pipeline.runners[model.length]
        feed = {"token_ids": ids[:, :model.length],
                "padding_mask": mask[:, :model.length]}

        def run(words, runner=runner, feed=feed):
            return runner(**feed, random_words=words)[pipeline.spec.release]

        out[model.length] = check_model(run, model.random_words, **kwargs)
    return out


def markdown_table(verdicts):
    """The verdicts as a markdown table."""
    lines = ["| generator | words | buffers | refused | expected | "
             "as expected |", "|---|---|---|---|---|---|"]
    for v in verdicts:
        expected = "refused" if v.expected_refused else (
            "released (cannot be caught)" if not v.catchable and
            GENERATORS[v.generator].why else "released")
        lines.append(f"| {v.generator} | {v.width:,} | {v.buffers} | "
                     f"{v.refused} | {expected} | "
                     f"{'yes' if v.as_expected else 'NO'} |")
    return "\n".join(lines)
