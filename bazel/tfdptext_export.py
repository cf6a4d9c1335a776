"""Bazel main of //:tfdptext-export: runs tfdptext.cli.export.main."""

from tfdptext.cli import export

if __name__ == "__main__":
    export.main()
