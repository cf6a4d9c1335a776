"""Checks shared by the tests of the word-substitution mechanisms: the
closed-form output distributions on toy tables, the chi-square test, and
the phone model (TFLite, random_words) of a text privatizer.

Statistical checks use fixed sample sizes and pass a correct
implementation with probability > 1 - 1e-4 per test (p > 1e-4)."""

import os

import numpy as np
from scipy import stats

# A 2-D toy table: id 0 is [PAD]-like (special, passthrough), the others
# candidates at distances 1 to 3 from each other.
TABLE = np.array([[0.0, 5.0],     # 0: special
                  [0.0, 0.0],     # 1
                  [1.0, 0.0],     # 2
                  [-1.5, 0.5],    # 3
                  [2.5, 0.3],     # 4
                  [0.5, 2.0],     # 5
                  [0.4, -1.8]],   # 6
                 np.float32)
SPECIAL = (0,)
PASSTHROUGH = (0,)
WORDS = (1, 4)


def chi_square_pvalue(counts, probs):
    """The chi-square p-value of `counts` against `probs`; outputs of
    probability 0 must not occur; expected counts below 5 are pooled."""
    counts = np.asarray(counts, np.float64)
    probs = np.asarray(probs, np.float64)
    assert counts[probs == 0].sum() == 0, \
        f"impossible outputs drawn: {np.flatnonzero(counts * (probs == 0))}"
    expected = probs * counts.sum()
    big = expected >= 5
    observed = list(counts[big])
    wanted = list(expected[big])
    if expected[~big].sum() > 0:
        observed.append(counts[~big].sum())
        wanted.append(expected[~big].sum())
    return stats.chisquare(observed, wanted).pvalue


# metric_noise_closed_form's answers by its arguments: a module's tests
# ask for the same law several times (the layer's and the phone model's).
_CLOSED_FORMS = {}


def metric_noise_closed_form(table, special, word, eta, root=None,
                             threshold=None, grid=1500):
    """P(output | word) of 2-D metric noise decoded to the nearest token
    (or, with `threshold`, by the Vickrey rule), by integrating the noise
    density on a grid: radius at Gamma(2, 1/eta) quantile midpoints,
    angle at midpoints, each point of equal mass. Computed once per
    arguments (a copy is returned)."""
    table = np.asarray(table, np.float64)
    key = (table.tobytes(), table.shape, tuple(special), word, eta,
           None if root is None else np.asarray(root, np.float64).tobytes(),
           threshold, grid)
    if key not in _CLOSED_FORMS:
        _CLOSED_FORMS[key] = _metric_noise_closed_form(
            table, special, word, eta, root, threshold, grid)
    return _CLOSED_FORMS[key].copy()


def _metric_noise_closed_form(table, special, word, eta, root, threshold,
                              grid, chunk=1 << 16):
    radius = stats.gamma(a=2, scale=1.0 / eta).ppf(
        (np.arange(grid) + 0.5) / grid)
    angle = 2.0 * np.pi * (np.arange(grid) + 0.5) / grid
    u = (radius[:, None, None]
         * np.stack([np.cos(angle), np.sin(angle)], -1)[None])
    u = u.reshape(-1, 2)
    z = u if root is None else u @ np.asarray(root, np.float64).T
    y = table[word] + z
    candidates = np.array([i for i in range(len(table))
                           if i not in special])
    rows = table[candidates]
    # The points a chunk at a time (each stays in the CPU's cache), the
    # outputs kept in the points' order: every float64 operation is the
    # one on the whole array, elementwise.
    outputs = [_nearest_two(y[start:start + chunk], rows, threshold)
               for start in range(0, len(y), chunk)]
    first = candidates[np.concatenate([o[0] for o in outputs])]
    if threshold is None:
        probs = np.bincount(first, minlength=len(table)).astype(np.float64)
        return probs / len(y)
    second = candidates[np.concatenate([o[1] for o in outputs])]
    p1 = np.concatenate([o[2] for o in outputs])
    # One pass in order (the first outputs, then the runners-up): the
    # same additions in the same order as np.add.at on each in turn.
    probs = np.bincount(np.concatenate([first, second]),
                        weights=np.concatenate([p1, 1.0 - p1]),
                        minlength=len(table))
    return probs / len(y)


