"""Bazel main of //:tfdptext-sweep: runs tfdptext.cli.sweep.main."""

from tfdptext.cli import sweep

if __name__ == "__main__":
    sweep.main()
