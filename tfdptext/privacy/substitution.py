"""The guarantees of the word-substitution mechanisms beyond d_chi and BRR.

Each function returns a `Guarantee` with its unit (per token: every token
of a text is privatized independently, and the bounds of the tokens of two
equal-length texts add), its metric (the distance between two tokens in
which the bound grows; an extended metric, infinite between tokens the
mechanism does not protect from each other, where it has such pairs), and
what composes. Metric noise (Mahalanobis, Vickrey) is stated for the
real-valued mechanism with its float sampling as a condition, as d_chi is
(`tfdptext.privacy.metric`); the exponential mechanisms state the delta of
their float sampler (`tfdptext.privacy.exponential`) or, sampled from
integer thresholds, the exact epsilon of what runs.

Pure Python.
"""

import math

from tfdptext.privacy import exponential
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import metric
from tfdptext.privacy import validation

TEXT_TO_TEXT_CONDITION = (
    "special tokens ([PAD] [CLS] [SEP] [MASK] [UNK] [unused*]) are never "
    "output; [UNK] and every other input token are privatized alike; the "
    "structural tokens [CLS], [SEP] and [PAD] are released unchanged, so "
    "the token count (length) is released")

PER_TOKEN_COMPOSITION = (
    "a sequence of tokens, each privatized independently: the bounds of "
    "the tokens of two equal-length texts add (sum over positions of "
    "value * d(x_i, x'_i)); m releases of the same input add their bounds")


def mahalanobis_guarantee(eta, lam, dimension, description,
                          sampling=metric.FLOAT32_SAMPLING, name=None,
                          extra_conditions=()):
    """Mahalanobis text-to-text (Xu et al. 2020): eta * d_R metric DP per
    token, d_R(x, x') = ||Sigma_lambda^{-1/2} (phi(x) - phi(x'))||.

    Example:
    >>> g = mahalanobis_guarantee(10.0, 0.2, 300, "GloVe")
    >>> g.unit, g.parameter
    ('per_token', 'eta')
    """
    eta = validation.check_positive("eta", eta)
    dimension = validation.check_int("dimension", dimension)
    return guarantee_lib.Guarantee(
        mechanism=name or "mahalanobis_text_to_text",
        parameter="eta",
        value=eta,
        unit=guarantee_lib.PER_TOKEN,
        metric=(f"regularized Mahalanobis distance ||Sigma_lambda^(-1/2) "
                f"(phi(x) - phi(x'))|| over {description}, Sigma_lambda = "
                f"{lam:g} Sigma + {1.0 - lam:g} I, Sigma their covariance "
                "scaled to trace n"),
        composition=PER_TOKEN_COMPOSITION,
        conditions=(
            "noise z = Sigma_lambda^(1/2) r p, r ~ Gamma(n, 1/eta), p "
            "uniform on the sphere: density ~ exp(-eta ||Sigma_lambda^(-1/2)"
            " z||) (Xu et al. 2020); output = the candidate token nearest "
            "to phi(x) + z in Euclidean distance (post-processing)",
            sampling, TEXT_TO_TEXT_CONDITION, *extra_conditions),
        details={"lambda": lam, "dimension": dimension,
                 "mean_radius": dimension / eta},
    )


def vickrey_guarantee(base, t):
    """The underlying noise's guarantee, with the Vickrey choice (Xu et
    al. 2021) as post-processing."""
    from dataclasses import replace

    mechanism = base.mechanism.replace("_text_to_text", "")
    return replace(
        base, mechanism=f"vickrey_{mechanism}_text_to_text",
        conditions=base.conditions + (
            f"Vickrey choice (Xu et al. 2021), threshold t = {t:g}: the "
            "nearest token w1 with probability (1 - t) d2 / (t d1 + (1 - t) "
            "d2), else the second nearest w2, d1 <= d2 their distances to "
            "the noisy vector: post-processing of it, so the bound is the "
            "noise's",),
        details={**base.details, "t": t})


