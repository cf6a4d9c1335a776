"""Runs a tfdptext program as a child process that dies with its parent.

`run(module, args)` runs `python -m <module> <args>` and returns its exit
status, as `subprocess.call` would. tfdptext-sweep runs every cell's
tfdptext-train and tfdptext-eval this way. A fresh interpreter spends about
10 CPU-seconds importing TensorFlow, Keras and keras-hub before the
program starts; so where it is safe, the child is forked from this process
instead, once this process has imported them (once per sweep, not twice
per cell), and runs the module as `__main__` as the interpreter would:

- only on Linux with the TensorFlow backend, and only while this process
  has run no TensorFlow op (its runtime, thread pools and devices are
  started by the first op; a forked child starts its own). Otherwise, or
  with `fork=False`, the child is a fresh `python -m`;
- the child starts from what a fresh interpreter has at that point: absl's
  flags unparsed at their defaults, without the parent program's own
  flags (`own_flags`), the program's module not yet imported, argv and
  sys.path[0] as `python -m` sets them, NumPy's global random state drawn
  again from the OS (Python's `random` is by Python itself);
- it is a real process either way: its own pid, exit status (negative:
  the signal that killed it), output on the parent's standard streams,
  and a SIGKILL of the parent kills it (Linux's parent-death signal), so a
  killed sweep never leaves an orphan writing into its directory.

Pure Python: importing it never pulls in TensorFlow.
"""

import os
import subprocess
import sys

# What a tfdptext program imports before its work: imported here once
# (imports only, no op) before the first fork.
PRELOAD = ("tensorflow", "keras", "keras_hub", "tfdptext.training",
           "tfdptext.evaluation.evaluate")


def command(module, args):
    """The command line the child runs (as a fresh process would)."""
    return [sys.executable, "-m", module, *args]


def run(module, args, own_flags=(), fork=True):
    """Runs `python -m module args` as a child; returns its exit status.

    Args:
        module: the program's module, e.g. "tfdptext.cli.evaluate".
        args: its command-line arguments.
        own_flags: names of the absl flags that the calling program
            defined (removed in a forked child, whose program defines its
            own, e.g. another --output_dir).
        fork: False runs a fresh interpreter whatever the platform.
    """
    if fork and _preload(module):
        return _forked(module, list(args), tuple(own_flags))
    parent = os.getpid()

    def before():
        _die_with_parent()
        if os.getppid() != parent:  # the parent died before prctl
            os._exit(1)

    return subprocess.call(command(module, args), preexec_fn=before if
                           sys.platform.startswith("linux") else None)


def fork_safe():
    """Whether a child forked now starts as cleanly as a fresh process:
    Linux, TensorFlow imported with the TensorFlow Keras backend, and no
    TensorFlow op run yet in this process."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    keras = sys.modules.get("keras")
    if keras is None or "tensorflow" not in sys.modules:
        return False
    try:
        if keras.config.backend() != "tensorflow":
            return False
        from tensorflow.python.eager import context

        # The eager context is initialized by the first op (or device
        # listing): the runtime and its thread pools exist from then on.
        return not context.context()._initialized
    except (AttributeError, ImportError):  # another TensorFlow: be safe
        return False


def _preload(module):
    """Imports PRELOAD and `module` (once; cheap when done); whether a
    child may be forked."""
    import importlib

    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        for name in (*PRELOAD, module):
            importlib.import_module(name)
    except ImportError:
        return False
    return fork_safe()


def _forked(module, args, own_flags):
    """Forks the child, waits for it; its exit status. Interrupted (e.g.
    Ctrl-C), the child is killed before the exception goes on, as
    subprocess.call does."""
    import signal

    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child(module, args, own_flags, parent)  # never returns
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise
    return os.waitstatus_to_exitcode(status)


def _child(module, args, own_flags, parent):
    """The forked child: the program run as `python -m module args`,
    then os._exit with its status (it never returns into the parent's
    code)."""
    code = 1
    try:
        _die_with_parent()
        if os.getppid() != parent:
            os._exit(1)
        _as_fresh_interpreter(module, args, own_flags)
        code = _execute(module)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        exit_as_interpreter(code)


def exit_as_interpreter(code):
    """Ends a forked child as an interpreter ends: the atexit functions,
    the standard streams flushed, then os._exit with `code` (-SIGINT: dies
    of SIGINT, as the interpreter does after a KeyboardInterrupt, so that
    the parent sees it). Never returns."""
    import atexit
    import signal

    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        if code == -signal.SIGINT:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        os._exit(code & 0xFF)


def _as_fresh_interpreter(module, args, own_flags):
    """The state that `python -m module args` has before it runs the
    module, where the parent's differs."""
    from absl import flags

    for name in own_flags:
        if name in flags.FLAGS:
            delattr(flags.FLAGS, name)
    flags.FLAGS.unparse_flags()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()  # from the OS, as at NumPy's import
    sys.argv = [module, *args]  # runpy puts the module's file first
    sys.path[0:1] = [os.getcwd()]
    # A fresh interpreter has not imported the module it runs as __main__.
    sys.modules.pop(module, None)


def _execute(module):
    """Runs `module` as __main__; its exit status as the interpreter
    gives it (-SIGINT after a KeyboardInterrupt)."""
    import runpy

    return exit_status_of(lambda: runpy.run_module(
        module, run_name="__main__", alter_sys=True))


def exit_status_of(main):
    """Calls `main()` as an interpreter runs __main__; the exit status it
    would give: SystemExit's code (a message: printed, 1), 1 after any
    other exception (its traceback printed), -SIGINT after a
    KeyboardInterrupt, else 0."""
    import signal

    try:
        main()
    except SystemExit as done:
        if done.code is None:
            return 0
        if isinstance(done.code, int):
            return done.code
        print(done.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        import traceback

        traceback.print_exc()
        return -signal.SIGINT
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    return 0


def _die_with_parent():
    """In the child: ask Linux to kill it when its parent dies, so that a
    killed sweep leaves no orphan training or evaluation running into its
    directory (the re-run would race with it)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
