"""The tokenizer contract: one set of ids for a text, whichever code
computes them (TextTokenizer eagerly, inside tf.data, the JavaScript
client in node), the character data read out of TensorFlow, the
no-break-space and NUL fixes, and clear errors for texts that are not
text. The JavaScript runs in node (the browser runs the same module in
tests/test_web.py)."""

import json
import os
import random
import shutil
import subprocess

import pytest
import tensorflow as tf

from tfdptext import models
from tfdptext.data import tokenizer_vectors
from tfdptext.data import unicode_tables
from tfdptext.data.tokenization import UNICODE_SPACES
from tfdptext.data.tokenization import TextTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEB = os.path.join(ROOT, "web")
NODE_TOOL = os.path.join(WEB, "tools", "tokenize.mjs")
# Long enough that the hard strings' ids are compared whole, not only
# their first 64 tokens.
LONG = 512


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory):
    tokenizer = models.load_tokenizer(max_length=16)
    path = str(tmp_path_factory.mktemp("vocab") / "vocab.txt")
    tokenizer.save_vocabulary(path)
    return tokenizer.vocabulary, path


@pytest.fixture(scope="module")
def tables():
    """The character data TensorFlow gives (about 5 s)."""
    return unicode_tables.tables()


def _node(request):
    if shutil.which("node") is None:
        pytest.skip("node is not installed (node 20 is on every machine "
                    "of this project)")
    result = subprocess.run(["node", NODE_TOOL], input=json.dumps(request),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)["results"]


def _mismatches(texts, expected, got):
    return [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]


@pytest.mark.parametrize("unicode_spaces", [True, False])
def test_javascript_gives_our_ids_on_hard_strings(vocabulary, unicode_spaces):
    """600 hard strings (accents, emoji sequences, URLs, CJK, Hangul, HTML,
    control and format characters, every kind of space, texts of up to
    15,000 characters): the same ids from the JavaScript tokenizer, with
    and without unicode_spaces (exports made before it)."""
    tokens, path = vocabulary
    tokenizer = TextTokenizer(tokens, LONG, unicode_spaces=unicode_spaces)
    texts = tokenizer_vectors.hard_strings(600)
    assert len(texts) == 600 and max(map(len, texts)) > 10_000
    expected = tokenizer(texts)["token_ids"].numpy().tolist()
    got = _node({"vocabulary": path, "config": tokenizer.config(),
                 "texts": texts})
    assert not _mismatches(texts, expected, got)[:3]


def test_javascript_words_on_every_kind_of_character(tables):
    """Each code point the character data names (whitespace, control,
    format, punctuation, marks, spaces, every one NFKC_Casefold changes)
    and 20,000 others, between two letters: the same words as keras_hub's
    TensorFlow pretokenization (the exhaustive run over all 1,112,064 is
    benchmarks/tokenizer_parity.py)."""
    from keras_hub.src.tokenizers.word_piece_tokenizer import pretokenize

    named = {c for ranges in tables["classes"].values()
             for first, last in ranges for c in range(first, last + 1)}
    named |= set(tables["casefold"])
    others = [c for c in random.Random(0).sample(
        unicode_tables.code_points(), 20_000) if c not in named]
    points = sorted(named) + others
    texts = [f"x{chr(c)}y" for c in points]
    strings = tf.strings.regex_replace(
        tf.constant([t.encode("utf-8") for t in texts]), UNICODE_SPACES, " ")
    expected = [[w.decode("utf-8") for w in row] for row in pretokenize(
        strings, True, True, True, True, None).to_list()]
    got = _node({"mode": "words", "config": {"unicode_spaces": True},
                 "texts": texts})
    bad = _mismatches([hex(c) for c in points], expected, got)
    assert not bad, bad[:5]


def test_the_character_data_is_tensorflows(tables):
    """web/tfdptext/unicode_data.js is what this TensorFlow gives (a
    TensorFlow whose RE2 or ICU data changed fails here: regenerate it and
    check the ids with the tests above)."""
    committed = open(os.path.join(WEB, "tfdptext", "unicode_data.js"),
                     encoding="utf-8").read()
    assert unicode_tables.javascript(tables) == committed


def test_eager_and_tf_data_ids_agree(vocabulary):
    """keras_hub's eager (pure Python) path gave other ids than its
    TensorFlow path (training's) for characters newer than Python's
    Unicode 14; TextTokenizer runs the TensorFlow path everywhere."""
    tokens, _ = vocabulary
    tokenizer = TextTokenizer(tokens, 32)
    texts = ["a\U0001e030b", "a\U00010d6eb", *tokenizer_vectors.hard_strings(
        100, seed=1)]
    eager = tokenizer(texts)["token_ids"].numpy()
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(256).map(
        lambda t: tokenizer(t)["token_ids"])
    assert (eager == next(iter(dataset)).numpy()).all()
    assert eager[0][:5].tolist() == [101, 1037, 10260, 2497, 102]


