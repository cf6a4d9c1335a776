"""Privatizing whole text corpora off device, as an Apache Beam job.

- `config`: `CorpusConfig`, the job's settings (the flags of
  `tfdptext-privatize-corpus`), checked by `validate()`.
- `mechanisms`: the registry (`dchi`, `brr`) of `CorpusMechanism`s: a
  codec (text <-> ids) and a token privatizer with fresh os.urandom noise.
- `codecs`: WordPiece and whole-word tokenization, and back.
- `inputs`: finding, reading and checking the input files (text lines or
  TFRecord tf.train.Example records).
- `outdir`: the output directory's layout and manifest.json.
- `pipeline`: the Beam pipeline, `build_pipeline` and `run` (imports
  apache-beam: `pip install "tfdptext[beam]"`).

Example:
>>> from tfdptext.corpus import CorpusConfig, pipeline
>>> manifest = pipeline.run(
...     CorpusConfig(input="texts.txt", mechanism="dchi", eta=100.0),
...     "out/")
"""

from tfdptext.corpus.config import CorpusConfig
from tfdptext.corpus.config import INPUT_FORMATS
from tfdptext.corpus.mechanisms import MECHANISMS
from tfdptext.corpus.mechanisms import CorpusMechanism
from tfdptext.corpus.mechanisms import MechanismSpec

__all__ = ["CorpusConfig", "CorpusMechanism", "INPUT_FORMATS", "MECHANISMS",
           "MechanismSpec"]
