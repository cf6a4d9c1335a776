"""Readers for local data files, with errors that name the file and line.

Generic CSV / TSV / JSONL with chosen columns, plus the formats of the data
under shared/data: the DPNR AG file, GLUE SST-2 TSV and TrustPilot CSV.
"""

import csv
import io
import json
import os
import sys

import numpy as np

from tfdptext.data.examples import DataError
from tfdptext.data.examples import Examples
from tfdptext.data.examples import TextDataset
from tfdptext.data.examples import split_indices

# Texts up to 16 MiB per field (the csv module's default is 128 KiB).
MAX_FIELD_BYTES = 16 * 2**20
csv.field_size_limit(min(sys.maxsize, MAX_FIELD_BYTES))


def read_text(path):
    """The file decoded as UTF-8, or DataError naming the bad line."""
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file.")
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.strip():
        raise DataError(f"{path}: the file is empty.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line}: bytes that are not UTF-8 ({err.reason}).") from err
    # A UTF-8 byte order mark (Excel writes one) is not part of the header.
    return text[1:] if text.startswith("\ufeff") else text


def _parse_label(value, path, line, num_classes, offset=0, what="label"):
    try:
        label = int(str(value).strip()) - offset
    except ValueError:
        raise DataError(
            f"{path}:{line}: {what} {value!r} is not an integer.") from None
    if num_classes is not None and not 0 <= label < num_classes:
        raise DataError(
            f"{path}:{line}: {what} {value!r} is out of range "
            f"[{offset}, {num_classes - 1 + offset}].")
    if label < 0:
        raise DataError(f"{path}:{line}: {what} {value!r} is negative.")
    return label


def _check_text(text, path, line):
    if text is None or not str(text).strip():
        raise DataError(f"{path}:{line}: empty text.")
    return str(text)


def _column_index(header, column, path):
    if isinstance(column, int):
        return column
    if header is None:
        raise DataError(
            f"{path}: column {column!r} given by name but the file has no "
            "header; give its index instead.")
    if column not in header:
        raise DataError(
            f"{path}: no column {column!r}; the header has {header}.")
    return header.index(column)


def _records(path, text, delimiter, multiline):
    """(first line, row) for each CSV/TSV record, with csv errors turned
    into DataError naming the file and the line where the record starts.

    A quoted field may hold newlines in CSV, but in a file of one text per
    line a quote that closes lines later silently merges rows: unless
    `multiline`, a record spanning several lines is refused."""
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter,
                      quoting=csv.QUOTE_NONE if delimiter == "\t"
                      else csv.QUOTE_MINIMAL)
    end = 0
    while True:
        start = end + 1
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as err:
            raise DataError(
                f"{path}:{start}: cannot parse the record that starts here "
                f"({err}); check its quotes.") from None
        end = rows.line_num
        if not multiline and end > start and row:
            raise DataError(
                f"{path}:{start}: a quoted field opened on line {start} "
                f"closes on line {end}, merging {end - start + 1} lines into "
                "one record; check the quotes (or, if texts really hold "
                "newlines, read with multiline=True).")
        yield start, row


def _delimited_rows(path, text_column, label_column, private_columns=(),
                    delimiter=",", has_header=True, multiline=False):
    """(line, text, raw label, {private column: raw value}) per record."""
    rows = _records(path, read_text(path), delimiter, multiline)
    header = None
    if has_header:
        _, header = next(rows, (None, None))
        if not header:
            raise DataError(f"{path}: no header line.")
    text_i = _column_index(header, text_column, path)
    label_i = _column_index(header, label_column, path)
    private_i = {str(c): _column_index(header, c, path)
                 for c in private_columns}
    needed = max([text_i, label_i, *private_i.values()])
    for line, row in rows:
        if not row:
            continue
        if len(row) <= needed:
            hint = ""
            if any(delimiter in field or "\n" in field for field in row):
                hint = (" (a field holds the delimiter: a quote opened on "
                        "this line is never closed?)")
            raise DataError(
                f"{path}:{line}: {len(row)} columns, expected at least "
                f"{needed + 1}{hint}.")
        yield (line, _check_text(row[text_i], path, line), row[label_i],
               {name: row[i] for name, i in private_i.items()})


