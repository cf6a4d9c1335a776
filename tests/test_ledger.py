"""The privacy budget and the device's ledger (tfdptext.privacy.budget,
tfdptext.privacy.ledger) and the text checks
(tfdptext.privacy.text_checks):
pure Python, no model. The same rules in the browser and through an
export are tested in tests/test_web.py."""

import datetime
import json
import multiprocessing
import os
import threading
import time

import pytest

from tfdptext.privacy import text_checks
from tfdptext.errors import ArgumentError
from tfdptext.privacy import budget as budget_lib
from tfdptext.privacy import ledger as ledger_lib
from tfdptext.privacy.budget import Budget

EPS4 = {"parameter": "epsilon", "value": 4.0, "unit": "per_text"}
NOON = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.timezone.utc)


class Clock:
    def __init__(self, now=NOON):
        self.now = now

    def __call__(self):
        return self.now


def _ledger(path, guarantee=EPS4, model="m/1", clock=None, **bounds):
    return ledger_lib.PrivacyLedger(
        str(path), Budget.for_guarantee(guarantee, **bounds), model,
        clock=clock or Clock())


def _send(ledger, text, release=None):
    """What a client does: reserve, release (or resend), commit."""
    with ledger.reserve(text) as reservation:
        if reservation.stored is not None:
            return reservation.stored, True
        reservation.commit(release or {"code": text[:1]})
        return release or {"code": text[:1]}, False


def test_default_budgets_and_their_checks():
    b = Budget.for_guarantee(EPS4)
    assert (b.per_day, b.total, b.scope) == (10.0, 100.0, "epsilon/per_text")
    assert (b.releases_per_day, b.releases_total) == (2, 25)
    # Metric DP: 10 and 100 releases' worth of eta.
    metric = Budget.for_guarantee({"parameter": "eta", "value": 2.5,
                                   "unit": "per_token",
                                   "metric": "euclidean"})
    assert (metric.per_day, metric.total) == (25.0, 250.0)
    assert metric.scope == "eta/per_token/euclidean"
    assert Budget.for_guarantee(EPS4, per_day=4, total=8).releases_total == 2
    # A release dearer than the default day: one release a day.
    dear = Budget.for_guarantee(dict(EPS4, value=31.3))
    assert (dear.per_day, dear.total, dear.releases_per_day) == (
        31.3, 100.0, 1)
    assert Budget.for_guarantee(EPS4, total=6).per_day == 6.0
    for bounds, message in (
            ({"per_day": 3}, r"`budget_per_day` \(3\) is below the cost of "
                             r"one release \(epsilon 4"),
            ({"per_day": 20, "total": 10}, r"must not exceed `budget_total`"),
            ({"per_day": -1}, r"`budget_per_day` must be finite and > 0"),
            ({"per_day": float("nan")}, "NaN")):
        with pytest.raises(ArgumentError, match=message):
            Budget.for_guarantee(EPS4, **bounds)
    with pytest.raises(ArgumentError, match="`no_budget` excludes"):
        Budget.for_guarantee(EPS4, per_day=10, no_budget=True)
    chosen = Budget.for_guarantee(EPS4, no_budget=True)
    assert not chosen.limited and chosen.fits(1e9, 1e9)
    assert chosen.describe() == budget_lib.CHOSEN_NONE + "."
    none = Budget.for_guarantee({"parameter": "none", "value": None,
                                 "unit": "none"})
    assert none.none_reason == budget_lib.NOT_PRIVATE
    assert Budget.from_dict(json.loads(json.dumps(b.to_dict()))) == b
    # An export made before budgets gets the default of its guarantee.
    assert Budget.of_manifest({"guarantee": EPS4}) == b


def test_reserve_charge_refund_repeat_and_renewal(tmp_path):
    clock = Clock()
    ledger = _ledger(tmp_path / "ledger.json", clock=clock)
    assert _send(ledger, "first text") == ({"code": "f"}, False)
    assert ledger.spent() == (4.0, 4.0)
    # The same text the same day: its stored release again, for free.
    assert _send(ledger, "first text") == ({"code": "f"}, True)
    assert ledger.spent() == (4.0, 4.0)
    # A release that fails before anything left returns its reservation.
    with pytest.raises(RuntimeError):
        with ledger.reserve("second text"):
            raise RuntimeError("the phone model refused its words")
    assert ledger.spent() == (4.0, 4.0)
    _send(ledger, "second text")
    with pytest.raises(ledger_lib.BudgetExhausted) as refused:
        ledger.reserve("third text")
    assert str(refused.value) == (
        "Refused on this device: one release costs epsilon 4 (per_text) and "
        "epsilon 2 of today's budget 10 is left (UTC day 2026-11-27; "
        "epsilon 92 of the total 100 is left). It renews at "
        "2026-11-28T00:00:00Z. Nothing was privatized, sent or charged.")
    assert ledger.spent() == (8.0, 8.0)
    # The next UTC day: the daily budget renews, the total does not, and
    # the stored releases are gone (a repeat is a new release).
    clock.now = datetime.datetime(2026, 11, 28, 0, 0, 1,
                                  tzinfo=datetime.timezone.utc)
    assert _send(ledger, "first text")[1] is False
    assert ledger.spent() == (4.0, 12.0)
    stored = json.loads((tmp_path / "ledger.json").read_text())
    assert len(stored["releases"]) == 1 and not stored["reserved"]


