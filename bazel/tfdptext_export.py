"""Bazel main for export/tfdptext-export (see run_program.py)."""

from run_program import run

run("export/tfdptext-export")
