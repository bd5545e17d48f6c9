# The two commands a new user needs live here: `make train` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup train test test-all bench web clean

# EXTRAS: the optional dependencies installed with the package (CI adds the plan compilers:
# EXTRAS=dev,tpu-plan,gpu-plan)
EXTRAS ?= dev

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP)

setup: $(STAMP)

# Train a character-level model on Tiny Shakespeare (CPU by default), then print a sample.
train: $(STAMP)
	$(BIN)/spmdgpt train +experiment=shakespeare_char $(ARGS)

# Fast test suite (slow tests excluded; `make test-all` runs them too), in TEST_WORKERS processes
# (pytest-xdist; each test file stays in one process, so its module fixtures are built once).
TEST_WORKERS ?= 2
TESTS := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test: $(STAMP)
	$(TESTS) $(ARGS)

test-all: $(STAMP)
	$(TESTS) -m "" $(ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

# Rebuild the browser bundle shipped in the package (src/spmdgpt/web/) from web/src (needs npm).
web:
	cd web && npm ci --no-audit --no-fund && npm run build

clean:
	rm -rf $(VENV) runs .pytest_cache