def test_the_total_never_renews_and_versions_share_the_spending(tmp_path):
    path = tmp_path / "ledger.json"
    clock = Clock()
    v1 = _ledger(path, clock=clock, per_day=4, total=8)
    _send(v1, "a text")
    # A new model version: same ledger and privacy unit, so what was spent
    # carries over; its releases are its own (a repeat there is charged).
    v2 = _ledger(path, model="m/2", clock=clock, per_day=8, total=8)
    assert v2.spent() == (4.0, 4.0)
    assert _send(v2, "a text")[1] is False
    with pytest.raises(ledger_lib.BudgetExhausted,
                       match=r"epsilon 0 of the total budget 8 is left\. "
                             r"The total budget never renews\."):
        v2.reserve("another")
    clock.now += datetime.timedelta(days=30)
    with pytest.raises(ledger_lib.BudgetExhausted, match="never renews"):
        v1.reserve("another")
    # Another privacy unit is another account.
    eta = _ledger(path, {"parameter": "eta", "value": 1.0,
                         "unit": "per_token", "metric": "euclidean"},
                  clock=clock)
    assert eta.spent() == (0.0, 0.0)


def test_the_ledger_stores_a_keyed_hash_not_the_text(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = _ledger(path)
    _send(ledger, "my secret diagnosis")
    raw = path.read_bytes()
    assert b"secret" not in raw and b"diagnosis" not in raw
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    # The key is random per ledger: the same text keys differently.
    other = _ledger(tmp_path / "other.json")
    _send(other, "my secret diagnosis")
    keys = [set(json.loads(p.read_text())["releases"])
            for p in (path, tmp_path / "other.json")]
    assert keys[0].isdisjoint(keys[1])
    # A corrupt ledger: nothing is released (fail closed), the file named.
    path.write_text("{not json")
    with pytest.raises(ledger_lib.LedgerError,
                       match=f"{path} cannot be read.*nothing was released"):
        ledger.reserve("x")


def _submit(path, text, barrier, results):
    """One client: reserve, 'privatize' for 0.2 s, commit."""
    ledger = _ledger(path, per_day=8, total=100)
    barrier.wait()
    try:
        with ledger.reserve(text) as reservation:
            time.sleep(0.2)  # the phone model runs
            reservation.commit({"code": 1})
        results.put(("sent", text))
    except (ledger_lib.BudgetExhausted, ledger_lib.ReleaseInProgress) as err:
        results.put((type(err).__name__, text))


class _Queue(list):
    put = list.append


def test_two_concurrent_submits_with_one_release_left_send_one(tmp_path):
    """Threads and processes, each with its own ledger object on one file:
    with one release left exactly one is charged and sent; the same text
    submitted twice at once is released once."""
    path = str(tmp_path / "ledger.json")
    _send(_ledger(path, per_day=8, total=100), "spent earlier")
    results = _Queue()
    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=_submit, args=(path, t, barrier,
                                                      results))
               for t in ("text a", "text b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r[0] for r in results) == ["BudgetExhausted", "sent"]
    assert _ledger(path, per_day=8, total=100).spent() == (8.0, 8.0)
    # Processes (fork: this test imports no TensorFlow), on a new day.
    context = multiprocessing.get_context("fork")
    # With two releases left, the same text still goes once.
    for texts, spent, expected in (
            (("p1", "p2"), 1, ["BudgetExhausted", "sent"]),
            (("same", "same"), 0, ["ReleaseInProgress", "sent"])):
        path = str(tmp_path / f"{texts[0]}.json")
        for i in range(spent):
            _send(_ledger(path, per_day=8, total=100), f"earlier {i}")
        queue = context.Queue()
        barrier = context.Barrier(2)
        workers = [context.Process(target=_submit,
                                   args=(path, t, barrier, queue))
                   for t in texts]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert sorted(queue.get(timeout=10)[0] for _ in workers) == expected
    assert _ledger(path, per_day=8, total=100).spent() == (4.0, 4.0)
    assert _send(_ledger(path, per_day=8, total=100), "same")[1] is True


def test_text_checks_refuse_nothing_and_warn_on_unknown_tokens():
    # [CLS] [SEP] only: nothing to release.
    empty = text_checks.check_ids([101, 102, 0, 0], [1, 1, 0, 0], 100)
    assert empty.empty and empty.tokens == 0 and not empty.warns
    with pytest.raises(text_checks.EmptyTextError,
                       match=r"Text\(s\) \[1\] hold no token.*nothing was "
                             r"sent or charged"):
        text_checks.refuse_empty([text_checks.TextCheck(3, 0), empty])
    # 10 of 21 unknown (the Japanese headline of the issue): 48% > 25%.
    ids = [101] + [100] * 10 + [2000] * 11 + [102]
    check = text_checks.check_ids(ids, [1] * len(ids), 100)
    assert (check.tokens, check.unknown) == (21, 10) and check.warns
    assert check.warning().startswith(
        "warning: 10 of 21 tokens (48%, above 25%) are unknown")
    # Exactly at the limit (1 of 4) does not warn; above it does.
    assert not text_checks.check_ids([101, 100, 5, 6, 7, 102],
                                      [1] * 6, 100).warns
    assert text_checks.check_ids([101, 100, 5, 6, 7, 102], [1] * 6, 100,
                                 limit=0.2).warns
    assert text_checks.limit_of({"user": {"text_checks": {
        "unknown_share_limit": 0.5}}}) == 0.5
