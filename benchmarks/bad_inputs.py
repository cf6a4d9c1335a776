#!/usr/bin/env python
"""Runs bad inputs across tfdptext and writes what happens to each.

    .venv/bin/python benchmarks/bad_inputs.py [--output docs/bad_inputs.md]

Every case runs in a fresh temporary directory: bad arguments to the
layers, the privacy functions and Guarantee; data files with problems
(BOM, empty file, unclosed quote, a 300 KB field, bytes that are not
UTF-8, a missing column, labels {0, 7}, fewer than 5 rows, ...); and the
programs (bad flags, an output directory that is a file, corrupt run and
export files, runs killed with SIGKILL and re-run). One tiny training run
(a 1-layer BERT over MiniLM's vocabulary, synthetic data) and one export of
it are made first and copied for the program cases.

Outcomes: `error (<class>)` a clear tfdptext error (its first line in the
message column); `usage error` a program's message without traceback;
`RAW <class>` / `TRACEBACK` an error from below tfdptext (a defect);
`OK: ...` no error and the checked result is right; `SILENT: ...` no error
but the result is wrong or doubtful (a defect). Takes a few minutes on 2
CPU cores.
"""

import argparse
import datetime
import glob
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tfdptext import rundir  # noqa: E402
PROGRAMS = {"train": os.path.join(ROOT, "train", "tfdptext-train"),
            "export": os.path.join(ROOT, "export", "tfdptext-export"),
            "predict": os.path.join(ROOT, "export", "tfdptext-predict"),
            "eval": os.path.join(ROOT, "eval", "tfdptext-eval"),
            "sweep": os.path.join(ROOT, "eval", "tfdptext-sweep"),
            "demo": os.path.join(ROOT, "train", "tfdptext-demo")}
TRAIN_FLAGS = ["--mode=robust", "--epsilon=2", "--max_length=16",
               "--batch_size=16", "--max_train_examples=320",
               "--max_dev_examples=48", "--learning_rate=3e-3"]

CASES = []


def case(area, description):
    def register(fn):
        CASES.append((area, description, fn))
        return fn
    return register


class Silent(Exception):
    """No error, but the result is wrong or doubtful."""


def _first_line(text):
    for line in str(text).strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def run_case(fn, workdir):
    """(outcome, message) of one case."""
    from tfdptext.errors import TfdptextError

    try:
        what = fn(workdir)
    except Silent as err:
        return "SILENT", str(err)
    except TfdptextError as err:
        return f"error ({type(err).__name__})", _first_line(err)
    except ValueError as err:
        module = type(err).__module__
        if module == "builtins":  # tfdptext's argument checks
            tb = traceback.extract_tb(err.__traceback__)
            if tb and "tfdptext" in tb[-1].filename:
                return "error (ValueError)", _first_line(err)
        return f"RAW {module}.{type(err).__name__}", _first_line(err)
    except Exception as err:  # noqa: BLE001
        return (f"RAW {type(err).__module__}.{type(err).__name__}",
                _first_line(err) or repr(err))
    if isinstance(what, tuple):
        return what
    return "OK", what


def program(name, args, env=None, timeout=300):
    """(outcome, message) of a program that should fail cleanly."""
    result = subprocess.run([sys.executable, PROGRAMS[name], *args],
                            capture_output=True, text=True, env=env,
                            timeout=timeout)
    err = result.stderr
    lines = [l for l in err.strip().splitlines() if l.strip()
             and not l.startswith(("I0000", "W0000", "E0000", "WARNING:"))]
    if "Traceback (most recent call last)" in err:
        return f"TRACEBACK (exit {result.returncode})", lines[-1] \
            if lines else ""
    if result.returncode != 0:
        return f"usage error (exit {result.returncode})", lines[-1] \
            if lines else ""
    raise Silent(f"exit 0: {_first_line(result.stdout)}")


# --- API: layers, privacy functions, Guarantee -----------------------------


@case("layers", "LaplaceNoise(epsilon=-1)")
def _(d):
    from tfdptext import layers
    layers.LaplaceNoise(-1.0)


@case("layers", "LaplaceNoise(epsilon=nan)")
def _(d):
    from tfdptext import layers
    layers.LaplaceNoise(float("nan"))


@case("layers", "LaplaceNoise(0.1, sensitivity='l2')")
def _(d):
    from tfdptext import layers
    layers.LaplaceNoise(0.1, sensitivity="l2")


