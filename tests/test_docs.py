"""Every command in README.md and the guides (docs/guides/*.md) runs, so
the documentation cannot rot.

A command is a line (with its backslash continuations) of a ```sh block.
Each is a tfdptext program, run in the order the document shows them in
a fresh directory holding copies of what the documents name (examples/,
train/flags/ and small files), with ../shared/data resolved to a copy
cut to 100 texts per split (`small_shared`). Each runs as
written with overrides appended for speed: a tiny encoder over MiniLM's
first 4,000 ids instead of MiniLM (`docs_preset`), short texts, few
examples and steps, fewer audit samples, an export's lengths named
(`overrides`). A train or export whose effective flags (flag files
expanded, later flags winning, a file data set's default columns named
or not) equal an earlier command's is not run again: its output is
copied (`_reuse`); a sweep's cells are put in its
directory before it runs, copied where earlier commands trained and
evaluated them with the same flags, else trained and evaluated through
the zygote with the commands the sweep would run, and the sweep skips
them as it skips finished cells on a re-run (`_seed_sweep`). The `make`
targets are run elsewhere (`COVERED`). A second, fast test parses every
command's flags with the program's own flag definitions, so a renamed or
removed flag fails at once.
"""

import glob
import os
import re
import shlex
import shutil
import sys

import pytest
from absl import flags

import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.abspath(os.path.join(ROOT, "..", "shared"))
DOCS = ["README.md"] + sorted(
    os.path.relpath(p, ROOT)
    for p in glob.glob(os.path.join(ROOT, "docs", "guides", "*.md")))
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
PROGRAM = re.compile(r"^(?:\.venv/bin/|train/|eval/|export/)?"
                     r"(tfdptext-[a-z-]+)$")
MODULES = {"tfdptext-train": "train", "tfdptext-eval": "evaluate",
           "tfdptext-export": "export", "tfdptext-predict": "predict",
           "tfdptext-sweep": "sweep", "tfdptext-audit": "audit",
           "tfdptext-pretrain": "pretrain", "tfdptext-binarize": "binarize",
           "tfdptext-demo": "demo",
           "tfdptext-privatize-corpus": "privatize_corpus"}
COVERED = {
    "make install": "every test runs in the venv it makes",
    "make demo": "tests/test_demo.py runs tfdptext-demo",
    "make test": ".ci/run runs it: it is this suite",
    "make bazel-test": "not in CI; tests/BUILD holds the same files",
    "make gpu-package": "tests/test_jax_backend.py builds a package of the "
                        "tiny model (the real one downloads wheels, 53 MiB)",
}
# Commands that need processes running beside them (a dask cluster, the
# other worker of a multi-worker run): the named test runs them, parsed
# from the guide, and checks what they do. A line starting with a key is
# covered; a tfdptext command holding one of the values is left to it.
COVERED_PREFIXES = {
    ".venv/bin/dask ": "tests/test_corpus_workers.py starts this cluster",
    "TF_CONFIG=": "tests/test_distribute.py runs both workers",
    "wait": "tests/test_distribute.py waits for both workers",
    "OUT=": "tests/test_jax_backend.py runs the package's dry run with "
            "TensorFlow unimportable",
}
RUN_ELSEWHERE = {
    "DaskRunner": "tests/test_corpus_workers.py (needs the dask cluster)",
    # The guide's two-process job is run there too, with its law and
    # table-load checks: once is enough for the suite's budget.
    "--direct_running_mode": "tests/test_corpus_workers.py",
}
# The attackers as logistic regressions (seconds, where five Keras MLPs
# take half a minute; the MLP attackers are tested in test_eval_run.py).
EVAL_FAST = ["--max_attack_examples=24", "--deniability_tokens=3",
             "--deniability_samples=10", "--plots=false",
             "--attackers=logistic_regression"]
