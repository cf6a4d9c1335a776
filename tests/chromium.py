"""Headless Chromium for the web client's tests and benchmarks.

Debian's `chromium` and `chromium-driver` (the Makefile installs them with
apt-get where missing), driven by selenium with the driver given, so that
nothing is downloaded. The flags keep a closed network quiet: without the
background-networking ones Chromium tries Google's hosts at every start.
"""

import os
import shutil

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions")
WEB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "web")


def missing():
    """Why the browser tests cannot run here ('' when they can)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            return (f"{path} is absent: `make test` installs Debian's "
                    "chromium and chromium-driver as root (else: sudo "
                    "apt-get install chromium chromium-driver)")
    if not os.path.isdir(os.path.join(WEB, "node_modules", "@litertjs",
                                      "core", "wasm")):
        return ("web/node_modules lacks LiteRT.js: `make test` runs `npm "
                "ci` in web/")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (make install installs it)"
    if shutil.which("node") is None:
        return "node is not installed"
    return ""


def launch(profile_dir):
    """A headless Chromium with a fresh profile in `profile_dir`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    # Every request the page makes, as Chrome's DevTools Network events
    # (`requests`).
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(600)
    return driver


def run_async(driver, body, *args):
    """Runs `body` (JavaScript: an async function body that sees `args`
    and returns a JSON-able value) in the page; raises RuntimeError with
    the page's error message if it throws."""
    script = ("const done = arguments[arguments.length - 1];"
              "const args = Array.from(arguments).slice(0, -1);"
              f"(async (args) => {{ {body} }})(args)"
              ".then((value) => done({value}))"
              ".catch((err) => done({error: String(err && err.stack || err)}));")
    result = driver.execute_async_script(script, *args)
    if "error" in result:
        raise RuntimeError(f"the page threw: {result['error']}")
    return result.get("value")


def requests(driver):
    """The requests the browser sent since the last call: [{url, method,
    headers, body}] from the performance log's Network.requestWillBeSent
    events (the log is drained)."""
    import base64
    import json

    sent = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] != "Network.requestWillBeSent":
            continue
        request = message["params"]["request"]
        body = request.get("postData") or "".join(
            base64.b64decode(part.get("bytes", "")).decode("utf-8", "replace")
            for part in request.get("postDataEntries", []))
        sent.append({"url": request["url"], "method": request["method"],
                     "headers": request.get("headers", {}), "body": body})
    return sent


def open_page(driver, url):
    """Loads the page and waits until it has loaded its model and handled
    its #text= (window.tfdptextReady)."""
    driver.get(url)
    run_async(driver, "await window.tfdptextReady; return true;")


def text_of(driver, element_id):
    return driver.find_element("id", element_id).get_attribute(
        "textContent")


PHONE_MODEL_RUN = """
const [rows] = args;  // [{signature, length, ids, mask, words}]
const {Tensor} = await import('@litertjs/core');
const client = window.tfdptextClient;
const out = [];
for (const row of rows) {
  const inputs = {
    token_ids: new Tensor(Int32Array.from(row.ids), [1, row.length]),
    padding_mask: new Tensor(Int32Array.from(row.mask), [1, row.length]),
    random_words: new Tensor(Int32Array.from(row.words),
                             [1, row.words.length])};
  const outputs = await client.model.run(row.signature, inputs);
  const read = {};
  for (const [name, t] of Object.entries(outputs)) {
    read[name] = Array.from(t.toTypedArray()); t.delete();
  }
  for (const t of Object.values(inputs)) t.delete();
  out.push(read);
}
return out;
"""


def run_phone_model(driver, feeds):
    """The page's phone model (LiteRT.js, the loaded export) on `feeds`,
    [(signature, {token_ids, padding_mask, random_words}: int32 arrays of
    one row)]: [{output name: flat list}], one per feed."""
    rows = [{"signature": signature, "length": int(feed["token_ids"].size),
             **{key: [int(v) for v in feed[name].reshape(-1)]
                for key, name in (("ids", "token_ids"),
                                  ("mask", "padding_mask"),
                                  ("words", "random_words"))}}
            for signature, feed in feeds]
    return run_async(driver, PHONE_MODEL_RUN, rows)