@case("layers", "WordDropout(rate=1.5, mask_token_id=103)")
def _(d):
    from tfdptext import layers
    layers.WordDropout(1.5, 103)


@case("layers", "WordDropout(rate=0.5, mask_token_id=-3)")
def _(d):
    from tfdptext import layers
    layers.WordDropout(0.5, -3)
    raise Silent("accepted mask_token_id=-3")


@case("layers", "DChiNoise(eta=0)")
def _(d):
    from tfdptext import layers
    layers.DChiNoise(0.0)


@case("layers", "RandomizedResponse(epsilon=inf)")
def _(d):
    from tfdptext import layers
    layers.RandomizedResponse(math.inf)
    raise Silent("accepted an infinite epsilon")


@case("layers", "LaplaceNoise(1.0, noise='yes')")
def _(d):
    from tfdptext import layers
    layers.LaplaceNoise(1.0, noise="yes")


@case("layers", "MinMax + Laplace on vectors holding NaN / +inf")
def _(d):
    import numpy as np

    from tfdptext import layers
    x = np.array([[np.nan, 1.0, 0.5], [np.inf, 1.0, 0.5], [0.0, 1.0, 0.5]],
                 np.float32)
    out = np.asarray(layers.LaplaceNoise(1.0)(layers.MinMaxNormalize()(x)))
    if np.isnan(out[:2]).all() and np.isfinite(out[2]).all():
        return "OK", ("fail closed: those rows are all NaN (unusable; the "
                      "server signature refuses NaN), the finite row is "
                      "released")
    raise Silent(f"released {out.tolist()}")


@case("layers", "LaplaceNoise(1.0, 'vector') reused on a wider input")
def _(d):
    import numpy as np

    from tfdptext import layers
    layer = layers.LaplaceNoise(1.0, sensitivity="vector")
    layer(np.random.rand(2, 4).astype("float32"))
    layer(np.random.rand(2, 400).astype("float32"))


@case("layers", "LaplaceNoise(epsilon=1e-39) (noise overflows float32)")
def _(d):
    from tfdptext import layers
    layers.LaplaceNoise(1e-39)


@case("layers", "DChiNoise(eta=1e-39) (noise overflows float32)")
def _(d):
    from tfdptext import layers
    layers.DChiNoise(1e-39)


@case("train", "--epsilon=1e-39 (noise overflows float32)")
def _(d):
    return program("train", ["--mode=robust", "--epsilon=1e-39",
                             f"--output_dir={os.path.join(d, 'r')}"])


@case("layers", "RandomizedResponse(epsilon=710)")
def _(d):
    import numpy as np

    from tfdptext import layers
    bits = np.asarray(layers.RandomizedResponse(710.0)(
        np.ones((1, 8), "float32")))
    return "OK", f"flip probability ~e^-710, output bits {bits.tolist()}"


@case("layers", "DChiTextPrivatizer given ids outside the table")
def _(d):
    import numpy as np

    from tfdptext import layers
    table = np.random.default_rng(0).normal(size=(10, 4)).astype("float32")
    layers.DChiTextPrivatizer(5.0, table, special_token_ids=[0])(
        np.array([[1, 2, 99]]))


@case("layers", "phone model fed all-zero random words")
def _(d):
    import keras
    import numpy as np

    from tfdptext import layers
    from tfdptext.models import secure
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    mask = keras.Input((None,), dtype="int32", name="padding_mask")
    seg = keras.Input((None,), dtype="int32", name="segment_ids")
    x = keras.layers.Lambda(lambda t: keras.ops.one_hot(t[:, 0] % 8, 8))(ids)
    user = keras.Model({"token_ids": ids, "padding_mask": mask,
                        "segment_ids": seg},
                       layers.LaplaceNoise(1.0)(layers.MinMaxNormalize()(x)))
    model = secure.secure_user_model(user, "sequence_representation", 4)
    feed = {"token_ids": np.array([[1, 2, 3, 0]], np.int32),
            "padding_mask": np.array([[1, 1, 1, 0]], np.int32)}
    good = model({**feed, "random_words": secure.os_random_words((1, 16))})
    zero = model({**feed, "random_words": np.zeros((1, 16), np.int32)})
    good = np.asarray(good["private_representation"])
    zero = np.asarray(zero["private_representation"])
    if np.isfinite(good).all() and np.isnan(zero).all():
        return "OK", ("fail closed: all-NaN release (the server and "
                      "ExportedPipeline refuse it); fresh words: a release")
    raise Silent(f"zero words released {zero.tolist()}")


