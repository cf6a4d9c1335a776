// The user's privacy ledger in this browser: a budget that holds. The same
// rules as tfdptext's Python reference (tfdptext/privacy/ledger.py and
// budget.py; docs/guides/export.md states them for every client):
//
// 1. Reserve before releasing: under one Web Lock (navigator.locks, shared
//    by every tab of this origin), check the budget and charge one release
//    before the text is privatized. Two concurrent submits (two tabs, a
//    double click) with one release left: one is charged, the other
//    refused. Without Web Locks the ledger refuses to release.
// 2. A release that fails before anything left the device returns its
//    reservation; once handed over to be sent it stays charged and stored.
// 3. A refusal names what is left and when it renews (the next UTC
//    midnight; the total never renews).
// 4. The same text within the period (the UTC day) resends its stored
//    release, for free. Releases are stored in this browser only, keyed by
//    HMAC-SHA256(a random key kept here, model identity + text): the text
//    itself is not stored. A text whose release is being made is refused.
// 5. Spending is keyed by this origin (localStorage) and the privacy unit
//    (parameter, unit, metric), never by the model or its version.
// 6. Clearing this site's data erases the ledger: the budget starts again
//    and the stored releases are gone.
//
// Each release is a fresh private release: m releases (of one text or of
// m texts about the same person) compose to m x epsilon, whatever the texts.

const STORE = 'tfdptext.ledger/1';
const LOCK = 'tfdptext.ledger';
const SLACK = 1e-9;
export const PERIOD = 'UTC day';
export const DEFAULT_PER_DAY = 10;
export const DEFAULT_TOTAL = 100;
export const DEFAULT_METRIC_RELEASES_PER_DAY = 10;
export const DEFAULT_METRIC_RELEASES_TOTAL = 100;
const NOT_PRIVATE = 'no budget: the export has no privacy guarantee to count';

/** The UTC day of a time, 'YYYY-MM-DD': the ledger's period. */
export function period(time = new Date()) {
  return time.toISOString().slice(0, 10);
}

/** When the period of `time` ends: the next UTC midnight, ISO. */
export function renewal(time = new Date()) {
  const next = new Date(`${period(time)}T00:00:00Z`);
  next.setUTCDate(next.getUTCDate() + 1);
  return next.toISOString().replace('.000Z', 'Z');
}

// An amount as shown: at most 4 decimals (as budget.amount in Python).
const num = (x) => String(Number(x.toFixed(4)) + 0);

/** One release would exceed the budget: the message says what is left and
 *  when it renews. Nothing was privatized, sent or charged. */
export class BudgetExhausted extends Error {
  constructor(message) {
    super(message);
    this.name = 'BudgetExhausted';
  }
}

/** The same text is being released right now (another tab or submit). */
export class ReleaseInProgress extends Error {
  constructor() {
    super('The same text is being released right now (another tab or ' +
      'submit); this one was refused and not charged. Its release will be ' +
      'resent for free once stored.');
    this.name = 'ReleaseInProgress';
  }
}

/** The ledger cannot be kept here (no Web Locks, no storage). */
export class LedgerUnavailable extends Error {
  constructor(message) {
    super(message);
    this.name = 'LedgerUnavailable';
  }
}

/** The export's budget (manifest.budget; tfdptext/privacy/budget.py). */
export class Budget {
  constructor(record) {
    for (const key of ['parameter', 'unit', 'metric', 'per_release', 'per_day',
      'total', 'none_reason']) {
      this[key] = record[key] ?? null;
    }
  }

