"""TruncatedGumbel: the registry entry of report-noisy-min over a Poisson
number of nearest words.

Carvalho, Vasiloudis, Feyisetan, FLAIRS-34 (2021),
https://journals.flvc.org/FLAIRS/article/view/128463 (mldp-text's
TruncatedGumbel). The math: `tfdptext.substitution.truncated_gumbel`.
"""

import numpy as np

from tfdptext.mechanisms import spec


def _kwargs(settings):
    options = settings.options
    return dict(scale=options["scale"],
                max_candidates=options["max_candidates"],
                special_token_ids=settings.special_token_ids,
                passthrough_token_ids=settings.passthrough_token_ids,
                embedding_description=settings.description)


def layer(settings):
    from tfdptext import layers

    return layers.TruncatedGumbelTextPrivatizer(
        settings.value, settings.table, **_kwargs(settings))


def offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import TruncatedGumbelCorpusPrivatizer

    return TruncatedGumbelCorpusPrivatizer(
        settings.table, settings.value, seed=seed, **_kwargs(settings))


TRUNCATED_GUMBEL = spec.TextMechanism(
    name="truncated_gumbel",
    summary="the nearest of x's K ~ Poisson(ln(n - 1)) nearest words after "
    "truncated Gumbel noise on each distance (mldp-text's TruncatedGumbel); "
    "epsilon only calibrates the noise: no worst-case guarantee unless "
    "every word is within reach (max_candidates >= n), then the exact "
    "largest log-ratio, computed",
    reference="Carvalho, Vasiloudis, Feyisetan, FLAIRS-34 2021",
    parameter="epsilon", table=spec.EMBEDDINGS, layer=layer,
    offline=offline,
    options=(
        spec.Option("scale", "the Gumbel scale b > 0 (default: the paper's "
                    "calibration from epsilon, which needs a large epsilon "
                    "and says how large)", None,
                    spec.optional(spec.float_option(
                        0.0, np.inf, include_low=False,
                        include_high=False))),
        spec.Option("max_candidates", "the largest number K of nearest "
                    "words, >= 1 (default 32); 1 + max_candidates random "
                    "words per token", 32, spec.int_option(1))),
    audit=spec.AuditSetting(1.0, ("scale=2.0", "max_candidates=8"),
                            pair=(2, 8),
                            broken="tfdptext.audit.broken_text:"
                            "truncated_gumbel_without_input"))
