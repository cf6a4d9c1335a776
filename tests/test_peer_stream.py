"""benchmarks/peer_stream.py: ours and the peers in interleaved rounds, on
a tiny table with stand-in peers of known rates: the order alternates, the
ratios' median and range are those of the rounds, and the verdict says
"within noise" where the rounds straddle the target."""

import numpy as np
import pytest
from absl import flags
from absl.testing import flagsaver

from benchmarks import peer_stream

FLAGS = flags.FLAGS


class StandIn:
    """A peer worker's `ask`: builds, then streams at the rates given
    (words/s of CPU time, one per call), recording the order of events."""

    def __init__(self, rates, events):
        self.rates, self.events = list(rates), events

    def ask(self, op, **command):
        self.events.append(op)
        if op == "build":
            return {"build_s": 0.0}
        rate = self.rates.pop(0)
        return {"tokens": 100, "seconds": 100 / rate,
                "cpu_seconds": 100 / rate}


@pytest.fixture()
def parsed_flags():
    was_parsed = FLAGS.is_parsed()
    if not was_parsed:
        FLAGS(["peer_stream.py", "--glove=unused"])
    yield
    if not was_parsed:
        FLAGS.unparse_flags()


def test_rounds_alternate_and_give_median_range_and_verdict(
        parsed_flags, monkeypatch):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    table = rng.normal(size=(40, 8)).astype(np.float32)
    index = {w: i for i, w in enumerate(words)}
    warm = [words[:5]]
    window = [words[i:i + 6] for i in range(0, 36, 6)]
    events = []
    real_ours = peer_stream.ours

    def ours(*args):
        events.append("ours")
        return real_ours(*args)

    monkeypatch.setattr(peer_stream, "ours", ours)
    # The peer is so slow that ours is far above a target of 1x in every
    # round, and a target above every round's ratio is not met.
    peers = {"mldp-text": StandIn([1e-3, 2e-3, 1e-3, 4e-3, 1e-3], events)}
    with flagsaver.flagsaver(interleaved_rounds=5, target=1.0, eta=5.0,
                             call_sizes=["1", "all"], threads=1):
        row = peer_stream._mechanism("dchi", table, words, index, warm,
                                     window, peers)
    # Built once; ours (two call sizes) first in rounds 0, 2, 4.
    assert events[0] == "build"
    assert events[1:] == (["ours", "ours", "stream"] + ["stream", "ours",
                                                        "ours"]) * 2 + [
        "ours", "ours", "stream"]
    assert len(row["rounds"]) == 5
    verdict = row["verdict"]["all"]
    ratios = [min(r["ours"]["all"]["words_per_s"],
                  r["ours"]["all"]["on_peer_tokens"])
              / r["fastest_peer"]["words_per_s"] for r in row["rounds"]]
    assert verdict["ratios"] == pytest.approx(ratios)
    assert verdict["median"] == pytest.approx(float(np.median(ratios)))
    assert (verdict["low"], verdict["high"]) == (min(ratios), max(ratios))
    assert verdict["verdict"] == "met"
    assert "calls" not in row["rounds"][0]["ours"]["1"]
    text = peer_stream.markdown({
        "machine": "m", "date": "d", "load_average_start": (1.0, 1, 1),
        "load_average_end": (1.0, 1, 1), "versions": {},
        "flags": {"target": 1.0},
        "stream": {"tokens_warm": 5, "sentences_warm": 1,
                   "tokens_window": 36, "sentences_window": 6,
                   "distinct_window": 36}, "rows": [row]})
    assert "| met |" in text
    assert f"({verdict['low']:,.1f}-{verdict['high']:,.1f}, 5)" in text

