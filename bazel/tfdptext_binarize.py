"""Bazel main of //:tfdptext-binarize: runs tfdptext.cli.binarize.main."""

from tfdptext.cli import binarize

if __name__ == "__main__":
    binarize.main()
