"""Bazel main for train/tfdptext-demo (see run_program.py)."""

from run_program import run

run("train/tfdptext-demo")
