#!/usr/bin/env python
"""The docs' plots (docs/img/*.png), drawn from the committed results.

Each plot of docs/benchmarks.md and docs/benchmarks-archive.md is drawn
here from the JSON of benchmarks/results/ that holds its data (`PLOTS`
names, per file, the results it reads), so `make benchmark-docs` redraws
them all and a plot shows exactly the numbers of the table beside it. The
output is byte for byte reproducible with the same matplotlib: the Agg
backend, matplotlib's default style (no user matplotlibrc), and PNG holds
no date; its "Software" text names the matplotlib version that drew it
(`drawn_with`), since another version may draw other bytes.

Several results are transcribed from the docs after their raw runs were
lost: their plots draw the table's rounded values at the table's points
(no curve between them, no per-seed spread the table does not hold).

    .venv/bin/python benchmarks/docs_plots.py            # redraw all
    .venv/bin/python benchmarks/docs_plots.py --check    # compare only
"""

import argparse
import io
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import docs_tables  # noqa: E402

ROOT = docs_tables.ROOT
IMG = os.path.join(ROOT, "docs", "img")
_FIRST = re.compile(r"[-+]?\d*\.?\d+")


def _num(cell):
    """The first number of a table cell (".5608 (BERT-base)" -> 0.5608),
    None where it has none ("-", "same", "not recorded")."""
    found = _FIRST.search(cell)
    return float(found.group(0)) if found else None


def _pair(cell):
    """The two numbers of an "a / b" cell."""
    return [_num(part) for part in cell.split("/")]


