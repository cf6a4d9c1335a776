"""BRR text-to-text (Carvalho, Vasiloudis, Feyisetan 2021): the entry.

Per-bit randomized response on the token's binary code, then the word
whose code is nearest in Hamming distance. The math lives in
`tfdptext.layers.BRRTextPrivatizer` and `tfdptext.offline.brr`.

Reference: Carvalho, Vasiloudis, Feyisetan, "BRR: Preserving Privacy of
Text Data Efficiently on Device", arXiv:2107.07923, 2021.
"""

import numpy as np

from tfdptext.mechanisms import spec


def layer(settings):
    from tfdptext import layers

    return layers.BRRTextPrivatizer(
        settings.value, codes=settings.table,
        special_token_ids=settings.special_token_ids,
        passthrough_token_ids=settings.passthrough_token_ids,
        codes_description=settings.description)


def offline(settings, seed=None, num_threads=None):
    from tfdptext.offline import BRRCorpusPrivatizer

    return BRRCorpusPrivatizer(
        np.packbits(np.asarray(settings.table, np.uint8), axis=1),
        settings.value, special_token_ids=settings.special_token_ids,
        passthrough_token_ids=settings.passthrough_token_ids, seed=seed,
        num_threads=num_threads, codes_description=settings.description)


SPEC = spec.TextMechanism(
    name="brr",
    summary="binary randomized response on the token's code, nearest "
    "code in Hamming distance",
    reference="Carvalho, Vasiloudis, Feyisetan, arXiv:2107.07923, 2021",
    parameter="epsilon", table=spec.CODES, layer=layer, offline=offline)
