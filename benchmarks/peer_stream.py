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

Run pinned to one core (`taskset -c N`), one thread for every side:

    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
    taskset -c 1 .venv/bin/python benchmarks/peer_stream.py --glove=$GLOVE \\
        --mldp_python=.venv-mldp/bin/python \\
        --pantera_python=.venv-pantera/bin/python \\
        --pantera_np1_python=.venv-pantera-np1/bin/python \\
        --eta=20 --epsilon=3 --json_out=runs/peers/stream.json

(`make mldp-venv pantera-venv pantera-np1-venv` first; pyPANTERA's CusText
fails with numpy >= 2, so its rows come from the numpy 1.26 venv.)
`--search_index=pq` (or hnsw) gives our dchi and vickrey_dchi an
approximate index, as mldp-text's IVF search is; `--profile` adds where
our calls spend their CPU time (cProfile).
Prints Markdown (machine, date, versions first).
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
from benchmarks import peer_mechanisms as pm  # noqa: E402

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
                  "clock", "search_index", "profile")},
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
    machine.write_json(FLAGS.json_out, result)
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


def _mechanism(name, table, words, index, warm, window, peers):
    entry, settings = pm._ours(name, table, words)
    start = time.perf_counter()
    privatizer = _offline(entry, settings, name)
    row = {"mechanism": name, "build_s": time.perf_counter() - start,
           "search_index": getattr(privatizer, "index_kind", None),
           "ours": {}, "peers": []}
    for size in FLAGS.call_sizes:
        row["ours"][size] = ours(privatizer, warm, window, size, index)
        print(json.dumps({"mechanism": name, "size": size, **{
            k: v for k, v in row["ours"][size].items() if k != "calls"}},
            default=str), flush=True)
    for library, cls in pm.PEERS.get(name, {}).items():
        key = library
        if library == "pyPANTERA" and cls == "CusText" and \
                "pyPANTERA-np1" in peers:
            key = "pyPANTERA-np1"
        if key not in peers:
            continue
        peer = peers[key]
        params = pm._peer_params(
            name, library, pm._tg_calibration(table)
            if name == "truncated_gumbel" else None)
        if library == "mldp-text" and name != "tem":
            params["use_faiss"] = True
        modes = {"word": window} if library == "mldp-text" else {
            "sentence": window}
        for mode, texts in modes.items():
            build = peer.ask(op="build", name=cls, params=dict(params))
            cached = (library, cls) in _CACHED_PEERS
            answer = peer.ask(op="stream", texts=texts,
                              warm=warm if cached else [],
                              seconds=FLAGS.stream_seconds)
            record = {"peer": f"{key} {cls}", "mode": mode,
                      "warmed": cached, "build_s": build.get("build_s")}
            if "error" in answer:
                record["error"] = answer["error"]
            else:
                spent = answer["cpu_seconds"] if FLAGS.clock == "process" \
                    else answer["seconds"]
                record.update(tokens=answer["tokens"],
                              seconds=answer["seconds"],
                              cpu_seconds=answer["cpu_seconds"],
                              words_per_s=answer["tokens"] / spent)
            row["peers"].append(record)
            print(json.dumps({"mechanism": name, **record}), flush=True)
    fastest = max((p for p in row["peers"] if "words_per_s" in p),
                  key=lambda p: p["words_per_s"], default=None)
    if fastest is not None:
        row["fastest_peer"] = fastest
        for size, mine in row["ours"].items():
            mine["on_peer_tokens"] = rate_over(mine["calls"],
                                               fastest["tokens"])
            mine["ratio"] = mine["words_per_s"] / fastest["words_per_s"]
            mine["ratio_on_peer_tokens"] = (mine["on_peer_tokens"]
                                            / fastest["words_per_s"])
    return row


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
             "| mechanism | sentences per call | ours words/s | ours on the "
             "peer's tokens | fastest peer (mode) | peer words/s | ours / "
             "peer |", "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        fastest = row.get("fastest_peer")
        for size, mine in row["ours"].items():
            if fastest is None:
                lines.append(f"| {row['mechanism']} | {size} | "
                             f"{mine['words_per_s']:,.0f} | - | - | - | - |")
                continue
            ratio = min(mine["ratio"], mine["ratio_on_peer_tokens"])
            lines.append(
                f"| {row['mechanism']} | {size} | "
                f"{mine['words_per_s']:,.0f} | "
                f"{mine['on_peer_tokens']:,.0f} | {fastest['peer']} "
                f"({fastest['mode']}) | {fastest['words_per_s']:,.1f} | "
                f"{ratio:,.0f}x |")
    lines += ["", "| mechanism | peer | mode | warmed | tokens | words/s |",
              "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        for p in row["peers"]:
            lines.append(
                f"| {row['mechanism']} | {p['peer']} | {p['mode']} | "
                f"{'yes' if p['warmed'] else 'no cache'} | "
                f"{p.get('tokens', '-')} | "
                + (f"{p['words_per_s']:,.1f}" if "words_per_s" in p
                   else f"failed: `{p['error']}`") + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    app.run(main)
