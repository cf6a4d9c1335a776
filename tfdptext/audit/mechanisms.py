"""Worst-case neighbouring inputs for every privatization layer.

Each function returns an `auditor.MechanismSetup`: the real layer (or its
TFLite conversion), two neighbouring inputs at the worst case for the
layer's unit, and the claim read from the layer's own `guarantee()`.

Example:
>>> from tfdptext.audit import auditor, mechanisms
>>> setup = mechanisms.laplace_per_coordinate(epsilon=1.0)
>>> auditor.audit(setup, 20000).verdict
'pass'
"""

import math
import os

import keras
import numpy as np
import tensorflow as tf

from tfdptext import layers
from tfdptext.audit import auditor
from tfdptext.audit import broken
from tfdptext.privacy import metric
from tfdptext.privacy import validation

_CHUNK = 50000
# WordDropout toy input: [CLS] w1..w4 [SEP]; position 1 differs.
_CLS, _SEP, _MASK = 101, 102, 103
_TOKENS_X = (_CLS, 5, 6, 7, 8, _SEP)
_TOKENS_X_PRIME = (_CLS, 9, 6, 7, 8, _SEP)
_TFLITE_BATCH = 1000


def _check_side(side):
    if side not in (0, 1):
        raise ValueError(f"`side` must be 0 (x) or 1 (x'), received "
                         f"{side!r}.")


def layer_sampler(layer, x, x_prime, chunk=_CHUNK):
    """`sample(side, n)`: n calls of `layer` on x (side 0) or x' (side 1).

    Releases are drawn `chunk` rows per call, each row its own release of
    the same input; the layer's own unseeded random ops supply the noise.

    Args:
        layer: a built or unbuilt privatization layer (or any callable on a
            batch).
        x, x_prime: one input each, without the batch axis (numpy arrays,
            or dicts of them for WordDropout).
        chunk: rows per call.

    Returns:
        A function (side, n) -> numpy array of n releases.
    """
    inputs = (x, x_prime)

    def sample(side, n):
        _check_side(side)
        out, done = [], 0
        while done < n:
            m = min(chunk, n - done)
            batch = tf.nest.map_structure(
                lambda v: np.repeat(np.asarray(v)[None], m, axis=0),
                inputs[side])
            out.append(np.asarray(layer(batch)))
            done += m
        return np.concatenate(out)
    return sample


def _laplace_likelihood_ratio(x, x_prime, scale):
    x = np.asarray(x, np.float64)
    x_prime = np.asarray(x_prime, np.float64)

    def fn(y):
        y = np.asarray(y, np.float64).reshape(len(y), -1)
        return (np.abs(y - x_prime).sum(1) - np.abs(y - x).sum(1)) / scale
    return auditor.Statistic("Laplace log-likelihood ratio", fn)


def _per_coordinate_pair(dimension):
    x = np.linspace(0.2, 0.8, dimension).astype(np.float32)
    x[0] = 0.0
    x_prime = x.copy()
    x_prime[0] = 1.0
    return x, x_prime


def laplace_per_coordinate(epsilon=1.0, dimension=4, layer_class=None,
                           name="laplace_per_coordinate"):
    """LaplaceNoise (b = 1 / eps): x, x' differ in one coordinate, 0 vs 1.

    Args:
        epsilon: the layer's epsilon (the claim, per coordinate).
        dimension: k, the representation size.
        layer_class: the layer to audit (default `layers.LaplaceNoise`;
            `broken` supplies deliberately broken subclasses).
        name: the row's name.
    """
    dimension = validation.check_int("dimension", dimension, minimum=2)
    layer_class = layer_class or layers.LaplaceNoise
    layer = layer_class(epsilon=epsilon)
    x, x_prime = _per_coordinate_pair(dimension)
    layer(x[None])
    guarantee = layer.guarantee()
    is_broken = layer_class is not layers.LaplaceNoise
    return auditor.MechanismSetup(
        name=name, claim=guarantee.value,
        unit=guarantee.unit.replace("_", " "),
        delta=guarantee.delta,
        sample=layer_sampler(layer, x, x_prime),
        statistics=(_coordinate_ratio(0, 1.0 / epsilon),),
        differing=(0,), broken=is_broken,
        description=(f"k = {dimension}, coordinate 0 is 0 vs 1, the others "
                     "fixed in (0, 1)"))


