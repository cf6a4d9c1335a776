"""1-Diffractor (Meisenbacher, Chevli, Matthes 2024): the registry entry
of geometric noise on the positions of a one-dimensional list of the
vocabulary.

Meisenbacher, Chevli, Matthes, "1-Diffractor: Efficient and
Utility-Preserving Text Obfuscation Leveraging Word-Level Metric
Differential Privacy", ACM WPES 2024 (PyPI dp-diffractor). The math:
`tfdptext.substitution.diffractor`. One table gives one list (a
`Settings` holds one table): the package's mixture over several embedding
models and its `method="TEM"` variant are not built.
"""

from tfdptext.mechanisms import spec


def _kwargs(settings):
    return dict(special_token_ids=settings.special_token_ids,
                passthrough_token_ids=settings.passthrough_token_ids,
                embedding_description=settings.description)


def layer(settings):
    from tfdptext import layers

    return layers.DiffractorTextPrivatizer(settings.value, settings.table,
                                           **_kwargs(settings))


def offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import DiffractorCorpusPrivatizer

    return DiffractorCorpusPrivatizer(settings.table, settings.value,
                                      seed=seed, **_kwargs(settings))


DIFFRACTOR = spec.TextMechanism(
    name="diffractor",
    summary="1-Diffractor: the word at position i of a one-dimensional "
    "list of the vocabulary (a greedy nearest-neighbour walk over the "
    "embeddings) released as the word at clip(i + G1 - G2), G two "
    "geometric draws with P(k) ~ exp(-eps |k|); eps * |pos(x) - pos(x')| "
    "metric DP per token, exact integer sampling (one list: dp-diffractor's "
    "mixture over several embedding models is not built)",
    reference="Meisenbacher, Chevli, Matthes, ACM WPES 2024",
    parameter="epsilon", table=spec.EMBEDDINGS, layer=layer,
    offline=offline,
    # Ids 7 and 5 are neighbours (positions 2 and 3) in the toy table's
    # list 1, 2, 7, 5, 8, 6, 3, 4.
    audit=spec.AuditSetting(1.5, (), pair=(7, 5),
                            broken="tfdptext.audit.broken_text:"
                            "half_noise_diffractor"))
