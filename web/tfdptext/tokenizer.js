// tfdptext's WordPiece tokenizer contract in JavaScript: the ids that
// tfdptext.data.TextTokenizer (keras_hub's WordPieceTokenizer on its
// TensorFlow path) gives, for the uncased vocabularies the exports ship.
// The steps, in order, are those of docs/guides/tokenizer.md; the
// character classes and case folding come from TensorFlow itself
// (unicode_data.js), canonical (de)composition from the platform.
// Runs in browsers and in node (no DOM, no fetch).

import {
  CASEFOLD_REMOVED, CASEFOLD_RUNS, CASEFOLD_SEVERAL, DROP, MARK, PUNCT, SPACE,
} from './unicode_data.js';

/** A text or a tokenizer configuration that the contract cannot take. */
export class TokenizerError extends Error {
  constructor(message) {
    super(message);
    this.name = 'TokenizerError';
  }
}

// Words longer than this many UTF-8 bytes (after case folding) become one
// [UNK] (tf_text.FastWordpieceTokenizer's max_bytes_per_word).
export const MAX_BYTES_PER_WORD = 100;
const SUFFIX = '##';
// CJK ideographs (keras_hub's CJK_REGEX, from Google's BERT): each is a
// word of its own.
const CJK = [
  [0x4E00, 0x9FFF], [0x3400, 0x4DBF], [0x20000, 0x2A6DF],
  [0x2A700, 0x2B73F], [0x2B740, 0x2B81F], [0x2B820, 0x2CEAF],
  [0xF900, 0xFAFF], [0x2F800, 0x2FA1F],
];

/** A lookup over sorted [first, last] ranges. */
class RangeSet {
  constructor(ranges) {
    this.first = Int32Array.from(ranges, (r) => r[0]);
    this.last = Int32Array.from(ranges, (r) => r[1]);
  }

  has(c) {
    let lo = 0;
    let hi = this.first.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (c < this.first[mid]) hi = mid - 1;
      else if (c > this.last[mid]) lo = mid + 1;
      else return true;
    }
    return false;
  }
}

const drop = new RangeSet(DROP);
const punct = new RangeSet(PUNCT);
const mark = new RangeSet(MARK);
const space = new RangeSet(SPACE);
const cjk = new RangeSet([...CJK].sort((a, b) => a[0] - b[0]));
const removed = new RangeSet(CASEFOLD_REMOVED);
const folded = new Map();
for (const [first, last, step, delta] of CASEFOLD_RUNS) {
  for (let c = first; c <= last; c += step) {
    folded.set(c, String.fromCodePoint(c + delta));
  }
}
for (const [c, points] of Object.entries(CASEFOLD_SEVERAL)) {
  folded.set(Number(c), String.fromCodePoint(...points));
}

/** NFKC_Casefold of one word: each code point's folding, then NFC. */
function caseFold(word) {
  let out = '';
  for (const ch of word) {
    const c = ch.codePointAt(0);
    if (removed.has(c)) continue;
    const f = folded.get(c);
    out += f === undefined ? ch : f;
  }
  return out.normalize('NFC');
}

/** Throws TokenizerError unless `text` is a string of Unicode scalar
 *  values (no lone surrogate: UTF-8, and so our ids, cannot carry one). */
export function checkText(text, name = 'text') {
  if (typeof text !== 'string') {
    throw new TokenizerError(`\`${name}\` must be a string, got ${typeof text}.`);
  }
  const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
  const hit = lone.exec(text);
  if (hit) {
    throw new TokenizerError(
      `\`${name}\` holds a lone surrogate (U+${hit[0].charCodeAt(0)
        .toString(16).toUpperCase()}) at position ${hit.index}: it is not ` +
      'Unicode text (UTF-8 cannot encode it); fix the text before tokenizing.');
  }
}

/**
 * The words of a text, as WordPiece sees them (steps 1-5 of the contract).
 *
 * @param {string} text
 * @param {{unicodeSpaces?: boolean}} options unicodeSpaces: map every
 *     Unicode space separator and NUL to ' ' first (tokenizer.json's
 *     unicode_spaces; exports made before it lack the key: false).
 * @return {string[]}
 */
