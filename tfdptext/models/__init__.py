"""Encoders and the user-side / server-side split.

The split builders, pooling and presets run on any Keras backend with the
backend-agnostic layers (`tfdptext.layers`); the code release
(`ArgmaxCode`, `CodeDecoder`, `code_split`'s channel) and
`GradientReversal` are TensorFlow's, imported here under the TensorFlow
backend and on first use under another.
"""

from tfdptext import lazy
from tfdptext.layers import noise_math
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

# The TensorFlow classes: name -> module.
_TENSORFLOW_CLASSES = {
    "ArgmaxCode": "code",
    "CodeDecoder": "code",
    "GradientReversal": "gradient_reversal",
}


lazy.serve(globals(), _TENSORFLOW_CLASSES, eager=noise_math.is_tensorflow())
