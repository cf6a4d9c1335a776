"""Privatization mechanisms as Keras layers.

Every layer applies its noise on each call, at inference too, uses only
unseeded random ops that convert to TFLite builtins, and reports its formal
guarantee with `guarantee()`.

`LaplaceNoise`, `MinMaxNormalize`, `DChiNoise`, `DChiTextPrivatizer` and
`WordDropout` are written in `keras.ops` and run on any Keras backend
(server-side training under JAX);
the other layers are TensorFlow's (phone-side text mechanisms). Under the
TensorFlow backend all are imported here (registering them for
`keras.models.load_model`); under another backend the TensorFlow ones are
imported on first use, so importing this package does not import
TensorFlow.
"""

from tfdptext import lazy
from tfdptext.layers import noise_math
from tfdptext.layers.dchi_noise import DChiNoise
from tfdptext.layers.dchi_text_privatizer import DChiTextPrivatizer
from tfdptext.layers.laplace_noise import LaplaceNoise
from tfdptext.layers.min_max_normalize import MinMaxNormalize
from tfdptext.layers.word_dropout import WordDropout

# The TensorFlow layers: name -> module.
_TENSORFLOW_LAYERS = {
    "BRRTextPrivatizer": "brr_text_privatizer",
    "CodeRandomizedResponse": "code_randomized_response",
    "CusTextTextPrivatizer": "custext_text_privatizer",
    "DiffractorTextPrivatizer": "diffractor_text_privatizer",
    "MahalanobisTextPrivatizer": "mahalanobis_text_privatizer",
    "RandomizedResponse": "randomized_response",
    "SanTextTextPrivatizer": "santext_text_privatizer",
    "TEMTextPrivatizer": "tem_text_privatizer",
    "TruncatedGumbelTextPrivatizer": "truncated_gumbel_text_privatizer",
    "VickreyTextPrivatizer": "vickrey_text_privatizer",
}


lazy.serve(globals(), _TENSORFLOW_LAYERS, eager=noise_math.is_tensorflow())

__all__ = sorted(["DChiNoise", "DChiTextPrivatizer", "LaplaceNoise",
                  "MinMaxNormalize", "WordDropout",
                  *_TENSORFLOW_LAYERS])
