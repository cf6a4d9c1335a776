"""BRR text-to-text: the Keras layer, the FAISS privatizer and their
accounting, against the closed-form output distribution."""

import itertools
import math

import keras
import numpy as np
import pytest
from scipy import stats

import eager_training

from tfdptext import layers
from tfdptext import offline
from tfdptext.offline import brr as offline_brr
from tfdptext.privacy import guarantee as g_lib
from tfdptext.privacy import randomized_response as rr

# A toy vocabulary of 8-bit codes (FAISS binary codes are whole bytes): id 0
# is [PAD]-like (special, passthrough), id 1 special only; ids 2-7 are
# candidates, two of them sharing a code (ties go to the lower id).
CODES = np.array([
    [0, 0, 0, 0, 0, 0, 0, 0],
    [1, 1, 1, 1, 1, 1, 1, 1],
    [1, 1, 1, 1, 0, 0, 0, 0],
    [1, 1, 1, 0, 0, 0, 0, 0],
    [0, 0, 0, 0, 1, 1, 1, 1],
    [1, 0, 1, 0, 1, 0, 1, 0],
    [0, 0, 1, 1, 0, 0, 1, 1],
    [0, 0, 1, 1, 0, 0, 1, 1],
], np.uint8)
SPECIAL, PASSTHROUGH = (0, 1), (0,)
EPSILON = 0.8
DRAWS = 20000


def closed_form(word, epsilon=EPSILON):
    """P[output = v | input word] by enumerating all 2^8 noisy codes."""
    p = rr.flip_probability(epsilon)
    candidates = [i for i in range(len(CODES)) if i not in SPECIAL]
    probs = np.zeros(len(CODES))
    for noisy in itertools.product((0, 1), repeat=CODES.shape[1]):
        noisy = np.array(noisy)
        flips = int((noisy != CODES[word]).sum())
        weight = p ** flips * (1 - p) ** (CODES.shape[1] - flips)
        distances = [(int((CODES[c] != noisy).sum()), c) for c in candidates]
        probs[min(distances)[1]] += weight  # nearest, lowest id among ties
    return probs


def _chi_square_pvalue(counts, probs):
    expected = probs * counts.sum()
    keep = expected > 0
    assert counts[~keep].sum() == 0, "an impossible output was drawn"
    return stats.chisquare(counts[keep], expected[keep]).pvalue


def _layer(**kwargs):
    return layers.BRRTextPrivatizer(
        EPSILON, codes=CODES, special_token_ids=SPECIAL,
        passthrough_token_ids=PASSTHROUGH, **kwargs)


def test_closed_form_is_a_distribution_over_candidates_only():
    for word in range(2, 8):
        probs = closed_form(word)
        assert math.isclose(probs.sum(), 1.0, rel_tol=1e-12)
        assert probs[list(SPECIAL)].sum() == 0.0
        assert probs[7] == 0.0  # shares id 6's code: the lower id wins
        assert probs[word if word != 7 else 6] == probs.max()


@pytest.mark.parametrize("word", [2, 5, 7])
def test_keras_layer_matches_the_closed_form(word):
    out = _layer()(np.full((DRAWS, 1), word, np.int32)).numpy().ravel()
    counts = np.bincount(out, minlength=len(CODES))
    assert _chi_square_pvalue(counts, closed_form(word)) > 1e-4


@pytest.mark.parametrize("word", [2, 5, 7])
def test_faiss_privatizer_matches_the_closed_form(word):
    privatizer = offline.BRRCorpusPrivatizer(
        np.packbits(CODES, axis=1), EPSILON, special_token_ids=SPECIAL,
        passthrough_token_ids=PASSTHROUGH)
    out = privatizer(np.full((DRAWS,), word)).ravel()
    counts = np.bincount(out, minlength=len(CODES))
    assert _chi_square_pvalue(counts, closed_form(word)) > 1e-4


def test_layer_and_faiss_decode_every_noisy_code_alike():
    """Same noisy code in, same word out: the two nearest-neighbour rules
    (ARG_MAX over +-1 scores; FAISS with the tie rule) are one function."""
    noisy = np.array(list(itertools.product((0, 1), repeat=8)), np.uint8)
    layer = _layer()
    layer.build((None,))
    keras_ids = layer.nearest_tokens(2.0 * noisy.astype("float32") - 1.0)
    privatizer = offline.BRRCorpusPrivatizer(
        np.packbits(CODES, axis=1), EPSILON, special_token_ids=SPECIAL)
    np.testing.assert_array_equal(
        keras_ids.numpy(), privatizer.nearest_tokens(np.packbits(noisy, 1)))