def race_guarantee(mechanism, epsilon, metric_text, num_candidates,
                   precision, two_stage, conditions=(), details=None,
                   composition=PER_TOKEN_COMPOSITION):
    """An exponential mechanism sampled by the exponential race:
    epsilon * d metric DP per token with the race's delta at a pair
    log-ratio of 1 (`tfdptext.privacy.exponential`)."""
    epsilon = validation.check_positive("epsilon", epsilon)
    if two_stage:
        tv = exponential.two_stage_total_variation(num_candidates, precision)
        sampler = "a two-stage exponential race"
    else:
        tv = exponential.race_total_variation(num_candidates, precision)
        sampler = "an exponential race"
    return guarantee_lib.Guarantee(
        mechanism=mechanism,
        parameter="epsilon",
        value=epsilon,
        unit=guarantee_lib.PER_TOKEN,
        metric=metric_text,
        delta=exponential.hockey_stick_delta(tv, 1.0),
        composition=composition,
        conditions=(*conditions,
                    exponential.race_condition(tv, precision, sampler),
                    TEXT_TO_TEXT_CONDITION),
        details={**(details or {}), "sampler_total_variation": tv,
                 "precision": precision.name,
                 "num_candidates": num_candidates},
    )


def pair_delta(guarantee, log_ratio):
    """The delta a guarantee from `race_guarantee` gives a pair of inputs
    whose exact log-ratio bound is `log_ratio` (0 without a sampler
    delta)."""
    tv = guarantee.details.get("sampler_total_variation")
    if tv is None:
        return guarantee.delta
    if math.isinf(log_ratio):
        return 1.0
    return exponential.hockey_stick_delta(tv, log_ratio)


def santext_guarantee(epsilon, description, num_candidates, precision,
                      two_stage=True, sensitive_count=None, keep=None):
    """SanText (Yue et al. 2021): eps * d metric DP per token over all
    candidates; SanText+ (`sensitive_count` given): eps * d between two
    sensitive words, infinite for any pair with a non-sensitive word
    (released unchanged with probability `keep`)."""
    conditions = ["exponential mechanism P(y | x) ~ exp(-eps d(x, y) / 2) "
                  "over the candidates (Yue et al. 2021)"]
    details = {}
    if sensitive_count is None:
        name = "santext_text_to_text"
        metric_text = f"Euclidean distance between {description}"
    else:
        name = "santext_plus_text_to_text"
        metric_text = (f"Euclidean distance between {description} for two "
                       "sensitive words; infinite when either word is not "
                       "sensitive (no protection)")
        conditions.append(
            f"SanText+: outputs are the {sensitive_count} sensitive words "
            "only; a non-sensitive input is released unchanged with "
            f"probability {keep:.6g} (an integer threshold on 23 bits), "
            "else sanitized like a sensitive one: a released non-sensitive "
            "word is the input itself")
        details = {"sensitive_count": sensitive_count,
                   "keep_probability": keep}
    return race_guarantee(name, epsilon, metric_text, num_candidates,
                          precision, two_stage, conditions, details)


def tem_guarantee(epsilon, gamma, description, num_candidates, precision,
                  two_stage=True, beta=None):
    """TEM (Carvalho et al. 2023): eps * min(d, gamma) metric DP per token
    (so at most eps * gamma for any pair)."""
    gamma = validation.check_positive("gamma", gamma)
    return race_guarantee(
        "tem_text_to_text", epsilon,
        f"min(Euclidean distance between {description}, gamma = "
        f"{gamma:.6g}) (truncated: any two words at most gamma)",
        num_candidates, precision, two_stage,
        conditions=(
            "truncated exponential mechanism P(y | x) ~ exp(-eps "
            "min(d(x, y), gamma) / 2) over the candidates: the distribution "
            "of TEM's selection over L_x = {y: d(x, y) <= gamma} plus a "
            "uniform word outside L_x (Carvalho et al. 2023)",),
        details={"gamma": gamma, "beta": beta,
                 "any_pair_epsilon": epsilon * gamma})


