"""Float-safe sampling for exponential mechanisms: the exponential race.

An exponential mechanism outputs candidate i with probability
w_i / sum_j w_j, w_i = exp(s_i), for log-weights s_i (for example
s_i = -eps * d(x, i) / 2). Written as `exp(eps * u) / sum`, it overflows,
underflows, or loses the small probabilities in the sum. Here it is sampled
as an exponential race, which is the Gumbel-max trick in product form:

    output = argmin_i  E_i * exp(m - s_i),   E_i = -log U_i,   m = max_j s_j.

With continuous uniforms U_i the E_i are i.i.d. Exp(1), E_i exp(m - s_i)
is exponential with rate w_i / e^m, and the smallest of independent
exponentials is i with probability w_i / sum_j w_j: the exact distribution
(equivalently, argmax_i s_i + G_i with Gumbels G_i = -log E_i). Nothing is
normalised or summed: utilities stay in log space, every exp has an
argument m - s_i >= 0, it is 1 for the most likely candidate and
overflows to +inf only for candidates at least e^88 times less likely than
it, which are then never output (their probability is in delta).

The uniforms are cell midpoints U = (k + 1/2) 2^-B of B random bits (B = 23
in float32, 52 in float64), exact in the float type and strictly inside
(0, 1): E is finite and > 0, there is no -log(0) and no -log(1). E is
computed with relative accuracy everywhere (`backend.neg_log_uniform`).
The discrete grid and the float rounding make the race differ from the
exact one by a total variation that `tfdptext.privacy.exponential` bounds
and states as the guarantee's delta.

`race` needs one uniform per candidate. For a whole vocabulary (30,522
candidates per token) that is too much randomness to feed a phone model:
`two_stage_race` splits the candidates into about sqrt(n) blocks of about
sqrt(n), races the blocks with their log-sum-exp weights, then the
candidates of the winning block: the same distribution,
P(block) P(i | block) = w_i / W, from about 2 sqrt(n) uniforms (350 for
30,522 candidates).

Every function takes a `backend` (`tfdptext.substitution.backend`): the
Keras layers run them in TensorFlow (float32, TFLite builtins), the offline
privatizers in numpy (float64). Candidates that may never be output have
log-weight -inf; every row needs at least one finite log-weight.
"""

import math
import os

import numpy as np

from tfdptext.privacy import exponential

# The smallest positive E the race uses: E >= -log(1 - 2^-24) = 5.96e-8 on
# the float32 grid anyway; the floor only guards a kernel that returns 0.
_TINY = 1e-30


def centred_uniforms(uniforms, backend):
    """U in [0, 1) (any grid at least as fine as 2^-B) to the midpoint of
    its cell of 2^B: (floor(U 2^B) + 1/2) 2^-B, B = backend.uniform_bits."""
    scale = float(2 ** backend.uniform_bits)
    cell = backend.floor(backend.cast(uniforms, backend.dtype) * scale)
    cell = backend.minimum(backend.maximum(cell, 0.0), scale - 1.0)
    return (cell + 0.5) / scale


def race_keys(log_weights, uniforms, backend):
    """The race's keys E_i exp(m - s_i), shape of `log_weights` (..., n);
    `uniforms` has the same shape."""
    e = backend.maximum(
        backend.neg_log_uniform(centred_uniforms(uniforms, backend)), _TINY)
    top = backend.reduce_max(log_weights, axis=-1, keepdims=True)
    return e * backend.exp(top - log_weights)


def race(log_weights, uniforms, backend):
    """The index of the winner of each row: i with probability
    exp(s_i) / sum_j exp(s_j) (module docstring)."""
    return backend.argmin(race_keys(log_weights, uniforms, backend))


two_stage_sizes = exponential.two_stage_sizes


def two_stage_uniforms(num_candidates):
    """Uniforms one `two_stage_race` draw takes: blocks + block size."""
    blocks, size = two_stage_sizes(num_candidates)
    return blocks + size


