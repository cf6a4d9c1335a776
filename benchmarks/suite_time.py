"""The test suite's cost: `make test` under `/usr/bin/time -v`.

    .venv/bin/python benchmarks/suite_time.py            # runs make test
    .venv/bin/python benchmarks/suite_time.py --log=F    # reads a saved log

Writes benchmarks/results/suite_time.json (the README's figure): tests
passed and skipped, wall seconds, user and sys CPU seconds of make and all
it waited for. The project's budget is 20 CPU-minutes (issue 40 asks 15);
measure it with nothing else running.
"""

import os
import re
import subprocess
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from benchmarks import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("log", None, "Read this saved output of "
                    "`/usr/bin/time -v make test` instead of running it.")
flags.DEFINE_string("name", "suite_time", "The result's name: suite_time is "
                    "the README's figure; another name keeps a comparison "
                    "run beside it.")
flags.DEFINE_string("tested_commit", None, "The commit whose tests the "
                    "logged run ran, where it is not this checkout's (a "
                    "run of an older commit in another worktree).")
flags.DEFINE_string("note", None, "How the logged run differed from a plain "
                    "`make test`, if it did (e.g. a profiling plugin given "
                    "through PYTEST_ADDOPTS); recorded beside the result.")


def parse(text):
    """The counts and times of one `/usr/bin/time -v make test` output."""
    def number(pattern):
        found = re.findall(pattern, text)
        if not found:
            raise ValueError(f"not in the log: {pattern}")
        return found[-1]

    wall = number(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)")
    seconds = 0.0
    for part in wall.split(":"):
        seconds = seconds * 60 + float(part)
    user = float(number(r"User time \(seconds\): ([\d.]+)"))
    system = float(number(r"System time \(seconds\): ([\d.]+)"))
    summary = number(r"=+ (.*?) in [\d.]+s")
    counts = {k: int(v) for v, k in re.findall(
        r"(\d+) (passed|failed|skipped|errors?)", summary)}
    return {"passed": counts.get("passed", 0),
            "failed": counts.get("failed", 0),
            "skipped": counts.get("skipped", 0),
            "errors": counts.get("error", counts.get("errors", 0)),
            "exit_status": int(number(r"Exit status: (\d+)")),
            "wall_seconds": seconds, "user_seconds": user,
            "sys_seconds": system,
            "cpu_minutes": round((user + system) / 60, 1)}


def main(argv):
    del argv
    if FLAGS.log:
        with open(FLAGS.log, encoding="utf-8") as f:
            text = f.read()
    else:
        text = subprocess.run(["/usr/bin/time", "-v", "make", "test"],
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True).stdout
    result = {"command": "/usr/bin/time -v make test", **parse(text)}
    if FLAGS.note:
        result["note"] = FLAGS.note
    if FLAGS.tested_commit:
        result["tested_commit"] = FLAGS.tested_commit
    print(result)
    machine.write_json(None, result, name=FLAGS.name)


if __name__ == "__main__":
    app.run(main)
