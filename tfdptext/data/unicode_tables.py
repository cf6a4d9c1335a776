"""The character data our tokenizer uses, read out of TensorFlow.

`tfdptext.data.TextTokenizer` (keras_hub's WordPieceTokenizer on its
TensorFlow path) decides what a character is with two libraries inside
TensorFlow: RE2's Unicode tables for the regular expressions (which
characters are whitespace, control or format characters, punctuation,
nonspacing marks, space separators) and ICU for NFD and NFKC_Casefold
(`tensorflow_text.case_fold_utf8`). Their Unicode versions are not a
browser's or a phone's: RE2 here knows Unicode 15 (U+10D6E, a Garay hyphen
of Unicode 16, is not punctuation to it), ICU knows Unicode 16, Python 3.11
knows 14 and Chromium 156 knows 17. An app that took its own platform's
character classes would disagree with our ids on every character whose
class differs between versions (90 for the regular expressions of node 20
and Chromium 156, which know Unicode 17; measured), and no platform has NFKC_Casefold built in (JavaScript lacks
case folding; `toLowerCase` differs from it on 4,458 characters, among them
'ß', 'ς' and Cherokee).

So the contract ships the data: `tables()` reads, for every code point,
what TensorFlow's RE2 and ICU make of it, and `write_javascript` writes it
as `web/tfdptext/unicode_data.js` for the web client (regenerate with
`python -m tfdptext.data.unicode_tables web/tfdptext/unicode_data.js`; a
test checks that the committed file equals what this TensorFlow gives).
Canonical decomposition (NFD) and composition (NFC) are left to the
platform: every code point's NFD in JavaScript (ICU 78) equals
TensorFlow's (checked over all 1,112,064).
"""

import json
import sys

# Classes, each the code points a regular expression of keras_hub's
# WordPieceTokenizer (and our space mapping) matches, as RE2 decides.
CLASSES = {
    # Dropped between words: RE2's \s is ASCII only ([\t\n\f\r ]).
    "drop": r"\s|\p{Cc}|\p{Cf}",
    # Kept as one-character words: every ASCII character that is neither a
    # letter nor a digit, and Unicode punctuation.
    "punct": r"[!-/]|[:-@]|[\[-`]|[{-~]|[\p{P}]",
    # Removed after NFD when accents are stripped.
    "mark": r"\p{Mn}",
    # Mapped to ' ' first when `unicode_spaces` is on (TextTokenizer).
    "space": r"\p{Z}",
}
# Surrogates are not characters: UTF-8 cannot carry them.
SURROGATES = range(0xD800, 0xE000)


def code_points():
    """Every Unicode scalar value, in order."""
    return [c for c in range(0x110000) if c not in SURROGATES]


def _ranges(points):
    """Sorted code points as [[first, last], ...] runs."""
    runs = []
    for c in points:
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return runs


def tables():
    """What TensorFlow's RE2 and ICU make of every code point.

    Returns {"classes": {name: [[first, last], ...]} (CLASSES),
    "casefold": {code point: its NFKC_Casefold as a string} for every
    code point that it changes ('' for default-ignorable ones), "versions":
    {"tensorflow", "tensorflow_text"}}. About 5 s on one core.
    """
    import tensorflow as tf
    import tensorflow_text as tf_text

    points = code_points()
    strings = tf.constant([chr(c).encode("utf-8") for c in points])
    classes = {}
    for name, pattern in CLASSES.items():
        match = tf.strings.regex_full_match(strings, pattern).numpy()
        classes[name] = _ranges(c for c, hit in zip(points, match) if hit)
    folded = tf_text.case_fold_utf8(strings).numpy()
    casefold = {c: value.decode("utf-8")
                for c, value in zip(points, folded)
                if value != chr(c).encode("utf-8")}
    return {"classes": classes, "casefold": casefold,
            "versions": {"tensorflow": tf.__version__,
                         "tensorflow_text": tf_text.__version__}}


def _casefold_runs(casefold):
    """The case folding as runs [first, last, step, delta] (code points
    first, first + step, ... up to last, each mapped to one code point at
    `delta` from it) and the rest {code point: [code points]} (several or
    none)."""
    singles = sorted((c, ord(v) - c) for c, v in casefold.items()
                     if len(v) == 1)
    runs = []
    for c, delta in singles:
        if runs:
            first, last, step, run_delta = runs[-1]
            gap = c - last
            if run_delta == delta and gap in (1, 2) and (
                    first == last or gap == step):
                runs[-1] = [first, c, gap, delta]
                continue
        runs.append([c, c, 1, delta])
    others = {c: [ord(ch) for ch in v] for c, v in sorted(casefold.items())
              if len(v) != 1}
    return runs, others


def javascript(data):
    """The tables as an ES module (see `write_javascript`)."""
    runs, others = _casefold_runs(data["casefold"])
    empty = _ranges(c for c, v in others.items() if not v)
    several = {c: v for c, v in others.items() if v}
    versions = data["versions"]
    lines = [
        "// The character data of tfdptext's tokenizer contract, read out",
        f"// of TensorFlow {versions['tensorflow']} (RE2's Unicode tables, "
        f"ICU's NFKC_Casefold) by",
        "// `python -m tfdptext.data.unicode_tables`: do not edit. See",
        "// docs/guides/tokenizer.md.",
        f"export const SOURCE = {json.dumps(versions, sort_keys=True)};",
        "// [[first, last], ...] code point ranges of each class.",
    ]
    for name in CLASSES:
        lines.append(f"export const {name.upper()} = "
                     f"{json.dumps(data['classes'][name], separators=(',', ':'))};")
    lines += [
        "// NFKC_Casefold of one code point: runs [first, last, step, "
        "delta]",
        "// (first, first + step, ... last map to c + delta), code points "
        "it",
        "// removes (ranges) and those it maps to several.",
        f"export const CASEFOLD_RUNS = "
        f"{json.dumps(runs, separators=(',', ':'))};",
        f"export const CASEFOLD_REMOVED = "
        f"{json.dumps(empty, separators=(',', ':'))};",
        f"export const CASEFOLD_SEVERAL = "
        f"{json.dumps({str(c): v for c, v in several.items()}, separators=(',', ':'))};",
        "",
    ]
    return "\n".join(lines)


def write_javascript(path, data=None):
    """Writes `javascript(tables())` to `path`."""
    text = javascript(data or tables())
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return text


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tfdptext.data.unicode_tables "
                 "web/tfdptext/unicode_data.js")
    write_javascript(sys.argv[1])
