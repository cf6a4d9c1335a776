"""English function words: CusText+'s default words kept unchanged.

Chen et al. (2023) keep the stopwords of their corpus unchanged in
CusText+; this is a list of common English function words (articles,
pronouns, auxiliaries, prepositions, conjunctions and their contractions'
parts), lower case, written for tfdptext. Give your own list with the
`keep_words` option.
"""

ENGLISH = tuple(sorted(set("""
a about above after again against all am an and any are as at be because
been before being below between both but by can could did do does doing
down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more
most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves s t d ll m o re ve y
ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan
shouldn wasn weren won wouldn
""".split())))


def read_words(path):
    """The words of a file, one per line (blank lines and surrounding
    spaces ignored)."""
    from tfdptext.errors import ArgumentError

    try:
        with open(path, encoding="utf-8") as f:
            return tuple(line.strip() for line in f if line.strip())
    except OSError as err:
        raise ArgumentError(f"`keep_words`: cannot read {path!r} "
                            f"({err.strerror}).") from None
