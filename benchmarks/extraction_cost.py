#!/usr/bin/env python
"""What the random words' mixing and checks cost on the phone after
issue 38 (rotated blocks; checks of every word), against those before it.

For each mechanism and length: the phone model as tfdptext-export writes
it (MiniLM-L6 weights as loaded, int8, batch 1, one thread, LiteRT's
interpreter), the mixing and the checks alone at its layout (today's
`tfdptext.models.word_checks`, converted alone), and the same of
--before_commit (the modules loaded from git). Round-robin: --rounds
rounds of --block invokes per setting, p50. The share is a cost's p50
over the phone model's p50 (today's phone model holds today's cost).
Writes benchmarks/results/extraction_cost.json (a table for
docs/benchmarks.md).

    .venv/bin/python benchmarks/extraction_cost.py
"""

import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

import machine as host
import random_words_check as rwc  # its flags: --mechanisms, --lengths,
                                  # --rounds, --block

FLAGS = flags.FLAGS
FLAGS.set_default("mechanisms", ["code_release", "dpnr_laplace",
                                 "dchi_tokens"])
FLAGS.set_default("lengths", ["16", "128"])
FLAGS.set_default("rounds", 10)
flags.DEFINE_string("before_commit", "0ae98a1", "The commit whose "
                    "extraction and checks are the 'before' column (the "
                    "last before issue 38).")

_MODULES = (("extraction", "tfdptext/privacy/extraction.py"),
            ("word_statistics", "tfdptext/privacy/word_statistics.py"),
            ("word_checks", "tfdptext/models/word_checks.py"))


def _before_checks():
    """The word_checks module of --before_commit, with its own extraction
    and word_statistics, loaded from git as private modules."""
    renames = {
        "from tfdptext.privacy import word_statistics as ws":
            "import before_word_statistics as ws",
        "from tfdptext.privacy import extraction":
            "import before_extraction as extraction"}
    return rwc.modules_from_git(FLAGS.before_commit, _MODULES, renames,
                                "before_")["word_checks"]


def _alone(checks, consumed, width):
    """A Keras model: random words -> a scalar that needs the verdict and
    every consumed word (so nothing is pruned), as a phone model computes
    them with the module `checks`."""
    import keras
    import tensorflow as tf

    inputs = keras.Input((width,), dtype="int32", name="random_words")

    def both(words):
        used = checks.extract(words, consumed)
        ok = tf.cast(checks.words_look_random(words, consumed), tf.int32)
        return ok + tf.reduce_max(used, axis=1, keepdims=True) * 0

    return keras.Model(inputs, keras.layers.Lambda(both)(inputs))


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext import models
    from tfdptext.export import tflite
    from tfdptext.models import secure
    from tfdptext.models import word_checks

    before = _before_checks()
    lengths = sorted(int(v) for v in FLAGS.lengths)
    backbone = models.load_backbone("minilm")
    tokenizer = models.load_tokenizer(max_length=max(lengths))
    text = ("the quarterly report said revenue grew while costs fell and "
            "analysts expect the company to raise its forecast again ") * 8
    ids = tokenizer([text])["token_ids"].numpy()
    rows, records = [], []
    for name in FLAGS.mechanisms:
        began = time.time()
        settings, layouts = {}, {}
        for length, phone, runner in rwc.phone_runners(name, backbone,
                                                       tokenizer, lengths):
            consumed = secure.phone_consumed_words(phone)
            width = int(phone.input[secure.RANDOM_WORDS].shape[-1])
            layouts[length] = (width, consumed)
            settings[("phone", length)] = rwc._Setting("phone", runner, {
                "token_ids": ids[:, :length],
                "padding_mask": np.ones((1, length), np.int32),
                "random_words": secure.os_random_words((1, width))})
            for kind, module in (("after", word_checks), ("before", before)):
                check = Interpreter(model_content=tflite.convert(
                    _alone(module, consumed, width), batch_size=1),
                    num_threads=1).get_signature_runner()
                settings[(kind, length)] = rwc._Setting(kind, check, {
                    "random_words": secure.os_random_words((1, width))})
        rwc._round_robin(settings.values())
        for length in lengths:
            width, consumed = layouts[length]
            phone = settings[("phone", length)].p50()
            after = settings[("after", length)].p50()
            prior = settings[("before", length)].p50()
            records.append({"mechanism": name, "length": length,
                            "words": width, "consumed": consumed,
                            "phone_p50_ms": phone, "after_p50_ms": after,
                            "before_p50_ms": prior,
                            "after_share": after / phone,
                            "before_share": prior / phone})
            rows.append([name, str(length), f"{width:,} ({consumed:,})",
                         f"{phone:.3f}", f"{after:.3f}",
                         f"{100 * after / phone:.1f}%", f"{prior:.3f}",
                         f"{100 * prior / phone:.1f}%"])
            print(" | ".join(rows[-1]), flush=True)
        logging.warning("%s: %.0f s", name, time.time() - began)
    columns = ["mechanism", "length", "words (read)", "phone model p50 ms",
               "mixing + checks p50 ms", "share",
               f"before ({FLAGS.before_commit}) p50 ms", "before share"]
    host.write_json(None, {"rows": records, "rounds": FLAGS.rounds,
                           "block": FLAGS.block,
                           "before_commit": FLAGS.before_commit},
                    name="extraction_cost",
                    table={"columns": columns, "rows": rows})


if __name__ == "__main__":
    app.run(main)
