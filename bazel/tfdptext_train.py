"""Bazel main of //:tfdptext-train: runs tfdptext.cli.train.main."""

from tfdptext.cli import train

if __name__ == "__main__":
    train.main()
