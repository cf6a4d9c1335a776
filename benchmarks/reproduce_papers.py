#!/usr/bin/env python
"""Tables and plots of the DPNR and Qu et al. reproductions, from runs.

Reads runs/<name>/metrics.json and runs/<name>/eval/eval.json (made by
tfdptext-train with the flag files in train/flags/ and tfdptext-eval) and
prints markdown tables with the papers' BERT-base numbers beside ours;
writes each table as a provenance record (benchmarks/results/, the docs
region's name; `make benchmark-docs` writes them into docs/benchmarks.md)
and every run's values into benchmarks/results/reproduce_papers.json;
draws dpnr_ag_eps.png and qu_sst2_eta.png from those records.

    python benchmarks/reproduce_papers.py --runs_dir=runs --img_dir=docs/img
"""

import json
import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import docs_plots  # noqa: E402
from benchmarks import docs_tables  # noqa: E402
from benchmarks import machine  # noqa: E402
from tfdptext import rundir  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("runs_dir", "runs", "Where the runs are.")
flags.DEFINE_string("img_dir", "docs/img", "Where to draw the plots.")

# The papers' numbers (BERT-base; ../shared/docs/mechanisms.md).
DPNR_AG_EPS = {"none": 78.75, 0.05: 80.87, 0.1: 80.78, 0.5: 79.71, 1: 79.36,
               5: 79.59}
DPNR_AG_MU = {0.1: 80.71, 0.3: 79.18, 0.5: 77.42, 0.8: 69.57}
QU_INVERSION = {50: 0.0154, 75: 0.1084, 100: 0.3402, 125: 0.6354,
                150: 0.8500, 175: 0.9511}


def _load(name, what):
    path = os.path.join(FLAGS.runs_dir, name, *what)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _metrics(name):
    return _load(name, [rundir.METRICS])


def _eval(name):
    return _load(name, [rundir.EVAL, rundir.EVAL_RESULT])


def _f(x, scale=100, digits=1):
    return "-" if x is None else f"{x * scale:.{digits}f}"


def _privacy(result, group):
    if not result or "attack" not in result:
        return None, None
    row = result["attack"]["empirical_privacy"].get(group)
    return (row["strongest"], row["majority"]) if row else (None, None)


# The docs regions (docs/benchmarks.md) the tables are written into.
REGIONS = {"dpnr_eps": "dpnr-table-2-analogue-ag-accuracy-vs-eps",
           "dpnr_mu": "dpnr-table-3-analogue-ag-accuracy-vs-mu",
           "dpnr_main": "dpnr-table-4-analogue-ag-main-task-and",
           "dpnr_entity": "dpnr-table-5-analogue-ag-entity-attack",
           "trustpilot": "dpnr-table-6-analogue-trustpilot",
           "qu_sst2": "qu-et-al-tables-3-and-4-analogue-sst-2"}


def _table(columns, rows):
    return {"columns": columns, "rows": rows}


def dpnr_eps_table(raw):
    rows = []
    for eps in ("none", 0.05, 0.1, 0.5, 1, 5):
        name = "ag_dpnr_none" if eps == "none" else f"ag_dpnr_eps{eps:g}"
        m, e = _metrics(name), _eval(name)
        raw[name] = {"metrics": m, "eval": e}
        acc = m["test_accuracy"] if m else None
        priv, _ = _privacy(e, "entity")
        redraw = e["utility"]["accuracy"] if e else None
        rows.append([str(eps), _f(acc), _f(redraw), _f(priv),
                     str(DPNR_AG_EPS[eps])])
    return _table(["eps (per coordinate)",
                   "test acc % (ours, MiniLM, 1 epoch)",
                   "test acc %, eval's fresh noise draw",
                   "empirical privacy 1-F % (strongest attacker)",
                   "DPNR paper acc % (BERT-base)"], rows)


def dpnr_mu_table(raw):
    rows = []
    for mu in (0.1, 0.3, 0.5, 0.8):
        name = f"ag_dpnr_eps1_mu{mu:g}"
        m = _metrics(name)
        raw[name] = {"metrics": m}
        rows.append([str(mu), _f(m["test_accuracy"] if m else None),
                     str(DPNR_AG_MU[mu])])
    return _table(["mu", "test acc % (ours)", "DPNR paper acc %"], rows)


def dpnr_main_table(raw):
    rows = []
    none = _eval("ag_dpnr_none")
    if none:
        _, majority = _privacy(none, "entity")
        rows.append(["majority class",
                     _f(none["utility"]["majority_accuracy"]),
                     _f(majority), "57.79 / 49.34"])
    for label, name, paper in (("non-private", "ag_dpnr_none",
                                "78.75 / 23.24"),
                               ("ADV (lambda 1)", "ag_dpnr_adv", "-"),
                               ("DPNR eps 0.05", "ag_dpnr_eps0.05",
                                "80.87 / 54.37")):
        e = _eval(name)
        raw.setdefault(name, {})["eval"] = e
        priv, _ = _privacy(e, "entity")
        acc = e["utility"]["accuracy"] if e else None
        rows.append([label, _f(acc), _f(priv), paper])
    return _table(["model", "main acc %",
                   "empirical privacy 1-F % (strongest attacker)",
                   "DPNR paper main / privacy"], rows)


