"""A text_to_text run with a registered mechanism beyond d_chi and BRR,
end to end on the tiny encoder: tfdptext-train builds its layer from the
registry, the evaluation measures plausible deniability with its offline
twin, and the export writes a builtins-only phone model that takes
random_words."""

import json
import os

import numpy as np
import pytest

import eager_training
from tfdptext import data
from tfdptext import training
from tfdptext.evaluation import evaluate
from tfdptext.export import exporter
from tfdptext.export import tflite
from tfdptext.privacy import extraction


# One mechanism keeps the suite short: CusText+ (an int32 table, no
# embeddings in the layer, options with a word list); the others' layers,
# phone models and offline twins are tested in their own files.
@pytest.mark.parametrize("mechanism, options, words_per_token", [
    ("custext_plus", ["top_k=8"], 1),
])
def test_run_trains_evaluates_and_exports(tiny_preset, tmp_path, mechanism,
                                          options, words_per_token):
    config = training.TrainConfig(
        mode="text_to_text", mechanism=mechanism, epsilon=2.0,
        mechanism_options=options, preset=tiny_preset, max_length=8,
        batch_size=32, epochs=1, max_train_examples=64)
    assert config.validate().mechanism_options[options[0].split("=")[0]] \
        == float(options[0].split("=")[1])
    run = str(tmp_path / "run")
    corpus = data.load_synthetic(num_examples=120)
    # Its two steps run eagerly (tests/eager_training.py): this run is
    # here for what its mechanism adds to training, evaluation and the
    # export; tests/test_training.py trains text_to_text with fit's graph.
    with eager_training.eager_fit():
        metrics = training.train(config, run, dataset=corpus, verbose=0)
    guarantee = metrics["guarantee"]
    assert guarantee["mechanism"] == f"{mechanism}_text_to_text"
    assert guarantee["unit"] == "per_token"
    saved = json.load(open(os.path.join(run, "config.json")))
    assert saved["mechanism_options"] == config.mechanism_options
    # A logistic-regression attacker: the Keras MLP attacker is tested in
    # tests/test_evaluation.py; here it would only add its training.
    result = evaluate.evaluate(run, str(tmp_path / "eval"), dataset=corpus,
                               attackers=("logistic_regression",),
                               deniability_tokens=3, deniability_samples=40,
                               progress=False, plots=False)
    token = result["token_level"]
    assert token["epsilon"] == 2.0 and len(token["deniability"]["n_w"]) == 3
    assert 0.0 <= token["changed_share"] <= 1.0
    out = str(tmp_path / "export")
    manifest = exporter.export_run(run, out, lengths=[8])
    assert manifest["guarantee"]["mechanism"] == f"{mechanism}_text_to_text"
    assert manifest["user"]["inputs"]["random_words"] == [
        1, extraction.layout(8 * words_per_token).words, "int32"]
    phone = open(os.path.join(out, "user", "privatizer.tflite"), "rb").read()
    tflite.check_unseeded_builtins(phone)
    assert np.isfinite(token["deniability"]["s_w_median"])
