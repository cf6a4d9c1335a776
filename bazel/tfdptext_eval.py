"""Bazel main of //:tfdptext-eval: runs tfdptext.cli.evaluate.main."""

from tfdptext.cli import evaluate

if __name__ == "__main__":
    evaluate.main()