  /** manifest.budget, or for an export made before budgets the default
   *  for its guarantee (as Budget.for_guarantee in Python). */
  static of(manifest) {
    if (manifest.budget) return new Budget(manifest.budget);
    const g = manifest.guarantee;
    const base = {parameter: g.parameter, unit: g.unit, metric: g.metric ?? null};
    if (g.value === null || g.unit === 'none') {
      return new Budget({...base, per_release: 0, per_day: null, total: null,
        none_reason: NOT_PRIVATE});
    }
    const day = g.metric ? DEFAULT_METRIC_RELEASES_PER_DAY * g.value :
      Math.max(DEFAULT_PER_DAY, g.value);
    const total = g.metric ? DEFAULT_METRIC_RELEASES_TOTAL * g.value :
      Math.max(DEFAULT_TOTAL, day);
    return new Budget({...base, per_release: g.value, per_day: day, total,
      none_reason: null});
  }

  get limited() {
    return this.none_reason === null || this.none_reason === undefined;
  }

  /** The ledger's key for this budget's spending. */
  get scope() {
    return [this.parameter, this.unit, ...(this.metric ? [this.metric] : [])].join('/');
  }

  fits(spentDay, spentTotal) {
    if (!this.limited) return true;
    return spentDay + this.per_release <= this.per_day + SLACK &&
      spentTotal + this.per_release <= this.total + SLACK;
  }

  refusal(spentDay, spentTotal, now) {
    const name = this.parameter;
    const leftDay = Math.max(0, this.per_day - spentDay);
    const leftTotal = Math.max(0, this.total - spentTotal);
    const head = `Refused on this device: one release costs ${name} ` +
      `${num(this.per_release)} (${this.unit}) and `;
    if (spentTotal + this.per_release > this.total + SLACK) {
      return head + `${name} ${num(leftTotal)} of the total budget ` +
        `${num(this.total)} is left. The total budget never renews. ` +
        'Nothing was privatized, sent or charged.';
    }
    return head + `${name} ${num(leftDay)} of today's budget ` +
      `${num(this.per_day)} is left (${PERIOD} ${period(now)}; ${name} ` +
      `${num(leftTotal)} of the total ${num(this.total)} is left). It ` +
      `renews at ${renewal(now)}. Nothing was privatized, sent or charged.`;
  }

  describe() {
    if (!this.limited) return `${this.none_reason}.`;
    const per = (amount) => (this.per_release > 0 ?
      Math.floor(amount / this.per_release + SLACK) : 'unlimited');
    return `Budget: ${this.parameter} ${num(this.per_day)} per ${PERIOD} and ` +
      `${num(this.total)} in total (${this.unit}; ${per(this.per_day)} and ` +
      `${per(this.total)} release(s) of ${this.parameter} ${num(this.per_release)}).`;
  }
}

function toHex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}

function fromHex(hex) {
  return new Uint8Array(hex.match(/../g).map((h) => parseInt(h, 16)));
}

/**
 * The ledger of this origin in `storage` (localStorage in the page).
 *
 * @param {Storage} storage
 * @param {Budget} budget the export's budget (Budget.of(manifest)).
 * @param {string} model the identity of the model whose releases are
 *     stored (name/version/SHA-256 of the phone model).
 * @param {{locks?: LockManager, clock?: () => Date}} options
 */
export class PrivacyLedger {
  constructor(storage, budget, model, {locks = globalThis.navigator?.locks,
    clock = () => new Date()} = {}) {
    this.storage = storage;
    this.budget = budget;
    this.model = model;
    this.locks = locks;
    this.clock = clock;
  }

  read() {
    const raw = this.storage.getItem(STORE);
    if (raw === null) {
      return {hashKey: toHex(crypto.getRandomValues(new Uint8Array(32))),
        scopes: {}, reserved: {}, releases: {}};
    }
    try {
      const state = JSON.parse(raw);
      for (const key of ['hashKey', 'scopes', 'reserved', 'releases']) {
        if (!(key in state)) throw new Error(`no ${key}`);
      }
      return state;
    } catch (err) {
      throw new LedgerUnavailable(`This browser's privacy ledger cannot be ` +
        `read (${err.message}); nothing was released. Clearing this site's ` +
        'data resets it.');
    }
  }

