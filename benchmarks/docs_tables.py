#!/usr/bin/env python
"""The docs' tables, written from the committed results (benchmarks/results/).

Each table of docs/benchmarks.md and each generated table of README.md sits
between two markers:

    <!-- BEGIN generated: NAME -->
    ...
    <!-- END generated -->

and NAME is a file of benchmarks/results/ (NAME.json). Its "kind" says how
it is written: "table" results hold their rows as the docs show them
(what a benchmark writes with `machine.write_json(..., table=...)`, e.g.
benchmarks/pretraining_table.py with per-seed values, and every result
transcribed from the docs after its raw runs were lost); "values" results
hold numbers that rows cite but no region shows. `make benchmark-docs`
rewrites every region;
`--check` writes nothing and fails, naming each region, where a committed
region differs from what its JSON gives (tests/test_benchmark_docs.py
checks the same).

A "table" result may name, per row, the results its numbers come from
("sources"): `unbacked_numbers` lists each number of such a row (the
headline rows, the README's rows) that none of them holds.

    .venv/bin/python benchmarks/docs_tables.py          # rewrite
    .venv/bin/python benchmarks/docs_tables.py --check  # compare only
"""

import argparse
import decimal
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
DOCUMENTS = ("README.md", os.path.join("docs", "benchmarks.md"),
             os.path.join("docs", "benchmarks-archive.md"))
REGION = re.compile(r"(<!-- BEGIN generated: ([\w-]+) -->\n)(.*?)"
                    r"(<!-- END generated -->)", re.S)
# A number as the docs write it: 10,493 / 0.628 / +0.017 / 1e-8 / 10^5.
# Not a number: a digit inside a name (SST-2, int8, p50, L6). A unit may
# follow it (5.8x, 92%, 2.98 ms).
NUMBER = re.compile(r"(?<![\w.\-])(?:(?<![^\s(])[-+])?\d[\d,]*(?:\.\d+)?"
                    r"(?:e[-+]?\d+)?(?:\^\d+)?"
                    r"(?=(?:x|%|ms|s)?(?:[^\w.]|\.(?!\d)|$))")


def load(name, results=RESULTS):
    """The result NAME (benchmarks/results/NAME.json)."""
    path = os.path.join(results, f"{name}.json")
    if not os.path.exists(path):
        raise KeyError(f"no result {name!r}: {path} is missing")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _verdict_cell(rule, ratio_cell):
    """A speed verdict from a single run's ratio (the first number of
    `ratio_cell`): speed_verdict.single_run_verdict against the rule's
    target; "not met" and "within noise" in bold."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import speed_verdict

    ratio = float(NUMBER.search(ratio_cell).group(0).replace(",", ""))
    found = speed_verdict.single_run_verdict(ratio, rule["target"])
    return found if found == speed_verdict.MET else f"**{found}**"


def table_markdown(record):
    """A "table" result's rows as a Markdown table. A "verdict" rule
    (column, ratio_column, target) fills its column from the ratios."""
    table = record["table"]
    rule = table.get("verdict")
    rows = [list(row) for row in table["rows"]]
    if rule:
        target = table["columns"].index(rule["column"])
        ratio = table["columns"].index(rule["ratio_column"])
        for row in rows:
            row[target] = _verdict_cell(rule, row[ratio])
    lines = ["| " + " | ".join(table["columns"]) + " |",
             "|" + "---|" * len(table["columns"])]
    for row in rows:
        if len(row) != len(table["columns"]):
            raise ValueError(f"{record['name']}: a row of {len(row)} cells "
                             f"under {len(table['columns'])} columns: {row}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def render(name, results=RESULTS):
    """The Markdown of region NAME, from its JSON."""
    record = load(name, results)
    kind = record.get("kind", "table")
    if kind == "table":
        return table_markdown(record)
    raise ValueError(f"{name}: kind {kind!r} has no table (only \"table\" "
                     f"results are written into the docs)")


def regenerate(text, results=RESULTS):
    """`text` with every generated region rewritten from its JSON."""
    def fill(match):
        return (match.group(1) + render(match.group(2), results) + "\n"
                + match.group(4))
    return REGION.sub(fill, text)


def regions(text):
    """The region names of `text`, in order."""
    return [m.group(2) for m in REGION.finditer(text)]


def numbers(text):
    """The numbers written in `text`, as floats (10,493 -> 10493.0;
    10^5 -> 100000.0; a sign dropped)."""
    found = set()
    for token in NUMBER.findall(text):
        token = token.replace(",", "").lstrip("+-")
        base, _, power = token.partition("^")
        try:
            value = float(base) ** int(power) if power else float(base)
        except (ValueError, OverflowError):
            continue
        found.add(round(value, 9))
    return found


def _all_numbers(value):
    """Every number in a JSON value, strings included."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, (int, float)):
        return {round(abs(float(value)), 9)}
    if isinstance(value, str):
        return numbers(value)
    items = value.values() if isinstance(value, dict) else \
        value if isinstance(value, list) else ()
    found = set()
    for item in items:
        found |= _all_numbers(item)
    return found


