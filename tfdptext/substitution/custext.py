"""CusText (Chen et al. 2023): customized output sets, sampled exactly from
integer thresholds.

Chen, Mo, Wang, Chen, Nie, Wang, Cui, "A Customized Text Sanitization
Mechanism with Differential Privacy", Findings of ACL 2023.

The mapping: go through the candidate words in order (the paper: corpus
frequency, most frequent first; here the table's order, which GloVe files
and BERT's WordPiece vocabulary sort by frequency); a word not yet mapped
takes its `top_k` nearest words not yet mapped (itself first, Euclidean
distance) as an output set, and every word of that set gets the same set
(the authors' "conservative" mapping). The sets partition the
vocabulary, which is what makes the guarantee hold; the last set may be
smaller. (pyPANTERA's CusText gives each word its own top-k nearest words,
the authors' "aggressive" mapping: two words then have different output
sets, and no epsilon bounds their ratio.)

The sampling: for x in set G, u(x, y) = -(d(x, y) - min d) / (max d -
min d) in [-1, 0] (min-max over G, per x), P(y | x) ~ exp(eps u(x, y) /
2): eps-LDP between any two words of the same set (each ratio of weights
and of normalisers is at most e^(eps / 2)), and nothing between sets. A
set of one word releases the word. A special input (e.g. [UNK]) draws from
the set of its nearest candidate as if it were a member.

Exactness: the probabilities are computed once, in float64, and turned
into integer counts out of 2^23 (each output at least 1, largest
remainders first), stored as cumulative thresholds. A draw compares
floor(U 2^23) with them: P(y | x) = n_y(x) / 2^23 exactly, in the layer
(int32, TFLite builtins, one random word per token), on 23- or 24-bit
uniforms alike, and offline. `implemented_epsilon` is the exact log-ratio
of those counts, rounded up: the guarantee states it (delta = 0).
"""

import fractions
import math

import numpy as np
import threadpoolctl

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

BITS = 23
SCALE = 2**BITS


def check_top_k(value):
    return validation.check_int("top_k", value, minimum=2)


def output_sets(embeddings, candidate_ids, top_k):
    """The conservative mapping: (groups, group_of) where groups is a list
    of int arrays (each a set of candidate ids, its first the word that
    formed it) and group_of maps each candidate id to its group's index.

    Args:
        embeddings: (V, n) table (float; compared in float32).
        candidate_ids: the ids that may be output, in mapping order.
        top_k: the size of a set, >= 2.
    """
    top_k = check_top_k(top_k)
    # One BLAS thread: each step is a small matrix-vector product, which
    # OpenBLAS's threads make no faster but several times costlier in CPU
    # (they spin between steps); every product is computed row by row by
    # the same kernel either way, so the sets are the same.
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        return _output_sets(embeddings, candidate_ids, top_k)


def _output_sets(embeddings, candidate_ids, top_k):
    ids = np.asarray(candidate_ids, np.int64)
    table = np.asarray(embeddings, np.float32)[ids]
    norms = np.sum(table.astype(np.float64) ** 2, axis=1)
    # The ids already mapped, and how many are left: kept up to date
    # instead of recomputed at every step.
    taken = np.zeros(len(ids), bool)
    left = len(ids)
    groups = []
    group_of = {}
    for position in range(len(ids)):
        if taken[position]:
            continue
        x = table[position].astype(np.float64)
        squared = norms - 2.0 * (table @ table[position]).astype(np.float64) \
            + x @ x
        np.putmask(squared, taken, np.inf)
        squared[position] = -1.0  # itself first
        count = min(top_k, left)
        members = np.argpartition(squared, count - 1)[:count]
        members = members[np.argsort(squared[members], kind="stable")]
        taken[members] = True
        left -= count
        groups.append(ids[members])
        for member in ids[members]:
            group_of[int(member)] = len(groups) - 1
    return groups, group_of


