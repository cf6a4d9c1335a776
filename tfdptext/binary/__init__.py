"""Learned binary codes for a vocabulary: the first stage of BRR.

BRR (binary randomized response, Carvalho et al.) represents each word by
a binary code phi(w) in {0, 1}^n (n = 256) and flips its bits with
randomized response. This package makes phi: it reads a real-valued
table (`embeddings`: a word2vec / GloVe text file, or a keras-hub preset's
token embeddings), learns codes with the near-lossless binarization
autoencoder of Tissier et al. 2019 (`autoencoder`), measures what the
codes keep (`report`), and writes / reads the codes directory (`codes`,
the one owner of that format). The program is `tfdptext-binarize`.

The codes are public and deterministic (a seeded training of a public
table): they are not privacy noise and carry no guarantee of their own.

Example:
>>> from tfdptext import binary
>>> table = binary.load_embeddings("glove.840B.300d_filtered.txt")
>>> model = binary.fit_codes(table.matrix, bits=256, epochs=20)
>>> bits = binary.encode(model, table.matrix)
>>> report = binary.binarization_report(table.matrix, bits)
>>> binary.save_codes("codes/glove256", table.words, bits,
...                   {"source": table.source, "report": report})
>>> binary.load_codes("codes/glove256").bits.shape
(33860, 256)
"""

import importlib

# Public name -> the module defining it. Names are imported on first use,
# so `codes`, `embeddings` (word2vec) and `report` stay free of TensorFlow
# (the programs check their flags without loading it); `autoencoder` and
# presets load Keras.
_EXPORTS = {
    "autoencoder": ("BinarizingAutoencoder", "DEFAULT_BITS", "decode",
                    "default_input_scale", "encode", "fit_codes",
                    "orthogonality_penalty", "reconstruction_loss",
                    "scaled", "straight_through_heaviside"),
    "codes": ("BinaryCodes", "CodesError", "check_bits",
              "hamming_distances", "load_codes", "save_codes"),
    "embeddings": ("PRESET_PREFIX", "EmbeddingTable", "EmbeddingsError",
                   "load_embeddings", "read_preset", "read_word2vec"),
    "report": ("binarization_report", "format_report"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items()
              for name in names}


def __getattr__(name):
    if name in _MODULE_OF:
        module = importlib.import_module(
            f"tfdptext.binary.{_MODULE_OF[name]}")
        return getattr(module, name)
    if name in _EXPORTS:
        return importlib.import_module(f"tfdptext.binary.{name}")
    raise AttributeError(
        f"module 'tfdptext.binary' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)


__all__ = [
    "BinarizingAutoencoder", "BinaryCodes", "CodesError", "DEFAULT_BITS",
    "EmbeddingTable", "EmbeddingsError", "PRESET_PREFIX",
    "binarization_report", "check_bits", "decode", "default_input_scale",
    "encode", "fit_codes", "format_report", "hamming_distances",
    "load_codes", "load_embeddings", "orthogonality_penalty",
    "read_preset", "read_word2vec", "reconstruction_loss", "save_codes",
    "scaled", "straight_through_heaviside",
]