def _table(name):
    """(columns, rows) of the "table" result NAME."""
    table = docs_tables.load(name)["table"]
    return table["columns"], table["rows"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcdefaults()
    return plt


def _lines(plt, xs, series, baseline, **axes):
    """One small panel: (ys, style, label) per line and a grey dotted
    (value, label) baseline, accuracies on [0, 1.05]."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for ys, style, label in series:
        ax.plot(xs, ys, style, label=label)
    ax.axhline(baseline[0], color="grey", ls=":", label=baseline[1])
    ax.set(ylim=(0, 1.05), **axes)
    ax.legend(fontsize=7)
    return fig


def dpnr_ag_eps(plt):
    _, rows = _table("dpnr-table-2-analogue-ag-accuracy-vs-eps")
    private = [r for r in rows if r[0] != "none"]
    none = next(r for r in rows if r[0] == "none")
    return _lines(
        plt, [_num(r[0]) for r in private],
        [([_num(r[column]) / 100 for r in private], style, label)
         for column, style, label in (
             (1, "o-", "test accuracy (ours)"),
             (4, "s--", "test accuracy (DPNR, BERT-base)"),
             (3, "^-", "empirical privacy 1-F (ours)"))],
        (_num(none[1]) / 100, "non-private (ours)"), xscale="log",
        xlabel="eps per coordinate", title="DPNR on AG, MiniLM")


def qu_sst2_eta(plt):
    _, rows = _table("qu-et-al-tables-3-and-4-analogue-sst-2")
    _, runs = _table("training-qu-et-al-privacy-constrained")
    full = next(r for r in runs if r[0] == "sst2_none_full")
    return _lines(
        plt, [_num(r[0]) for r in rows],
        [([_num(r[column]) / scale for r in rows], "o-", label)
         for column, label, scale in (
             (2, "token_rep accuracy", 100),
             (3, "text_to_text accuracy", 100),
             (1, "inversion accuracy (privacy loss)", 1))],
        (_num(full[7]), "non-private"), xlabel="eta (d_chi, per token)",
        title="Qu et al. on SST-2, MiniLM")


def ag_private_dim(plt):
    _, rows = _table("training-a-private-representation-of-k")
    _, table4 = _table("dpnr-table-4-analogue-ag-main-task-and")
    rows = [r for r in rows if _num(r[1]) == 19.2]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for normalization in sorted({r[0].split(", ")[1] for r in rows}):
        line = sorted((r for r in rows if r[0].endswith(normalization)),
                      key=lambda r: _num(r[0]))
        ks = [_num(r[0]) for r in line]
        label = f"{normalization}, eps = 19.2"
        axes[0].plot(ks, [_num(r[4]) for r in line], "o-", label=label)
        axes[1].plot(ks, [_num(r[6]) for r in line], "o-", label=label)
    majority = next(r for r in table4 if r[0] == "majority class")
    axes[0].axhline(_num(majority[1]) / 100, color="grey", ls=":",
                    label="majority class")
    axes[0].axhline(0.70, color="red", ls="--", lw=0.8, label="target 0.70")
    axes[1].axhline(_num(rows[0][7]), color="grey", ls=":",
                    label="majority guess (no leak)")
    axes[0].set_ylabel("AG test accuracy (fresh noise)")
    axes[1].set_ylabel("entity 1 - F (higher = more private)")
    for ax in axes:
        ax.set(xscale="log",
               xlabel="private dimension k (eps 19.2 per representation)")
        ax.legend(fontsize=7)
    return fig


def pareto_frozen(plt):
    fig, axes = plt.subplots(1, 2, figsize=(10.8, 3.8))
    for ax, (dataset, name) in zip(axes, (
            ("ag_dpnr", "on-frozen-encoder-features-the-whole"),
            ("sst2", "on-frozen-encoder-features-the-whole-2"))):
        columns, rows = _table(name)
        eps = [_num(c) for c in columns[1:]]
        styles = {"bound": ("k:", "bound (any release)"),
                  "limit": ("k--", "limit (best LDP channel on the "
                                   "non-private prediction)")}
        for row in rows:
            key = row[0].split(" ")[0]
            if key == "none":
                ax.axhline(_num(row[1]), color="grey", ls=":",
                           label=f"non-private ({row[1]})")
            elif key in styles:
                ax.plot(eps, [_num(c) for c in row[1:]], styles[key][0],
                        lw=1, label=styles[key][1])
            elif key != "K-ary":
                ax.plot(eps, [_num(c) for c in row[1:]], "o-", label=key)
        ax.set(xscale="log", xlabel="epsilon per text",
               ylabel="test accuracy",
               title=f"{dataset}, frozen encoder features")
        ax.legend(fontsize=7)
    return fig


def mechanism_utility(plt):
    _, rows = _table("utility-at-matched-shares-of-words")
    fig, axes = plt.subplots(2, 2, figsize=(12, 9.2))
    markers = "osD^v<>ph*8"
    for line, (data, label) in zip(axes, (("AG", "ag_dpnr"),
                                          ("SST-2", "sst2"))):
        part = [r for r in rows if r[0] == data]
        for index, row in enumerate(sorted(part, key=lambda r: r[1])):
            accuracy = _pair(row[4])
            for ax, column in zip(line, (5, 6)):
                ax.plot(_pair(row[column]), accuracy,
                        "-" + markers[index % len(markers)], label=row[1])
        line[0].set(xlabel="share of words changed",
                    ylabel=f"{label} test accuracy")
        line[1].set(xlabel="N_w / samples (plausible deniability; lower "
                           "is more private)")
        line[0].legend(fontsize=7)
        for ax in line:
            ax.grid(alpha=0.3)
    return fig


def _brr(plt, column_of, ylabel, x_column=0, xlabel="Madlib epsilon"):
    """Madlib and BRR per data set: `column_of` (madlib, brr) columns of
    the two utility tables against `x_column`."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, (data, name) in zip(axes, (
            ("SST-2", "brr-vs-madlib-utility-deniability-and"),
            ("AG", "brr-vs-madlib-utility-deniability-and-2"))):
        _, rows = _table(name)
        base = next(r for r in rows if r[0] == "non-private")
        private = [r for r in rows if r[0] != "non-private"]
        for mechanism, column, colour in zip(("Madlib", "BRR"), column_of,
                                             ("tab:blue", "tab:orange")):
            xs = [_num(r[x_column[mechanism] if isinstance(x_column, dict)
                         else x_column]) for r in private]
            ax.plot(xs, [_num(r[column]) for r in private], "o-",
                    color=colour, label=mechanism)
        ax.axhline(_num(base[column_of[0]]), color="grey", ls=":",
                   label="non-private")
        ax.set(xlabel=xlabel, ylabel=ylabel, title=data)
        if x_column == 0:
            ax.set_xscale("log")
        ax.legend(fontsize=7)
    return fig