# Appended to each program's command (later flags win in absl). One batch
# of the 48 training examples, and of the test split's SHARED_ROWS: each
# model call outside the traced functions is an eager call of the whole
# model (on the loaded 2-core machine, one train took 11.8 CPU-s at 64
# where it took 15.5 at 16; a train's dev and test predictions took 0.43
# CPU-s at 256 where they took 0.73 at 64, two runs each). Texts of 32 tokens: the exports' default lengths are
# then 16 and 32 (two phone-model signatures, where 64 made three), and 32
# is the longest the export guide's --lengths=16,32 names.
FAST = ["--max_length=32", "--epochs=1", "--max_train_examples=48",
        "--max_dev_examples=16", "--batch_size=256"]
# The lengths an export of a run of FAST's max_length 32 takes when it
# names none (16, 32, 64, ... below max_length, plus max_length: 16 and
# 32), named for an export that names none: an export that names them is
# then seen to be the same export (the export guide's --lengths=16,32 one
# is the README's quickstart export).
EXPORT_LENGTHS = "--lengths=16,32"
# The docs' encoder: the tiny BERT of tests/conftest.py (one layer, width
# 16) over the first DOCS_VOCABULARY ids of MiniLM's vocabulary: its
# special tokens, [unused*] slots and single characters, then its ~2,000
# most frequent words and pieces. What runs over the whole vocabulary
# (truncated Gumbel's distance range and nearest-word table, V x V; BRR's
# codes; the int4 table) then costs seconds, not tens of them (the
# mechanisms guide's command: 22 CPU-s over MiniLM's 30,522 ids, 5 over
# 4,000, on the loaded machine).
DOCS_VOCABULARY = 4000


def overrides(program, argv, preset):
    """The speed overrides of `program` run with `argv`: the tiny preset
    for encoders (unless the command names its own, e.g. a pretrained
    one), fewer examples, steps and samples."""
    tiny = [] if any(a.startswith("--preset") for a in argv) else [
        f"--preset={preset}"]
    return {
        "tfdptext-train": [*tiny, *FAST],
        "tfdptext-pretrain": [*tiny, "--steps=2",
                              "--max_length=32", "--max_examples=64",
                              "--heldout_examples=16", "--batch_size=8"],
        "tfdptext-export": [] if any(a.startswith("--lengths")
                                     for a in argv) else [EXPORT_LENGTHS],
        "tfdptext-eval": EVAL_FAST,
        # --train_args repeats; --eval_args is a list (its last value
        # wins): the fast flags in one.
        "tfdptext-sweep": [f"--train_args=--preset={preset}",
                           *[f"--train_args={f}" for f in FAST],
                           "--eval_args=" + ",".join(EVAL_FAST)],
        # One small phone model, refusals only (the channel test of every
        # mechanism's phone model runs in tests/test_audit.py and
        # tests/test_partial_buffers.py).
        "tfdptext-audit": ["--word_buffers=2", "--word_releases=0",
                           "--word_models=code_release"]
        if "--random_words" in argv
        else ["--mechanisms=laplace_vector,broken_noise_off",
              "--samples=20000"],
        # MiniLM's table read as the command says, its first
        # DOCS_VOCABULARY words coded: the vocabulary of the docs' encoder,
        # which the corpus guide's train --codes must equal; in few steps.
        "tfdptext-binarize": ["--epochs=1", "--report_sample=100",
                              "--batch_size=2048",
                              f"--max_words={DOCS_VOCABULARY}"],
        # Every mechanism on the encoder's embeddings (not brr's codes).
        "tfdptext-privatize-corpus": [] if any(
            a.startswith("--codes") for a in argv) else tiny,
    }.get(program, [])


