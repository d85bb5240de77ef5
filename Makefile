# Two commands do all set-up on a fresh machine:
#   make run    trains the default model (DCGAN on Fashion-MNIST); extra flags via ARGS="--flag=value ..."
#   make test   runs the test suite
# Both create or reuse the virtual environment at .venv and install what is missing.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
ARGS ?=

.PHONY: run test data venv benchmark tfjs chromium

$(VENV)/.installed-runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.installed-test: requirements-test.txt $(VENV)/.installed-runtime
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $@

venv: $(VENV)/.installed-runtime

# --export_format=tfjs: the converter in its own venv (it pins an older TensorFlow) and the
# TF.js library of the same version from npm; trainers/modes/tfjs.py expects both paths.
TFJS_VERSION := 4.22.0
TFJS_VENV := .venv-tfjs

$(TFJS_VENV)/.installed: requirements-tfjs.txt
	test -x $(TFJS_VENV)/bin/python || $(PYTHON) -m venv $(TFJS_VENV)
	$(TFJS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-tfjs.txt
	touch $@

.cache/tfjs/tf.min.js:
	mkdir -p .cache/tfjs
	cd .cache/tfjs && npm pack --silent @tensorflow/tfjs@$(TFJS_VERSION) >/dev/null
	tar -xzf .cache/tfjs/tensorflow-tfjs-$(TFJS_VERSION).tgz -C .cache/tfjs --strip-components=2 package/dist/tf.min.js
	rm .cache/tfjs/tensorflow-tfjs-$(TFJS_VERSION).tgz
	touch $@

tfjs: $(TFJS_VENV)/.installed .cache/tfjs/tf.min.js

# The browser the tfjs page test drives.
chromium:
	@command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium) \
		|| (echo "chromium is missing: run 'apt-get install chromium' as root (the tfjs page test drives it)"; exit 1)

data:
	@sh datasets/install_fashion_mnist.sh

run: venv data
	$(PY) run.py $(ARGS)

test: $(VENV)/.installed-test data tfjs chromium
	$(PY) -m pytest -q -n auto --maxprocesses=4 --dist=loadscope --no-loadscope-reorder

benchmark: venv data
	$(PY) benchmarks/throughput.py $(ARGS)
