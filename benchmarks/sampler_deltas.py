#!/usr/bin/env python
"""The deltas (and randomized response's epsilon) stated before and after
modelling the samplers that run (docs/benchmarks.md, "The samplers'
deltas, as implemented").

- Laplace: the delta stated before (exponentials continuous on [0, 23 ln 2])
  beside the grid model on TensorFlow's 23-bit uniforms and the bound for
  random words (two words per exponential), per coordinate and for a 384-d
  vector; and the exact divergence of the discrete sampler itself on a
  small grid, observed at several resolutions (the grid model holds only
  where E2's grid is finer than the observation).
- d_chi: delta 0 before; now tau = (n + ceil(n/2)) 2^-B per vector and
  (1 + e^(eta d)) tau for two vectors at distance d.
- Randomized response: for 1,999 epsilons in [0.01, 20], how many flipped
  less than stated with the previous float comparison U < float32(p) on
  uniforms of 24 and 23 bits, and the largest excess of the implemented
  over the stated epsilon; with integer thresholds, none.

    .venv/bin/python benchmarks/sampler_deltas.py
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import docs_tables  # noqa: E402
from benchmarks import machine  # noqa: E402
from tfdptext.privacy import laplace  # noqa: E402
from tfdptext.privacy import metric  # noqa: E402
from tfdptext.privacy import randomized_response as rr  # noqa: E402


SECTION = "the-samplers-deltas-as-implemented"


def _table(columns, rows):
    return {"columns": columns, "rows": rows}


def _laplace_rows(values):
    rows = []
    for label, shift, count in (
            ("one coordinate, eps 0.05", 0.05, 1),
            ("one coordinate, eps 1", 1.0, 1),
            ("384-d vector at 19.2 (0.05 per coordinate)", 0.05, 384),
            ("384-d vector, eps 1 per coordinate (384)", 1.0, 384)):
        found = [laplace.continuous_truncation_delta(shift, count),
                 laplace.truncation_delta(shift, count, 23),
                 laplace.truncation_delta(shift, count, 56)]
        values[label] = found
        rows.append([label, *(f"{v:.2g}" for v in found)])
    return _table(["Laplace", "stated before (continuous, 23 bits)",
                   "grid model, TensorFlow's 23-bit uniforms",
                   "random words (56-bit, coarse region charged)"], rows)


def _binned(shift, bits1, bits2, width):
    """Exact delta of x + E1 - E2 vs x + shift + E1 - E2 with E1, E2 on
    their grids, the output observed in bins of `width`."""
    n1, n2 = 2**bits1, 2**bits2
    edges = np.arange(-math.log(n2) - 1.0, math.log(n1) + 1.0 + width, width)
    e1 = np.log(n1 / np.arange(1, n1 + 1))
    below = np.zeros(len(edges))
    for chunk in np.array_split(e1, max(1, n1 // 64)):
        c = chunk[:, None] - edges[None, :]
        below += np.clip(np.ceil(n2 * np.exp(-c)) - 1.0, 0, n2).sum(0)
    mass = np.diff(below / (n1 * n2))
    k = int(round(shift / width))
    shifted = np.concatenate([np.zeros(k), mass[:len(mass) - k]])
    return np.maximum(shifted - math.exp(k * width) * mass, 0.0).sum()


def _grid_rows(values):
    width = 2.0**-11
    shift = 52 * width
    model = laplace.grid_constant(shift, 8) / 2**8
    values["grid model"] = {"shift": shift, "delta": model}
    print(f"E1 on 2^8 values, shift {shift:.4f} b, output in bins of "
          f"2^-11 b; grid model (E1 on its grid, E2 continuous): "
          f"{model:.4g}")
    rows = []
    for bits2 in (20, 18, 16, 14, 12):
        value = _binned(shift, 8, bits2, width)
        values[f"E2 on 2^{bits2}"] = value
        rows.append([f"2^{bits2} values", f"{value:.4g}",
                     f"{value / model:.2f}"])
    fine = _binned(2.0**-4, 8, 8, 2.0**-14)
    fine_model = laplace.grid_constant(2.0**-4, 8) / 2**8
    values["E2 on 2^8, bins of 2^-14, shift 1/16"] = [fine, fine_model]
    rows.append(["2^8 values, bins of 2^-14, shift 1/16", f"{fine:.4g}",
                 f"{fine / fine_model:.1f}"])
    return _table(["E2's grid", "exact delta of the discrete sampler",
                   "/ grid model"], rows)


def _dchi_rows(values):
    rows = [["stated before", "0", "0", "0"]]
    for label, bits in (("TensorFlow's uniforms (23 bits)", 23),
                        ("random words (32 bits)", 32),
                        ("offline, float64 (53 bits)", 53)):
        tau = metric.truncation_probability(384, bits)
        found = [tau, (1 + math.e) * tau, (1 + math.exp(5)) * tau]
        values[label] = found
        rows.append([label, *(f"{v:.2g}" for v in found)])
    return _table(["d_chi, n = 384", "tau per vector",
                   "delta at eta d = 1", "at eta d = 5"], rows)


def _rr_rows(values):
    epsilons = np.linspace(0.01, 20.0, 1999)
    rows = []
    for bits in (24, 23):
        below, excess = 0, 0.0
        for eps in epsilons:
            p = rr.flip_probability(float(eps))
            p32 = float(np.float32(p))
            # U on the 2^-bits grid: P(U < p32) = ceil(p32 2^bits) / 2^bits.
            flip = math.ceil(p32 * 2**bits) / 2**bits
            if flip < p:
                below += 1
                excess = max(excess, math.log((1 - flip) / flip) - eps)
        values[f"before, {bits}-bit uniforms"] = [below, excess]
        rows.append([f"before: U < float32(p), {bits}-bit uniforms",
                     str(below), f"{excess:.2g}"])
    worst = 0.0
    below = 0
    for eps in epsilons:
        p = rr.flip_probability(float(eps))
        for bits, t in rr.keep_thresholds(float(eps)).items():
            if 1 - t / 2**bits < p:
                below += 1
        worst = max(worst, rr.implemented_epsilon(float(eps)) - eps)
    values["now, integer thresholds"] = [below, worst]
    rows.append(["now: k < floor(2^B e^eps / (1 + e^eps)), B = 23, 24",
                 str(below), f"{worst:.2g} (stated = implemented)"])
    return _table(["randomized response, 1,999 epsilons in [0.01, 20]",
                   "flips less than stated",
                   "largest excess of the implemented epsilon"], rows)


def main():
    """Prints the four tables; writes benchmarks/results/sampler_deltas.json
    (every value unrounded) and one result per docs region."""
    values = {}
    tables = [step(values) for step in (_laplace_rows, _grid_rows,
                                        _dchi_rows, _rr_rows)]
    machine.write_json(None, values)
    for index, table in enumerate(tables):
        name = SECTION + (f"-{index + 1}" if index else "")
        machine.write_json(None, {"from": "sampler_deltas"}, name=name,
                           table=table)
        print("\n" + docs_tables.table_markdown({"name": name,
                                                  "table": table}))


if __name__ == "__main__":
    main()