def _coordinate_ratio(index, scale):
    """The Laplace log-likelihood ratio of coordinate `index`, 0 vs 1."""
    def fn(y):
        value = np.asarray(y, np.float64).reshape(len(y), -1)[:, index]
        return (np.abs(value - 1.0) - np.abs(value)) / scale
    return auditor.Statistic(
        f"Laplace log-likelihood ratio of coordinate {index}", fn)


def laplace_vector(epsilon=2.0, dimension=4):
    """LaplaceNoise(sensitivity="vector"), b = k / eps: x = 0^k, x' = 1^k."""
    dimension = validation.check_int("dimension", dimension, minimum=1)
    layer = layers.LaplaceNoise(epsilon=epsilon, sensitivity="vector")
    x = np.zeros(dimension, np.float32)
    x_prime = np.ones(dimension, np.float32)
    layer(x[None])
    guarantee = layer.guarantee()
    return auditor.MechanismSetup(
        name="laplace_vector", claim=guarantee.value,
        unit=guarantee.unit.replace("_", " "),
        delta=guarantee.delta,
        sample=layer_sampler(layer, x, x_prime),
        statistics=(_laplace_likelihood_ratio(x, x_prime, layer.scale),),
        differing=tuple(range(dimension)),
        description=f"k = {dimension}, x = 0^k vs x' = 1^k")


class _IndicatorEncoder:
    """Worst-case toy encoder: 1^k if `token` survived dropout, else 0^k."""

    def __init__(self, dropout, privatizer, token, dimension):
        self.dropout = dropout
        self.privatizer = privatizer
        self.token = token
        self.dimension = dimension

    def __call__(self, features):
        kept = self.dropout(features)["token_ids"]
        present = tf.reduce_any(tf.equal(kept, self.token), axis=-1)
        representation = tf.tile(tf.cast(present, tf.float32)[:, None],
                                 [1, self.dimension])
        return self.privatizer(representation)


def word_dropout_laplace(epsilon=2.0, rate=0.5, dimension=4):
    """WordDropout then vector Laplace, with a worst-case toy encoder.

    Both inputs have 4 real tokens between [CLS] and [SEP]; they differ in
    the first. The encoder outputs 1^k when x's differing token is among
    the kept tokens and 0^k otherwise, so the representations are at the
    Laplace layer's worst case whenever the token survives. The claim is
    `WordDropout.guarantee(laplace.guarantee(), 4, 4)`:
    ln((1 - q) e^eps + q) with q = round(4 * rate) / 4.
    """
    dimension = validation.check_int("dimension", dimension, minimum=1)
    dropout = layers.WordDropout(rate, mask_token_id=_MASK,
                                 special_token_ids=(_CLS, _SEP))
    laplace = layers.LaplaceNoise(epsilon=epsilon, sensitivity="vector")
    laplace(np.zeros((1, dimension), np.float32))
    num_tokens = len(_TOKENS_X) - 2
    guarantee = dropout.guarantee(laplace.guarantee(),
                                  min_tokens=num_tokens,
                                  max_tokens=num_tokens)
    q = guarantee.details["worst_case_effective_rate"]
    mask = np.ones(len(_TOKENS_X), np.int32)
    x = {"token_ids": np.array(_TOKENS_X, np.int32), "padding_mask": mask}
    x_prime = {"token_ids": np.array(_TOKENS_X_PRIME, np.int32),
               "padding_mask": mask}
    encoder = _IndicatorEncoder(dropout, laplace, _TOKENS_X[1], dimension)
    scale = laplace.scale

    def mixture_ratio(y):
        y = np.asarray(y, np.float64)
        log_ones = -np.abs(y - 1.0).sum(1) / scale
        log_zeros = -np.abs(y).sum(1) / scale
        return np.logaddexp(math.log1p(-q) + log_ones,
                            math.log(q) + log_zeros) - log_zeros
    return auditor.MechanismSetup(
        name="word_dropout_laplace", claim=guarantee.value,
        unit=(f"{guarantee.unit.replace('_', ' ')}; base {epsilon:g} per "
              f"representation, q = {q:g}"),
        delta=guarantee.delta,
        sample=layer_sampler(encoder, x, x_prime),
        statistics=(auditor.Statistic("mixture log-likelihood ratio",
                                      mixture_ratio),),
        differing=tuple(range(dimension)),
        description=(f"{num_tokens} real tokens, one differs; toy encoder "
                     f"1^{dimension} iff that token is kept"))


