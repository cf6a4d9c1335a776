"""Mahalanobis (Xu et al. 2020) and Vickrey (Xu et al. 2021) text-to-text:
the Keras layers, the offline privatizers and the phone models against
the closed-form output distribution on a 2-D toy table."""

import keras
import numpy as np
import pytest

import substitution_checks as checks
from tfdptext import layers
from tfdptext import mechanisms
from tfdptext import offline
from tfdptext.privacy import guarantee as g_lib
from tfdptext.substitution import mahalanobis

ETA = 1.5
LAM = 0.6
T = 0.5
DRAWS = 20000
V = len(checks.TABLE)


def _root():
    candidates = checks.TABLE[1:]
    root, _ = mahalanobis.roots(
        mahalanobis.regularized_covariance(candidates, LAM))
    return root


def _kwargs():
    return dict(special_token_ids=checks.SPECIAL,
                passthrough_token_ids=checks.PASSTHROUGH)


def test_regularized_covariance_and_its_roots():
    x = np.random.default_rng(3).normal(size=(500, 4)) * [1, 2, 3, 4]
    assert np.allclose(mahalanobis.regularized_covariance(x, 0.0), np.eye(4))
    sigma = mahalanobis.regularized_covariance(x, 1.0)
    assert np.trace(sigma) == pytest.approx(4.0)
    root, inverse = mahalanobis.roots(
        mahalanobis.regularized_covariance(x, 0.3))
    assert np.allclose(root @ root,
                       mahalanobis.regularized_covariance(x, 0.3))
    assert np.allclose(root @ inverse, np.eye(4))
    flat = np.zeros((10, 3))
    flat[:, 0] = np.arange(10)  # rank 1: singular at lambda = 1
    with pytest.raises(ValueError, match="`lam`: Sigma_lambda is singular"):
        mahalanobis.roots(mahalanobis.regularized_covariance(flat, 1.0))
    for bad in (-0.1, 1.5, "x"):
        with pytest.raises(ValueError, match="`lam`"):
            mahalanobis.check_lambda(bad)


