"""SanText, SanText+ (Yue et al. 2021) and TEM (Carvalho et al. 2023):
the Keras layers, the offline privatizers and the phone models against
the closed-form output distribution on a 2-D toy table."""

import math

import keras
import numpy as np
import pytest

import substitution_checks as checks
from tfdptext import layers
from tfdptext import mechanisms
from tfdptext.privacy import guarantee as g_lib
from tfdptext.substitution import utilities

EPSILON = 2.0
GAMMA = 1.6
P = 0.3
SENSITIVE = (3, 4, 5, 6)
DRAWS = 20000
V = len(checks.TABLE)


def _distances(word):
    return np.linalg.norm(checks.TABLE.astype(np.float64)
                          - checks.TABLE[word], axis=1)


def _softmax(s):
    w = np.exp(s - s.max())
    return w / w.sum()


def santext_form(word, sensitive=None, p=None):
    s = -EPSILON * _distances(word) / 2
    outputs = np.ones(V, bool) if sensitive is None else np.isin(
        np.arange(V), sensitive)
    outputs[list(checks.SPECIAL)] = False
    s[~outputs] = -np.inf
    probs = _softmax(s)
    if sensitive is None or word in sensitive:
        return probs
    keep = utilities.keep_threshold(p) / 2**utilities.KEEP_BITS
    probs = (1 - keep) * probs
    probs[word] += keep
    return probs


def tem_form(word, gamma=GAMMA):
    s = -EPSILON * np.minimum(_distances(word), gamma) / 2
    s[list(checks.SPECIAL)] = -np.inf
    return _softmax(s)


def tem_paper_form(word, gamma=GAMMA):
    """TEM as the paper samples it: an exponential mechanism over L_x and
    one element 'bottom' of utility -gamma + (2 / eps) ln |V \\ L_x|, then
    a uniform word outside L_x."""
    d = _distances(word)
    candidates = np.array([i for i in range(V) if i not in checks.SPECIAL])
    inside = candidates[d[candidates] <= gamma]
    outside = candidates[d[candidates] > gamma]
    utility = list(-d[inside])
    if len(outside):
        utility.append(-gamma + 2.0 / EPSILON * math.log(len(outside)))
    weights = np.exp(EPSILON * np.array(utility) / 2)
    weights /= weights.sum()
    probs = np.zeros(V)
    probs[inside] = weights[:len(inside)]
    if len(outside):
        probs[outside] = weights[-1] / len(outside)
    return probs


def _kwargs():
    return dict(special_token_ids=checks.SPECIAL,
                passthrough_token_ids=checks.PASSTHROUGH)


LAYERS = {
    "santext": lambda: layers.SanTextTextPrivatizer(
        EPSILON, checks.TABLE, **_kwargs()),
    "santext_plus": lambda: layers.SanTextTextPrivatizer(
        EPSILON, checks.TABLE, sensitive_token_ids=SENSITIVE, p=P,
        **_kwargs()),
    "tem": lambda: layers.TEMTextPrivatizer(EPSILON, checks.TABLE,
                                            gamma=GAMMA, **_kwargs()),
}
FORMS = {
    "santext": santext_form,
    "santext_plus": lambda w: santext_form(w, SENSITIVE, P),
    "tem": tem_form,
}