def probabilities(embeddings, word, members, epsilon):
    """P(y | word) over `members` (float64): exp(eps u / 2) normalised, u
    the min-max normalised negative distance (uniform when every member
    is at the same distance, a single member included)."""
    table = np.asarray(embeddings, np.float64)
    d = np.linalg.norm(table[members] - table[word], axis=1)
    spread = d.max() - d.min()
    if spread == 0.0:  # one member, or all at the same distance
        return np.full(len(members), 1.0 / len(members))
    u = -(d - d.min()) / spread
    w = np.exp(0.5 * epsilon * (u - u.max()))
    return w / w.sum()


def integer_counts(probs):
    """Counts out of 2^23 proportional to `probs` (summing to 2^23), each
    at least 1 where probs > 0: floors, then the remainder to the largest
    fractional parts, then 1 taken from the largest count for each zero."""
    probs = np.asarray(probs, np.float64)
    exact = probs * SCALE
    counts = np.floor(exact).astype(np.int64)
    rest = SCALE - int(counts.sum())
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:rest]] += 1
    for index in np.flatnonzero((counts == 0) & (probs > 0)):
        counts[np.argmax(counts)] -= 1
        counts[index] = 1
    return counts


def tables(embeddings, special_token_ids, top_k, epsilon):
    """(members, thresholds, groups): for every id of the table, its
    output set padded to `top_k` ((V, K) int32, the padding repeats the
    first member) and the K - 1 cumulative count thresholds ((V, K - 1)
    int32, 2^23 for padding), and the groups of `output_sets`."""
    epsilon = validation.check_positive("epsilon", epsilon)
    table = np.asarray(embeddings, np.float64)
    vocabulary_size = len(table)
    special = np.zeros(vocabulary_size, bool)
    special[list(special_token_ids)] = True
    candidates = np.flatnonzero(~special)
    if len(candidates) < 2:
        raise ArgumentError(
            "`special_token_ids` leave fewer than 2 candidate tokens.")
    groups, group_of = output_sets(table, candidates, top_k)
    members = np.zeros((vocabulary_size, top_k), np.int32)
    thresholds = np.full((vocabulary_size, top_k - 1), SCALE, np.int32)
    specials = np.flatnonzero(special)
    nearest_of = dict(zip(specials.tolist(), nearest_candidates(
        table, specials, candidates).tolist()))
    inputs = [list(group) for group in groups]  # the words drawing from it
    for word, nearest in nearest_of.items():
        inputs[group_of[nearest]].append(word)
    # Full sets drawn from by their members only: many at once (the same
    # float64 operations row by row, `_full_sets`); the others one by one.
    full = [g for g, group in enumerate(groups)
            if len(group) == top_k and len(inputs[g]) == top_k]
    _full_sets(table, np.asarray([groups[g] for g in full], np.int64)
               .reshape(-1, top_k), epsilon, members, thresholds)
    done = set(full)
    for g, (group, words) in enumerate(zip(groups, inputs)):
        if g in done:
            continue
        words = np.asarray(words, np.int64)
        counts = _integer_counts_rows(
            _probability_rows(table, words, group, epsilon))
        members[words, :len(group)] = group
        members[words, len(group):] = group[0]
        thresholds[words, :len(group) - 1] = np.cumsum(counts, axis=1)[:, :-1]
    return members, thresholds, groups


