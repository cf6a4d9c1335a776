// Tokenizes texts with the web client's tokenizer, for the parity tests:
//   node web/tools/tokenize.mjs < request.json > answer.json
// request: {"vocabulary": "path/to/vocab.txt", "config": {tokenizer.json},
//           "texts": [...], "mode": "ids" | "words"}
// answer: {"results": [ids or words, or {"error": message}, ...]}
import fs from 'node:fs';

import {TokenizerError, WordPieceTokenizer, words} from '../tfdptext/tokenizer.js';

const request = JSON.parse(fs.readFileSync(0, 'utf8'));
const mode = request.mode || 'ids';
let tokenizer = null;
if (mode === 'ids') {
  const vocabulary = fs.readFileSync(request.vocabulary, 'utf8').split('\n');
  tokenizer = new WordPieceTokenizer(vocabulary, request.config);
}
const unicodeSpaces = Boolean(request.config && request.config.unicode_spaces);
const results = request.texts.map((text) => {
  try {
    if (mode === 'words') return words(text, {unicodeSpaces});
    return Array.from(tokenizer.encode(text).tokenIds);
  } catch (err) {
    if (err instanceof TokenizerError) return {error: err.message};
    throw err;
  }
});
process.stdout.write(JSON.stringify({results}));
