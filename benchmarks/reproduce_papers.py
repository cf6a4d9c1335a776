#!/usr/bin/env python
"""Tables and plots of the DPNR and Qu et al. reproductions, from runs.

Reads runs/<name>/metrics.json and runs/<name>/eval/eval.json (made by
tfdptext-train with the flag files in train/flags/ and tfdptext-eval) and
prints markdown tables with the papers' BERT-base numbers beside ours;
draws docs/img/*.png.

    python benchmarks/reproduce_papers.py --runs_dir=runs --img_dir=docs/img
"""

import json
import os

from absl import app
from absl import flags

from tfdptext import rundir

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


def ag_tables(plt):
    print("### DPNR Table 2 analogue: AG accuracy vs eps (mu = 0)\n")
    print("| eps (per coordinate) | test acc % (ours, MiniLM, 1 epoch) | "
          "test acc %, eval's fresh noise draw | empirical privacy 1-F % "
          "(strongest attacker) | DPNR paper acc % (BERT-base) |")
    print("|---|---|---|---|---|")
    xs, accs, privs = [], [], []
    for eps in ("none", 0.05, 0.1, 0.5, 1, 5):
        name = "ag_dpnr_none" if eps == "none" else f"ag_dpnr_eps{eps:g}"
        m, e = _metrics(name), _eval(name)
        acc = m["test_accuracy"] if m else None
        priv, _ = _privacy(e, "entity")
        redraw = e["utility"]["accuracy"] if e else None
        print(f"| {eps} | {_f(acc)} | {_f(redraw)} | {_f(priv)} | "
              f"{DPNR_AG_EPS[eps]} |")
        if eps != "none" and acc is not None:
            xs.append(eps)
            accs.append(acc)
            privs.append(priv)
    print("\n### DPNR Table 3 analogue: AG accuracy vs mu (eps = 1)\n")
    print("| mu | test acc % (ours) | DPNR paper acc % |")
    print("|---|---|---|")
    for mu in (0.1, 0.3, 0.5, 0.8):
        m = _metrics(f"ag_dpnr_eps1_mu{mu:g}")
        print(f"| {mu} | {_f(m['test_accuracy'] if m else None)} | "
              f"{DPNR_AG_MU[mu]} |")
    print("\n### DPNR Table 4 analogue: AG main task and empirical privacy\n")
    print("| model | main acc % | empirical privacy 1-F % (strongest "
          "attacker) | DPNR paper main / privacy |")
    print("|---|---|---|---|")
    none = _eval("ag_dpnr_none")
    if none:
        u = none["utility"]
        _, majority = _privacy(none, "entity")
        print(f"| majority class | {_f(u['majority_accuracy'])} | "
              f"{_f(majority)} | 57.79 / 49.34 |")
    for label, name, paper in (("non-private", "ag_dpnr_none",
                                "78.75 / 23.24"),
                               ("ADV (lambda 1)", "ag_dpnr_adv", "-"),
                               ("DPNR eps 0.05", "ag_dpnr_eps0.05",
                                "80.87 / 54.37")):
        e = _eval(name)
        priv, _ = _privacy(e, "entity")
        acc = e["utility"]["accuracy"] if e else None
        print(f"| {label} | {_f(acc)} | {_f(priv)} | {paper} |")
    print("\n### DPNR Table 5 analogue: AG entity attack accuracy by class\n")
    print("| model | entity | attacker acc on 'absent' | on 'present' | "
          "n present (test) |")
    print("|---|---|---|---|---|")
    for label, name in (("non-private", "ag_dpnr_none"),
                        ("ADV", "ag_dpnr_adv"),
                        ("DPNR eps 0.05", "ag_dpnr_eps0.05")):
        e = _eval(name)
        if not e or "attack" not in e:
            continue
        for attribute, kinds in e["attack"]["per_attribute"].items():
            r = kinds["mlp"]
            per_class = r.get("per_class_accuracy", {})
            print(f"| {label} | {attribute} | {_f(per_class.get('0'))} | "
                  f"{_f(per_class.get('1'))} | "
                  f"{r.get('n_test_per_class', {}).get('1', '-')} |")
    if xs:
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.plot(xs, accs, "o-", label="test accuracy (ours)")
        ax.plot(xs, [DPNR_AG_EPS[x] / 100 for x in xs], "s--",
                label="test accuracy (DPNR, BERT-base)")
        if all(p is not None for p in privs):
            ax.plot(xs, privs, "^-", label="empirical privacy 1-F (ours)")
        m = _metrics("ag_dpnr_none")
        if m:
            ax.axhline(m["test_accuracy"], color="grey", ls=":",
                       label="non-private (ours)")
        ax.set_xscale("log")
        ax.set_xlabel("eps per coordinate")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7)
        ax.set_title("DPNR on AG, MiniLM")
        _save(fig, "dpnr_ag_eps.png")


