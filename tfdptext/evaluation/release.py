"""What leaves the phone, for evaluation: releases of a trained run.

`TrainedRun` loads a run directory written by `tfdptext.training.train`
(user side, server side, tokenizer, config). `releases` runs the user side on
texts with its noise ON, so every example gets fresh noise, exactly what a
server or an eavesdropper on the wire receives; the noise comes from
os.urandom (`tfdptext.models.secure.SecureUserSide`), as on a user's
device. `attack_features` turns a
release into one vector per text for attackers; `predict` runs the server.
"""

import os

import numpy as np

from tfdptext import runfiles
from tfdptext.errors import TfdptextError

from tfdptext.data.tokenization import TextTokenizer
from tfdptext.models import split as split_lib


class RunError(TfdptextError):
    """The directory is not a usable trained run, or does not fit the data."""


def _read_json(path, required=()):
    """A run file's JSON object; RunError naming the file and what is
    wrong (truncated, not JSON, a required key absent)."""
    return runfiles.read_json(path, RunError, required=required)


# The keys of each run file TrainedRun reads.
_REQUIRED_KEYS = {
    "config.json": ("mode", "mechanism", "max_length", "dataset"),
    "split.json": ("split_point", "guarantee", "tokenizer"),
    "metrics.json": (),
}


def _load_keras(path):
    """keras.models.load_model with a clear RunError for a bad file."""
    import keras

    runfiles.check_keras_file(path, RunError)
    try:
        return keras.models.load_model(path)
    except Exception as err:  # noqa: BLE001 (Keras raises many types)
        lines = str(err).strip().splitlines()
        raise RunError(f"{path} cannot be loaded as a Keras model ("
                       f"{lines[0] if lines else type(err).__name__}).") \
            from None


