"""The report (rundir.EVAL_REPORT) and PNG plots of one evaluation (see
evaluate.py)."""

import os

import numpy as np

from tfdptext import rundir
from tfdptext.models import split_spec
from tfdptext.privacy.guarantee import Guarantee


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, output_dir, name):
    path = os.path.join(output_dir, name)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    os.replace(tmp, path)
    return name


def _finish_bars(plt, fig, ax, ticks, labels, ylabel, title, output_dir,
                 name):
    ax.set_xticks(ticks, labels, rotation=30)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title(title)
    _save(fig, output_dir, name)
    plt.close(fig)
    return name


def plots(result, output_dir):
    """Draws the plots that apply; returns their file names."""
    plt = _pyplot()
    names = []
    attack = result.get("attack")
    if attack:
        per = attack["per_attribute"]
        attributes = list(per)
        kinds = list(per[attributes[0]])
        fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(attributes), 3.2))
        width = 0.8 / (len(kinds) + 1)
        x = np.arange(len(attributes))
        for i, kind in enumerate(kinds):
            ax.bar(x + i * width, [per[a][kind]["accuracy"]["mean"]
                                   for a in attributes], width,
                   yerr=[per[a][kind]["accuracy"]["std"]
                         for a in attributes], label=kind)
        ax.bar(x + len(kinds) * width, [per[a][kinds[0]]["majority_accuracy"]
                                        for a in attributes], width,
               color="grey", label="majority")
        names.append(_finish_bars(
            plt, fig, ax, x + width * len(kinds) / 2, attributes,
            "attacker test accuracy", "Attackers on the release",
            output_dir, "attackers.png"))
    if result.get("fairness"):
        fair = result["fairness"]
        fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(fair), 3.2))
        for i, (attribute, info) in enumerate(fair.items()):
            groups = sorted(info["subgroups"], key=int)
            for j, g in enumerate(groups):
                ax.bar(i + (j - (len(groups) - 1) / 2) * 0.35,
                       info["subgroups"][g]["accuracy"], 0.33,
                       color=f"C{j}", label=f"group {g}" if i == 0 else None)
        names.append(_finish_bars(
            plt, fig, ax, range(len(fair)), list(fair), "main-task accuracy",
            "Main-task accuracy per subgroup", output_dir, "fairness.png"))
    token = result.get("token_level")
    if token:
        den = token["deniability"]
        fig, axes = plt.subplots(1, 2, figsize=(7, 2.8))
        axes[0].hist(den["n_w"], bins=20)
        axes[0].set_xlabel("N_w (outputs equal to the input)")
        axes[1].hist(den["s_w"], bins=20, color="C1")
        axes[1].set_xlabel("S_w (distinct outputs)")
        axes[0].set_ylabel("tokens")
        fig.suptitle(f"Plausible deniability, {_parameter(token)}, "
                     f"{den['samples_per_token']} samples per token")
        names.append(_save(fig, output_dir, "deniability.png"))
        plt.close(fig)
    return names


def _f(value, digits=3):
    return "n/a" if value is None else f"{value:.{digits}f}"


def _ms(stat):
    text = _f(stat["mean"])
    return text + (f" ± {stat['std']:.3f}" if stat["runs"] > 1 else "")


def _release_text(result):
    """What leaves the phone, from the split point's spec (its "NOT
    privatized" variant for mechanism none)."""
    return split_spec.get(result["split_point"]).describe(
        private=result["mechanism"] != "none")


def limit_text(limit):
    """One paragraph on the limit of an accuracy
    (`tfdptext.privacy.limit.limit_report`, plus its reference source)."""
    if not limit.get("applies"):
        return f"No limit applies: {limit['reason']}."
    bound = (f"no release of a text at this epsilon lets any server name "
             f"the class more often than {_f(limit['bound_any_classifier'])}"
             " for the test split's class frequencies (a theorem: the "
             "linear program over LDP channels)")
    rr = limit.get("randomized_response")
    share = (f"this release reaches {limit['share_of_limit']:.3f} of it"
             + (f" (95% interval {limit['share_of_limit_95'][0]:.3f}-"
                f"{limit['share_of_limit_95'][1]:.3f} over "
                f"{limit['num_texts']} test texts)"
                if "share_of_limit_95" in limit else ""))
    head = (f"Limit at {limit['epsilon_per_text']:.4g} per text (delta "
            f"{limit['delta']:.2g}): ")
    if not limit.get("reference_given"):
        return (head + bound + (f"; K-ary randomized response gets {_f(rr)}"
                                if rr is not None else "") + f"; {share}.")
    what = ("its confusion matrix on the test split" if
            limit.get("reference_model") == "confusion" else
            "its accuracy, its errors taken as spread evenly")
    return (head + f"the best LDP channel applied to the prediction of the "
            f"non-private reference (accuracy "
            f"{_f(limit['reference_accuracy'])}, "
            f"{limit.get('reference_source')}), from {what}: "
            f"{_f(limit['limit'])} (a reference for releases built on that "
            "classifier, not a bound on every release"
            + (f"; K-ary randomized response on it gets {_f(rr)}"
               if rr is not None else "")
            + f"); {share}. Bound: {bound}.")