def _jsonl_rows(path, text_key, label_key, private_keys=()):
    """(line, text, raw label, {private key: raw value}) per JSON line."""
    for line, raw in enumerate(read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{line}: invalid JSON ({err.msg}).") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}:{line}: expected a JSON object.")
        for key in (text_key, label_key, *private_keys):
            if key not in record:
                raise DataError(f"{path}:{line}: no key {key!r}.")
        yield (line, _check_text(record[text_key], path, line),
               record[label_key], {str(k): record[k] for k in private_keys})


def _examples(path, rows, label_of, private_num_classes=None):
    """Examples from `rows` (see _delimited_rows); `label_of(value, line)`
    turns a raw label into its index."""
    private_num_classes = private_num_classes or {}
    texts, labels, private = [], [], None
    for line, text, label, values in rows:
        if private is None:
            private = {name: [] for name in values}
        texts.append(text)
        labels.append(label_of(label, line))
        for name, value in values.items():
            private[name].append(_parse_label(
                value, path, line, private_num_classes.get(name),
                what=f"private attribute {name!r}"))
    if not texts:
        raise DataError(f"{path}: no examples.")
    return Examples(texts, labels, private)


def read_delimited(path, text_column, label_column, private_columns=(),
                   delimiter=",", has_header=True, num_classes=None,
                   label_offset=0, private_num_classes=None,
                   multiline=False):
    """Reads a CSV/TSV file with integer labels into Examples.

    Args:
        text_column, label_column: column names (with a header) or indices.
        private_columns: names or indices of private-attribute columns.
        num_classes: labels must be in [0, num_classes) after subtracting
            `label_offset`.
        private_num_classes: optional {column: classes} range checks.
        multiline: accept quoted fields that span lines (refused by
            default: an unbalanced quote would merge rows).
    """
    rows = _delimited_rows(path, text_column, label_column, private_columns,
                           delimiter, has_header, multiline)
    return _examples(path, rows, lambda value, line: _parse_label(
        value, path, line, num_classes, label_offset), private_num_classes)


def _is_integer(value):
    if isinstance(value, bool):
        return False
    try:
        int(str(value).strip())
    except ValueError:
        return False
    return True


def _label_text(value, path, line):
    text = str(value).strip()
    if not text:
        raise DataError(f"{path}:{line}: empty label.")
    return text


