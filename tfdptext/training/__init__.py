"""Training with Keras `fit`: robust DPNR and privacy-constrained modes."""

from tfdptext.training.builder import build_split
from tfdptext.training.config import ALLOWED
from tfdptext.training.config import MODES
from tfdptext.training.config import TrainConfig
from tfdptext.training.trainer import RunDirectoryError
from tfdptext.training.trainer import train
