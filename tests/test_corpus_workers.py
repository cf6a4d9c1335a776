"""The corpus job beyond one process: Beam's DirectRunner with two worker
processes (multi_processing) and Beam's DaskRunner on a dask.distributed
cluster of two worker processes, started with the commands of
docs/guides/brr-and-corpus.md.

Every run privatizes the same file with BRR over a 12-word list with
16-bit codes, whose exact output law is computed here by enumerating all
65,536 flip patterns; the outputs of each input word must fit it
(chi-square, p > 1e-4): the law of one process, whatever the runner. The
input alternates two words line by line, so lines moved between positions
would mix the two laws. The workers load the table once each (measured:
the job's counters under the DirectRunner, each Dask worker's own count of
builds), and the per-word table cache of the exponential mechanisms lives
in the worker's one privatizer, across bundles.

The workers use BRR over a word list because it needs neither TensorFlow
nor an encoder: a worker process starts in about a second.
"""

import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip(
    "apache_beam", reason="Apache Beam is not installed: the corpus job "
    "needs the beam extra (pip install -e '.[beam]').")

import substitution_checks as checks  # noqa: E402
from tfdptext.binary import codes as codes_lib  # noqa: E402
from tfdptext.corpus import CorpusConfig  # noqa: E402
from tfdptext.corpus import mechanisms  # noqa: E402
from tfdptext.corpus import pipeline  # noqa: E402
from tfdptext.offline import brr  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(ROOT, "docs", "guides", "brr-and-corpus.md")
WORDS = ["<unk>", "river", "garden", "music", "doctor", "window", "yellow",
         "city", "paper", "summer", "table", "night"]
BITS = 16
EPSILON = 1.5
LINES, REPEAT, BATCH = 600, 8, 16
INPUTS = ("river", "window")


def exact_law(codes, word, epsilon):
    """P(output | word) of BRR with the exact index: every flip pattern
    of the word's code, the nearest code (lowest id among ties)."""
    keep = brr.keep_threshold(epsilon) / 2**32
    patterns = (np.arange(2**BITS)[:, None] >> np.arange(BITS)[::-1]) & 1
    flips = patterns.sum(axis=1)
    weights = (1 - keep) ** flips * keep ** (BITS - flips)
    noisy = codes[word][None] ^ patterns
    distances = (noisy[:, None, :] != codes[None]).sum(axis=2)
    nearest = distances.argmin(axis=1)  # the first minimum: the lowest id
    return np.bincount(nearest, weights=weights, minlength=len(codes))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("workers")
    rng = np.random.default_rng(12)
    bits = rng.integers(0, 2, (len(WORDS), BITS))
    codes_lib.save_codes(str(base / "codes"), WORDS, bits)
    lines = [" ".join([INPUTS[i % 2]] * REPEAT) for i in range(LINES)]
    (base / "in.txt").write_text("\n".join(lines) + "\n")
    config = CorpusConfig(input=str(base / "in.txt"), mechanism="brr",
                          epsilon=EPSILON, codes=str(base / "codes"),
                          batch_size=BATCH).validate()
    return {"base": base, "bits": bits, "config": config}


def check_law(corpus, output_dir):
    """Each line holds REPEAT words drawn from its input word's exact
    law."""
    with open(os.path.join(output_dir, "in.txt")) as f:
        lines = f.read().splitlines()
    assert len(lines) == LINES
    index = {w: i for i, w in enumerate(WORDS)}
    for parity, word in enumerate(INPUTS):
        outputs = [index[w] for line in lines[parity::2]
                   for w in line.split()]
        assert len(outputs) == REPEAT * LINES // 2
        counts = np.bincount(outputs, minlength=len(WORDS))
        law = exact_law(corpus["bits"], index[word], EPSILON)
        assert checks.chi_square_pvalue(counts, law) > 1e-4, (word, counts)


def guide_commands(marker):
    """The commands of the guide's ```sh block that contains `marker`:
    (environment, argv, in the background) per line."""
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    blocks = [b.split("```")[0] for b in text.split("```sh\n")[1:]]
    [block] = [b for b in blocks if marker in b]
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        env = {}
        while "=" in words[0] and not words[0].startswith("-"):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        background = words[-1] == "&"
        found.append((env, words[:-1] if background else words, background))
    return found


def beam_options(argv):
    """The Beam options of a tfdptext-privatize-corpus command (after
    `--`)."""
    return argv[argv.index("--") + 1:]