def load_files(train_file, test_file, dev_file=None, file_format=None,
               text_column=None, label_column=None, private_columns=(),
               has_header=True, num_classes=None, dev_fraction=0.1, seed=0,
               name="files"):
    """A TextDataset from generic local files (csv, tsv or jsonl).

    Labels: when every label of the train file is an integer (or
    `num_classes` is given), labels must be 0..K-1 and their names are
    "0".."K-1". When none is, they are names ("Business", "Sports"): the
    sorted distinct train labels become 0..K-1 (`label_names`), and a dev
    or test label that is not among them is a DataError naming file and
    line. A train file mixing both is refused (a typo such as "1.5" among
    integers would otherwise become a class).

    Columns: `text_column`, `label_column` (default "text", "label"; with
    `has_header=False`, indices 0 and 1) and `private_columns` are names
    (with a header, or JSON keys) or indices (without a header).

    Without `dev_file`, `dev_fraction` of the train file becomes dev (fixed
    seed).
    """
    paths = {"train": train_file, "dev": dev_file, "test": test_file}
    fmt = file_format or os.path.splitext(train_file)[1].lstrip(".").lower()
    if fmt not in ("csv", "tsv", "jsonl"):
        raise DataError(
            f"`file_format` must be csv, tsv or jsonl; got {fmt!r} for "
            f"{train_file}.")
    if text_column is None:
        text_column = "text" if has_header or fmt == "jsonl" else 0
    if label_column is None:
        label_column = "label" if has_header or fmt == "jsonl" else 1
    private_columns = list(private_columns or ())

    def rows(path):
        if fmt == "jsonl":
            return _jsonl_rows(path, text_column, label_column,
                               private_columns)
        return _delimited_rows(
            path, text_column, label_column, private_columns,
            delimiter="\t" if fmt == "tsv" else ",", has_header=has_header)

    label_names = None
    if num_classes is None:
        # The label kind is the train file's: names unless all integers.
        raw = [(line, label) for line, _, label, _ in rows(train_file)]
        integers = [_is_integer(v) for _, v in raw]
        if any(integers) and not all(integers):
            # Integer labels with a stray word or "1.5" are a typo far more
            # often than a class named "1.5": refuse rather than add one.
            line, value = raw[integers.index(False)]
            first = raw[integers.index(True)]
            raise DataError(
                f"{train_file}:{line}: label {value!r} is not an integer, "
                f"but other labels are (line {first[0]}: {first[1]!r}); use "
                "integers 0..K-1 for every label, or names for every "
                "label.")
        if raw and not any(integers):
            label_names = sorted({_label_text(v, train_file, line)
                                  for line, v in raw})
            if len(label_names) < 2:
                raise DataError(
                    f"{train_file}: a single label {label_names[0]!r}; a "
                    "classifier needs at least 2.")
    index = {n: i for i, n in enumerate(label_names or ())}

    def read(path):
        if label_names is None:
            def label_of(value, line):
                return _parse_label(value, path, line, num_classes)
        else:
            def label_of(value, line):
                text = _label_text(value, path, line)
                if text not in index:
                    raise DataError(
                        f"{path}:{line}: label {text!r} is not among the "
                        f"train file's labels {label_names[:20]} "
                        f"({train_file}).")
                return index[text]
        return _examples(path, rows(path), label_of)

    splits = {s: read(p) for s, p in paths.items() if p}
    if "dev" not in splits:
        train = splits["train"]
        dev_i, train_i = split_indices(len(train),
                                       [dev_fraction, 1 - dev_fraction], seed)
        if len(dev_i) == 0 or len(train_i) == 0:
            raise DataError(
                f"{train_file}: {len(train)} examples are too few to split "
                f"off a dev set (dev_fraction {dev_fraction:g}); give a dev "
                "file or more examples.")
        splits["train"], splits["dev"] = train.subset(train_i), train.subset(dev_i)
    if label_names is not None:
        num_classes = len(label_names)
    elif num_classes is None:
        num_classes = _inferred_classes(splits, train_file)
    private = {str(c): int(max(e.private[str(c)].max()
                               for e in splits.values())) + 1
               for c in private_columns}
    return TextDataset(name, splits, num_classes, private,
                       f"local {fmt} files", label_names)


def _inferred_classes(splits, train_file):
    """K when the labels seen are exactly 0..K-1, else DataError: labels
    {0, 7} would otherwise become 8 classes, 6 of them never seen."""
    seen = sorted({int(v) for e in splits.values() for v in e.labels})
    if seen != list(range(len(seen))) or len(seen) < 2:
        missing = sorted(set(range(seen[-1] + 1)) - set(seen))
        raise DataError(
            f"{train_file}: the labels are {seen[:20]}, not 0..K-1 with "
            f"K >= 2 (missing {missing[:20]}); renumber them, or pass "
            "num_classes if the missing classes are meant.")
    return len(seen)


AG_SEPARATOR = "=" * 20
AG_ENTITIES = 5


