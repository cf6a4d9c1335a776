"""Issue 38: buffers aimed at the groups of the old extraction, at words
derived from others, and at the checks' old fixed sample, on the phone
models of the three exports the reviewer attacked (TFLite, one row per
call): a 3-code release at epsilon 2 (C = 2, g = 64), 384-d Laplace
after min-max (DPNR; C = 1536, g = 2, 3072 words) and token_rep d_chi
on 2 tokens of 384-d (C = 1536, g = 2). Each buffer is refused every
time, or released by exactly the stated channel.

Before issue 38 (the reviewer's table, 400 calls each): even words from
java.util.Random(42) or a constant-seed LCG released the clean code in
100% of calls; odd words all even, or a low bit following the position's
parity, ruled out a code; a negated half or per-group checksums released
the clean code 100%; a complemented half released c + 1 always; 98% zeros
outside the old sample released the token embeddings without noise, and
a 4 KiB pool tiled over a Laplace buffer copied coordinate i's noise to
i + 128. Each of these tests fails on that code. Round five: a pool of
1,396 words (not a power of two) tiled, and a pool of N - 8 words after
a 3-word header, passed the checks of the first rounds on the Laplace
and d_chi buffers (3072 words, g = 2); bit 0 following the position
modulo 6 passed them on the code release (C = 2, g = 64), and modulo 8
at g = 8, C = 31 (tests/test_secure_noise.py).

Statistical tests: fixed sample sizes; p > 1e-6 per test (Bonferroni
over the few kinds per model): a correct model fails one run in 10^5.
"""

import re

import numpy as np
import pytest
from scipy import stats

import partial_buffers
from tfdptext import layers
from tfdptext.audit import word_generators
from tfdptext.privacy import categorical
from tfdptext.privacy import extraction
from tfdptext.privacy import words_contract

P_REJECT = 1e-6


def _split(width, consumed):
    exact, refuse = partial_buffers.split_by_expectation(
        partial_buffers.ISSUE_38, width, consumed)
    # The reviewer's derived and whole-buffer defects are refused on every
    # layout; the parity-class buffers are exact on every layout.
    for kind in ("low_bit_follows_parity", "second_half_negated",
                 "second_half_complemented", "group_checksums",
                 "strided_checksums", "pool_4k_tiled", "pool_tiled_unsampled",
                 "pool_tiled_after_header", "low_bit_period_4",
                 "low_bit_period_6", "low_bit_period_8"):
        assert kind in refuse, kind
    for kind in ("even_words_java_42", "odd_words_java_42",
                 "even_words_lcg_constant_seed", "odd_words_even"):
        assert kind in exact, kind
    return exact, refuse


@pytest.fixture(scope="module")
def code_phone():
    run, width = partial_buffers.code_release_phone(2.0, 3)
    x = np.zeros((1,), np.int32)
    return (lambda w: run(x, w)), width


@pytest.fixture(scope="module")
def laplace_phone():
    run, width = partial_buffers.phone(layers.LaplaceNoise(1.0), (384,),
                                       before=layers.MinMaxNormalize())
    rng = np.random.default_rng(3)
    x = rng.random((1, 384)).astype(np.float32)
    x[0, :2] = [0.0, 1.0]  # min-max leaves x as it is
    return run, width, x


def test_code_release_aligned_buffers(code_phone):
    run_one, width = code_phone
    run = lambda x, w: run_one(w)  # noqa: E731
    x = None
    exact, refuse = _split(width, 2)
    partial_buffers.assert_defects_refused(lambda w: run(x, w), width,
                                           kinds=refuse, consumed=2)
    released = partial_buffers.released_outputs(
        lambda w: run(x, w), width, draws=1000, kinds=exact, consumed=2,
        any_refusals=True)
    expected = categorical.transition_matrix(2.0, 3, 24)[0]
    for kind, codes in released.items():
        assert codes is not None, kind  # exact buffers pass the checks
        counts = np.bincount(codes, minlength=3)
        # The old extraction: counts (2000, 0, 0) or a code never drawn.
        p = stats.chisquare(counts, expected * counts.sum()).pvalue
        assert p > P_REJECT, (kind, counts)