def trustpilot_table():
    print("\n### DPNR Table 6 analogue: TrustPilot\n")
    print("| model | sentiment acc % | gender attacker acc % (mlp / "
          "logistic regression) | age attacker acc % (mlp / logistic "
          "regression) | empirical privacy 1-X % (stronger of the two) | "
          "gender gap | age gap |")
    print("|---|---|---|---|---|---|---|")
    for label, name in (("non-private", "trustpilot_none"),
                        ("ADV (lambda 1)", "trustpilot_adv"),
                        ("DPNR eps 1", "trustpilot_eps1")):
        e = _eval(name)
        if not e:
            continue
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
        print(f"| {label} | {_f(e['utility']['accuracy'])} | {cells[0]} | "
              f"{cells[1]} | {_f(1 - sum(best) / 2)} (majority "
              f"{_f(majority)}) | {_f(e['fairness']['gender']['gap'])} | "
              f"{_f(e['fairness']['age']['gap'])} |")
    print("\nDPNR paper (BERT-base, TP-US): main 85.53 non-private; "
          "privacy 1-X: non-private 34.71, DPNR 38.37, majority 36.39.")


def sst2_tables(plt):
    print("\n### Qu et al. Tables 3 and 4 analogue: SST-2\n")
    print("| eta | inversion acc (token_rep release) | token_rep acc % | "
          "text_to_text acc % | unchanged share (text_to_text release) | "
          "median N_w / S_w (100 tokens x 1,000) |")
    print("|---|---|---|---|---|---|")
    rows = []
    for eta in (40, 60, 80, 100, 120):
        tr, tt = (f"sst2_token_rep_eta{eta}", f"sst2_text_to_text_eta{eta}")
        m_tr, m_tt, e_tr, e_tt = _metrics(tr), _metrics(tt), _eval(tr), \
            _eval(tt)
        if not (m_tr or m_tt):
            continue
        inv = e_tr["token_level"]["inversion_accuracy"] if e_tr else None
        unchanged = (e_tt["token_level"]["inversion_accuracy"]
                     if e_tt else None)
        rows.append((eta, inv, m_tr and m_tr["test_accuracy"],
                     m_tt and m_tt["test_accuracy"]))
        den = (e_tr or e_tt or {}).get("token_level", {}).get("deniability")
        den_text = (f"{den['n_w_median']:g} / {den['s_w_median']:g}"
                    if den else "-")
        print(f"| {eta} | {_f(inv, 1, 3)} | "
              f"{_f(m_tr and m_tr['test_accuracy'])} | "
              f"{_f(m_tt and m_tt['test_accuracy'])} | "
              f"{_f(unchanged, 1, 3)} | {den_text} |")
    none = _metrics("sst2_none_full") or _metrics("sst2_none")
    if none:
        print(f"\nNon-private: {_f(none['test_accuracy'])} % "
              f"({none['sizes']['train']:,} training examples).")
    print("\nQu et al. (BERT-base, 768-d) inversion accuracy: " + ", ".join(
        f"eta {k}: {v}" for k, v in QU_INVERSION.items()))
    if rows:
        fig, ax = plt.subplots(figsize=(5, 3.2))
        etas = [r[0] for r in rows]
        for i, label in ((2, "token_rep accuracy"),
                         (3, "text_to_text accuracy"),
                         (1, "inversion accuracy (privacy loss)")):
            ax.plot(etas, [r[i] if r[i] is not None else float("nan")
                           for r in rows], "o-", label=label)
        if none:
            ax.axhline(none["test_accuracy"], color="grey", ls=":",
                       label="non-private")
        ax.set_xlabel("eta (d_chi, per token)")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7)
        ax.set_title("Qu et al. on SST-2, MiniLM")
        _save(fig, "qu_sst2_eta.png")


def _save(fig, name):
    os.makedirs(FLAGS.img_dir, exist_ok=True)
    fig.tight_layout()
    fig.savefig(os.path.join(FLAGS.img_dir, name), dpi=110)
    print(f"\n![{name}](img/{name})")


def main(argv):
    del argv
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ag_tables(plt)
    trustpilot_table()
    sst2_tables(plt)


if __name__ == "__main__":
    app.run(main)
