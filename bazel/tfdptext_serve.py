"""Bazel main of //:tfdptext-serve: runs tfdptext.cli.serve.main."""

from tfdptext.cli import serve

if __name__ == "__main__":
    serve.main()
