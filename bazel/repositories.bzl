"""Repository rules that let `bazel test //...` run offline on this machine.

venv_python: a py_runtime toolchain for the project's virtualenv. Bazel 4.2
needs an absolute interpreter_path, so the rule writes it at fetch time:
<workspace root>/.venv/bin/python (created by `make install`), or the
interpreter named by $TFDPTEXT_PYTHON. The venv's packages (TensorFlow,
Keras, pytest, ...) are then importable from every py_binary and py_test.

shared_data: ../shared/data beside the checkout, when present, as
@shared//:data. Its runfiles path is <runfiles>/shared/data, which is where
tests/conftest.py looks (tests/../../shared/data); without it the tests
that need it skip, as under `make test`.
"""

_PY_BUILD = """\
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

py_runtime(
    name = "py3_runtime",
    interpreter_path = "{python}",
    python_version = "PY3",
    # The py_binary / py_test launcher runs under the same interpreter, so
    # no `python` needs to be on PATH (Debian has none without
    # python-is-python3).
    stub_shebang = "#!{python}",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":py3_runtime",
)

toolchain(
    name = "toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
"""

def _workspace_root(ctx):
    return ctx.path(Label("//:WORKSPACE")).dirname

def _venv_python_impl(ctx):
    python = ctx.os.environ.get("TFDPTEXT_PYTHON", "")
    if not python:
        python = "%s/.venv/bin/python" % _workspace_root(ctx)
    if not ctx.path(python).exists:
        fail("%s does not exist: run `make install` first, or set " % python +
             "TFDPTEXT_PYTHON to a Python with tfdptext's dependencies.")
    ctx.file("WORKSPACE", "")
    ctx.file("BUILD", _PY_BUILD.format(python = python))

venv_python = repository_rule(
    implementation = _venv_python_impl,
    environ = ["TFDPTEXT_PYTHON"],
    local = True,
)

def _shared_data_impl(ctx):
    data = ctx.path("%s/../shared/data" % _workspace_root(ctx))
    ctx.file("WORKSPACE", "")
    if data.exists:
        ctx.symlink(data, "data")
        srcs = 'glob(["data/**"])'
    else:
        srcs = "[]"
    ctx.file("BUILD", "\n".join([
        'package(default_visibility = ["//visibility:public"])',
        "",
        "# ../shared/data beside the checkout (empty when it is absent).",
        "filegroup(name = \"data\", srcs = %s)" % srcs,
        "",
    ]))

shared_data = repository_rule(
    implementation = _shared_data_impl,
    local = True,
)
