"""The main of every py_test in tests/BUILD: runs one test file with pytest.

    bazel_pytest.py tests/test_privacy.py [pytest options]

Bazel runs tests in the runfiles tree, where tests/conftest.py sits beside
the test file. pytest's cache is off (the runfiles tree is not ours to
write), its temporary directories go under $TEST_TMPDIR, and its JUnit XML
goes where Bazel asks ($XML_OUTPUT_FILE), so that test results show per case.
`bazel test --test_filter=EXPR` becomes pytest's `-k EXPR`.
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest


def main(argv):
    args = list(argv) + ["-p", "no:cacheprovider", "-rfEs",
                         "--durations=5"]
    test_filter = os.environ.get("TESTBRIDGE_TEST_ONLY")
    if test_filter:
        args += ["-k", test_filter]
    tmp = os.environ.get("TEST_TMPDIR")
    if tmp:
        args += ["--basetemp", os.path.join(tmp, "pytest")]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args += ["--junitxml", xml]
    return pytest.main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
