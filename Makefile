# attnlab: two commands on a fresh clone.
#   make demo   creates .venv, installs the kit, builds every lab, grades sample submissions
#   make test   the same set-up, then the whole test suite (what CI runs)

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Any torch >= 2.2 works. This pin installs a CPU build where one is cached locally; on a machine with a
# torch already in the venv nothing is reinstalled. Override: make test TORCH_SPEC="torch>=2.2"
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: demo test build check lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[instructor,dev,postgres,marking]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/attnlab demo

test: $(VENV)/.installed
	$(VENV)/bin/attnlab build --check
	$(PY) -m pytest $(PYTEST_ARGS)

build: $(VENV)/.installed
	$(VENV)/bin/attnlab build

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests instructor benchmarks

clean:
	rm -rf $(VENV) demo-submissions grading-out
