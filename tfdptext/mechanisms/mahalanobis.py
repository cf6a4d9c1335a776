"""Mahalanobis and Vickrey text-to-text (Xu et al. 2020, 2021): entries.

- `mahalanobis`: elliptical noise with density ~ exp(-eta ||Sigma_lambda^
  {-1/2} z||), nearest token (Xu, Aggarwal, Feyisetan, Teissier,
  PrivateNLP 2020).
- `vickrey_dchi`, `vickrey_mahalanobis`: that noise (or d_chi), then the
  nearest or second-nearest token by the Vickrey rule with threshold t
  (Xu, Aggarwal, Feyisetan, Teissier, PrivateNLP 2021).

The math: `tfdptext.substitution.mahalanobis` and `.vickrey`.
"""

from tfdptext.mechanisms import spec

# The deliberately broken variants the audit must refute.
_BROKEN = "tfdptext.audit.broken_text:"


def _check_eta(value):
    from tfdptext.privacy import metric

    return metric.check_float32_eta(value)


def _lam(name, value):
    from tfdptext.substitution import mahalanobis

    return mahalanobis.check_lambda(value)


def _t(name, value):
    from tfdptext.substitution import vickrey

    return vickrey.check_threshold(value)


LAMBDA = spec.Option(
    "lam", "lambda in [0, 1] of Sigma_lambda = lambda Sigma + (1 - lambda) "
    "I (0: d_chi; default 0.2)", 0.2, _lam)
THRESHOLD = spec.Option(
    "t", "Vickrey threshold in [0, 1]: the nearest token with probability "
    "(1 - t) d2 / (t d1 + (1 - t) d2) (0: always the nearest; default 0.5)",
    0.5, _t)


def _common(settings):
    return dict(special_token_ids=settings.special_token_ids,
                passthrough_token_ids=settings.passthrough_token_ids,
                embedding_description=settings.description)


def mahalanobis_layer(settings):
    from tfdptext import layers

    return layers.MahalanobisTextPrivatizer(
        settings.value, settings.table, lam=settings.options["lam"],
        **_common(settings))


def mahalanobis_offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import MahalanobisCorpusPrivatizer

    return MahalanobisCorpusPrivatizer(
        settings.table, settings.value, lam=settings.options["lam"],
        seed=seed, num_threads=num_threads, **_common(settings))


def vickrey_layer(settings):
    from tfdptext import layers

    return layers.VickreyTextPrivatizer(
        settings.value, settings.table, t=settings.options["t"],
        lam=settings.options.get("lam"), **_common(settings))


def vickrey_offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import VickreyCorpusPrivatizer

    return VickreyCorpusPrivatizer(
        settings.table, settings.value, t=settings.options["t"],
        lam=settings.options.get("lam"), seed=seed, num_threads=num_threads,
        **_common(settings))


MAHALANOBIS = spec.TextMechanism(
    name="mahalanobis",
    summary="elliptical noise shaped by the embeddings' regularized "
    "covariance, nearest token; eta * d_R metric DP (mldp-text's and "
    "pyPANTERA's Mahalanobis)",
    reference="Xu, Aggarwal, Feyisetan, Teissier, PrivateNLP 2020",
    parameter="eta", table=spec.EMBEDDINGS, layer=mahalanobis_layer,
    offline=mahalanobis_offline, options=(LAMBDA,),
    audit=spec.AuditSetting(0.8, ("lam=0.5",),
                            broken=_BROKEN + "half_noise_mahalanobis"),
    check_value=_check_eta)

VICKREY_DCHI = spec.TextMechanism(
    name="vickrey_dchi",
    summary="d_chi noise, then the nearest or second-nearest token by the "
    "Vickrey rule; eta * d metric DP (mldp-text's VickreyMechanism, "
    "pyPANTERA's VickreyCMP)",
    reference="Xu, Aggarwal, Feyisetan, Teissier, PrivateNLP 2021",
    parameter="eta", table=spec.EMBEDDINGS, layer=vickrey_layer,
    offline=vickrey_offline, options=(THRESHOLD,),
    audit=spec.AuditSetting(1.0, ("t=0.5",),
                            broken=_BROKEN + "half_noise_vickrey"),
    check_value=_check_eta)

VICKREY_MAHALANOBIS = spec.TextMechanism(
    name="vickrey_mahalanobis",
    summary="Mahalanobis noise, then the Vickrey rule; eta * d_R metric DP "
    "(pyPANTERA's VickreyMhl)",
    reference="Xu, Aggarwal, Feyisetan, Teissier, PrivateNLP 2021",
    parameter="eta", table=spec.EMBEDDINGS, layer=vickrey_layer,
    offline=vickrey_offline, options=(THRESHOLD, LAMBDA),
    audit=spec.AuditSetting(1.0, ("t=0.5", "lam=0.5"),
                            broken=_BROKEN + "half_noise_vickrey"),
    check_value=_check_eta)