def custext_guarantee(epsilon, implemented, top_k, description,
                      kept_count=0):
    """CusText (Chen et al. 2023): epsilon-LDP between any two words of
    the same output set, the exact epsilon of the integer sampler; none
    across sets or for kept words (CusText+)."""
    epsilon = validation.check_positive("epsilon", epsilon)
    guarantee_lib.check_implemented(
        "CusText", epsilon, implemented,
        "integer counts out of 2^23, each output at least 1",
        warn_below=False)  # the exact log-ratio within a set may be lower
    conditions = [
        f"output sets of {top_k} near words of {description} partition the "
        "vocabulary (Chen et al. 2023's conservative mapping, in table "
        "order); P(y | x) ~ exp(eps u(x, y) / 2), u the min-max normalised "
        "negative distance within the set",
        f"sampled exactly: integer counts out of 2^{23} (each output at "
        "least 1) compared with one 23-bit integer; the stated epsilon is "
        "the largest log-ratio of those counts, rounded up (requested "
        f"{epsilon:g})"]
    name = "custext_text_to_text"
    if kept_count:
        name = "custext_plus_text_to_text"
        conditions.append(
            f"CusText+: {kept_count} words (stopwords) are released "
            "unchanged: no protection for them")
    return guarantee_lib.Guarantee(
        mechanism=name,
        parameter="epsilon",
        value=implemented,
        unit=guarantee_lib.PER_TOKEN,
        metric=("1 between two words of the same output set, infinite "
                "between words of different sets"
                + (" or a kept word" if kept_count else "")),
        composition=PER_TOKEN_COMPOSITION,
        conditions=(*conditions, TEXT_TO_TEXT_CONDITION),
        details={"requested_epsilon": epsilon, "top_k": top_k,
                 "kept_words": kept_count},
    )