@case("layers", "LaplaceNoise given a string tensor")
def _(d):
    import numpy as np

    from tfdptext import layers
    layers.LaplaceNoise(1.0)(np.array([["a", "b"]]))


@case("privacy", "laplace_scale(epsilon=1e-320)")
def _(d):
    from tfdptext import privacy
    privacy.laplace_scale(1e-320)


@case("privacy", "Guarantee(value=inf)")
def _(d):
    import math

    from tfdptext.privacy import Guarantee
    Guarantee("laplace", "epsilon", math.inf, "per_representation")


@case("privacy", "sequence_distance with a negative id")
def _(d):
    import numpy as np

    from tfdptext import privacy
    privacy.sequence_distance(np.eye(3), [0, -1], [1, 2])


@case("evaluation", "attacker below the majority-class guess")
def _(d):
    from tfdptext.evaluation import evaluate
    summary = {"accuracy": {"mean": 0.536}, "majority_accuracy": 0.592,
               "majority_class": 0, "n_test": 100,
               "n_test_per_class": {"0": 59, "1": 41}}
    row = evaluate.empirical_privacy({"gender": {"mlp": summary}},
                                     ["mlp"])["demographic"]
    if abs(row["strongest"] - 0.408) < 1e-9:
        return "OK", ("empirical privacy 1 - X = 0.408 (the majority guess "
                      f"counts as an attacker), below_majority = "
                      f"{row['below_majority']}")
    raise Silent(f"strongest 1 - X = {row['strongest']}")


@case("privacy", "laplace_scale(epsilon=0)")
def _(d):
    from tfdptext import privacy
    privacy.laplace_scale(0)


@case("privacy", "vector_epsilon(0.1, dimension=0)")
def _(d):
    from tfdptext import privacy
    privacy.vector_epsilon(0.1, 0)


@case("privacy", "dropout_epsilon(1.0, rate=1.0)")
def _(d):
    from tfdptext import privacy
    value = privacy.dropout_epsilon(1.0, 1.0)
    return "OK", f"{value} (every word dropped: nothing of the text left)"


@case("privacy", "keep_probability(epsilon='1')")
def _(d):
    from tfdptext import privacy
    privacy.keep_probability("1")


@case("privacy", "privacy_ratio(0, 1)")
def _(d):
    from tfdptext import privacy
    privacy.privacy_ratio(0.0, 1.0)


@case("privacy", "average_distance of an empty (0, 3) array")
def _(d):
    import numpy as np

    from tfdptext import privacy
    privacy.average_distance(np.zeros((0, 3)))


@case("privacy", "Guarantee(unit='per planet')")
def _(d):
    from tfdptext.privacy import Guarantee
    Guarantee("laplace", "epsilon", 1.0, "per planet")


@case("privacy", "Guarantee.from_dict({})")
def _(d):
    from tfdptext.privacy import Guarantee
    Guarantee.from_dict({})


@case("privacy", "Guarantee with epsilon = -1")
def _(d):
    from tfdptext.privacy import Guarantee
    from tfdptext.privacy import guarantee as g
    Guarantee("laplace", "epsilon", -1.0, g.UNITS[0])


# --- Data loaders: local CSV / TSV / JSONL files ---------------------------

GOOD_ROWS = [(f"the staff was friendly number {i}", i % 2) for i in range(20)]


def _csv(path, rows=GOOD_ROWS, header="text,label", encoding="utf-8",
         prefix=b""):
    lines = [header] + [f'"{t}",{l}' for t, l in rows]
    with open(path, "wb") as f:
        f.write(prefix + ("\n".join(lines) + "\n").encode(encoding))
    return path


def _load(d, train, test=None, fmt="csv", **options):
    from tfdptext import data
    test = test or _csv(os.path.join(d, "test.csv"))
    return data.load_dataset(fmt, train_file=train, test_file=test,
                             **options)


def _sizes(ds):
    return ", ".join(f"{k} {len(v)}" for k, v in ds.splits.items())


@case("data", "CSV with a UTF-8 BOM")
def _(d):
    ds = _load(d, _csv(os.path.join(d, "train.csv"), prefix=b"\xef\xbb\xbf"))
    return "OK", f"read ({_sizes(ds)}), BOM ignored"


@case("data", "empty CSV file (0 bytes)")
def _(d):
    path = os.path.join(d, "train.csv")
    open(path, "w").close()
    _load(d, path)


