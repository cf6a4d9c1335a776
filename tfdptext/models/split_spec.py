"""What each split point releases: one `SplitSpec` per split point.

The user side of every split model returns a dict: the release under
`spec.release`, plus the padding mask and segment ids when
`spec.mask_travels` (they reveal only the text's length). The server model
takes that same dict. Export, evaluation, the report and the local
pipeline read everything split-specific from the spec:

>>> spec = get("token_representation")
>>> spec.released_keys
('token_embeddings', 'padding_mask', 'segment_ids')
>>> [t.name for t in spec.signature_inputs(max_length=128, dim=384)]
['token_embeddings', 'padding_mask']

Pure Python and numpy (Keras is imported only by `server_feed`).
"""

import dataclasses
from typing import Callable

import numpy as np

from tfdptext.errors import ArgumentError

SEQUENCE = "sequence_representation"
TOKEN = "token_representation"
TEXT_TO_TEXT = "text_to_text"
CODE = "code"
SPLIT_POINTS = (SEQUENCE, TOKEN, TEXT_TO_TEXT, CODE)

PADDING_MASK = "padding_mask"
SEGMENT_IDS = "segment_ids"
# Released with the token-level releases, in this order.
MASK_KEYS = (PADDING_MASK, SEGMENT_IDS)


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """A named tensor's shape (None for the batch and unknown axes) and
    dtype name ("float32", "int32")."""

    name: str
    shape: tuple
    dtype: str


def _real_token_mean(vectors, padding_mask):
    """(batch, dim): the mean of `vectors` (batch, length, dim) over the
    positions where `padding_mask` is 1 (a text without any: zeros)."""
    mask = np.asarray(padding_mask, np.float32)[..., None]
    vectors = np.asarray(vectors, np.float32)
    total = (vectors * mask).sum(axis=1)
    return (total / np.maximum(mask.sum(axis=1), 1.0)).astype(np.float32)


def vector_features(released, table=None):
    """Sequence split: the released vector itself."""
    del table
    return np.asarray(released["private_representation"], np.float32)


def embedding_mean_features(released, table=None):
    """Token embeddings: their mean over the real tokens."""
    del table
    return _real_token_mean(released["token_embeddings"],
                            released[PADDING_MASK])


def token_id_mean_features(released, table=None):
    """Privatized token ids: the mean over the real tokens of the public
    embedding table's rows for them (an eavesdropper knows the table)."""
    if table is None:
        raise ArgumentError(
            "Attacker features of privatized token ids need the public "
            "`table` (vocabulary, dim) the ids index; received None.")
    table = np.asarray(table, np.float32)
    return _real_token_mean(table[np.asarray(released["token_ids"])],
                            released[PADDING_MASK])