def test_exact_index_resolves_ties_beyond_its_first_neighbours():
    """Ten candidates at the same distance from the query: FAISS returns
    four of them in any order; the answer must be the lowest id."""
    codes = np.zeros((12, 8), np.uint8)
    for i in range(10):
        codes[i, 0] = 1  # ids 0-9 all at distance 1 from the zero code
    codes[10:] = 1
    privatizer = offline.BRRCorpusPrivatizer(np.packbits(codes, axis=1), 1.0,
                                             special_token_ids=[0])
    query = np.packbits(np.zeros((1, 8), np.uint8), axis=1)
    assert privatizer.nearest_tokens(query).tolist() == [1]


def test_passthrough_specials_and_flip_rate():
    layer = _layer()
    ids = np.array([[0, 2, 3, 4, 0]] * 2000, np.int32)
    out = layer(ids).numpy()
    assert (out[:, [0, 4]] == 0).all()
    assert not np.isin(out[:, 1:4], SPECIAL).any()
    privatizer = offline.BRRCorpusPrivatizer(
        np.packbits(np.zeros((4, 256), np.uint8), axis=1), 1.5)
    flips = np.unpackbits(privatizer.flip_masks(2000), axis=1)
    p = rr.flip_probability(1.5)
    n = flips.size
    assert abs(flips.mean() - p) < 5 * math.sqrt(p * (1 - p) / n)
    # Independent bits: neighbouring bits of a row are uncorrelated.
    assert abs(np.corrcoef(flips[:, :-1].ravel(), flips[:, 1:].ravel())[0, 1]
               ) < 0.01


def test_keep_threshold_never_flips_less_than_the_math():
    """Off device a bit is kept iff its 32-bit word is below T: the flip
    probability 1 - T / 2^32 is at least the requested one (by less than
    2^-32), and the guarantee states the epsilon of that probability."""
    for epsilon in (0.01, 1.0, 5.0, 30.0):
        threshold = offline_brr.keep_threshold(epsilon)
        p = rr.flip_probability(epsilon)
        assert p <= 1 - threshold / 2**32 < p + 2**-32
        assert threshold >= 2**31
        stated = offline.BRRCorpusPrivatizer(
            np.packbits(CODES, axis=1), epsilon).guarantee().value
        exact = math.log(threshold / (2**32 - threshold))
        assert exact <= stated <= exact + 1e-9 and stated <= epsilon + 1e-9
    # epsilon 30 flips with probability 2^-32 at least: 22.18 is stated.
    assert offline.BRRCorpusPrivatizer(
        np.packbits(CODES, axis=1), 30.0).guarantee().value == \
        pytest.approx(32 * math.log(2), rel=1e-9)


def test_offline_flips_exactly_the_words_at_or_above_the_threshold():
    privatizer = offline.BRRCorpusPrivatizer(np.packbits(CODES, axis=1),
                                             0.7, seed=11)
    masks = np.unpackbits(privatizer.flip_masks(500), axis=1)
    words = np.random.default_rng(11).integers(0, 2**32, size=(500, 8),
                                               dtype=np.uint32)
    np.testing.assert_array_equal(masks, words >= privatizer.threshold)


def test_guarantee_states_unit_metric_and_randomness():
    g = _layer().guarantee()
    assert (g.unit, g.parameter) == (g_lib.PER_TOKEN, "epsilon")
    # The implemented epsilon (integer thresholds on 23 and 24 bits): at
    # most the requested one, within 1e-6.
    assert EPSILON - 1e-6 < g.value <= EPSILON
    assert g.value == rr.implemented_epsilon(EPSILON)
    assert "Hamming" in g.metric and g.details["num_bits"] == 8
    assert "exp(6.4)" in g.composition  # 8 bits x 0.8
    packed = np.packbits(CODES, axis=1)
    assert offline.BRRCorpusPrivatizer(packed, 1.0).guarantee().randomness \
        == "os_entropy"
    seeded = offline.BRRCorpusPrivatizer(packed, 1.0, seed=3)
    assert seeded.guarantee().randomness == "seeded"
    again = offline.BRRCorpusPrivatizer(packed, 1.0, seed=3)
    ids = np.arange(2, 8).repeat(50)
    np.testing.assert_array_equal(seeded(ids), again(ids))


