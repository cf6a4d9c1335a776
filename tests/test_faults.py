"""Faults never leave a silent wrong state.

Each program (tfdptext-train, -export, -eval, -sweep) is run as a
subprocess on a tiny run, killed with SIGKILL at a point where it has
started real work, and re-run with the same command: the re-run resumes
without losing finished work, or gives a clean result with nothing partial
left. Truncated or corrupt run and export files give clear errors naming
the file. Tiny runs only (a 1-layer BERT, a few hundred synthetic
examples, max_length 16), so the file runs in about two minutes on 2 CPU
cores.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tfdptext import runfiles
from tfdptext.errors import TfdptextError
from tfdptext.evaluation.sweep import LOCK
import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train", "tfdptext-train")
EXPORT = os.path.join(ROOT, "export", "tfdptext-export")
PREDICT = os.path.join(ROOT, "export", "tfdptext-predict")
EVAL = os.path.join(ROOT, "eval", "tfdptext-eval")
SWEEP = os.path.join(ROOT, "eval", "tfdptext-sweep")
EPOCHS = 3


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def env(base):
    """The children's environment, with a private TMPDIR (to check that a
    killed program leaves nothing in the system's temporary directory)."""
    tmpdir = base / "systmp"
    tmpdir.mkdir()
    return {**os.environ, "KERAS_BACKEND": "tensorflow",
            "TF_CPP_MIN_LOG_LEVEL": "2", "TMPDIR": str(tmpdir),
            "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture(scope="module")
def preset(tiny_preset):
    return tiny_preset


def train_flags(preset, epochs=EPOCHS):
    return ["--mode=robust", "--epsilon=2", f"--preset={preset}",
            "--max_length=16", "--batch_size=16", f"--epochs={epochs}",
            "--max_train_examples=160", "--max_dev_examples=48",
            "--learning_rate=3e-3"]


def _run(program, args, env, timeout=300):
    return zygote.run([sys.executable, program, *args], env=env,
                      capture_output=True, text=True, timeout=timeout)


def _run_and_kill(program, args, env, log, ready, timeout=240):
    """Runs the program (through zygote: forked from its server, which
    imported TensorFlow once), SIGKILLs it as soon as `ready()` is true;
    returns its pid. Its output goes to `log`."""
    job = zygote.Background([sys.executable, program, *args], env=env,
                            capture_output=True, text=True,
                            timeout=timeout + 60)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not job.running():
                _write_log(log, job)
                raise AssertionError(
                    f"{os.path.basename(program)} exited before the kill "
                    f"point:\n{open(log).read()[-3000:]}")
            if job.pid is not None and ready():
                os.kill(job.pid, signal.SIGKILL)
                result = _write_log(log, job)
                assert result is not None and \
                    result.returncode == -signal.SIGKILL, open(log).read()
                return job.pid
            time.sleep(0.02)
        raise AssertionError(f"kill point not reached in {timeout} s")
    finally:
        if job.running():
            if job.pid is not None:
                os.kill(job.pid, signal.SIGKILL)
            _write_log(log, job)


def _write_log(log, job):
    """Writes the finished job's output, or the error of its run, to
    `log`; returns its CompletedProcess (None after an error)."""
    try:
        result = job.result()
    except Exception as err:  # written to the log for the message
        with open(log, "w") as out:
            out.write(repr(err))
        return None
    with open(log, "w") as out:
        out.write(result.stdout + result.stderr)
    return result


def _epochs_backed_up(run_dir):
    try:
        with open(os.path.join(run_dir, "backup",
                               "training_metadata.json")) as f:
            return json.load(f)["epoch"]
    except (OSError, ValueError, KeyError):
        return 0


def _check_ok(result):
    assert result.returncode == 0, result.stdout[-2000:] + \
        result.stderr[-3000:]


def _autograph_file(path):
    return (os.path.basename(path).startswith("__autograph_generated_file")
            and os.path.getsize(path) < 1 << 20)


def _big_temp_files(tmpdir):
    """What a killed program left in TMPDIR besides TensorFlow autograph's
    own few-KB `__autograph_generated_file*.py` and their bytecode in
    `__pycache__` (which any TF program killed with SIGKILL leaves; not the
    export's)."""
    left = []
    for name in os.listdir(tmpdir):
        path = os.path.join(tmpdir, name)
        if name == "__pycache__" and os.path.isdir(path) and all(
                _autograph_file(os.path.join(path, f))
                for f in os.listdir(path)):
            continue
        if not _autograph_file(path):
            left.append(name)
    return sorted(left)


# The programs, killed and re-run.


@pytest.fixture(scope="module")
def trained(base, preset, env):
    """tfdptext-train killed during epoch 2 of 3, re-run, re-run again."""
    run = str(base / "run")
    args = train_flags(preset) + [f"--output_dir={run}"]
    _run_and_kill(TRAIN, args, env, base / "train.log",
                  lambda: _epochs_backed_up(run) >= 1)
    done_before_resume = _epochs_backed_up(run)
    leftovers = sorted(os.listdir(run))
    resumed = _run(TRAIN, args, env)
    _check_ok(resumed)
    metrics_mtime = os.path.getmtime(os.path.join(run, "metrics.json"))
    again = _run(TRAIN, args, env)
    return {"run": run, "done": done_before_resume, "leftovers": leftovers,
            "resumed": resumed, "again": again,
            "metrics_mtime": metrics_mtime}


def test_train_killed_resumes_without_losing_an_epoch(trained):
    run = trained["run"]
    assert 1 <= trained["done"] < EPOCHS
    assert "metrics.json" not in trained["leftovers"]
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    # Only the epochs the kill interrupted were run again.
    assert metrics["epochs_run_this_session"] == EPOCHS - trained["done"]
    assert len(metrics["history"]["loss"]) == EPOCHS - trained["done"]
    assert metrics["epochs"] == EPOCHS
    # Finished: what only resuming needed is gone.
    for name in ("backup", "best.weights.h5", "best.json"):
        assert not os.path.exists(os.path.join(run, name)), name
    for name in ("user_side.keras", "server_side.keras", "split.json",
                 "vocab.txt"):
        assert os.path.isfile(os.path.join(run, name)), name
    assert not glob.glob(os.path.join(run, "*.tmp*")) and \
        not glob.glob(os.path.join(run, ".tmp-*"))


def test_train_finished_rerun_says_so_and_trains_nothing(trained):
    again = trained["again"]
    _check_ok(again)
    assert "already finished" in again.stdout
    assert "Epoch" not in again.stdout
    assert os.path.getmtime(os.path.join(trained["run"], "metrics.json")) \
        == trained["metrics_mtime"]


def test_train_failed_start_leaves_nothing_that_refuses_the_fix(
        preset, tmp_path):
    from tfdptext import data
    from tfdptext import training
    from tfdptext.training import trainer

    corpus = data.load_synthetic(num_examples=100)
    out = tmp_path / "run"
    bad = training.TrainConfig(mode="none", preset=str(tmp_path / "nope"),
                               max_length=16, batch_size=16, epochs=1)
    with pytest.raises(ValueError):
        training.train(bad, str(out), dataset=corpus, verbose=0)
    assert not os.path.exists(out / "config.json")
    # A directory left by an older version's failed start (config.json,
    # no checkpoint) is taken as new by the corrected command.
    out.mkdir(exist_ok=True)
    (out / "config.json").write_text(bad.to_json())
    fixed = training.TrainConfig(mode="none", preset=preset, max_length=16,
                                 batch_size=16, epochs=1).validate()
    assert trainer.check_output_dir(str(out), fixed) == trainer.NEW
    # With progress, a different run is still refused.
    (out / "best.json").write_text('{"val_loss": 1.0}')
    with pytest.raises(training.RunDirectoryError, match="different run"):
        trainer.check_output_dir(str(out), fixed)


@pytest.fixture(scope="module")
def exported(base, trained, env):
    """tfdptext-export killed during the TFLite conversion, then re-run."""
    out = str(base / "exports" / "exp")
    os.makedirs(os.path.dirname(out))
    args = [f"--model_dir={trained['run']}", f"--output_dir={out}"]
    parent = os.path.dirname(out)

    def converting():
        return bool(glob.glob(os.path.join(parent, ".exp.partial-*",
                                           "tflite-convert-*")))

    pid = _run_and_kill(EXPORT, args, env, base / "export.log", converting)
    after_kill = sorted(os.listdir(parent))
    systmp_after_kill = _big_temp_files(env["TMPDIR"])
    rerun = _run(EXPORT, args, env)
    return {"out": out, "pid": pid, "after_kill": after_kill,
            "systmp_after_kill": systmp_after_kill, "rerun": rerun}


def test_export_killed_leaves_only_its_partial_dir_then_clean(exported,
                                                              env):
    out = exported["out"]
    # The kill left the partial directory (with the converter's temporary
    # SavedModel inside it), nothing in the system's temporary directory.
    assert exported["after_kill"] == [f".exp.partial-{exported['pid']}"]
    assert exported["systmp_after_kill"] == []
    _check_ok(exported["rerun"])
    # The re-run removed the stale partial directory and exported.
    assert sorted(os.listdir(os.path.dirname(out))) == ["exp"]
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    for rel, record in manifest["files"].items():
        assert os.path.getsize(os.path.join(out, rel)) == record["bytes"]
    assert not any("tflite-convert" in rel for rel in manifest["files"])
    assert _big_temp_files(env["TMPDIR"]) == []


@pytest.fixture(scope="module")
def evaluated(base, trained, env):
    """tfdptext-eval killed while releasing, re-run, re-run again."""
    out = str(base / "evals" / "ev")
    parent = os.path.dirname(out)
    os.makedirs(parent)
    args = [f"--model_dir={trained['run']}", f"--output_dir={out}",
            "--private_attributes=", "--plots=false"]
    pid = _run_and_kill(
        EVAL, args, env, base / "eval.log",
        lambda: bool(glob.glob(os.path.join(parent, ".ev.partial-*"))))
    after_kill = sorted(os.listdir(parent))
    rerun = _run(EVAL, args, env)
    _check_ok(rerun)
    mtime = os.path.getmtime(os.path.join(out, "eval.json"))
    again = _run(EVAL, args, env)
    return {"out": out, "pid": pid, "after_kill": after_kill,
            "again": again, "mtime": mtime}


def test_eval_killed_leaves_nothing_that_looks_finished(evaluated):
    out = evaluated["out"]
    assert evaluated["after_kill"] == [f".ev.partial-{evaluated['pid']}"]
    assert sorted(os.listdir(os.path.dirname(out))) == ["ev"]
    result = json.load(open(os.path.join(out, "eval.json")))
    assert result["utility"]["n_test"] > 0
    assert os.path.isfile(os.path.join(out, "predictions.npz"))


def test_eval_finished_rerun_says_done_other_options_refused(evaluated):
    again = evaluated["again"]
    _check_ok(again)
    assert "already holds this evaluation" in again.stdout
    assert os.path.getmtime(os.path.join(evaluated["out"], "eval.json")) \
        == evaluated["mtime"]
    from tfdptext.evaluation import evaluate

    stored = json.load(open(os.path.join(evaluated["out"], "eval.json")))
    other = dict(stored["options"], seed=7)
    with pytest.raises(evaluate.EvaluationError,
                       match=r"other settings \(differ: \['seed'\]\)"):
        evaluate.check_output_dir(evaluated["out"], other)
    assert evaluate.check_output_dir(evaluated["out"],
                                     stored["options"]) == stored
    # A directory holding files but no eval.json is never taken.
    junk = os.path.join(os.path.dirname(evaluated["out"]), "junk")
    os.makedirs(junk)
    open(os.path.join(junk, "report.md"), "w").write("old")
    with pytest.raises(evaluate.EvaluationError, match="holds no eval.json"):
        evaluate.check_output_dir(junk, other, overwrite=True)
    shutil.rmtree(junk)


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _process(pid):
    """A live process' pid, command line and open files (from /proc)."""
    with open(f"/proc/{pid}/cmdline") as f:
        cmdline = f.read().split("\0")[:-1]
    files = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            files.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # closed meanwhile
            pass
    return {"pid": pid, "cmdline": cmdline, "files": files}


def test_sweep_killed_resumes(base, preset, trained, env):
    """tfdptext-sweep killed while its cell's evaluation runs (the cell's
    training is a copy of the finished run: the sweep skips it), re-run."""
    flagfile = base / "sweep.flags"
    flagfile.write_text("\n".join(
        f for f in train_flags(preset)
        if not f.startswith("--epsilon")) + "\n")
    sweep_dir = base / "sweep"
    cell = sweep_dir / "epsilon2"
    shutil.copytree(trained["run"], cell)
    args = [f"--train_flagfile={flagfile}", "--grid=epsilon=2",
            f"--output_dir={sweep_dir}",
            "--eval_args=--private_attributes=,--plots=false"]
    partials = str(cell / ".eval.partial-*")
    seen = {}

    def evaluating():
        found = glob.glob(partials)
        if found:  # the evaluation's process, seen before the kill
            pid = int(found[0].rsplit("-", 1)[1])
            seen.update(_process(pid), parent=_process(_ppid(pid)))
        return bool(found)

    sweep_pid = _run_and_kill(SWEEP, args, env, base / "sweep.log",
                              evaluating)
    # The evaluation was forked from the sweep (which the zygote forked
    # with TensorFlow imported): the sweep's command line, no exec of a
    # fresh interpreter; and it did not hold the sweep's lock.
    assert seen["parent"]["pid"] == sweep_pid
    assert seen["cmdline"] == seen["parent"]["cmdline"]
    assert LOCK in " ".join(seen["parent"]["files"])
    assert LOCK not in " ".join(seen["files"])
    # The evaluation died with the sweep: no orphan keeps writing.
    [partial] = glob.glob(partials)
    pid = int(partial.rsplit("-", 1)[1])
    deadline = time.monotonic() + 10
    while runfiles.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not runfiles.pid_alive(pid)
    assert not (cell / "eval").exists()
    rerun = _run(SWEEP, args, env)
    _check_ok(rerun)
    assert "epsilon2: evaluating" in rerun.stdout
    assert "epsilon2: training" not in rerun.stdout
    # The command it ran is printed as a fresh process would run it.
    assert f"  $ {sys.executable} -m tfdptext.cli.evaluate " \
        f"--model_dir={cell} --output_dir={cell / 'eval'} " \
        "--private_attributes= --plots=false\n" in rerun.stdout
    assert not glob.glob(partials)
    assert (cell / "eval" / "eval.json").is_file()
    assert "test_accuracy" in (sweep_dir / "summary.md").read_text()


# How the sweep runs its cells' programs (tfdptext.cli.children): forked
# from the sweep once it imported TensorFlow, starting as a fresh
# interpreter would, with its exit status as a fresh one's.

PROBE_PARENT = """
import json, os
import numpy as np
from absl import flags
from tfdptext.cli import children, sweep
sweep.define_flags()
flags.FLAGS(["tfdptext-sweep", "--train_flagfile=f", "--grid=epsilon=1",
             "--output_dir=sweep_dir"])
print(json.dumps({"pid": os.getpid(), "forks": children.fork_safe(),
                  "numpy": np.random.get_state()[1][:4].tolist(),
                  "cmdline": open("/proc/self/cmdline").read().split(
                      "\\0")[:-1]}), flush=True)
for action, fork in (("3", True), ("kill", True), ("message", True),
                     ("0", False)):
    code = children.run("children_probe", ["--output_dir=cell", action],
                        own_flags=sweep._own_flags(), fork=fork)
    print(json.dumps({"code": code}), flush=True)
"""


def test_cell_programs_start_as_fresh_processes(env):
    """tests/children_probe.py run by tfdptext.cli.children from a program
    that imported TensorFlow and parsed tfdptext-sweep's flags (forked
    from the zygote: as the sweep is in these tests): three forked runs,
    then one fresh interpreter (fork=False)."""
    tests = os.path.dirname(os.path.abspath(__file__))
    result = zygote.run([sys.executable, "-c", PROBE_PARENT], cwd=tests,
                        env=env, capture_output=True, text=True,
                        timeout=120)
    _check_ok(result)
    parent, *lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert parent["forks"]
    probes = lines[0::2]
    assert [line["code"] for line in lines[1::2]] == [3, -signal.SIGKILL, 1,
                                                      0]
    assert "children_probe: failed as asked" in result.stderr
    for probe, action in zip(probes, ("3", "kill", "message", "0")):
        assert probe["ppid"] == parent["pid"]
        assert probe["argv"] == [os.path.join(tests, "children_probe.py"),
                                 "--output_dir=cell", action]
        assert probe["positional"] == [action]
        assert probe["main"] == "__main__"
        # Its own --output_dir, none of the sweep's flags.
        assert probe["output_dir"] == "cell"
        assert not {"grid", "train_flagfile", "eval_args"} & set(
            probe["flags"])
    forked, fresh = probes[:3], probes[3]
    for probe in forked:  # no exec: the parent's command line
        assert probe["cmdline"] == parent["cmdline"]
    assert fresh["cmdline"] == [sys.executable, "-m", "children_probe",
                                "--output_dir=cell", "0"]
    # NumPy's global random state drawn again, as at a fresh import.
    states = [tuple(p["numpy"]) for p in [parent, *forked]]
    assert len(set(states)) == len(states)


# Corrupt, truncated or incomplete files: clear errors naming the file.


def _truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)


