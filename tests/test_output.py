"""What the programs print: no start-up noise, no TensorFlow for --help,
progress fit for where it goes, and the epsilon per text first."""

import io
import json
import os
import subprocess
import sys

import pytest

from tfdptext import rundir
from tfdptext.cli import quiet
from tfdptext.errors import TfdptextError
from tfdptext.privacy import categorical
from tfdptext.privacy import headline
from tfdptext.privacy import laplace
from tfdptext.privacy import metric

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = ("train", "evaluate", "export", "predict", "sweep", "audit",
            "pretrain", "binarize", "demo", "privatize_corpus")

NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are "
    "written to STDERR",
    "I0000 00:00:1795455991.125775   27170 cudart_stub.cc:31] Could not find "
    "cuda drivers on your machine, GPU will not be used.",
    "E0000 00:00:1795456046.069979   27258 cuda_platform.cc:52] failed call "
    "to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR "
    "(303)",
    "I0000 00:00:1795451786.024725    5081 cpu_feature_guard.cc:227] This "
    "TensorFlow binary is optimized to use available CPU instructions in "
    "performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, "
    "rebuild TensorFlow with the appropriate compiler flags.",
]
INFO = [
    "I1123 17:48:16.540634 140381293955968 functional_saver.py:440] Sharding "
    "callback duration: 54 microseconds",
    "INFO:tensorflow:Assets written to: /tmp/x/assets",
    "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
]
KEPT = [
    "W0000 00:00:1.0 1 some_kernel.cc:1] a real warning",
    "tfdptext-train: error: `epsilon` must be finite and > 0",
    "Traceback (most recent call last):",
]


def test_noise_is_dropped_and_the_rest_kept():
    for line in NOISE + INFO:
        assert quiet.is_noise(line), line
    for line in KEPT:
        assert not quiet.is_noise(line), line
    # --verbose keeps INFO; a GPU machine keeps the CUDA probing lines.
    assert not any(quiet.is_noise(line, verbose=True) for line in INFO)
    assert not quiet.is_noise(NOISE[1], gpu=True)
    assert not quiet.is_noise(NOISE[2], gpu=True)


def test_filtered_stderr_filters_what_native_code_writes(tmp_path):
    # A child process writes to file descriptor 2 directly, as C++ does.
    script = (
        "import os\n"
        "from tfdptext.cli import quiet\n"
        f"lines = {NOISE + INFO + KEPT!r}\n"
        "with quiet.filtered_stderr():\n"
        "    for line in lines:\n"
        "        os.write(2, (line + '\\n').encode())\n"
        "os.write(2, b'after the block\\n')\n")
    result = subprocess.run([sys.executable, "-c", script],
                            capture_output=True, text=True, timeout=60,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    expected = KEPT + ["after the block"]
    if quiet.has_nvidia_device():
        expected = NOISE[1:3] + expected
    assert lines == expected


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere():
    assert quiet.progress_verbosity(_Stream(True)) == 1
    assert quiet.progress_verbosity(_Stream(False)) == 2
    assert quiet.progress_verbosity(object()) == 2


@pytest.mark.parametrize("module", PROGRAMS)
def test_help_and_flag_errors_do_not_import_tensorflow(module):
    for argv in (["--help"], ["--no_such_flag=1"]):
        script = (
            "import atexit, sys\n"
            "atexit.register(lambda: print('TF', 'tensorflow' in "
            "sys.modules))\n"
            f"sys.argv = ['tfdptext', *{argv!r}]\n"
            f"from tfdptext.cli import {module}\n"
            f"{module}.main()\n")
        result = subprocess.run([sys.executable, "-c", script],
                                capture_output=True, text=True, timeout=120,
                                cwd=ROOT)
        assert "TF False" in result.stdout, (argv, result.stdout[-500:],
                                             result.stderr[-500:])
        if argv == ["--help"]:
            assert "--[no]verbose" in result.stdout


def test_the_headline_says_epsilon_per_text_and_warns_when_weak():
    coordinate = headline.lines(laplace.laplace_guarantee(1.0, 16))
    assert "epsilon 16 for the whole release of one text" in coordinate[0]
    assert "1 per coordinate x 16 coordinates" in coordinate[0]
    assert coordinate[1].startswith("WARNING: epsilon 16 per text")
    code = headline.lines(categorical.code_guarantee(2.0, 4))
    assert code == ["Privacy: epsilon 2 for the whole release of one text "
                    "(delta 0)."]
    # Exactly at the threshold: no warning; just above: one.
    at = laplace.laplace_guarantee(headline.WEAK_EPSILON, 8, "vector")
    assert headline.warning(at) is None
    above = laplace.laplace_guarantee(headline.WEAK_EPSILON * 1.01, 8,
                                      "vector")
    assert headline.warning(above) is not None
    token = headline.lines(metric.dchi_guarantee(80.0))
    assert len(token) == 1 and "no single epsilon" in token[0]


def test_a_run_directory_given_as_an_export_points_to_tfdptext_export(
        tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / rundir.CONFIG).write_text(json.dumps({"mode": "none"}))
    with pytest.raises(TfdptextError, match="tfdptext-export --model_dir"):
        rundir.ExportDir(str(run)).check()
    with pytest.raises(TfdptextError, match="tfdptext-export"):
        rundir.ExportDir(str(tmp_path)).check()
