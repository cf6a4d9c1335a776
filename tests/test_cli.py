"""The programs as console entry points (tfdptext.cli): flags derived from
the library's dataclasses, usage errors, and the entry points of setup.py."""

import ast
import dataclasses
import glob
import importlib
import os
import subprocess
import sys

import pytest
from absl import flags

from tfdptext.cli import flags as cli_flags
from tfdptext.cli import program
from tfdptext.errors import ArgumentError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER_FOLDERS = ("train", "eval", "export")
# A launcher's own folder (train/) heads its sys.path, not the checkout:
# PYTHONPATH makes it run this checkout's tfdptext, not whichever one the
# venv has installed (another worktree's, in an editable install).
ENV = {**os.environ, "KERAS_BACKEND": "tensorflow",
       "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
       "PYTHONPATH": os.pathsep.join(
           p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}


def _console_scripts():
    """setup.py's console_scripts: program name -> (module, attribute)."""
    tree = ast.parse(open(os.path.join(ROOT, "setup.py")).read())
    [call] = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
              and getattr(node.func, "id", None) == "setup"]
    [entry_points] = [ast.literal_eval(k.value) for k in call.keywords
                      if k.arg == "entry_points"]
    scripts = {}
    for spec in entry_points["console_scripts"]:
        name, target = (part.strip() for part in spec.split("="))
        module, attribute = target.split(":")
        scripts[name] = (module, attribute)
    return scripts


def _defined(module_name):
    """A fresh FlagValues holding the program's flags."""
    flag_values = flags.FlagValues()
    importlib.import_module(module_name).define_flags(flag_values)
    return flag_values


def _flag_default(value):
    return list(value) if isinstance(value, tuple) else value


# Flags from TrainConfig.


def test_train_flags_are_train_config_fields():
    from tfdptext.training import TrainConfig

    flag_values = _defined("tfdptext.cli.train")
    fields = dataclasses.fields(TrainConfig)
    assert set(flag_values) == {f.name for f in fields} | {"output_dir"}
    for field in fields:
        flag = flag_values[field.name]
        assert flag.default == _flag_default(field.default), field.name
        assert flag.help.endswith(field.metadata.get("help", "")), field.name
        if "choices" in field.metadata:
            assert flag.parser.enum_values == list(
                field.metadata["choices"]), field.name


def test_train_enum_flags_take_the_library_constants():
    from tfdptext.training import config

    flag_values = _defined("tfdptext.cli.train")
    for name, constant in (("mode", config.MODES),
                           ("mechanism", config.MECHANISMS),
                           ("sensitivity", config.SENSITIVITIES),
                           ("pooling", config.POOLINGS)):
        assert flag_values[name].parser.enum_values == list(constant), name


def test_train_config_built_from_parsed_flags():
    from tfdptext.training import TrainConfig

    flag_values = _defined("tfdptext.cli.train")
    flag_values(["tfdptext-train", "--mode=adv", "--adv_lambda=0.5",
                 "--adv_attributes=gender,age", "--max_length=16",
                 "--output_dir=runs/x"])
    assert cli_flags.build(TrainConfig, flag_values) == TrainConfig(
        mode="adv", adv_lambda=0.5, adv_attributes=["gender", "age"],
        max_length=16)


def test_eval_and_demo_take_train_config_fields():
    from tfdptext.cli import demo
    from tfdptext.cli import evaluate
    from tfdptext.training import TrainConfig

    flag_values = _defined("tfdptext.cli.evaluate")
    for name in evaluate.data_fields():
        assert flag_values[name].default is None  # the run's
        assert flag_values[name].help.endswith("Default: the run's.")
    flag_values = _defined("tfdptext.cli.demo")
    for name in demo.TRAIN_FIELDS:
        assert flag_values[name].default == demo.DEMO_DEFAULTS.get(
            name, getattr(TrainConfig(), name))


@pytest.mark.parametrize("module", sorted(
    m for m, _ in _console_scripts().values()))
def test_every_program_defines_its_flags(module):
    assert len(list(_defined(module))) >= 1


# The flag helper on a dataclass of every kind.


