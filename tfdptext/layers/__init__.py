"""Privatization mechanisms as Keras layers (TensorFlow backend).

Every layer applies its noise on each call, at inference too, uses only
unseeded random ops that convert to TFLite builtins, and reports its formal
guarantee with `guarantee()`.
"""

from tfdptext.layers.brr_text_privatizer import BRRTextPrivatizer
from tfdptext.layers.code_randomized_response import CodeRandomizedResponse
from tfdptext.layers.custext_text_privatizer import CusTextTextPrivatizer
from tfdptext.layers.dchi_noise import DChiNoise
from tfdptext.layers.dchi_text_privatizer import DChiTextPrivatizer
from tfdptext.layers.diffractor_text_privatizer import \
    DiffractorTextPrivatizer
from tfdptext.layers.laplace_noise import LaplaceNoise
from tfdptext.layers.mahalanobis_text_privatizer import \
    MahalanobisTextPrivatizer
from tfdptext.layers.min_max_normalize import MinMaxNormalize
from tfdptext.layers.randomized_response import RandomizedResponse
from tfdptext.layers.santext_text_privatizer import SanTextTextPrivatizer
from tfdptext.layers.tem_text_privatizer import TEMTextPrivatizer
from tfdptext.layers.truncated_gumbel_text_privatizer import \
    TruncatedGumbelTextPrivatizer
from tfdptext.layers.vickrey_text_privatizer import VickreyTextPrivatizer
from tfdptext.layers.word_dropout import WordDropout

__all__ = [
    "BRRTextPrivatizer",
    "CodeRandomizedResponse",
    "CusTextTextPrivatizer",
    "DChiNoise",
    "DChiTextPrivatizer",
    "DiffractorTextPrivatizer",
    "LaplaceNoise",
    "MahalanobisTextPrivatizer",
    "MinMaxNormalize",
    "RandomizedResponse",
    "SanTextTextPrivatizer",
    "TEMTextPrivatizer",
    "TruncatedGumbelTextPrivatizer",
    "VickreyTextPrivatizer",
    "WordDropout",
]