def _edit_json(path, change):
    data = json.load(open(path))
    change(data)
    json.dump(data, open(path, "w"))


RUN_FAULTS = {
    "metrics.json": (lambda p: _truncate(p), "not valid JSON"),
    "config.json": (lambda p: open(p, "w").write("{}"),
                    "lacks the key 'm"),
    "split.json": (lambda p: _edit_json(p, lambda d: d.pop("tokenizer")),
                   "lacks the key 'tokenizer'"),
    "user_side.keras": (lambda p: _truncate(p), "truncated"),
    "server_side.keras": (lambda p: open(p, "w").close(), "truncated"),
}


@pytest.mark.parametrize("name", sorted(RUN_FAULTS))
def test_corrupt_run_file_named_by_export_and_eval(trained, tmp_path,
                                                   name):
    from tfdptext.evaluation.release import RunError
    from tfdptext.evaluation.release import TrainedRun
    from tfdptext.export import exporter

    run = str(tmp_path / "run")
    shutil.copytree(trained["run"], run)
    corrupt, message = RUN_FAULTS[name]
    corrupt(os.path.join(run, name))
    with pytest.raises(exporter.ExportError, match=message) as err:
        exporter.export_run(run, str(tmp_path / "exp"))
    assert name in str(err.value)
    with pytest.raises(RunError, match=message) as err:
        TrainedRun(run)
    assert name in str(err.value)
    assert sorted(os.listdir(tmp_path)) == ["run"]  # nothing written
    assert isinstance(err.value, TfdptextError)


