"""Bazel main of //:tfdptext-demo: runs tfdptext.cli.demo.main."""

from tfdptext.cli import demo

if __name__ == "__main__":
    demo.main()
