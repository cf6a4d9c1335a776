"""Bazel main for eval/tfdptext-sweep (see run_program.py)."""

from run_program import run

run("eval/tfdptext-sweep")
