"""Test vectors of the tokenizer contract, and hard strings to test it on.

Every export ships `user/tokenizer_vectors.json` (`vectors(tokenizer)`):
strings that exercise each rule of docs/guides/tokenizer.md, each with the
ids our tokenizer gives it. An app runs them in its unit tests (the web
client runs them every time it loads, and refuses to privatize when one
differs): a tokenizer that differs on accents, on a no-break space or on
truncation is then found before it ships, not by the users whose texts it
turns into other words.

`hard_strings(count, seed)` makes many more strings of the same kinds
(accents, emoji sequences, URLs, CJK, Hangul, HTML, control and format
characters, every kind of space, fullwidth and mathematical letters, very
long texts and words) for the parity tests of other implementations.
"""

import copy
import json
import random

# (what it tests, text): one or more per rule of the contract.
CASES = (
    ("plain ASCII, punctuation split", "The delivery was fast, and the "
     "staff were friendly!"),
    ("lowercasing", "LOUD Words In Title Case"),
    ("accents stripped after NFD", "Café crème brûlée, naïve façade, "
     "São Paulo, Zürich"),
    ("combining accent typed separately", "cafe\u0301 re\u0301sume\u0301"),
    ("German sharp s folds to ss", "Straße STRASSE Maß"),
    ("capital sharp s folds to ss", "\u1e9eTRASSE"),
    ("Greek final sigma folds to sigma", "ΟΔΥΣΣΕΥΣ οδυσσευς καλημέρα"),
    ("Turkish dotted and dotless i", "İstanbul ıslak DİYARBAKIR"),
    ("ellipsis folds to three dots", "Wait… what…?"),
    ("fullwidth letters fold to ASCII", "ＦＵＬＬ ｗｉｄｔｈ ａｎｄ １２３"),
    ("trademark and other compatibility signs", "Brand™ ℠ № ½ ¼ ① Ⅻ ℃"),
    ("ligatures", "ﬁne ﬂow ﬀ ﬃ"),
    ("mathematical letters", "𝐁𝐨𝐥𝐝 𝕯𝖔𝖚𝖇𝖑𝖊 𝒮𝒸𝓇𝒾𝓅𝓉"),
    ("no-break space between words", "Full\u00a0width and\u00a0more"),
    ("narrow no-break, en, em, thin, ideographic spaces",
     "a\u202fb c\u2002d e\u2003f g\u2009h i\u3000j"),
    ("line and paragraph separators", "first\u2028second\u2029third"),
    ("zero-width space, joiner, non-joiner, BOM", "zero\u200bwidth "
     "join\u200der non\u200cjoin \ufeffbom"),
    ("soft hyphen", "hyph\u00adenated"),
    ("control characters", "tab\there\nnew\rline\x00nul\x07bell\x7fdel"
     "\x85nel"),
    ("bidirectional marks", "\u202eright to left\u202c \u200fmark"),
    ("emoji", "Great 👍 service 😀🎉"),
    ("emoji with skin tone and ZWJ family", "👍🏽 👨\u200d👩\u200d👧 "
     "🏳\ufe0f\u200d🌈"),
    ("flags and keycaps", "🇫🇷 🇯🇵 1\ufe0f\u20e3 #\ufe0f\u20e3"),
    ("CJK ideographs split one by one", "我喜欢这家餐厅。日本語のテキスト"),
    ("CJK compatibility ideograph", "\uf900\uf901 \U0002f800"),
    ("Hangul syllables", "한국어 텍스트입니다"),
    ("Thai, Arabic, Hebrew, Devanagari", "ภาษาไทย العربية עברית हिन्दी"),
    ("Cyrillic", "Привет, МИР"),
    ("URL and e-mail", "See https://example.com/a-b_c?x=1&y=%20#frag or "
     "mail me@example.org"),
    ("HTML tags and entities", "<p class=\"x\">Hello&nbsp;<b>world</b>"
     "&amp;&#39;</p>"),
    ("numbers and currency", "$3.50, €12,00, ¥1000, 10% off, 3.14159"),
    ("apostrophes and quotes", "don't ‘single’ “double” «guillemets» "
     "„low“"),
    ("dashes", "a-b a–b a—b a‐b −1"),
    ("Cherokee folds to upper case", "ᏣᎳᎩ ꮳꮃꭹ"),
    ("Hangul filler is removed", "\u3164\u115f x"),
    ("a word of exactly 100 bytes", "a" * 100),
    ("a word of 101 bytes is [UNK]", "a" * 101),
    ("a long word of multi-byte letters", "é" * 60),
    ("unknown characters", "\U0001e030 \U00010d6e ☃ ⌘"),
    ("characters newer than the tables", "\U0001fae8 \U0001fac8"),
    ("only spaces", " \u00a0\t\n "),
    ("empty", ""),
    ("special token names are plain text", "[CLS] [SEP] [PAD] [MASK] "
     "[UNK]"),
    ("repeated punctuation", "!!! ??? ... ---"),
    ("truncation keeps [SEP]", " ".join(
        f"word{i} and more" for i in range(200))),
)


