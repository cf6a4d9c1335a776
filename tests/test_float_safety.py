"""benchmarks/float_safety.py, small: no sampler gives a non-finite value.

10^6 draws per TF sampler (both noise sources), one TFLite model per noise
source, and the extreme words (U = 0 and U = 1 - 2^-24) on both paths. The
full 10^8-draw run is docs/benchmarks.md's "Floating-point safety" section.
"""

import importlib.util
import math
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "benchmarks",
                     "float_safety.py")
_spec = importlib.util.spec_from_file_location("float_safety", _PATH)
fs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fs)

DRAWS = 10**6
CHUNK = 250_000
LOG2_MAX = 24 * math.log(2)  # -log1p(-(1 - 2^-24))


def _by(rows):
    return {(r.path, r.source, r.sampler): r.tally for r in rows}


@pytest.fixture(scope="module")
def tf_rows():
    return fs.run_all(DRAWS, CHUNK, dimension=384, gamma_draws=2_000,
                      paths=("TF",), extremes=False, log=None)


def test_tf_samplers_are_finite(tf_rows):
    assert len(tf_rows) == 2 * len(fs.SAMPLERS)
    for row in tf_rows:
        t = row.tally
        assert t.non_finite == 0, fs._line(row)
        want = 2_000 if row.sampler == "gamma_integer_shape" else DRAWS
        assert t.draws >= want, fs._line(row)
        assert math.isfinite(t.min) and math.isfinite(t.max)


def test_tf_ranges(tf_rows):
    by = _by(tf_rows)
    for source in fs.SOURCES:
        exp = by[("TF", source, "exponential")]
        assert 0.0 <= exp.min and exp.max <= LOG2_MAX + 1e-4
        lap = by[("TF", source, "laplace")]
        assert -2 * LOG2_MAX <= lap.min < 0.0 < lap.max <= 2 * LOG2_MAX
        direction = by[("TF", source, "unit_directions")]
        assert -1.0 <= direction.min and direction.max <= 1.0
        rr = by[("TF", source, "RandomizedResponse")]
        assert (rr.min, rr.max) == (0.0, 1.0)


def test_tflite_models_are_finite():
    for source in fs.SOURCES:
        row = fs.run_tflite("laplace", source, DRAWS, CHUNK, 384)
        assert row.tally.non_finite == 0, fs._line(row)
        assert row.tally.draws == DRAWS


def test_extreme_words_give_finite_noise():
    rows = fs.extreme_rows(fs.SAMPLERS, 4 * 384, 384, paths=("TF",))
    rows += fs.extreme_rows(("laplace", "dchi"), 4 * 384, 384,
                            paths=("TFLite",))
    by = _by(rows)
    for row in rows:
        assert row.tally.non_finite == 0, fs._line(row)
    # U = 1 - 2^-24 (and U = 1.0 given directly) reach the clamp's bound.
    for path in ("TF", "TFLite"):
        lap = by[(path, "input (extreme)", "laplace")]
        assert lap.max == pytest.approx(LOG2_MAX, rel=1e-6)
        assert lap.min == pytest.approx(-LOG2_MAX, rel=1e-6)
    gamma = by[("TF", "input (extreme)", "gamma_integer_shape")]
    assert (gamma.min, gamma.max) == (0.0, pytest.approx(384 * LOG2_MAX,
                                                         rel=1e-5))