def load_ag_dpnr(path):
    """The DPNR paper's AG subset: `label<TAB>text<TAB>entity ids` lines.

    Three splits (train, dev, test) separated by lines of 20 '='. Private
    attributes: entity_0 .. entity_4, the presence (0/1) of each of the five
    person entities.
    """
    if os.path.isdir(path):
        path = os.path.join(path, "ag_data.txt")
    parts = [[]]
    for line, raw in enumerate(read_text(path).splitlines(), start=1):
        if raw.strip() == AG_SEPARATOR:
            parts.append([])
            continue
        if not raw.strip():
            continue
        fields = raw.split("\t")
        if len(fields) != 3:
            raise DataError(
                f"{path}:{line}: expected 3 tab-separated fields (label, "
                f"text, entity ids), found {len(fields)}.")
        label = _parse_label(fields[0], path, line, 4)
        text = _check_text(fields[1], path, line)
        presence = [0] * AG_ENTITIES
        for token in fields[2].split():
            entity = _parse_label(token, path, line, AG_ENTITIES,
                                  what="entity id")
            presence[entity] = 1
        parts[-1].append((text, label, presence))
    parts = [p for p in parts if p]
    if len(parts) != 3:
        raise DataError(
            f"{path}: expected 3 splits separated by '{AG_SEPARATOR}', "
            f"found {len(parts)}.")
    splits = {}
    for split, rows in zip(("train", "dev", "test"), parts):
        presence = np.array([r[2] for r in rows], dtype=np.int32)
        splits[split] = Examples(
            [r[0] for r in rows], [r[1] for r in rows],
            {f"entity_{i}": presence[:, i] for i in range(AG_ENTITIES)})
    return TextDataset(
        "ag_dpnr", splits, 4, {f"entity_{i}": 2 for i in range(AG_ENTITIES)},
        "DPNR's AG News subset (Lyu et al. 2020) with 5 person entities",
        ["World", "Sports", "Business", "Sci-Tech"])


def load_sst2(data_dir):
    """GLUE SST-2 as TSV files `{train,dev,test}.tsv` (header sentence, label)."""
    splits = {
        split: read_delimited(os.path.join(data_dir, f"{split}.tsv"),
                              "sentence", "label", delimiter="\t",
                              num_classes=2)
        for split in ("train", "dev", "test")
    }
    return TextDataset("sst2", splits, 2, {}, "GLUE SST-2 (test = GLUE dev)",
                       ["negative", "positive"])


def load_trustpilot(data_dir, seed=0, country=None):
    """TrustPilot reviews: valid.csv + test.csv pooled, split 8:1:1.

    Columns (no header): text, rating 1-5, gender 0/1, age 0/1, country.
    Task label: rating - 1 (5 classes). Private: gender, age. `country`
    (e.g. "united_states", as DPNR's TP-US) keeps one country only.
    """
    parts = []
    for name in ("valid.csv", "test.csv"):
        path = os.path.join(data_dir, name)
        ex = read_delimited(path, 0, 1, (2, 3), has_header=False,
                            num_classes=5, label_offset=1,
                            private_num_classes={"2": 2, "3": 2})
        if country is not None:
            rows = list(csv.reader(io.StringIO(read_text(path), newline="")))
            keep = [i for i, r in enumerate(r for r in rows if r)
                    if r[4].strip() == country]
            ex = ex.subset(keep)
        parts.append(Examples(ex.texts, ex.labels,
                              {"gender": ex.private["2"],
                               "age": ex.private["3"]}))
    pooled = Examples.concatenate(parts)
    if len(pooled) < 10:
        raise DataError(
            f"{data_dir}: only {len(pooled)} TrustPilot reviews"
            + (f" for country {country!r}" if country else "") + ".")
    train_i, dev_i, test_i = split_indices(len(pooled), [0.8, 0.1, 0.1], seed)
    splits = {"train": pooled.subset(train_i), "dev": pooled.subset(dev_i),
              "test": pooled.subset(test_i)}
    return TextDataset(
        "trustpilot" + (f"_{country}" if country else ""), splits, 5,
        {"gender": 2, "age": 2},
        "TrustPilot reviews (Hovy et al. 2015), pooled, split 8:1:1 with "
        f"seed {seed}", ["1", "2", "3", "4", "5"])
