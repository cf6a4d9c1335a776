"""Runs one of the repository's programs (train/, export/, eval/) as __main__.

The programs have no .py extension, which py_binary does not accept as a
main, so each py_binary's main is a two-line wrapper beside this file that
calls `run` with the program's path relative to the workspace root. The
program is a data dependency of the py_binary, so it is in the runfiles
tree next to this file's folder.
"""

import os
import runpy
import sys


def run(relative_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    program = os.path.join(root, relative_path)
    sys.argv[0] = program
    runpy.run_path(program, run_name="__main__")