def test_hnsw_index_agrees_with_exact_on_easy_queries():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 2, (2000, 256)).astype(np.uint8)
    packed = np.packbits(codes, axis=1)
    exact = offline.BRRCorpusPrivatizer(packed, 8.0, index="exact")
    approximate = offline.BRRCorpusPrivatizer(packed, 8.0, index="hnsw")
    # Queries a few bits from a code: the nearest is that code's word.
    queries = codes[:300].copy()
    queries[:, :3] ^= 1
    queries = np.packbits(queries, axis=1)
    agree = (exact.nearest_tokens(queries)
             == approximate.nearest_tokens(queries)).mean()
    assert agree > 0.95
    assert exact.index_bytes() >= 2000 * 32


def test_serialization_round_trip_keeps_codes_and_config(tmp_path):
    inputs = keras.Input((5,), dtype="int32")
    model = keras.Model(inputs, _layer(name="privatizer")(inputs))
    path = str(tmp_path / "brr.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    layer = loaded.get_layer("privatizer")
    assert layer.get_config()["num_bits"] == 8
    np.testing.assert_array_equal(layer.signs.numpy(), 2.0 * CODES - 1.0)
    out = loaded(np.full((4000, 5), 5, np.int32)).numpy()
    assert set(np.unique(out)) <= set(range(2, 7))


@pytest.mark.parametrize("kwargs,message", [
    ({"codes": np.full((4, 8), 2)}, "only 0 and 1"),
    ({"codes": np.zeros((1, 8))}, "codes"),
    ({"codes": CODES, "special_token_ids": [9]}, "special_token_ids"),
    ({"codes": CODES, "special_token_ids": [0],
      "passthrough_token_ids": [3]}, "passthrough_token_ids"),
    ({"vocabulary_size": 10}, "num_bits"),
])
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        layers.BRRTextPrivatizer(1.0, **kwargs)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="epsilon"):
        layers.BRRTextPrivatizer(0.0, codes=CODES)
    with pytest.raises(ValueError, match="token ids in"):
        _layer()(np.array([[2, 8]], np.int32))
    with pytest.raises(ValueError, match="packed codes"):
        offline.BRRCorpusPrivatizer(CODES.astype(np.int64), 1.0)
    with pytest.raises(ValueError, match="index"):
        offline.BRRCorpusPrivatizer(np.packbits(CODES, 1), 1.0, index="ivf")
    with pytest.raises(ValueError, match="token_ids"):
        offline.BRRCorpusPrivatizer(np.packbits(CODES, 1), 1.0)(
            np.array([8]))


def test_tflite_model_is_builtins_only_unseeded_and_fresh():
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import tflite

    inputs = keras.Input((6,), dtype="int32")
    model = keras.Model(inputs, _layer()(inputs))
    flat = tflite.convert(model, batch_size=1)
    ops = tflite.check_unseeded_builtins(flat)
    assert any(op.name == "ARG_MAX" for op in ops)
    runner = Interpreter(model_content=flat).get_signature_runner()
    ids = np.array([[0, 2, 3, 4, 5, 6]], np.int32)
    outputs = [next(iter(runner(**{list(runner.get_input_details())[0]: ids}
                                ).values())) for _ in range(200)]
    outputs = np.concatenate(outputs)
    assert (outputs[:, 0] == 0).all()
    assert not np.isin(outputs[:, 1:], SPECIAL).any()
    assert len({row.tobytes() for row in outputs}) > 20
    # Each privatized column follows the closed form of its word (a mode
    # check would be flaky: word 6 outputs itself 0.36, word 4 0.25).
    for column, word in enumerate([2, 3, 4, 5, 6], start=1):
        counts = np.bincount(outputs[:, column], minlength=len(CODES))
        assert _chi_square_pvalue(counts, closed_form(word)) > 1e-4


