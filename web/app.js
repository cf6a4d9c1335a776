// The page: loads an export's phone model, privatizes what the user typed,
// sends only the release to the server and keeps the user's privacy
// ledger under the export's budget (manifest.budget).
//
// The text comes from the form, or from the URL's fragment: #text=... (a
// fragment is never sent to any server; the page removes it from the
// address bar once read). A text in the query (?text=) is refused: a query
// travels to the server, its logs and the Referer of other requests.
// Query parameters (optional; never a text):
//   export  where the export's files are (default ../export/, as
//           tfdptext-serve serves them)
//   server  the REST server's origin (default: this page's). TF Serving
//           sends no CORS headers: serve the page and /v1/ from one origin.

import {PhoneModel, RefusedError, ServerError, sendRelease} from './tfdptext/client.js';
import {Budget, PrivacyLedger} from './tfdptext/ledger.js';
import {checkText} from './tfdptext/text_checks.js';

const WASM = new URL('./node_modules/@litertjs/core/wasm/', import.meta.url).href;
const params = new URLSearchParams(location.search);
const fragment = new URLSearchParams(location.hash.slice(1));
const exportUrl = params.get('export') || new URL('../export/', import.meta.url).href;
const server = (params.get('server') || '').replace(/\/$/, '');
const $ = (id) => document.getElementById(id);

function setStatus(state, text) {
  $('status').dataset.state = state;
  $('status').textContent = text;
}

/** What leaves the device, in words: the code, the vector or the tokens. */
function describeRelease(client, made) {
  const values = made.release[made.releaseName];
  const {split_point: split, parameters} = client.manifest;
  if (split === 'code') {
    const m = parameters.num_codes ?? client.manifest.label_names.length;
    return `code ${values[0]} (one of ${m} codes; ${made.releaseName})`;
  }
  if (split === 'text_to_text') {
    const words = values.filter((id, i) => made.request.inputs.padding_mask[0][i])
      .map((id) => client.tokenizer.vocabulary[id]);
    return `privatized tokens: ${words.join(' ')}`;
  }
  const shown = values.slice(0, 8).map((v) => v.toFixed(3)).join(', ');
  return `${made.releaseName}: ${values.length} numbers [${shown}${values.length > 8 ? ', …' : ''}]`;
}

function describeAnswer(client, answer) {
  const parts = [];
  if (answer.probabilities) {
    parts.push(`probabilities [${answer.probabilities[0].map((p) => p.toFixed(3)).join(', ')}]`);
  }
  // What a code release's probabilities are: said once, in the manifest.
  if (client.manifest.split_point === 'code') {
    parts.push(client.manifest.server.outputs.probabilities);
  }
  return parts.join(': ');
}

/** The text of the URL's fragment (#text=...), removed from the address
 *  bar and history entry once read; null when none. */
function takeFragmentText() {
  if (!fragment.has('text')) return null;
  history.replaceState(null, '', location.pathname + location.search);
  return fragment.get('text');
}

