"""Partly bad and bit-defective random-word buffers against a phone model
(issue 27), shared by the tests of every exported mechanism.

Partly bad buffers (a few words wrong among fresh ones) must leave the
release EXACT: every row refused, or every row released with the law of
the good buffers (each mechanism's test compares the released outputs
with its closed form). Buffers with a defect shared by every word (a
stuck bit, ASCII bytes, a quarter filled) must be refused.

Before extraction (tfdptext.privacy.extraction) a code release read only
words 0 and 1: "first word 0" released the clean code every time, which
`released_outputs` hands to the caller's closed-form test.
"""

import functools

import numpy as np

from tfdptext.audit import word_generators

# Exact for every layout we build: at most 16 bad words, g >= 2, C >= 64
# whenever g = 2 (`extraction.layout`), so every group keeps a fresh word.
PARTIAL = ("first_1_zero", "first_word_0xffffffff", "counter_in_first_8",
           "words_0_10_20_zero", "second_word_zero", "last_16_zero")
# A defect of every word: must be refused.
DEFECTS = ("all_even", "all_odd", "multiples_of_4", "top_bit_set",
           "ascii_text", "bytes_not_words")
# Issue 38: the reviewer's buffers, aimed at the groups of the extraction
# before it (a parity class, a half), at words derived from others, and
# at the checks' old fixed sample. Each is refused or released exactly.
ISSUE_38 = tuple(g.name for g in word_generators._ISSUE_38)


def split_by_expectation(kinds, width, consumed):
    """(kinds that may be released and must then be exact, kinds that
    must be refused) for a model of `width` words reading `consumed`."""
    exact, refuse = [], []
    for kind in kinds:
        expected = word_generators.GENERATORS[kind].expectation(width,
                                                                consumed)
        (refuse if expected == word_generators.REFUSE else exact).append(
            kind)
    return tuple(exact), tuple(refuse)


def released_outputs(run, width, draws, kinds=PARTIAL, seed=0,
                     consumed=None, any_refusals=False):
    """{kind: the released outputs (concatenated), or None when every one
    was refused} for buffers of each kind fed one row at a time to
    `run(words) -> release`. Asserts that each kind is refused every time
    or almost never: a partly bad buffer uses up some of a check's
    margin (3 zero words are 2 of the 3 repeated words that fail a
    128-word buffer), so a chance coincidence among its fresh words
    refuses it about once in 10^5 or 10^6 calls, which fails closed.
    With `any_refusals`, a kind may be refused any share of the time (a
    buffer whose bad words are not uniform, e.g. odd words all even,
    uses up more of the bit counts' margin)."""
    rng = np.random.default_rng(seed)
    out = {}
    for kind in kinds:
        make = word_generators.GENERATORS[kind].make
        outputs = [np.asarray(run(make(rng, 1, width, consumed)))
                   for _ in range(draws)]
        refused = [word_generators.refused(o) for o in outputs]
        assert any_refusals or all(refused) or \
            sum(refused) <= max(1, draws // 1000), \
            f"{kind}: {sum(refused)} of {draws} refused"
        kept = [o for o, r in zip(outputs, refused) if not r]
        out[kind] = np.concatenate(kept) if kept else None
    return out


def assert_defects_refused(run, width, buffers=3, kinds=DEFECTS, seed=1,
                           consumed=None):
    """Every buffer of each defective kind is refused."""
    rng = np.random.default_rng(seed)
    for kind in kinds:
        make = word_generators.GENERATORS[kind].make
        for _ in range(buffers):
            assert word_generators.refused(
                run(make(rng, 1, width, consumed))), kind


def phone(privatizer, shape, dtype="float32", before=None):
    """(run(x, words) -> release, words per call) of the privatizer's
    phone model in TFLite (dynamic batch, run one row at a time)."""
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import tflite
    from tfdptext.models import secure

    model = secure.secure_privatizer_model(privatizer, shape, dtype,
                                           before=before)
    runner = Interpreter(model_content=tflite.convert(model)
                         ).get_signature_runner()
    width = int(model.input[secure.RANDOM_WORDS].shape[-1])

    def run(x, words):
        return next(iter(runner(x=x, random_words=words).values()))

    return run, width


@functools.lru_cache(maxsize=None)
def code_release_phone(epsilon, num_codes):
    """`phone` of a `num_codes` code release at `epsilon` (run(x, words)),
    converted once per process: test_partial_buffers.py and
    test_aligned_buffers.py test the same 3-code model at epsilon 2."""
    from tfdptext import layers

    return phone(layers.CodeRandomizedResponse(epsilon, num_codes), (),
                 "int32")
