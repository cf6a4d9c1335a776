"""Training under tf.distribute: a mirrored run on two logical CPUs, noise
independent per replica and per example, and multi-worker set-up errors.

Logical devices must be configured before TensorFlow initialises, so the
mirrored run happens in a subprocess (a tiny BERT, 160 synthetic texts,
one epoch: about 30 s on 2 CPU cores).
"""

import json
import os
import re
import subprocess
import sys

import pytest

from tfdptext.errors import TfdptextError
import still_preset as still_preset_lib
import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Run in a fresh interpreter: argv = preset directory, run directory.
MIRRORED_RUN = r'''
import json
import os
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras
import numpy as np
from tensorflow.python.eager import context

from tfdptext import data
from tfdptext import models
from tfdptext import training
from tfdptext.models import split_spec
from tfdptext.training import devices

RANDOM_OPS = ("RandomUniform", "RandomStandardNormal", "RandomUniformInt",
              "RandomGamma", "RandomPoisson", "TruncatedNormal")


def random_op_seeds(graph_def):
    """(op type, seed, seed2) of every random op, functions included."""
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes.extend(function.node_def)
    return [(n.op, n.attr["seed"].i, n.attr["seed2"].i) for n in nodes
            if n.op in RANDOM_OPS]


def traced_functions(fn, seen):
    """The tf.functions inside Keras' train_function (a Python closure)."""
    if id(fn) in seen:
        return []
    seen.add(id(fn))
    if hasattr(fn, "_list_all_concrete_functions"):
        return [fn]
    found = []
    inner = [c.cell_contents for c in getattr(fn, "__closure__", None) or ()]
    inner.append(getattr(fn, "__wrapped__", None))
    for value in inner:
        if callable(value):
            found += traced_functions(value, seen)
    return found


class TrainGraph(keras.callbacks.Callback):
    """The random ops of fit's traced training step."""

    def on_train_end(self, logs=None):
        functions = traced_functions(self.model.train_function, set())
        self.seeds = [s for f in functions
                      for c in f._list_all_concrete_functions()
                      for s in random_op_seeds(c.graph.as_graph_def())]


preset, out = sys.argv[1], sys.argv[2]
config = training.TrainConfig(
    mode="robust", epsilon=2.0, preset=preset, max_length=16, batch_size=32,
    epochs=1, learning_rate=3e-3, distribute="mirrored")
graph = TrainGraph()
metrics = training.train(config, out, dataset=data.load_synthetic(160),
                         verbose=0, extra_callbacks=[graph])
result = {"metrics": {k: metrics[k] for k in (
    "replicas", "distribute", "test_accuracy", "dev_accuracy",
    "test_macro_f1", "dev_macro_f1")},
    "loss": metrics["history"]["loss"],
    "global_seed_after": context.global_seed(),
    "train_random_ops": graph.seeds}

strategy = devices.make_strategy("mirrored")
with strategy.scope():
    user = keras.models.load_model(os.path.join(out, "user_side.keras"))
features = models.load_tokenizer(preset, 16)(["good service"] * 4)
release = split_spec.get(split_spec.SEQUENCE).release


@tf.function
def released(features):
    return strategy.run(lambda f: user(f, training=False)[release],
                        args=(features,))


per_replica = [t.numpy() for t in
               strategy.experimental_local_results(released(features))]
result["releases"] = [r.tolist() for r in per_replica]
result["release_random_ops"] = random_op_seeds(
    released.get_concrete_function(features).graph.as_graph_def())
print("RESULT " + json.dumps(result))
'''


def _cpu_env(**extra):
    """The environment of a training subprocess: TensorFlow on the CPU,
    quiet, plus `extra`."""
    return {**os.environ, "KERAS_BACKEND": "tensorflow",
            "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", **extra}