async function main() {
  if (params.has('text')) {
    const kept = new URLSearchParams(params);
    kept.delete('text');  // out of the address bar and history, at least
    history.replaceState(null, '', location.pathname + (kept.size ? `?${kept}` : ''));
    setStatus('refused', 'refused: the text was put in the URL\'s query ' +
      '(?text=), which is sent to the server and its logs. Put it after ' +
      '#text= instead (a fragment never leaves this device), or type it ' +
      'in the form. Nothing was privatized or sent.');
    return;
  }
  let client;
  try {
    client = await PhoneModel.load(exportUrl.endsWith('/') ? exportUrl : exportUrl + '/',
      {wasm: WASM});
  } catch (err) {
    setStatus('error', `cannot load the phone model: ${err.message}`);
    return;
  }
  const {manifest} = client;
  const budget = Budget.of(manifest);
  const phoneFile = manifest.user.models[manifest.user.models.length - 1].file;
  const model = `${manifest.server.model_name}/${manifest.server.version}/` +
    manifest.files[phoneFile].sha256.slice(0, 16);
  const ledger = new PrivacyLedger(localStorage, budget, model);
  $('guarantee').textContent = manifest.guarantee_text.split('\n')
    .filter((line) => !line.startsWith('  Condition')).join(' ');
  $('model').textContent = `${manifest.mechanism} (${manifest.split_point} release); ` +
    `phone model lengths ${manifest.user.lengths.join(', ')} (texts are cut at ` +
    `${manifest.user.length} tokens); tokenizer: all ${client.vectors.vectors.length} ` +
    'test vectors of the export give the same ids here.';
  $('budget').textContent = budget.limited ? budget.describe() :
    `No budget: ${budget.none_reason.replace(/^no budget: /, '')}. Releases ` +
    'are counted here but never refused.';
  $('budget').dataset.limited = String(budget.limited);
  $('ledger').textContent = ledger.describe();
  window.tfdptextClient = client;  // for scripting (tests, benchmarks)

  function refuse(message) {
    setStatus('refused', message);
    $('release').textContent = 'nothing: the release was refused on this device';
    $('request').textContent = '';
    $('ledger').textContent = ledger.describe();
    return {state: 'refused', message};
  }

  /** Privatizes and sends `text` under the ledger: {state, message}. */
  async function run(text) {
    $('label').textContent = '';
    $('answer').textContent = '';
    $('warning').textContent = '';
    const check = checkText(client.tokenizer.encode(text), manifest);
    if (check.empty) {
      return refuse('refused on this device: the text holds no token to ' +
        'release (empty, whitespace, or only characters the tokenizer ' +
        'drops). Nothing was privatized, sent or charged.');
    }
    let reservation;
    try {
      reservation = await ledger.reserve(text);
    } catch (err) {
      return refuse(err.message);
    }
    let request = reservation.stored?.request;
    let shown = reservation.stored?.shown;
    if (!reservation.stored) {
      let made;
      try {
        made = await client.privatize(text);
      } catch (err) {
        await reservation.cancel();  // nothing left: the charge returns
        const refused = err instanceof RefusedError;
        const message = refused ? `refused on this device: ${err.message}` :
          `error: ${err.message}`;
        refuse(message);
        $('status').dataset.state = refused ? 'refused' : 'error';
        return {state: refused ? 'refused' : 'error', message};
      }
      request = made.request;
      shown = describeRelease(client, made) +
        ` (phone model of length ${made.length}, ${made.numTokens} tokens` +
        `${made.truncated ? ', text cut at ' + manifest.user.length + ' tokens' : ''})`;
      await reservation.commit({request, shown});  // charged from here on
    }
    $('release').textContent = reservation.stored ?
      `${shown}; resent: the release stored for this text today (nothing charged)` : shown;
    $('request').textContent = JSON.stringify(request);
    $('warning').textContent = check.warning;
    $('ledger').textContent = ledger.describe();
    setStatus('sending', 'sending the release…');
    try {
      const answer = await sendRelease(server, manifest, request);
      $('label').textContent = answer.label_name[0];
      $('answer').textContent = describeAnswer(client, answer);
      setStatus('sent', 'sent; the server answered');
      return {state: 'sent', resent: Boolean(reservation.stored), message: ''};
    } catch (err) {
      const message = err instanceof ServerError ?
        `the server refused it (HTTP ${err.status}): ${err.message}` : `error: ${err.message}`;
      setStatus('error', message);
      return {state: 'error', message};
    }
  }

  $('form').addEventListener('submit', (event) => {
    event.preventDefault();
    run($('text').value);
  });
  window.tfdptextSubmit = run;  // for scripting (tests)
  $('send').disabled = false;
  setStatus('ready', 'ready');
  const text = takeFragmentText();
  if (text !== null) {
    $('text').value = text;
    await run(text);
  }
}

window.tfdptextReady = main();
