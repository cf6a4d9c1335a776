"""CusText and CusText+ (Chen et al. 2023): the entries.

Chen, Mo, Wang, Chen, Nie, Wang, Cui, "A Customized Text Sanitization
Mechanism with Differential Privacy", Findings of ACL 2023. The math:
`tfdptext.substitution.custext` (output sets, exact integer sampling).
"""

from tfdptext.errors import ArgumentError
from tfdptext.mechanisms import spec

# The deliberately broken variants the audit must refute.
_BROKEN = "tfdptext.audit.broken_text:"

ENGLISH = "english"


def _top_k(name, value):
    return spec.int_option(2, 1024)(name, value)


def _keep_words(name, value):
    if value is None or value == "":
        return ENGLISH
    if not isinstance(value, str):
        raise ArgumentError(f"`{name}` must be '{ENGLISH}' or a file of "
                            f"words, received {value!r}.")
    return value


def keep_ids(settings):
    """CusText+'s kept ids: the words of `keep_words` ('english': the
    built-in list) found among the candidates of the vocabulary."""
    from tfdptext.substitution import stopwords

    if settings.vocabulary is None:
        raise ArgumentError("`keep_words` needs the table's vocabulary.")
    source = settings.options["keep_words"]
    words = set(stopwords.ENGLISH if source == ENGLISH
                else stopwords.read_words(source))
    special = set(settings.special_token_ids)
    return tuple(i for i, token in enumerate(settings.vocabulary)
                 if token in words and i not in special)


def _layer(settings, keep=()):
    from tfdptext import layers

    return layers.CusTextTextPrivatizer(
        settings.value, settings.table, top_k=settings.options["top_k"],
        keep_token_ids=keep, special_token_ids=settings.special_token_ids,
        passthrough_token_ids=settings.passthrough_token_ids,
        embedding_description=settings.description)


def _offline(settings, seed=None, keep=()):
    from tfdptext.offline import CusTextCorpusPrivatizer

    return CusTextCorpusPrivatizer(
        settings.table, settings.value, top_k=settings.options["top_k"],
        keep_token_ids=keep, special_token_ids=settings.special_token_ids,
        passthrough_token_ids=settings.passthrough_token_ids, seed=seed,
        embedding_description=settings.description)


def custext_layer(settings):
    return _layer(settings)


def custext_offline(settings, seed=None, num_threads=None):
    return _offline(settings, seed)


def custext_plus_layer(settings):
    return _layer(settings, keep_ids(settings))


def custext_plus_offline(settings, seed=None, num_threads=None):
    return _offline(settings, seed, keep_ids(settings))


TOP_K = spec.Option("top_k", "the size of an output set, in [2, 1024] "
                    "(default 20)", 20, _top_k)

CUSTEXT = spec.TextMechanism(
    name="custext",
    summary="exponential mechanism within customized output sets of "
    "top_k near words that partition the vocabulary; eps-LDP within a set, "
    "exact integer sampling (pyPANTERA's CusText uses per-word sets)",
    reference="Chen, Mo, Wang, Chen, Nie, Wang, Cui, Findings of ACL 2023",
    parameter="epsilon", table=spec.EMBEDDINGS,
    layer=custext_layer, offline=custext_offline,
    options=(TOP_K,),
    audit=spec.AuditSetting(3.0, ("top_k=3",), pair=(2, 7),
                            broken=_BROKEN + "custext_per_word_sets"))

CUSTEXT_PLUS = spec.TextMechanism(
    name="custext_plus",
    summary="CusText with stopwords released unchanged (unprotected)",
    reference="Chen, Mo, Wang, Chen, Nie, Wang, Cui, Findings of ACL 2023",
    parameter="epsilon", table=spec.EMBEDDINGS,
    layer=custext_plus_layer, offline=custext_plus_offline,
    options=(TOP_K, spec.Option(
        "keep_words", f"'{ENGLISH}' (built-in English function words, the "
        "default) or a file of words, one per line, released unchanged",
        ENGLISH, _keep_words)),
    audit=spec.AuditSetting(3.0, ("top_k=3",), pair=(2, 7),
                            broken=_BROKEN + "custext_per_word_sets"))
