"""Bazel main of //:tfdptext-audit: runs tfdptext.cli.audit.main."""

from tfdptext.cli import audit

if __name__ == "__main__":
    audit.main()