def dpnr_entity_table(raw):
    rows = []
    for label, name in (("non-private", "ag_dpnr_none"),
                        ("ADV", "ag_dpnr_adv"),
                        ("DPNR eps 0.05", "ag_dpnr_eps0.05")):
        e = _eval(name)
        if not e or "attack" not in e:
            continue
        for attribute, kinds in e["attack"]["per_attribute"].items():
            r = kinds["mlp"]
            per_class = r.get("per_class_accuracy", {})
            rows.append([label, attribute, _f(per_class.get("0")),
                         _f(per_class.get("1")),
                         str(r.get("n_test_per_class", {}).get("1", "-"))])
    return _table(["model", "entity", "attacker acc on 'absent'",
                   "on 'present'", "n present (test)"], rows)


def trustpilot_table(raw):
    rows = []
    for label, name in (("non-private", "trustpilot_none"),
                        ("ADV (lambda 1)", "trustpilot_adv"),
                        ("DPNR eps 1", "trustpilot_eps1")):
        e = _eval(name)
        if not e:
            continue
        raw[name] = {"eval": e}
        per = e["attack"]["per_attribute"]
        cells, best = [], []
        for attribute in ("gender", "age"):
            accs = [per[attribute][k]["accuracy"]
                    for k in ("mlp", "logistic_regression")]
            cells.append(" / ".join(
                _f(a["mean"]) + (f" ± {a['std'] * 100:.1f}"
                                 if a["runs"] > 1 else "") for a in accs))
            best.append(max(a["mean"] for a in accs))
        majority = 1 - sum(per[a]["mlp"]["majority_accuracy"]
                           for a in ("gender", "age")) / 2
        rows.append([label, _f(e["utility"]["accuracy"]), cells[0],
                     cells[1], f"{_f(1 - sum(best) / 2)} (majority "
                     f"{_f(majority)})", _f(e["fairness"]["gender"]["gap"]),
                     _f(e["fairness"]["age"]["gap"])])
    return _table(["model", "sentiment acc %",
                   "gender attacker acc % (mlp / logistic regression)",
                   "age attacker acc % (mlp / logistic regression)",
                   "empirical privacy 1-X % (stronger of the two)",
                   "gender gap", "age gap"], rows)


def qu_sst2_table(raw):
    rows = []
    for eta in (40, 60, 80, 100, 120):
        tr, tt = (f"sst2_token_rep_eta{eta}", f"sst2_text_to_text_eta{eta}")
        m_tr, m_tt, e_tr, e_tt = _metrics(tr), _metrics(tt), _eval(tr), \
            _eval(tt)
        if not (m_tr or m_tt):
            continue
        raw[tr] = {"metrics": m_tr, "eval": e_tr}
        raw[tt] = {"metrics": m_tt, "eval": e_tt}
        inv = e_tr["token_level"]["inversion_accuracy"] if e_tr else None
        unchanged = (e_tt["token_level"]["inversion_accuracy"]
                     if e_tt else None)
        den = (e_tr or e_tt or {}).get("token_level", {}).get("deniability")
        den_text = (f"{den['n_w_median']:g} / {den['s_w_median']:g}"
                    if den else "-")
        rows.append([str(eta), _f(inv, 1, 3),
                     _f(m_tr and m_tr["test_accuracy"]),
                     _f(m_tt and m_tt["test_accuracy"]),
                     _f(unchanged, 1, 3), den_text])
    return _table(["eta", "inversion acc (token_rep release)",
                   "token_rep acc %", "text_to_text acc %",
                   "unchanged share (text_to_text release)",
                   "median N_w / S_w (100 tokens x 1,000)"], rows)


TABLES = {"dpnr_eps": dpnr_eps_table, "dpnr_mu": dpnr_mu_table,
          "dpnr_main": dpnr_main_table, "dpnr_entity": dpnr_entity_table,
          "trustpilot": trustpilot_table, "qu_sst2": qu_sst2_table}
# The plots, drawn from the results just written (benchmarks/docs_plots.py,
# as `make benchmark-docs` draws them).
PLOTS = ("dpnr_ag_eps.png", "qu_sst2_eta.png")


def main(argv):
    del argv
    raw = {}
    for key, build in TABLES.items():
        table = build(raw)
        print(f"\n### {REGIONS[key]}\n")
        print(docs_tables.table_markdown({"name": REGIONS[key],
                                          "table": table}))
        machine.write_json(None, {"from": "reproduce_papers"},
                           name=REGIONS[key], table=table)
    # Every run's metrics and evaluation the tables come from.
    machine.write_json(None, {"runs": raw, "papers": {
        "dpnr_ag_eps": {str(k): v for k, v in DPNR_AG_EPS.items()},
        "dpnr_ag_mu": DPNR_AG_MU, "qu_inversion": QU_INVERSION}})
    print("\nDPNR paper (BERT-base, TP-US): main 85.53 non-private; "
          "privacy 1-X: non-private 34.71, DPNR 38.37, majority 36.39.")
    print("Qu et al. (BERT-base, 768-d) inversion accuracy: " + ", ".join(
        f"eta {k}: {v}" for k, v in QU_INVERSION.items()))
    os.makedirs(FLAGS.img_dir, exist_ok=True)
    for name in PLOTS:
        with open(os.path.join(FLAGS.img_dir, name), "wb") as f:
            f.write(docs_plots.draw(name))
        print(f"![{name}](img/{name})")


if __name__ == "__main__":
    app.run(main)
