"""Shared fixtures. Statistical tests use fixed sample sizes and tolerances
chosen so that a correct implementation fails with probability < 1e-4."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# `make test` runs two pytest workers on the machine's cores: an OpenMP team
# of two threads per worker (FAISS, scikit-learn, OpenBLAS) spins on the core
# the other worker is using (a gradient boosting fit measured 34.3 CPU-s on
# two threads against 1.2 on one, the same trees). Results do not depend on
# the thread count; programs the tests run inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

SHARED_DATA = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


@pytest.fixture(autouse=True)
def _private_ledger(tmp_path_factory, monkeypatch):
    """A privacy ledger of each test's own (tfdptext-predict and
    ExportedPipeline.ledger() read $TFDPTEXT_LEDGER): never the user's, and
    no test spends another's budget."""
    monkeypatch.setenv("TFDPTEXT_LEDGER", str(
        tmp_path_factory.mktemp("ledger") / "ledger.json"))


@pytest.fixture(scope="session")
def shared_data():
    """../shared/data beside the checkout; tests skip without it."""
    if not os.path.isdir(SHARED_DATA):
        pytest.skip(f"{SHARED_DATA} is absent (a fresh clone has no "
                    "../shared); the synthetic corpus covers the logic.")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tokenizer():
    from tfdptext import models

    return models.load_tokenizer(max_length=16)


@pytest.fixture(scope="session")
def tiny_backbone():
    """A small randomly initialised BERT over the MiniLM vocabulary."""
    import keras_hub

    return keras_hub.models.BertBackbone(
        vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=64)


@pytest.fixture(scope="session")
def tiny_preset(tmp_path_factory, tiny_backbone):
    """`tiny_backbone` saved as a local keras-hub preset directory with the
    MiniLM vocabulary, for `TrainConfig(preset=...)` and `--preset=`."""
    import shutil

    from tfdptext import models

    path = str(tmp_path_factory.mktemp("preset") / "tiny")
    tiny_backbone.save_to_preset(path)
    shutil.copy(os.path.join(models.minilm_directory(), "vocab.txt"), path)
    return path


@pytest.fixture(scope="session")
def programs():
    """Paths of the launchers in train/, eval/ and export/, by name."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return {name: os.path.join(root, folder, f"tfdptext-{name}")
            for folder, names in (("train", ("train", "demo")),
                                  ("eval", ("eval", "sweep", "audit")),
                                  ("export", ("export", "predict")))
            for name in names}
