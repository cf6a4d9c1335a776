"""benchmarks/speed_verdict.py: interleaved rounds, median and range, and a
verdict only when the whole range is on one side of the target."""

import pytest

from benchmarks import speed_verdict as sv


def test_rounds_alternate_which_side_goes_first():
    calls = []

    def ours():
        calls.append("ours")
        return 200.0

    def peer():
        calls.append("peer")
        return 10.0

    rounds = sv.interleaved_rounds(ours, peer, rounds=5)
    assert rounds == [(200.0, 10.0)] * 5
    assert calls == ["ours", "peer", "peer", "ours", "ours", "peer",
                     "peer", "ours", "ours", "peer"]


@pytest.mark.parametrize("rounds", [0, 4, 5.0, None])
def test_fewer_than_five_rounds_are_refused(rounds):
    with pytest.raises(ValueError, match="rounds must be an integer >= 5"):
        sv.interleaved_rounds(lambda: 1.0, lambda: 1.0, rounds=rounds)


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), None])
def test_a_rate_that_is_not_positive_is_refused(rate):
    with pytest.raises(ValueError, match="peer must return a positive"):
        sv.interleaved_rounds(lambda: 1.0, lambda: rate)


def test_summary_gives_median_range_and_verdict():
    rounds = [(100.0, 5.0), (120.0, 5.0), (90.0, 5.0), (110.0, 5.0),
              (105.0, 5.0)]
    result = sv.summary(rounds, target=20)
    assert result["ratios"] == [20.0, 24.0, 18.0, 22.0, 21.0]
    assert result["median"] == 21.0
    assert (result["low"], result["high"]) == (18.0, 24.0)
    # The median is above 20, but one round is below: within noise.
    assert result["verdict"] == sv.NOISE
    assert sv.summary(rounds, target=17.9)["verdict"] == sv.MET
    assert sv.summary(rounds, target=24.1)["verdict"] == sv.NOT_MET
    assert "21.00x (range 18.00-24.00 over 5" in sv.describe(result)


def test_fewer_rounds_than_five_give_no_verdict():
    assert sv.summary([(100.0, 1.0)] * 4, target=2)["verdict"] == sv.NOISE


def test_verdict_where_lower_is_better():
    # An overhead of 2.1% to 2.9% against a target of at most 3%.
    assert sv.verdict(2.1, 2.9, 3.0, higher_is_better=False) == sv.MET
    assert sv.verdict(2.1, 3.4, 3.0, higher_is_better=False) == sv.NOISE
    assert sv.verdict(3.1, 3.4, 3.0, higher_is_better=False) == sv.NOT_MET
    with pytest.raises(ValueError, match="low must be <= high"):
        sv.verdict(2.0, 1.0, 3.0)


@pytest.mark.parametrize("ratio, target, expected", [
    (19, 20, sv.NOISE),     # santext at one sentence per call
    (5.77, 5, sv.NOISE),    # BRR over exact Madlib per CPU-second
    (0.81, 0.8, sv.NOISE),  # an exact index beside bare FAISS
    (9, 20, sv.NOT_MET),    # dchi at one sentence per call
    (48, 20, sv.MET),
    (40, 20, sv.MET),
    (39.9, 20, sv.NOISE),
])
def test_a_single_runs_verdict_allows_for_the_run_to_run_spread(
        ratio, target, expected):
    assert sv.single_run_verdict(ratio, target) == expected


def test_the_flags_a_speed_benchmark_defines():
    from absl import flags

    values = flags.FlagValues()
    sv.define_flags("interleaved_rounds", 20.0, "ours / the peer",
                    flag_values=values)
    values(["prog"])
    assert (values.interleaved_rounds, values.target) == (5, 20.0)
    with pytest.raises(flags.IllegalFlagValueError):
        values(["prog", "--interleaved_rounds=0"])
