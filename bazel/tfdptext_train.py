"""Bazel main for train/tfdptext-train (see run_program.py)."""

from run_program import run

run("train/tfdptext-train")