class TrainedRun:
    """A finished training run, ready to evaluate.

    Args:
        model_dir: the run directory (tfdptext-train's --output_dir).
        vocabulary: optional vocabulary (list or vocab.txt path) the caller
            means to tokenize with; it must be the run's own, since the
            user side was trained on those ids.

    Example:
    >>> run = TrainedRun("runs/ag_eps0.05")
    >>> released = run.releases(["Stocks rallied on Monday."])
    >>> run.predict(released).argmax(axis=1)
    """

    FILES = ("config.json", "split.json", "metrics.json", "user_side.keras",
             "server_side.keras", "vocab.txt")

    def __init__(self, model_dir, vocabulary=None):
        if not os.path.isdir(model_dir):
            raise RunError(f"`model_dir`: {model_dir} is not a directory.")
        missing = [f for f in self.FILES
                   if not os.path.exists(os.path.join(model_dir, f))]
        if missing:
            raise RunError(f"`model_dir`: {model_dir} is not a finished "
                           f"tfdptext run (missing {missing}).")
        self.model_dir = model_dir
        self.config = _read_json(os.path.join(model_dir, "config.json"),
                                 _REQUIRED_KEYS["config.json"])
        self.split = _read_json(os.path.join(model_dir, "split.json"),
                                _REQUIRED_KEYS["split.json"])
        self.metrics = _read_json(os.path.join(model_dir, "metrics.json"))
        for name in ("user_side.keras", "server_side.keras"):
            runfiles.check_keras_file(os.path.join(model_dir, name),
                                      RunError)
        if os.path.getsize(os.path.join(model_dir, "vocab.txt")) == 0:
            raise RunError(f"{model_dir}/vocab.txt is empty.")
        self.tokenizer = TextTokenizer.from_config(
            os.path.join(model_dir, "vocab.txt"), self.split["tokenizer"])
        if vocabulary is not None:
            other = TextTokenizer(vocabulary)
            if other.vocabulary_sha256() != self.tokenizer.vocabulary_sha256():
                raise RunError(
                    "The tokenizer asked for is not the model's: its "
                    f"vocabulary ({other.vocabulary_size} tokens, SHA-256 "
                    f"{other.vocabulary_sha256()[:12]}) differs from "
                    f"{model_dir}/vocab.txt ({self.tokenizer.vocabulary_size}"
                    f" tokens, SHA-256 {self.tokenizer.vocabulary_sha256()[:12]}"
                    "); evaluate with the run's own tokenizer.")
        self.split_point = self.split["split_point"]
        if self.split_point not in split_lib.SPLIT_POINTS:
            raise RunError(f"{model_dir}/split.json: unknown split point "
                           f"{self.split_point!r}.")
        self.user = _load_keras(os.path.join(model_dir, "user_side.keras"))
        self.server = _load_keras(
            os.path.join(model_dir, "server_side.keras"))

    @staticmethod
    def read_config(model_dir):
        """The run's config.json as a dict (without loading the models)."""
        path = os.path.join(model_dir, "config.json")
        if not os.path.exists(path):
            raise RunError(f"`model_dir`: {model_dir} holds no config.json; "
                           "is it a tfdptext run?")
        return _read_json(path, ("dataset", "data_dir"))

    @property
    def guarantee(self):
        """The run's guarantee (split.json) with the randomness of the
        releases made here: os.urandom."""
        from tfdptext.privacy import guarantee as guarantee_lib
        from tfdptext.privacy import randomness

        return guarantee_lib.Guarantee.from_dict(
            self.split["guarantee"]).with_randomness(
                randomness.OS_ENTROPY).to_dict()

    @property
    def secure_user(self):
        """The user side fed by os.urandom."""
        from tfdptext.models import secure

        if getattr(self, "_secure_user", None) is None:
            self._secure_user = secure.SecureUserSide(
                self.user, self.split_point,
                max_tokens=int(self.config["max_length"]) - 2)
        return self._secure_user

    def embedding_table(self):
        """The (vocabulary, dim) token embedding table the release uses
        (token-level splits), or None."""
        from tfdptext.layers.dchi_text_privatizer import DChiTextPrivatizer

        for layer in self.user._flatten_layers():
            if isinstance(layer, DChiTextPrivatizer):
                return np.asarray(layer.embeddings.numpy())
        if self.split_point == split_lib.TOKEN:
            for layer in self.user._flatten_layers():
                if type(layer).__name__ == "ReversibleEmbedding" or \
                        type(layer).__name__ == "Embedding":
                    table = np.asarray(layer.embeddings.numpy())
                    if table.shape[0] == self.tokenizer.vocabulary_size:
                        return table
        return None

    def features(self, texts):
        return {k: v.numpy() for k, v in self.tokenizer(list(texts)).items()}

    def releases(self, texts, batch_size=64, progress=False):
        """The user side's outputs (noise on, fresh per example) as numpy.

        Returns (release dict, features dict).
        """
        import keras

        texts = list(texts)
        features = self.features(texts)
        bar = keras.utils.Progbar(len(texts), unit_name="text") \
            if progress else None
        parts = []
        full = features["token_ids"].shape[1]
        for start in range(0, len(texts), batch_size):
            # Cut the batch to its longest text (attention and pooling are
            # masked, so the release is the same), then pad token-level
            # outputs back to the full length so that batches stack.
            length = max(int(features["padding_mask"][
                start:start + batch_size].sum(axis=1).max()), 1)
            batch = {k: v[start:start + batch_size, :length]
                     for k, v in features.items()}
            out = self._release(batch)
            part = {}
            for k, v in out.items():
                v = np.asarray(v)
                if v.ndim >= 2 and v.shape[1] == length and length < full:
                    pad = [(0, 0), (0, full - length)] + [(0, 0)] * (
                        v.ndim - 2)
                    value = self.tokenizer.pad_id if k == "token_ids" else 0
                    v = np.pad(v, pad, constant_values=value)
                part[k] = v
            parts.append(part)
            if bar is not None:
                bar.add(len(batch["token_ids"]))
        released = {k: np.concatenate([p[k] for p in parts])
                    for k in parts[0]}
        return released, features

    def _release(self, batch):
        """The user side's release of one batch, noise from os.urandom; a
        user side without noise (modes none, adv) is run as it is."""
        from tfdptext.models import secure

        dropout, privatizer = secure.find_layers(self.user)
        if dropout is None and privatizer is None:
            out = self.user(batch, training=False)
            if not isinstance(out, dict):
                out = {secure.RELEASE_NAMES[self.split_point]: out}
            return dict(out)
        out = self.secure_user(batch)
        if self.split_point != split_lib.SEQUENCE:
            # Released with the tokens: they reveal only the length.
            out["padding_mask"] = batch["padding_mask"]
            out["segment_ids"] = np.zeros_like(batch["padding_mask"])
        return out

    def attack_features(self, released, table=None):
        """One float vector per text from a release, for attackers.

        Sequence split: the released vector. Token embeddings: their mean
        over real tokens. Privatized token ids: the mean of the public
        embedding table's rows for them (an eavesdropper knows the table).
        """
        if self.split_point == split_lib.SEQUENCE:
            return np.asarray(released["private_representation"],
                              np.float32)
        mask = np.asarray(released["padding_mask"], np.float32)[..., None]
        if self.split_point == split_lib.TOKEN:
            vectors = released["token_embeddings"]
        else:
            table = self.embedding_table() if table is None else table
            vectors = table[released["token_ids"]]
        return ((vectors * mask).sum(axis=1)
                / np.maximum(mask.sum(axis=1), 1.0)).astype(np.float32)

    def predict(self, released, batch_size=256):
        """The server's class probabilities for a release."""
        import keras

        n = len(next(iter(released.values())))
        probs = []
        for start in range(0, n, batch_size):
            batch = {k: v[start:start + batch_size]
                     for k, v in released.items()}
            if self.split_point == split_lib.SEQUENCE:
                batch = batch["private_representation"]
            logits = self.server(batch, training=False)
            probs.append(np.asarray(keras.ops.softmax(logits, axis=-1)))
        return np.concatenate(probs)
