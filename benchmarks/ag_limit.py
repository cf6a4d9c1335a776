#!/usr/bin/env python
"""The limit for AG's skewed prior: the bound (linear program over LDP
channels) and K-ary randomized response's accuracy, for the class prior
of the test split and of the whole file, at each epsilon per text.

Deterministic (no noise is drawn): the numbers depend only on the data's
label counts. Writes benchmarks/results/ag_limit.json.

    .venv/bin/python benchmarks/ag_limit.py --data_dir=../shared/data/ag_dpnr
"""

import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", "../shared/data/ag_dpnr",
                    "DPNR's AG subset (ag_data.txt).")
flags.DEFINE_list("epsilon", ["0.5", "1", "2", "4", "8"],
                  "Epsilons per text.")


def priors(dataset):
    """{"test": (prior, counts), "whole file": (prior, counts)}: class
    frequencies of the test split and of all three splits together."""
    def frequencies(labels):
        counts = [sum(1 for label in labels if label == c)
                  for c in range(dataset.num_classes)]
        return [c / len(labels) for c in counts], counts
    every = [int(label) for split in dataset.splits.values()
             for label in split.labels]
    return {"test": frequencies([int(x) for x in
                                 dataset.splits["test"].labels]),
            "whole file": frequencies(every)}


def main(argv):
    del argv
    from tfdptext.data.local_files import load_ag_dpnr
    from tfdptext.privacy import limit

    dataset = load_ag_dpnr(FLAGS.data_dir)
    epsilons = [float(e) for e in FLAGS.epsilon]
    result = {"epsilon": epsilons, "priors": {}}
    print("| prior | counts | eps | bound | K-ary randomized response |")
    print("|---|---|---|---|---|")
    for name, (prior, counts) in priors(dataset).items():
        rows = []
        for eps in epsilons:
            rows.append({"epsilon": eps,
                         "bound": limit.bound(eps, 4, prior),
                         "k_ary_rr": limit.rr_limit(eps, 4, 1.0, prior)})
            print(f"| {name} | {counts} | {eps:g} | {rows[-1]['bound']:.3f}"
                  f" | {rows[-1]['k_ary_rr']:.3f} |")
        result["priors"][name] = {"counts": counts, "prior": prior,
                                  "rows": rows}
    machine.write_json(None, result)


if __name__ == "__main__":
    app.run(main)
