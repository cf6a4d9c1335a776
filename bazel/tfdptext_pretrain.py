"""Bazel main of //:tfdptext-pretrain: runs tfdptext.cli.pretrain.main."""

from tfdptext.cli import pretrain

if __name__ == "__main__":
    pretrain.main()