@pytest.fixture(scope="module")
def mirrored(tiny_preset, tmp_path_factory):
    """The subprocess's result: metrics, per-replica releases, random ops."""
    base = tmp_path_factory.mktemp("mirrored")
    script = base / "mirrored_run.py"
    script.write_text(MIRRORED_RUN)
    env = _cpu_env()
    env.pop("TF_CONFIG", None)
    proc = zygote.run(
        [sys.executable, str(script), tiny_preset, str(base / "run")],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    [line] = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    return {"run": base / "run", **json.loads(line[len("RESULT "):])}


def test_mirrored_run_on_two_replicas_finishes(mirrored):
    import numpy as np

    metrics = mirrored["metrics"]
    assert metrics["replicas"] == 2 and metrics["distribute"] == "mirrored"
    for key in ("test_accuracy", "dev_accuracy", "test_macro_f1",
                "dev_macro_f1"):
        assert 0.0 <= metrics[key] <= 1.0, key
    assert np.all(np.isfinite(mirrored["loss"]))
    on_disk = json.loads((mirrored["run"] / "metrics.json").read_text())
    assert on_disk["replicas"] == 2
    assert not (mirrored["run"] / "backup").exists()  # finished


def test_no_seed_reaches_the_noise_ops_under_the_strategy(mirrored):
    assert mirrored["global_seed_after"] is None
    for key in ("train_random_ops", "release_random_ops"):
        ops = mirrored[key]
        assert ops, key  # the Laplace noise is in the graph
        seeded = [op for op in ops if op[1] or op[2]]
        assert not seeded, (key, seeded)


def test_noise_differs_between_replicas_and_examples(mirrored):
    import numpy as np

    first, second = (np.array(r) for r in mirrored["releases"])
    assert first.shape == second.shape == (4, 16)
    # Identical inputs on both replicas: Laplace noise is continuous, so
    # equal coordinates would mean shared noise.
    assert np.all(first != second)
    for replica in (first, second):  # four identical texts per replica
        for i in range(4):
            for j in range(i + 1, 4):
                assert np.all(replica[i] != replica[j]), (i, j)


def test_multi_worker_refused_without_a_usable_tf_config(monkeypatch,
                                                         tmp_path):
    from tfdptext import data
    from tfdptext import training
    from tfdptext.training import devices

    config = training.TrainConfig(mode="none", distribute="multi_worker",
                                  batch_size=8, epochs=1)
    corpus = data.load_synthetic(40)
    out = tmp_path / "run"
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(devices.DistributeError,
                       match="TF_CONFIG, which is not set") as err:
        training.train(config, str(out), dataset=corpus, verbose=0)
    assert isinstance(err.value, TfdptextError)
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1"]')
    with pytest.raises(devices.DistributeError, match="not valid JSON"):
        training.train(config, str(out), dataset=corpus, verbose=0)
    monkeypatch.setenv("TF_CONFIG", '["worker"]')
    with pytest.raises(devices.DistributeError,
                       match='"cluster" and "task"'):
        training.train(config, str(out), dataset=corpus, verbose=0)
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize("cluster,task,chief,suffix", [
    ({"worker": ["a:1", "b:1"]}, {"type": "worker", "index": 0}, True, ""),
    ({"worker": ["a:1", "b:1"]}, {"type": "worker", "index": 1}, False,
     ".worker-1"),
    ({"chief": ["c:1"], "worker": ["a:1"]}, {"type": "chief", "index": 0},
     True, ""),
    ({"chief": ["c:1"], "worker": ["a:1"]}, {"type": "worker", "index": 0},
     False, ".worker-0"),
])
def test_only_the_chief_writes_the_run_directory(cluster, task, chief,
                                                 suffix):
    from tfdptext.training import devices

    tf_config = {"cluster": cluster, "task": task}
    assert devices.is_chief(tf_config) == chief
    expected = "runs/x/" if chief else "runs/x" + suffix
    assert devices.worker_output_dir("runs/x/", tf_config) == expected


def test_a_worker_trains_on_the_chiefs_draw_of_what_users_send(tmp_path):
    """A non-chief worker copies the chief's labels / training release
    (waiting until the chief writes them) instead of drawing its own: a
    second draw would release each user's text or label twice."""
    import threading

    from tfdptext import rundir
    from tfdptext.training import devices
    from tfdptext.training import trainer
    from tfdptext.training.config import TrainConfig

    chief, worker = tmp_path / "run", tmp_path / "run.worker-1"
    chief.mkdir()
    names = [rundir.RANDOMIZED_LABELS, rundir.TRAINING_RELEASE]
    run = rundir.RunDir(str(chief))

    def write_later():
        for name in names:
            run.write_draw(name, lambda path, name=name: open(
                path, "wb").write(name.encode() * 3))

    timer = threading.Timer(0.3, write_later)
    timer.start()
    devices.await_chief_files(str(chief), str(worker), names,
                              timeout_s=30, poll_s=0.05)
    timer.join()
    for name in names:
        assert (worker / name).read_bytes() == name.encode() * 3
    # The worker's scratch run checks its copies against the chief's
    # record: the chief's run id and digests.
    scratch = rundir.RunDir(str(worker))
    assert scratch.run_record() == run.run_record()
    # A resumed worker keeps a copy that has the chief's digest, and
    # refuses one that does not, naming it.
    devices.await_chief_files(str(chief), str(worker), names, timeout_s=1)
    (worker / names[0]).write_bytes(b"changed")
    with pytest.raises(TfdptextError, match=re.escape(
            str(worker / names[0])) + " has SHA-256 .* recorded when it "
            "was drawn"):
        devices.await_chief_files(str(chief), str(worker), names,
                                  timeout_s=1)
    with pytest.raises(TimeoutError, match="never draws its own"):
        devices.await_chief_files(str(chief), str(tmp_path / "w2"),
                                  ["missing.json"], timeout_s=0.2,
                                  poll_s=0.05)
    # What the trainer waits for: each draw of users' data the run makes.
    assert trainer._user_draws(TrainConfig(
        mode="text_to_text", label_epsilon=1.0, training_release="once")) \
        == names
    assert trainer._user_draws(TrainConfig(
        mode="text_to_text", training_release="per_epoch")) == []
    assert trainer._user_draws(TrainConfig(mode="none", label_epsilon=2.0)) \
        == [rundir.RANDOMIZED_LABELS]


# The multi-worker commands of docs/guides/training.md, run as two worker
# processes on localhost, against the same command on a one-worker cluster.
GUIDE = os.path.join(ROOT, "docs", "guides", "training.md")
# Appended to the guide's flags (later flags win): the tiny encoder without
# dropout, 3 short epochs, and what users send drawn once for the cluster
# (texts released once by text_to_text, labels by --label_epsilon): the
# chief draws both, the other worker copies them. The noise is weak (eta
# 1000; labels flip with probability 2e-9 at label_epsilon 20, so fit's dev
# labels are the clean ones) and the one-worker cluster trains on the same
# draws: the comparison is about the training, not the noise (noise under a
# strategy is tested above).
MULTI_WORKER_FAST = ["--mode=text_to_text", "--eta=1000", "--label_epsilon=20",
                     "--training_release=once", "--dataset=synthetic",
                     "--max_length=16", "--epochs=3", "--batch_size=16",
                     "--learning_rate=3e-3", "--max_train_examples=320",
                     "--max_dev_examples=64"]


def _guide_workers():
    """The guide's TF_CONFIG commands: (TF_CONFIG dict, argv) each."""
    import shlex

    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    [block] = [b.split("```")[0] for b in text.split("```sh\n")[1:]
               if "TF_CONFIG=" in b]
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line)
        if words and words[0].startswith("TF_CONFIG="):
            assert words[-1] == "&", line  # both run at once
            found.append((json.loads(words[0].split("=", 1)[1]),
                          words[1:-1]))
    return found


