"""A program that reports the state it starts in, for tests/test_faults.py's
check of tfdptext.cli.children (run as `python -m children_probe` from
tests/, forked or fresh): prints one JSON line, then exits as its first
argument says (an exit status, "kill": SIGKILL itself, "message":
sys.exit with a message).
"""

import json
import os
import signal
import sys

from absl import app
from absl import flags

FLAGS = flags.FLAGS


def _report(argv):
    import numpy as np

    print(json.dumps({
        "pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv,
        "positional": argv[1:], "output_dir": FLAGS.output_dir,
        "flags": sorted(FLAGS), "main": __name__,
        "cmdline": open("/proc/self/cmdline").read().split("\0")[:-1],
        "numpy": np.random.get_state()[1][:4].tolist()}), flush=True)
    action = argv[1]
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "message":
        sys.exit("children_probe: failed as asked")
    return int(action)


if __name__ == "__main__":
    flags.DEFINE_string("output_dir", None, "Where (not written).")
    app.run(_report)