def test_dpnr_laplace_aligned_buffers(laplace_phone):
    run, width, x = laplace_phone
    consumed = 4 * 384
    assert width == extraction.layout(consumed).words == 3072
    exact, refuse = _split(width, consumed)
    assert "zeros_outside_old_sample_98" in refuse
    assert "zeros_outside_old_sample_83" in refuse
    assert "zeros_outside_sample_98" in refuse
    partial_buffers.assert_defects_refused(lambda w: run(x, w), width,
                                           kinds=refuse, consumed=consumed)
    released = partial_buffers.released_outputs(
        lambda w: run(x, w), width, draws=150, kinds=exact,
        consumed=consumed, any_refusals=True)
    law = stats.laplace(scale=1.0).cdf
    for kind, out in released.items():
        if out is None:  # refused every time: allowed
            continue
        noise = (out - x).reshape(-1, 384)
        assert stats.kstest(noise.ravel(), law).pvalue > P_REJECT, kind
        # Every coordinate's noise of even and odd coordinates alike.
        for half in (noise[:, 0::2], noise[:, 1::2]):
            assert stats.kstest(half.ravel(), law).pvalue > P_REJECT, kind
        # No coordinate's noise is fixed across calls.
        assert (noise.std(axis=0) > 0.3).all(), kind


def test_token_rep_dchi_aligned_buffers():
    eta = 40.0
    run, width = partial_buffers.phone(layers.DChiNoise(eta), (2, 384))
    consumed = 2 * extraction.layout(768).consumed
    assert width == extraction.layout(consumed).words == 3072
    x = np.zeros((1, 2, 384), np.float32)
    exact, refuse = _split(width, consumed)
    assert "zeros_outside_old_sample_98" in refuse
    partial_buffers.assert_defects_refused(lambda w: run(x, w), width,
                                           kinds=refuse, consumed=consumed)
    released = partial_buffers.released_outputs(
        lambda w: run(x, w), width, draws=200, kinds=exact,
        consumed=consumed, any_refusals=True)
    radius = stats.gamma(a=384, scale=1.0 / eta).cdf
    for kind, out in released.items():
        if out is None:
            continue
        noise = out.reshape(-1, 384)
        norms = np.linalg.norm(noise, axis=-1)
        assert stats.kstest(norms, radius).pvalue > P_REJECT, kind
        # A uniform direction: each coordinate of the unit vector has
        # mean 0 and variance 1/384; the sum over a token's coordinates
        # of the squared means stays near 384 / (384 n).
        unit = noise / norms[:, None]
        assert abs(unit.mean(axis=0)).max() < 6 * np.sqrt(
            1 / 384 / len(unit)), kind


def _toy_release(words, silent_from=64):
    """A toy release of 64 coordinates, each uniform noise on [-1, 1) from
    its own consumed word; coordinates from `silent_from` on get none."""
    noise = extraction.extract(words, 64)[0].astype(np.float64) / 2**31
    noise[silent_from:] = 0.0
    return noise[None]


def test_audit_channel_test_reads_every_output_position():
    """The reviewer's case: noise missing at coordinates past the first
    16 only. The old test read positions 0-15 and called it "same"."""
    rng = np.random.default_rng(0)
    good = [_toy_release(word_generators._os_urandom(rng, 1, 128))
            for _ in range(200)]
    other = [_toy_release(word_generators._os_urandom(rng, 1, 128))
             for _ in range(200)]
    silent = [_toy_release(word_generators._os_urandom(rng, 1, 128), 32)
              for _ in range(200)]
    reference = np.concatenate(good)
    assert word_generators.channel_p_value(reference,
                                           np.concatenate(other)) > 1e-3
    assert word_generators.channel_p_value(reference,
                                           np.concatenate(silent)) < 1e-6
    assert word_generators.channel_p_value(
        reference, np.concatenate(silent), max_positions=16) > 1e-3