export function words(text, {unicodeSpaces = true} = {}) {
  checkText(text);
  // 1. Unicode spaces (no-break space, ...) and NUL become ' '. Without
  // (exports made before unicode_spaces), the text ends at its first NUL.
  if (!unicodeSpaces) text = text.split('\0')[0];
  // 2. CJK ideographs are set apart by spaces.
  let spaced = '';
  for (const ch of text) {
    const c = ch.codePointAt(0);
    if (unicodeSpaces && (c === 0 || space.has(c))) spaced += ' ';
    else if (cjk.has(c)) spaced += ` ${ch} `;
    else spaced += ch;
  }
  // 3. NFD, nonspacing marks removed (accents stripped).
  let stripped = '';
  for (const ch of spaced.normalize('NFD')) {
    if (!mark.has(ch.codePointAt(0))) stripped += ch;
  }
  // 4. Split: whitespace, control and format characters end a word;
  // punctuation and CJK ideographs are words of their own.
  const out = [];
  let current = '';
  for (const ch of stripped) {
    const c = ch.codePointAt(0);
    const alone = punct.has(c) || cjk.has(c);
    if (alone || drop.has(c)) {
      if (current) out.push(current);
      current = '';
      if (alone) out.push(ch);
    } else {
      current += ch;
    }
  }
  if (current) out.push(current);
  // 5. Each word case-folded (NFKC_Casefold); a word may come out empty.
  return out.map(caseFold);
}

const encoder = new TextEncoder();

/**
 * The uncased WordPiece tokenizer of an export: vocab.txt's tokens and
 * tokenizer.json's settings.
 *
 * Example:
 *   const tokenizer = new WordPieceTokenizer(vocabText.split('\n'), config);
 *   const {tokenIds, paddingMask, numTokens} = tokenizer.encode('A café.');
 */
export class WordPieceTokenizer {
  /**
   * @param {string[]} vocabulary the tokens of vocab.txt, id = position
   *     (a trailing empty line is ignored).
   * @param {object} config tokenizer.json: max_length, lowercase,
   *     strip_accents, unicode_spaces (absent: false), the special ids.
   */
  constructor(vocabulary, config) {
    const tokens = [...vocabulary];
    while (tokens.length && tokens[tokens.length - 1] === '') tokens.pop();
    if (!config.lowercase || !config.strip_accents) {
      throw new TokenizerError(
        'This client implements the uncased contract (lowercase and ' +
        'strip_accents true); tokenizer.json has lowercase=' +
        `${config.lowercase}, strip_accents=${config.strip_accents}.`);
    }
    if (config.vocabulary_size !== undefined &&
        tokens.length !== config.vocabulary_size) {
      throw new TokenizerError(
        `vocab.txt has ${tokens.length} tokens, tokenizer.json says ` +
        `${config.vocabulary_size}: they are not from the same export.`);
    }
    this.vocabulary = tokens;
    this.index = new Map(tokens.map((t, i) => [t, i]));
    this.maxLength = config.max_length;
    this.unicodeSpaces = Boolean(config.unicode_spaces);
    this.unkId = this.id('[UNK]', config.unk_id);
    this.clsId = this.id('[CLS]', config.cls_id);
    this.sepId = this.id('[SEP]', config.sep_id);
    this.padId = this.id('[PAD]', config.pad_id);
    if (!Number.isInteger(this.maxLength) || this.maxLength < 3) {
      throw new TokenizerError(
        `tokenizer.json's max_length must be an integer >= 3, got ${this.maxLength}.`);
    }
  }

  id(token, recorded) {
    const found = this.index.get(token);
    if (found === undefined || (recorded !== undefined && found !== recorded)) {
      throw new TokenizerError(
        `vocab.txt puts ${token} at ${found}, tokenizer.json at ${recorded}.`);
    }
    return found;
  }

  /** WordPiece of one word: greedy longest match, '##' before pieces
   *  after the first; [UNK] for the whole word when a piece is missing
   *  or the word is longer than MAX_BYTES_PER_WORD bytes. */
  pieces(word) {
    if (!word) return [];
    if (encoder.encode(word).length > MAX_BYTES_PER_WORD) return [this.unkId];
    const chars = Array.from(word);
    const ids = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let found;
      while (start < end) {
        const piece = (start > 0 ? SUFFIX : '') + chars.slice(start, end).join('');
        found = this.index.get(piece);
        if (found !== undefined) break;
        end -= 1;
      }
      if (found === undefined) return [this.unkId];
      ids.push(found);
      start = end;
    }
    return ids;
  }

  /** The WordPiece ids of a text, without [CLS] / [SEP]. */
  tokenize(text) {
    return words(text, {unicodeSpaces: this.unicodeSpaces})
      .flatMap((w) => this.pieces(w));
  }

  /**
   * [CLS] ids [SEP], cut to `length` (keeping [SEP]) and padded with [PAD].
   *
   * @return {{tokenIds: Int32Array, paddingMask: Int32Array,
   *     numTokens: number, truncated: boolean}}
   */
  encode(text, length = this.maxLength) {
    const ids = this.tokenize(text);
    const kept = ids.slice(0, length - 2);
    const row = [this.clsId, ...kept, this.sepId];
    const tokenIds = new Int32Array(length).fill(this.padId);
    const paddingMask = new Int32Array(length);
    tokenIds.set(row);
    paddingMask.fill(1, 0, row.length);
    return {tokenIds, paddingMask, numTokens: row.length,
      truncated: kept.length < ids.length};
  }
}
