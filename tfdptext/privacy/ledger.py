"""The user's privacy ledger on the device: a budget that holds.

The Python reference of the rules every client follows (the web page's
`web/tfdptext/ledger.js` and the guide's Android / iOS snippets state the
same ones; docs/guides/export.md):

1. Reserve before releasing. Under one lock (here an exclusive `fcntl`
   lock on `<ledger>.lock`, so concurrent threads and processes queue),
   the ledger checks the budget and charges one release before the text is
   privatized. Two concurrent submits with one release left: one is
   charged, the other refused.
2. A release that fails before anything left the device (the text was
   refused, the phone model refused its words) returns its reservation.
   Once the release was handed over to be sent it stays charged (the
   server may have it) and is stored, so a retry resends it for nothing.
3. A refusal names what is left and when it renews (`Budget.refusal`).
4. The same text within the period (the UTC day) resends its stored
   release and costs nothing (post-processing). Releases are stored on
   the device only, keyed by HMAC-SHA256(key, model identity, text) with a
   random key kept in the ledger: the text itself is never stored. A text
   whose release is being made is refused until it is stored
   (`ReleaseInProgress`).
5. Spending is keyed by the ledger file and the privacy unit (`Budget.
   scope`), never by the model or its version: a new version keeps what
   was spent. Stored releases are per model (a release of one model means
   nothing to another).
6. Deleting the ledger file resets the budget and forgets the stored
   releases (as clearing a browser's site data does for the page).

Example:
>>> ledger = PrivacyLedger("/tmp/ledger.json", budget, model="quickstart/1")
>>> with ledger.reserve("The staff was friendly.") as reservation:
...     release = reservation.stored or privatize(text)
...     reservation.commit(release)

Pure Python: no TensorFlow.
"""

import contextlib
import datetime
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile

from tfdptext.errors import TfdptextError
from tfdptext.privacy import budget as budget_lib

FORMAT = "tfdptext-ledger/1"
ENV = "TFDPTEXT_LEDGER"


def default_path():
    """$TFDPTEXT_LEDGER, else $XDG_DATA_HOME (~/.local/share)/tfdptext/
    ledger.json."""
    if os.environ.get(ENV):
        return os.environ[ENV]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "tfdptext", "ledger.json")


class LedgerError(TfdptextError):
    """The ledger file cannot be read or written (the message names it);
    nothing is released without it."""


class BudgetExhausted(TfdptextError):
    """One more release would exceed the budget: the message says what is
    left and when it renews. Nothing was privatized, sent or charged."""


class ReleaseInProgress(TfdptextError):
    """The same text is being released right now (another submit, thread
    or process); this one is refused, uncharged, and the first one's
    release is stored for the next repeat."""


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


class Reservation:
    """One charged release, to commit or cancel (`PrivacyLedger.reserve`).

    Attributes:
        stored: the release stored for the same text today (a dict), when
            this is a repeat: send it again; nothing was charged.
        cost: what was charged (0 for a repeat).
    """

    def __init__(self, ledger, ident, text_key, stored, cost):
        self.ledger = ledger
        self.ident = ident
        self.text_key = text_key
        self.stored = stored
        self.cost = cost
        self.done = stored is not None

    def commit(self, release):
        """The release is being sent: keep the charge and store it (a
        JSON-able dict) for the period's repeats."""
        if self.done:
            return
        self.ledger._finish(self, release)
        self.done = True

    def cancel(self):
        """Nothing left the device: return the charge."""
        if self.done:
            return
        self.ledger._finish(self, None)
        self.done = True

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        self.cancel()  # no-op after commit
        return False


