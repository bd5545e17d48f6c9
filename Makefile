# The two commands a new user needs live here: `make train` and `make test`.
# spmdgpt needs Python >= 3.12 (JAX 0.12): found on PATH or in pyenv (tools/find-python), or PYTHON=...
PYTHON ?= $(shell tools/find-python 3.12)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# PyTorch + transformers, only for the tests and benchmarks that compare with them, in a side
# environment (benchmarks/torch_env.py): Python 3.11 where this machine's CPU wheel of torch is
TORCH_PYTHON ?= $(shell tools/find-python 3.11 3.11 2>/dev/null || tools/find-python 3.12)
TORCH_VENV   ?= .venv-torch
TORCH_STAMP  := $(TORCH_VENV)/.installed

.PHONY: setup torch-env envs train lint test test-all bench web clean

# EXTRAS: the optional dependencies installed with the package (CI adds the plan compilers:
# EXTRAS=dev,tpu-plan,gpu-plan). tools/install.py installs with uv (pinned there; pip's settings
# handed over, pip itself where uv cannot: both environments from scratch 56 s -> 21 s) and without
# .pyc files: a module's .pyc is written at its first import, not every module's at install (pip
# --no-compile took a fresh install of the CI extras from 103 s to 56 s, the PyTorch side from
# 60 s to 26 s, on the 2-core AVX-512 EPYC); the tests run with PYTHONDONTWRITEBYTECODE unset so that
# they are written (where the environment sets it, as this machine's image does, every test process
# compiled jax's modules again: +46 s of tests; compileall over the venvs after pip: +69 s of install).
EXTRAS ?= dev

# (a .venv of an older Python, from before the move to 3.12, is made again)
$(STAMP): pyproject.toml
	@if ! $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
	    py="$(PYTHON)"; test -n "$$py" || exit 1; rm -rf $(VENV); \
	    echo "$$py -m venv $(VENV)"; "$$py" -m venv $(VENV); fi
	$(BIN)/python tools/install.py -e '.[$(EXTRAS)]'
	touch $(STAMP)

setup: $(STAMP)

$(TORCH_STAMP): requirements-torch.txt
	test -x $(TORCH_VENV)/bin/python || $(TORCH_PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python tools/install.py -r requirements-torch.txt
	touch $(TORCH_STAMP)

torch-env: $(TORCH_STAMP)

# Train a character-level model on Tiny Shakespeare (CPU by default), then print a sample.
train: $(STAMP)
	$(BIN)/spmdgpt train +experiment=shakespeare_char $(ARGS)

# Fast test suite (slow tests excluded; `make test-all` runs them too), in TEST_WORKERS processes
# (pytest-xdist; each test file stays in one process, so its module fixtures are built once;
# tests/conftest.py hands the files out longest first, by their seconds in tests/budget.toml).
# The tests that compare with PyTorch or transformers use the side environment, which is built
# first; SPMDGPT_REQUIRE_TORCH=1 makes them fail rather than skip if it is missing.
# After the tests, tools/suite_budget.py checks each file's time against tests/budget.toml.
TEST_WORKERS ?= 2
TEST_TIMES := $(VENV)/test-times.xml
# The test processes run with oneTBB's allocator (tbbmalloc, the `tbb` wheel: a dependency on Linux
# x86-64) in place of glibc's malloc, keeping the blocks of 8 MiB and more it frees for reuse
# (TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD): the suite is bound by XLA's compiler, which spends ~15% of its
# time in glibc's malloc and free. Preloaded into pytest and its workers; tests/conftest.py drops it
# from the workers' environment, so the processes tests start run as users' do: `spmdgpt` restarts
# itself with tbbmalloc as every spmdgpt process does (spmdgpt.mesh.runtime), the PyTorch side and
# chromium run glibc's malloc. Interleaved pytest -n 2 runs of six large files: 275 s and 275 s
# against 295 s and 311 s with glibc (docs/development.md, BENCHMARKS).
# (Expanded when the recipe runs, after the install: a missing library preloads nothing.)
TBB_LIB = $(abspath $(VENV))/lib
PRELOAD = $(shell test -e $(TBB_LIB)/libtbbmalloc_proxy.so.2 && echo 'TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD=8388608 \
	LD_PRELOAD="$(TBB_LIB)/libtbbmalloc.so.2 $(TBB_LIB)/libtbbmalloc_proxy.so.2"')
TESTS = $(PRELOAD) PYTHONDONTWRITEBYTECODE= SPMDGPT_REQUIRE_TORCH=1 SPMDGPT_TORCH_PYTHON=$(abspath $(TORCH_VENV))/bin/python \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	--junitxml=$(TEST_TIMES) -o junit_family=xunit2

# ruff (pinned in the dev extra, configured in pyproject.toml) first: `make test` is what CI runs
LINT := $(BIN)/ruff check src tests benchmarks tools

lint: $(STAMP)
	$(LINT)

# both environments at once: two pip installs overlap on two cores (1:44 -> 1:12 from a warm pip cache)
envs:
	@$(MAKE) --no-print-directory -j2 $(STAMP) $(TORCH_STAMP)

# (lint in the recipe, not as a prerequisite: under make -j it would install .venv beside envs' install)
test: envs
	$(LINT)
	$(TESTS) $(ARGS)
	$(BIN)/python tools/suite_budget.py $(TEST_TIMES)

test-all: envs
	$(TESTS) -m "" $(ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

# Rebuild the browser bundle shipped in the package (src/spmdgpt/web/) from web/src (needs npm).
web:
	cd web && npm ci --no-audit --no-fund && npm run build

clean:
	rm -rf $(VENV) $(TORCH_VENV) runs .pytest_cache