def test_audit_previous_call_is_a_true_replay():
    """`previous_call` sends one buffer again and again: every check
    passes (the model cannot see it) and the channel test flags it."""
    verdicts = word_generators.check_model(
        _toy_release, 128, generators=["previous_call"], buffers=3,
        consumed=64, releases=60)
    (replay,) = verdicts
    assert replay.refused == 0 and replay.wrong_channel
    # Released undetected: flagged, not as expected (the audit exits 1).
    assert replay.unsafe and not replay.as_expected
    assert "NO: UNSAFE" in word_generators.markdown_table(verdicts)


def _numbers(sentence):
    """(g - 1, edge, run) as the manifest's sentence states them."""
    found = re.search(r"any (\d+) bad word\(s\) anywhere, the first or "
                      r"the last (\d+) words, any run of up to (\d+) ",
                      sentence)
    return tuple(int(n) for n in found.groups())


def _cases(width, consumed, rng):
    """{clause: (buffer, its bad positions)} for each case the manifest's
    `partial_buffers` sentence says is exact, the bad words independent
    of the fresh ones (constants, a counter, java.util.Random(42))."""
    few, edge, run = _numbers(words_contract.partial_buffers(consumed))
    cases = {}

    def case(name, bad, values):
        words = word_generators._os_urandom(rng, 1, width)
        words[0, bad] = values
        cases[name] = (words, bad)

    case("any g - 1 words", rng.choice(width, few, replace=False), 0)
    case("the first words", np.arange(edge), 0)
    case("the last words", np.arange(width - edge, width), -1)
    start = int(rng.integers(0, width - run + 1))
    case("a run", np.arange(start, start + run), np.arange(run))
    for parity in (0, 1):
        bad = np.arange(parity, width, 2)
        case(f"parity {parity}", bad, word_generators._java_42(len(bad)))
    return cases


@pytest.mark.parametrize("consumed", [2, 1536])
def test_the_partial_buffers_sentence_holds_for_every_case(consumed):
    """Each clause of the manifest's sentence: its numbers are the
    layout's own, every group keeps a fresh word, and one more bad word
    at the edge is not covered."""
    lay = extraction.layout(consumed)
    few, edge, run = _numbers(words_contract.partial_buffers(consumed))
    assert (few, edge, run) == (
        lay.group - 1, extraction.longest_harmless_edge(consumed),
        extraction.longest_harmless_run(consumed))
    rng = np.random.default_rng(consumed)
    for _ in range(20):
        for clause, (_, bad) in _cases(lay.words, consumed, rng).items():
            assert extraction.exact_despite(bad, consumed), clause
    assert not extraction.exact_despite(range(edge + 1), consumed)


def test_the_partial_buffers_sentence_releases_exactly(code_phone):
    """The same cases on the code release's phone model: refused (many
    equal words fail the checks: 63 zero words are 62 repeats), or
    released by the transition matrix (chi-square over 600 calls)."""
    run, width = code_phone
    rng = np.random.default_rng(7)
    expected = categorical.transition_matrix(2.0, 3, 24)[0]
    codes = {}
    for _ in range(600):
        for clause, (words, _) in _cases(width, 2, rng).items():
            codes.setdefault(clause, []).append(int(np.asarray(run(words))
                                                    .ravel()[0]))
    released = 0
    for clause, got in codes.items():
        got = np.array(got)
        kept = got[got >= 0]
        if len(kept) == 0:
            continue
        released += 1
        assert len(kept) >= 590, clause  # refused always or almost never
        counts = np.bincount(kept, minlength=3)
        p = stats.chisquare(counts, expected * counts.sum()).pvalue
        assert p > P_REJECT, (clause, counts)
    assert released >= 2  # both parities (126 zeros or a counter: refused)


