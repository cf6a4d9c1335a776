#!/usr/bin/env python
"""The empirical epsilon audit (`tfdptext-audit`), run in-process so that
every result, with every test evaluated, is kept, and its docs' table
(`empirical-epsilon-audit` in benchmarks/results/) written from them: the
same rows `tfdptext-audit` prints (`tfdptext.audit.auditor.markdown_table`).

    .venv/bin/python benchmarks/epsilon_audit.py --samples=5000000 \\
        --tflite --include_broken

--mechanisms picks rows as `tfdptext-audit --mechanisms` does ('all': the
Python layers, plus the TFLite models with --tflite and the broken
variants with --include_broken). The exit status is 1 when a row is not
as expected (a correct mechanism refuted, a broken one not caught); the
result is written either way.
"""

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

import machine

FLAGS = flags.FLAGS
flags.DEFINE_list("mechanisms", ["all"], "Mechanisms to audit, or 'all'.")
flags.DEFINE_integer("samples", 200000, "Releases per neighbouring input.",
                     lower_bound=100)
flags.DEFINE_float("confidence", 0.95, "Probability that every bound "
                   "holds.")
flags.DEFINE_bool("tflite", False, "With 'all': the TFLite models too.")
flags.DEFINE_bool("include_broken", False, "With 'all': the deliberately "
                  "broken variants too (they must FAIL).")
flags.DEFINE_string("name", "empirical-epsilon-audit", "The result's name "
                    "(its docs region).")


def selected(mechanisms, names, tflite, include_broken):
    """The mechanism names `names` picks, in order, each once."""
    picked = []
    for name in names:
        if name == "all":
            picked += list(mechanisms.MECHANISMS)
            picked += list(mechanisms.TFLITE_MECHANISMS) if tflite else []
            picked += (list(mechanisms.BROKEN_MECHANISMS)
                       if include_broken else [])
        elif name in mechanisms.ALL_MECHANISMS:
            picked.append(name)
        else:
            raise app.UsageError(f"--mechanisms: unknown mechanism "
                                 f"{name!r}")
    return list(dict.fromkeys(picked))


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    from tfdptext.audit import auditor
    from tfdptext.audit import mechanisms

    print(f"Machine: {machine.cpu_name()}; {time.strftime('%Y-%m-%d')}")
    results, seconds = [], {}
    for name in selected(mechanisms, FLAGS.mechanisms, FLAGS.tflite,
                         FLAGS.include_broken):
        start = time.time()
        result = auditor.audit(mechanisms.ALL_MECHANISMS[name](),
                               FLAGS.samples, FLAGS.confidence)
        seconds[name] = round(time.time() - start, 1)
        results.append(result)
        print(f"{name}: claim {result.claim:.4g}, lower bound "
              f"{result.lower_bound:.4f}, {result.verdict.upper()} "
              f"({seconds[name]} s)", flush=True)
    text = auditor.markdown_table(results)
    print("\n" + text)
    table = machine.markdown_tables(text)[0]
    machine.write_json(None, {"samples": FLAGS.samples,
                              "confidence": FLAGS.confidence,
                              "seconds": seconds,
                              "results": [r.to_dict() for r in results]},
                       name=FLAGS.name, table=table)
    unexpected = [r.mechanism for r in results if not r.as_expected]
    if unexpected:
        print(f"Not as expected: {', '.join(unexpected)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
