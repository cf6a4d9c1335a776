"""Tests of the empirical epsilon audit (tfdptext.audit, tfdptext-audit).

The audits run at confidence 1 - 1e-4, so a correct mechanism is refuted
with probability < 1e-4 (conftest's rule); the broken variants are still
refuted by a wide margin at these sample sizes.
"""

import json
import math
import os
import re
import sys

import numpy as np
import pytest
from scipy import special
from scipy import stats

from tfdptext.audit import auditor
from tfdptext.audit import mechanisms
from tfdptext.audit import statistics
from tfdptext.privacy import extraction
import zygote

SAMPLES = 20000
CONFIDENCE = 1.0 - 1e-4
PROGRAM = os.path.join(os.path.dirname(__file__), "..", "eval",
                       "tfdptext-audit")


# ---------------------------------------------------------------------------
# statistics.py


@pytest.mark.parametrize("a,b", [(0.5, 0.5), (1.0, 3.0), (7.0, 2.5),
                                 (40.0, 900.0), (25000.0, 25001.0)])
def test_regularized_incomplete_beta_matches_scipy(a, b):
    for x in (1e-6, 0.01, 0.3, 0.5, 0.77, 0.999):
        assert statistics.regularized_incomplete_beta(x, a, b) == (
            pytest.approx(special.betainc(a, b, x), rel=1e-9, abs=1e-14))


@pytest.mark.parametrize("successes,trials", [
    (0, 1), (1, 1), (0, 50), (3, 50), (25, 50), (50, 50), (1, 200000),
    (17, 200000), (99000, 200000), (199999, 200000), (200000, 200000)])
@pytest.mark.parametrize("alpha", [0.05, 1e-3, 1e-6])
def test_clopper_pearson_matches_scipy_beta_ppf(successes, trials, alpha):
    lower = statistics.clopper_pearson_lower(successes, trials, alpha)
    upper = statistics.clopper_pearson_upper(successes, trials, alpha)
    expected_lower = 0.0 if successes == 0 else stats.beta.ppf(
        alpha, successes, trials - successes + 1)
    expected_upper = 1.0 if successes == trials else stats.beta.ppf(
        1 - alpha, successes + 1, trials - successes)
    assert lower == pytest.approx(expected_lower, rel=1e-9, abs=1e-300)
    assert upper == pytest.approx(expected_upper, rel=1e-9)
    assert lower <= successes / trials <= upper


def test_clopper_pearson_closed_forms():
    # k = n: lower = alpha^(1/n); k = 0: upper = 1 - alpha^(1/n).
    for n in (1, 10, 1000):
        assert statistics.clopper_pearson_lower(n, n, 0.05) == (
            pytest.approx(0.05 ** (1 / n), rel=1e-12))
        assert statistics.clopper_pearson_upper(0, n, 0.05) == (
            pytest.approx(1 - 0.05 ** (1 / n), rel=1e-9))
    # Beta(1, 1) is uniform.
    assert statistics.beta_quantile(0.3, 1.0, 1.0) == pytest.approx(0.3)


def test_epsilon_lower_bound_closed_form_and_delta():
    n, alpha = 1000, 0.05
    a = (alpha / 2) ** (1 / n)
    expected = math.log(a / (1 - a))
    assert statistics.epsilon_lower_bound(n, n, 0, n, alpha) == (
        pytest.approx(expected, rel=1e-9))
    # Equal counts never give a positive bound; nothing observed gives 0.
    assert statistics.epsilon_lower_bound(500, n, 500, n, alpha) == 0.0
    assert statistics.epsilon_lower_bound(0, n, 0, n, alpha) == 0.0
    # delta is subtracted from p's lower bound.
    with_delta = statistics.epsilon_lower_bound(n, n, 0, n, alpha, delta=0.5)
    assert with_delta == pytest.approx(math.log((a - 0.5) / (1 - a)))
    # Exact ratio: p = 0.6, q = 0.2 -> ln 3 is an upper limit of the bound.
    bound = statistics.epsilon_lower_bound(60000, 100000, 20000, 100000,
                                           alpha)
    assert 1.05 < bound < math.log(3.0)


def test_bonferroni_and_argument_errors():
    assert statistics.bonferroni(0.05, 10) == pytest.approx(0.005)
    with pytest.raises(ValueError, match="num_tests"):
        statistics.bonferroni(0.05, 0)
    with pytest.raises(ValueError, match="alpha"):
        statistics.clopper_pearson_lower(1, 2, 1.5)
    with pytest.raises(ValueError, match="successes"):
        statistics.clopper_pearson_upper(3, 2, 0.05)
    with pytest.raises(ValueError, match="trials"):
        statistics.clopper_pearson_upper(0, 0, 0.05)
    with pytest.raises(ValueError, match="delta"):
        statistics.epsilon_lower_bound(1, 2, 1, 2, 0.05, delta=-1.0)


