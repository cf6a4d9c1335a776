"""Running an export locally: TFLite user model -> SavedModel server.

No TF Serving binary is needed: the user model runs in ai-edge-litert's
plain Interpreter (builtins only, as on a phone) and its output is fed to the
SavedModel's `serving_default` signature loaded with tf.saved_model.load.
"""

import os

import numpy as np

from tfdptext import runfiles
from tfdptext.errors import TfdptextError
from tfdptext.models import secure

# What ExportedPipeline reads from manifest.json.
MANIFEST_KEYS = ("split_point", "guarantee", "user.file", "user.tokenizer",
                 "user.inputs", "server.path", "server.signature")


class ExportDirError(TfdptextError):
    """The directory is not a complete, readable tfdptext export; the
    message names the file."""


def _first_line(err):
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def check_export_dir(export_dir):
    """The manifest of a complete export; ExportDirError otherwise.

    Checks, before loading anything: the directory, manifest.json (valid
    JSON with the keys used), that every file the manifest lists is there
    with the size it records (a truncated .tflite or SavedModel file is
    caught here), the vocabulary, and the server SavedModel directory.
    """
    if not os.path.isdir(export_dir):
        raise ExportDirError(f"`export_dir`: {export_dir} is not a "
                             "directory.")
    path = os.path.join(export_dir, "manifest.json")
    if not os.path.isfile(path):
        raise ExportDirError(f"`export_dir`: {export_dir} holds no "
                             "manifest.json; is it a tfdptext export?")
    manifest = runfiles.read_json(path, ExportDirError,
                                  required=MANIFEST_KEYS)
    root = os.path.realpath(export_dir)
    listed = [manifest["server"]["path"], manifest["user"]["file"],
              *(manifest.get("files") or {})]
    for rel in listed:
        inside = os.path.realpath(os.path.join(export_dir, str(rel)))
        if os.path.commonpath([root, inside]) != root:
            raise ExportDirError(
                f"{path}: the path {rel!r} points outside {export_dir}; "
                "the manifest was tampered with.")
    server_dir = os.path.join(export_dir, manifest["server"]["path"])
    if not os.path.isdir(server_dir):
        raise ExportDirError(
            f"{server_dir}: no such directory (manifest.json's server.path);"
            " the export is incomplete: export the run again.")
    files = manifest.get("files") or {}
    for rel in (manifest["user"]["file"], "user/vocab.txt"):
        if not os.path.isfile(os.path.join(export_dir, rel)):
            raise ExportDirError(f"{os.path.join(export_dir, rel)}: no such "
                                 "file; the export is incomplete.")
    for rel, record in sorted(files.items()):
        file = os.path.join(export_dir, rel)
        if not os.path.isfile(file):
            raise ExportDirError(f"{file}: no such file (listed in "
                                 "manifest.json); the export is incomplete.")
        size = record.get("bytes") if isinstance(record, dict) else None
        if size is not None and os.path.getsize(file) != size:
            raise ExportDirError(
                f"{file} is {os.path.getsize(file)} bytes, manifest.json "
                f"says {size}: it was truncated or replaced; export the run "
                "again.")
        digest = record.get("sha256") if isinstance(record, dict) else None
        if digest is not None and _sha256(file) != digest:
            raise ExportDirError(
                f"{file}: SHA-256 {_sha256(file)[:16]}... differs from "
                f"manifest.json's {str(digest)[:16]}...: the file was "
                "replaced or corrupted; export the run again.")
    return manifest


_sha256 = runfiles.sha256_file



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

        self.manifest = check_export_dir(export_dir)
        user = self.manifest["user"]
        self.tokenizer = TextTokenizer.from_config(
            os.path.join(export_dir, "user", "vocab.txt"), user["tokenizer"])
        model_path = os.path.join(export_dir, user["file"])
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
        server_path = os.path.join(export_dir, server["path"])
        try:
            loaded = tf.saved_model.load(server_path)
            self.serve_fn = loaded.signatures[server["signature"]]
        except KeyError:
            raise ExportDirError(
                f"{server_path} has no signature {server['signature']!r} "
                "(manifest.json's server.signature).") from None
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
        if self.manifest["split_point"] != "sequence_representation":
            out["padding_mask"] = mask
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
