"""Runs Python child processes for the tests without paying for TensorFlow's
import each time.

Most of the suite's programs (`tfdptext-train`, `-eval`, `-export`, ...)
spend about 10 CPU-seconds importing TensorFlow, Keras and keras-hub before
they do anything. `run` is `subprocess.run` for commands of this Python
(`[sys.executable, script | -m module | -c code, args...]`): it asks a
server process that imported those once to fork a child, which sets up
what a fresh interpreter would have (the working directory, the
environment, argv, sys.path[0], standard streams as files) and runs the
script, module or code as `__main__`. The child is a real process: its
exit status, its output, its files and its CPU time (reaped by the server,
which the test process reaps at exit) are the program's.

Commands it cannot serve faithfully go to `subprocess.run` unchanged: other
executables, interpreter options, bytes arguments, and environments that
differ from the server's in what is read at import time (the Keras backend,
TensorFlow's logging level, PYTHONPATH entries the server lacks, ...).
`TFDPTEXT_TEST_NO_ZYGOTE=1` sends every command to `subprocess.run`, to
check that a failure is not the fork's.

Several commands may run at once (`Background`: the workers of a
cluster, a program killed by the test): the server answers each request
with the child's pid when it starts and with its exit status when it ends.

The server never runs a TensorFlow op: it only imports (and computes, in
NumPy, the random-words checks' collision laws, a pure function's cache),
so it holds no eager context and no thread pool for the children to
inherit in use.
"""

import atexit
import json
import os
import subprocess
import sys
import tempfile
import queue
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Environment variables read when TensorFlow, Keras or Python start: a
# command whose value differs from the server's runs as a subprocess.
# (CUDA_VISIBLE_DEVICES is read when TensorFlow first lists its devices,
# which the server never does.)
_IMPORT_TIME = ("KERAS_", "TF_CPP", "TF_ENABLE", "TF_XLA", "TF_FORCE",
                "XLA", "JAX", "LD_", "OMP_", "MKL_", "OPENBLAS", "PYTHON",
                "HF_", "TFDPTEXT_TEST_")
_PRELOAD = ("tensorflow", "keras", "keras_hub", "tensorflow_text", "numpy",
            "tfdptext.cli.program")
_LOCK = threading.Lock()
_SERVER = None


def _import_time_environment(env):
    return {k: v for k, v in env.items()
            if k.startswith(_IMPORT_TIME) and k != "PYTHONPATH"}


def _python_path(env):
    return [os.path.abspath(p) for p in
            env.get("PYTHONPATH", "").split(os.pathsep) if p]


def _server_environment():
    env = dict(os.environ)
    paths = _python_path(env)
    env["PYTHONPATH"] = os.pathsep.join(
        paths + ([] if ROOT in paths else [ROOT]))
    return env


def _servable(argv, env, server_env):
    if os.environ.get("TFDPTEXT_TEST_NO_ZYGOTE") == "1":
        return False
    argv = list(argv)
    if len(argv) < 2 or argv[0] != sys.executable or not all(
            isinstance(a, str) for a in argv):
        return False
    if argv[1].startswith("-") and argv[1] not in ("-m", "-c"):
        return False
    if argv[1] in ("-m", "-c") and len(argv) < 3:
        return False
    return (_import_time_environment(env) == _import_time_environment(
        server_env) and set(_python_path(env)) <= set(
            _python_path(server_env)))