def _dchi_statistics(x, x_prime, eta):
    x = np.asarray(x, np.float64)
    x_prime = np.asarray(x_prime, np.float64)
    direction = (x_prime - x) / np.linalg.norm(x_prime - x)

    def ratio(y):
        y = np.asarray(y, np.float64).reshape(len(y), -1)
        return eta * (np.linalg.norm(y - x_prime, axis=1)
                      - np.linalg.norm(y - x, axis=1))
    return (auditor.Statistic(
        "projection on x' - x",
        lambda y: np.asarray(y, np.float64).reshape(len(y), -1) @ direction),
        auditor.Statistic("d_chi log-likelihood ratio", ratio))


def dchi_noise(eta=2.0, dimension=8, distance=1.0):
    """DChiNoise: x = 0, x' = distance * e_0 in R^n; claim eta * distance."""
    dimension = validation.check_int("dimension", dimension)
    distance = validation.check_positive("distance", distance)
    layer = layers.DChiNoise(eta=eta)
    x = np.zeros(dimension, np.float32)
    x_prime = x.copy()
    x_prime[0] = distance
    layer(x[None])
    guarantee = layer.guarantee()
    return auditor.MechanismSetup(
        name="dchi_noise", claim=guarantee.value * distance,
        unit=(f"{guarantee.unit.replace('_', ' ')} metric, "
              f"eta {guarantee.value:g} x d {distance:g}"),
        delta=metric.pair_delta(guarantee, distance),
        sample=layer_sampler(layer, x, x_prime),
        statistics=_dchi_statistics(x, x_prime, eta),
        differing=(0,),
        description=f"n = {dimension}, ||x - x'|| = {distance:g}")


def toy_embedding_table():
    """A 2-D table: [PAD] (special), w = (0, 0), w' = (1, 0), and
    candidates along and off the axis through them."""
    return np.array([[0.0, 5.0],     # 0: [PAD], never output
                     [0.0, 0.0],     # 1: w
                     [1.0, 0.0],     # 2: w'
                     [-2.0, 0.0],    # 3
                     [3.0, 0.0],     # 4
                     [0.5, 2.0],     # 5
                     [0.5, -2.0]],   # 6
                    np.float32)


def dchi_text_to_text(eta=1.5):
    """DChiTextPrivatizer on `toy_embedding_table()`: w = 1 vs w' = 2;
    claim eta * ||phi(w) - phi(w')||; releases are output token ids."""
    table = toy_embedding_table()
    layer = layers.DChiTextPrivatizer(eta, table, special_token_ids=(0,))
    layer(np.array([[1]], np.int32))
    guarantee = layer.guarantee()
    distance = float(np.linalg.norm(table[1] - table[2]))
    candidates = range(1, len(table))
    return auditor.MechanismSetup(
        name="dchi_text_to_text", claim=guarantee.value * distance,
        unit=(f"{guarantee.unit.replace('_', ' ')} metric, "
              f"eta {guarantee.value:g} x d {distance:g}"),
        delta=metric.pair_delta(guarantee, distance),
        sample=layer_sampler(layer, np.array([1], np.int32),
                             np.array([2], np.int32)),
        output=auditor.CATEGORICAL,
        statistics=tuple(auditor.output_equals(t) for t in candidates),
        description=(f"{len(table) - 1} candidate tokens in 2-D, "
                     f"||phi(w) - phi(w')|| = {distance:g}"))


