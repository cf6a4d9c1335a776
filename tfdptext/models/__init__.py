"""Encoders and the user-side / server-side split."""

from tfdptext.models.code import ArgmaxCode
from tfdptext.models.code import CodeDecoder

from tfdptext.models.gradient_reversal import GradientReversal
from tfdptext.models.pooling import MaskedMeanPooling
from tfdptext.models.presets import DEFAULT_PRESET
from tfdptext.models.presets import EncoderNotFoundError
from tfdptext.models.presets import load_backbone
from tfdptext.models.presets import load_tokenizer
from tfdptext.models.presets import minilm_directory
from tfdptext.models.presets import resolve_preset
from tfdptext.models.split import PRIVATE_PROJECTION
from tfdptext.models.split import SPLIT_POINTS
from tfdptext.models.split import SplitModel
from tfdptext.models.split import code_split
from tfdptext.models.split import release_embedding_table
from tfdptext.models.split import sequence_representation_split
from tfdptext.models.split import text_to_text_split
from tfdptext.models.split import token_embedding_table
from tfdptext.models.split import token_representation_split
from tfdptext.models.split_spec import SplitSpec