def commands(doc):
    """The commands of a document, in order: (program or make target,
    argv after it)."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = f.read()
    found = []
    for block in BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if any(line.startswith(prefix) for prefix in COVERED_PREFIXES):
                found.append((line, None))
                continue
            words = shlex.split(line, comments=True)
            match = PROGRAM.match(words[0])
            if match:
                found.append((match.group(1), words[1:]))
            else:
                found.append((" ".join(words), None))
    return found


def test_every_command_is_a_program_or_a_covered_target():
    for doc in DOCS:
        for name, argv in commands(doc):
            covered = name in COVERED or any(
                name.startswith(prefix) for prefix in COVERED_PREFIXES)
            assert argv is not None and name in MODULES or covered, \
                (f"{doc}: `{name}` is neither a tfdptext program nor a "
                 "target run elsewhere; the docs test cannot run it")
    assert any(commands(doc) for doc in DOCS)


@pytest.mark.parametrize("doc", DOCS)
def test_every_flag_of_every_command_parses(doc):
    import importlib

    for name, argv in commands(doc):
        if argv is None:
            continue
        module = importlib.import_module(f"tfdptext.cli.{MODULES[name]}")
        values = flags.FlagValues()
        module.define_flags(values)
        flags.DEFINE_bool("verbose", False, "", flag_values=values)
        flags.DEFINE_string("flagfile", None, "", flag_values=values)
        given = [a for a in argv if not a.startswith("--flagfile")]
        try:
            values(["prog", *given], known_only=False)
        except flags.Error as err:
            pytest.fail(f"{doc}: `{name} {' '.join(argv)}`: {err}")


# Rows kept per split of the shared data sets (the same files, formats and
# loaders, 100 texts: every command runs as written, on less; the
# pretraining guide's overrides take 64 + 16 of them).
SHARED_ROWS = 100


@pytest.fixture(scope="session")
def small_shared(tmp_path_factory):
    """../shared with AG (the DPNR file) and SST-2 cut to SHARED_ROWS texts
    per split; other data sets linked as they are."""
    root = tmp_path_factory.mktemp("shared")
    data = root / "data"
    data.mkdir()
    for name in os.listdir(os.path.join(SHARED, "data")):
        source = os.path.join(SHARED, "data", name)
        if name == "ag_dpnr":
            (data / name).mkdir()
            with open(os.path.join(source, "ag_data.txt"),
                      encoding="utf-8") as f:
                splits = f.read().split("\n" + "=" * 20 + "\n")
            (data / name / "ag_data.txt").write_text(
                ("\n" + "=" * 20 + "\n").join(
                    "\n".join(part.splitlines()[:SHARED_ROWS])
                    for part in splits) + "\n", encoding="utf-8")
        elif name == "sst2":
            (data / name).mkdir()
            for split in ("train", "dev", "test"):
                with open(os.path.join(source, f"{split}.tsv"),
                          encoding="utf-8") as f:
                    lines = f.read().splitlines()[:SHARED_ROWS + 1]
                (data / name / f"{split}.tsv").write_text(
                    "\n".join(lines) + "\n", encoding="utf-8")
        else:
            os.symlink(source, data / name)
    return str(root)


# Writes the docs' encoder (DOCS_VOCABULARY) as a keras-hub preset
# directory: argv path, MiniLM's vocab.txt, size.
_MAKE_PRESET = """
import os, sys
import keras, keras_hub
from tfdptext import models
path, size = sys.argv[1], int(sys.argv[2])
with open(os.path.join(models.minilm_directory(), "vocab.txt"),
          encoding="utf-8") as f:
    words = f.read().splitlines()[:size]
keras.utils.set_random_seed(0)
keras_hub.models.BertBackbone(
    vocabulary_size=size, num_layers=1, num_heads=2, hidden_dim=16,
    intermediate_dim=32, max_sequence_length=64).save_to_preset(path)
with open(os.path.join(path, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\\n".join(words) + "\\n")
"""


@pytest.fixture(scope="session")
def docs_preset(tmp_path_factory):
    """The docs' encoder as a local preset directory, written by a child
    of the zygote (this process need not import TensorFlow for it)."""
    path = str(tmp_path_factory.mktemp("docs_preset") / "tiny")
    result = zygote.run(
        [sys.executable, "-c", _MAKE_PRESET, path, str(DOCS_VOCABULARY)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr[-3000:]
    with open(os.path.join(path, "vocab.txt"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) == DOCS_VOCABULARY
    return path


def _workspace(tmp_path, shared):
    """A directory holding what the documents' commands read."""
    for folder in ("examples", os.path.join("train", "flags")):
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder)
    for path in (tmp_path / "train" / "flags").iterdir():
        path.write_text(path.read_text().replace("../shared", shared))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "reviews.txt").write_text(
        "The staff was friendly.\n\nDelivery took three weeks.\n")
    return tmp_path


