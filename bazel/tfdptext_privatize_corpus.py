"""Bazel main of //:tfdptext-privatize-corpus: runs tfdptext.cli.privatize_corpus.main."""

from tfdptext.cli import privatize_corpus

if __name__ == "__main__":
    privatize_corpus.main()
