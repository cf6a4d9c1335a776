"""What leaves the phone, for evaluation: releases of a trained run.

`TrainedRun` loads a run directory written by `tfdptext.training.train`
(user side, server side, tokenizer, config). `releases` runs the user side on
texts with its noise ON, so every example gets fresh noise, exactly what a
server or an eavesdropper on the wire receives; the noise comes from
os.urandom (`tfdptext.models.secure.SecureUserSide`), as on a user's
device. `attack_features` turns a
release into one vector per text for attackers; `predict` runs the server.
"""

import numpy as np

from tfdptext import rundir
from tfdptext import runfiles
from tfdptext.data.tokenization import TextTokenizer
from tfdptext.errors import TfdptextError
from tfdptext.models import saving_cache
from tfdptext.models import split_spec


class RunError(TfdptextError):
    """The directory is not a usable trained run, or does not fit the data."""


def _load_keras(path):
    """keras.models.load_model with a clear RunError for a bad file."""
    import keras

    runfiles.check_keras_file(path, RunError)
    saving_cache.cache_skipsets()  # loads at a fraction of the cost
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

    def __init__(self, model_dir, vocabulary=None):
        self.run = rundir.RunDir(model_dir, RunError)
        self.config, self.split, self.metrics = self.run.check_finished(
            "model_dir")
        self.model_dir = model_dir
        self.tokenizer = TextTokenizer.from_config(
            self.run.file(rundir.VOCAB), self.split["tokenizer"])
        if vocabulary is not None:
            self._check_vocabulary(vocabulary)
        self.spec = split_spec.get(self.split["split_point"], RunError,
                                   self.run.file(rundir.SPLIT))
        self.split_point = self.spec.name
        self.user = _load_keras(self.run.file(rundir.USER))
        self.server = _load_keras(self.run.file(rundir.SERVER))

    def _check_vocabulary(self, vocabulary):
        """RunError unless `vocabulary` is the run's own."""
        other = TextTokenizer(vocabulary)
        if other.vocabulary_sha256() != self.tokenizer.vocabulary_sha256():
            raise RunError(
                "The tokenizer asked for is not the model's: its "
                f"vocabulary ({other.vocabulary_size} tokens, SHA-256 "
                f"{other.vocabulary_sha256()[:12]}) differs from "
                f"{self.run.file(rundir.VOCAB)} "
                f"({self.tokenizer.vocabulary_size} tokens, SHA-256 "
                f"{self.tokenizer.vocabulary_sha256()[:12]}); evaluate with "
                "the run's own tokenizer.")

    @staticmethod
    def read_config(model_dir):
        """The run's config.json as a dict (without loading the models)."""
        run = rundir.RunDir(model_dir, RunError)
        if not run.exists(rundir.CONFIG):
            raise RunError(f"`model_dir`: {model_dir} holds no "
                           f"{rundir.CONFIG}; is it a tfdptext run?")
        return run.read(rundir.CONFIG, required=("dataset", "data_dir"))

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
        """The public (vocabulary, dim) token embedding table the release's
        tokens index (`tfdptext.models.split.release_embedding_table`), or
        None (sequence split)."""
        from tfdptext.models import split as split_lib

        table = split_lib.release_embedding_table(self.user)
        if table is None and self.spec.releases_token_ids:
            # A privatizer without an embedding table (CusText's output
            # sets): the server's encoder embeds the released ids.
            for layer in self.server.layers:
                if hasattr(layer, "token_embedding"):
                    return split_lib.token_embedding_table(layer)
        return table

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
            part = {k: self._pad(k, np.asarray(v), full)
                    for k, v in out.items()}
            parts.append(part)
            if bar is not None:
                bar.add(len(batch["token_ids"]))
        released = {k: np.concatenate([p[k] for p in parts])
                    for k in parts[0]}
        return released, features

    def _pad(self, key, value, full):
        """A token-level output of a cut batch, padded back to `full`
        positions with the spec's pad value."""
        if not self.spec.per_token or value.shape[1] >= full:
            return value
        pad = [(0, 0), (0, full - value.shape[1])] + [(0, 0)] * (
            value.ndim - 2)
        return np.pad(value, pad, constant_values=self.spec.pad_value(
            key, self.tokenizer.pad_id))

    def _release(self, batch):
        """The user side's release of one batch (a dict keyed by
        `spec.released_keys`), noise from os.urandom; a user side without
        noise (modes none, adv) is run as it is."""
        from tfdptext.models import secure

        dropout, privatizer = secure.find_layers(self.user)
        if dropout is None and privatizer is None:
            out = self.user(batch, training=False)
            return {k: np.asarray(out[k]) for k in self.spec.released_keys}
        return self.spec.with_mask(self.secure_user(batch),
                                   batch["padding_mask"])

    def trained_release(self, limit=None):
        """The release of its train texts the model trained on, as
        `releases` gives (a dict keyed by `spec.released_keys`), and what
        it is: None unless the run released its texts once
        (--training_release=once). Read from TRAINING_RELEASE, checked
        against the SHA-256 and run id the run recorded when it drew it
        (RunError naming the file otherwise); `limit`: its first texts.

        The labels are those the model trained on: the randomized ones
        of a --label_epsilon run (RANDOMIZED_LABELS), else None (the
        data set's). Returns (release, labels, record) or None.
        """
        from tfdptext.training import user_release

        mode = (self.metrics.get("training_release") or {}).get("mode")
        if mode != user_release.ONCE:
            return None
        if not self.run.exists(rundir.TRAINING_RELEASE):
            raise RunError(
                f"{self.run.file(rundir.TRAINING_RELEASE)} is missing: the "
                "run trained on that release (metrics.json says "
                "training_release once), the one to attack.")
        meta, stored = self.run.read_training_release()
        values, lengths = stored["train"]
        n = len(lengths) if limit is None else min(limit, len(lengths))
        part = user_release.ReleasedSplit(values, lengths, self.spec.per_token)
        value, mask = part.rows(np.arange(n), self.spec.pad_value(
            self.spec.release, self.tokenizer.pad_id))
        released = self.spec.with_mask({self.spec.release: value}, mask)
        labels, label_file = None, None
        if self.run.exists(rundir.RANDOMIZED_LABELS):
            self.run.check_draw(rundir.RANDOMIZED_LABELS)
            labels = np.asarray(self.run.read(
                rundir.RANDOMIZED_LABELS, required=("train",))["train"][:n],
                np.int64)
            label_file = rundir.RANDOMIZED_LABELS
        record = {"release": rundir.TRAINING_RELEASE,
                  "sha256": self.run.recorded_draw(rundir.TRAINING_RELEASE),
                  "run_id": meta["run_id"], "texts": n,
                  "labels": label_file or "the data set's train labels"}
        return released, labels, record

    def attack_features(self, released, table=None):
        """One float vector per text from a release, for attackers (the
        spec's `attack_features`): the released vector, the mean of the
        token embeddings over real tokens, or the mean of the public
        embedding table's rows for the privatized ids."""
        if self.spec.releases_token_ids and table is None:
            table = self.embedding_table()
        return self.spec.attack_features(released, table)

    def predict(self, released, batch_size=256):
        """The server's class probabilities for a release."""
        import keras

        n = len(released[self.spec.release])
        probs = []
        for start in range(0, n, batch_size):
            batch = {k: released[k][start:start + batch_size]
                     for k in self.spec.released_keys}
            logits = self.server(batch, training=False)
            probs.append(np.asarray(keras.ops.softmax(logits, axis=-1)))
        return np.concatenate(probs)