@case("data", "CSV with an unclosed quote")
def _(d):
    path = os.path.join(d, "train.csv")
    with open(path, "w") as f:
        f.write('text,label\n"good,1\n"bad",0\n' + "".join(
            f'"x {i}",{i % 2}\n' for i in range(10)))
    ds = _load(d, path)
    raise Silent(f"read ({_sizes(ds)}): the quote swallowed rows")


@case("data", "CSV with a 300 KB text field")
def _(d):
    rows = GOOD_ROWS + [("word " * 60000, 1)]
    ds = _load(d, _csv(os.path.join(d, "train.csv"), rows))
    longest = max(len(t) for s in ds.splits.values() for t in s.texts)
    return "OK", f"read ({_sizes(ds)}), longest text {longest} chars"


@case("data", "CSV with Latin-1 bytes (not UTF-8)")
def _(d):
    rows = GOOD_ROWS + [("caf\u00e9 tr\u00e8s bon", 1)]
    _load(d, _csv(os.path.join(d, "train.csv"), rows, encoding="latin-1"))


@case("data", "CSV without the label column")
def _(d):
    _load(d, _csv(os.path.join(d, "train.csv"), header="text,rating"))


@case("data", "CSV with labels {0, 7}")
def _(d):
    rows = [(t, 7 * l) for t, l in GOOD_ROWS]
    path = _csv(os.path.join(d, "train.csv"), rows)
    ds = _load(d, path, _csv(os.path.join(d, "test.csv"), rows))
    if ds.num_classes != 2:
        raise Silent(f"{ds.num_classes} classes inferred from labels "
                     "{0, 7} (6 never occur)")
    return "OK", "2 classes"


@case("data", "CSV with 3 rows (fewer than 5)")
def _(d):
    ds = _load(d, _csv(os.path.join(d, "train.csv"), GOOD_ROWS[:3]))
    if min(len(s) for s in ds.splits.values()) == 0:
        raise Silent(f"loaded with an empty split ({_sizes(ds)})")
    return "OK", _sizes(ds)


@case("data", "CSV with a negative label")
def _(d):
    _load(d, _csv(os.path.join(d, "train.csv"), GOOD_ROWS + [("x", -1)]))


@case("data", "CSV with label '1.5'")
def _(d):
    path = os.path.join(d, "train.csv")
    with open(path, "w") as f:
        f.write("text,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(9))
                + "bad,1.5\n")
    _load(d, path)


@case("data", "CSV with an empty text")
def _(d):
    _load(d, _csv(os.path.join(d, "train.csv"), GOOD_ROWS + [("", 1)]))


@case("data", "TSV whose text holds a quote character")
def _(d):
    path = os.path.join(d, "train.tsv")
    with open(path, "w") as f:
        f.write("text\tlabel\n" + "".join(f"t {i}\t{i % 2}\n"
                                         for i in range(10))
                + '5" screen, great\t1\nlast one\t0\n')
    test = os.path.join(d, "test.tsv")
    shutil.copy(path, test)
    ds = _load(d, path, test, fmt="tsv")
    texts = [t for s in ds.splits.values() for t in s.texts]
    if '5" screen, great' not in texts:
        raise Silent(f"quote mangled the rows ({_sizes(ds)})")
    return "OK", f"read as written ({_sizes(ds)})"


@case("data", "JSONL with a line that is not an object")
def _(d):
    path = os.path.join(d, "train.jsonl")
    with open(path, "w") as f:
        f.write('{"text": "a", "label": 0}\n[1, 2]\n')
    _load(d, path, fmt="jsonl")


@case("data", "JSONL with label \"1\" (a string)")
def _(d):
    path = os.path.join(d, "train.jsonl")
    with open(path, "w") as f:
        for i in range(10):
            f.write(json.dumps({"text": f"t {i}", "label": str(i % 2)}) + "\n")
    test = os.path.join(d, "test.jsonl")
    shutil.copy(path, test)
    ds = _load(d, path, test, fmt="jsonl")
    return "OK", f"string labels read as numbers ({_sizes(ds)})"


@case("data", "CSV dataset without test_file")
def _(d):
    from tfdptext import data
    data.load_dataset("csv", train_file=_csv(os.path.join(d, "t.csv")))


@case("data", "missing train file")
def _(d):
    _load(d, os.path.join(d, "nope.csv"))


# --- Programs --------------------------------------------------------------

SHARED = {}


def _copy_run(d, name="run"):
    run = os.path.join(d, name)
    shutil.copytree(SHARED["run"], run)
    return run


