// tfdptext's web client: an export's phone model in the browser (LiteRT.js),
// fed by the tokenizer contract and the platform's secure generator, and a
// TF Serving predict request that carries only the release.
//
//   const client = await PhoneModel.load('../export/', {wasm: WASM_DIR});
//   const made = await client.privatize('The staff was friendly.');
//   const answer = await sendRelease('', client.manifest, made.request);

import {loadAndCompile, loadLiteRt, Tensor} from '@litertjs/core';

import {TokenizerError, WordPieceTokenizer} from './tokenizer.js';

export {TokenizerError};

/** The export cannot be used here (files, hashes, test vectors). */
export class ExportError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ExportError';
  }
}

/** The phone model refused to release: `reason` is "inputs" (its
 *  input_status output says which check failed) or "random words" (the
 *  words failed the model's checks: a broken or constant random source). */
export class RefusedError extends Error {
  constructor(reason, message, inputStatus = 0) {
    super(message);
    this.name = 'RefusedError';
    this.reason = reason;
    this.inputStatus = inputStatus;
  }
}

/** The server answered with TF Serving's {"error": ...}. */
export class ServerError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ServerError';
    this.status = status;
  }
}

const INPUT_STATUS = 'input_status';
const RANDOM_WORDS = 'random_words';
// crypto.getRandomValues fills at most 65,536 bytes per call.
const MAX_RANDOM_BYTES = 65536;