def test_corrupt_training_state_named(trained, tmp_path):
    from tfdptext import training
    from tfdptext.training import trainer

    config = training.TrainConfig.from_dict(
        json.load(open(os.path.join(trained["run"], "config.json"))))
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(config.to_json()[:40])
    with pytest.raises(training.RunDirectoryError,
                       match="config.json is not valid JSON"):
        trainer.check_output_dir(str(run), config)
    (run / "config.json").write_text(config.to_json())
    (run / "backup").mkdir()
    (run / "backup" / "training_metadata.json").write_text('{"epo')
    with pytest.raises(training.RunDirectoryError,
                       match="training_metadata.json is not valid JSON"):
        trainer.check_output_dir(str(run), config)
    (run / "backup" / "training_metadata.json").write_text(
        '{"epoch": 1, "weights": "epoch-1.weights.h5"}')
    (run / "backup" / "epoch-1.weights.h5").write_bytes(b"\x89HDF\r\n")
    with pytest.raises(training.RunDirectoryError,
                       match="epoch-1.weights.h5 is unreadable"):
        trainer.check_output_dir(str(run), config)


EXPORT_FAULTS = {
    "empty manifest": ("manifest.json", lambda p: open(p, "w").write("{}"),
                       "manifest.json lacks the key 'split_point'"),
    "truncated manifest": ("manifest.json", _truncate,
                           "manifest.json is not valid JSON"),
    "truncated tflite": ("user/privatizer.tflite", _truncate,
                         "privatizer.tflite is .* bytes, manifest.json says"),
    "no server dir": ("server", shutil.rmtree, "server/run/1: no such "
                      "directory"),
}