def _copy_export(d):
    out = os.path.join(d, "exp")
    shutil.copytree(SHARED["export"], out)
    return out


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def _nothing_written(d, before):
    after = sorted(os.listdir(d))
    if after != before:
        raise Silent(f"wrote {sorted(set(after) - set(before))}")


@case("train", "--mode=token_rep --epsilon=1 (mechanism mismatch)")
def _(d):
    return program("train", ["--mode=token_rep", "--epsilon=1",
                             f"--output_dir={d}/run"])


@case("train", "--epochs=0")
def _(d):
    return program("train", TRAIN_FLAGS + ["--epochs=0",
                                           f"--preset={SHARED['preset']}",
                                           f"--output_dir={d}/run"])


@case("train", "--output_dir is an existing file")
def _(d):
    path = os.path.join(d, "file")
    open(path, "w").write("x")
    return program("train", TRAIN_FLAGS + [f"--output_dir={path}"])


@case("train", "--preset that does not exist (must leave no config.json)")
def _(d):
    out = os.path.join(d, "run")
    outcome = program("train", TRAIN_FLAGS + [f"--preset={d}/nope",
                                              f"--output_dir={out}"])
    if os.path.exists(os.path.join(out, rundir.CONFIG)):
        raise Silent("left config.json: the corrected command is refused")
    return outcome


@case("train", "--dataset=csv --data_dir=<dir with train.csv, test.csv>")
def _(d):
    _csv(os.path.join(d, "train.csv"))
    _csv(os.path.join(d, "test.csv"))
    result = subprocess.run(
        [sys.executable, PROGRAMS["train"], *TRAIN_FLAGS, "--dataset=csv",
         f"--data_dir={d}", f"--preset={SHARED['preset']}",
         f"--output_dir={d}/run"], capture_output=True, text=True,
        timeout=600)
    metrics = os.path.join(d, "run", rundir.METRICS)
    if result.returncode == 0 and os.path.isfile(metrics):
        return "OK", ("trained on DIR/train.csv and DIR/test.csv (dev split "
                      "off train); metrics.json written")
    return program("train", TRAIN_FLAGS + ["--dataset=csv",
                                           f"--data_dir={d}",
                                           f"--preset={SHARED['preset']}",
                                           f"--output_dir={d}/run2"])


@case("train", "same command again on a finished run")
def _(d):
    run = _copy_run(d)
    before = os.path.getmtime(os.path.join(run, rundir.METRICS))
    result = subprocess.run(
        [sys.executable, PROGRAMS["train"], *SHARED["train_args"],
         f"--output_dir={run}"], capture_output=True, text=True)
    if result.returncode or "already finished" not in result.stdout:
        raise Silent(f"exit {result.returncode}: "
                     f"{_first_line(result.stdout)}")
    if os.path.getmtime(os.path.join(run, rundir.METRICS)) != before:
        raise Silent("trained again")
    return "OK: says finished", _first_line(result.stdout)


@case("train", "corrupt config.json in the run directory, same command")
def _(d):
    run = _copy_run(d)
    _truncate(os.path.join(run, rundir.CONFIG))
    return program("train", SHARED["train_args"] + [f"--output_dir={run}"])


@case("train", "killed with SIGKILL in epoch 2 of 3, same command again")
def _(d):
    out = os.path.join(d, "run")
    args = SHARED["train_args"][:-1] + ["--epochs=3", f"--output_dir={out}"]
    meta = os.path.join(out, rundir.BACKUP, rundir.BACKUP_RECORD)

    def ready():
        try:
            return json.load(open(meta))["epoch"] >= 1
        except (OSError, ValueError, KeyError):
            return False

    _kill_when(PROGRAMS["train"], args, ready)
    done = json.load(open(meta))["epoch"]
    result = subprocess.run([sys.executable, PROGRAMS["train"], *args],
                            capture_output=True, text=True)
    if result.returncode:
        return "TRACEBACK" if "Traceback" in result.stderr else \
            "usage error", _first_line(result.stderr.splitlines()[-1])
    metrics = json.load(open(os.path.join(out, rundir.METRICS)))
    ran = metrics["epochs_run_this_session"]
    if ran != 3 - done:
        raise Silent(f"{done} epochs were done, the re-run ran {ran}")
    return "OK: resumed", (f"killed after {done} epoch(s); the re-run ran "
                           f"the other {ran}, metrics.json written")


