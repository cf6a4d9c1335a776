#!/usr/bin/env python
"""What the random words' mixing and checks cost on the phone after
issue 38 (rotated blocks; checks of every word), against those before it.

For each mechanism and length: the phone model as tfdptext-export writes
it (MiniLM-L6 weights as loaded, int8, batch 1, one thread, LiteRT's
interpreter), the mixing and the checks alone at its layout (today's
`tfdptext.models.word_checks`, converted alone), and the same of each of
--before_commits (the modules loaded from git). Round-robin: --rounds
rounds of --block invokes per setting, p50 over every invoke. The share
is a cost's p50 over the phone model's p50 (today's phone model holds
today's cost); its range is the smallest and largest of the per-round
shares (a round's median over the phone model's median in that round).
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
flags.DEFINE_list("before_commits", ["a2c1beb", "fb78e58"], "The "
                  "commits whose extraction and checks are the 'before' "
                  "columns (a2c1beb: tile_repeats comparing every word "
                  "with the first 8; fb78e58: the checks before "
                  "tile_repeats; earlier runs: 22ebd4d, before the "
                  "STRIDED_SLICEs became SPLIT_Vs, and 0ae98a1, the last "
                  "before issue 38).")

_MODULES = (("extraction", "tfdptext/privacy/extraction.py"),
            ("word_statistics", "tfdptext/privacy/word_statistics.py"),
            ("word_checks", "tfdptext/models/word_checks.py"))


def _before_checks(commit):
    """The word_checks module of `commit`, with its own extraction and
    word_statistics, loaded from git as private modules."""
    prefix = f"before_{commit}_"
    renames = {
        "from tfdptext.privacy import word_statistics as ws":
            f"import {prefix}word_statistics as ws",
        "from tfdptext.privacy import extraction":
            f"import {prefix}extraction as extraction"}
    return rwc.modules_from_git(commit, _MODULES, renames,
                                prefix)["word_checks"]


def _share_range(setting, phone):
    """(smallest, largest) of the per-round shares: each round's median
    of `setting` over the phone model's median in the same round."""
    import numpy as np

    block = FLAGS.block
    shares = [np.median(setting.times[i:i + block])
              / np.median(phone.times[i:i + block])
              for i in range(0, len(phone.times), block)]
    return float(min(shares)), float(max(shares))


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

    kinds = {"after": word_checks}
    kinds.update({commit: _before_checks(commit)
                  for commit in FLAGS.before_commits})
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
            for kind, module in kinds.items():
                check = Interpreter(model_content=tflite.convert(
                    _alone(module, consumed, width), batch_size=1),
                    num_threads=1).get_signature_runner()
                settings[(kind, length)] = rwc._Setting(kind, check, {
                    "random_words": secure.os_random_words((1, width))})
        rwc._round_robin(settings.values())
        for length in lengths:
            width, consumed = layouts[length]
            phone_setting = settings[("phone", length)]
            phone = phone_setting.p50()
            record = {"mechanism": name, "length": length, "words": width,
                      "consumed": consumed, "phone_p50_ms": phone}
            row = [name, str(length), f"{width:,} ({consumed:,})",
                   f"{phone:.3f}"]
            for kind in kinds:
                setting = settings[(kind, length)]
                cost = setting.p50()
                low, high = _share_range(setting, phone_setting)
                key = "after" if kind == "after" else f"before_{kind}"
                record.update({f"{key}_p50_ms": cost,
                               f"{key}_share": cost / phone,
                               f"{key}_share_range": [low, high]})
                row += [f"{cost:.3f}", f"{100 * cost / phone:.1f}% "
                        f"({100 * low:.1f}-{100 * high:.1f})"]
            records.append(record)
            rows.append(row)
            print(" | ".join(rows[-1]), flush=True)
        logging.warning("%s: %.0f s", name, time.time() - began)
    columns = ["mechanism", "length", "words (read)", "phone model p50 ms",
               "mixing + checks p50 ms", "share (per-round range)"]
    for commit in FLAGS.before_commits:
        columns += [f"{commit} p50 ms", f"{commit} share (range)"]
    host.write_json(None, {"rows": records, "rounds": FLAGS.rounds,
                           "block": FLAGS.block,
                           "before_commits": FLAGS.before_commits},
                    name="extraction_cost",
                    table={"columns": columns, "rows": rows})


if __name__ == "__main__":
    app.run(main)
