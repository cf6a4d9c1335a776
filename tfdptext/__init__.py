"""tfdptext: local differential privacy for text, as Keras layers.

Subpackages are imported on first use, so `import tfdptext` stays cheap and
`tfdptext.privacy` (pure accounting) never pulls in TensorFlow:

- `tfdptext.privacy`: guarantees and the math behind them.
- `tfdptext.layers`: privatization mechanisms as Keras layers.
- `tfdptext.data`: datasets and tokenization.
- `tfdptext.models`: encoders, the user-side / server-side split and one
  `SplitSpec` per split point (`tfdptext.models.split_spec`).
- `tfdptext.training`: `train(config, output_dir)` with Keras `fit`.
- `tfdptext.pretraining`: privacy-adaptive MLM pretraining (a preset out).
- `tfdptext.export`: the TFLite phone model and the TF Serving server.
- `tfdptext.evaluation`: utility, attackers, fairness, deniability,
  membership inference, sweeps.
- `tfdptext.audit`: empirical epsilon lower bounds; seed recovery.
- `tfdptext.offline`: privatizing token ids in bulk off device (FAISS):
  d_chi and BRR.
- `tfdptext.binary`: learned binary codes of a vocabulary (BRR's phi).
- `tfdptext.corpus`: `tfdptext-privatize-corpus`, an Apache Beam job.
- `tfdptext.rundir`: the run and export directories' files (one owner).
- `tfdptext.metrics`: accuracy, macro-F1, AUC (numpy; training and
  evaluation both report them).
- `tfdptext.cli`: the programs (console entry points).
"""

import importlib

from tfdptext.version import __version__

_SUBMODULES = ("privacy", "layers", "data", "models", "offline", "training",
               "pretraining", "export", "evaluation", "audit", "serving",
               "rundir", "metrics", "vocabulary", "binary", "corpus",
               "cli")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"tfdptext.{name}")
    raise AttributeError(f"module 'tfdptext' has no attribute {name!r}")


__all__ = ["__version__", *_SUBMODULES]