def _kill_when(path, args, ready, timeout=240):
    with open(os.devnull, "w") as null:
        proc = subprocess.Popen([sys.executable, path, *args], stdout=null,
                                stderr=null)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if ready():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return proc.pid
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise Silent("the kill point was never reached")


@case("export", "--output_dir is an existing file")
def _(d):
    path = os.path.join(d, "file")
    open(path, "w").write("x")
    return program("export", [f"--model_dir={SHARED['run']}",
                              f"--output_dir={path}"])


@case("export", "--model_dir that does not exist")
def _(d):
    return program("export", [f"--model_dir={d}/nope",
                              f"--output_dir={d}/exp"])


@case("export", "run with a truncated metrics.json")
def _(d):
    run = _copy_run(d)
    _truncate(os.path.join(run, rundir.METRICS))
    before = sorted(os.listdir(d))
    outcome = program("export", [f"--model_dir={run}",
                                 f"--output_dir={d}/exp"])
    _nothing_written(d, before)
    return outcome


@case("export", "run with config.json = {}")
def _(d):
    run = _copy_run(d)
    open(os.path.join(run, rundir.CONFIG), "w").write("{}")
    return program("export", [f"--model_dir={run}", f"--output_dir={d}/exp"])


@case("export", "run with a truncated user_side.keras")
def _(d):
    run = _copy_run(d)
    _truncate(os.path.join(run, rundir.USER))
    return program("export", [f"--model_dir={run}", f"--output_dir={d}/exp"])


@case("export", "killed with SIGKILL during TFLite conversion, same command")
def _(d):
    run = _copy_run(d)
    out = os.path.join(d, "exp")
    args = [f"--model_dir={run}", f"--output_dir={out}"]
    tmpdir = os.path.join(d, "systmp")
    os.makedirs(tmpdir)
    env = {**os.environ, "TMPDIR": tmpdir}
    partial = os.path.join(d, ".exp.partial-*")
    proc_env = os.environ.copy()
    os.environ["TMPDIR"] = tmpdir
    try:
        _kill_when(PROGRAMS["export"], args, lambda: bool(glob.glob(
            os.path.join(partial, "tflite-convert-*"))))
    finally:
        os.environ.clear()
        os.environ.update(proc_env)
    left = len(glob.glob(partial))
    result = subprocess.run([sys.executable, PROGRAMS["export"], *args],
                            capture_output=True, text=True, env=env)
    if result.returncode:
        return "usage error", _first_line(result.stderr.splitlines()[-1])
    # TensorFlow autograph's own few-KB files are left by any killed TF
    # program; anything else in TMPDIR would be the export's.
    left_tmp = [n for n in os.listdir(tmpdir)
                if not n.startswith("__autograph_generated_file")]
    if glob.glob(partial) or left_tmp:
        raise Silent(f"left {glob.glob(partial) + left_tmp}")
    return "OK: clean export", (f"the kill left {left} partial dir (and "
                                "no conversion files in TMPDIR); the re-run "
                                "removed it and exported")


@case("eval", "--output_dir is an existing file")
def _(d):
    path = os.path.join(d, "file")
    open(path, "w").write("x")
    return program("eval", [f"--model_dir={SHARED['run']}",
                            f"--output_dir={path}"])


@case("eval", "run whose split.json lacks \"tokenizer\"")
def _(d):
    run = _copy_run(d)
    path = os.path.join(run, rundir.SPLIT)
    split = json.load(open(path))
    split.pop("tokenizer")
    json.dump(split, open(path, "w"))
    return program("eval", [f"--model_dir={run}", f"--output_dir={d}/ev"])


@case("eval", "--private_attributes=salary")
def _(d):
    return program("eval", [f"--model_dir={SHARED['run']}",
                            f"--output_dir={d}/ev",
                            "--private_attributes=salary"])


@case("eval", "same command again on a finished evaluation")
def _(d):
    run = _copy_run(d)
    args = [f"--model_dir={run}", f"--output_dir={d}/ev",
            "--private_attributes=", "--plots=false"]
    first = subprocess.run([sys.executable, PROGRAMS["eval"], *args],
                           capture_output=True, text=True)
    if first.returncode:
        return "TRACEBACK", _first_line(first.stderr.splitlines()[-1])
    again = subprocess.run([sys.executable, PROGRAMS["eval"], *args],
                           capture_output=True, text=True)
    line = [l for l in again.stdout.splitlines() if "already" in l]
    if again.returncode or not line:
        raise Silent(f"exit {again.returncode}, evaluated again")
    return "OK: says done", line[0]


