"""The base class of every error tfdptext raises for bad input.

Every error that means "this input, file or directory cannot be used" (a
bad flag, a corrupt or missing run file, a data file with a bad line, an
output directory that is taken) is a `TfdptextError`. It subclasses
`ValueError`, so code that caught `ValueError` keeps working. The programs
(tfdptext-train, -export, -predict, -eval, -sweep) print a `TfdptextError`
as a usage error: its message, no traceback, nothing written.

Pure Python: importing it never pulls in TensorFlow.
"""


class TfdptextError(ValueError):
    """Bad input to tfdptext; the message says what, where, and the fix."""





class ArgumentError(TfdptextError):
    """An argument is outside its allowed range or of the wrong kind; the
    message names the argument, the value received and what is allowed."""

__all__ = ["ArgumentError", "TfdptextError"]