def write_report(result, output_dir):
    g = Guarantee.from_dict(result["guarantee"])
    lines = [
        f"# Evaluation of `{result['model_dir']}`", "",
        f"Mode `{result['mode']}`, mechanism `{result['mechanism']}`, "
        f"parameters {result.get('parameters')}; dataset "
        f"`{result['dataset']}` (sizes used: {result['sizes']}).", "",
        "## What leaves the phone", "",
        f"Split point `{result['split_point']}`: {_release_text(result)}.",
        "", "## Formal guarantee", "", str(g), "",
        "## Utility (test split)", "",
        "| accuracy | macro-F1 | majority-class accuracy | n |",
        "|---|---|---|---|",
    ]
    u = result["utility"]
    lines.append(f"| {_f(u['accuracy'])} | {_f(u['macro_f1'])} | "
                 f"{_f(u['majority_accuracy'])} | {u['n_test']} |")
    if u.get("limit"):
        lines += ["", limit_text(u["limit"])]
    attack = result.get("attack")
    if attack:
        lines += ["", "## Empirical privacy: attackers on the release", "",
                  "Each attacker is trained on releases of the train split "
                  "(fresh noise per text), early-stopped on dev and scored "
                  "on test; mean ± std over seeds where repeated.", "",
                  "| attribute | attacker | accuracy | ROC-AUC | F1 (present)"
                  " | majority | n train / test |", "|---|---|---|---|---|---|---|"]
        for attribute, kinds in attack["per_attribute"].items():
            for kind, r in kinds.items():
                auc = _ms(r["roc_auc"]) if "roc_auc" in r else "n/a"
                f1 = _ms(r["positive_f1"]) if "positive_f1" in r else "n/a"
                lines.append(
                    f"| {attribute} | {kind} | {_ms(r['accuracy'])} | {auc} "
                    f"| {f1} | {_f(r['majority_accuracy'])} | "
                    f"{r['n_train']} / {r['n_test']} |")
        lines += ["", "| group | measure | per attacker | strongest | "
                  "majority |", "|---|---|---|---|---|"]
        for group, row in attack["empirical_privacy"].items():
            per = ", ".join(f"{k} {_f(v)}" for k, v in row.items()
                            if k not in ("measure", "attributes", "strongest",
                                         "majority", "below_majority"))
            lines.append(f"| {group} | {row['measure']} | {per} | "
                         f"{_f(row['strongest'])} | {_f(row['majority'])} |")
        lines += ["", "Higher empirical privacy is better; the majority "
                  "column is what an attacker that learned nothing scores. "
                  "The strongest column counts the majority-class guess as "
                  "an attacker too (it can always be made)."]
        below = sorted({a for row in attack["empirical_privacy"].values()
                        for a in row.get("below_majority", [])})
        if below:
            lines += ["", "Every trained attacker scored below the "
                      f"majority-class guess on: {', '.join(below)}; the "
                      "guess is used for them."]
    if result.get("fairness"):
        lines += ["", "## Fairness: main-task accuracy per subgroup", "",
                  "| attribute | subgroup accuracies (n) | gap |",
                  "|---|---|---|"]
        for attribute, info in result["fairness"].items():
            groups = ", ".join(
                f"{g}: {_f(v['accuracy'])} ({v['n']})"
                for g, v in sorted(info["subgroups"].items(),
                                   key=lambda kv: int(kv[0])))
            lines.append(f"| {attribute} | {groups} | {_f(info['gap'])} |")
        for attribute, test in result.get("gap_change", {}).items():
            lines.append(f"\nGap change of {attribute} against the baseline: "
                         f"{test['gap_change']:+.3f}, paired permutation "
                         f"p = {test['p_value']:.3f} (n = {test['n']}).")
    token = result.get("token_level")
    if token:
        den = token["deniability"]
        lines += ["", "## Token level (d_chi)", "",
                  f"Nearest-neighbour inversion accuracy on the test "
                  f"release: {_f(token['inversion_accuracy'])} over "
                  f"{token['n_tokens']} regular tokens (share changed "
                  f"{_f(token['changed_share'])}).", "",
                  f"Plausible deniability over {len(den['tokens'])} regular "
                  f"tokens, {den['samples_per_token']} privatizations each: "
                  f"median N_w {den['n_w_median']:g}, median S_w "
                  f"{den['s_w_median']:g}."]
    mia = result.get("membership")
    if mia:
        lines += ["", "## Membership inference on the server classifier", "",
                  _members(mia) + "; non-members: the test split "
                  "(tensorflow-privacy's attack library).", "",
                  "| attack | AUC | advantage |",
                  "|---|---|---|"]
        for name, r in mia["attacks"].items():
            lines.append(f"| {name} | {_f(r['auc'])} | "
                         f"{_f(r['attacker_advantage'])} |")
    for name in result.get("plots", []):
        lines += ["", f"![{name}]({name})"]
    path = os.path.join(output_dir, rundir.EVAL_REPORT)
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def _members(mia):
    """Which release of the train texts the membership attack used."""
    members = mia.get("members")
    if not members:  # an evaluation from before "members" was recorded
        return "Members: releases of the train examples used above"
    what = members["release"]
    if "sha256" in members:
        what = (f"the release the model trained on, {what} (SHA-256 "
                f"{members['sha256'][:12]}..., run {members['run_id']})")
    return (f"Members: {members['texts']} train texts, {what}, with "
            f"{members['labels']}")


def _parameter(token):
    """"eta = 80" for a d_chi run, "epsilon = 2" for a BRR run."""
    name = "epsilon" if "epsilon" in token else "eta"
    return f"{name} = {token[name]:g}"
