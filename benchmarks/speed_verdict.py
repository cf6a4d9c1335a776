"""Speed verdicts with their spread: ours and a peer timed in interleaved
rounds, the ratio's median and range, and a verdict against a target that
says "met" or "not met" only when the whole range is on one side of it.

A speed benchmark calls `interleaved_rounds` with two functions that each
run one timed pass and return its rate (words/s, calls/s: higher is
faster); the rounds alternate which one goes first, so a change of the
machine's load during the run falls on both. `summary` gives the ratios'
median and range and the verdict:

    rounds = interleaved_rounds(ours, peer, rounds=5)
    summary(rounds, target=20)
    # {"rounds": 5, "ratios": [...], "median": 23.1, "low": 18.2,
    #  "high": 27.9, "target": 20, "verdict": "within noise"}

Results measured before this helper existed are single runs: for them
`single_run_verdict` keeps a verdict only where the ratio clears the
target by more than the run-to-run spread seen between runs of the same
peer (a factor of 2 in docs/benchmarks.md), and says "within noise"
otherwise.
"""

import statistics

MIN_ROUNDS = 5
# The largest factor by which one peer's rate moved between two runs of
# the same benchmark on the shared machine (docs/benchmarks.md, "Speed on
# real text"): what a single run's ratio may be off by.
SINGLE_RUN_SPREAD = 2.0
MET, NOT_MET, NOISE = "met", "not met", "within noise"


def interleaved_rounds(ours, peer, rounds=MIN_ROUNDS):
    """[(our rate, the peer's rate)] over `rounds` rounds, ours first in
    the even rounds and the peer first in the odd ones."""
    if not isinstance(rounds, int) or rounds < MIN_ROUNDS:
        raise ValueError(f"rounds must be an integer >= {MIN_ROUNDS}, got "
                         f"{rounds!r}")
    found = []
    for index in range(rounds):
        if index % 2 == 0:
            mine = ours()
            theirs = peer()
        else:
            theirs = peer()
            mine = ours()
        for name, rate in (("ours", mine), ("peer", theirs)):
            if not isinstance(rate, (int, float)) or not rate > 0:
                raise ValueError(f"{name} must return a positive rate, got "
                                 f"{rate!r} in round {index}")
        found.append((float(mine), float(theirs)))
    return found


def verdict(low, high, target, higher_is_better=True):
    """"met" when the whole range [low, high] is on the good side of
    `target`, "not met" when it is all on the other, else "within noise"."""
    if not low <= high:
        raise ValueError(f"low must be <= high, got {low!r} > {high!r}")
    if not higher_is_better:
        low, high, target = -high, -low, -target
    if low >= target:
        return MET
    if high < target:
        return NOT_MET
    return NOISE


def summary(rounds, target, higher_is_better=True):
    """The ratios ours / peer of `interleaved_rounds`, their median and
    range, and the verdict against `target` (fewer than MIN_ROUNDS rounds:
    "within noise", whatever the ratios)."""
    ratios = [mine / theirs for mine, theirs in rounds]
    if not ratios:
        raise ValueError("rounds must not be empty")
    low, high = min(ratios), max(ratios)
    found = verdict(low, high, target, higher_is_better)
    if len(ratios) < MIN_ROUNDS:
        found = NOISE
    return {"rounds": len(ratios), "ratios": ratios,
            "median": statistics.median(ratios), "low": low, "high": high,
            "target": target, "verdict": found}


def single_run_verdict(ratio, target, higher_is_better=True,
                       spread=SINGLE_RUN_SPREAD):
    """The verdict a single run supports: the range [ratio / spread,
    ratio * spread] against `target`."""
    if not ratio > 0 or not spread >= 1:
        raise ValueError(f"ratio must be > 0 and spread >= 1, got "
                         f"{ratio!r}, {spread!r}")
    return verdict(ratio / spread, ratio * spread, target, higher_is_better)


def define_flags(rounds_flag, target, ratio, flag_values=None):
    """A speed benchmark's two flags: `rounds_flag` (interleaved rounds,
    MIN_ROUNDS by default) and --target (`target` by default) for the
    ratio described by `ratio`."""
    from absl import flags

    if flag_values is None:
        flag_values = flags.FLAGS
    flags.DEFINE_integer(
        rounds_flag, MIN_ROUNDS, "Interleaved rounds (the order of the two "
        "sides alternates); a verdict needs at least "
        f"{MIN_ROUNDS}.", lower_bound=1, flag_values=flag_values)
    flags.DEFINE_float(
        "target", target, f"Target of {ratio}: met or not met only when "
        "every round's ratio is on one side.", lower_bound=0.0,
        flag_values=flag_values)


def describe(result):
    """One line: median, range, rounds and verdict."""
    return (f"{result['median']:.2f}x (range {result['low']:.2f}-"
            f"{result['high']:.2f} over {result['rounds']} interleaved "
            f"rounds; target {result['target']:g}x): {result['verdict']}")