@dataclasses.dataclass
class _Options:
    name: str
    kind: str = dataclasses.field(
        default="a", metadata={"help": "The kind.", "choices": ("a", "b")})
    tags: tuple = ("x",)
    count: int | None = None
    ratio: float = dataclasses.field(default=0.5,
                                     metadata={"choices": (0.5, 1.0)})
    label: str | int | None = None
    quiet: bool = False


def _options_flags(*argv):
    flag_values = flags.FlagValues()
    cli_flags.define_flags(_Options, flag_values=flag_values)
    flag_values(["prog", *argv])
    return flag_values


def test_helper_types_defaults_help_and_choices():
    flag_values = _options_flags("--name=n", "--tags=p,q", "--count=3",
                                 "--label=2", "--quiet")
    assert flag_values["name"].flag_type() == "string"
    assert flag_values["kind"].parser.enum_values == ["a", "b"]
    assert flag_values["kind"].help == "<a|b>: The kind."
    assert flag_values["count"].flag_type() == "int"
    assert flag_values["ratio"].flag_type() == "float"
    assert flag_values["quiet"].flag_type() == "bool"
    assert "_Options.count" in flag_values["count"].help
    assert cli_flags.build(_Options, flag_values) == _Options(
        name="n", tags=("p", "q"), count=3, label="2", quiet=True)


def test_helper_refuses_bad_flags_and_unknown_types():
    with pytest.raises(flags.IllegalFlagValueError, match="name"):
        _options_flags()  # required
    with pytest.raises(flags.IllegalFlagValueError, match="ratio"):
        _options_flags("--name=n", "--ratio=0.7")
    with pytest.raises(flags.IllegalFlagValueError):
        _options_flags("--name=n", "--kind=c")

    @dataclasses.dataclass
    class Mapping:
        table: dict | None = None

    with pytest.raises(TypeError, match="table"):
        cli_flags.define_flags(Mapping, flag_values=flags.FlagValues())


# Usage errors.


def _raising(error):
    def program_main(argv):
        raise error
    return program_main


def test_tfdptext_error_is_a_one_line_usage_error(capsys):
    main = program.with_usage_errors("tfdptext-x",
                                     _raising(ArgumentError("bad flag")))
    with pytest.raises(SystemExit) as exit_info:
        main(["tfdptext-x"])
    assert exit_info.value.code == program.USAGE_ERROR_STATUS == 2
    assert capsys.readouterr().err == "tfdptext-x: error: bad flag\n"


