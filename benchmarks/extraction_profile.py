#!/usr/bin/env python
"""Where the random words' mixing and checks spend their time on the
phone, part by part, and what four other formulations of the same
values cost (issue 38, item 5).

At one layout (default: the token-level d_chi phone model at 16 tokens,
C = 12,288 consumed words, N = 24,576), each part of
`tfdptext.models.word_checks` is converted alone (batch 1, one thread,
LiteRT's interpreter), fed the same os.urandom words, and reduced to
one number so nothing is pruned; the parts' times include the call
itself and the copy of the N input words (the `call and input` row:
subtract it). Round-robin: --rounds rounds of --block invokes per part
in a shuffled order, p50 over every invoke, and the smallest and largest
per-round median.

Before timing, each alternative is checked to give exactly the values of
today's form on good words and on every generator of
`tfdptext.audit.word_generators` (or the run stops).

Writes benchmarks/results/extraction_profile.json (a table for
docs/benchmarks.md).

    .venv/bin/python benchmarks/extraction_profile.py
"""

import os
import random
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

import machine as host

FLAGS = flags.FLAGS
flags.DEFINE_integer("consumed", 12288, "C, the words the mechanism "
                     "reads (12,288: token-level d_chi at 16 tokens).")
flags.DEFINE_integer("rounds", 8, "Round-robin rounds.")
flags.DEFINE_integer("block", 200, "Invokes per part and round.")


def _parts(consumed):
    """[(name, what it is, fn(words) -> a tensor)]: today's parts, then
    the alternatives (names starting with 'instead')."""
    import tensorflow as tf

    from tfdptext.models import word_checks as wc

    def sample(w):
        return wc.sampled_words(w, consumed)

    return [
        ("call and input", "one word read (the call and the input copy)",
         lambda w: wc._part(w, 0, 1)),
        ("whole", "the mixing and every check (as the phone model)",
         lambda w: tf.cast(wc.words_look_random(w, consumed), tf.int32)
         + tf.reduce_max(wc.extract(w, consumed)) * 0),
        ("mixing", "extract: SPLIT_V, 2 ADD, CONCATENATION",
         lambda w: wc.extract(w, consumed)),
        ("sample", "GATHER of the 512 sampled words", sample),
        ("row statistics", "sample, byte histograms (one "
         "UNSORTED_SEGMENT_SUM), bit and collision counts",
         lambda w: wc._row_statistics(sample(w), consumed)[0]),
        ("histogram ids alone", f"{_HISTOGRAM_IDS:,} bytes of the words "
         "as int32 (SPLIT_V, BITCAST, CAST)", _histogram_ids),
        ("histogram alone", "the same bytes, one UNSORTED_SEGMENT_SUM "
         f"into {_HISTOGRAM_BINS:,} bins",
         lambda w: tf.math.unsorted_segment_sum(
             tf.ones([_HISTOGRAM_IDS]), _histogram_ids(w), _HISTOGRAM_BINS)),
        ("word repeats", "sample, one TOPK_V2 sort, equal neighbours",
         lambda w: wc._repeat_margin(sample(w))),
        ("consumed zeros", "mixing, EQUAL, CAST, SUM over C words",
         lambda w: wc._zeros(wc.extract(w, consumed))),
        ("tile repeats", "4 EQUAL, 4 CAST, 3 MAXIMUM, SUM over N / 2 "
         "int64 pairs", wc._tile_repeats),
        ("instead: tile repeats, per-anchor sums",
         "4 EQUAL, 4 CAST, 4 SUM, repeated anchors weighted 0",
         _tile_repeats_summed),
        ("instead: tile repeats, one broadcast EQUAL",
         "EQUAL (N / 2, 1) against (1, 4), REDUCE_ANY, CAST, SUM",
         _tile_repeats_broadcast),
        ("instead: histogram, SCATTER_ND",
         "the same bytes and bins, one SCATTER_ND (sums repeated ids)",
         lambda w: tf.scatter_nd(tf.expand_dims(_histogram_ids(w), -1),
                                 tf.ones([_HISTOGRAM_IDS]),
                                 [_HISTOGRAM_BINS])),
        ("instead: mixing, rotated half",
         "SPLIT, SPLIT_V, CONCATENATION, ADD",
         lambda w: _extract_rotated(w, consumed)),
    ]


# The row statistics' histogram at N > 512 words: 4 bytes of the 1,744
# words of its sources (512 sampled, 256 sums, 2 x 488 XORs) and 2,040
# block values; 8,192 bins (`word_checks._row_statistics`).
_HISTOGRAM_IDS = 4 * 1744 + 2040
_HISTOGRAM_BINS = 8192