# ---------------------------------------------------------------------------
# auditor.py


def test_select_event_finds_a_separating_event():
    for values_x, values_x_prime in ((np.zeros(100), np.ones(100)),
                                     (np.ones(100), np.zeros(100))):
        threshold, at_least, swapped, _ = auditor.select_event(
            values_x, values_x_prime)
        inside = [(v >= threshold) if at_least else (v <= threshold)
                  for v in (values_x, values_x_prime)]
        top, bottom = (inside[1], inside[0]) if swapped else inside
        assert top.all() and not bottom.any()


def test_audit_validates_arguments():
    setup = mechanisms.laplace_vector()
    with pytest.raises(ValueError, match="samples_per_side"):
        auditor.audit(setup, 10)
    with pytest.raises(ValueError, match="confidence"):
        auditor.audit(setup, 1000, confidence=1.0)


def test_perfect_distinguisher_bound_and_report():
    # A "mechanism" that releases its input: the bound is the largest the
    # evaluation half can show, and the report says FAIL.
    setup = auditor.MechanismSetup(
        name="identity", claim=1.0, unit="per coordinate",
        sample=lambda side, n: np.full((n, 2), float(side)))
    result = auditor.audit(setup, 2000, confidence=0.95)
    m = result.num_tests
    a = (0.05 / m / 2) ** (1 / 1000)
    assert result.lower_bound == pytest.approx(math.log(a / (1 - a)))
    assert result.verdict == auditor.FAIL
    table = auditor.markdown_table([result])
    assert "| identity | 1 (per coordinate) |" in table
    assert "FAIL (UNEXPECTED)" in table
    data = json.loads(auditor.to_json([result]))["results"][0]
    assert data["verdict"] == "fail" and len(data["tests"]) == m


@pytest.mark.parametrize("name", list(mechanisms.MECHANISMS))
def test_correct_mechanism_passes(name):
    result = auditor.audit(mechanisms.MECHANISMS[name](), SAMPLES,
                           CONFIDENCE)
    assert result.lower_bound <= result.claim, result.best_test
    assert result.verdict == auditor.PASS
    # The family is strong enough to see a good part of the claim.
    assert result.tightness > 0.25, result.best_test


@pytest.mark.parametrize("name", list(mechanisms.BROKEN_MECHANISMS))
def test_broken_variant_is_caught(name):
    result = auditor.audit(mechanisms.BROKEN_MECHANISMS[name](), SAMPLES,
                           CONFIDENCE)
    assert result.broken
    assert result.lower_bound > result.claim, result.best_test
    assert result.verdict == auditor.FAIL and result.as_expected


# ---------------------------------------------------------------------------
# TFLite


@pytest.mark.parametrize("name", ["code_randomized_response",
                                  "tflite_code_randomized_response"])
def test_code_release_audit_comes_close_to_its_epsilon(name):
    # Discrete outputs: the best event (output == the text's code) has
    # ratio exactly e^eps, so the bound approaches the claim (0.93 and
    # 0.91 at 50,000 samples when measured; 0.75 leaves room for chance).
    result = auditor.audit(mechanisms.ALL_MECHANISMS[name](), 50000,
                           CONFIDENCE)
    assert result.verdict == auditor.PASS
    assert 0.75 < result.tightness <= 1.0, result.best_test


@pytest.mark.parametrize("use_random_words", [False, True])
def test_tflite_laplace_passes(use_random_words):
    setup = mechanisms.tflite_laplace(use_random_words=use_random_words)
    result = auditor.audit(setup, SAMPLES, CONFIDENCE)
    assert result.verdict == auditor.PASS
    assert 0.5 < result.tightness <= 1.0, result.best_test


def test_tflite_sampler_fills_random_words_fresh_and_checks_feeds():
    import keras

    from tfdptext.export import tflite

    x = keras.Input((3,), name="x")
    words = keras.Input((3,), dtype="int32", name="random_words")
    model = keras.Model({"x": x, "random_words": words},
                        keras.ops.cast(words, "float32") + x)
    model_bytes = tflite.convert(model, batch_size=4)
    feed = {"x": np.zeros((4, 3), np.float32)}
    sample = mechanisms.tflite_sampler(model_bytes, feed, feed)
    releases = sample(0, 10)  # three invokes of four rows
    assert releases.shape == (10, 3)
    assert len(np.unique(releases)) == 30  # no word reused
    with pytest.raises(ValueError, match="feed_x"):
        mechanisms.tflite_sampler(model_bytes, {"y": feed["x"]}, feed)


