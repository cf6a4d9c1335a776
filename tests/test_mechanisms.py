"""The registry of text-to-text mechanisms (tfdptext.mechanisms): its
entries, their options, and the programs' configurations built on it."""

import subprocess
import sys

import numpy as np
import pytest

from tfdptext import mechanisms
from tfdptext.corpus import CorpusConfig
from tfdptext.corpus import mechanisms as corpus_mechanisms
from tfdptext.mechanisms import spec as spec_lib
from tfdptext.training import TrainConfig
from tfdptext.training import config as config_lib


def test_every_entry_is_complete_and_registered_everywhere():
    assert mechanisms.names()[:2] == ("dchi", "brr")
    for name, entry in mechanisms.REGISTRY.items():
        assert entry.name == name
        assert entry.parameter in ("eta", "epsilon")
        assert entry.summary and entry.reference
        assert callable(entry.layer) and callable(entry.offline)
        assert name in config_lib.MECHANISMS
        assert name in config_lib.ALLOWED["text_to_text"]
        assert name in corpus_mechanisms.MECHANISMS
        assert entry.help().startswith(f"{name}: ")


def test_unknown_names_and_options_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="`mechanism` must be one of "
                       "'dchi', 'brr'"):
        mechanisms.get("laplace")
    dchi = mechanisms.get("dchi")
    assert dchi.parse_options(None) == {}
    with pytest.raises(ValueError, match="`mechanism_options`: mechanism "
                       "'dchi' takes no option 'lam'"):
        dchi.parse_options(["lam=0.2"])
    with pytest.raises(ValueError, match="name=value"):
        dchi.parse_options(["lam"])
    with pytest.raises(ValueError, match="`eta` must be finite"):
        dchi.value(0.0)
    with pytest.raises(ValueError, match="`eta` is required"):
        dchi.value(None)


def test_options_parse_defaults_ranges_and_flag_strings():
    entry = spec_lib.TextMechanism(
        name="toy", summary="s", reference="r", parameter="epsilon",
        table=spec_lib.EMBEDDINGS, layer=print, offline=print, options=(
            spec_lib.Option("t", "in [0, 1]", 0.5,
                            spec_lib.float_option(0.0, 1.0)),
            spec_lib.Option("k", "an integer >= 2", 4,
                            spec_lib.int_option(2, 64)),
            spec_lib.Option("g", "optional", None,
                            spec_lib.optional(spec_lib.float_option(
                                0.0, np.inf, include_low=False)))))
    assert entry.parse_options(None) == {"t": 0.5, "k": 4, "g": None}
    assert entry.parse_options(["t=0.25", "k=8"]) == {"t": 0.25, "k": 8,
                                                      "g": None}
    assert entry.parse_options("g=3") == {"t": 0.5, "k": 4, "g": 3.0}
    for given, message in ((["t=2"], r"`t` must be in \[0, 1\]"),
                           (["t=x"], "`t` must be a number"),
                           (["k=1"], "`k` must be an integer >= 2"),
                           (["k=65"], r"`k` must be an integer in \[2, 64\]"),
                           (["g=0"], r"`g` must be in \(0"),
                           (["t=1", "t=0"], "given twice")):
        with pytest.raises(ValueError, match=message):
            entry.parse_options(given)
    with pytest.raises(ValueError, match="parameter"):
        spec_lib.TextMechanism(name="x", summary="", reference="",
                               parameter="delta", table="embeddings",
                               layer=print, offline=print)


def test_train_config_takes_the_entry_parameter_table_and_options():
    assert TrainConfig(mode="text_to_text", eta=5.0).validate().mechanism \
        == "dchi"
    config = TrainConfig(mode="text_to_text", eta=5.0).validate()
    assert config.mechanism_options is None  # no options: as before
    for kwargs, message in (
            ({"mechanism": "dchi", "epsilon": 1.0, "eta": 2.0},
             "`epsilon` is not used by mechanism dchi"),
            ({"mechanism": "dchi", "eta": 2.0,
              "mechanism_options": ["lam=1"]}, "takes no option 'lam'"),
            ({"mechanism": "brr", "epsilon": 1.0}, "`codes`"),
            ({"mechanism": "dchi", "eta": 2.0, "codes": "."},
             "`codes` is used by the mechanisms that read binary codes")):
        with pytest.raises(ValueError, match=message):
            TrainConfig(mode="text_to_text", **kwargs).validate()
    with pytest.raises(ValueError, match="`mechanism_options` applies to "
                       "mode text_to_text"):
        TrainConfig(mode="robust", epsilon=1.0,
                    mechanism_options=["t=1"]).validate()


def test_corpus_config_checks_the_entry_before_any_work():
    with pytest.raises(ValueError, match="takes no option"):
        CorpusConfig(input="x.txt", eta=1.0,
                     mechanism_options=("lam=2",)).validate()
    with pytest.raises(ValueError, match="`epsilon` does not apply"):
        CorpusConfig(input="x.txt", eta=1.0, epsilon=1.0).validate()
    config = CorpusConfig(input="x.txt", eta=3.0).validate()
    assert corpus_mechanisms.spec("dchi").parameters(config)["eta"] == 3.0


def test_registry_imports_without_tensorflow():
    code = ("import sys; import tfdptext.mechanisms, "
            "tfdptext.training.config, tfdptext.corpus.config; "
            "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code],
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr[-2000:]


def test_every_audited_entry_has_a_correct_and_a_broken_audit_row():
    from tfdptext.audit import mechanisms as audit_mechanisms

    audited = [n for n, e in mechanisms.REGISTRY.items() if e.audit]
    assert set(audited) == set(mechanisms.names()) - {"dchi", "brr"}
    for name in audited:
        assert f"{name}_text_to_text" in audit_mechanisms.MECHANISMS
        assert f"broken_{name}" in audit_mechanisms.BROKEN_MECHANISMS
    # d_chi keeps its own row; BRR is audited bit by bit.
    assert "dchi_text_to_text" in audit_mechanisms.MECHANISMS
