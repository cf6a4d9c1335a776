"""Privacy-adaptive MLM pretraining (Qu et al. 2021, Sec. 3.4).

`pretrain(PretrainConfig(...), output_dir)` continues masked-LM training of
a keras-hub BERT backbone on public text privatized on the fly by the
user-side mechanism fine-tuning will use (token_rep or text_to_text d_chi),
with the user-side token embedding frozen, and writes a keras-hub preset
for `tfdptext-train --preset=<output_dir>/preset`.

`tfdptext.pretraining.config` and `.layout` are pure Python; importing the
rest pulls in TensorFlow on first use.
"""

import importlib

from tfdptext.pretraining.config import DENOISING
from tfdptext.pretraining.config import MODES
from tfdptext.pretraining.config import OBJECTIVES
from tfdptext.pretraining.config import PROBABILISTIC
from tfdptext.pretraining.config import VANILLA
from tfdptext.pretraining.config import PretrainConfig
from tfdptext.pretraining.layout import PretrainDirectoryError

# Names served lazily from their TensorFlow-importing modules.
_LAZY = {
    "pretrain": "tfdptext.pretraining.pretrainer",
    "PretrainError": "tfdptext.pretraining.pretrainer",
    "PrivacyAdaptiveMLM": "tfdptext.pretraining.model",
    "build_mlm": "tfdptext.pretraining.model",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(
        f"module 'tfdptext.pretraining' has no attribute {name!r}")


__all__ = ["DENOISING", "MODES", "OBJECTIVES", "PROBABILISTIC", "VANILLA",
           "PretrainConfig", "PretrainDirectoryError", "PretrainError",
           "PrivacyAdaptiveMLM", "build_mlm", "pretrain"]