def _histogram_ids(words):
    """(_HISTOGRAM_IDS,) int32 in [0, 256): the bytes of the first words,
    as many as the row statistics' histogram counts."""
    import tensorflow as tf

    from tfdptext.models import word_checks as wc

    head = wc._part(words, 0, _HISTOGRAM_IDS // 4)
    return tf.reshape(tf.cast(tf.bitcast(head, tf.uint8), tf.int32), [-1])


def _anchors(words):
    """The head (first 8 words) and its 4 anchor pairs ((batch, 1) int64
    each), as `word_checks._tile_repeats` takes them."""
    from tfdptext.models import word_checks as wc
    from tfdptext.privacy import word_statistics as ws

    head = wc._part(words, 0, 2 * ws.TILE_FIRST_PAIR)
    return head, [wc._pairs(wc._part(head, s, s + 2))
                  for s in ws.TILE_ANCHOR_STARTS]


def _tile_repeats_summed(words):
    """`tile_repeats` as one count per anchor, an anchor equal to an
    earlier one weighted 0 (so a pair is counted once)."""
    import tensorflow as tf

    from tfdptext.models import word_checks as wc

    head, anchors = _anchors(words)
    weights = []
    for i, anchor in enumerate(anchors):
        seen = [tf.cast(tf.equal(anchor, a), tf.float32)
                for a in anchors[:i]]
        weights.append(1.0 - tf.reduce_max(tf.stack(seen), axis=0)
                       if seen else 1.0)

    def hits(pairs):
        return tf.add_n([tf.reduce_sum(tf.cast(tf.equal(pairs, a),
                                               tf.float32),
                                       axis=-1, keepdims=True) * weight
                         for a, weight in zip(anchors, weights)])

    return hits(wc._pairs(words)) - hits(wc._pairs(head))


def _tile_repeats_broadcast(words):
    """`tile_repeats` with the 4 anchors in one broadcast EQUAL."""
    import tensorflow as tf

    from tfdptext.models import word_checks as wc

    head, anchors = _anchors(words)
    anchors = tf.expand_dims(tf.concat(anchors, axis=-1), 1)

    def hits(pairs):
        match = tf.reduce_any(tf.equal(tf.expand_dims(pairs, -1), anchors),
                              axis=-1)
        return tf.reduce_sum(tf.cast(match, tf.float32), axis=-1,
                             keepdims=True)

    return hits(wc._pairs(words)) - hits(wc._pairs(head))


def _extract_rotated(words, consumed):
    """`extract` for g = 2 and shift -1 (C even): the second half rotated
    by one word, then one ADD."""
    import tensorflow as tf

    first, second = tf.split(words, 2, axis=-1)
    rest, last = tf.split(second, [consumed - 1, 1], axis=-1)
    return first + tf.concat([last, rest], axis=-1)


def _check_same(parts, consumed, width):
    """Raises AssertionError unless every alternative gives today's
    values on good words and on every audit generator's buffers."""
    import numpy as np
    import tensorflow as tf

    from tfdptext.audit import word_generators as wg
    from tfdptext.models import secure

    fns = dict((name, fn) for name, _, fn in parts)
    same_as = {"instead: tile repeats, per-anchor sums": "tile repeats",
               "instead: tile repeats, one broadcast EQUAL": "tile repeats",
               "instead: histogram, SCATTER_ND": "histogram alone",
               "instead: mixing, rotated half": "mixing"}
    rng = np.random.default_rng(consumed)
    buffers = [secure.os_random_words((2, width))]
    buffers += [g.make(rng, g.rows, width, consumed)
                for g in wg.GENERATORS.values()]
    rows = 0
    for words in buffers:
        for row in words:  # one row at a time, as the phone model
            row = tf.constant(row[None])
            for name, today in same_as.items():
                np.testing.assert_array_equal(fns[name](row).numpy(),
                                              fns[today](row).numpy(), name)
            rows += 1
    return rows


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    import keras
    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import tflite
    from tfdptext.models import secure
    from tfdptext.privacy import extraction

    consumed = FLAGS.consumed
    width = extraction.layout(consumed).words
    parts = _parts(consumed)
    checked = _check_same(parts, consumed, width)
    feed = {"random_words": secure.os_random_words((1, width))}
    runners = {}
    for name, _, fn in parts:
        inputs = keras.Input((width,), dtype="int32", name="random_words")

        def one(words, fn=fn):
            out = tf.reshape(tf.cast(fn(words), tf.float32), [1, -1])
            return tf.reduce_max(out, axis=1, keepdims=True)

        model = keras.Model(inputs, keras.layers.Lambda(one)(inputs))
        runners[name] = Interpreter(
            model_content=tflite.convert(model, batch_size=1),
            num_threads=1).get_signature_runner()
    times = {name: [] for name in runners}
    order = list(runners)
    for name in order:
        for _ in range(20):
            runners[name](**feed)
    for r in range(FLAGS.rounds):
        random.Random(r).shuffle(order)
        for name in order:
            run = runners[name]
            for _ in range(FLAGS.block):
                began = time.perf_counter()
                run(**feed)
                times[name].append(time.perf_counter() - began)
    records, rows = [], []
    for name, what, _ in parts:
        t = np.array(times[name]) * 1e3
        per_round = [float(np.median(t[i:i + FLAGS.block]))
                     for i in range(0, len(t), FLAGS.block)]
        records.append({"part": name, "ops": what,
                        "p50_ms": float(np.median(t)),
                        "round_range_ms": [min(per_round), max(per_round)]})
        rows.append([name, what, f"{np.median(t):.4f}",
                     f"{min(per_round):.4f}-{max(per_round):.4f}"])
        print(" | ".join(rows[-1]), flush=True)
    host.write_json(None, {"consumed": consumed, "words": width,
                           "rounds": FLAGS.rounds, "block": FLAGS.block,
                           "rows_checked_equal": checked,
                           "parts": records},
                    table={"columns": ["part", "ops", "p50 ms",
                                       "per-round range ms"],
                           "rows": rows})


if __name__ == "__main__":
    app.run(main)
