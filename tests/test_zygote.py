"""tests/zygote.py's `run` gives a forked child what a fresh interpreter
would have, and answers as `subprocess.run` does."""

import os
import subprocess
import sys

import pytest

import zygote

CHILD = """
import json, os, sys, tempfile
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
                  "env": os.environ.get("ZYGOTE_PROBE"),
                  "tmp": tempfile.gettempdir(), "stdin": sys.stdin.read(),
                  "pid": os.getpid(), "parent": os.getppid()}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def _both(argv, **kwargs):
    """The same command through zygote.run and through subprocess.run."""
    forked = zygote.run(argv, capture_output=True, text=True, timeout=120,
                        **kwargs)
    fresh = subprocess.run(argv, capture_output=True, text=True,
                           timeout=120, **kwargs)
    return forked, fresh


def test_a_forked_child_sees_what_a_fresh_interpreter_sees(tmp_path):
    import json

    env = dict(os.environ, ZYGOTE_PROBE="probe", TMPDIR=str(tmp_path))
    forked, fresh = _both([sys.executable, "-c", CHILD, "3", "x y"],
                          cwd=tmp_path, env=env, input="typed")
    assert forked.returncode == fresh.returncode == 3
    assert forked.stderr == fresh.stderr == "to stderr\n"
    seen, expected = json.loads(forked.stdout), json.loads(fresh.stdout)
    assert seen["parent"] != os.getpid()  # forked by the server
    for key in ("argv", "cwd", "path0", "env", "tmp", "stdin"):
        assert seen[key] == expected[key], key
    assert seen["tmp"] == str(tmp_path)


def test_a_script_gets_its_folder_as_path0_and_its_exit_status(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys\nprint(sys.path[0], sys.argv[1:])\n"
                      "raise SystemExit('bad input')\n")
    forked, fresh = _both([sys.executable, str(script), "a"])
    assert (forked.returncode, forked.stdout, forked.stderr) == \
        (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.returncode == 1 and "bad input" in forked.stderr


def test_an_uncaught_exception_prints_its_traceback_and_exits_1():
    forked, fresh = _both([sys.executable, "-c", "raise KeyError('k')"])
    assert forked.returncode == fresh.returncode == 1
    assert "KeyError: 'k'" in forked.stderr and "Traceback" in forked.stderr


def test_a_timeout_kills_the_child_and_raises():
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.run([sys.executable, "-c", "import time; time.sleep(60)"],
                   capture_output=True, timeout=1)


def test_another_backend_or_interpreter_option_runs_fresh(monkeypatch):
    code = "import sys; print('tensorflow' in sys.modules)"
    env = dict(os.environ, KERAS_BACKEND="jax")
    # A fresh interpreter has not imported TensorFlow; the server has.
    assert zygote.run([sys.executable, "-c", code], capture_output=True,
                      text=True, env=env).stdout == "False\n"
    assert zygote.run([sys.executable, "-I", "-c", code],
                      capture_output=True, text=True).stdout == "False\n"
    assert zygote.run([sys.executable, "-c", code], capture_output=True,
                      text=True).stdout == "True\n"


# Each waits (up to 60 s) for the other's file: they finish only if both
# run at once.
MEET = """
import os, sys, time
mine, other = sys.argv[1:]
open(mine, "w").write(str(os.getpid()))
deadline = time.monotonic() + 60
while not os.path.exists(other):
    if time.monotonic() > deadline:
        sys.exit("never met " + other)
    time.sleep(0.02)
print(os.getpid())
"""


def test_background_children_run_at_once_and_know_their_pids(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    # The second runs fresh (another backend), so it has its Popen pid.
    jobs = [zygote.Background([sys.executable, "-c", MEET, a, b],
                              capture_output=True, text=True, timeout=120),
            zygote.Background([sys.executable, "-c", MEET, b, a],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, KERAS_BACKEND="jax"))]
    results = [job.result(120) for job in jobs]
    for job, result in zip(jobs, results):
        assert result.returncode == 0, result.stderr
        assert int(result.stdout) == job.pid == job.wait_started()
    assert jobs[0].pid != jobs[1].pid
    assert hasattr(results[0], "cpu_seconds")  # forked
    assert not hasattr(results[1], "cpu_seconds")  # a subprocess


def test_a_background_timeout_kills_only_its_own_child(tmp_path):
    import time

    sleeper = zygote.Background(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        capture_output=True, timeout=10)
    pid = sleeper.wait_started(60)
    assert pid is not None
    # Another child starts and ends while the first is still running.
    quick = zygote.run([sys.executable, "-c", "print('quick')"],
                       capture_output=True, text=True, timeout=60)
    assert quick.stdout == "quick\n"
    assert sleeper.running()
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.result(60)
    assert time.monotonic() - start < 40
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)