@case("eval", "killed with SIGKILL while releasing, same command again")
def _(d):
    run = _copy_run(d)
    out = os.path.join(d, "ev")
    args = [f"--model_dir={run}", f"--output_dir={out}",
            "--private_attributes=", "--plots=false"]
    partial = os.path.join(d, ".ev.partial-*")
    _kill_when(PROGRAMS["eval"], args, lambda: bool(glob.glob(partial)))
    if os.path.exists(out):
        raise Silent(f"the kill left {out}, which may look finished")
    result = subprocess.run([sys.executable, PROGRAMS["eval"], *args],
                            capture_output=True, text=True)
    if result.returncode:
        return "usage error", _first_line(result.stderr.splitlines()[-1])
    if glob.glob(partial) or not os.path.isfile(os.path.join(
            out, rundir.EVAL_RESULT)):
        raise Silent(f"left {glob.glob(partial)} or no eval.json")
    return "OK: clean evaluation", ("the kill left only the hidden partial "
                                    "dir; the re-run removed it and wrote "
                                    "the evaluation")


@case("train", "backup/training_metadata.json truncated, same command")
def _(d):
    run = _copy_run(d)
    os.remove(os.path.join(run, rundir.METRICS))  # an unfinished run
    os.makedirs(os.path.join(run, "backup"))
    with open(os.path.join(run, rundir.BACKUP, rundir.BACKUP_RECORD),
              "w") as f:
        f.write('{"epoch": 1, "wei')
    return program("train", SHARED["train_args"] + [f"--output_dir={run}"])


@case("predict", "export whose manifest.json is {}")
def _(d):
    out = _copy_export(d)
    open(os.path.join(out, rundir.MANIFEST), "w").write("{}")
    return program("predict", [f"--export_dir={out}", "hello"])


@case("predict", "export with a truncated privatizer.tflite")
def _(d):
    out = _copy_export(d)
    _truncate(os.path.join(out, rundir.PHONE_MODEL))
    return program("predict", [f"--export_dir={out}", "hello"])


@case("predict", "export whose privatizer.tflite was swapped (same size)")
def _(d):
    out = _copy_export(d)
    path = os.path.join(out, rundir.PHONE_MODEL)
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0xFF
    open(path, "wb").write(bytes(data))
    return program("predict", [f"--export_dir={out}", "hello"])


@case("export", "--model_name=../../escape")
def _(d):
    return program("export", [f"--model_dir={SHARED['run']}",
                              f"--output_dir={os.path.join(d, 'x')}",
                              "--model_name=../../escape"])


@case("predict", "export without its server/ directory")
def _(d):
    out = _copy_export(d)
    shutil.rmtree(os.path.join(out, "server"))
    return program("predict", [f"--export_dir={out}", "hello"])


@case("sweep", "--grid=epsilom=1,2 (a typo)")
def _(d):
    flags = os.path.join(d, "f.flags")
    open(flags, "w").write("--mode=robust\n")
    return program("sweep", [f"--train_flagfile={flags}",
                             "--grid=epsilom=1,2",
                             f"--output_dir={os.path.join(d, 's')}"])


@case("sweep", "--grid=epsilon=1,1 (a repeated value)")
def _(d):
    flags = os.path.join(d, "f.flags")
    open(flags, "w").write("--mode=robust\n")
    return program("sweep", [f"--train_flagfile={flags}",
                             "--grid=epsilon=1,1",
                             f"--output_dir={os.path.join(d, 's')}"])


@case("demo", "--epsilon=0")
def _(d):
    return program("demo", ["--epsilon=0", "--skip_training"])


@case("eval", "a 2-class run scored on a 4-class data set")
def _(d):
    data_dir = os.path.join(d, "four")
    os.makedirs(data_dir)
    for split in ("train", "test"):
        with open(os.path.join(data_dir, f"{split}.csv"), "w") as f:
            f.write("text,label\n" + "".join(
                f"sentence number {i},{i % 4}\n" for i in range(40)))
    return program("eval", [f"--model_dir={SHARED['run']}",
                            f"--output_dir={os.path.join(d, 'ev')}",
                            "--dataset=csv", f"--data_dir={data_dir}"])


@case("eval", "--baseline_eval=/nope (refused before any work)")
def _(d):
    return program("eval", [f"--model_dir={SHARED['run']}",
                            f"--output_dir={os.path.join(d, 'ev')}",
                            "--baseline_eval=/nope"])


