// The page: loads an export's phone model, privatizes what the user typed,
// sends only the release to the server and keeps the user's privacy
// ledger. Query parameters (all optional):
//   text    a text to privatize and send as soon as the model is loaded
//   export  where the export's files are (default ../export/, as
//           tfdptext-serve serves them)
//   server  the REST server's origin (default: this page's). TF Serving
//           sends no CORS headers: serve the page and /v1/ from one origin.
//   budget  a daily epsilon budget for the ledger (releases beyond it are
//           refused on this device)

import {PhoneModel, RefusedError, ServerError, sendRelease} from './tfdptext/client.js';
import {PrivacyLedger} from './tfdptext/ledger.js';

const WASM = new URL('./node_modules/@litertjs/core/wasm/', import.meta.url).href;
const params = new URLSearchParams(location.search);
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

async function main() {
  let client;
  try {
    client = await PhoneModel.load(exportUrl.endsWith('/') ? exportUrl : exportUrl + '/',
      {wasm: WASM});
  } catch (err) {
    setStatus('error', `cannot load the phone model: ${err.message}`);
    return;
  }
  const {manifest} = client;
  const budget = params.has('budget') ? Number(params.get('budget')) : null;
  const ledger = new PrivacyLedger(localStorage,
    `${manifest.server.model_name}/${manifest.server.version}`, manifest.guarantee, budget);
  $('guarantee').textContent = manifest.guarantee_text.split('\n')
    .filter((line) => !line.startsWith('  Condition')).join(' ');
  $('model').textContent = `${manifest.mechanism} (${manifest.split_point} release); ` +
    `phone model lengths ${manifest.user.lengths.join(', ')} (texts are cut at ` +
    `${manifest.user.length} tokens); tokenizer: all ${client.vectors.vectors.length} ` +
    'test vectors of the export give the same ids here.';
  $('ledger').textContent = ledger.describe();
  window.tfdptextClient = client;  // for scripting (tests, benchmarks)

  async function run(text) {
    $('label').textContent = '';
    $('answer').textContent = '';
    if (!ledger.allows()) {
      setStatus('refused', 'today\'s privacy budget is spent: nothing was privatized or sent.');
      return;
    }
    let made;
    try {
      made = await client.privatize(text);
    } catch (err) {
      const refused = err instanceof RefusedError;
      setStatus(refused ? 'refused' : 'error', refused ?
        `refused on this device: ${err.message}` : `error: ${err.message}`);
      $('release').textContent = 'nothing: the release was refused on this device';
      $('request').textContent = '';
      return;
    }
    $('release').textContent = describeRelease(client, made) +
      ` (phone model of length ${made.length}, ${made.numTokens} tokens` +
      `${made.truncated ? ', text cut at ' + manifest.user.length + ' tokens' : ''})`;
    $('request').textContent = JSON.stringify(made.request);
    setStatus('sending', 'sending the release…');
    ledger.record();
    $('ledger').textContent = ledger.describe();
    try {
      const answer = await sendRelease(server, manifest, made.request);
      $('label').textContent = answer.label_name[0];
      $('answer').textContent = describeAnswer(client, answer);
      setStatus('sent', 'sent; the server answered');
    } catch (err) {
      setStatus('error', err instanceof ServerError ?
        `the server refused it (HTTP ${err.status}): ${err.message}` : `error: ${err.message}`);
    }
  }

  $('form').addEventListener('submit', (event) => {
    event.preventDefault();
    run($('text').value);
  });
  $('send').disabled = false;
  setStatus('ready', 'ready');
  if (params.has('text')) {
    $('text').value = params.get('text');
    await run(params.get('text'));
  }
}

window.tfdptextReady = main();
