#!/usr/bin/env python
"""Every mechanism's phone model against the app-side generators: the
generator audit of `tfdptext-audit --random_words` (without an export),
run in-process so that every verdict is kept, and its docs' summary table
(`every-mechanism-s-phone-model-the` in benchmarks/results/, one row per
phone model) written from them.

    .venv/bin/python benchmarks/generator_audit.py --word_buffers=20 \\
        --word_releases=300

Per phone model (`tfdptext.audit.word_generators.mechanism_phones`): the
generators a model must refuse (REFUSE), how many it refused in every
buffer; the partly bad ones that are exact when released (EXACT): how
many kinds were released by the good buffers' channel (some buffer
released, its channel test not failed), refused in every buffer, or
released by another channel (the two-sample test below its level); the
good and the undetectable ones (RELEASE, UNSAFE): how many were released;
and the generators whose verdict is not as expected, undetectable ones
left out (`--allow_undetectable`'s rule: no check in a model can see
them, and the row of each says UNSAFE).
"""

import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

import machine

FLAGS = flags.FLAGS
flags.DEFINE_integer("word_buffers", 20, "Buffers per generator for the "
                     "refusals.", lower_bound=1)
flags.DEFINE_integer("word_releases", 300, "Releases per released "
                     "generator (and of os.urandom) for the channel test.",
                     lower_bound=0)
flags.DEFINE_list("word_models", ["all"], "Phone models "
                  "(word_generators.mechanism_phones), or 'all'.")
flags.DEFINE_string("name", "every-mechanism-s-phone-model-the", "The "
                    "result's name (its docs region).")
COLUMNS = ["phone model (words, read)", "must be refused: refused",
           "partly bad, exact if released: released by the same channel / "
           "refused / other channel", "good and undetectable: released",
           "not as expected"]


def summary_row(title, verdicts):
    """The docs' row of one phone model from its `Verdict`s."""
    from tfdptext.audit import word_generators as wg

    def of(expected):
        return [v for v in verdicts if v.expected in expected]

    refuse = of((wg.REFUSE,))
    exact = of((wg.EXACT,))
    released = of((wg.RELEASE, wg.UNSAFE))
    all_refused = [v for v in exact if v.refused == v.buffers]
    other = [v for v in exact if v.refused < v.buffers and v.wrong_channel]
    same = len(exact) - len(all_refused) - len(other)
    unexpected = [v.generator for v in verdicts
                  if not v.as_expected and not v.unsafe]
    return [title,
            f"{sum(v.refused == v.buffers for v in refuse)} of "
            f"{len(refuse)} kinds",
            f"{same} / {len(all_refused)} / {len(other)} of "
            f"{len(exact)} kinds",
            f"{sum(v.refused < v.buffers for v in released)} of "
            f"{len(released)} kinds",
            ", ".join(unexpected) or "none"]


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    from tfdptext.audit import word_generators as wg

    models = None if "all" in FLAGS.word_models else FLAGS.word_models
    rows, verdicts, seconds = [], {}, {}
    print(f"Machine: {machine.cpu_name()}; {time.strftime('%Y-%m-%d')}")
    for name, phone in wg.mechanism_phones(models).items():
        start = time.time()
        found = wg.check_phone(phone, buffers=FLAGS.word_buffers,
                               releases=FLAGS.word_releases)
        seconds[name] = round(time.time() - start, 1)
        title = (f"{name} ({phone.width:,} words, {phone.consumed:,} "
                 f"read)")
        rows.append(summary_row(title, found))
        verdicts[name] = [dict(v.__dict__, as_expected=v.as_expected,
                               unsafe=v.unsafe,
                               wrong_channel=v.wrong_channel)
                          for v in found]
        print(f"{name}: {seconds[name]} s; " + " | ".join(rows[-1][1:]),
              flush=True)
    machine.write_json(None, {
        "word_buffers": FLAGS.word_buffers,
        "word_releases": FLAGS.word_releases, "seconds": seconds,
        "verdicts": verdicts}, name=FLAGS.name,
        table={"columns": COLUMNS, "rows": rows})
    print("\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows))


if __name__ == "__main__":
    app.run(main)