def _rr_setup(name, epsilon, num_bits, num_differing):
    layer = layers.RandomizedResponse(epsilon=epsilon)
    x = np.zeros(num_bits, np.float32)
    x_prime = x.copy()
    x_prime[:num_differing] = 1.0
    layer(x[None])
    guarantee = layer.guarantee()
    return auditor.MechanismSetup(
        name=name, claim=guarantee.value * num_differing,
        unit=(f"{guarantee.unit.replace('_', ' ')} metric, eps "
              f"{guarantee.value:g} x Hamming {num_differing}"),
        delta=guarantee.delta,
        sample=layer_sampler(layer, x, x_prime),
        differing=tuple(range(num_differing)),
        description=f"{num_bits} bits, {num_differing} differ")


def randomized_response_one_bit(epsilon=1.0, num_bits=4):
    """RandomizedResponse: one of the bits differs; claim eps."""
    num_bits = validation.check_int("num_bits", num_bits)
    return _rr_setup("randomized_response_one_bit", epsilon, num_bits, 1)


def randomized_response_all_bits(epsilon=0.5, num_bits=4):
    """RandomizedResponse: all k bits differ; claim k * eps (Hamming)."""
    num_bits = validation.check_int("num_bits", num_bits)
    return _rr_setup("randomized_response_all_bits", epsilon, num_bits,
                     num_bits)


class _CodeRelease:
    """The code release after the encoder: logits -> ArgmaxCode -> the
    privatizer, as on the phone."""

    def __init__(self, privatizer):
        from tfdptext.models import code

        self.argmax = code.ArgmaxCode()
        self.privatizer = privatizer

    def __call__(self, logits):
        return self.privatizer(self.argmax(logits))


def _code_logits(num_codes):
    """Logits whose argmax is code 0 (x) and code 1 (x'): the worst case,
    as any two texts may map to any two codes."""
    x = np.eye(num_codes, dtype=np.float32)
    return x[0], x[1]


def code_randomized_response(epsilon=1.0, num_codes=4, layer_class=None,
                             name="code_randomized_response"):
    """ArgmaxCode -> CodeRandomizedResponse: logits of code 0 vs code 1;
    the claim is the layer's epsilon per text; the releases are codes."""
    num_codes = validation.check_int("num_codes", num_codes, minimum=2)
    layer_class = layer_class or layers.CodeRandomizedResponse
    layer = layer_class(epsilon=epsilon, num_codes=num_codes)
    guarantee = layer.guarantee()
    x, x_prime = _code_logits(num_codes)
    return auditor.MechanismSetup(
        name=name, claim=guarantee.value,
        unit=guarantee.unit.replace("_", " "), delta=guarantee.delta,
        sample=layer_sampler(_CodeRelease(layer), x, x_prime),
        output=auditor.CATEGORICAL,
        statistics=tuple(auditor.output_equals(c) for c in range(num_codes)),
        broken=layer_class is not layers.CodeRandomizedResponse,
        description=(f"{num_codes} codes; the texts' codes are 0 and 1 "
                     "(any two texts are neighbours)"))


def broken_code(kind, epsilon=1.0, num_codes=4):
    """A deliberately broken code randomized response (see `broken`),
    claiming the correct layer's epsilon."""
    validation.check_choice("kind", kind, tuple(broken.BROKEN_CODE_LAYERS))
    return code_randomized_response(
        epsilon, num_codes, layer_class=broken.BROKEN_CODE_LAYERS[kind],
        name=kind)


def broken_laplace(kind, epsilon=1.0, dimension=4):
    """A deliberately broken Laplace layer (see `broken`) at the
    per-coordinate neighbours, claiming the correct layer's epsilon."""
    validation.check_choice("kind", kind, tuple(broken.BROKEN_LAYERS))
    return laplace_per_coordinate(epsilon, dimension,
                                  layer_class=broken.BROKEN_LAYERS[kind],
                                  name=kind)


