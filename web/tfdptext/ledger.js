// A per-user privacy ledger: how many releases this browser sent, per day,
// and what they add up to. Each release of a text is a fresh private
// release: m releases (of one text or of m texts about the same person)
// compose to m x epsilon under basic composition, whatever the texts.

const PREFIX = 'tfdptext.ledger.';

/** The UTC day of a time, 'YYYY-MM-DD': the ledger's period. */
export function period(time = new Date()) {
  return time.toISOString().slice(0, 10);
}

/**
 * The ledger of one model in `storage` (localStorage in the page).
 *
 * @param {Storage} storage
 * @param {string} model the TF Serving model name and version.
 * @param {{value: number, unit: string, parameter: string}} guarantee the
 *     manifest's guarantee of one release.
 * @param {number|null} budget the epsilon a user may spend per day (null:
 *     none set); releases are refused once it would be exceeded.
 */
export class PrivacyLedger {
  constructor(storage, model, guarantee, budget = null) {
    this.storage = storage;
    this.key = PREFIX + model;
    this.guarantee = guarantee;
    this.budget = budget;
  }

  /** {period: releases} as stored. */
  read() {
    try {
      return JSON.parse(this.storage.getItem(this.key) || '{}');
    } catch (err) {
      return {};
    }
  }

  /** Releases sent in `day`. */
  releases(day = period()) {
    return this.read()[day] || 0;
  }

  /** Whether the guarantee composes to one epsilon per text (pure LDP per
   *  text): then the ledger can add epsilons. */
  get additive() {
    return this.guarantee.parameter === 'epsilon' && this.guarantee.unit === 'per_text';
  }

  /** Epsilon spent in `day` (releases x epsilon per release). */
  spent(day = period()) {
    return this.releases(day) * this.guarantee.value;
  }

  /** Whether one more release stays within the daily budget. */
  allows(day = period()) {
    if (this.budget === null || !this.additive) return true;
    return this.spent(day) + this.guarantee.value <= this.budget + 1e-9;
  }

  /** Records one release sent now. */
  record(day = period()) {
    const entries = this.read();
    entries[day] = (entries[day] || 0) + 1;
    this.storage.setItem(this.key, JSON.stringify(entries));
  }

  /** The ledger in words, for the page. */
  describe(day = period()) {
    const n = this.releases(day);
    const total = Object.values(this.read()).reduce((a, b) => a + b, 0);
    const eps = this.guarantee.value;
    if (!this.additive) {
      return `${day} (UTC): ${n} release(s) sent (${total} in all). Each ` +
        `release is ${this.guarantee.parameter} ${eps.toFixed(3)} ` +
        `${this.guarantee.unit.replace(/_/g, ' ')}; releases add up.`;
    }
    let text = `${day} (UTC): ${n} release(s) x epsilon ${eps.toFixed(2)} = ` +
      `epsilon ${(n * eps).toFixed(2)} for what was sent today ` +
      `(${total} release(s) in all: epsilon ${(total * eps).toFixed(2)}).`;
    if (this.budget !== null) {
      const left = Math.floor((this.budget - n * eps) / eps + 1e-9);
      text += ` Daily budget epsilon ${this.budget}: ${Math.max(0, left)} ` +
        'more release(s) today.';
    }
    return text;
  }
}
