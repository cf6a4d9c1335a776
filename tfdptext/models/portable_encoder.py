"""A BERT backbone as a config and a weights file, loadable on any backend.

A keras-hub preset of MiniLM holds float32 weights (91 MB), too large for
a GPU call that carries 64 MiB; this format stores them in float16 (46 MB)
and loads them back as float32: `config.json` (the backbone's
`get_config()`) and `weights.npz` (its weights in order, arrays "w0",
"w1", ...). It needs neither TensorFlow nor a keras-hub preset loader.
`tfdptext.models.portable_encoder.rounding_effect` measures what the
rounding changes.

Example:
>>> save_encoder(backbone, "encoder", dtype="float16")
>>> backbone = load_encoder("encoder")  # float32 weights
"""

import json
import os

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.runfiles import sha256_file

CONFIG = "config.json"
WEIGHTS = "weights.npz"
DTYPES = ("float16", "float32")


def save_encoder(backbone, directory, dtype="float16"):
    """Writes `backbone` (a keras-hub BertBackbone) to `directory`, its
    weights rounded to `dtype`; returns {file: SHA-256}."""
    if dtype not in DTYPES:
        raise ArgumentError(f"`dtype` must be one of {DTYPES}, received "
                            f"{dtype!r}.")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, CONFIG), "w") as f:
        json.dump(backbone.get_config(), f, indent=1, sort_keys=True)
    weights = {f"w{i}": np.asarray(w).astype(dtype)
               for i, w in enumerate(backbone.get_weights())}
    np.savez(os.path.join(directory, WEIGHTS), **weights)
    return {name: sha256_file(os.path.join(directory, name))
            for name in (CONFIG, WEIGHTS)}


def load_encoder(directory):
    """The BertBackbone saved by `save_encoder`, with float32 weights."""
    import keras_hub

    config_path = os.path.join(directory, CONFIG)
    weights_path = os.path.join(directory, WEIGHTS)
    for path in (config_path, weights_path):
        if not os.path.isfile(path):
            raise ArgumentError(f"`directory` {directory!r} holds no "
                                f"{os.path.basename(path)}: not an encoder "
                                "written by save_encoder.")
    with open(config_path) as f:
        backbone = keras_hub.models.BertBackbone.from_config(json.load(f))
    with np.load(weights_path) as store:
        weights = [store[f"w{i}"].astype(np.float32)
                   for i in range(len(store.files))]
    backbone.set_weights(weights)
    return backbone


def rounding_effect(backbone, rounded, features, *, eta, draws, seed=0,
                    candidate_ids=None):
    """What rounding the weights changed, measured (numpy results):

    - `max_abs_output_change`: the largest |difference| of the sequence
      outputs of `backbone` and `rounded` on `features` (real positions);
    - `same_token_share`: d_chi text-to-text at `eta` with the two token
      tables under the SAME noise draws (`draws` tokens drawn uniformly
      from `candidate_ids`): the share of draws whose nearest candidate is
      the same token.
    """
    mask = np.asarray(features["padding_mask"]) > 0
    a = np.asarray(backbone(features)["sequence_output"])[mask]
    b = np.asarray(rounded(features)["sequence_output"])[mask]
    table = np.asarray(backbone.token_embedding.embeddings, np.float64)
    table_r = np.asarray(rounded.token_embedding.embeddings, np.float64)
    rng = np.random.default_rng(seed)
    ids = np.arange(len(table)) if candidate_ids is None else \
        np.asarray(candidate_ids)
    tokens = rng.choice(ids, draws)
    n = table.shape[1]
    direction = rng.normal(size=(draws, n))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    noise = rng.gamma(n, 1.0 / eta, size=(draws, 1)) * direction

    def nearest(t):
        candidates = t[ids]
        queries = t[tokens] + noise
        scores = (queries @ candidates.T) - 0.5 * np.sum(candidates**2, 1)
        return ids[np.argmax(scores, axis=1)]

    return {"max_abs_output_change": float(np.abs(a - b).max()),
            "same_token_share": float(np.mean(nearest(table) ==
                                              nearest(table_r))),
            "eta": float(eta), "draws": int(draws)}
