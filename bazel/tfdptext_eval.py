"""Bazel main for eval/tfdptext-eval (see run_program.py)."""

from run_program import run

run("eval/tfdptext-eval")
