// What a text is worth releasing: the same checks as tfdptext's
// tfdptext/privacy/text_checks.py, on the ids of the export's tokenizer.
//
// - No token between [CLS] and [SEP] (empty, whitespace, or only characters
//   the tokenizer drops): refused on this device, before the ledger charges.
// - More than user.text_checks.unknown_share_limit (0.25) of the tokens
//   between [CLS] and [SEP] are [UNK]: released, with a warning.

export const UNKNOWN_SHARE_LIMIT = 0.25;

/** {tokens, unknown, share, empty, warns, warning} of an encoded text. */
export function checkText(encoded, manifest) {
  const unk = manifest.user.tokenizer.unk_id ?? 100;
  const limit = manifest.user.text_checks?.unknown_share_limit ?? UNKNOWN_SHARE_LIMIT;
  const inner = Array.from(encoded.tokenIds.subarray(1, encoded.numTokens - 1));
  const tokens = inner.length;
  const unknown = inner.filter((id) => id === unk).length;
  const share = tokens ? unknown / tokens : 0;
  const warns = share > limit;
  return {tokens, unknown, share, empty: tokens === 0, warns,
    warning: warns ? `warning: ${unknown} of ${tokens} tokens ` +
      `(${Math.round(100 * share)}%, above ${Math.round(100 * limit)}%) are ` +
      'unknown to the model\'s vocabulary ([UNK]): its label says little ' +
      'about this text' : ''};
}