@pytest.mark.parametrize("word", checks.WORDS)
def test_mahalanobis_layer_and_offline_match_the_closed_form(word):
    probs = checks.metric_noise_closed_form(checks.TABLE, checks.SPECIAL,
                                            word, ETA, root=_root())
    layer = layers.MahalanobisTextPrivatizer(ETA, checks.TABLE, lam=LAM,
                                             **_kwargs())
    counts = checks.layer_counts(layer, word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4
    counts = checks.offline_counts(layer.corpus_privatizer(), word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4


@pytest.mark.parametrize("lam", [None, LAM])
def test_vickrey_layer_and_offline_match_the_closed_form(lam):
    word = 1
    root = None if lam is None else _root()
    probs = checks.metric_noise_closed_form(
        checks.TABLE, checks.SPECIAL, word, ETA, root=root, threshold=T)
    layer = layers.VickreyTextPrivatizer(ETA, checks.TABLE, t=T, lam=lam,
                                         **_kwargs())
    counts = checks.layer_counts(layer, word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4
    counts = checks.offline_counts(layer.corpus_privatizer(), word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4


def test_vickrey_moves_mass_to_the_runner_up():
    """t = 0 is the nearest-token mechanism; t = 1 never releases the
    nearest token, so at a tiny noise the input word never survives."""
    nearest = checks.metric_noise_closed_form(checks.TABLE, checks.SPECIAL,
                                              1, ETA, threshold=0.0)
    assert np.allclose(nearest, checks.metric_noise_closed_form(
        checks.TABLE, checks.SPECIAL, 1, ETA))
    layer = layers.VickreyTextPrivatizer(1e5, checks.TABLE, t=1.0,
                                         **_kwargs())
    out = np.asarray(layer(np.full((500, 1), 1, np.int32))).ravel()
    assert (out == 2).all()  # the second nearest to phi(1) is id 2


def test_phone_models_take_random_words_and_match_the_closed_form():
    root = _root()
    for layer, closed in (
            (layers.MahalanobisTextPrivatizer(ETA, checks.TABLE, lam=LAM,
                                              **_kwargs()),
             dict(root=root)),
            (layers.VickreyTextPrivatizer(ETA, checks.TABLE, t=T, lam=LAM,
                                          **_kwargs()),
             dict(root=root, threshold=T))):
        forms = [checks.metric_noise_closed_form(
            checks.TABLE, checks.SPECIAL, w, ETA, **closed)
            for w in (1, 4)]
        ops = checks.check_phone_model(layer, [1, 4], forms, draws=10000)
        assert not any(op.name.startswith("RANDOM") for op in ops)


def test_guarantees_state_unit_metric_and_randomness():
    layer = layers.MahalanobisTextPrivatizer(ETA, checks.TABLE, lam=LAM,
                                             **_kwargs())
    layer(np.array([[1]], np.int32))
    g = layer.guarantee()
    assert (g.mechanism, g.parameter, g.value, g.unit) == (
        "mahalanobis_text_to_text", "eta", ETA, g_lib.PER_TOKEN)
    assert "Mahalanobis" in g.metric and f"{LAM:g} Sigma" in g.metric
    assert g.randomness == "tensorflow_unseeded"
    assert layer.corpus_privatizer().guarantee().randomness == "os_entropy"
    bound, delta = layer.pair_bound(1, 2)
    inverse = np.linalg.inv(_root())
    assert bound == pytest.approx(ETA * np.linalg.norm(
        inverse @ (checks.TABLE[1] - checks.TABLE[2])), rel=1e-5)
    assert delta == 0.0
    vickrey = layers.VickreyTextPrivatizer(ETA, checks.TABLE, **_kwargs())
    g = vickrey.guarantee()
    assert g.mechanism == "vickrey_dchi_text_to_text"
    assert g.metric.startswith("Euclidean")
    assert "Vickrey choice" in g.conditions[-1]


def test_serialization_round_trip_keeps_table_root_and_config(tmp_path):
    layer = layers.VickreyTextPrivatizer(ETA, checks.TABLE, t=0.3, lam=LAM,
                                         **_kwargs())
    inputs = keras.Input((2,), dtype="int32")
    model = keras.Model(inputs, layer(inputs))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path).layers[-1]
    assert isinstance(loaded, layers.VickreyTextPrivatizer)
    assert (loaded.t, loaded.lam, loaded.eta) == (0.3, LAM, ETA)
    assert np.allclose(loaded.root(), _root(), atol=1e-6)
    assert np.array_equal(loaded.public_table(), checks.TABLE)


@pytest.mark.parametrize("kwargs, message", [
    ({"eta": 0.0}, "`eta` must be finite"),
    ({"lam": 2.0}, r"`lam` must be in \[0, 1\]"),
    ({"t": -0.5}, r"`t` must be in \[0, 1\]"),
    ({"special_token_ids": list(range(6))}, "fewer than 2 candidate"),
])
def test_bad_arguments_are_refused(kwargs, message):
    arguments = dict(eta=ETA, embeddings=checks.TABLE, t=T, lam=LAM,
                     **_kwargs())
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        layers.VickreyTextPrivatizer(**arguments)


def test_registry_builds_the_layers_and_offline_twins():
    settings = mechanisms.Settings(
        value=ETA, options={}, table=checks.TABLE,
        special_token_ids=checks.SPECIAL,
        passthrough_token_ids=checks.PASSTHROUGH, description="toy")
    for name, kind, twin in (
            ("mahalanobis", layers.MahalanobisTextPrivatizer,
             offline.MahalanobisCorpusPrivatizer),
            ("vickrey_dchi", layers.VickreyTextPrivatizer,
             offline.VickreyCorpusPrivatizer),
            ("vickrey_mahalanobis", layers.VickreyTextPrivatizer,
             offline.VickreyCorpusPrivatizer)):
        entry = mechanisms.get(name)
        options = entry.parse_options(None)
        built = entry.layer(mechanisms.Settings(**{
            **settings.__dict__, "options": options}))
        assert isinstance(built, kind)
        assert built.lam == (None if name == "vickrey_dchi" else 0.2)
        assert isinstance(entry.offline(mechanisms.Settings(**{
            **settings.__dict__, "options": options})), twin)
