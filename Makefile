# context-compactor — `make help` lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export CARGO_TERM_COLOR ?= never

# Every step runs as if the project's venv were the active one, whatever venv the caller has
# active: maturin installs into $$VIRTUAL_ENV (else $$CONDA_PREFIX), and pyo3's build script
# links against that interpreter, so another active venv got the extension and stubtest failed.
export VIRTUAL_ENV := $(abspath $(VENV))
unexport CONDA_PREFIX

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

.PHONY: install
install: $(BIN)/python ## create .venv with maturin, the pinned test and lint tools, and a release build
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q "maturin>=1.9.4,<2"
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	$(MAKE) build

.PHONY: build
build: ## build the extension in release mode into .venv (editable)
	$(BIN)/maturin develop --release -q

.PHONY: test
test: ## cargo test (the core, no Python) and pytest against the release build
	cargo test -q
	$(BIN)/python -m pytest -q

.PHONY: lint
lint: ## cargo fmt --check, clippy -D warnings, ruff, and stubtest (the .pyi must match the module)
	cargo fmt --check
	cargo clippy -q --all-targets --all-features -- -D warnings
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m mypy.stubtest context_compactor._core --allowlist .ci/stubtest-allowlist

.PHONY: bench
bench: ## benchmarks against baselines measured in the same run (installs benches/requirements.txt)
	$(BIN)/python -m pip install -q -r benches/requirements.txt
	$(BIN)/python benches/bench_tokens.py
	$(BIN)/python benches/bench_compact.py

.PHONY: fuzz
fuzz: ## long property-based run (hypothesis profile "fuzz": many examples, random seeds)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q tests/test_properties.py tests/test_hostile.py

.PHONY: sweep
sweep: ## the full sweep over the corpus (windows 5-80%, prefixes, chains of 10), checked by tests/_oracle.py
	$(BIN)/python tests/sweep.py --full

.PHONY: all
all: install lint test ## everything CI runs: install from scratch, lint, test

.PHONY: clean
clean: ## remove build outputs and the venv
	cargo clean
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