def test_text_to_text_run_with_brr_trains_evaluates_and_exports(
        tiny_preset, tmp_path):
    """mode text_to_text, mechanism brr: the server trains on BRR tokens,
    the evaluation measures deniability with the same mechanism, and the
    phone model takes ids and random words and returns ids."""
    import json
    import os

    from tfdptext import binary
    from tfdptext import data
    from tfdptext import models
    from tfdptext import training
    from tfdptext.evaluation import evaluate
    from tfdptext.export import exporter
    from tfdptext.export import tflite

    tokenizer = models.load_tokenizer(tiny_preset, 16)
    rng = np.random.default_rng(0)
    codes_dir = str(tmp_path / "codes")
    binary.save_codes(codes_dir, tokenizer.vocabulary,
                      rng.integers(0, 2, (len(tokenizer.vocabulary), 64)),
                      special_token_ids=tokenizer.special_token_ids)
    config = training.TrainConfig(
        mode="text_to_text", epsilon=0.3, codes=codes_dir, preset=tiny_preset,
        max_length=16, batch_size=32, epochs=1, max_train_examples=64)
    assert config.validate().mechanism == "brr"
    run = str(tmp_path / "run")
    corpus = data.load_synthetic(num_examples=120)
    # Its two steps run eagerly (tests/eager_training.py): the run is here
    # for what BRR adds to training, evaluation and the export;
    # tests/test_training.py trains text_to_text with fit's graph.
    with eager_training.eager_fit():
        metrics = training.train(config, run, dataset=corpus, verbose=0)
    assert metrics["guarantee"]["mechanism"] == "brr_text_to_text"
    assert metrics["guarantee"]["unit"] == g_lib.PER_TOKEN
    # A logistic-regression attacker: the Keras MLP attacker is tested in
    # tests/test_evaluation.py; here it would only add its training.
    result = evaluate.evaluate(run, str(tmp_path / "eval"), dataset=corpus,
                               attackers=("logistic_regression",),
                               deniability_tokens=5, deniability_samples=50,
                               progress=False, plots=False)
    token = result["token_level"]
    assert token["epsilon"] == 0.3
    # 0.3 per bit flips 43% of 64 random bits: a token mostly maps to
    # another word (at 2 per bit, 12% flips, it would mostly stay).
    assert 0.0 <= token["inversion_accuracy"] < 0.5
    assert len(token["deniability"]["n_w"]) == 5
    out = str(tmp_path / "export")
    # One length (the default at max_length 16: one signature); the phone
    # model at several lengths is tests/test_export.py's.
    manifest = exporter.export_run(run, out, quantization="float32")
    assert manifest["guarantee"]["mechanism"] == "brr_text_to_text"
    # 64 bits per token at 16 tokens, each word mixed from 2
    # (`tfdptext.privacy.extraction`).
    assert manifest["user"]["inputs"]["random_words"] == [1, 2 * 16 * 64,
                                                         "int32"]
    phone = open(os.path.join(out, "user", "privatizer.tflite"), "rb").read()
    tflite.check_unseeded_builtins(phone)
    saved = json.load(open(os.path.join(run, "config.json")))
    assert saved["codes"] == os.path.abspath(codes_dir)


def test_brr_run_refuses_codes_of_another_vocabulary(tiny_preset, tmp_path):
    from tfdptext import binary
    from tfdptext import data
    from tfdptext import training

    codes_dir = str(tmp_path / "codes")
    binary.save_codes(codes_dir, [f"w{i}" for i in range(50)],
                      np.zeros((50, 8), np.uint8))
    config = training.TrainConfig(
        mode="text_to_text", epsilon=2.0, codes=codes_dir, preset=tiny_preset,
        max_length=16, epochs=1)
    with pytest.raises(ValueError, match="not the vocabulary"):
        training.train(config, str(tmp_path / "run"),
                       dataset=data.load_synthetic(num_examples=50),
                       verbose=0)
    for kwargs, message in (
            ({"epsilon": 2.0}, "codes"),
            ({"eta": 5.0, "codes": codes_dir}, "codes"),
            ({"mechanism": "brr", "codes": codes_dir}, "epsilon")):
        with pytest.raises(ValueError, match=message):
            training.TrainConfig(mode="text_to_text", **kwargs).validate()


def test_int8_export_keeps_the_codes_exactly():
    """Dynamic-range int8 conversion stores the +-1 table as +-127 with
    scale 1/127: read back out of the .tflite it is the codes, exactly,
    so the BRR guarantee (over the codes) holds for the int8 phone model.
    (A d_chi table, by contrast, moves: tests/test_export.py.)"""
    from tfdptext.export import tables
    from tfdptext.export import tflite

    codes = np.random.default_rng(3).integers(0, 2, (1500, 64))
    ids = keras.Input((6,), dtype="int32", name="ids")
    layer = layers.BRRTextPrivatizer(1.0, codes=codes, special_token_ids=[0])
    model = keras.Model(ids, layer(ids))
    held = tables.read_table(tflite.convert(model, quantize=True,
                                            batch_size=1), codes.shape)
    assert held.dtype == "int8"
    np.testing.assert_array_equal(held.values, 2.0 * codes - 1.0)