# The vectors by tokenizer settings (`TextTokenizer.config()`: the
# vocabulary's SHA-256, max_length, normalisation), made once per process:
# a process that exports several runs of one vocabulary (a sweep's runs, the
# tests) tokenizes the cases once (about 0.5 CPU-s each time otherwise).
_MADE = {}
_MAX_MADE = 16


def vectors(tokenizer):
    """The test vectors of `tokenizer`, as user/tokenizer_vectors.json
    holds them: {"about", "max_length", "vectors": [{"what", "text",
    "token_ids" (up to [SEP]: the rest is [PAD]), "truncated"}]}.

    The same settings give the same vectors: they are computed once per
    process for each `tokenizer.config()` and returned as a fresh copy."""
    key = json.dumps(tokenizer.config(), sort_keys=True)
    if key not in _MADE:
        if len(_MADE) >= _MAX_MADE:
            _MADE.pop(next(iter(_MADE)))
        _MADE[key] = _vectors(tokenizer)
    return copy.deepcopy(_MADE[key])


def _vectors(tokenizer):
    """`vectors`, computed."""
    texts = [text for _, text in CASES]
    features = tokenizer(texts)
    ids = features["token_ids"].numpy()
    mask = features["padding_mask"].numpy()
    pieces = tokenizer.tokenize(texts)
    records = []
    for i, (what, text) in enumerate(CASES):
        count = int(mask[i].sum())
        records.append({
            "what": what, "text": text,
            "token_ids": [int(v) for v in ids[i, :count]],
            "truncated": len(pieces[i]) > tokenizer.max_length - 2,
        })
    return {
        "about": ("strings and the ids the export's tokenizer gives them "
                  "([CLS] ... [SEP], at max_length; the rest of the row is "
                  "[PAD] with padding_mask 0). An app's tokenizer must give "
                  "exactly these ids (docs/guides/tokenizer.md)."),
        "max_length": tokenizer.max_length,
        "vectors": records,
    }