def _written_forms(value):
    """The ways a number of a JSON value may be written in a row: rounded
    to 4 decimals down to thousands (either way at a half); a share (at
    most 1) as a percentage; a count of 100,000 or more in millions
    (3.5 M)."""
    scales = [1] + ([100] if value <= 1 else []) + (
        [1e-6] if value >= 1e5 else [])
    forms = {value}
    for scale in scales:
        exact = decimal.Decimal(repr(value * scale))
        for digits in range(-3, 5):
            step = decimal.Decimal(1).scaleb(-digits)
            for rule in (decimal.ROUND_HALF_EVEN, decimal.ROUND_HALF_UP):
                forms.add(round(float(exact.quantize(step, rule)), 9))
    return forms


def unbacked_in_text(text, sources, settings=(), results=RESULTS):
    """The numbers of `text` that none of the results `sources` holds
    (after rounding) and that are not among `settings`."""
    backed = {round(float(v), 9) for v in settings}
    for source in sources:
        for value in _all_numbers(load(source, results)):
            backed |= _written_forms(value)
    return sorted(v for v in numbers(text) if v not in backed)


def unbacked_numbers(record, results=RESULTS):
    """[(row index, number)] for each number of a row with "sources" that
    none of its sources holds (after rounding), and each source that is
    missing."""
    table = record.get("table", {})
    missing = []
    for index, row in enumerate(table.get("rows", [])):
        sources = table.get("sources", [None] * (index + 1))[index]
        if not sources:
            continue
        backed = set(table.get("settings", [[]] * (index + 1))[index])
        for source in sources:
            try:
                for value in _all_numbers(load(source, results)):
                    backed |= _written_forms(value)
            except KeyError as err:
                missing.append((index, str(err)))
        for value in sorted(numbers(" | ".join(row))):
            if value not in backed:
                missing.append((index, value))
    return missing


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 where a region differs")
    parser.add_argument("--results", default=RESULTS)
    args = parser.parse_args(argv)
    stale = []
    for document in DOCUMENTS:
        path = os.path.join(ROOT, document)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        fresh = regenerate(text, args.results)
        if fresh == text:
            continue
        if args.check:
            stale += [f"{document}: {name}" for name in regions(text)
                      if regenerate_one(text, name, args.results) != text]
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(fresh)
            print(f"rewrote {document}")
    if stale:
        print("stale generated regions (run `make benchmark-docs`):\n  "
              + "\n  ".join(stale), file=sys.stderr)
        return 1
    return 0


def regenerate_one(text, name, results=RESULTS):
    """`text` with only region NAME rewritten."""
    def fill(match):
        if match.group(2) != name:
            return match.group(0)
        return (match.group(1) + render(name, results) + "\n"
                + match.group(4))
    return REGION.sub(fill, text)


if __name__ == "__main__":
    sys.exit(main())
