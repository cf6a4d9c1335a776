"""Running an export locally: TFLite user model -> SavedModel server.

No TF Serving binary is needed: the user model runs in ai-edge-litert's
plain Interpreter (builtins only, as on a phone) and its output is fed to the
SavedModel's `serving_default` signature loaded with tf.saved_model.load.
"""

import numpy as np

from tfdptext import rundir
from tfdptext.errors import TfdptextError
from tfdptext.models import secure
from tfdptext.models import split_spec


class ExportDirError(TfdptextError):
    """The directory is not a complete, readable tfdptext export; the
    message names the file."""


def _first_line(err):
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def check_export_dir(export_dir):
    """The manifest of a complete export; ExportDirError otherwise (see
    `tfdptext.rundir.ExportDir.check`: the manifest, paths that stay
    inside, every listed file's size and SHA-256, the vocabulary and the
    server SavedModel directory)."""
    return rundir.ExportDir(export_dir, ExportDirError).check()


class ExportedPipeline:
    """The phone side and the server side of an export directory.

    Example:
    >>> pipe = ExportedPipeline("exports/ag_eps0.05")
    >>> pipe.predict(["Stocks rallied after the report."])["label_name"]
    """

    def __init__(self, export_dir, num_threads=1):
        import tensorflow as tf
        from ai_edge_litert.interpreter import Interpreter

        from tfdptext.data.tokenization import TextTokenizer

        export = rundir.ExportDir(export_dir, ExportDirError)
        self.manifest = export.check()
        self.spec = split_spec.get(self.manifest["split_point"],
                                   ExportDirError,
                                   export.file(rundir.MANIFEST))
        user = self.manifest["user"]
        self.tokenizer = TextTokenizer.from_config(
            export.file(rundir.EXPORT_VOCAB), user["tokenizer"])
        model_path = export.file(user["file"])
        try:
            self.interpreter = Interpreter(model_path=model_path,
                                           num_threads=num_threads)
            self.privatize_fn = self.interpreter.get_signature_runner()
        except (ValueError, RuntimeError) as err:
            raise ExportDirError(
                f"{model_path} is not a usable TFLite model ("
                f"{_first_line(err)}); the export is corrupt: export the "
                "run again.") from None
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

    def privatize(self, texts):
        """What leaves the phone: the TFLite model's outputs (a dict)."""
        features = self.tokenizer(list(texts))
        ids = features["token_ids"].numpy()
        mask = features["padding_mask"].numpy()
        words_spec = self.manifest["user"]["inputs"].get(secure.RANDOM_WORDS)
        released = []
        for i in range(len(ids)):
            feed = {"token_ids": ids[i:i + 1], "padding_mask": mask[i:i + 1]}
            if words_spec is not None:
                # What the app does: fresh words from the secure generator
                # for every call.
                feed[secure.RANDOM_WORDS] = secure.os_random_words(
                    [1, *words_spec[1:-1]])
            out = self.privatize_fn(**feed)
            if not all(secure.release_is_usable(v) for v in out.values()):
                raise secure.RandomnessError(
                    f"The phone model returned an unusable release for text "
                    f"{i} (NaN or id -1): its random words failed the "
                    "checks or its representation was not finite.")
            released.append(out)
        out = {k: np.concatenate([r[k] for r in released])
               for k in released[0]}
        if self.spec.mask_travels:
            # The app sends the padding mask with the release; the server
            # makes the segment ids.
            out[split_spec.PADDING_MASK] = mask
        return out

    def serve(self, released):
        """The server's answer to a batch of releases."""
        import tensorflow as tf

        inputs = {k: tf.constant(v) for k, v in released.items()}
        out = {k: v.numpy() for k, v in self.serve_fn(**inputs).items()}
        if "label_name" in out:
            out["label_name"] = np.array(
                [v.decode("utf-8") if isinstance(v, bytes) else str(v)
                 for v in out["label_name"]], dtype=object)
        else:  # an export made before label names
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