# Pools of hard pieces that `hard_strings` combines.
_POOLS = {
    "accents": ["café", "naïve", "Ångström", "Crème", "Łódź", "Dvořák",
                "e\u0301", "a\u0308\u0323", "Ǆemal", "ǅ", "ȟ", "ữ", "Ỹ"],
    "folds": ["Straße", "ẞ", "ς", "ΣΊΣΥΦΟΣ", "İ", "ı", "ﬃ", "ᏸ", "Ꭰ",
              "ǰ", "ŉ", "ΐ", "ᾳ", "Ω", "K", "Å", "µ", "ſ"],
    "compat": ["…", "™", "½", "①", "Ⅻ", "ℌ", "㎏", "㍿", "ｶﾀｶﾅ", "ＡＢＣ",
               "𝐀𝐁", "𝟘𝟙", "²³", "ﬀ", "Ǳ", "ｰ", "㈱", "︙"],
    "spaces": ["\u00a0", "\u2000", "\u2001", "\u2007", "\u200a", "\u202f",
               "\u205f", "\u3000", "\u1680", "\u2028", "\u2029", "\u180e",
               "\u200b", "\ufeff", " ", "\t", "\n", "\r", "\x0b", "\x0c",
               "\x85"],
    "controls": ["\x00", "\x01", "\x1b", "\x7f", "\x9f", "\u00ad", "\u061c",
                 "\u200c", "\u200d", "\u200e", "\u2060", "\u2066", "\u202e",
                 "\U000e0001", "\U000e0041", "\ufff9", "\u0600"],
    "emoji": ["👍", "👍🏽", "😀", "🎉", "❤️", "👨\u200d👩\u200d👧",
              "🏳\ufe0f\u200d🌈", "🇫🇷", "1\ufe0f\u20e3", "🫨", "🧑‍💻",
              "\U0001fae8", "☃\ufe0e"],
    "cjk": ["我", "喜欢", "日本語", "テキスト", "ｶﾅ", "한국어", "\u1100\u1161",
            "\u3131", "\uf900", "\U00020000", "\U0002a700", "〇", "々", "。",
            "「」", "・"],
    "scripts": ["ภาษาไทย", "العربية", "עברית", "हिन्दी", "தமிழ்", "ქართული",
                "Ελληνικά", "Русский", "ᠮᠣᠩᠭᠣᠯ", "ትግርኛ", "ꦧꦱꦗꦮ"],
    "urls": ["https://example.com/path?q=1&r=%20x#frag", "www.a-b.org",
             "user@mail.example.co.uk", "ftp://x.y/z.tar.gz", "C:\\dir\\f.txt",
             "@handle", "#hashtag", "v1.2.3", "2026-11-25T10:00:00Z"],
    "html": ["<div>", "</p>", "<a href=\"x\">", "&amp;", "&nbsp;", "&#x27;",
             "<!-- c -->", "<br/>", "&lt;script&gt;"],
    "punct": ["!", "?", "...", "—", "–", "‐", "«", "»", "„", "“", "”", "‘",
              "’", "¿", "¡", "§", "¶", "†", "‡", "•", "‰", "※", "⁂", "、",
              "「", "¬", "^", "`", "~", "|", "$", "+", "=", "<", ">"],
    "words": ["the", "staff", "was", "friendly", "delivery", "UNBELIEVABLE",
              "don't", "x", "12345", "3.14", "COVID-19", "e-mail", "Q&A"],
}


def _random_code_point(rng):
    """A code point from anywhere in Unicode (no surrogate), often from
    the blocks that hold marks, punctuation and compatibility forms."""
    ranges = ((0x20, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF),
              (0x900, 0xDFF), (0x1100, 0x11FF), (0x1AB0, 0x1AFF),
              (0x1DC0, 0x1FFF), (0x2000, 0x2BFF), (0x2E00, 0x2E7F),
              (0x3000, 0x33FF), (0xA700, 0xABFF), (0xFB00, 0xFFFD),
              (0x10000, 0x1FFFF), (0x20000, 0x3134F), (0xE0000, 0xE01EF),
              (0x0, 0x10FFFF))
    low, high = ranges[rng.randrange(len(ranges))]
    while True:
        c = rng.randint(low, high)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


def hard_strings(count=600, seed=0):
    """`count` hard strings (deterministic for a seed): the CASES first,
    then mixtures of the pools, random code points, long words and very
    long texts (some over 10,000 characters)."""
    rng = random.Random(seed)
    out = [text for _, text in CASES]
    pools = list(_POOLS)
    while len(out) < count:
        kind = rng.random()
        if kind < 0.08:  # a very long text
            pieces = [rng.choice(_POOLS[rng.choice(pools)])
                      for _ in range(rng.randint(300, 3000))]
            out.append(" ".join(pieces))
        elif kind < 0.16:  # a long word, near the 100-byte limit
            piece = rng.choice(_POOLS[rng.choice(["accents", "words",
                                                  "cjk", "scripts"])])
            out.append(piece * rng.randint(1, 120 // max(1, len(piece))))
        elif kind < 0.30:  # random code points
            out.append("".join(_random_code_point(rng)
                               for _ in range(rng.randint(1, 40))))
        else:  # a sentence of pieces, joined by any kind of separator
            parts = []
            for _ in range(rng.randint(2, 25)):
                parts.append(rng.choice(_POOLS[rng.choice(pools)]))
                if rng.random() < 0.7:
                    parts.append(rng.choice(_POOLS["spaces"])
                                 if rng.random() < 0.3 else " ")
            out.append("".join(parts))
    return out[:count]
