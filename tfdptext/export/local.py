"""Running an export locally: TFLite user model -> SavedModel server.

No TF Serving binary is needed: the user model runs in ai-edge-litert's
plain Interpreter (builtins only, as on a phone) and its output is fed to the
SavedModel's `serving_default` signature loaded with tf.saved_model.load.
"""

import json
import os

import numpy as np

from tfdptext.models import secure


class ExportedPipeline:
    """The phone side and the server side of an export directory.

    Example:
    >>> pipe = ExportedPipeline("exports/ag_eps0.05")
    >>> pipe.predict(["Stocks rallied after the report."])["label"]
    """

    def __init__(self, export_dir, num_threads=1):
        import tensorflow as tf
        from ai_edge_litert.interpreter import Interpreter

        from tfdptext.data.tokenization import TextTokenizer

        path = os.path.join(export_dir, "manifest.json")
        if not os.path.isfile(path):
            raise ValueError(f"`export_dir`: {export_dir} holds no "
                             "manifest.json; is it a tfdptext export?")
        with open(path) as f:
            self.manifest = json.load(f)
        user = self.manifest["user"]
        self.tokenizer = TextTokenizer.from_config(
            os.path.join(export_dir, "user", "vocab.txt"), user["tokenizer"])
        self.interpreter = Interpreter(
            model_path=os.path.join(export_dir, user["file"]),
            num_threads=num_threads)
        self.privatize_fn = self.interpreter.get_signature_runner()
        server = self.manifest["server"]
        loaded = tf.saved_model.load(os.path.join(export_dir, server["path"]))
        self._loaded = loaded  # keep the object alive
        self.serve_fn = loaded.signatures[server["signature"]]

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
        if self.manifest["split_point"] != "sequence_representation":
            out["padding_mask"] = mask
        return out

    def serve(self, released):
        """The server's answer to a batch of releases."""
        import tensorflow as tf

        inputs = {k: tf.constant(v) for k, v in released.items()}
        return {k: v.numpy() for k, v in self.serve_fn(**inputs).items()}

    def predict(self, texts):
        return self.serve(self.privatize(texts))
