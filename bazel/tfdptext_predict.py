"""Bazel main for export/tfdptext-predict (see run_program.py)."""

from run_program import run

run("export/tfdptext-predict")