def test_fresh_inputs_come_from_os_urandom():
    words = mechanisms.random_words((2, 500))
    assert words.dtype == np.int32 and len(np.unique(words)) > 990
    uniforms = mechanisms.random_uniforms((1000,))
    assert uniforms.dtype == np.float32
    assert 0.0 <= uniforms.min() and uniforms.max() < 1.0
    assert set(mechanisms.FRESH_INPUTS) == {"random_words", "uniforms"}


# ---------------------------------------------------------------------------
# Random words: what the checks refuse, and a generator they cannot see.


@pytest.fixture(scope="module")
def laplace_phone():
    from tfdptext.audit import word_generators

    return word_generators.laplace_phone_model(384, epsilon=1.0)


def test_structured_words_fail_closed_on_the_tflite_model(laplace_phone):
    from tfdptext.audit import word_generators

    model, width = laplace_phone
    feed = {"x": np.random.default_rng(1).random((1, 384)).astype(
        np.float32)}
    verdicts = word_generators.check_tflite(model, feed, width, buffers=2,
                                            consumed=4 * 384)
    table = word_generators.markdown_table(verdicts)
    assert all(v.as_expected for v in verdicts if not v.unsafe), table
    # What no check can see is released, and flagged (issue 38).
    assert {v.generator for v in verdicts if v.unsafe} == {
        "java_util_random", "previous_call"}, table
    assert not any(v.as_expected for v in verdicts if v.unsafe)
    refused = {v.generator for v in verdicts if v.refused}
    assert {"counter", "weyl", "lcg32", "half_repeated", "all_even",
            "top_bit_set", "ascii_text", "bytes_not_words"} <= refused
    assert not {"os_urandom", "java_util_random", "first_1_zero",
                "last_1_zero", "counter_in_first_8"} & refused


def test_the_channel_test_finds_a_release_that_ignores_its_words():
    """A model whose release does not depend on the words it reads (as
    a code release read only words 0 and 1 before extraction, and word 0
    = 0 gave the clean code) is released by another channel: the audit
    says so and the row is not as expected."""
    from tfdptext.audit import word_generators

    def fixed_when_first_word_zero(words):
        if words[0, 0] == 0:
            return np.zeros((1,), np.int32)  # the clean code
        return np.array([np.random.default_rng().integers(3)], np.int32)

    verdicts = {v.generator: v for v in word_generators.check_model(
        fixed_when_first_word_zero, 128, generators=["first_1_zero"],
        buffers=2, consumed=2, releases=200)}
    row = verdicts["first_1_zero"]
    assert row.refused == 0 and row.wrong_channel and not row.as_expected


def test_java_util_random_passes_the_checks_and_one_release_gives_its_seed(
        laplace_phone):
    """An app seeding java.util.Random with the time in ms: its words pass
    every check (the release is finite), and searching +-60 s of seeds
    against ONE 384-d release finds the seed and the clean vector."""
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.audit import java_random

    model, width = laplace_phone
    runner = Interpreter(model_content=model).get_signature_runner()
    rng = np.random.default_rng(2)
    x = rng.random((1, 384)).astype(np.float32)
    clean = (x - x.min()) / (x.max() - x.min())
    seed = 1_795_000_000_000 + int(rng.integers(0, 10**9))
    release = runner(x=x, random_words=java_random.java_words(
        seed, width)[None])["output_0"]
    assert np.isfinite(release).all()  # the checks pass it
    guess = seed + int(rng.integers(-50_000, 50_000))  # the clock, roughly
    layout = extraction.layout(4 * 384)
    found = java_random.recover_seed(release[0], 1.0, guess - 60_000,
                                     guess + 60_001, layout=layout)
    assert found.seeds == (seed,)
    np.testing.assert_allclose(found.clean[0], clean[0], atol=1e-4)
    assert found.candidates == 120_001
    # With os.urandom words no seed explains the release.
    fresh = runner(x=x, random_words=mechanisms.random_words(
        (1, width)))["output_0"]
    assert java_random.recover_seed(fresh[0], 1.0, guess - 60_000,
                                    guess + 60_001,
                                    layout=layout).seeds == ()


# ---------------------------------------------------------------------------
# The program


def _run(*flags):
    env = dict(os.environ, KERAS_BACKEND="tensorflow",
               TF_CPP_MIN_LOG_LEVEL="2")
    return zygote.run([sys.executable, PROGRAM, *flags],
                      capture_output=True, text=True, env=env,
                      timeout=300)


