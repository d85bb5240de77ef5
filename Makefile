# Two commands do all set-up on a fresh machine:
#   make run    trains the default model (DCGAN on Fashion-MNIST); extra flags via ARGS="--flag=value ..."
#   make test   runs the test suite
# Both create or reuse the virtual environment at .venv and install what is missing.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
ARGS ?=

.PHONY: run test data venv benchmark

$(VENV)/.installed-runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.installed-test: requirements-test.txt $(VENV)/.installed-runtime
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $@

venv: $(VENV)/.installed-runtime

data:
	@sh datasets/install_fashion_mnist.sh

run: venv data
	$(PY) run.py $(ARGS)

test: $(VENV)/.installed-test data
	$(PY) -m pytest -q -n auto --maxprocesses=4 --dist=loadscope --no-loadscope-reorder

benchmark: venv data
	$(PY) benchmarks/throughput.py $(ARGS)