# ---------------------------------------------------------------------------
# TFLite.


def random_words(shape, dtype=np.int32):
    """Fresh words from os.urandom, for a `random_words` input."""
    count = int(np.prod(shape))
    dtype = np.dtype(dtype)
    return np.frombuffer(os.urandom(dtype.itemsize * count),
                         dtype=dtype).reshape(shape).copy()


def random_uniforms(shape, dtype=np.float32):
    """Fresh U[0, 1) numbers from os.urandom, for a `uniforms` input:
    24 random bits each, exactly representable in float32 and < 1."""
    words = random_words(shape, np.uint32)
    return ((words >> 8).astype(np.float64) / 2.0**24).astype(dtype)


# Inputs filled afresh from the OS's generator on every invoke.
FRESH_INPUTS = {"random_words": random_words, "uniforms": random_uniforms}


def tflite_sampler(tflite_bytes, feed_x, feed_x_prime, output=None,
                   fresh_inputs=None, num_threads=1):
    """`sample(side, n)` invoking a .tflite model's signature runner.

    Args:
        tflite_bytes: the model (bytes) or a path to a .tflite file.
        feed_x, feed_x_prime: dicts of numpy arrays, the model's inputs for
            x and x' (inputs in `fresh_inputs` may be left out). If the
            model has a batch axis, feed the same input on every row: one
            invoke then gives one release per row.
        output: the output to release (default: the only one).
        fresh_inputs: input name -> function(shape, dtype) called on every
            invoke (default `FRESH_INPUTS`: `random_words` and `uniforms`
            from os.urandom).
        num_threads: interpreter threads.

    Returns:
        A function (side, n) -> numpy array of n releases.
    """
    from ai_edge_litert.interpreter import Interpreter

    if isinstance(tflite_bytes, (str, os.PathLike)):
        interpreter = Interpreter(model_path=os.fspath(tflite_bytes),
                                  num_threads=num_threads)
    else:
        interpreter = Interpreter(model_content=tflite_bytes,
                                  num_threads=num_threads)
    runner = interpreter.get_signature_runner()
    details = runner.get_input_details()
    fresh_inputs = FRESH_INPUTS if fresh_inputs is None else fresh_inputs
    fresh = {name: (fresh_inputs[name], tuple(d["shape"]), d["dtype"])
             for name, d in details.items() if name in fresh_inputs}
    feeds = []
    for argument, feed in (("feed_x", feed_x), ("feed_x_prime",
                                                feed_x_prime)):
        missing = sorted(set(details) - set(feed) - set(fresh))
        unknown = sorted(set(feed) - set(details))
        if missing or unknown:
            raise ValueError(
                f"`{argument}` must feed the model's inputs "
                f"{sorted(details)}; missing {missing}, unknown {unknown}.")
        feeds.append({k: np.asarray(v, details[k]["dtype"])
                      for k, v in feed.items() if k not in fresh})

    def invoke(side):
        feed = dict(feeds[side])
        for name, (make, shape, dtype) in fresh.items():
            feed[name] = make(shape, dtype)
        result = runner(**feed)
        key = output if output is not None else next(iter(result))
        if output is None and len(result) != 1:
            raise ValueError(f"The model has outputs {sorted(result)}; "
                             "pass `output`.")
        return np.asarray(result[key])

    def sample(side, n):
        _check_side(side)
        out, done = [], 0
        while done < n:
            rows = invoke(side)
            out.append(rows[:n - done])
            done += len(rows)
        return np.concatenate(out)
    return sample


