"""Off-device text-to-text privatization of whole corpora, with FAISS.

The same mechanisms as the Keras layers `DChiTextPrivatizer` and
`BRRTextPrivatizer`, for privatizing data sets in bulk on a server or
workstation, with noise from os.urandom by default:

- `DChiCorpusPrivatizer`: d_chi noise on token embeddings, exact L2 nearest
  neighbour (`tfdptext.offline.dchi`).
- `BRRCorpusPrivatizer`: per-bit randomized response on binary codes,
  Hamming nearest neighbour, exact or approximate (`tfdptext.offline.brr`).

`tfdptext.offline.categorical.randomized_response` is m-ary randomized
response on integers (codes, training labels) with the layer's integer
arithmetic.
"""

from tfdptext.offline.brr import BRRCorpusPrivatizer
from tfdptext.offline.dchi import DChiCorpusPrivatizer
from tfdptext.offline.dchi import dchi_noise
from tfdptext.offline.dchi import os_gamma
from tfdptext.offline.dchi import pq_subspaces
from tfdptext.offline.dchi import os_uniforms

__all__ = ["BRRCorpusPrivatizer", "DChiCorpusPrivatizer", "dchi_noise",
           "os_gamma", "os_uniforms", "pq_subspaces"]