def code_features(released, table=None):
    """A released code: its row of the public (m, m) identity table, i.e.
    its one-hot vector."""
    if table is None:
        raise ArgumentError(
            "Attacker features of released codes need the public `table` "
            "(the (m, m) identity of the m codes); received None.")
    return np.asarray(table, np.float32)[np.asarray(released["private_code"])]


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    """What one split point's user side releases and its server takes.

    Attributes:
        name: the split point (one of SPLIT_POINTS).
        release: the release tensor's name (user output key, phone model
            output, server signature input).
        release_dtype: "float32" or "int32" (token ids or codes).
        per_token: the release has a length axis: (batch, length[, dim]);
            otherwise one row per text: (batch, dim).
        feature_axis: the release has a last feature axis of size dim.
        mask_travels: the padding mask and segment ids are released with
            it (the server needs them; they reveal only the length).
        description: what leaves the phone, for a report, when private.
        description_not_private: the same when nothing privatizes it.
        attack_features: (release dict, table=None) -> (batch, d) float32,
            one vector per text for attackers.
    """

    name: str
    release: str
    release_dtype: str
    per_token: bool
    feature_axis: bool
    mask_travels: bool
    description: str
    description_not_private: str
    attack_features: Callable

    @property
    def released_keys(self):
        """The keys of the user side's output, which are the server
        model's inputs: the release, then MASK_KEYS when they travel."""
        return (self.release,) + (MASK_KEYS if self.mask_travels else ())

    @property
    def releases_token_ids(self):
        """Whether the release is integers (token ids, or codes) indexing a
        public table, rather than vectors."""
        return self.release_dtype.startswith("int")

    def release_info(self, length, dim):
        """The release's TensorInfo for inputs of `length` tokens and
        representations of `dim` values (`dim` unused without a feature
        axis)."""
        shape = (None,) + ((length,) if self.per_token else ())
        if self.feature_axis:
            shape += (dim,)
        return TensorInfo(self.release, shape, self.release_dtype)

    def released_infos(self, length, dim):
        """TensorInfo of every key of `released_keys`, in order."""
        return [self.release_info(length, dim)] + [
            TensorInfo(key, (None, length), "int32")
            for key in self.released_keys[1:]]

    def signature_inputs(self, max_length, dim):
        """The server signature's inputs, in order: the release, and the
        padding mask when it travels (segment ids are zeros, made by the
        server)."""
        return [info for info in self.released_infos(max_length, dim)
                if info.name != SEGMENT_IDS]

    def server_feed(self, inputs):
        """The server model's input dict from the signature's inputs
        (tensors keyed by `signature_inputs` names): segment ids are
        zeros when the mask travels."""
        import keras

        feed = {self.release: inputs[self.release]}
        if self.mask_travels:
            feed[PADDING_MASK] = inputs[PADDING_MASK]
            feed[SEGMENT_IDS] = keras.ops.zeros_like(inputs[PADDING_MASK])
        return feed

    def with_mask(self, released, padding_mask):
        """`released` (a dict holding the release) with the padding mask
        and zero segment ids added when they travel."""
        out = dict(released)
        if self.mask_travels:
            mask = np.asarray(padding_mask)
            out[PADDING_MASK] = mask
            out[SEGMENT_IDS] = np.zeros_like(mask)
        return out

    def dim_of(self, release_shape):
        """The representation width of a release shape; None without a
        feature axis."""
        return int(release_shape[-1]) if self.feature_axis else None

    def pad_value(self, key, pad_id):
        """What a padded position of released `key` holds: the
        tokenizer's `pad_id` for released token ids, 0 for vectors, the
        padding mask and the segment ids."""
        if key == self.release and self.releases_token_ids:
            return pad_id
        return 0

    def describe(self, private=True):
        """One line on what leaves the phone (report.md)."""
        return self.description if private else self.description_not_private


_TOKEN_LENGTH_NOTE = "with the padding mask (which reveals the length)"

SPLITS = {
    SEQUENCE: SplitSpec(
        name=SEQUENCE, release="private_representation",
        release_dtype="float32", per_token=False, feature_axis=True,
        mask_travels=False,
        description=("one vector per text (the pooled encoder output, "
                     "normalised and noised)"),
        description_not_private=("one vector per text (the pooled encoder "
                                 "output, NOT privatized)"),
        attack_features=vector_features),
    TOKEN: SplitSpec(
        name=TOKEN, release="token_embeddings", release_dtype="float32",
        per_token=True, feature_axis=True, mask_travels=True,
        description=f"one noisy token embedding per token, "
                    f"{_TOKEN_LENGTH_NOTE}",
        description_not_private=f"one token embedding per token (NOT "
                                f"privatized), {_TOKEN_LENGTH_NOTE}",
        attack_features=embedding_mean_features),
    TEXT_TO_TEXT: SplitSpec(
        name=TEXT_TO_TEXT, release="token_ids", release_dtype="int32",
        per_token=True, feature_axis=False, mask_travels=True,
        description=f"privatized token ids, {_TOKEN_LENGTH_NOTE}",
        description_not_private=f"the token ids (NOT privatized), "
                                f"{_TOKEN_LENGTH_NOTE}",
        attack_features=token_id_mean_features),
    CODE: SplitSpec(
        name=CODE, release="private_code", release_dtype="int32",
        per_token=False, feature_axis=False, mask_travels=False,
        description=("one code of m values per text (the argmax of the user "
                     "side's logits), by m-ary randomized response"),
        description_not_private=("one code of m values per text (the argmax "
                                 "of the user side's logits, NOT "
                                 "privatized)"),
        attack_features=code_features),
}


def get(name, error=ArgumentError, where=None):
    """The SplitSpec of split point `name`.

    Raises `error` (default ArgumentError) for an unknown name; `where`
    (e.g. the file the name was read from) starts the message.
    """
    spec = SPLITS.get(name) if isinstance(name, str) else None
    if spec is None:
        prefix = f"{where}: " if where else ""
        raise error(f"{prefix}unknown split point {name!r}; the split "
                    f"points are {SPLIT_POINTS}.")
    return spec
