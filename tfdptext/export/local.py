"""Running an export locally: TFLite user model -> SavedModel server.

No TF Serving binary is needed: the user model runs in ai-edge-litert's
plain Interpreter (builtins only, as on a phone) and its output is fed to the
SavedModel's `serving_default` signature loaded with tf.saved_model.load.

Like the app, the pipeline runs, for each text, the phone model of the
shortest input length that holds all its tokens (the manifest's
`user.models`, one signature per length; `ExportedPipeline.length_for`).
Exports made before lengths have one model, of max_length.
"""

import dataclasses
import warnings

import numpy as np

from tfdptext import rundir
from tfdptext.privacy import text_checks
from tfdptext.errors import TfdptextError
from tfdptext.models import input_checks
from tfdptext.models import secure
from tfdptext.models import split_spec


class ExportDirError(TfdptextError):
    """The directory is not a complete, readable tfdptext export; the
    message names the file."""


class UnknownTokensWarning(UserWarning):
    """A text's share of [UNK] tokens is above the export's limit
    (`tfdptext.privacy.text_checks`)."""


@dataclasses.dataclass(frozen=True)
class Sent:
    """One text released under a ledger (`ExportedPipeline.release`).

    Attributes:
        release: what is sent, as `privatize` returns it for this text.
        resent: True when it is the text's release stored today (a repeat:
            nothing was charged).
        check: the text's `tfdptext.privacy.text_checks.TextCheck`.
    """

    release: dict
    resent: bool
    check: text_checks.TextCheck


def _release_to_json(release):
    return {k: {"dtype": str(v.dtype), "value": v.tolist()}
            for k, v in release.items()}


def _release_from_json(stored):
    return {k: np.asarray(v["value"], dtype=v["dtype"])
            for k, v in stored.items()}


class PhoneInputError(TfdptextError):
    """The phone model refused its token inputs (its `input_status`
    output was not 0: `tfdptext.models.input_checks`)."""


def _first_line(err):
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def check_export_dir(export_dir):
    """The manifest of a complete export; ExportDirError otherwise (see
    `tfdptext.rundir.ExportDir.check`: the manifest, paths that stay
    inside, every listed file's size and SHA-256, the vocabulary and the
    server SavedModel directory)."""
    return rundir.ExportDir(export_dir, ExportDirError).check()


@dataclasses.dataclass(frozen=True)
class PhoneModel:
    """The phone model of one input length, as the manifest lists it.

    Attributes:
        length: its input length (token_ids and padding_mask columns).
        file: its .tflite, relative to the export.
        signature: its signature key in that file (None: the file's only
            signature, as in exports made before lengths).
        random_words: how many random words one call takes (0: none).
        consumed_words: how many words its mechanism reads, each the sum
            of random_words / consumed_words of them
            (`tfdptext.privacy.extraction`); None for exports made before
            extraction (their mechanism read the words as they were).
    """

    length: int
    file: str
    signature: str | None
    random_words: int
    consumed_words: int | None = None


def phone_models(manifest, max_length, where):
    """The PhoneModels of a manifest's `user` record, shortest first.

    `max_length` is the tokenizer's; the longest model must have it (it
    serves every text). Exports made before lengths list no `models`: their
    one model is `user.file` at max_length. ExportDirError (naming `where`)
    when the records are malformed or inconsistent.
    """
    user = manifest["user"]
    records = user.get("models") or [{
        "length": max_length, "file": user["file"],
        "signature": user.get("signature"), "inputs": user["inputs"]}]
    models = []
    for record in records:
        try:
            words = record["inputs"].get(secure.RANDOM_WORDS)
            mixing = (record.get("randomness") or {}).get("extraction")
            models.append(PhoneModel(
                length=int(record["length"]), file=str(record["file"]),
                signature=record.get("signature"),
                random_words=int(words[-2]) if words else 0,
                consumed_words=int(mixing["consumed"]) if mixing
                else None))
        except (KeyError, TypeError, ValueError, AttributeError,
                IndexError):
            raise ExportDirError(
                f"{where}: user.models holds a malformed record "
                f"{record!r}; export the run again.") from None
    models.sort(key=lambda m: m.length)
    lengths = [m.length for m in models]
    if len(set(lengths)) != len(lengths) or lengths[-1] != max_length:
        raise ExportDirError(
            f"{where}: user.models lengths {lengths} must be distinct and "
            f"end at the tokenizer's max_length {max_length}; export the "
            "run again.")
    return models