def _full_sets(table, sets, epsilon, members, thresholds,
               size=1 << 22):
    """Fills `members` and `thresholds` for the output sets of `sets`
    ((n, K) ids, each set drawn from by its own K members only), about
    `size` float64 differences at a time: each row's distances are those
    `_probability_rows` computes (a norm over the same contiguous axis),
    and every later operation is the same, row by row."""
    top_k = sets.shape[1]
    step = max(1, size // (top_k * top_k * table.shape[1]))
    for start in range(0, len(sets), step):
        part = sets[start:start + step]
        rows = table[part]
        d = np.linalg.norm(rows[:, None] - rows[:, :, None], axis=3)
        counts = _integer_counts_rows(_distance_probabilities(
            d.reshape(-1, top_k), epsilon)).reshape(d.shape)
        members[part] = part[:, None, :]
        thresholds[part] = np.cumsum(counts, axis=2)[..., :-1]


def _probability_rows(table, words, members, epsilon):
    """`probabilities` of each of `words` (one row each), the same float64
    operations row by row, in one pass per output set."""
    d = np.linalg.norm(table[members][None] - table[words][:, None], axis=2)
    return _distance_probabilities(d, epsilon)


def _distance_probabilities(d, epsilon):
    """The rows of `_probability_rows` from their distances (n, K)."""
    low = d.min(axis=1, keepdims=True)
    spread = d.max(axis=1, keepdims=True) - low
    flat = spread[:, 0] == 0.0
    u = -(d - low) / np.where(spread == 0.0, 1.0, spread)
    w = np.exp(0.5 * epsilon * (u - u.max(axis=1, keepdims=True)))
    probs = w / w.sum(axis=1, keepdims=True)
    probs[flat] = 1.0 / d.shape[1]
    return probs


def _integer_counts_rows(probs):
    """`integer_counts` of each row of `probs`."""
    exact = probs * SCALE
    counts = np.floor(exact).astype(np.int64)
    rest = SCALE - counts.sum(axis=1)
    order = np.argsort(-(exact - counts), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(probs.shape[1])[None], axis=1)
    counts += rank < rest[:, None]
    odd = ((counts == 0) & (probs > 0)).any(axis=1) | (rest < 0)
    for row in np.flatnonzero(odd):
        counts[row] = integer_counts(probs[row])
    return counts


def nearest_candidates(table, words, candidates, block=256):
    """For each id of `words`, the nearest id of `candidates` (Euclidean
    distance in float64, ties to the lower id). A matrix product
    shortlists the few nearest (every candidate within a relative 1e-9 of
    the 8th smallest squared distance), then the distances are recomputed
    exactly on the shortlist: the answer of an exhaustive search, without
    one pass over the whole table per word."""
    table = np.asarray(table, np.float64)
    candidates = np.asarray(candidates, np.int64)
    rows = table[candidates]
    norms = np.sum(rows * rows, axis=1)
    words = np.asarray(words, np.int64)
    out = np.empty(len(words), np.int64)
    k = min(8, len(candidates))
    for start in range(0, len(words), block):
        part = table[words[start:start + block]]
        squared = np.maximum(norms[None] - 2.0 * part @ rows.T
                             + np.sum(part * part, axis=1)[:, None], 0.0)
        kth = np.partition(squared, k - 1, axis=1)[:, k - 1]
        for i, x in enumerate(part):
            short = np.flatnonzero(squared[i] <= kth[i] * (1 + 1e-9) + 1e-12)
            d = np.linalg.norm(rows[short] - x, axis=1)
            out[start + i] = candidates[short[d == d.min()]].min()
    return out


def implemented_epsilon(members, thresholds):
    """The largest ln(P(y | x) / P(y | x')) of the implemented counts over
    every group, its members x, x' (and the special inputs drawing from
    it) and outputs y, computed from the integers and rounded up."""
    counts = _counts(thresholds)
    inputs = {}
    for word in range(len(members)):
        inputs.setdefault(tuple(members[word]), []).append(word)
    best = fractions.Fraction(1)
    for key, words in inputs.items():
        block = counts[words][:, :len(set(key))]
        high = block.max(axis=0)
        low = block.min(axis=0)
        if low.min() == 0:
            return math.inf
        best = max(best, max(fractions.Fraction(int(h), int(lo))
                             for h, lo in zip(high, low)))
    value = math.log(best.numerator) - math.log(best.denominator)
    return value + abs(value) * 1e-12 + 1e-15


def _counts(thresholds):
    thresholds = np.asarray(thresholds, np.int64)
    padded = np.concatenate([np.zeros((len(thresholds), 1), np.int64),
                             thresholds,
                             np.full((len(thresholds), 1), SCALE)], axis=1)
    return np.diff(padded, axis=1)


def draw(members, thresholds, uniforms, backend):
    """One output per row: members[i, j] with j the number of thresholds
    at or below floor(U 2^23) (exact integer comparisons)."""
    cell = backend.floor(backend.cast(uniforms, backend.dtype)
                         * float(SCALE))
    cell = backend.cast(cell, "int32")
    index = backend.reduce_sum(backend.cast(
        cell[:, None] >= thresholds, "int32"), axis=-1)
    return backend.gather_rows(members, index)