def truncated_gumbel_guarantee(epsilon, exact, scale, bound, max_candidates,
                               num_candidates, mu, description, sampling):
    """TruncatedGumbel (Carvalho et al. 2021): no worst-case guarantee for
    what runs, and why.

    Where a word only reaches its `max_candidates` nearest words, two
    words with different nearest sets have an infinite log-ratio. Where
    every candidate is within reach, `exact` (the largest log-ratio of the
    CONTINUOUS noise's distribution, by numerical integration) is kept in
    the details, but it is not the epsilon of what runs: the noise runs on
    a grid (`sampling`: 2^23 cells in the layer, 2^52 offline), whose
    probabilities differ from the continuous ones most where they are
    smallest, which is where the largest log-ratio sits; the grid's own
    largest log-ratio is not computed (2^23 noise values per candidate), so
    no epsilon is stated. `epsilon` is the paper's calibration parameter.
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    name = "truncated_gumbel_text_to_text"
    mechanism = (
        f"report-noisy-min: the nearest of x's K nearest words (K ~ "
        f"Poisson({mu:.4g}) truncated to {max_candidates}, integer counts "
        f"out of 2^23) after Gumbel(0, {scale:.6g}) noise truncated to "
        f"|G| <= {bound:.6g} on each distance (Carvalho et al. 2021; the "
        f"paper's epsilon {epsilon:g} sets the scale)")
    if exact is None:
        why = (f"no worst-case DP bound: a word is only ever replaced by one "
               f"of its {max_candidates} nearest of {num_candidates} words, "
               "so two words with different nearest sets each have outputs "
               "the other never gives (an infinite log-ratio); the paper's "
               f"epsilon {epsilon:g} only calibrates the noise")
    else:
        why = (f"no worst-case DP bound stated for what runs: with every "
               f"candidate within reach the continuous noise's largest "
               f"log-ratio is {exact:.6g} (numerical integration, "
               "`details`), but the noise runs on a grid ("
               f"{sampling}) whose probabilities differ from the continuous "
               "ones most where they are smallest, where that ratio sits; "
               "the grid's own largest log-ratio is not computed, so no "
               f"epsilon is claimed; the paper's epsilon {epsilon:g} only "
               "calibrates the noise")
    return guarantee_lib.Guarantee(
        mechanism=name, parameter="none", value=None,
        unit=guarantee_lib.NO_PRIVACY,
        conditions=(
            f"{why}. Mechanism: {mechanism}. pair_bound gives one pair's "
            "log-ratio under continuous noise",),
        details={"paper_epsilon": epsilon, "scale": scale,
                 "max_distance": bound, "max_candidates": max_candidates,
                 "poisson_mean": mu, "continuous_noise_epsilon": exact,
                 "noise_grid": sampling})


def diffractor_guarantee(epsilon, list_length, total_variation, bits,
                         largest_shift, description, deltas):
    """1-Diffractor (Meisenbacher et al. 2024) on one list: eps *
    |pos(x) - pos(x')| metric DP per token, positions in the 1-D list of
    the candidates built from `description` by a greedy nearest-neighbour
    walk, with a delta that depends on the pair's distance d in the list
    (`tfdptext.substitution.diffractor.pair_deltas`): `deltas` is
    `delta_statement`'s summary, and the guarantee's delta is delta(1),
    the closest pairs', said so.

    Example:
    >>> g = diffractor_guarantee(1.0, 30000, 2.2e-9, 32, 21, "GloVe",
    ...     {"delta_at_distance_1": 3.4e-9, "disjoint_from_distance": 43,
    ...      "largest_distance_with_delta_at_most": {"1e-06": 7}})
    >>> g.unit, g.parameter, f"{g.delta:.2g}"
    ('per_token', 'epsilon', '3.4e-09')
    """
    epsilon = validation.check_positive("epsilon", epsilon)
    length = validation.check_int("list_length", list_length, minimum=2)
    source = ("one random word per token (B = 32)" if bits == 32 else
              f"floor(U 2^{bits}) of one uniform per token (B = {bits})")
    levels = "; ".join(
        f"delta <= {level} up to d = {d}" for level, d in
        deltas["largest_distance_with_delta_at_most"].items())
    disjoint = deltas["disjoint_from_distance"]
    return guarantee_lib.Guarantee(
        mechanism="diffractor_text_to_text",
        parameter="epsilon",
        value=epsilon,
        unit=guarantee_lib.PER_TOKEN,
        metric=(f"|pos(x) - pos(x')|: the distance in positions between "
                f"the two words in the one-dimensional list of the {length} "
                f"candidate words built from {description} by a greedy "
                "nearest-neighbour walk (start at the lowest candidate id, "
                "then always the nearest word not yet listed: exact "
                "Euclidean distance in float64, ties to the lower id); a "
                "special input that is not passed through (e.g. [UNK]) "
                "takes its nearest candidate's position; the list is "
                "public (a function of the public table)"),
        delta=float(deltas["delta_at_distance_1"]),
        composition=PER_TOKEN_COMPOSITION,
        conditions=(
            "1-Diffractor's geometric mechanism (Meisenbacher, Chevli, "
            "Matthes 2024): the word at position i is released as the word "
            f"at position clip(i + Z, 0, {length - 1}), Z = G1 - G2 for "
            "independent G ~ Geometric(1 - e^-eps), i.e. P(Z = k) = (1 - "
            "q) / (1 + q) q^|k| with q = e^-eps: for any output, P(y | x) "
            "<= e^(eps |pos(x) - pos(x')|) P(y | x'); clipping is "
            "post-processing",
            f"Z sampled exactly from integers: P'(Z >= m) = P'(Z <= -m) = "
            f"floor(2^B q^m / (1 + q)) / 2^B (the counts computed once in "
            f"float64), |Z| <= {largest_shift} (the largest m with a "
            f"non-zero count), drawn by comparing {source} "
            "with integer thresholds (no floating point); total variation "
            f"{total_variation:.3g} from the exact Z",
            "delta depends on the pair: two words d positions apart are "
            "(eps d, delta(d))-indistinguishable, delta(d) the exact "
            "hockey-stick divergence of the two implemented output laws "
            "(from the integer counts, rounded up; `pair_bound` gives a "
            "pair's); the stated delta is delta(1), the closest pairs'; "
            f"{levels}; delta(d) grows with d because no shift beyond "
            f"{largest_shift} is drawn"
            + (f", and from d = {disjoint} on the two words' outputs are "
               "disjoint (delta = 1: a release tells such words apart)"
               if disjoint else ""),
            "one table, one list: the package's mixture over several "
            "embedding models (each model's list gives a candidate, one "
            "of them picked uniformly) is not built; with m lists it "
            "would be eps * max over the lists of the position distance",
            TEXT_TO_TEXT_CONDITION),
        details={"list_length": length, "sampler_bits": bits,
                 "largest_shift": largest_shift,
                 "sampler_total_variation": total_variation,
                 "pair_deltas": deltas},
    )
