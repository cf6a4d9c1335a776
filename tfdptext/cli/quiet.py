"""What the programs print: our own lines, not the stack's start-up noise.

TensorFlow and TFLite write to the process's standard error from C++
(CUDA probing, CPU features, the XNNPACK delegate, SavedModel writing),
before Python logging is configured and beyond its reach. A program runs
inside `filtered_stderr(verbose)`: file descriptor 2 becomes a pipe that a
thread reads line by line, forwarding every line except

- always: absl's notice that logs go to stderr before InitializeLog, and
  TensorFlow's CPU-feature advice (about how the wheel was built);
- on a machine without an NVIDIA device (no /dev/nvidia*): the CUDA
  probing lines ("Could not find cuda drivers", "failed call to cuInit"),
  which there say only that there is no GPU; on a GPU machine they stay,
  since a failed cuInit there is a real problem;
- unless `verbose`: INFO lines (glog-style "I1123 ..." from C++ and absl,
  "INFO:tensorflow:..." from TensorFlow's Python logger, and TFLite's
  "INFO: Created TensorFlow Lite XNNPACK delegate").

Warnings and errors pass unchanged, and so does everything Python prints to
sys.stderr (usage errors, tracebacks). Child processes (tfdptext-sweep's
cells) inherit the filtered descriptor.

Pure Python: importing it never pulls in TensorFlow.
"""

import contextlib
import glob
import os
import re
import sys
import threading

_ALWAYS = (
    re.compile(r"All log messages before absl::InitializeLog\(\) is called"),
    re.compile(r"cpu_feature_guard\.cc"),
    re.compile(r"^To enable the following instructions: .*rebuild "
               r"TensorFlow with the appropriate compiler flags"),
)
_NO_GPU = (
    re.compile(r"Could not find cuda drivers on your machine"),
    re.compile(r"failed call to cuInit"),
)
_INFO = (
    re.compile(r"^I\d{4} \d\d:\d\d:\d\d"),  # glog / absl INFO
    re.compile(r"^INFO:(tensorflow|absl):"),
    re.compile(r"^INFO: Created TensorFlow Lite XNNPACK delegate"),
)


def has_nvidia_device():
    """Whether the machine has an NVIDIA device node (a GPU may be used)."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def is_noise(line, verbose=False, gpu=False):
    """Whether a line of standard error is start-up noise (module
    docstring).

    Example:
    >>> is_noise("I0000 00:00:1.0 1 cudart_stub.cc:31] Could not find cuda "
    ...          "drivers on your machine, GPU will not be used.")
    True
    >>> is_noise("W0000 00:00:1.0 1 something.cc:1] a real warning")
    False
    """
    if any(p.search(line) for p in _NO_GPU):
        return not gpu  # on a GPU machine, CUDA probing matters
    patterns = _ALWAYS + (() if verbose else _INFO)
    return any(p.search(line) for p in patterns)


def progress_verbosity(stream=None):
    """Keras' `verbose` for a program's progress: 1 (a progress bar) on a
    terminal, 2 (one line per epoch) for a file, a pipe or a notebook's
    captured output, where a bar's escape codes would pile up."""
    stream = sys.stdout if stream is None else stream
    try:
        return 1 if stream.isatty() else 2
    except (AttributeError, ValueError):
        return 2


def configure_logging(verbose=False):
    """Python logging of absl and TensorFlow: INFO when `verbose`, else
    warnings and errors only."""
    import logging

    from absl import logging as absl_logging

    level = logging.INFO if verbose else logging.WARNING
    absl_logging.set_verbosity(absl_logging.INFO if verbose
                               else absl_logging.WARNING)
    logging.getLogger("tensorflow").setLevel(level)


@contextlib.contextmanager
def filtered_stderr(verbose=False):
    """Within the block, lines written to file descriptor 2 that are noise
    (`is_noise`) are dropped; the others are forwarded as they come."""
    try:
        original = os.dup(2)
    except OSError:  # no descriptor 2 (a daemon): nothing to filter
        yield
        return
    read_end, write_end = os.pipe()
    gpu = has_nvidia_device()

    def forward():
        with os.fdopen(read_end, "rb", buffering=0) as source:
            pending = b""
            while True:
                chunk = source.read(65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    text = line.decode("utf-8", "replace")
                    if not is_noise(text, verbose, gpu):
                        os.write(original, line + b"\n")
            if pending and not is_noise(pending.decode("utf-8", "replace"),
                                        verbose, gpu):
                os.write(original, pending)

    reader = threading.Thread(target=forward, name="stderr-filter",
                              daemon=True)
    reader.start()
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(original, 2)  # the pipe's last writer is gone: EOF
        reader.join(timeout=5)
        os.close(original)
