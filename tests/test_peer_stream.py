"""benchmarks/peer_stream.py and peer_mechanisms.py --tasks=speed: ours
and the peers in interleaved rounds, on a tiny table with a stand-in peer
of known rates: the order alternates, the ratios' median and range are
those of the rounds, and the verdict follows.

The benchmark defines absl flags at import, as do other benchmark modules
that tests import (pretraining_table.py: --json_out), so it runs in a
child process of its own."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import json, sys
import numpy as np
from absl import flags
from benchmarks import peer_stream

events = []


class StandIn:
    """A peer worker's `ask`: builds, then streams at the given rates
    (words per CPU-second, one per call)."""

    def __init__(self, rates):
        self.rates = list(rates)

    def ask(self, op, **command):
        events.append(op)
        if op == "build":
            return {"build_s": 0.0}
        rate = self.rates.pop(0)
        return {"tokens": 100, "seconds": 100 / rate,
                "cpu_seconds": 100 / rate}


real_ours = peer_stream.ours


def ours(*args):
    events.append("ours")
    return real_ours(*args)


peer_stream.ours = ours
flags.FLAGS(["peer_stream.py", "--glove=unused", "--interleaved_rounds=5",
             "--target=1", "--eta=5", "--call_sizes=1,all", "--threads=1"])
rng = np.random.default_rng(0)
words = [f"w{i}" for i in range(40)]
table = rng.normal(size=(40, 8)).astype(np.float32)
index = {w: i for i, w in enumerate(words)}
window = [words[i:i + 6] for i in range(0, 36, 6)]
# The peer is so slow that ours is far above 1x in every round.
peers = {"mldp-text": StandIn([1e-3, 2e-3, 1e-3, 4e-3, 1e-3])}
row = peer_stream._mechanism("dchi", table, words, index, [words[:5]],
                             window, peers)
text = peer_stream.markdown({
    "machine": "m", "date": "d", "load_average_start": (1.0, 1, 1),
    "load_average_end": (1.0, 1, 1), "versions": {},
    "flags": {"target": 1.0},
    "stream": {"tokens_warm": 5, "sentences_warm": 1, "tokens_window": 36,
               "sentences_window": 6, "distinct_window": 36},
    "rows": [row]})


# peer_mechanisms.speed: ours (one call per run) and a stand-in peer whose
# "time" answers give 2, 4, 1, 8, 3 words per CPU-second; a second peer
# that fails is reported, not timed.
from benchmarks import peer_mechanisms as pm

speed_events = []


class TimedStandIn:
    def __init__(self, rates):
        self.rates = None if rates is None else list(rates)

    def ask(self, op, **command):
        speed_events.append(op)
        if op == "build":
            return {"build_s": 0.0}
        if self.rates is None:
            return {"error": "ValueError('fails')"}
        rate = self.rates.pop(0) if len(command["words"]) == 4 else 1.0
        return {"seconds": 1.0, "cpu_seconds": len(command["words"]) / rate}


real_ours_of = pm._ours


def ours_of(name, table, words):
    entry, settings = real_ours_of(name, table, words)

    class Logged:
        def offline(self, settings):
            privatizer = entry.offline(settings)

            def call(ids):
                speed_events.append("ours")
                return privatizer(ids)
            return call
    return Logged(), settings


pm._ours = ours_of
flags.FLAGS(["peer_mechanisms.py", "--glove=unused", "--rounds=5",
             "--speed_target=2", "--eta=5", "--threads=1", "--notflite",
             "--mechanisms=dchi", "--speed_words=16", "--batch_words=16",
             "--peer_words=4"])
speed_rows = pm.speed(words, table, {
    "mldp-text": TimedStandIn([2.0, 4.0, 1.0, 8.0, 3.0]),
    "pyPANTERA": TimedStandIn(None)})
speed_text = pm.docs_tables_markdown({"flags": {"speed_target": 2.0},
                                      "speed": speed_rows})
sys.stdout.write(json.dumps({"events": events, "row": row, "text": text,
                             "speed_events": speed_events,
                             "speed_rows": speed_rows,
                             "speed_text": speed_text}))
'''


@pytest.fixture(scope="module")
def child():
    env = {**os.environ, "PYTHONPATH": ROOT}
    result = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT,
                            capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_rounds_alternate_which_side_goes_first(child):
    # Built once; ours (two call sizes) first in rounds 0, 2 and 4.
    assert child["events"] == ["build"] + (
        ["ours", "ours", "stream"] + ["stream", "ours", "ours"]) * 2 + [
        "ours", "ours", "stream"]
    assert len(child["row"]["rounds"]) == 5
    assert "calls" not in child["row"]["rounds"][0]["ours"]["1"]


def test_each_ratio_is_reported_with_its_median_range_and_verdict(child):
    rounds = child["row"]["rounds"]
    verdict = child["row"]["verdict"]["all"]
    ratios = [min(r["ours"]["all"]["words_per_s"],
                  r["ours"]["all"]["on_peer_tokens"])
              / r["fastest_peer"]["words_per_s"] for r in rounds]
    assert verdict["ratios"] == pytest.approx(ratios)
    assert verdict["median"] == pytest.approx(float(np.median(ratios)))
    assert (verdict["low"], verdict["high"]) == pytest.approx(
        (min(ratios), max(ratios)))
    assert verdict["verdict"] == "met"
    assert f"({verdict['low']:,.1f}-{verdict['high']:,.1f}, 5) | met |" \
        in child["text"]


def test_speed_rounds_alternate_and_give_the_ratio_s_range(child):
    # A warm-up of ours; each peer built and warmed (the failing one is
    # not timed again); then ours first in rounds 0, 2 and 4.
    assert child["speed_events"] == ["ours", "build", "time", "build",
                                     "time"] + (["ours", "time"]
                                                + ["time", "ours"]) * 2 + [
        "ours", "time"]
    row, = child["speed_rows"]
    peer = row["mldp-text MultivariateCalibrated"]
    assert peer["rounds"] == pytest.approx([2.0, 4.0, 1.0, 8.0, 3.0])
    assert peer["words_per_s"] == pytest.approx(3.0)
    assert "error" in row["pyPANTERA CMP"]
    verdict = row["verdict"]
    ratios = [o / p for o, p in zip(row["ours_rounds"], peer["rounds"])]
    assert verdict["ratios"] == pytest.approx(ratios)
    assert (verdict["low"], verdict["high"]) == pytest.approx(
        (min(ratios), max(ratios)))
    assert row["ours_words_per_s"] == pytest.approx(
        float(np.median(row["ours_rounds"])))
    # Ours on a 40-word table is far above 2x a peer of at most 8 words/s.
    assert verdict["verdict"] == "met"
    assert "(1.0-8.0)" in child["speed_text"]
    assert "pyPANTERA CMP: fails" in child["speed_text"]