class _NoiseFromRandomWords(keras.layers.Layer):
    """Applies a privatizer to int32 `random_words`, which it reads as the
    phone model does (`tfdptext.layers.sampling`: uniforms, integers and
    32-bit exponentials from the words). No check of the words: the
    audit feeds os.urandom."""

    def __init__(self, privatizer, **kwargs):
        super().__init__(**kwargs)
        self.privatizer = privatizer

    def build(self, inputs_shape, words_shape=None):
        if not self.privatizer.built:
            self.privatizer.build(inputs_shape)
        super().build(inputs_shape)

    def call(self, inputs, words):
        shape = (-1,) + tuple(self.privatizer.words_shape(inputs.shape))
        return self.privatizer.apply(inputs, tf.reshape(
            tf.cast(words, tf.int32), shape))

    def compute_output_spec(self, inputs, words):
        integer = "int" in str(inputs.dtype)
        return keras.KerasTensor(inputs.shape,
                                 dtype="int32" if integer else "float32")


def _batched(vector, batch):
    return np.repeat(np.asarray(vector)[None], batch, axis=0)


def _convert(model, batch):
    from tfdptext.export import tflite

    return tflite.convert(model, batch_size=batch)


def tflite_laplace(epsilon=1.0, dimension=4, batch=_TFLITE_BATCH,
                   use_random_words=False):
    """MinMaxNormalize -> LaplaceNoise converted to TFLite.

    x and x' keep coordinates 0 and 1 at 0 and 1 (so normalisation leaves
    them unchanged) and differ in coordinate 2, 0 vs 1. With
    `use_random_words`, the noise comes from an int32 input
    `random_words` of shape (batch, 4k) (two words per exponential),
    filled from os.urandom on every invoke, instead of the in-graph
    RANDOM_UNIFORM op.
    """
    dimension = validation.check_int("dimension", dimension, minimum=3)
    inputs = {"x": keras.Input((dimension,), name="x")}
    normalized = layers.MinMaxNormalize()(inputs["x"])
    privatizer = layers.LaplaceNoise(epsilon=epsilon)
    if use_random_words:
        privatizer.build((None, dimension))
        inputs["random_words"] = keras.Input((4 * dimension,),
                                             dtype="int32",
                                             name="random_words")
        released = _NoiseFromRandomWords(privatizer)(
            normalized, inputs["random_words"])
    else:
        released = privatizer(normalized)
    model = keras.Model(inputs, released)
    guarantee = privatizer.guarantee()
    x = np.full(dimension, 0.4, np.float32)
    x[:3] = (0.0, 1.0, 0.0)
    x_prime = x.copy()
    x_prime[2] = 1.0
    name = "tflite_laplace" + ("_random_words" if use_random_words else "")
    return auditor.MechanismSetup(
        name=name, claim=guarantee.value,
        unit=guarantee.unit.replace("_", " "),
        delta=guarantee.delta,
        sample=tflite_sampler(_convert(model, batch),
                              {"x": _batched(x, batch)},
                              {"x": _batched(x_prime, batch)}),
        statistics=(_coordinate_ratio(2, 1.0 / epsilon),),
        differing=(2,),
        description=(f"TFLite, batch {batch}, k = {dimension}, min-max "
                     "normalised input; coordinate 2 is 0 vs 1"
                     + ("; noise from random_words" if use_random_words
                        else "")))


def tflite_dchi_noise(eta=2.0, dimension=8, distance=1.0,
                      batch=_TFLITE_BATCH):
    """DChiNoise converted to TFLite; the `dchi_noise` neighbours."""
    inputs = keras.Input((dimension,), name="x")
    privatizer = layers.DChiNoise(eta=eta)
    model = keras.Model(inputs, privatizer(inputs))
    x = np.zeros(dimension, np.float32)
    x_prime = x.copy()
    x_prime[0] = distance
    guarantee = privatizer.guarantee()
    return auditor.MechanismSetup(
        name="tflite_dchi_noise", claim=guarantee.value * distance,
        unit=(f"{guarantee.unit.replace('_', ' ')} metric, "
              f"eta {guarantee.value:g} x d {distance:g}"),
        delta=metric.pair_delta(guarantee, distance),
        sample=tflite_sampler(_convert(model, batch),
                              {"x": _batched(x, batch)},
                              {"x": _batched(x_prime, batch)}),
        statistics=_dchi_statistics(x, x_prime, eta),
        differing=(0,),
        description=f"TFLite, batch {batch}, n = {dimension}, "
                    f"||x - x'|| = {distance:g}")


