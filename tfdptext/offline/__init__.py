"""Off-device text-to-text privatization of whole corpora, with FAISS.

The same mechanisms as the Keras layers `DChiTextPrivatizer` and
`BRRTextPrivatizer`, for privatizing data sets in bulk on a server or
workstation, with noise from os.urandom by default:

- `DChiCorpusPrivatizer`: d_chi noise on token embeddings, exact L2 nearest
  neighbour (`tfdptext.offline.dchi`).
- `BRRCorpusPrivatizer`: per-bit randomized response on binary codes,
  Hamming nearest neighbour, exact or approximate (`tfdptext.offline.brr`).
- `MahalanobisCorpusPrivatizer`, `VickreyCorpusPrivatizer`: elliptical
  noise (Xu et al. 2020) and the Vickrey choice between the two nearest
  tokens (Xu et al. 2021).
- `SanTextCorpusPrivatizer`, `TEMCorpusPrivatizer`: exponential
  mechanisms over the whole vocabulary (Yue et al. 2021; Carvalho et al.
  2023), sampled by the two-stage exponential race.
- `CusTextCorpusPrivatizer`: customized output sets (Chen et al. 2023),
  sampled exactly from integer thresholds.
- `TruncatedGumbelCorpusPrivatizer`: report-noisy-min over a Poisson
  number of nearest words (Carvalho et al. 2021).
- `DiffractorCorpusPrivatizer`: 1-Diffractor's geometric noise on the
  positions of a one-dimensional list of the vocabulary (Meisenbacher et
  al. 2024), sampled exactly from integer thresholds.

Each is the offline twin of a `tfdptext.layers` text privatizer, sharing
its math (`tfdptext.substitution`); `tfdptext.mechanisms` names them all.

`tfdptext.offline.categorical.randomized_response` is m-ary randomized
response on integers (codes, training labels) with the layer's integer
arithmetic.
"""

from tfdptext.offline.brr import BRRCorpusPrivatizer
from tfdptext.offline.custext import CusTextCorpusPrivatizer
from tfdptext.offline.dchi import DChiCorpusPrivatizer
from tfdptext.offline.dchi import dchi_noise
from tfdptext.offline.dchi import os_gamma
from tfdptext.offline.dchi import pq_subspaces
from tfdptext.offline.dchi import os_uniforms
from tfdptext.offline.diffractor import DiffractorCorpusPrivatizer
from tfdptext.offline.mahalanobis import MahalanobisCorpusPrivatizer
from tfdptext.offline.santext import SanTextCorpusPrivatizer
from tfdptext.offline.tem import TEMCorpusPrivatizer
from tfdptext.offline.truncated_gumbel import \
    TruncatedGumbelCorpusPrivatizer
from tfdptext.offline.vickrey import VickreyCorpusPrivatizer

__all__ = ["BRRCorpusPrivatizer", "CusTextCorpusPrivatizer",
           "DChiCorpusPrivatizer", "DiffractorCorpusPrivatizer",
           "MahalanobisCorpusPrivatizer", "SanTextCorpusPrivatizer",
           "TEMCorpusPrivatizer", "TruncatedGumbelCorpusPrivatizer",
           "VickreyCorpusPrivatizer",
           "dchi_noise",
           "os_gamma", "os_uniforms", "pq_subspaces"]