def brr_utility_accuracy(plt):
    return _brr(plt, (2, 3), "test accuracy (clean test)")


def brr_utility_mia(plt):
    return _brr(plt, (6, 7), "shadow-model MIA AUC")


def brr_utility_tradeoff(plt):
    return _brr(plt, (2, 3), "test accuracy (clean test)",
                x_column={"Madlib": 4, "BRR": 5},
                xlabel="share of training tokens changed")


def brr_utility_deniability(plt):
    _, rows = _table("brr-vs-madlib-utility-deniability-and-3")
    eps = [_num(r[0]) for r in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for column, label, style in ((2, "Madlib N_w", "o-"),
                                 (3, "Madlib S_w", "o--"),
                                 (4, "BRR N_w", "s-"), (5, "BRR S_w", "s--")):
        ax.plot(eps, [_num(r[column]) for r in rows], style, label=label)
    ax.set(xscale="log", xlabel="Madlib epsilon (BRR at the matched one)",
           ylabel="median over 50 words, of 1,000")
    ax.legend(fontsize=7)
    return fig


def sst2_pretraining_tables67(plt):
    colours = ("black", "grey", "tab:blue", "tab:orange", "tab:green")
    values = docs_tables.load("pretraining-summary")["values"]
    fig, axes = plt.subplots(1, 2, sharey=True, figsize=(11, 4.5))
    for ax, (mode, name) in zip(axes, (
            ("token_rep (Table 6 analogue)", "pretraining-token-rep"),
            ("text_to_text (Table 7 analogue)", "pretraining-text-to-text"))):
        _, rows = _table(name)
        etas, eta = [], None
        for row in rows:
            if row[0]:
                eta = f"{row[0].split(' ')[0]}\n(Qu {row[1].split(' ')[0]})"
                etas.append(eta)
            row.append(eta)
        encoders = list(dict.fromkeys(r[2] for r in rows))
        for offset, (encoder, colour) in enumerate(zip(encoders, colours)):
            line = [r for r in rows if r[2] == encoder]
            xs = [etas.index(r[-1]) + 0.06 * (offset - 2) for r in line]
            mean = [_num(r[3]) for r in line]
            spread = [_num(r[3].split("±")[1]) for r in line]
            ax.errorbar(xs, mean, yerr=spread, fmt="o-", color=colour,
                        capsize=3, label=encoder)
            paper = [(x, _num(r[7])) for x, r in zip(xs, line)
                     if _num(r[7]) is not None]
            if paper:
                ax.plot(*zip(*paper), "x--", color=colour, alpha=0.6)
        ax.axhline(values["non_private_same_budget"]["mean"], color="tab:red",
                   lw=1, label="non-private, same budget "
                   f"({values['non_private_same_budget']['mean']})")
        ax.axhline(values["majority_class"], color="grey", ls=":", lw=1,
                   label="majority class")
        ax.set_xticks(range(len(etas)), etas)
        ax.set(title=mode, ylim=(0.4, 1.0), xlabel="eta (MiniLM; Qu et "
               "al.'s BERT-base eta of the same inversion rate)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("SST-2 test accuracy (solid: ours, mean ± sd; "
                       "dashed: Qu et al.)", fontsize=8)
    axes[1].legend(fontsize=7)
    return fig


def sst2_pretraining(plt):
    _, rows = _table("pretraining-earlier-run-2026-11-22")
    fig, ax = plt.subplots(figsize=(6, 3.4))
    names = [r[0] for r in rows]
    ax.bar(range(len(rows)), [_num(r[5]) for r in rows],
           label="ours (MiniLM, token_rep, eta 80)")
    ax.plot(range(len(rows)), [_num(r[7]) for r in rows], "kx",
            label="Qu et al. Table 6, eta 125")
    ax.set_xticks(range(len(rows)), names, fontsize=7)
    ax.set(ylabel="SST-2 test accuracy", ylim=(0, 1))
    ax.legend(fontsize=7)
    return fig


# docs/img/NAME: (the function that draws it, the results it reads).
PLOTS = {
    "dpnr_ag_eps.png": (dpnr_ag_eps,
                        ["dpnr-table-2-analogue-ag-accuracy-vs-eps"]),
    "qu_sst2_eta.png": (qu_sst2_eta,
                        ["qu-et-al-tables-3-and-4-analogue-sst-2",
                         "training-qu-et-al-privacy-constrained"]),
    "ag_private_dim.png": (ag_private_dim,
                           ["training-a-private-representation-of-k",
                            "dpnr-table-4-analogue-ag-main-task-and"]),
    "pareto_frozen.png": (pareto_frozen,
                          ["on-frozen-encoder-features-the-whole",
                           "on-frozen-encoder-features-the-whole-2"]),
    "mechanism_utility.png": (mechanism_utility,
                              ["utility-at-matched-shares-of-words"]),
    "brr_utility_accuracy.png": (brr_utility_accuracy, [
        "brr-vs-madlib-utility-deniability-and",
        "brr-vs-madlib-utility-deniability-and-2"]),
    "brr_utility_mia.png": (brr_utility_mia, [
        "brr-vs-madlib-utility-deniability-and",
        "brr-vs-madlib-utility-deniability-and-2"]),
    "brr_utility_tradeoff.png": (brr_utility_tradeoff, [
        "brr-vs-madlib-utility-deniability-and",
        "brr-vs-madlib-utility-deniability-and-2"]),
    "brr_utility_deniability.png": (brr_utility_deniability, [
        "brr-vs-madlib-utility-deniability-and-3"]),
    "sst2_pretraining_tables67.png": (sst2_pretraining_tables67, [
        "pretraining-token-rep", "pretraining-text-to-text",
        "pretraining-summary"]),
    "sst2_pretraining.png": (sst2_pretraining,
                             ["pretraining-earlier-run-2026-11-22"]),
}


def draw(name):
    """The PNG bytes of docs/img/NAME, drawn from its results."""
    plt = _pyplot()
    fig = PLOTS[name][0](plt)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110,
                metadata={"Software": _software()})
    plt.close(fig)
    return buffer.getvalue()


def _software():
    import matplotlib

    return f"matplotlib {matplotlib.__version__}"


def drawn_with(path):
    """The "Software" text of the PNG at `path` (the matplotlib that drew
    it), or None."""
    with open(path, "rb") as f:
        data = f.read()
    at = 8  # after the signature: chunks of length, type, data, CRC
    while at + 8 <= len(data):
        length = int.from_bytes(data[at:at + 4], "big")
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Software\0"):
            return body.split(b"\0", 1)[1].decode("latin-1")
        at += 12 + length
    return None


def stale(img=IMG):
    """The plots whose committed PNG differs from what their JSON draws."""
    found = []
    for name in PLOTS:
        path = os.path.join(img, name)
        if not os.path.exists(path):
            found.append(name)
            continue
        with open(path, "rb") as f:
            if f.read() != draw(name):
                found.append(name)
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 where a plot differs")
    args = parser.parse_args(argv)
    if args.check:
        differ = stale()
        for name in differ:
            print(f"stale plot: docs/img/{name} (run `make benchmark-docs`)")
        return 1 if differ else 0
    os.makedirs(IMG, exist_ok=True)
    for name in PLOTS:
        with open(os.path.join(IMG, name), "wb") as f:
            f.write(draw(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