def _resolve(argv, shared):
    """../shared resolved to `shared` (the commands run elsewhere than the
    checkout)."""
    return [a.replace("../shared", shared) for a in argv]


# Commands that write only their --output_dir, already run with the same
# effective flags by an earlier command (the README's quickstart and the
# export guide share their run and their export, which is also the export
# guide's --lengths=16,32 one; the training guide's AG code run is the
# evaluation guide's, its own-data run the quickstart's): their output is
# copied, not remade.
_REUSABLE = ("tfdptext-train", "tfdptext-export")
_RAN = {}
# The evaluations run so far: (absolute run directory, effective flags
# but the run and output directories) -> the evaluation's directory.
_EVALUATED = {}
_PLACES = ("output_dir", "model_dir")


# The columns a file data set's loader reads when none is named (the
# training guide's "defaults `text`, `label`"; by index without a header
# line): naming them reads the same data (the training guide's own-data
# command is the README's quickstart run with its columns named).
_FILE_COLUMNS = {"text_column": "text", "label_column": "label"}


def _effective(argv, cwd, leave=("output_dir",)):
    """The flags a command runs with, as absl reads them: flag files
    expanded (paths relative to `cwd`), the later value of a flag winning,
    a file data set's columns named as its loader's defaults left out
    (`_FILE_COLUMNS`); the flags in `leave` and the positional arguments
    apart. Two commands of one program with the same flags and arguments
    write the same output."""
    values, positional = {}, []

    def read(args):
        for arg in args:
            if arg.startswith("--flagfile="):
                with open(os.path.join(cwd, arg.split("=", 1)[1])) as f:
                    read([line.strip() for line in f if line.strip()
                          and not line.lstrip().startswith("#")])
            elif arg.startswith("--"):
                name, _, value = arg[2:].partition("=")
                values[name] = _number(value)
            else:
                positional.append(arg)

    read(argv)
    if values.get("dataset") == "jsonl" or values.get("dataset") in (
            "csv", "tsv") and not {"no_header", "nono_header"} & set(values):
        for name, default in _FILE_COLUMNS.items():
            if values.get(name) == default:
                del values[name]
    return (tuple(sorted((k, v) for k, v in values.items()
                         if k not in leave)), tuple(positional))


def _number(value):
    """`value` with numbers in one spelling (the sweep writes 4 as 4.0)."""
    try:
        return repr(float(value))
    except ValueError:
        return value


def _flag(argv, name, default=None):
    """The last value of --`name` in `argv`."""
    found = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    return found[-1] if found else default


def _reuse(name, argv, cwd):
    """Copies the output of the same command run earlier (for this or an
    earlier document) into `cwd`; False when there is none."""
    earlier = _RAN.get((name, _effective(argv, cwd)))
    if name not in _REUSABLE or earlier is None:
        return False
    shutil.copytree(earlier, os.path.join(cwd, _flag(argv, "output_dir")))
    return True


def _record(name, argv, cwd):
    """Remembers what the command that just ran wrote."""
    if name in _REUSABLE:
        _RAN[(name, _effective(argv, cwd))] = os.path.join(
            cwd, _flag(argv, "output_dir"))
    elif name == "tfdptext-eval":
        model_dir = os.path.join(cwd, _flag(argv, "model_dir"))
        _EVALUATED[(os.path.realpath(model_dir),
                    _effective(argv, cwd, leave=_PLACES))] = os.path.join(
            cwd, _flag(argv, "output_dir", os.path.join(model_dir, "eval")))