def test_other_errors_are_not_usage_errors():
    main = program.with_usage_errors("tfdptext-x",
                                     _raising(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        main(["tfdptext-x"])
    # A plain ValueError is not the project's error: it keeps its traceback.
    main = program.with_usage_errors("tfdptext-x",
                                     _raising(ValueError("a bug")))
    with pytest.raises(ValueError, match="a bug"):
        main(["tfdptext-x"])


def test_train_config_errors_are_usage_errors():
    from tfdptext.training import TrainConfig

    with pytest.raises(ArgumentError, match="`eta` is required"):
        TrainConfig(mode="token_rep").validate()


_RUN = """
import sys
from tfdptext.cli import program
from tfdptext.errors import TfdptextError

def fail(argv):
    raise {error}("broken input")

program.run("tfdptext-x", "__main__", fail)
"""


@pytest.mark.parametrize("error,status,traceback", [
    ("TfdptextError", 2, False), ("RuntimeError", 1, True)])
def test_errors_through_absl(error, status, traceback):
    result = subprocess.run(
        [sys.executable, "-c", _RUN.format(error=error)],
        capture_output=True, text=True, env=ENV, timeout=120)
    assert result.returncode == status
    assert ("Traceback" in result.stderr) == traceback
    if not traceback:
        assert result.stderr == "tfdptext-x: error: broken input\n"


# Input that is not UTF-8: a usage error naming the argument, never
# echoing it (it may be a user's text), no traceback.
SECRET = b"my secret diagnosis \xff"

_READ_STDIN = """
import sys
from tfdptext.cli import program

def read(argv):
    return len(sys.stdin.buffer.read().decode("utf-8"))

program.run("tfdptext-x", "__main__", read)
"""


def test_non_utf8_arguments_are_named_not_echoed():
    bad = SECRET.decode("utf-8", "surrogateescape")
    assert program.non_utf8_argument(["prog", "--a=1", "ok"]) == ""
    assert program.non_utf8_argument(["prog", "--x=1", bad]).startswith(
        "argument 2 is not valid UTF-8 (an undecodable byte at character "
        "21)")
    assert program.non_utf8_argument(["prog", "--text=" + bad]).startswith(
        "argument 1 (the value of --text) is not valid UTF-8")
    assert program.non_utf8_argument(["prog", "--output_dir", bad]
                                     ).startswith(
        "argument 2 (after --output_dir) is not valid UTF-8")


@pytest.mark.parametrize("module", sorted(
    m for m, _ in _console_scripts().values()))
def test_every_program_runs_through_program_run(module):
    """The checks above apply to every program: each main is
    program.run."""
    source = open(os.path.join(ROOT, *module.split(".")) + ".py").read()
    assert "program.run(NAME, __name__," in source


@pytest.mark.parametrize("argv, stdin, named", [
    ([b"tfdptext-predict", b"--export_dir=x", SECRET], b"",
     "argument 2 is not valid UTF-8"),
    ([b"tfdptext-predict", b"--export_dir=" + SECRET, b"a text"], b"",
     "argument 1 (the value of --export_dir) is not valid UTF-8"),
    (None, SECRET, "input that is not valid UTF-8 (utf-8: invalid start "
     "byte at position 20)"),
])
def test_non_utf8_input_is_a_usage_error(argv, stdin, named):
    if argv is None:  # a program reading standard input
        command = [sys.executable.encode(), b"-c", _READ_STDIN.encode()]
        name = "tfdptext-x"
    else:
        command = [sys.executable.encode(), b"-c",
                   b"import sys; sys.argv[0] = 'tfdptext-predict'; "
                   b"from tfdptext.cli.predict import main; main()",
                   *argv[1:]]
        name = "tfdptext-predict"
    result = subprocess.run(command, input=stdin, capture_output=True,
                            env=ENV, timeout=120)
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, err
    assert err.startswith(f"{name}: error: {named}"), err
    assert "Traceback" not in err and b"secret" not in result.stderr + \
        result.stdout


def test_program_usage_error_has_no_traceback(tmp_path):
    taken = tmp_path / "a_file"
    taken.write_text("keep")
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "train", "tfdptext-train"),
         f"--output_dir={taken}"],
        capture_output=True, text=True, env=ENV, timeout=300)
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines()
              if "error:" in line and "tfdptext" in line]
    assert line.startswith("tfdptext-train: error: `output_dir`")
    assert "Traceback" not in result.stderr
    assert taken.read_text() == "keep"


def test_help_shows_the_program_and_its_flags():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "eval", "tfdptext-sweep"),
         "--help"], capture_output=True, text=True, env=ENV, timeout=120)
    assert "Trains and evaluates over a grid" in result.stdout
    assert "--train_flagfile" in result.stdout


# Entry points.


def test_console_scripts_import_and_expose_main():
    scripts = _console_scripts()
    launchers = [path for folder in LAUNCHER_FOLDERS for path in
                 glob.glob(os.path.join(ROOT, folder, "tfdptext-*"))]
    assert {os.path.basename(p) for p in launchers} == set(scripts)
    for name, (module, attribute) in scripts.items():
        assert callable(getattr(importlib.import_module(module), attribute))
        [launcher] = [p for p in launchers if os.path.basename(p) == name]
        package, _, short = module.rpartition(".")
        assert f"from {package} import {short}" in open(launcher).read()


@pytest.mark.parametrize("flag, named", [
    ("--eta=0", "`eta`"),
    ("--mode=none --eta=80", "`eta`"),
    ("--eta=80 --eval_every=0", "`eval_every`"),
    ("--eta=80 --head_rate_multiplier=0.5", "`head_rate_multiplier`"),
    ("--eta=80 --objective=probabilistic --num_privatizations=1",
     "`num_privatizations`")])
def test_pretrain_refuses_bad_flags_before_any_work(tmp_path, flag, named):
    out = tmp_path / "mlm"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "train", "tfdptext-pretrain"),
         *flag.split(), f"--output_dir={out}"],
        capture_output=True, text=True, env=ENV, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = [line for line in result.stderr.splitlines()
              if line.startswith("tfdptext-pretrain: error:")]
    assert named in line
    assert "Traceback" not in result.stderr
    assert not out.exists()