def _free_ports(count):
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="module")
def still_preset(tmp_path_factory):
    """The tiny encoder without dropout (runs differ only by the order of
    float operations), its weights drawn from a fixed seed: an unseeded
    draw made how well the tiny model learns vary from one suite run to
    the next (test accuracy 0.79 to 0.95 on the same data)."""
    return still_preset_lib.save(
        str(tmp_path_factory.mktemp("still") / "tiny"), 20261126)


class _Forked:
    """A worker forked by zygote in the background (every worker of a
    cluster runs at once this way), with Popen's `communicate`,
    `returncode` and `kill` for `_finish`."""

    def __init__(self, argv, cwd, env):
        self.returncode = None
        self.job = zygote.Background(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=900)

    def communicate(self, timeout=None):
        result = self.job.result(timeout)
        self.returncode = result.returncode
        return result.stdout, None

    def kill(self):
        import signal

        if self.job.pid is not None and self.job.running():
            try:
                os.killpg(self.job.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _start_workers(commands, hosts, output_dir, preset, cwd):
    """Each command with its TF_CONFIG pointing at `hosts`, all forked by
    zygote at once."""
    env = _cpu_env()
    processes = []
    for tf_config, argv in commands:
        tf_config = {"cluster": {"worker": hosts},
                     "task": tf_config["task"]}
        assert argv[0].endswith("tfdptext-train")
        # The privacy parameter goes with the guide's mode (none takes
        # none); the output directory is the test's.
        flags = [a for a in argv[1:] if not a.startswith(
            ("--output_dir", "--epsilon", "--eta"))]
        processes.append(_Forked(
            [sys.executable, "-m", "tfdptext.cli.train", *flags,
             *MULTI_WORKER_FAST, f"--preset={preset}",
             f"--output_dir={output_dir}"], cwd,
            {**env, "TF_CONFIG": json.dumps(tf_config), "PYTHONPATH": ROOT}))
    return processes


def _finish(processes):
    outputs = []
    for process in processes:
        try:
            out, _ = process.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            for p in processes:
                p.kill()
            raise
        outputs.append(out)
    for process, out in zip(processes, outputs):
        assert process.returncode == 0, out[-4000:]
    return outputs


def test_two_worker_processes_train_one_run_as_one_worker(still_preset,
                                                          tmp_path):
    """The guide's two commands on two worker processes train the run that
    the same command trains on a one-worker cluster. What users send (the
    labels, the texts released once) is drawn once, by the chief; the other
    worker copies it and never draws its own (it would release every text
    and label a second time)."""
    from tfdptext import rundir

    commands = _guide_workers()
    assert [c["task"] for c, _ in commands] == [
        {"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert all("--distribute=multi_worker" in argv for _, argv in commands)
    assert commands[0][1] == commands[1][1]  # the same command
    ports = _free_ports(3)
    # The two-worker cluster, then the one-worker one.
    chief, other = _finish(_start_workers(
        commands, [f"localhost:{p}" for p in ports[:2]], "two", still_preset,
        tmp_path))
    drawing = "Releasing the"  # user_release's message when it draws
    assert drawing in chief and drawing not in other, other[-2000:]
    # One run directory: the chief's; the other worker's scratch is gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two"]
    two, one = tmp_path / "two", tmp_path / "one"
    draws = [rundir.RANDOMIZED_LABELS, rundir.TRAINING_RELEASE]
    assert set(draws) <= set(os.listdir(two))
    # The one-worker cluster on the same draws: its directory as a start of
    # the same command that failed before its first epoch leaves it.
    one.mkdir()
    for name in [rundir.CONFIG, rundir.RUN_RECORD, *draws]:
        (one / name).write_bytes((two / name).read_bytes())
    [alone] = _finish(_start_workers(commands[:1], [f"localhost:{ports[2]}"],
                                     "one", still_preset, tmp_path))
    assert drawing not in alone, alone[-2000:]  # read back, not redrawn
    for name in draws:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "two"]
    two_metrics = json.loads((two / "metrics.json").read_text())
    one_metrics = json.loads((one / "metrics.json").read_text())
    assert two_metrics["replicas"] == 2 and one_metrics["replicas"] == 1
    assert two_metrics["distribute"] == "multi_worker"
    assert two_metrics["training_release"]["mode"] == "once"
    assert abs(two_metrics["test_accuracy"]
               - one_metrics["test_accuracy"]) <= 0.05
    # The model learned (the majority class is about 0.55).
    assert one_metrics["test_accuracy"] >= 0.8
    for loss_two, loss_one in zip(two_metrics["history"]["loss"],
                                  one_metrics["history"]["loss"]):
        assert abs(loss_two - loss_one) <= 0.1 * loss_one
    # fit's evaluation reads the endless dev batches one pass per epoch:
    # the best epoch's val_accuracy is the dev accuracy measured after
    # fit on the whole dev split with the best weights.
    for metrics in (one_metrics, two_metrics):
        history = metrics["history"]
        best = min(range(len(history["val_loss"])),
                   key=history["val_loss"].__getitem__)
        assert history["val_accuracy"][best] == metrics["dev_accuracy"]