  /** Runs `fn(state)` under the origin-wide lock; writes back the state. */
  async locked(fn) {
    if (!this.locks) {
      throw new LedgerUnavailable('This browser has no Web Locks API ' +
        '(navigator.locks), so the budget cannot hold across tabs: nothing ' +
        'is released here. Use a current browser over https or localhost.');
    }
    return this.locks.request(LOCK, {mode: 'exclusive'}, async () => {
      const state = this.read();
      const result = await fn(state);
      this.storage.setItem(STORE, JSON.stringify(state));
      return result;
    });
  }

  async textKey(state, text) {
    const key = await crypto.subtle.importKey('raw', fromHex(state.hashKey),
      {name: 'HMAC', hash: 'SHA-256'}, false, ['sign']);
    return toHex(await crypto.subtle.sign('HMAC', key,
      new TextEncoder().encode(`${this.model}\n${text}`)));
  }

  spentIn(state, day) {
    const scope = state.scopes[this.budget.scope] || {days: {}, total: 0};
    return [scope.days[day] || 0, scope.total || 0];
  }

  charge(state, scopeName, day, amount) {
    const scope = state.scopes[scopeName] ??= {days: {}, total: 0};
    scope.days[day] = Math.max(0, (scope.days[day] || 0) + amount);
    scope.total = Math.max(0, scope.total + amount);
  }

  /**
   * A reservation for one release of `text`: {stored, cost, commit(release),
   * cancel()}. `stored` is the release kept for the same text today (send
   * it again; nothing charged). Throws BudgetExhausted or ReleaseInProgress
   * (nothing charged).
   */
  async reserve(text) {
    const now = this.clock();
    const day = period(now);
    return this.locked(async (state) => {
      for (const [key, entry] of Object.entries(state.releases)) {
        if (entry.day !== day) delete state.releases[key];
      }
      const key = await this.textKey(state, text);
      if (state.releases[key]) {
        return this.reservation(null, state.releases[key].release, 0);
      }
      if (Object.values(state.reserved).some((r) => r.text === key)) {
        throw new ReleaseInProgress();
      }
      const [spentDay, spentTotal] = this.spentIn(state, day);
      if (!this.budget.fits(spentDay, spentTotal)) {
        throw new BudgetExhausted(this.budget.refusal(spentDay, spentTotal, now));
      }
      const id = toHex(crypto.getRandomValues(new Uint8Array(8)));
      const cost = this.budget.per_release;
      this.charge(state, this.budget.scope, day, cost);
      state.reserved[id] = {scope: this.budget.scope, day, cost, text: key};
      return this.reservation(id, null, cost);
    });
  }

  reservation(id, stored, cost) {
    let done = stored !== null;
    const finish = async (release) => {
      if (done) return;
      done = true;
      await this.locked((state) => {
        const entry = state.reserved[id];
        if (!entry) return;
        delete state.reserved[id];
        if (release === null) {  // nothing left the device: refund
          this.charge(state, entry.scope, entry.day, -entry.cost);
        } else {
          state.releases[entry.text] = {day: entry.day, model: this.model, release};
        }
      });
    };
    return {stored, cost, commit: (release) => finish(release), cancel: () => finish(null)};
  }

  /** [spent today, spent in total] in this budget's scope (no lock: a read). */
  spent() {
    return this.spentIn(this.read(), period(this.clock()));
  }

  /** The ledger in words, for the page. */
  describe() {
    const [day, total] = this.spent();
    const name = this.budget.parameter;
    let text = `${period(this.clock())} (UTC): ${name} ${num(day)} spent today, ` +
      `${num(total)} in total (${this.budget.unit}; each release costs ` +
      `${name} ${num(this.budget.per_release)}). ${this.budget.describe()}`;
    if (this.budget.limited) {
      text += ` Left: ${name} ${num(Math.max(0, this.budget.per_day - day))} ` +
        `today, ${num(Math.max(0, this.budget.total - total))} in total.`;
    }
    return text;
  }
}
