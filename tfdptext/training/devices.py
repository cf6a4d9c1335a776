"""Where a run trains: the tf.distribute strategy and the float policy.

`make_strategy` turns TrainConfig.distribute into a strategy: "default"
(one device), "mirrored" (every GPU of this machine, or every logical CPU
when it has none) or "multi_worker" (the cluster described by TF_CONFIG).
`precision_policy` sets Keras' global float policy for the length of a run
and puts the previous one back afterwards, also when the run raises.

Privacy noise stays independent across replicas: the privatization layers
use unseeded random ops, and a replicated step traces one op per replica,
each seeded by TensorFlow from the OS when no global seed is set (training
sets its seed only while the models are built: tfdptext.seeding).
"""

import contextlib
import json
import os
import shutil
import time

import keras
import tensorflow as tf

from tfdptext.errors import TfdptextError
from tfdptext.training.config import STRATEGIES

CPU_BATCH_SIZE = 32
GPU_BATCH_SIZE = 128
# The float policy of a run on a GPU (None: keep float32).
GPU_POLICY = "mixed_float16"
TF_CONFIG = "TF_CONFIG"


class DistributeError(TfdptextError):
    """A distribution strategy cannot be set up (e.g. TF_CONFIG is missing
    or malformed); the message says what to set."""


def gpu_available():
    """Whether TensorFlow sees a GPU."""
    return bool(tf.config.list_physical_devices("GPU"))


def default_batch_size(gpu):
    """The global batch size when the config leaves it unset."""
    return GPU_BATCH_SIZE if gpu else CPU_BATCH_SIZE


def policy_for(gpu):
    """The Keras float policy a run uses: mixed float16 on a GPU, else None
    (the global policy is left alone)."""
    return GPU_POLICY if gpu else None


@contextlib.contextmanager
def precision_policy(name):
    """Sets Keras' global dtype policy to `name` (None: unchanged) inside
    the block; the previous policy is restored on exit, also on an error.

    Example:
    >>> with precision_policy("mixed_float16"):
    ...     model = build()  # layers compute in float16
    """
    previous = keras.mixed_precision.global_policy()
    if name is not None:
        keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def read_tf_config(environ=None):
    """The cluster description in the TF_CONFIG environment variable.

    Raises DistributeError when it is unset, not JSON, or lacks the
    "cluster" and "task" objects MultiWorkerMirroredStrategy reads.
    """
    environ = os.environ if environ is None else environ
    text = environ.get(TF_CONFIG)
    hint = ('set it to the cluster and this worker\'s task, e.g. '
            '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}')
    if not text:
        raise DistributeError(
            f"`distribute=multi_worker` reads the cluster from the "
            f"environment variable {TF_CONFIG}, which is not set; {hint}.")
    try:
        value = json.loads(text)
    except ValueError as err:
        raise DistributeError(
            f"{TF_CONFIG} is not valid JSON ({err}); {hint}.") from None
    if not isinstance(value, dict) or not isinstance(
            value.get("cluster"), dict) or not isinstance(
                value.get("task"), dict):
        raise DistributeError(
            f"{TF_CONFIG} must be a JSON object with \"cluster\" and "
            f"\"task\" objects, received {text[:200]!r}; {hint}.")
    return value


def is_chief(tf_config):
    """Whether this worker of a TF_CONFIG cluster owns the run directory:
    the "chief" task, or worker 0 when the cluster has no chief."""
    task = tf_config.get("task", {})
    kind, index = task.get("type"), int(task.get("index", 0))
    if kind == "chief":
        return True
    return kind == "worker" and index == 0 and \
        "chief" not in tf_config.get("cluster", {})


def worker_output_dir(output_dir, tf_config):
    """The run directory a worker of a multi-worker run writes.

    The chief writes `output_dir`, the run. Every other worker trains the
    same model in lockstep and needs its own files (to resume after a
    kill), so it keeps a scratch run beside it: `<output_dir>.<type>-<i>`.
    """
    if is_chief(tf_config):
        return output_dir
    task = tf_config["task"]
    return f"{output_dir.rstrip(os.sep)}.{task.get('type')}-" \
        f"{int(task.get('index', 0))}"


def await_chief_files(chief_dir, worker_dir, names, timeout_s=1800.0,
                      poll_s=0.5):
    """Copies each of `names` from the chief's run directory into this
    worker's scratch run, waiting until the chief has drawn it, and
    checks every copy against the chief's record.

    What users send is released once (their randomized labels, the
    once-drawn training release): every worker must train on the chief's
    draw, never draw its own (that would release each text, or label, once
    per worker). The chief records each draw's SHA-256 in its run record
    (`rundir.RUN_RECORD`, with its run id) and then writes the file
    atomically, before its first training step. The worker adopts that
    record as its scratch run's, so its reads check its copies against the
    chief's digests and run id; a copy already in the scratch run (a
    resumed worker) is kept only if it has the chief's digest (else a
    TfdptextError names it). TimeoutError names the missing file
    after `timeout_s` seconds.
    """
    from tfdptext import rundir

    if not names:
        return
    chief = rundir.RunDir(chief_dir)
    worker = rundir.RunDir(worker_dir, chief.error)
    deadline = time.monotonic() + timeout_s

    def drawn(name):
        return chief.exists(name) and chief.recorded_draw(name) is not None

    for name in names:
        while not drawn(name):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"The chief wrote no {chief.file(name)} within "
                    f"{timeout_s:.0f} s: a worker trains on the chief's "
                    "release of the users' data and never draws its own. Is "
                    "the chief running, and is its --output_dir on a file "
                    "system this worker reads?")
            time.sleep(poll_s)
    worker.adopt_run_record(chief.run_record())
    for name in names:
        if not worker.exists(name):
            shutil.copyfile(chief.file(name), worker.file(name) + ".partial")
            os.replace(worker.file(name) + ".partial", worker.file(name))
        worker.check_draw(name)


