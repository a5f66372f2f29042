# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check
EXTRAS := all,dev,test-s3,test-actions,test-frameworks,test-xgboost,test-profiler,test-dashboard,test-trackers,test-trainers
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)
# MXNet's last release (1.9.1) needs numpy<1.24: its tests (tests/mxnet) run in a second environment
MXVENV  ?= .venv-mxnet
MXPY    := $(MXVENV)/bin/python
MXSTAMP := $(MXVENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)

.PHONY: demo test test-mxnet bench lint install clean chromium

$(STAMP):
	test -x $(PY) || python3 -m venv $(VENV)
	# a plain `torch` pulls a CUDA build of several GB: pin the CPU wheel first
	$(PIP) torch==2.13.0
	# pytest-xdist: `make test` runs the suite on both cores (pytest -n 2)
	$(PIP) -e ".[$(EXTRAS)]" pytest-xdist==3.8.0
	rm -f $(VENV)/.installed-*
	touch $@

$(MXSTAMP):
	test -x $(MXPY) || python3.11 -m venv $(MXVENV)
	$(MXPY) -m pip install --quiet --disable-pip-version-check -e ".[mxnet]" "pytest>=8" "pytest-timeout>=2.3"
	rm -f $(MXVENV)/.installed-*
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/mldbg demo

# the dashboard's browser test drives Debian's Chromium (Playwright's own browser download is not used)
chromium:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# the MXNet tests in their own environment (the main suite does not collect them), then the main
# suite in two worker processes, one a core; each test file runs whole in one worker, so that
# the module-scoped trainings are made once
test: $(STAMP) chromium
	$(MAKE) --no-print-directory test-mxnet
	$(PY) -m pytest -q -p no:cacheprovider --timeout=600 -n 2 --dist loadfile

test-mxnet: $(MXSTAMP)
	$(MXPY) -m pytest -q -p no:cacheprovider --timeout=600 tests/mxnet

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) $(MXVENV) build src/*.egg-info
