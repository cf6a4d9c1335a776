"""What a phone model's manifest says about its random words: which
buffers release exactly, which are refused, which no check can see.

Every sentence here has a test that builds the case
(`tests/test_aligned_buffers.py`, `tests/test_partial_buffers.py`): the
sentences name only what holds.

Pure Python.
"""

from tfdptext.privacy import extraction

FILL = ("for every call, fill all the words with fresh bytes from the "
        "platform's cryptographically secure generator (Android: "
        "SecureRandom.nextBytes; iOS: SecRandomCopyBytes; web: "
        "crypto.getRandomValues, at most 65,536 bytes per call), into a "
        "buffer made for that call; never reuse or derive them")

CHECKS = ("the model makes its release unusable (all NaN; token ids all "
          "-1) when the words show a defect that mixing cannot undo: a "
          "stuck bit at any of the 32 positions, or a bit that follows the "
          "position's parity, or any function of the position modulo 2, "
          "3, 4, 6, 8, 12, 16 or 24; an unfilled or mostly unfilled "
          "buffer, or one mostly zero anywhere; a constant, a counter or "
          "arithmetic progression, an LCG, low or high bytes too even or "
          "too repetitive; repeated words, a pool tiled over the buffer "
          "(a pool of any size up to N - 8 words, N the words the app "
          "fills, tiled from the first word or after a header of up to 3 "
          "words); a second half copied from the first, or its "
          "negation or complement; checksums that make every group (or every set "
          "of words C apart) sum to 0 (false alarm below 2^-40 for good "
          "words; tfdptext.privacy.word_statistics); the server refuses "
          "such releases: discard it and call again with fresh words")

NOT_DETECTABLE = ("a predictable generator whose output looks uniform "
                  "(java.util.Random or any seeded PRNG: the seed, e.g. "
                  "the time, gives the noise away), reuse of a buffer "
                  "across calls, other words computed from the fresh "
                  "ones (a checksum of only a few groups of a long "
                  "buffer), and in a buffer over 512 words a nonzero "
                  "constant outside the checks' sample: no check inside "
                  "the model can see them; nor is it sure to see a pool "
                  "of more than N - 8 words tiled (the last few words "
                  "copies of the first), a pool tiled after a header of "
                  "more than 3 words, or a bit that is a fixed function "
                  "of the position of another period")


def partial_buffers(consumed):
    """The sentence on partly bad buffers for a mechanism reading
    `consumed` words (`extraction.layout`).

    Example:
    >>> partial_buffers(2)[:60]
    'each word the mechanism reads is the sum modulo 2^32 of 64 w'
    """
    lay = extraction.layout(consumed)
    return (f"each word the mechanism reads is the sum modulo 2^32 of "
            f"{lay.group} words, one from each block of {lay.consumed} "
            "(the rule under `extraction`), so a release follows the "
            "stated channel exactly as long as every group holds one "
            "fresh word and the bad words are independent of the fresh "
            "ones (not copied, negated or computed from them): any "
            f"{lay.group - 1} bad word(s) anywhere, the first or the last "
            f"{extraction.longest_harmless_edge(consumed)} words, any run "
            f"of up to {extraction.longest_harmless_run(consumed)} "
            "consecutive bad words, or every word at an even position (or "
            "every word at an odd one), cannot change what is released "
            "(such a buffer may be refused instead: many equal words fail "
            "the checks)")


def contract(consumed):
    """{fill, partial_buffers, checks, not_detectable}: the manifest's
    sentences for a model whose mechanism reads `consumed` words."""
    return {"fill": FILL, "partial_buffers": partial_buffers(consumed),
            "checks": CHECKS, "not_detectable": NOT_DETECTABLE}
