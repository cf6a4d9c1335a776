#!/usr/bin/env python
"""Tokenization parity: other implementations against our ids.

    python benchmarks/tokenizer_parity.py [--strings=3000]

Compares, on `--strings` hard strings (tfdptext.data.tokenizer_vectors:
accents, emoji sequences, URLs, CJK, Hangul, HTML, control and format
characters, every kind of space, texts of up to 15,000 characters), the
ids of TextTokenizer (the contract) with:
- the web client's JavaScript tokenizer (web/tfdptext/tokenizer.js, in
  node), with and without unicode_spaces;
- what an app engineer would reach for: Hugging Face's
  BertWordPieceTokenizer (lowercase, strip accents: what the docs used to
  say) from the same vocab.txt, and TF Text's FastBertTokenizer (the
  string-in phone model's, --tokenizer_in_graph);
and, over every Unicode scalar value c (1,112,064), the words of "x" c "y"
from the JavaScript tokenizer against keras_hub's TensorFlow
pretokenization. Prints Markdown for docs/benchmarks.md.
"""

import datetime
import json
import os
import subprocess
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import machine as host
from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("strings", 3000, "Hard strings.")
flags.DEFINE_integer("max_length", 8192, "Compare ids up to this length.")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_TOOL = os.path.join(ROOT, "web", "tools", "tokenize.mjs")


def node(request):
    result = subprocess.run(["node", NODE_TOOL], input=json.dumps(request),
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)["results"]


def differ(expected, got):
    return sum(a != b for a, b in zip(expected, got))


def main(argv):
    del argv
    import tempfile

    import tensorflow as tf
    import tensorflow_text as tf_text
    from keras_hub.src.tokenizers.word_piece_tokenizer import pretokenize
    from tokenizers import BertWordPieceTokenizer

    from tfdptext import models
    from tfdptext.data import tokenizer_vectors
    from tfdptext.data import unicode_tables
    from tfdptext.data.tokenization import UNICODE_SPACES
    from tfdptext.data.tokenization import TextTokenizer

    texts = tokenizer_vectors.hard_strings(FLAGS.strings)
    vocabulary = models.load_tokenizer(max_length=8).vocabulary
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "vocab.txt")
        TextTokenizer(vocabulary, 8).save_vocabulary(path)
        for spaces in (True, False):
            ours = TextTokenizer(vocabulary, FLAGS.max_length,
                                 unicode_spaces=spaces)
            expected = ours(texts)["token_ids"].numpy().tolist()
            start = time.perf_counter()
            got = node({"vocabulary": path, "config": ours.config(),
                        "texts": texts})
            seconds = time.perf_counter() - start
            rows.append((f"web/tfdptext/tokenizer.js (node), unicode_spaces="
                         f"{spaces}", differ(expected, got),
                         f"{seconds:.1f} s for all (node start included)"))
        ours = TextTokenizer(vocabulary, FLAGS.max_length)
        pieces = ours.tokenize(texts).to_list()
        hf = BertWordPieceTokenizer(path, lowercase=True, strip_accents=True)
        hf_ids = [e.ids for e in hf.encode_batch(texts,
                                                 add_special_tokens=False)]
        rows.append(("Hugging Face BertWordPieceTokenizer(lowercase, "
                     "strip_accents)", differ(pieces, hf_ids), ""))
        fast = tf_text.FastBertTokenizer(
            vocab=vocabulary, token_out_type=tf.int32,
            lower_case_nfd_strip_accents=True, unknown_token="[UNK]")
        fast_ids = fast.tokenize(tf.constant(
            [t.encode("utf-8") for t in texts])).to_list()
        rows.append(("TF Text FastBertTokenizer (the string-in phone "
                     "model's)", differ(pieces, fast_ids), ""))
    points = unicode_tables.code_points()
    words_in = [f"x{chr(c)}y" for c in points]
    strings = tf.strings.regex_replace(
        tf.constant([t.encode("utf-8") for t in words_in]), UNICODE_SPACES,
        " ")
    expected = [[w.decode("utf-8") for w in row] for row in pretokenize(
        strings, True, True, True, True, None).to_list()]
    got = node({"mode": "words", "config": {"unicode_spaces": True},
                "texts": words_in})
    print(f"Machine: {host.cpu_name()}. Date: "
          f"{datetime.date.today().isoformat()}. node "
          f"{subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}"
          f", TensorFlow {tf.__version__}. {len(texts)} hard strings "
          f"(longest {max(map(len, texts))} characters), ids compared up "
          f"to {FLAGS.max_length} tokens.\n")
    print("| implementation | strings whose ids differ from ours | note |")
    print("|---|---|---|")
    for name, count, note in rows:
        print(f"| {name} | {count} of {len(texts)} | {note} |")
    print(f"\nEvery code point between two letters (words after "
          f"case folding): {differ(expected, got)} of {len(points)} differ "
          "(JavaScript vs TensorFlow).")
    total = f"{len(texts):,}"
    labels = (
        "`web/tfdptext/tokenizer.js` (the web client's; node), "
        "`unicode_spaces` on (new exports)",
        "the same, `unicode_spaces` off (exports made before it)",
        "Hugging Face `BertWordPieceTokenizer(lowercase=True, "
        "strip_accents=True)` from the same vocab.txt (what the docs' old "
        "description gives)",
        "TF Text `FastBertTokenizer` (the `--tokenizer_in_graph` phone "
        "model's)")
    table = {"columns": ["implementation",
                         "strings whose ids differ from ours"],
             "rows": [[label, (f"**{count:,} of {total}**" if i < 2 else
                               f"{count:,} of {total}")]
                      for i, (label, (_, count, _)) in
                      enumerate(zip(labels, rows))]}
    host.write_json(None, {
        "strings": len(texts),
        "ids_differ": [{"implementation": name, "count": count,
                        "note": note} for name, count, note in rows],
        "code_points": len(points),
        "code_point_words_differ_in_node": differ(expected, got)},
        name="tokenization-parity-other", table=table)


if __name__ == "__main__":
    app.run(main)
