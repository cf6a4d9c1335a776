"""Bazel main for eval/tfdptext-audit (see run_program.py)."""

from run_program import run

run("eval/tfdptext-audit")