def block_log_weights(log_weights, backend):
    """(..., blocks, size) log-weights (padded with -inf) and the
    (..., blocks) log-sum-exp of each block (-inf for an empty block): the
    tables of `two_stage_draw`, a function of the input alone."""
    n = int(log_weights.shape[-1])
    blocks, size = two_stage_sizes(n)
    padded = backend.pad_last(log_weights, blocks * size - n, -math.inf)
    grouped = backend.reshape(padded, [-1, blocks, size])
    top = backend.reduce_max(grouped, axis=-1, keepdims=True)
    safe = backend.where(top > -math.inf, top, backend.zeros_like(top))
    total = backend.reduce_sum(backend.exp(grouped - safe), axis=-1)
    return grouped, safe[..., 0] + backend.log(total)


def two_stage_draw(grouped, block_weights, uniforms, backend, rows=None):
    """One draw per row of `uniforms` from the tables of
    `block_log_weights`: the blocks race with their log-sum-exp weights,
    then the winning block's candidates. `rows` (numpy only) maps each
    draw to its table row, so that tables computed once per distinct
    input serve all its tokens."""
    blocks, size = int(grouped.shape[-2]), int(grouped.shape[-1])
    if rows is not None:
        block_weights = block_weights[rows]
    block = race(block_weights, uniforms[..., :blocks], backend)
    if rows is None:
        inner = backend.gather_rows(grouped, block)
    else:
        inner = grouped[rows, block]
    within = race(inner, uniforms[..., blocks:blocks + size], backend)
    return block * size + within


def race_factors(log_weights):
    """numpy: the factors exp(m - s_i) of `race_keys` for (..., n)
    log-weights, so that a table computed once per input serves every
    draw: the keys are E_i times them, the same floats `race_keys`
    computes. A row of only -inf gets +inf everywhere (never wins)."""
    top = np.max(log_weights, axis=-1, keepdims=True)
    top = np.where(top > -math.inf, top, 0.0)
    with np.errstate(over="ignore"):
        return np.exp(top - log_weights)


def race_with_factors(factors, uniforms):
    """numpy: the winner of each row, as `race` on the log-weights whose
    `race_factors` are `factors` (the same uniforms give the same
    winner)."""
    from tfdptext.substitution import backend

    e = np.maximum(backend.NUMPY.neg_log_uniform(
        centred_uniforms(uniforms, backend.NUMPY)), _TINY)
    return np.argmin(e * factors, axis=-1)


def two_stage_factors(log_weights):
    """numpy: the tables of a two-stage draw for (N, n) log-weights:
    (N, blocks) factors of the block race and (N, blocks, size) factors
    of the race within each block (`race_factors` of
    `block_log_weights`), a function of the input alone."""
    from tfdptext.substitution import backend

    grouped, block_weights = block_log_weights(log_weights, backend.NUMPY)
    return race_factors(block_weights), race_factors(grouped)


def two_stage_race(log_weights, uniforms, backend):
    """The winner of each row of (N, n) log-weights, as `race`, from
    `two_stage_uniforms(n)` uniforms per row."""
    grouped, block_weights = block_log_weights(log_weights, backend)
    return two_stage_draw(grouped, block_weights, uniforms, backend)


def numpy_uniforms(shape, rng=None, bits=52):
    """float64 uniforms on the 2^-52 grid (midpoints): from os.urandom by
    default; from a numpy Generator `rng` for seeded research runs."""
    count = int(np.prod(shape))
    if rng is None:
        words = np.frombuffer(os.urandom(8 * count), dtype=np.uint64)
        cells = words >> np.uint64(64 - bits)
    else:
        cells = rng.integers(0, 2 ** bits, size=count, dtype=np.uint64)
    return ((cells.astype(np.float64) + 0.5) * 2.0 ** -bits).reshape(shape)