def test_tem_distribution_is_the_papers_construction():
    for word in range(1, V):
        for gamma in (0.5, GAMMA, 10.0):
            assert np.allclose(tem_form(word, gamma),
                               tem_paper_form(word, gamma))
    assert utilities.tem_gamma(10.0, 0.001, 30000) == pytest.approx(
        2 / 10 * math.log(0.999 * 29999 / 0.001))


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("word", checks.WORDS)
def test_layer_and_offline_match_the_closed_form(name, word):
    layer = LAYERS[name]()
    probs = FORMS[name](word)
    counts = checks.layer_counts(layer, word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4
    counts = checks.offline_counts(layer.corpus_privatizer(), word, DRAWS, V)
    assert checks.chi_square_pvalue(counts, probs) > 1e-4


def test_santext_plus_keeps_only_non_sensitive_words_and_outputs_sensitive():
    layer = LAYERS["santext_plus"]()
    out = np.asarray(layer(np.array([[1, 2, 3, 0]] * 4000, np.int32)))
    assert (out[:, 3] == 0).all()  # passthrough
    for column, word in enumerate((1, 2, 3)):
        released = out[:, column]
        assert np.isin(released, SENSITIVE + (word,)).all()
        if word in SENSITIVE:
            continue
        kept = (released == word).mean()
        assert abs(kept - (1 - P)) < 4.5 * math.sqrt(P * (1 - P) / 4000)


def test_phone_models_take_random_words_and_match_the_closed_form():
    for name in ("santext_plus", "tem"):
        forms = [FORMS[name](w) for w in (1, 4)]
        checks.check_phone_model(LAYERS[name](), [1, 4], forms, draws=10000)


def test_guarantees_state_unit_metric_delta_and_randomness():
    tem = LAYERS["tem"]()
    g = tem.guarantee()
    assert (g.mechanism, g.parameter, g.value, g.unit) == (
        "tem_text_to_text", "epsilon", EPSILON, g_lib.PER_TOKEN)
    assert "min(Euclidean distance" in g.metric
    assert g.details["any_pair_epsilon"] == pytest.approx(EPSILON * GAMMA)
    assert 0 < g.delta < 1e-3 and g.randomness == "tensorflow_unseeded"
    offline_g = tem.corpus_privatizer().guarantee()
    assert offline_g.delta < 1e-12 and offline_g.randomness == "os_entropy"
    bound, delta = tem.pair_bound(1, 4)
    assert bound == pytest.approx(EPSILON * GAMMA)  # d(1, 4) > gamma
    assert delta == pytest.approx(min(1.0, g.details[
        "sampler_total_variation"] * (1 + math.exp(bound))))
    plus = LAYERS["santext_plus"]()
    g = plus.guarantee()
    assert g.mechanism == "santext_plus_text_to_text"
    assert "infinite when either word is not sensitive" in g.metric
    assert plus.pair_bound(1, 3)[0] == math.inf
    assert plus.pair_bound(3, 4)[0] == pytest.approx(
        EPSILON * np.linalg.norm(checks.TABLE[3] - checks.TABLE[4]))


def test_serialization_round_trip(tmp_path):
    for name in ("santext_plus", "tem"):
        layer = LAYERS[name]()
        inputs = keras.Input((2,), dtype="int32")
        model = keras.Model(inputs, layer(inputs))
        path = str(tmp_path / f"{name}.keras")
        model.save(path)
        loaded = keras.models.load_model(path).layers[-1]
        assert loaded.get_config() == layer.get_config()
        assert np.array_equal(loaded.public_table(), checks.TABLE)


@pytest.mark.parametrize("make, message", [
    (lambda: layers.TEMTextPrivatizer(0.0, checks.TABLE), "`epsilon`"),
    (lambda: layers.TEMTextPrivatizer(1.0, checks.TABLE, gamma=-1.0),
     "`gamma`"),
    (lambda: layers.TEMTextPrivatizer(1.0, checks.TABLE, beta=1.0),
     r"`beta` must be in \(0, 1\)"),
    (lambda: layers.SanTextTextPrivatizer(1.0, checks.TABLE, p=0.5),
     "`p` applies to SanText\\+ only"),
    (lambda: layers.SanTextTextPrivatizer(
        1.0, checks.TABLE, sensitive_token_ids=[0], special_token_ids=[0]),
     "`sensitive_token_ids`"),
    (lambda: layers.SanTextTextPrivatizer(
        1.0, checks.TABLE, sensitive_token_ids=[3], p=1.5), "`p`"),
])
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_registry_options():
    plus = mechanisms.get("santext_plus")
    assert plus.parse_options(["sensitive_fraction=0.25"]) == {
        "sensitive_fraction": 0.25, "p": 0.2, "cache_mib": 256}
    settings = mechanisms.Settings(
        EPSILON, plus.parse_options(["sensitive_fraction=0.5", "p=0.1"]),
        checks.TABLE, checks.SPECIAL, checks.PASSTHROUGH, "toy")
    layer = plus.layer(settings)
    assert layer.sensitive_token_ids == (4, 5, 6) and layer.p == 0.1
    assert plus.offline(settings).sensitive_token_ids == (4, 5, 6)
    tem = mechanisms.get("tem")
    with pytest.raises(ValueError, match="`gamma`"):
        tem.parse_options(["gamma=0"])
    layer = tem.layer(mechanisms.Settings(
        EPSILON, tem.parse_options(None), checks.TABLE, checks.SPECIAL, (),
        "toy"))
    assert layer.gamma == pytest.approx(
        utilities.tem_gamma(EPSILON, 0.001, V - 1))