def _seed_sweep(argv, cwd, run):
    """Fills a tfdptext-sweep's directory before it runs: the cells that
    earlier commands trained (and evaluated) with the same effective flags
    are copied, the others trained and evaluated here with the commands
    the sweep would run (`run`: through the zygote, where the sweep's own
    children would each import TensorFlow). The sweep then skips them as
    it skips finished cells on a re-run and writes its summary and curves
    (its children are run by tests/test_faults.py's killed sweep)."""
    from tfdptext.evaluation import sweep

    values = {}
    for arg in argv:
        name, _, value = arg[2:].partition("=")
        values.setdefault(name, []).append(value)
    train_args = [f"--flagfile={values['train_flagfile'][-1]}",
                  *values.get("train_args", [])]
    eval_args = [*[f"--reference_run={r}" for r in
                   values.get("reference_run", [])[-1:]],
                 *[a for a in values.get("eval_args", [""])[-1].split(",")
                   if a]]
    output_dir = os.path.join(cwd, values["output_dir"][-1])
    for cell in sweep.parse_grid(values["grid"]):
        cell_args = [*train_args, *[f"--{k}={v}" for k, v in cell.items()]]
        run_dir = os.path.join(output_dir, sweep.cell_name(cell))
        earlier = _RAN.get(("tfdptext-train", _effective(cell_args, cwd)))
        if earlier is None:
            run("tfdptext-train", [*cell_args, f"--output_dir={run_dir}"])
        else:
            shutil.copytree(earlier, run_dir,
                            ignore=shutil.ignore_patterns("eval"))
            earlier = _EVALUATED.get((os.path.realpath(earlier), _effective(
                eval_args, cwd, leave=_PLACES)))
        if earlier is None:
            run("tfdptext-eval", [f"--model_dir={run_dir}",
                                  f"--output_dir={run_dir}/eval",
                                  *eval_args])
        else:
            shutil.copytree(earlier, os.path.join(run_dir, "eval"))


def _runner(doc, cwd, env):
    """run(name, argv): runs program `name` with `argv` (overrides
    included) in `cwd` through the zygote, checks that it succeeded, logs
    its CPU time ($TFDPTEXT_DOCS_CPU_LOG) and records what it wrote."""

    def run(name, argv):
        result = zygote.run(
            [sys.executable, "-m", f"tfdptext.cli.{MODULES[name]}", *argv],
            cwd=str(cwd), capture_output=True, text=True, timeout=600,
            env=env)
        if os.environ.get("TFDPTEXT_DOCS_CPU_LOG"):
            with open(os.environ["TFDPTEXT_DOCS_CPU_LOG"], "a") as log:
                log.write(f"{doc}\t{name}\t"
                          f"{getattr(result, 'cpu_seconds', -1):.1f}\t"
                          f"{' '.join(argv)[:120]}\n")
        assert result.returncode == 0, (
            f"{doc}: {name} {' '.join(argv)}\n{result.stderr[-3000:]}")
        _record(name, argv, str(cwd))
        return result

    return run


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_runs(doc, docs_preset, tmp_path, request):
    runnable = [(n, a) for n, a in commands(doc) if a is not None
                and not any(key in " ".join(a) for key in RUN_ELSEWHERE)]
    if not runnable:
        pytest.skip(f"{doc} shows no tfdptext command")
    if any("../shared" in " ".join(a) for _, a in runnable) and \
            not os.path.isdir(SHARED):
        pytest.skip(f"{doc} uses ../shared/data, absent here")
    shared = (request.getfixturevalue("small_shared")
              if os.path.isdir(SHARED) else SHARED)
    cwd = _workspace(tmp_path, shared)
    env = {**os.environ, "PYTHONPATH": ROOT}
    run = _runner(doc, cwd, env)
    for name, argv in runnable:
        argv_run = [*_resolve(argv, shared),
                    *overrides(name, argv, docs_preset)]
        if _reuse(name, argv_run, cwd):
            continue
        if name == "tfdptext-sweep":
            _seed_sweep(argv_run, str(cwd), run)
        result = run(name, argv_run)
        if name == "tfdptext-predict":
            # The answer is a label name of the run's data.
            assert re.search(r"label \w+ \(\d+\)", result.stdout), \
                result.stdout