def _nearest_two(y, rows, threshold):
    """(nearest row index, runner-up index, the Vickrey probability of the
    nearest) of each point of `y` (the last two None without
    `threshold`). Euclidean distances to each row, a row at a time (the
    values of np.linalg.norm over a (points, rows, 2) array: a two-term
    sum is one addition); the nearest is the first smallest, the
    runner-up the first smallest of the others (a stable sort's first
    two)."""
    y0, y1 = np.ascontiguousarray(y[:, 0]), np.ascontiguousarray(y[:, 1])
    d = np.empty((len(rows), len(y0)))
    scratch = np.empty_like(y0)
    for j, row in enumerate(rows):
        np.subtract(y0, row[0], out=d[j])
        np.square(d[j], out=d[j])
        np.subtract(y1, row[1], out=scratch)
        np.square(scratch, out=scratch)
        np.add(d[j], scratch, out=d[j])
        np.sqrt(d[j], out=d[j])
    first_at, d1 = _first_smallest(d)
    if threshold is None:
        return first_at, None, None
    d[first_at, np.arange(len(y0))] = np.inf
    second_at, d2 = _first_smallest(d)
    t = threshold
    denominator = t * d1 + (1 - t) * d2
    p1 = np.where(denominator > 0, (1 - t) * d2 / np.where(
        denominator > 0, denominator, 1.0), 1.0)
    return first_at, second_at, p1


def _first_smallest(d):
    """(row index, value) of the first smallest entry of each column of
    `d`: np.argmin over axis 0 (a strict `<` keeps the earlier row on
    ties), and its values."""
    at = np.zeros(d.shape[1], np.int64)
    best = d[0].copy()
    for j in range(1, len(d)):
        smaller = d[j] < best
        at[smaller] = j
        np.minimum(best, d[j], out=best)
    return at, best


def layer_counts(layer, word, draws, vocabulary_size):
    """Output counts of a Keras text privatizer on `draws` copies of
    `word` (its own TensorFlow randomness)."""
    out = np.asarray(layer(np.full((draws, 1), word, np.int32))).ravel()
    return np.bincount(out, minlength=vocabulary_size)


def offline_counts(privatizer, word, draws, vocabulary_size):
    out = np.asarray(privatizer(np.full((draws,), word))).ravel()
    return np.bincount(out, minlength=vocabulary_size)


def phone_model(privatizer, length):
    """The phone model of a text-to-text user side whose mechanism is
    `privatizer`: inputs token_ids, padding_mask and random_words."""
    from tfdptext.models import secure
    from tfdptext.models import split
    from tfdptext.models import split_spec

    inputs = split.feature_inputs(length)
    user = split._user_side(split_spec.get(split_spec.TEXT_TO_TEXT), inputs,
                            privatizer(inputs["token_ids"]))
    return secure.secure_user_model(user, split_spec.TEXT_TO_TEXT, length)


def check_phone_model(privatizer, words, closed_forms, draws=20000,
                      batch=500, partial_draws=2000):
    """Converts the phone model of `privatizer` (one signature, dynamic
    batch, token ids `words`), checks it holds builtin ops only and no
    seeded random op, takes `random_words`, releases id -1 everywhere for
    an unfilled (zero) buffer, and that each position's outputs follow
    its closed form with fresh words from os.urandom (`batch` rows per
    call). Then, one row per call (`partial_draws` each), partly bad
    buffers (`partial_buffers.PARTIAL`) are refused or released by the
    same closed forms, and bit-defective ones are refused. Returns the
    ops."""
    from ai_edge_litert.interpreter import Interpreter

    import partial_buffers
    from tfdptext.export import tflite

    ids = np.tile(np.asarray(words, np.int32), (batch, 1))
    model = phone_model(privatizer, ids.shape[1])
    flat = tflite.convert(model)
    ops = tflite.check_unseeded_builtins(flat)
    runner = Interpreter(model_content=flat).get_signature_runner()
    details = runner.get_input_details()
    assert set(details) == {"token_ids", "padding_mask", "random_words"}
    width = int(details["random_words"]["shape"][-1])
    mask = np.ones_like(ids)

    def run(random_words):
        out = runner(token_ids=ids, padding_mask=mask,
                     random_words=random_words)
        return np.asarray(out["token_ids"])

    assert (run(np.zeros((batch, width), np.int32)) == -1).all()
    rows = []
    for _ in range(draws // batch):
        fresh = np.frombuffer(os.urandom(4 * batch * width),
                              np.int32).reshape(batch, width)
        rows.append(run(fresh))
    out = np.concatenate(rows)
    assert (out >= 0).all()
    for column, probs in enumerate(closed_forms):
        counts = np.bincount(out[:, column], minlength=len(probs))
        assert chi_square_pvalue(counts, probs) > 1e-4, column
    if partial_draws:
        single = Interpreter(model_content=flat).get_signature_runner()

        def run_one(random_words):
            return np.asarray(single(
                token_ids=ids[:1], padding_mask=mask[:1],
                random_words=random_words)["token_ids"])

        released = partial_buffers.released_outputs(run_one, width,
                                                    partial_draws)
        for kind, outputs in released.items():
            if outputs is None:
                continue
            for column, probs in enumerate(closed_forms):
                counts = np.bincount(outputs[:, column],
                                     minlength=len(probs))
                # 1e-6: six kinds x the columns, per mechanism.
                assert chi_square_pvalue(counts, probs) > 1e-6, \
                    (kind, column)
        partial_buffers.assert_defects_refused(run_one, width)
    return ops