async function fetchOk(url, kind) {
  const response = await fetch(url);
  if (!response.ok) {
    throw new ExportError(`${url}: HTTP ${response.status} (${kind}).`);
  }
  return response;
}

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest),
    (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Whether this page may run LiteRT.js's threaded WebAssembly: it needs
 *  SharedArrayBuffer, which browsers give cross-origin-isolated pages. */
export function threadsAllowed() {
  return globalThis.crossOriginIsolated === true &&
    typeof SharedArrayBuffer === 'function';
}

/** Checks `tokenizer` against an export's test vectors: the mismatches. */
export function checkVectors(tokenizer, vectors) {
  const bad = [];
  for (const vector of vectors.vectors) {
    let ids;
    try {
      const {tokenIds, numTokens} = tokenizer.encode(vector.text);
      ids = Array.from(tokenIds.subarray(0, numTokens));
    } catch (err) {
      ids = String(err.message);
    }
    if (JSON.stringify(ids) !== JSON.stringify(vector.token_ids)) {
      bad.push({what: vector.what, text: vector.text, expected: vector.token_ids,
        got: ids});
    }
  }
  return bad;
}

// [guide:web begin]
/**
 * Fills `count` int32 random words from the platform's cryptographically
 * secure generator: 4 * count fresh bytes, every call, never reused.
 */
export function randomWords(count) {
  const words = new Int32Array(count);
  const bytes = new Uint8Array(words.buffer);
  for (let at = 0; at < bytes.length; at += MAX_RANDOM_BYTES) {
    crypto.getRandomValues(bytes.subarray(at, at + MAX_RANDOM_BYTES));
  }
  return words;
}

/**
 * One private release of `text`: tokenize to max_length, run the phone
 * model of the shortest length that holds the tokens, with that model's
 * number of random words (manifest user.models[i]), and build the TF
 * Serving request that carries the release, and nothing else.
 */
export async function privatizeText(model, manifest, tokenizer, text) {
  const encoded = tokenizer.encode(text);  // [CLS] ... [SEP], [PAD] after
  const entry = manifest.user.models.find((m) => m.length >= encoded.numTokens) ??
    manifest.user.models[manifest.user.models.length - 1];
  const length = entry.length;
  const inputs = {
    token_ids: new Tensor(encoded.tokenIds.slice(0, length), [1, length]),
    padding_mask: new Tensor(encoded.paddingMask.slice(0, length), [1, length]),
  };
  if (entry.inputs[RANDOM_WORDS]) {
    const count = entry.inputs[RANDOM_WORDS][1];  // words, not bytes
    inputs[RANDOM_WORDS] = new Tensor(randomWords(count), [1, count]);
  }
  const outputs = await model.run(entry.signature, inputs);
  for (const tensor of Object.values(inputs)) tensor.delete();
  const read = {};
  for (const [name, tensor] of Object.entries(outputs)) {
    read[name] = Array.from(tensor.toTypedArray());
    tensor.delete();
  }
  const status = read[INPUT_STATUS] ? read[INPUT_STATUS][0] : 0;
  const releaseName = Object.keys(entry.outputs).find((n) => n !== INPUT_STATUS);
  const release = read[releaseName];
  const spec = entry.outputs[releaseName];  // [1, ...dims, dtype]
  const integer = spec[spec.length - 1].startsWith('int');
  if (status !== 0) {
    throw new RefusedError('inputs', 'The phone model refused its token ' +
      `inputs (input_status ${status}): ${describeStatus(manifest, status)}.`,
      status);
  }
  if (release.some((v) => (integer ? v < 0 : !Number.isFinite(v)))) {
    throw new RefusedError('random words', 'The phone model refused to ' +
      'release: its random words failed their checks (a constant, zero or ' +
      'otherwise broken random source). Nothing was sent.');
  }
  const request = {signature_name: manifest.server.signature,
    inputs: {[releaseName]: nest(release, spec.slice(0, -1))}};
  if (manifest.server.inputs.padding_mask) {  // token-level releases
    request.inputs.padding_mask = [Array.from(encoded.paddingMask.slice(0, length))];
  }
  return {release: {[releaseName]: release}, releaseName, length,
    numTokens: encoded.numTokens, truncated: encoded.truncated, request};
}
// [guide:web end]

/** Flat values as nested arrays of shape `dims` (row-major). */
function nest(values, dims) {
  if (dims.length <= 1) return values;
  const size = values.length / dims[0];
  const rows = [];
  for (let i = 0; i < values.length; i += size) {
    rows.push(nest(values.slice(i, i + size), dims.slice(1)));
  }
  return rows;
}

/** The meanings of the bits of an input_status value (manifest). */
export function describeStatus(manifest, status) {
  const meanings = manifest.user[INPUT_STATUS] || {};
  const found = Object.entries(meanings)
    .filter(([bit]) => /^\d+$/.test(bit) && (status & Number(bit)))
    .map(([, text]) => text);
  return found.length ? found.join('; ') : 'unknown check';
}

/**
 * POSTs a predict request to TF Serving's REST API (or tfdptext-serve):
 * `${server}/v1/models/NAME/versions/V:predict`. Returns its "outputs";
 * throws ServerError with the server's {"error": ...} message.
 */
export async function sendRelease(server, manifest, request) {
  const {model_name: name, version} = manifest.server;
  const url = `${server}/v1/models/${encodeURIComponent(name)}/versions/` +
    `${version}:predict`;
  let response;
  try {
    response = await fetch(url, {method: 'POST', body: JSON.stringify(request),
      headers: {'Content-Type': 'application/json'}});
  } catch (err) {
    throw new ServerError(0, `${url} cannot be reached (${err.message}; ` +
      'another origin must allow this page: see docs/guides/export.md).');
  }
  let body;
  try {
    body = await response.json();
  } catch (err) {
    throw new ServerError(response.status, `${url} answered HTTP ` +
      `${response.status} without JSON.`);
  }
  if (!response.ok || body.error) {
    throw new ServerError(response.status, body.error || `HTTP ${response.status}`);
  }
  return body.outputs;
}

/** An export's phone model, loaded and checked, in this browser. */
export class PhoneModel {
  constructor(manifest, tokenizer, model, vectors) {
    this.manifest = manifest;
    this.tokenizer = tokenizer;
    this.model = model;
    this.vectors = vectors;
  }

  /**
   * Loads an export's files from `exportUrl` (manifest.json, user/...),
   * checks the phone model's SHA-256 against the manifest, the vocabulary's
   * against tokenizer.json, and the tokenizer against the export's test
   * vectors (a tokenizer that differs on one is refused: ExportError).
   *
   * @param {string} exportUrl ends with '/'.
   * @param {{wasm: string}} options LiteRT.js's wasm folder.
   */
  static async load(exportUrl, {wasm}) {
    const manifest = await (await fetchOk(`${exportUrl}manifest.json`,
      'the export\'s manifest')).json();
    const user = manifest.user;
    if (!user.models) {  // an export made before several lengths
      user.models = [{length: user.length ?? user.tokenizer.max_length,
        file: user.file, signature: user.signature, inputs: user.inputs,
        outputs: user.outputs}];
    }
    const config = user.tokenizer;
    const vocabBytes = new Uint8Array(await (await fetchOk(
      `${exportUrl}user/vocab.txt`, 'the vocabulary')).arrayBuffer());
    if (await sha256Hex(vocabBytes) !== config.vocabulary_sha256) {
      throw new ExportError('user/vocab.txt does not match the SHA-256 in ' +
        'the manifest\'s tokenizer settings.');
    }
    const tokenizer = new WordPieceTokenizer(
      new TextDecoder().decode(vocabBytes).split('\n'), config);
    if (!user.tokenizer_vectors) {
      throw new ExportError('The export has no tokenizer test vectors (it ' +
        'was made before them): export the run again, so that this page ' +
        'can check its tokenizer before privatizing.');
    }
    const vectors = await (await fetchOk(
      `${exportUrl}${user.tokenizer_vectors}`, 'the test vectors')).json();
    const bad = checkVectors(tokenizer, vectors);
    if (bad.length) {
      throw new ExportError(`This browser's tokenizer gives other ids than ` +
        `the export on ${bad.length} of ${vectors.vectors.length} test ` +
        `vectors (first: ${bad[0].what}); refusing to privatize.`);
    }
    const file = user.models[0].file;
    const modelBytes = new Uint8Array(await (await fetchOk(
      `${exportUrl}${file}`, 'the phone model')).arrayBuffer());
    const recorded = manifest.files[file];
    if (!recorded || await sha256Hex(modelBytes) !== recorded.sha256) {
      throw new ExportError(`${file} does not match the SHA-256 in the ` +
        'manifest: it is not the exported phone model.');
    }
    // A cross-origin-isolated page (tfdptext-serve sends the headers) may
    // share memory between threads: LiteRT.js's threaded WebAssembly then
    // runs the model on the device's cores; elsewhere, one thread.
    await loadLiteRt(wasm, {threads: threadsAllowed()});
    const model = await loadAndCompile(modelBytes, {accelerator: 'wasm'});
    for (const entry of user.models) {
      if (!(entry.signature in model.signatures)) {
        throw new ExportError(`${file} has no signature ${entry.signature}.`);
      }
    }
    return new PhoneModel(manifest, tokenizer, model, vectors);
  }

  /** One private release of `text` (privatizeText). */
  privatize(text) {
    return privatizeText(this.model, this.manifest, this.tokenizer, text);
  }
}