class _Server:
    """The process that imported TensorFlow and forks the children."""

    def __init__(self, env):
        self.env = env
        # Its own start-up noise goes to a file, not into the suite's
        # output (shown only if it fails to start).
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-c",
             f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})"
             "; import zygote; zygote.serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=env, cwd=ROOT, text=True)
        ready = self.process.stdout.readline()
        if ready.strip() != "ready":
            self.process.wait()
            self.log.seek(0)
            raise RuntimeError(
                "tests/zygote.py: the server did not start:\n"
                + self.log.read().decode("utf-8", "replace")[-3000:])
        self.lock = threading.Lock()
        self.pending = {}  # request id: the queue of its answers
        self.count = 0
        self.dead = False
        threading.Thread(target=self._read_answers, daemon=True).start()

    def request(self, message, started=None):
        """Sends `message`, calls `started(pid)` when the server answers
        with the child's pid, returns the answer sent when it ended."""
        answers = queue.Queue()
        with self.lock:
            if self.dead:
                raise RuntimeError("tests/zygote.py: the server died")
            self.count += 1
            key = self.count
            self.pending[key] = answers
            try:
                self.process.stdin.write(
                    json.dumps({**message, "id": key}) + "\n")
                self.process.stdin.flush()
            except OSError:
                self.pending.pop(key)
                raise RuntimeError("tests/zygote.py: the server died")
        try:
            for _ in range(2):
                answer = answers.get()
                if answer is None:
                    raise RuntimeError("tests/zygote.py: the server died")
                if "pid" in answer and started is not None:
                    started(answer["pid"])
            return answer
        finally:
            with self.lock:
                self.pending.pop(key, None)

    def _read_answers(self):
        """The reader thread: hands each answer to its request (each
        request gets two: the pid when its child started, the status when
        it ended); None to every waiting request when the server dies."""
        for line in self.process.stdout:
            answer = json.loads(line)
            with self.lock:
                answers = self.pending.get(answer["id"])
            if answers is not None:
                answers.put(answer)
        with self.lock:
            self.dead = True
            for answers in self.pending.values():
                answers.put(None)

    def close(self):
        try:
            self.process.stdin.close()
        except OSError:
            pass
        # Reaped, so that its children's CPU time counts in the suite's.
        self.process.wait()
        self.log.close()


def _server():
    global _SERVER
    if _SERVER is None or _SERVER.dead or _SERVER.process.poll() is not None:
        _SERVER = _Server(_server_environment())
        atexit.register(_SERVER.close)
    return _SERVER


def _server_env():
    """The environment the server runs (or would start) with."""
    if _SERVER is not None and _SERVER.process.poll() is None:
        return _SERVER.env
    return _server_environment()


def run(argv, *, cwd=None, env=None, input=None, timeout=None,
        capture_output=False, text=False, check=False, stdout=None,
        stderr=None, encoding=None, errors=None):
    """`subprocess.run(argv, ...)` for the keywords the tests use; commands
    of this Python run forked from the server (see the module docstring)."""
    return _run(argv, None, cwd=cwd, env=env, input=input, timeout=timeout,
                capture_output=capture_output, text=text, check=check,
                stdout=stdout, stderr=stderr, encoding=encoding,
                errors=errors)


def _run(argv, started, *, cwd, env, input, timeout, capture_output, text,
         check, stdout, stderr, encoding, errors):
    """`run`, calling `started(pid)` (if given) once the child runs."""
    env = dict(os.environ if env is None else env)
    redirected = stdout not in (None, subprocess.PIPE) or stderr not in (
        None, subprocess.PIPE, subprocess.STDOUT)
    if redirected or not _servable(argv, env, _server_env()):
        if started is not None:
            return _popen_run(argv, started, cwd=cwd, env=env, input=input,
                              timeout=timeout, capture_output=capture_output,
                              text=text, check=check, stdout=stdout,
                              stderr=stderr, encoding=encoding, errors=errors)
        return subprocess.run(
            argv, cwd=cwd, env=env, input=input, timeout=timeout,
            capture_output=capture_output, text=text, check=check,
            stdout=stdout, stderr=stderr, encoding=encoding, errors=errors)
    text = text or encoding is not None or errors is not None
    with tempfile.TemporaryDirectory(prefix="zygote-") as scratch:
        paths = {name: os.path.join(scratch, name)
                 for name in ("stdin", "stdout", "stderr")}
        data = input if input is not None else b""
        if isinstance(data, str):
            data = data.encode(encoding or "utf-8", errors or "strict")
        for name in paths:
            with open(paths[name], "wb") as f:
                f.write(data if name == "stdin" else b"")
        with _LOCK:
            server = _server()
        answer = server.request({
            "argv": list(argv[1:]), "cwd": os.path.abspath(
                os.fspath(cwd) if cwd is not None else os.getcwd()),
            "env": env, "timeout": timeout,
            "merge_stderr": stderr == subprocess.STDOUT, **paths}, started)
        outputs = []
        for name in ("stdout", "stderr"):
            with open(paths[name], "rb") as f:
                outputs.append(f.read())
    if text:  # as subprocess.run's universal newlines
        outputs = [o.decode(encoding or "utf-8", errors or "strict")
                   .replace("\r\n", "\n").replace("\r", "\n")
                   for o in outputs]
    out, err = outputs
    if stderr == subprocess.STDOUT:
        err = None
    if answer.get("timed_out"):
        raise subprocess.TimeoutExpired(argv, timeout, output=out,
                                        stderr=err)
    captured = capture_output or stdout == subprocess.PIPE
    if not captured:
        _echo(sys.stdout, out)
        out = None
    if not (capture_output or stderr == subprocess.PIPE):
        if err is not None:
            _echo(sys.stderr, err)
        err = None
    result = subprocess.CompletedProcess(argv, answer["returncode"], out, err)
    # The child's own CPU time (its children not counted), for the
    # suite's budget (tests/test_docs.py reports it per command).
    result.cpu_seconds = answer["cpu_seconds"]
    if check:
        result.check_returncode()
    return result