class ExportedPipeline:
    """The phone side and the server side of an export directory.

    Attributes:
        manifest: the checked manifest.
        models: the PhoneModels, shortest first.
        runners: {length: signature runner of that length's phone model}.

    Example:
    >>> pipe = ExportedPipeline("exports/ag_eps0.05")
    >>> pipe.predict(["Stocks rallied after the report."])["label_name"]
    >>> pipe.lengths_for(["Stocks rallied after the report."])
    [16]
    """

    def __init__(self, export_dir, num_threads=1):
        import tensorflow as tf

        from tfdptext.data.tokenization import TextTokenizer

        export = rundir.ExportDir(export_dir, ExportDirError)
        self.manifest = export.check()
        self.spec = split_spec.get(self.manifest["split_point"],
                                   ExportDirError,
                                   export.file(rundir.MANIFEST))
        user = self.manifest["user"]
        self.tokenizer = TextTokenizer.from_config(
            export.file(rundir.EXPORT_VOCAB), user["tokenizer"])
        self.models = phone_models(self.manifest, self.tokenizer.max_length,
                                   export.file(rundir.MANIFEST))
        self.runners = _signature_runners(export, self.models, num_threads)
        server = self.manifest["server"]
        server_path = export.file(server["path"])
        try:
            loaded = tf.saved_model.load(server_path)
            self.serve_fn = loaded.signatures[server["signature"]]
        except KeyError:
            raise ExportDirError(
                f"{server_path} has no signature {server['signature']!r} "
                f"({rundir.MANIFEST}'s server.signature).") from None
        except Exception as err:  # noqa: BLE001 (TF raises many types)
            raise ExportDirError(
                f"{server_path} is not a loadable SavedModel ("
                f"{_first_line(err)}); the export is corrupt: export the "
                "run again.") from None
        self._loaded = loaded  # keep the object alive

    @property
    def lengths(self):
        """The phone models' input lengths, ascending."""
        return [m.length for m in self.models]

    def model_for(self, num_tokens):
        """The PhoneModel of the shortest length that holds `num_tokens`
        tokens ([CLS] and [SEP] included); the max_length one for longer
        (truncated) texts."""
        for model in self.models:
            if model.length >= num_tokens:
                return model
        return self.models[-1]

    def length_for(self, num_tokens):
        """The input length `model_for(num_tokens)` runs at."""
        return self.model_for(num_tokens).length

    def lengths_for(self, texts):
        """The phone model length each text runs on."""
        mask = self.tokenizer(list(texts))["padding_mask"].numpy()
        return [self.length_for(int(row.sum())) for row in mask]

    @property
    def model_identity(self):
        """What a stored release belongs to: the server model's name and
        version and the phone model's SHA-256 (a ledger stores releases
        per model, and spends across models)."""
        server = self.manifest["server"]
        digest = self.manifest["files"][self.models[-1].file]["sha256"]
        return f"{server['model_name']}/{server['version']}/{digest[:16]}"

    def ledger(self, path=None):
        """The device's `tfdptext.privacy.ledger.PrivacyLedger` for this
        export's budget (its manifest's "budget"), at `path` (default:
        `tfdptext.privacy.ledger.default_path()`)."""
        from tfdptext.privacy import budget
        from tfdptext.privacy import ledger

        return ledger.PrivacyLedger(path or ledger.default_path(),
                                    budget.Budget.of_manifest(self.manifest),
                                    model=self.model_identity)

    def check_texts(self, texts, features=None):
        """The TextCheck of each text (`tfdptext.privacy.text_checks`)."""
        features = features or self.tokenizer(list(texts))
        ids = features["token_ids"].numpy()
        mask = features["padding_mask"].numpy()
        unk = self.manifest["user"]["tokenizer"].get("unk_id", 100)
        limit = text_checks.limit_of(self.manifest)
        return [text_checks.check_ids(ids[i], mask[i], unk, limit)
                for i in range(len(ids))]

    def release(self, text, ledger):
        """One text released once under `ledger` (a PrivacyLedger): Sent.

        The text is checked first (EmptyTextError for no token: nothing
        charged); the ledger reserves one release (BudgetExhausted,
        ReleaseInProgress: nothing charged) or returns the text's release
        stored today, which is sent again for free; a phone model refusal
        returns the reservation; a release made is stored and charged.
        """
        [check] = self.check_texts([text])
        text_checks.refuse_empty([check])
        with ledger.reserve(text) as reservation:
            if reservation.stored is not None:
                return Sent(_release_from_json(reservation.stored), True,
                            check)
            release = self.privatize([text], checks=[check])
            reservation.commit(_release_to_json(release))
        return Sent(release, False, check)

    def privatize(self, texts, checks=None):
        """What leaves the phone: the TFLite models' outputs (a dict).

        Texts with no token are refused (EmptyTextError, `tfdptext.data.
        text_checks`); a text with too many [UNK] tokens is released with
        an UnknownTokensWarning (unless `checks`, the texts' TextChecks,
        are given: the caller reports them).

        Each text runs on the shortest model that holds its tokens. For
        token-level splits the releases of a batch are padded to the
        longest one's length (release: 0, or the pad id for token ids;
        padding mask: 0), which the server accepts and which leaves each
        answer unchanged; the padding mask is added, as the app sends it.
        """
        features = self.tokenizer(list(texts))
        given = checks is not None  # the caller reports their warnings
        checks = checks if given else self.check_texts(texts, features)
        text_checks.refuse_empty(checks)
        for i, check in enumerate(checks):
            if check.warns and not given:
                warnings.warn(f"text {i}: {check.warning()}",
                              UnknownTokensWarning, stacklevel=2)
        ids = features["token_ids"].numpy()
        mask = features["padding_mask"].numpy()
        released = [self._privatize_one(ids[i:i + 1], mask[i:i + 1], i)
                    for i in range(len(ids))]
        if not self.spec.per_token:
            return {k: np.concatenate([r[k] for r in released])
                    for k in released[0]}
        width = max(r[self.spec.release].shape[1] for r in released)
        out = {k: np.concatenate([self._pad(k, r[k], width)
                                  for r in released])
               for k in released[0]}
        if self.spec.mask_travels:
            # The app sends the padding mask with the release; the server
            # makes the segment ids.
            out[split_spec.PADDING_MASK] = mask[:, :width]
        return out

    def _privatize_one(self, ids, mask, index):
        """One text (rows of max_length) through the shortest fitting phone
        model: {output name: array of that model's length}."""
        model = self.model_for(int(mask.sum()))
        feed = {"token_ids": ids[:, :model.length],
                "padding_mask": mask[:, :model.length]}
        if model.random_words:
            # What the app does: fresh words from the secure generator
            # for every call.
            feed[secure.RANDOM_WORDS] = secure.os_random_words(
                [1, model.random_words])
        out = self.runners[model.length](**feed)
        status = out.pop(input_checks.INPUT_STATUS, None)
        if status is not None and int(np.max(status)) != 0:
            raise PhoneInputError(
                f"The phone model refused the token inputs of text {index} "
                f"(input_status {int(np.max(status))}: "
                f"{'; '.join(input_checks.describe_status(np.max(status)))})"
                ": the tokenizer does not follow the export's contract.")
        if not all(secure.release_is_usable(v) for v in out.values()):
            raise secure.RandomnessError(
                f"The phone model returned an unusable release for text "
                f"{index} (NaN or id -1): its random words failed the "
                "checks or its representation was not finite.")
        return {self.spec.release: out[self.spec.release]}

    def _pad(self, key, value, width):
        """A per-token release row padded along its length axis to
        `width` with the spec's pad value."""
        missing = width - value.shape[1]
        if missing == 0:
            return value
        pad = [(0, 0), (0, missing)] + [(0, 0)] * (value.ndim - 2)
        return np.pad(value, pad, constant_values=self.spec.pad_value(
            key, self.tokenizer.pad_id))

    def serve(self, released):
        """The server's answer to a batch of releases."""
        import tensorflow as tf

        inputs = {k: tf.constant(v) for k, v in released.items()}
        out = {k: v.numpy() for k, v in self.serve_fn(**inputs).items()}
        for key, value in out.items():  # strings: label_name, notes
            if value.dtype == object:
                out[key] = np.array(
                    [v.decode("utf-8") if isinstance(v, bytes) else str(v)
                     for v in value], dtype=object)
        if "label_name" not in out:  # an export made before label names
            names = self.label_names
            out["label_name"] = np.array(
                [names[i] if names and 0 <= i < len(names) else str(i)
                 for i in out["label"].tolist()], dtype=object)
        return out

    @property
    def label_names(self):
        """The manifest's label names (None for older exports)."""
        names = self.manifest.get("label_names")
        return list(names) if isinstance(names, list) else None

    def predict(self, texts):
        """The server's answer for each text: `probabilities`, `label`
        (index) and `label_name` (its name, a str)."""
        return self.serve(self.privatize(texts))


def _signature_runners(export, models, num_threads):
    """{length: signature runner}: one Interpreter per phone model file,
    the runner of each model's signature in it. ExportDirError when a file
    is not a usable TFLite model or lacks a listed signature."""
    from ai_edge_litert.interpreter import Interpreter

    interpreters, runners = {}, {}
    for model in models:
        path = export.file(model.file)
        try:
            if model.file not in interpreters:
                interpreters[model.file] = Interpreter(
                    model_path=path, num_threads=num_threads)
            runners[model.length] = interpreters[
                model.file].get_signature_runner(model.signature)
        except (ValueError, RuntimeError) as err:
            raise ExportDirError(
                f"{path} is not a usable TFLite model with the signature "
                f"{model.signature!r} of length {model.length} "
                f"({_first_line(err)}); the export is corrupt: export the "
                "run again.") from None
    return runners