@pytest.mark.parametrize("case", sorted(EXPORT_FAULTS))
def test_corrupt_export_named(exported, tmp_path, case):
    from tfdptext.export.local import ExportDirError
    from tfdptext.export.local import ExportedPipeline

    out = str(tmp_path / "exp")
    shutil.copytree(exported["out"], out)
    rel, corrupt, message = EXPORT_FAULTS[case]
    corrupt(os.path.join(out, rel))
    with pytest.raises(ExportDirError, match=message):
        ExportedPipeline(out)


def test_programs_print_usage_errors_and_write_nothing(exported, base,
                                                       tmp_path, env):
    out = str(tmp_path / "exp")
    shutil.copytree(exported["out"], out)
    open(os.path.join(out, "manifest.json"), "w").write("{}")
    result = _run(PREDICT, [f"--export_dir={out}", "hello"], env)
    assert result.returncode != 0
    assert "manifest.json lacks the key 'split_point'" in result.stderr
    assert "Traceback" not in result.stderr
    file = tmp_path / "a_file"
    file.write_text("keep")
    for program, args in (
            (TRAIN, [f"--output_dir={file}"]),
            (EVAL, [f"--model_dir={base / 'run'}", f"--output_dir={file}"]),
            (EXPORT, [f"--model_dir={base / 'run'}",
                      f"--output_dir={file}"])):
        result = _run(program, args, env, timeout=120)
        assert result.returncode != 0
        assert "is a file, not a directory" in result.stderr
        assert "Traceback" not in result.stderr
        assert file.read_text() == "keep"
    assert sorted(os.listdir(tmp_path)) == ["a_file", "exp"]


def test_stale_partials_only_of_dead_processes(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f".x.partial-{dead.pid}").mkdir()
    (tmp_path / f".y.partial-{os.getppid()}").mkdir()  # alive
    (tmp_path / ".z.partial-abc").mkdir()  # not ours
    removed = runfiles.remove_stale_partials(str(tmp_path))
    assert [os.path.basename(p) for p in removed] == [
        f".x.partial-{dead.pid}"]
    assert sorted(os.listdir(tmp_path)) == [
        f".y.partial-{os.getppid()}", ".z.partial-abc"]