def _popen_run(argv, started, *, cwd, env, input, timeout, capture_output,
               text, check, stdout, stderr, encoding, errors):
    """subprocess.run's own steps (Popen, communicate, kill on timeout),
    calling `started(pid)` once the process runs: for a Background
    command that is not forked."""
    if capture_output:
        if stdout is not None or stderr is not None:
            raise ValueError("stdout and stderr arguments may not be used "
                             "with capture_output.")
        stdout = stderr = subprocess.PIPE
    with subprocess.Popen(
            argv, cwd=cwd, env=env, text=text, encoding=encoding,
            errors=errors, stdout=stdout, stderr=stderr,
            stdin=None if input is None else subprocess.PIPE) as process:
        started(process.pid)
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as expired:
            process.kill()
            expired.output, expired.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
    result = subprocess.CompletedProcess(argv, process.returncode, out, err)
    if check:
        result.check_returncode()
    return result


class Background:
    """`run(argv, **kwargs)` in a thread, while the caller goes on (e.g.
    to kill the child, or to start the other workers of a cluster): the
    server runs several children at once. `pid` is the child's process id
    once it runs (None before; the leader of its own process group when
    forked); `result` joins it."""

    def __init__(self, argv, **kwargs):
        self._done = {}
        self.pid = None
        self._started = threading.Event()

        def started(pid):
            self.pid = pid
            self._started.set()

        keywords = dict(cwd=None, env=None, input=None, timeout=None,
                        capture_output=False, text=False, check=False,
                        stdout=None, stderr=None, encoding=None, errors=None)
        unknown = set(kwargs) - set(keywords)
        if unknown:
            raise TypeError(f"zygote.Background: unexpected {sorted(unknown)}")
        keywords.update(kwargs)

        def target():
            try:
                self._done["result"] = _run(argv, started, **keywords)
            except BaseException as err:  # re-raised by `result`
                self._done["error"] = err
            finally:
                self._started.set()

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def running(self):
        return self._thread.is_alive()

    def wait_started(self, timeout=None):
        """The child's pid once it runs (None if it never started: `result`
        then raises why)."""
        self._started.wait(timeout)
        return self.pid

    def result(self, timeout=None):
        """The CompletedProcess, or the exception `run` raised;
        subprocess.TimeoutExpired if it has not finished in `timeout` s."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired("zygote.Background", timeout)
        if "error" in self._done:
            raise self._done["error"]
        return self._done["result"]


def _echo(stream, data):
    if data:
        stream.write(data if isinstance(data, str) else
                     data.decode("utf-8", "replace"))


# --- the server -------------------------------------------------------------

def serve():
    """Imports the stack, then forks a child per request read from stdin
    (several may run at once), answering each request twice: with the
    child's pid when it starts, with its exit status when it ends.

    One thread only: the children are forked from this loop, which waits
    on stdin and on each child's pidfd with select, and kills a child's
    process group when its timeout passes. At the end of stdin (the test
    process exited) the children still running are killed."""
    import importlib

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the imports print must not reach the answers
    for name in _PRELOAD:
        importlib.import_module(name)
    for name in sorted(os.listdir(os.path.join(ROOT, "tfdptext", "cli"))):
        if name.endswith(".py") and name != "__init__.py":
            importlib.import_module(f"tfdptext.cli.{name[:-3]}")
    # The random-words checks' collision laws: pure NumPy, the same in
    # every process (about 0.3 CPU-s each), computed once here for every
    # export and evaluation the children run.
    from tfdptext.privacy import word_statistics

    word_statistics.block_collision_law(word_statistics.BLOCK)
    word_statistics.block_collision_law(word_statistics.BLOCK - 1)
    sys.path[:] = [p for p in sys.path
                   if p not in ("", os.path.dirname(__file__))]
    sys.path.insert(0, "")  # each child sets its own sys.path[0]
    print("ready", file=answers, flush=True)
    _serve_loop(answers)


def _serve_loop(answers):
    import select
    import signal
    import time

    def answer(message):
        try:
            answers.write(json.dumps(message) + "\n")
            answers.flush()
        except OSError:  # the test process is gone: stdin ends next
            pass

    children = {}  # pidfd: {"id", "pid", "deadline", "timed_out"}
    pending = b""
    reading = True
    while reading or children:
        now = time.monotonic()
        deadlines = [c["deadline"] for c in children.values()
                     if c["deadline"] is not None and not c["timed_out"]]
        wait = max(0.0, min(deadlines) - now) if deadlines else None
        ready, _, _ = select.select(
            ([0] if reading else []) + list(children), [], [], wait)
        for fd, child in list(children.items()):
            if fd in ready:
                _, status, usage = os.wait4(child["pid"], 0)
                os.close(fd)
                del children[fd]
                answer({"id": child["id"],
                        "returncode": os.waitstatus_to_exitcode(status),
                        "timed_out": child["timed_out"],
                        "cpu_seconds": usage.ru_utime + usage.ru_stime})
            elif (child["deadline"] is not None and not child["timed_out"]
                  and time.monotonic() >= child["deadline"]):
                child["timed_out"] = True
                _kill_group(child["pid"], signal.SIGKILL)
        if reading and 0 in ready:
            data = os.read(0, 1 << 16)
            if not data:
                reading = False
                for child in children.values():
                    _kill_group(child["pid"], signal.SIGKILL)
                continue
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                message = json.loads(line)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    # Not the server's descriptors: answers, the other
                    # children's pidfds.
                    for fd in [answers.fileno(), *children]:
                        os.close(fd)
                    _child(message)  # never returns
                try:  # as the child does: no kill can miss its group
                    os.setpgid(pid, pid)
                except OSError:
                    pass
                timeout = message["timeout"]
                children[os.pidfd_open(pid)] = {
                    "id": message["id"], "pid": pid, "timed_out": False,
                    "deadline": None if timeout is None
                    else time.monotonic() + timeout}
                answer({"id": message["id"], "pid": pid})


def _kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _child(message):
    code = 1
    try:
        os.setpgid(0, 0)
        os.chdir(message["cwd"])
        os.environ.clear()
        os.environ.update(message["env"])
        tempfile.tempdir = None  # read $TMPDIR again, as a new process
        _redirect(message)
        code = _execute(message["argv"])
    except BaseException:  # the child must never return into serve()
        import traceback

        traceback.print_exc()
    finally:
        from tfdptext.cli import children

        children.exit_as_interpreter(code)


def _redirect(message):
    stdin = os.open(message["stdin"], os.O_RDONLY)
    os.dup2(stdin, 0)
    os.close(stdin)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        target = message["stdout"] if (
            name == "stderr" and message["merge_stderr"]) else message[name]
        out = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(out, fd)
        os.close(out)
    # sys.stdin/stdout/stderr keep their objects: they write to the
    # descriptors, which now name the child's files.


def _execute(argv):
    """Runs `python <argv>` in this process as the interpreter would;
    returns the exit status."""
    import runpy

    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0:1] = [os.getcwd()]
        # A fresh interpreter has not imported the module it runs as
        # __main__ (runpy warns when it has been).
        sys.modules.pop(argv[1], None)
        run = lambda: runpy.run_module(argv[1], run_name="__main__",
                                       alter_sys=True)
    elif argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        sys.path[0:1] = [""]
        code = compile(argv[1], "<string>", "exec")
        run = lambda: exec(code, {"__name__": "__main__",
                                  "__builtins__": __builtins__})
    else:
        script = os.path.abspath(argv[0])
        sys.argv = list(argv)
        sys.path[0:1] = [os.path.dirname(script)]
        run = lambda: runpy.run_path(script, run_name="__main__")
    from tfdptext.cli import children

    return children.exit_status_of(run)
