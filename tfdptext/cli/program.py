"""Running a tfdptext program under absl: --help and usage errors.

An argument that is not valid UTF-8 (a flag's value or a positional
argument: Python keeps its bytes as surrogates) is a usage error naming
the argument, before absl parses anything; the argument itself is never
printed (it may be a user's text). Text that fails to decode or encode
later (a file, standard input) is one too, naming the byte, not the text.

A `TfdptextError` (a bad flag, data file, run or output directory: input
the user can fix) ends the program with `<program>: error: <message>` on
stderr and exit status 2, no traceback. Any other exception is a bug and
keeps its traceback; absl's own flag errors stay absl's.

Every program runs inside `tfdptext.cli.quiet.filtered_stderr`: the stack's
start-up noise and INFO lines are dropped unless `--verbose`.

Pure Python: importing it never pulls in TensorFlow.
"""

import sys

from absl import app
from absl import flags

from tfdptext.cli import quiet
from tfdptext.errors import TfdptextError

FLAGS = flags.FLAGS
USAGE_ERROR_STATUS = 2
VERBOSE = "verbose"

flags.DEFINE_bool(VERBOSE, False, "Also print TensorFlow's and TFLite's INFO "
                  "lines (conversion, SavedModel writing, delegates) and the "
                  "CUDA probing of a machine without a GPU.")


def run(name, module_name, program):
    """Runs `program(argv)` as the program `name` with absl's app.run.

    The flags that the module `module_name` (the program's tfdptext.cli
    module) defined, and its docstring, make --help.
    """
    _lend_help(module_name)
    problem = non_utf8_argument(sys.argv)
    if problem:
        print(f"{name}: error: {problem}", file=sys.stderr)
        sys.exit(USAGE_ERROR_STATUS)
    app.run(with_usage_errors(name, program))


def _surrogate(text):
    """The index of the first byte Python could not decode as UTF-8 (kept
    as a lone surrogate), or None."""
    for i, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            return i
    return None


def non_utf8_argument(argv):
    """Why `argv` (sys.argv) is refused: the first argument that is not
    valid UTF-8, named by its flag or position (never its text); '' when
    every argument is valid."""
    for index, arg in enumerate(argv[1:], start=1):
        at = _surrogate(arg)
        if at is None:
            continue
        where = f"argument {index}"
        if arg.startswith("-") and "=" in arg[:at]:
            where += f" (the value of {arg[:arg.index('=')]})"
        elif index > 1 and argv[index - 1].startswith("--") and \
                "=" not in argv[index - 1] and _surrogate(
                    argv[index - 1]) is None:
            where += f" (after {argv[index - 1]})"
        return (f"{where} is not valid UTF-8 (an undecodable byte at "
                f"character {at + 1}); give flags and texts as UTF-8.")
    return ""


def with_usage_errors(name, program):
    """`program` (argv -> exit status), printing a TfdptextError as a
    usage error of the program `name` (status 2)."""

    def main(argv):
        verbose = bool(FLAGS[VERBOSE].value)
        with quiet.filtered_stderr(verbose):
            quiet.configure_logging(verbose)
            try:
                return program(argv)
            except TfdptextError as err:
                print(f"{name}: error: {err}", file=sys.stderr)
                sys.exit(USAGE_ERROR_STATUS)
            except (UnicodeDecodeError, UnicodeEncodeError) as err:
                # Not the text: the reason and where (byte positions).
                print(f"{name}: error: input that is not valid UTF-8 "
                      f"({err.encoding}: {err.reason} at position "
                      f"{err.start}); give texts, files and standard input "
                      "as UTF-8.", file=sys.stderr)
                sys.exit(USAGE_ERROR_STATUS)

    return main


def _lend_help(module_name):
    """absl's --help shows __main__'s docstring and the key flags of
    sys.argv[0]; a console script or launcher is __main__, so both are
    taken from the program's module."""
    sys.modules["__main__"].__doc__ = sys.modules[module_name].__doc__
    for flag in FLAGS.get_flags_for_module(module_name):
        FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    FLAGS.register_key_flag_for_module(sys.argv[0], FLAGS[VERBOSE])
