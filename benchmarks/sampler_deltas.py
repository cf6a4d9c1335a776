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
import sys

import numpy as np

sys.path.insert(0, ".")

from tfdptext.privacy import laplace  # noqa: E402
from tfdptext.privacy import metric  # noqa: E402
from tfdptext.privacy import randomized_response as rr  # noqa: E402


def _laplace_rows():
    print("| Laplace | stated before (continuous, 23 bits) | grid model, "
          "TensorFlow's 23-bit uniforms | random words (56-bit, coarse "
          "region charged) |\n|---|---|---|---|")
    for label, shift, count in (
            ("one coordinate, eps 0.05", 0.05, 1),
            ("one coordinate, eps 1", 1.0, 1),
            ("384-d vector at 19.2 (0.05 per coordinate)", 0.05, 384),
            ("384-d vector, eps 1 per coordinate (384)", 1.0, 384)):
        print(f"| {label} | "
              f"{laplace.continuous_truncation_delta(shift, count):.2g} | "
              f"{laplace.truncation_delta(shift, count, 23):.2g} | "
              f"{laplace.truncation_delta(shift, count, 56):.2g} |")


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


def _grid_rows():
    width = 2.0**-11
    shift = 52 * width
    model = laplace.grid_constant(shift, 8) / 2**8
    print(f"\nE1 on 2^8 values, shift {shift:.4f} b, output in bins of "
          f"2^-11 b; grid model (E1 on its grid, E2 continuous): "
          f"{model:.4g}\n")
    print("| E2's grid | exact delta of the discrete sampler | / grid model "
          "|\n|---|---|---|")
    for bits2 in (20, 18, 16, 14, 12):
        value = _binned(shift, 8, bits2, width)
        print(f"| 2^{bits2} values | {value:.4g} | {value / model:.2f} |")
    fine = _binned(2.0**-4, 8, 8, 2.0**-14)
    print(f"| 2^8 values, bins of 2^-14, shift 1/16 | {fine:.4g} | "
          f"{fine / (laplace.grid_constant(2.0**-4, 8) / 2**8):.1f} |")


def _dchi_rows():
    print("\n| d_chi, n = 384 | tau per vector | delta at eta d = 1 | at "
          "eta d = 5 |\n|---|---|---|---|")
    print("| stated before | 0 | 0 | 0 |")
    for label, bits in (("TensorFlow's uniforms (23 bits)", 23),
                        ("random words (32 bits)", 32),
                        ("offline, float64 (53 bits)", 53)):
        tau = metric.truncation_probability(384, bits)
        print(f"| {label} | {tau:.2g} | {(1 + math.e) * tau:.2g} | "
              f"{(1 + math.exp(5)) * tau:.2g} |")


def _rr_rows():
    epsilons = np.linspace(0.01, 20.0, 1999)
    print("\n| randomized response, 1,999 epsilons in [0.01, 20] | flips "
          "less than stated | largest excess of the implemented epsilon |"
          "\n|---|---|---|")
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
        print(f"| before: U < float32(p), {bits}-bit uniforms | {below} | "
              f"{excess:.2g} |")
    worst = 0.0
    below = 0
    for eps in epsilons:
        p = rr.flip_probability(float(eps))
        for bits, t in rr.keep_thresholds(float(eps)).items():
            if 1 - t / 2**bits < p:
                below += 1
        worst = max(worst, rr.implemented_epsilon(float(eps)) - eps)
    print(f"| now: k < floor(2^B e^eps / (1 + e^eps)), B = 23, 24 | {below} "
          f"| {worst:.2g} (stated = implemented) |")


if __name__ == "__main__":
    _laplace_rows()
    _grid_rows()
    _dchi_rows()
    _rr_rows()