@case("data", "TFDS glue/sst2 offline (builder dependency missing)")
def _(d):
    from tfdptext import data
    data.load_dataset("glue/sst2", data_dir=d)


@case("data", "CSV where a quote closes two lines later")
def _(d):
    path = os.path.join(d, "t.csv")
    open(path, "w").write('text,label\nok,1\n"opened,0\nrow,1\nclosed",0\n'
                          + "".join(f"t{i},{i % 2}\n" for i in range(20)))
    from tfdptext.data import local_files
    local_files.load_files(path, path)


@case("sweep", "--grid=epsilon (no values)")
def _(d):
    flags = os.path.join(d, "f.flags")
    open(flags, "w").write("--mode=robust\n")
    return program("sweep", [f"--train_flagfile={flags}", "--grid=epsilon",
                             f"--output_dir={d}/s"])


@case("sweep", "--output_dir is an existing file")
def _(d):
    flags = os.path.join(d, "f.flags")
    open(flags, "w").write("--mode=robust\n")
    path = os.path.join(d, "file")
    open(path, "w").write("x")
    return program("sweep", [f"--train_flagfile={flags}",
                             "--grid=epsilon=1", f"--output_dir={path}"])


@case("sweep", "--train_flagfile that does not exist")
def _(d):
    return program("sweep", [f"--train_flagfile={d}/nope.flags",
                             "--grid=epsilon=1", f"--output_dir={d}/s"])


# --- Driver ----------------------------------------------------------------


def prepare(workdir):
    """One tiny run and one export of it, shared (copied) by the cases."""
    import keras_hub

    from tfdptext import models
    from tfdptext import training
    from tfdptext.export import exporter

    preset = os.path.join(workdir, "preset")
    keras_hub.models.BertBackbone(
        vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=64).save_to_preset(preset)
    shutil.copy(os.path.join(models.minilm_directory(), "vocab.txt"), preset)
    run = os.path.join(workdir, "run")
    args = TRAIN_FLAGS + [f"--preset={preset}", "--epochs=1"]
    config = training.TrainConfig(
        mode="robust", epsilon=2.0, preset=preset, max_length=16,
        batch_size=16, epochs=1, learning_rate=3e-3,
        max_train_examples=320, max_dev_examples=48)
    training.train(config, run, verbose=0)
    export = os.path.join(workdir, "export")
    exporter.export_run(run, export)
    SHARED.update(preset=preset, run=run, export=export, train_args=args)


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")[:240]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=os.path.join(ROOT, "docs",
                                                         "bad_inputs.md"))
    parser.add_argument("--only", default=None,
                        help="run only the cases whose area is this")
    args = parser.parse_args()
    started = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bad_inputs-") as shared:
        cases = [c for c in CASES if args.only in (None, c[0])]
        if any(c[0] in PROGRAMS for c in cases):
            print("Preparing one tiny run and its export ...", flush=True)
            prepare(shared)
        for area, description, fn in cases:
            with tempfile.TemporaryDirectory(prefix="case-") as workdir:
                t0 = time.time()
                outcome, message = run_case(fn, workdir)
            rows.append((area, description, outcome, message))
            print(f"[{time.time() - t0:5.1f} s] {area}: {description}: "
                  f"{outcome}: {message}", flush=True)
    counts = {}
    for _, _, outcome, _ in rows:
        key = outcome.split(" ")[0].split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    command = "KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/" \
        "bad_inputs.py" + (f" --only={args.only}" if args.only else "")
    lines = [
        "# Bad inputs: what tfdptext does with them",
        "",
        f"Generated by `{command}` on "
        f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} "
        f"({len(rows)} cases, {time.time() - started:.0f} s). Do not edit: "
        "re-run the script.",
        "",
        "Outcomes: `error (<class>)` a clear tfdptext error; `usage error` "
        "a program's message, no traceback; `RAW ...` / `TRACEBACK` an "
        "error from below tfdptext; `OK` no error and the checked result is "
        "right; `SILENT` no error but a wrong or doubtful result.",
        "",
        "Counts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        "",
        "| area | input | outcome | message |",
        "|---|---|---|---|",
    ]
    for area, description, outcome, message in rows:
        lines.append(f"| {area} | {_cell(description)} | {_cell(outcome)} "
                     f"| {_cell(message)} |")
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"\n{len(rows)} cases: {counts}\nWrote {args.output}")


if __name__ == "__main__":
    main()