# Each defect the manifest's `checks` sentence names, as the audit's
# generators build it.
_CHECKS_SENTENCE = {
    "a stuck bit": ["all_even", "all_odd", "top_bit_set"],
    "a bit that follows the position's parity": ["low_bit_follows_parity"],
    "any function of the position modulo 2, 3, 4, 6, 8, 12, 16 or 24": [
        "low_bit_period_4", "low_bit_period_6", "low_bit_period_8"],
    "an unfilled or mostly unfilled buffer": ["zeros", "bytes_not_words"],
    "mostly zero anywhere": ["zeros_outside_old_sample_98",
                             "zeros_outside_sample_98", "zeros"],
    "a constant": ["constant"],
    "a counter or arithmetic progression": ["counter",
                                            "counter_random_step"],
    "an LCG": ["lcg32", "lcg31"],
    "low or high bytes too even or too repetitive": ["one_byte_per_word",
                                                     "low_24_bits_only"],
    "repeated words": ["each_word_twice"],
    "a pool tiled over the buffer": ["pool_4k_tiled", "block_of_8_tiled"],
    "a pool of any size up to N - 8 words, N the words the app fills, "
    "tiled from the first word": ["pool_tiled_unsampled"],
    "or after a header of up to 3 words": ["pool_tiled_after_header"],
    "a second half copied from the first": ["half_repeated"],
    "or its negation or complement": ["second_half_negated",
                                      "second_half_complemented"],
    "checksums that make every group (or every set of words C apart) "
    "sum to 0": ["group_checksums", "strided_checksums"],
}


@pytest.mark.parametrize("which", ["code", "laplace"])
def test_every_defect_the_checks_sentence_names_is_refused(
        which, code_phone, laplace_phone):
    if which == "code":
        run, width = code_phone
        consumed = 2
    else:
        run_x, width, x = laplace_phone
        run = lambda w: run_x(x, w)  # noqa: E731
        consumed = 4 * 384
    for phrase, kinds in _CHECKS_SENTENCE.items():
        assert phrase in words_contract.CHECKS, phrase
        if phrase.startswith("mostly zero") and width <= 512:
            kinds = ["zeros"]  # the sample is the whole buffer
        partial_buffers.assert_defects_refused(run, width, buffers=2,
                                               kinds=kinds,
                                               consumed=consumed)


def test_what_the_not_detectable_sentence_names_passes_the_checks(
        laplace_phone):
    """The sentence is true: these buffers pass every check, and each
    still breaks the release (the same noise again; words fixed by the
    seed; two consumed words set to 0 by a checksum of two groups; a
    pool of N - 1 words tiled: consumed word 0 is twice word 0, even)."""
    run_x, width, x = laplace_phone
    consumed = 4 * 384
    for phrase in ("java.util.Random", "reuse of a buffer",
                   "a checksum of only a few groups of a long buffer",
                   "nor is it sure to see a pool of more than N - 8 words "
                   "tiled (the last few words copies of the first)"):
        assert phrase in words_contract.NOT_DETECTABLE
    rng = np.random.default_rng(11)
    java = word_generators.GENERATORS["java_util_random"].make(rng, 1, width)
    assert not word_generators.refused(run_x(x, java))
    replayed = word_generators._os_urandom(rng, 1, width)
    first, again = run_x(x, replayed), run_x(x, replayed.copy())
    np.testing.assert_array_equal(first, again)  # the noise, repeated
    used = extraction.extract(word_generators._os_urandom(rng, 1, width),
                              consumed)
    used[0, :2] = 0  # two groups cancelled by their checksums
    words = extraction.buffer_for(
        used, word_generators._os_urandom(rng, 1, width - consumed))
    assert not word_generators.refused(run_x(x, words))
    np.testing.assert_array_equal(extraction.extract(words, consumed)[0, :2],
                                  [0, 0])
    tiled = word_generators._os_urandom(rng, 1, width)
    tiled[0, -1] = tiled[0, 0]  # a pool of N - 1 words, tiled
    assert not word_generators.refused(run_x(x, tiled))
    assert extraction.extract(tiled, consumed)[0, 0] % 2 == 0