class PrivacyLedger:
    """The ledger file of one app on one device (module docstring).

    Args:
        path: the ledger file (default_path()); created 0600.
        budget: the export's `tfdptext.privacy.budget.Budget`.
        model: the identity of the model whose releases are stored (e.g.
            "name/version/sha256 of the phone model").
        clock: returns the current aware datetime (tests).
    """

    def __init__(self, path, budget, model, clock=_utcnow):
        self.path = os.path.abspath(path)
        self.budget = budget
        self.model = str(model)
        self.clock = clock

    @contextlib.contextmanager
    def _locked(self):
        """The ledger's content under an exclusive lock; what the block
        leaves in it is written back atomically."""
        folder = os.path.dirname(self.path)
        try:
            os.makedirs(folder, exist_ok=True)
            lock = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT,
                           0o600)
        except OSError as err:
            raise LedgerError(f"Cannot open the privacy ledger's lock "
                              f"{self.path}.lock ({err.strerror}); "
                              "nothing was released.") from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._read()
            before = json.dumps(state, sort_keys=True)
            yield state
            if json.dumps(state, sort_keys=True) != before:
                self._write(state)
        finally:
            os.close(lock)  # releases the flock

    def _read(self):
        if not os.path.exists(self.path):
            return {"format": FORMAT, "hash_key": secrets.token_hex(32),
                    "scopes": {}, "reserved": {}, "releases": {}}
        try:
            with open(self.path, encoding="utf-8") as f:
                state = json.load(f)
            if state.get("format") != FORMAT:
                raise ValueError(f"format {state.get('format')!r}")
            for key in ("hash_key", "scopes", "reserved", "releases"):
                state[key]  # noqa: B018 (presence)
        except (OSError, ValueError, KeyError, AttributeError) as err:
            raise LedgerError(
                f"The privacy ledger {self.path} cannot be read ({err}); "
                "nothing was released. Deleting it resets the budget and "
                "forgets the stored releases.") from None
        return state

    def _write(self, state):
        folder = os.path.dirname(self.path)
        fd, tmp = tempfile.mkstemp(prefix=".ledger-", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(state, f, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except OSError as err:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise LedgerError(f"Cannot write the privacy ledger "
                              f"{self.path} ({err.strerror}).") from None

    def text_key(self, state, text):
        """HMAC-SHA256 of (model, text) under the ledger's random key: the
        stored release's key (the text itself is never stored)."""
        return hmac.new(bytes.fromhex(state["hash_key"]),
                        f"{self.model}\n{text}".encode("utf-8"),
                        hashlib.sha256).hexdigest()

    def _spent(self, state, day):
        scope = state["scopes"].get(self.budget.scope, {})
        return scope.get("days", {}).get(day, 0.0), scope.get("total", 0.0)

    def _charge(self, state, day, amount):
        scope = state["scopes"].setdefault(self.budget.scope,
                                           {"days": {}, "total": 0.0})
        scope["days"][day] = max(0.0, scope["days"].get(day, 0.0) + amount)
        scope["total"] = max(0.0, scope["total"] + amount)

    def reserve(self, text):
        """A Reservation for one release of `text`: its stored release when
        the same text was released today (free), else one release charged.
        BudgetExhausted when it does not fit; ReleaseInProgress when the
        same text is being released."""
        now = self.clock()
        day = budget_lib.period(now)
        with self._locked() as state:
            releases = state["releases"]
            for key in [k for k, r in releases.items() if r["day"] != day]:
                del releases[key]  # repeats are free within the period
            key = self.text_key(state, text)
            if key in releases:
                return Reservation(self, None, key,
                                   releases[key]["release"], 0.0)
            if any(r["text"] == key for r in state["reserved"].values()):
                raise ReleaseInProgress(
                    "The same text is being released right now (another "
                    "submit); this one was refused and not charged. Its "
                    "release will be resent for free once stored.")
            spent_day, spent_total = self._spent(state, day)
            if not self.budget.fits(spent_day, spent_total):
                raise BudgetExhausted(self.budget.refusal(
                    spent_day, spent_total, now))
            cost = self.budget.per_release
            ident = secrets.token_hex(8)
            self._charge(state, day, cost)
            state["reserved"][ident] = {"scope": self.budget.scope,
                                        "day": day, "cost": cost,
                                        "text": key}
            return Reservation(self, ident, key, None, cost)

    def _finish(self, reservation, release):
        with self._locked() as state:
            entry = state["reserved"].pop(reservation.ident, None)
            if entry is None:
                return
            if release is None:  # nothing left the device: refund
                scope = state["scopes"].get(entry["scope"])
                if scope is not None:
                    scope["days"][entry["day"]] = max(
                        0.0, scope["days"].get(entry["day"], 0.0)
                        - entry["cost"])
                    scope["total"] = max(0.0, scope["total"] - entry["cost"])
                return
            state["releases"][reservation.text_key] = {
                "day": entry["day"], "model": self.model,
                "release": release}

    def spent(self):
        """(spent today, spent in total) in this budget's scope."""
        with self._locked() as state:
            return self._spent(state, budget_lib.period(self.clock()))

    def describe(self):
        """The ledger in words: what was spent, the budget, what is left."""
        spent_day, spent_total = self.spent()
        name, show = self.budget.parameter, budget_lib.amount
        text = (f"Ledger {self.path}: {name} {show(spent_day)} spent today "
                f"({budget_lib.PERIOD}), {show(spent_total)} in total "
                f"({self.budget.unit}). ")
        if not self.budget.limited:
            return text + self.budget.describe()
        return text + (
            f"{self.budget.describe()} Left: {name} "
            f"{show(max(0.0, self.budget.per_day - spent_day))} today, "
            f"{show(max(0.0, self.budget.total - spent_total))} in total.")
