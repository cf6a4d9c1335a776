"""Every command in README.md and the guides (docs/guides/*.md) runs, so
the documentation cannot rot.

A command is a line (with its backslash continuations) of a ```sh block.
Each is a tfdptext program, run in the order the document shows them in a
fresh directory holding copies of what the documents name (examples/,
train/flags/ and small files), with ../shared/data resolved to the real
path. Each runs as written with overrides appended for speed: the tiny
encoder instead of MiniLM, short texts, few examples and steps, fewer audit
samples (`OVERRIDES`). The `make` targets are run elsewhere (`COVERED`).
A second, fast test parses every command's flags with the program's own
flag definitions, so a renamed or removed flag fails at once.
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from absl import flags

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
}
# Appended to each program's command (later flags win in absl).
FAST = ["--max_length=64", "--epochs=1", "--max_train_examples=48",
        "--max_dev_examples=16", "--batch_size=16"]


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
        "tfdptext-eval": ["--max_attack_examples=24",
                          "--deniability_tokens=3",
                          "--deniability_samples=10", "--plots=false"],
        "tfdptext-sweep": [f"--train_args=--preset={preset}",
                           *[f"--train_args={f}" for f in FAST],
                           "--eval_args=--max_attack_examples=24"],
        "tfdptext-audit": ["--word_buffers=2"] if "--random_words" in argv
        else ["--mechanisms=laplace_vector,broken_noise_off",
              "--samples=20000"],
        "tfdptext-binarize": ["--epochs=1", "--report_sample=100"],
        "tfdptext-privatize-corpus": tiny if "--mechanism=dchi" in argv
        else [],
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
            assert argv is not None and name in MODULES or name in COVERED, \
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


def _workspace(tmp_path):
    """A directory holding what the documents' commands read."""
    for folder in ("examples", os.path.join("train", "flags")):
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder)
    for path in (tmp_path / "train" / "flags").iterdir():
        path.write_text(path.read_text().replace("../shared", SHARED))
    header = "text\tlabel\n"
    rows = "".join(f"the {w} story number {i}\t{label}\n"
                   for i, (w, label) in enumerate(
                       [("great", "Good"), ("awful", "Bad")] * 40))
    for name in ("train.tsv", "test.tsv"):
        (tmp_path / name).write_text(header + rows)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "reviews.txt").write_text(
        "The staff was friendly.\n\nDelivery took three weeks.\n")
    return tmp_path


def _resolve(argv):
    """../shared resolved to the real directory (the commands run
    elsewhere than the checkout)."""
    return [a.replace("../shared", SHARED) for a in argv]


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_runs(doc, tiny_preset, tmp_path):
    cwd = _workspace(tmp_path)
    runnable = [(n, a) for n, a in commands(doc) if a is not None]
    if not runnable:
        pytest.skip(f"{doc} shows no tfdptext command")
    if any("../shared" in " ".join(a) for _, a in runnable) and \
            not os.path.isdir(SHARED):
        pytest.skip(f"{doc} uses ../shared/data, absent here")
    env = {**os.environ, "PYTHONPATH": ROOT}
    for name, argv in runnable:
        command = [sys.executable, "-m", f"tfdptext.cli.{MODULES[name]}",
                   *_resolve(argv), *overrides(name, argv, tiny_preset)]
        result = subprocess.run(command, cwd=str(cwd), capture_output=True,
                                text=True, timeout=600, env=env)
        assert result.returncode == 0, (
            f"{doc}: {name} {' '.join(argv)}\n{result.stderr[-3000:]}")