def test_program_runs_end_to_end(tmp_path):
    output = tmp_path / "audit.json"
    done = _run("--samples=400",
                "--mechanisms=laplace_per_coordinate,broken_noise_off",
                f"--output={output}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| laplace_per_coordinate |" in done.stdout
    rows = json.loads(output.read_text())["results"]
    assert [r["verdict"] for r in rows] == ["pass", "fail"]
    assert rows[0]["samples_per_side"] == 400


def test_program_audits_random_words(tmp_path):
    """What `tfdptext-audit --random_words` runs (in this process: the
    flags are tested below)."""
    from tfdptext.cli import audit as program

    output = tmp_path / "words.md"
    # The buffers no check can see are released: flagged, exit status 1.
    assert program.audit_random_words(None, 1, str(output), 60,
                                      ["code_release"]) == 1
    table = output.read_text()
    assert "code_release (128 words, 2 read)" in table
    assert "| counter | 128 | 1 | 1 | refuse | - | yes |" in table
    assert "| counter_in_first_8 | 128 | 1 | 0 | exact or refuse | same (" \
        in table
    assert "| java_util_random | 128 | 1 | 0 | refuse (cannot be caught) " \
        "| same (" in table
    # A replay, flagged whatever its channel test says (with 60 releases
    # of 3 codes its repeats may not reach the level).
    assert re.search(r"\| previous_call \| 128 \| 1 \| 0 \| refuse \(cannot "
                     r"be caught\) \| [^|]* \| NO: UNSAFE", table)
    flagged = [line.split(" | ")[0][2:] for line in table.splitlines()
               if line.endswith("| NO: UNSAFE, released undetected |")]
    assert flagged == ["java_util_random", "previous_call"]
    assert "| NO |" not in table


def test_random_words_exit_status_counts_undetectable_releases(
        monkeypatch):
    """The exit status of `tfdptext-audit --random_words` on canned
    verdicts: an undetectable buffer released gives 1 unless
    --allow_undetectable; a defect released gives 1 either way."""
    from tfdptext.audit import word_generators as wg
    from tfdptext.cli import audit as program

    def verdict(name, refused, expected, buffers=2):
        return wg.Verdict(name, 128, buffers, refused, expected)

    class Canned:
        width = consumed = 128

        def __init__(self, verdicts):
            self.verdicts = verdicts

    def status(*verdicts, allow=False):
        phone = Canned([verdict("os_urandom", 0, wg.RELEASE), *verdicts])
        monkeypatch.setattr(wg, "mechanism_phones",
                            lambda names: {"m": phone})
        return program.audit_random_words(None, 2, None, 0, None, allow)

    monkeypatch.setattr(wg, "check_phone",
                        lambda phone, **kwargs: phone.verdicts)
    assert status() == 0
    java = verdict("java_util_random", 0, wg.UNSAFE)
    assert java.unsafe and not java.as_expected
    assert status(java) == 1
    assert status(java, allow=True) == 0
    # Refused every time (no model can, but the rule says so): fine.
    assert status(verdict("previous_call", 2, wg.UNSAFE)) == 0
    released_defect = verdict("counter", 1, wg.REFUSE)
    assert status(java, released_defect, allow=True) == 1


@pytest.mark.parametrize("flag,name", [("--samples=5", "--samples"),
                                       ("--confidence=1.5", "--confidence"),
                                       ("--mechanisms=bogus",
                                        "--mechanisms")])
def test_program_rejects_bad_flags(flag, name):
    done = _run(flag)
    assert done.returncode != 0
    assert name in done.stderr


def test_generator_jump_ahead_equals_stepping_one_call_at_a_time():
    # The audit's LCG buffers are computed from the i-step maps
    # x -> A_i x + B_i at once; they must be the integers stepping gives
    # (java.util.Random's 48-bit LCG and the 32- and 31-bit ones).
    from tfdptext.audit import java_random
    from tfdptext.audit import word_generators

    rng = np.random.default_rng(3)
    seeds = rng.integers(0, 2**48, size=(3, 2), dtype=np.uint64)
    states, words = java_random.next_ints(seeds, 37)
    expected = np.empty((3, 2, 37), np.int64)
    for index in np.ndindex(3, 2):
        x = int(seeds[index])
        for i in range(37):
            x = (x * java_random.MULTIPLIER + java_random.ADDEND) \
                % 2**48
            expected[index + (i,)] = np.int32(np.uint32(x >> 16))
        assert int(states[index]) == x
    np.testing.assert_array_equal(words, expected)
    for modulus, a, c in ((2**32, 1664525, 1013904223),
                          (2**31, 1103515245, 12345)):
        start = rng.integers(0, modulus, size=4, dtype=np.uint64)
        out = word_generators._lcg_outputs(start, 29, a, c, modulus)
        for row, x in enumerate(start.tolist()):
            for i in range(29):
                x = (x * a + c) % modulus
                assert int(out[row, i]) == x
    with pytest.raises(ValueError, match="modulus"):
        word_generators._lcg_outputs(start, 3, a, c, 10**9)