def tflite_randomized_response(epsilon=0.5, num_bits=4,
                               batch=_TFLITE_BATCH):
    """RandomizedResponse converted to TFLite; all bits differ."""
    inputs = keras.Input((num_bits,), name="x")
    privatizer = layers.RandomizedResponse(epsilon=epsilon)
    model = keras.Model(inputs, privatizer(inputs))
    x = np.zeros(num_bits, np.float32)
    x_prime = np.ones(num_bits, np.float32)
    guarantee = privatizer.guarantee()
    return auditor.MechanismSetup(
        name="tflite_randomized_response",
        claim=guarantee.value * num_bits,
        unit=(f"{guarantee.unit.replace('_', ' ')} metric, eps "
              f"{guarantee.value:g} x Hamming {num_bits}"),
        delta=guarantee.delta,
        sample=tflite_sampler(_convert(model, batch),
                              {"x": _batched(x, batch)},
                              {"x": _batched(x_prime, batch)}),
        differing=tuple(range(num_bits)),
        description=f"TFLite, batch {batch}, {num_bits} bits, all differ")


def tflite_code_randomized_response(epsilon=1.0, num_codes=4,
                                    batch=_TFLITE_BATCH):
    """ArgmaxCode -> CodeRandomizedResponse converted to TFLite, its two
    random integers from an int32 `random_words` input (batch, 2) filled
    from os.urandom on every invoke, as the phone model takes them."""
    logits = keras.Input((num_codes,), name="x")
    words = keras.Input((2,), dtype="int32", name="random_words")
    from tfdptext.models import code

    privatizer = layers.CodeRandomizedResponse(epsilon=epsilon,
                                               num_codes=num_codes)
    released = _NoiseFromRandomWords(privatizer)(
        code.ArgmaxCode()(logits), words)
    model = keras.Model({"x": logits, "random_words": words}, released)
    guarantee = privatizer.guarantee()
    x, x_prime = _code_logits(num_codes)
    return auditor.MechanismSetup(
        name="tflite_code_randomized_response", claim=guarantee.value,
        unit=guarantee.unit.replace("_", " "), delta=guarantee.delta,
        sample=tflite_sampler(_convert(model, batch),
                              {"x": _batched(x, batch)},
                              {"x": _batched(x_prime, batch)}),
        output=auditor.CATEGORICAL,
        statistics=tuple(auditor.output_equals(c) for c in range(num_codes)),
        description=(f"TFLite, batch {batch}, {num_codes} codes, codes 0 vs "
                     "1; randomness from random_words"))


MECHANISMS = {
    "laplace_per_coordinate": laplace_per_coordinate,
    "laplace_vector": laplace_vector,
    "word_dropout_laplace": word_dropout_laplace,
    "dchi_noise": dchi_noise,
    "dchi_text_to_text": dchi_text_to_text,
    "randomized_response_one_bit": randomized_response_one_bit,
    "randomized_response_all_bits": randomized_response_all_bits,
    "code_randomized_response": code_randomized_response,
}
TFLITE_MECHANISMS = {
    "tflite_laplace": tflite_laplace,
    "tflite_laplace_random_words": lambda: tflite_laplace(
        use_random_words=True),
    "tflite_dchi_noise": tflite_dchi_noise,
    "tflite_randomized_response": tflite_randomized_response,
    "tflite_code_randomized_response": tflite_code_randomized_response,
}
BROKEN_MECHANISMS = {
    **{kind: (lambda kind=kind: broken_laplace(kind))
       for kind in broken.BROKEN_LAYERS},
    **{kind: (lambda kind=kind: broken_code(kind))
       for kind in broken.BROKEN_CODE_LAYERS},
}
ALL_MECHANISMS = {**MECHANISMS, **TFLITE_MECHANISMS, **BROKEN_MECHANISMS}