class _MultiWorkerStrategy(tf.distribute.MultiWorkerMirroredStrategy):
    """MultiWorkerMirroredStrategy whose `reduce` accepts what Keras 3's
    `fit` passes it. Without this, multi-worker training never ran.

    Keras 3 (3.15) calls `strategy.reduce` in two ways that
    MultiWorkerMirroredStrategy refuses (MirroredStrategy takes both):
    on a whole input batch, a dict of per-replica tensors, to learn its
    shapes before the first step (`TensorFlowTrainer._maybe_symbolic_
    build`: "Attempt to convert a value ({'token_ids': PerReplica...})
    ... to a Tensor"), and on each scalar metric with `axis=0`
    (`reduce_per_replica`: "Invalid reduction dimension 0 for input with
    0 dimensions"). Here each value of a structure is reduced on its own,
    in the structure's order (the same on every worker), and a scalar is
    reduced across replicas (axis=None), the mean Keras asks for.
    """

    def reduce(self, reduce_op, value, axis):
        parent = super()

        def reduce_one(v):
            local = self.experimental_local_results(v)[0] \
                if isinstance(v, tf.distribute.DistributedValues) else v
            rank = getattr(getattr(local, "shape", None), "rank", None)
            return parent.reduce(reduce_op, v,
                                 None if rank == 0 else axis)
        return tf.nest.map_structure(reduce_one, value)


def is_multi_worker(strategy):
    """Whether `strategy` spans several worker processes."""
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def per_worker_batches(strategy, batches, repeat=False):
    """The distributed dataset of a multi-worker run: every worker reads
    the same global batches and keeps its own consecutive slice of each
    (worker i of n: rows [i ceil(b / n), (i + 1) ceil(b / n)) of a batch
    of b), so that every step trains on exactly the global batch one
    worker would (`tests/test_distribute.py` checks that two workers
    train the same model as one).

    `strategy.experimental_distribute_dataset`, which Keras applies to a
    plain dataset, shards whole global batches between the workers before
    splitting them, so each step mixed halves of two different batches:
    the same examples per epoch, but another model than one worker's.
    One replica per worker (one device each, as on CPUs).

    With `repeat` the batches repeat without end (`fit` is then given
    their count per pass: see `passes_of`). For the unshuffled dev
    batches: Keras' evaluation reads a fresh iterator from the start each
    epoch anyway, and an endless dataset spares the one Keras builds and
    throws away after each pass of a dataset of known length (each
    iterator of a multi-worker dataset traces six functions: about 0.2
    CPU-s). Not for shuffled batches: their order per epoch comes from
    the number of iterators built before it.
    """
    def worker_dataset(context):
        count, index = context.num_input_pipelines, \
            context.input_pipeline_id

        def mine(*batch):
            def rows(x):
                size = -(-tf.shape(x)[0] // count)
                start = tf.minimum(index * size, tf.shape(x)[0])
                return x[start:start + size]
            return tf.nest.map_structure(rows, batch)
        mapped = batches.map(mine)
        return mapped.repeat() if repeat else mapped
    return strategy.distribute_datasets_from_function(worker_dataset)


def passes_of(batches):
    """The number of batches in one pass over `batches` (a tf.data.Dataset
    of known length)."""
    count = int(batches.cardinality())
    if count <= 0:
        raise ValueError(f"`batches` must have a known, positive number of "
                         f"batches, received cardinality {count}.")
    return count


def _mirrored_devices():
    """The devices "mirrored" replicates over: every logical GPU, or every
    logical CPU when there is no GPU (TensorFlow's own default then takes
    only CPU:0)."""
    gpus = tf.config.list_logical_devices("GPU")
    devices = gpus or tf.config.list_logical_devices("CPU")
    return [d.name for d in devices]


def make_strategy(name):
    """The tf.distribute strategy TrainConfig.distribute names.

    Raises DistributeError for "multi_worker" without a usable TF_CONFIG
    (checked before TensorFlow builds the cluster).
    """
    if name not in STRATEGIES:
        raise DistributeError(f"`distribute` must be one of {STRATEGIES}, "
                              f"received {name!r}.")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=_mirrored_devices())
    if name == "multi_worker":
        read_tf_config()
        return _MultiWorkerStrategy()
    return tf.distribute.get_strategy()
