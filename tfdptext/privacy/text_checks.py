"""What a text is worth releasing: the checks every client runs on its ids.

Nothing meaningless is released or charged:

- A text with no token between [CLS] and [SEP] (empty, only whitespace, or
  only characters the tokenizer contract drops, such as zero-width and
  control characters) is refused on the device, before the ledger charges
  anything: its release would be the same for every such text, and the
  server's label for it means nothing.
- A text whose share of [UNK] tokens (among its tokens between [CLS] and
  [SEP], after truncation) exceeds UNKNOWN_SHARE_LIMIT is released, with a
  warning: the model does not know most of what was written (a script or
  language outside its vocabulary), so its label says little about it.

The export records both rules in its manifest (`user.text_checks`,
`manifest_record`) so that the web page, tfdptext-predict and
`ExportedPipeline` apply the same ones. Pure Python and NumPy.
"""

import dataclasses

import numpy as np

from tfdptext.errors import TfdptextError

# More than a quarter of the tokens unknown: warn.
UNKNOWN_SHARE_LIMIT = 0.25
EMPTY_RULE = ("refuse, before charging, a text with no token between [CLS] "
              "and [SEP] (empty, whitespace, or only characters the "
              "tokenizer drops)")
UNKNOWN_RULE = ("warn when the share of [UNK] among the tokens between "
                "[CLS] and [SEP] (after truncation) exceeds "
                "unknown_share_limit")


class EmptyTextError(TfdptextError):
    """A text with no token to release; nothing was sent or charged."""


@dataclasses.dataclass(frozen=True)
class TextCheck:
    """The tokens of one text between [CLS] and [SEP].

    Example:
    >>> check = check_ids([101, 100, 2307, 102, 0], [1, 1, 1, 1, 0], 100)
    >>> (check.tokens, check.unknown, check.empty)
    (2, 1, False)
    """

    tokens: int
    unknown: int
    limit: float = UNKNOWN_SHARE_LIMIT

    @property
    def empty(self):
        return self.tokens == 0

    @property
    def unknown_share(self):
        return self.unknown / self.tokens if self.tokens else 0.0

    @property
    def warns(self):
        return self.unknown_share > self.limit

    def warning(self):
        """The warning in words ('' when none)."""
        if not self.warns:
            return ""
        return (f"warning: {self.unknown} of {self.tokens} tokens "
                f"({100 * self.unknown_share:.0f}%, above "
                f"{100 * self.limit:.0f}%) are unknown to the model's "
                "vocabulary ([UNK]): its label says little about this text")


def check_ids(token_ids, padding_mask, unk_id, limit=UNKNOWN_SHARE_LIMIT):
    """The TextCheck of one text's ids and mask ([CLS] ... [SEP] [PAD]...)."""
    ids = np.asarray(token_ids)[np.asarray(padding_mask) != 0]
    inner = ids[1:-1]  # without [CLS] and [SEP]
    return TextCheck(int(inner.size), int(np.sum(inner == unk_id)),
                     float(limit))


def refuse_empty(checks):
    """EmptyTextError naming the texts (by index) with no token."""
    empty = [i for i, check in enumerate(checks) if check.empty]
    if empty:
        raise EmptyTextError(
            f"Text(s) {empty} hold no token to release (empty, whitespace, "
            "or only characters the tokenizer drops): refused on this "
            "device; nothing was sent or charged.")


def manifest_record(limit=UNKNOWN_SHARE_LIMIT):
    """The export's `user.text_checks`."""
    return {"refuse_empty": EMPTY_RULE, "unknown_share_limit": limit,
            "warn_unknown": UNKNOWN_RULE}


def limit_of(manifest):
    """The export's unknown-share limit (the default for older exports)."""
    record = manifest.get("user", {}).get("text_checks") or {}
    return float(record.get("unknown_share_limit", UNKNOWN_SHARE_LIMIT))
