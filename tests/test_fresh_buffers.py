"""Clients that cannot reuse a random-words buffer (issue 38).

No check inside a phone model can see a buffer reused across calls (the
manifest's `not_detectable`), so every client the project ships makes a
new buffer for every call and fills all of it from the platform's secure
generator:

- the web client (`web/tfdptext/client.js`), run in Node with LiteRT.js
  replaced by a stub that records what the model receives: two calls get
  two different buffers (objects and memory), each filled whole by
  crypto.getRandomValues in chunks of at most 65,536 bytes; and the same
  harness FAILS on a copy of the client that keeps one buffer;
- the guide's Android (Kotlin) and iOS (Swift) code: the buffer is
  allocated and filled inside the per-call function (no compiler for
  either here, so the test reads the guide's code; it fails if the
  allocation moves out of the call).
"""

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENT = os.path.join(ROOT, "web", "tfdptext")
GUIDE = os.path.join(ROOT, "docs", "guides", "export.md")
NODE = shutil.which("node")

_STUB = """
export class Tensor {
  constructor(data, shape) { this.data = data; this.shape = shape; }
  toTypedArray() { return this.data; }
  delete() {}
}
export async function loadLiteRt() {}
export async function loadAndCompile() { throw new Error('stub'); }
"""

_HARNESS = """
import {privatizeText} from './tfdptext/client.js';

const fills = [];
const secure = crypto.getRandomValues.bind(crypto);
crypto.getRandomValues = (view) => {
  fills.push({buffer: view.buffer, offset: view.byteOffset,
    bytes: view.byteLength});
  return secure(view);
};
const seen = [];
const model = {
  async run(signature, inputs) {
    seen.push(inputs.random_words.data);
    return {private_code: {toTypedArray: () => new Int32Array([1]),
      delete() {}}};
  },
};
const tokenizer = {encode: () => ({tokenIds: new Int32Array([2, 5, 3, 0]),
  paddingMask: new Int32Array([1, 1, 1, 0]), numTokens: 3,
  truncated: false})};
const words = Number(process.argv[2]);
const manifest = {
  user: {models: [{length: 4, signature: 'length_4',
    inputs: {random_words: [1, words, 'int32']},
    outputs: {private_code: [1, 'int32']}}]},
  server: {signature: 'serving_default', inputs: {}},
};
for (let call = 0; call < 3; call++) {
  await privatizeText(model, manifest, tokenizer, 'the same text');
}
const fail = (why) => { console.error(why); process.exit(1); };
if (seen.length !== 3) fail('the model ran ' + seen.length + ' times');
for (let i = 0; i < seen.length; i++) {
  const w = seen[i];
  if (!(w instanceof Int32Array) || w.length !== words) fail('not the words');
  for (let j = 0; j < i; j++) {
    if (seen[j] === w || seen[j].buffer === w.buffer) {
      fail('call ' + i + ' reused the buffer of call ' + j);
    }
    if (seen[j].every((v, k) => v === w[k])) {
      fail('call ' + i + ' sent the words of call ' + j);
    }
  }
}
for (let i = 0; i < seen.length; i++) {
  const w = seen[i];
  // Every byte of this call's buffer came from getRandomValues, in this
  // call, in chunks of at most 65,536 bytes.
  const mine = fills.filter((f) => f.buffer === w.buffer);
  const covered = mine.reduce((n, f) => n + f.bytes, 0);
  if (covered !== 4 * words || mine.some((f) => f.bytes > 65536)) {
    fail('call ' + i + ': ' + covered + ' of ' + 4 * words + ' bytes filled');
  }
}
console.log('fresh');
"""


def _run_client(tmp_path, words, edit=None):
    """Runs the harness on a copy of the web client (with `edit` applied
    to client.js): (exit status, output)."""
    copy = tmp_path / "tfdptext"
    shutil.copytree(CLIENT, copy)
    if edit is not None:
        path = copy / "client.js"
        path.write_text(edit(path.read_text()))
    stub = tmp_path / "node_modules" / "@litertjs" / "core"
    stub.mkdir(parents=True)
    (stub / "package.json").write_text(
        '{"name": "@litertjs/core", "type": "module", "main": "index.js"}')
    (stub / "index.js").write_text(_STUB)
    (tmp_path / "package.json").write_text('{"type": "module"}')
    (tmp_path / "harness.mjs").write_text(_HARNESS)
    done = subprocess.run([NODE, "harness.mjs", str(words)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.skipif(NODE is None, reason="needs node")
@pytest.mark.parametrize("words", [128, 20000])
def test_web_client_fills_a_fresh_buffer_every_call(tmp_path, words):
    # 20,000 words = 80,000 bytes: two getRandomValues chunks.
    status, out = _run_client(tmp_path, words)
    assert status == 0 and "fresh" in out, out


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_the_web_harness_fails_on_a_client_that_keeps_its_buffer(tmp_path):
    original = "const words = new Int32Array(count);"
    assert original in (open(os.path.join(CLIENT, "client.js")).read())
    status, out = _run_client(
        tmp_path, 128, lambda text: text.replace(
            original, "const words = (globalThis.kept ??= "
                      "new Int32Array(count));"))
    assert status != 0 and "reused the buffer" in out, out


def _block(language, opening):
    """The one code block of the guide in `language` that defines the
    function starting at `opening` (the guide has other blocks, e.g. the
    ledger's)."""
    with open(GUIDE) as f:
        text = f.read()
    blocks = [b for b in re.findall(rf"^```{language}\n(.*?)^```", text,
                                    re.S | re.M) if opening in b]
    assert len(blocks) == 1, (language, opening, len(blocks))
    return blocks[0]


def _body(code, opening):
    """The text of the function that starts at `opening`, to its closing
    brace (balanced)."""
    start = code.index(opening)
    depth, i = 0, code.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return code[start:i + 1]
        i += 1


def test_android_guide_allocates_and_fills_the_buffer_inside_the_call():
    code = _block("kotlin", "fun privatize(")
    call = _body(code, "fun privatize(")
    assert "val bytes = ByteArray(4 * entry.randomWords)" in call
    assert "random.nextBytes(bytes)" in call
    assert "private val random = SecureRandom()" in code
    # Nothing outside the call holds a buffer of words or bytes.
    outside = code.replace(call, "")
    assert "ByteArray(" not in outside and "IntArray(" not in outside


def test_ios_guide_allocates_and_fills_the_buffer_inside_the_call():
    code = _block("swift", "func randomWords(")
    fill = _body(code, "func randomWords(")
    assert "var words = [Int32](repeating: 0, count: count)" in fill
    assert "SecRandomCopyBytes(kSecRandomDefault, $0.count" in fill
    assert "errSecSuccess" in fill
    call = _body(code, "func privatize(")
    assert "randomWords(entry.randomWords)" in call
    outside = code.replace(fill, "").replace(call, "")
    assert "[Int32]" not in outside