def test_unicode_spaces_and_nul_split_words_and_old_runs_keep_their_ids(
        vocabulary):
    tokens, _ = vocabulary
    new = TextTokenizer(tokens, 16)
    old = TextTokenizer.from_config(tokens, {
        k: v for k, v in new.config().items() if k != "unicode_spaces"})
    assert new.config()["unicode_spaces"] and not old.unicode_spaces
    texts = ["Full\u00a0width", "a\u2028b", "ab\x00cd"]
    assert new.tokenize(texts).to_list() == [
        [2440, 9381], [1037, 1038], [11113, 3729]]
    # Before: one [UNK] for the joined word; the text ended at NUL.
    assert old.tokenize(texts).to_list() == [
        [100], [100], [11113]]


def test_lengths_share_one_wordpiece_and_give_the_same_pieces(vocabulary):
    """Tokenizers of one vocabulary and normalisation at several lengths
    share the WordPiece lookup and its compiled `pieces`; other settings
    get their own; each length packs the same pieces."""
    tokens, _ = vocabulary
    short, long = TextTokenizer(tokens, 16), TextTokenizer(tokens, LONG)
    assert short._engine is not long._engine
    assert short._engine.pieces is long._engine.pieces
    old = TextTokenizer(tokens, 16, unicode_spaces=False)
    assert old._engine.pieces is not short._engine.pieces
    texts = ["Full\u00a0width", *tokenizer_vectors.hard_strings(40, seed=2)]
    pieces = short.tokenize(texts).to_list()
    assert long.tokenize(texts).to_list() == pieces
    for tokenizer in (short, long):
        ids = tokenizer(texts)["token_ids"].numpy()
        for row, want in zip(ids, pieces):
            kept = want[:tokenizer.max_length - 2]
            assert row[:len(kept) + 2].tolist() == [101, *kept, 102]
    assert old.tokenize(texts[:1]).to_list() == [[100]]


@pytest.mark.parametrize("texts, message", [
    ("one string", r"`texts` must be a list of strings"),
    (["fine", None], r"`texts\[1\]` must be a string, received NoneType"),
    (["a\ud800b"], r"`texts\[0\]` holds a lone surrogate \(U\+D800\) at "
     r"position 1"),
    ([b"\xff\xfe"], r"`texts\[0\]` is not valid UTF-8"),
    ([3], r"`texts\[0\]` must be a string, received int"),
])
def test_texts_that_are_not_text_get_clear_errors(vocabulary, texts,
                                                  message):
    with pytest.raises(ValueError, match=message):
        TextTokenizer(vocabulary[0], 16)(texts)


def test_javascript_refuses_what_python_refuses(vocabulary):
    tokens, path = vocabulary
    config = TextTokenizer(tokens, 16).config()
    got = _node({"vocabulary": path, "config": config,
                 "texts": ["a\ud800b", "\udfffx", "fine"]})
    assert "lone surrogate (U+D800) at position 1" in got[0]["error"]
    assert "lone surrogate (U+DFFF) at position 0" in got[1]["error"]
    assert got[2][:3] == [101, 2986, 102]
    bad = {**config, "lowercase": False}
    result = subprocess.run(
        ["node", NODE_TOOL], input=json.dumps(
            {"vocabulary": path, "config": bad, "texts": ["x"]}),
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "uncased contract" in result.stderr


def test_test_vectors_cover_every_rule(vocabulary):
    tokens, _ = vocabulary
    tokenizer = TextTokenizer(tokens, 64)
    record = tokenizer_vectors.vectors(tokenizer)
    assert record["max_length"] == 64
    by_what = {v["what"]: v for v in record["vectors"]}
    assert by_what["empty"]["token_ids"] == [101, 102]
    assert by_what["a word of 101 bytes is [UNK]"]["token_ids"] == [
        101, 100, 102]
    assert 100 not in by_what["a word of exactly 100 bytes"]["token_ids"]
    assert by_what["German sharp s folds to ss"]["token_ids"][1:3] == \
        tokenizer.tokenize(["strasse"])[0].numpy().tolist()[:2]
    long = by_what["truncation keeps [SEP]"]
    assert long["truncated"] and len(long["token_ids"]) == 64
    assert long["token_ids"][-1] == 102
    assert sum(v["truncated"] for v in record["vectors"]) == 1
    # Made once per settings: a tokenizer of the same settings gets the
    # same vectors without tokenizing (its engine is gone), as a copy of
    # its own; other settings get their own.
    again = TextTokenizer(tokens, 64)
    again._engine = None
    copied = tokenizer_vectors.vectors(again)
    assert copied == record and copied is not record
    copied["vectors"][0]["token_ids"].append(0)
    assert tokenizer_vectors.vectors(again) == record
    short = tokenizer_vectors.vectors(TextTokenizer(tokens, 16))
    assert short["max_length"] == 16
    assert len(short["vectors"][-1]["token_ids"]) == 16