def test_one_process_has_the_exact_law(corpus, tmp_path):
    out = str(tmp_path / "out")
    manifest = pipeline.run(corpus["config"], out)
    check_law(corpus, out)
    # In one process the job's pre-flight build serves the DoFns.
    assert manifest["statistics"].get("table_loads", 0) == 0
    assert manifest["statistics"]["batches"] == -(-LINES // BATCH)


def test_two_processes_have_the_same_law_and_load_the_table_once_each(
        corpus, tmp_path):
    [(_, argv, _)] = guide_commands("--direct_running_mode")
    options = beam_options(argv)
    assert "--direct_running_mode=multi_processing" in options
    assert "--direct_num_workers=2" in options
    out = str(tmp_path / "out")
    manifest = pipeline.run(corpus["config"], out, pipeline_args=options)
    check_law(corpus, out)
    statistics = manifest["statistics"]
    assert statistics["lines"] == LINES
    batches = -(-LINES // BATCH)
    assert statistics["batches"] == batches
    # One load per worker process (2), not one per bundle or batch.
    assert 1 <= statistics["table_loads"] <= 2 < batches
    assert statistics["table_load_ms_max"] >= 0


# `dask worker` starts each worker process by forking its nanny (which has
# imported dask.distributed) instead of spawning a fresh interpreter that
# imports it again (distributed's default): the same two worker processes,
# each with its own Python state, at less start-up CPU.
_FORKED_WORKERS = {"DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD": "fork"}


@pytest.fixture
def dask_cluster(tmp_path):
    """The guide's `dask scheduler` and `dask worker` commands, run in
    `tmp_path` with this venv's dask; stopped after the test."""
    pytest.importorskip("distributed",
                        reason="dask.distributed is not installed (the beam "
                        "extra installs apache-beam[dask])")
    commands = [c for c in guide_commands("DaskRunner") if c[2]]
    assert [argv[:2] for _, argv, _ in commands] == [
        [".venv/bin/dask", "scheduler"], [".venv/bin/dask", "worker"]]
    processes = []
    logs = open(tmp_path / "dask.log", "w")
    try:
        for _, argv, _ in commands:
            dask = os.path.join(os.path.dirname(sys.executable), "dask")
            processes.append(subprocess.Popen(
                [dask, *argv[1:]], cwd=tmp_path, stdout=logs,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": ROOT, **_FORKED_WORKERS}))
        scheduler = next(a.split("=", 1)[1] for a in commands[0][1]
                         if a.startswith("--scheduler-file="))
        yield tmp_path / scheduler
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        logs.close()


def scheduler_clients(client):
    """The ids of the clients connected to `client`'s scheduler (a lambda
    travels by value: the scheduler cannot import this module)."""
    return client.run_on_scheduler(
        lambda dask_scheduler: sorted(dask_scheduler.clients))


def job_clients_closed(client, wait=10):
    """Whether, within `wait` seconds, `client` is the only client the
    scheduler still serves (besides its own "fire-and-forget" one)."""
    deadline = time.time() + wait
    while True:
        others = [c for c in scheduler_clients(client)
                  if c not in (client.id, "fire-and-forget")]
        if not others or time.time() > deadline:
            return not others
        time.sleep(0.2)


def test_dask_cluster_of_two_workers_has_the_same_law(corpus, tmp_path,
                                                      dask_cluster):
    from dask.distributed import Client

    [(_, argv, _)] = [c for c in guide_commands("DaskRunner") if not c[2]]
    options = beam_options(argv)
    assert "--runner=apache_beam.runners.dask.dask_runner.DaskRunner" in \
        options
    scheduler_file = str(dask_cluster)
    options = [f"--dask_scheduler_file={scheduler_file}" if o.startswith(
        "--dask_scheduler_file=") else o for o in options]
    deadline = time.time() + 120
    with Client(scheduler_file=scheduler_file, timeout=120) as client:
        while len(client.scheduler_info()["workers"]) < 2:
            assert time.time() < deadline, "the dask workers did not start"
            time.sleep(0.5)
        out = str(tmp_path / "out")
        pipeline.run(corpus["config"], out, pipeline_args=options)
        check_law(corpus, out)
        # Each worker process built the mechanism (loaded the codes) at
        # most once, however many bundles (dask partitions, each calling
        # DoFn.setup) it ran.
        loads = client.run(mechanisms.builds)
        # The job closed the client Beam's DaskRunner opened: only this
        # test's client is still connected to the scheduler.
        assert job_clients_closed(client), scheduler_clients(client)
    assert len(loads) == 2 and sum(loads.values()) >= 1
    assert max(loads.values()) == 1, json.dumps(loads)


def test_table_cache_outlives_bundles_in_a_worker(tmp_path, tokenizer):
    """A worker's DoFn instances (one per bundle under some runners) share
    the process's privatizer, so the SanText tables computed for one
    bundle serve the next."""
    rng = np.random.default_rng(5)
    table = rng.standard_normal((tokenizer.vocabulary_size, 4))
    path = tmp_path / "table.npy"
    np.save(path, table.astype(np.float32))
    config = CorpusConfig(input="x.txt", mechanism="santext", epsilon=2.0,
                          embeddings=str(path)).validate()
    first, second = pipeline.PrivatizeBatch(config), \
        pipeline.PrivatizeBatch(config)
    before = mechanisms.builds()
    first.setup()
    second.setup()
    assert mechanisms.builds() == before + 1
    assert first.mechanism is second.mechanism
    batch = ((0, 0), [((0, 0), "river garden"), ((0, 1), "garden")])
    list(first.process(batch))
    info = first.mechanism.privatizer.cache_info()
    assert info["misses"] == 2 and info["hits"] == 0
    list(second.process(batch))
    info = second.mechanism.privatizer.cache_info()
    assert info["misses"] == 2 and info["hits"] == 2
