"""Off-device CusText and CusText+ (Chen et al. 2023).

The same output sets and integer thresholds as
`tfdptext.layers.CusTextTextPrivatizer` (`tfdptext.substitution.custext`):
the same exact distribution, each draw one 23-bit integer from
os.urandom.

Reference: Chen, Mo, Wang, Chen, Nie, Wang, Cui, "A Customized Text
Sanitization Mechanism with Differential Privacy", Findings of ACL 2023.
"""

import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.offline import base
from tfdptext.privacy import substitution as guarantees
from tfdptext.privacy import validation
from tfdptext.substitution import backend
from tfdptext.substitution import custext
from tfdptext.substitution import race


class CusTextCorpusPrivatizer(base.CorpusPrivatizer):
    """Privatizes token ids in bulk by CusText (CusText+ with
    `keep_token_ids`).

    Args:
        embeddings: (vocabulary_size, dim) table (table order = frequency
            order).
        epsilon: privacy parameter, finite and > 0.
        top_k: the size of an output set, >= 2 (default 20).
        keep_token_ids: words released unchanged (CusText+).
        special_token_ids, passthrough_token_ids, seed,
        embedding_description: as `DChiCorpusPrivatizer`.

    Example:
    >>> privatizer = CusTextCorpusPrivatizer(table, epsilon=2.0, top_k=10,
    ...                                      special_token_ids=[0])
    >>> private_ids = privatizer(np.array([[5, 17, 42]]))
    """

    def __init__(self, embeddings, epsilon, top_k=20, keep_token_ids=(),
                 special_token_ids=(), passthrough_token_ids=(), seed=None,
                 embedding_description="the token embedding table"):
        epsilon = validation.check_positive("epsilon", epsilon)
        top_k = custext.check_top_k(top_k)
        members, thresholds, _ = custext.tables(
            embeddings, special_token_ids, top_k, epsilon)
        self._setup(np.concatenate([members, thresholds], axis=1), epsilon,
                    top_k, custext.implemented_epsilon(members, thresholds),
                    keep_token_ids, special_token_ids, passthrough_token_ids,
                    seed, embedding_description)

    @classmethod
    def from_tables(cls, sets, epsilon, top_k, implemented_epsilon,
                    keep_token_ids=(), special_token_ids=(),
                    passthrough_token_ids=(), seed=None,
                    embedding_description="the token embedding table"):
        """The privatizer of a layer's (V, 2 top_k - 1) sets table."""
        privatizer = cls.__new__(cls)
        privatizer._setup(np.asarray(sets, np.int32), epsilon, top_k,
                          implemented_epsilon, keep_token_ids,
                          special_token_ids, passthrough_token_ids, seed,
                          embedding_description)
        return privatizer

    def _setup(self, sets, epsilon, top_k, implemented, keep_token_ids,
               special_token_ids, passthrough_token_ids, seed, description):
        super().__init__(len(sets), special_token_ids, passthrough_token_ids,
                         seed, None)
        self.epsilon = epsilon
        self.top_k = top_k
        self.members = sets[:, :top_k]
        self.thresholds = sets[:, top_k:]
        self.implemented_epsilon = implemented
        keep = np.unique(np.asarray(list(keep_token_ids), np.int64))
        if keep.size and (keep.max() >= self.vocabulary_size
                          or self.is_special[keep].any()):
            raise ArgumentError("`keep_token_ids` must be candidate ids, "
                                "none of them special.")
        self.keep_token_ids = tuple(int(i) for i in keep)
        self.is_kept = np.zeros(self.vocabulary_size, bool)
        self.is_kept[keep] = True
        self.embedding_description = description

    def _privatize(self, ids):
        u = race.numpy_uniforms((len(ids),), self.rng)
        out = custext.draw(self.members[ids], self.thresholds[ids], u,
                           backend.NUMPY)
        return np.where(self.is_kept[ids], ids, out)

    def guarantee(self):
        return guarantees.custext_guarantee(
            self.epsilon, self.implemented_epsilon, self.top_k,
            self.embedding_description, len(self.keep_token_ids)
        ).with_randomness(self.randomness())
