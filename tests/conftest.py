"""Test setup: 8 simulated CPU devices (set before JAX starts) and shared helpers."""

import os

# `make test` preloads tbbmalloc (Makefile: TESTS) into pytest, which hands it to its xdist workers; each
# worker keeps it (loaded at its start) and drops it from its environment, so that the processes the tests
# start run with the allocator users' processes have: `spmdgpt` restarts itself with tbbmalloc (its own
# choice, spmdgpt.mesh.runtime), the PyTorch side and chromium keep glibc's malloc (only that preload:
# another one the environment carries stays)
if os.environ.get("PYTEST_XDIST_WORKER") and "libtbbmalloc" in os.environ.get("LD_PRELOAD", ""):
    for _name in ("LD_PRELOAD", "TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD"):
        os.environ.pop(_name, None)

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
# The tests' programs are compiled without LLVM's machine-code optimisation (-O0), unless
# SPMDGPT_TEST_LLVM_OPT=1. XLA's HLO passes still run as in a user's run, so the fusions,
# collectives and memory figures the tests assert are the same. What is skipped is LLVM's work on
# each fused kernel, which dominates compile time for the tests' small programs. On a 2-core
# AVX2-only EPYC, that made test_units.py 30% faster (63 s to 44 s). Results may differ from an
# optimised build's in the last bits (e.g. fused multiply-adds), inside every test's tolerance.
if os.environ.get("SPMDGPT_TEST_LLVM_OPT") != "1" and "xla_backend_optimization_level" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_backend_optimization_level=0"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One persistent XLA compilation cache for the whole session, shared with the subprocesses the
# tests start (they inherit the environment): the suite compiles the same small training steps
# many times (in process and in every `spmdgpt train` subprocess), and a cache hit replaces
# seconds of compilation. The executables are the same programs, so results are unchanged.
import atexit  # noqa: E402
import contextlib  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _xla_cache = tempfile.mkdtemp(prefix="spmdgpt-tests-xla-cache-")
    atexit.register(shutil.rmtree, _xla_cache, True)
    os.environ.update(JAX_COMPILATION_CACHE_DIR=_xla_cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")

from spmdgpt.mesh.runtime import set_default_xla_flags  # noqa: E402

set_default_xla_flags()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.training.step import training_parts  # noqa: E402

# trained runs that several test files share (tests/shared_runs.py: trained once per test run)
pytest_plugins = ["shared_runs"]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Token stores of the tests go to one temporary folder, never to ~/.cache."""
    monkeypatch.setenv("SPMDGPT_CACHE", str(tmp_path_factory.getbasetemp() / "token-cache"))


def train_steps(cfg, devices, steps):
    """Run `steps` training steps of `cfg` on `devices`; returns (losses, state, rules)."""
    mesh = make_mesh(cfg.mesh, devices)
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        state, step_fn, batcher, _ = training_parts(cfg, rules)
        losses = []
        for i in range(steps):
            state, m = step_fn(state, *batcher.train_batch(i))
            losses.append(float(m["loss"]))
    return np.array(losses, dtype=np.float32), state, rules


def full_forward_samples(cfg, rules, params, prompts, n, temperature=0.0, top_k=0, top_p=1.0, seed=0,
                         vocab_limit=None, stop=None, also=None) -> list:
    """The reference the inference engine is checked against: each of `n` new tokens of each
    prompt from the model's full forward pass over the whole sequence so far (no cache, the
    training path), drawn by the engine's own `sample_rows` from prompt r's stream r of `seed`
    (token i: fold_in(fold_in(key(seed), r), i)); greedy at temperature 0. A row ends after
    `stop` when given (the stop token kept). cfg: a ModelConfig; under the mesh of `rules`.
    `also`: a second setting's keywords (temperature, top_k, top_p, seed); then both settings'
    tokens, the forward pass compiled once."""
    from spmdgpt.model import forward

    width = max(len(p) for p in prompts) + n
    logits_of = jax.jit(lambda p, t: forward(cfg, rules, p, t)[0])
    if also is not None:
        first = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        return [_samples(logits_of, params, prompts, n, width, vocab_limit or cfg.vocab_size, stop,
                         **{**first, **extra}) for extra in ({}, also)]
    return _samples(logits_of, params, prompts, n, width, vocab_limit or cfg.vocab_size, stop, temperature, top_k,
                    top_p, seed)


@functools.cache
def _drawn():
    """The engine's `row_keys` + `sample_rows` as one jitted program (eagerly, each token's filters
    compiled their `cond`s again: ~0.2 s a token)."""
    from spmdgpt.engine.paged import row_keys, sample_rows

    def draw(logits, seed, rows, i, temperature, top_k, top_p, vocab_limit):
        keys = row_keys(seed, rows, i)
        return sample_rows(logits, keys, temperature, top_k, top_p, vocab_limit)

    return jax.jit(draw, static_argnums=7)


def _samples(logits_of, params, prompts, n, width, vocab_limit, stop, temperature=0.0, top_k=0, top_p=1.0, seed=0):
    import jax.numpy as jnp

    seqs, new = [list(p) for p in prompts], [[] for _ in prompts]
    b = len(prompts)
    each = lambda value, dtype: jnp.full((b,), value, dtype)  # noqa: E731
    for i in range(n):
        tokens = np.zeros((b, width), np.int32)  # (padding on the right: causal attention never sees it)
        for r, s in enumerate(seqs):
            tokens[r, :len(s)] = s
        logits = np.asarray(logits_of(params, tokens))[np.arange(b), [len(s) - 1 for s in seqs]]
        picked = _drawn()(jnp.asarray(logits, jnp.float32), each(seed, jnp.uint32), jnp.arange(b, dtype=jnp.uint32),
                          each(i, jnp.uint32), each(temperature, jnp.float32), each(top_k, jnp.int32),
                          each(top_p, jnp.float32), vocab_limit)
        for r, t in enumerate(np.asarray(picked).tolist()):
            if not (stop is not None and new[r] and new[r][-1] == stop):
                seqs[r].append(t)
                new[r].append(t)
    return new


def read_jsonl(path):
    """Rows of a JSONL log, parsed strictly (NaN / Infinity tokens are an error, as in most
    non-Python JSON readers)."""
    def reject(token):
        raise ValueError(f"{path}: non-standard JSON token {token}")

    return [json.loads(line, parse_constant=reject) for line in open(path)]


# How long a test waits for a subprocess's progress (a checkpoint, a metrics row): a guard against
# a hang, never a bound a slow but healthy run can hit (a loaded 2-core AVX2-only box took over
# 120 s to compile and run five steps). The wait ends at once when the process exits.
PATIENCE_S = 900


def wait_until(done, proc, what: str, limit: float = PATIENCE_S, poll: float = 0.05) -> None:
    """Poll `done()` until it holds; fail with `what` if `proc` (a Popen) exits first or after `limit`
    seconds."""
    deadline = time.monotonic() + limit
    while not done():
        assert proc.poll() is None, f"the process ended (exit {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} after {limit} s"
        time.sleep(poll)


def train_chat_run(folder: Path, answer=lambda i: f"{2 * i}!", extra=(), vocab: int = 32, context: int = 160) -> Path:
    """A staircase-sized run fine-tuned for 2 steps on 30 conversations ("i and i?" answered
    answer(i), "2i!") and the lines `extra` with the default chat template, a vocabulary of `vocab`
    ids and a context of `context` tokens: folder/run (the data and its cache in folder too)."""
    from spmdgpt.cli import main

    rows = [{"messages": [{"role": "user", "content": f"{i} and {i}?"}, {"role": "assistant", "content": answer(i)}]}
            for i in range(30)]
    (folder / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in [*rows, *extra]))
    run = folder / "run"
    assert main(["train", "+experiment=staircase", "data.source=text", f"model.vocab_size={vocab}", "data.seq_len=32",
                 "data.batch_size=8", "train.steps=2", f"model.max_seq_len={context}", "train.rollout_tokens=0",
                 f"+data.datasets.c={{paths:[{folder / 'c.jsonl'}],format:chat}}", f"run.dir={run}",
                 f"data.cache_dir={folder / 'cache'}"]) == 0
    return run


@pytest.fixture
def staircase_cfg():
    def make(*overrides):
        return load_config(["+experiment=staircase", *overrides])

    return make


# What CI provides, required there: .ci/run sets SPMDGPT_REQUIRE_PLANS=1 (it installs the plan
# compilers), SPMDGPT_REQUIRE_BROWSER=1 where chromium is installed and SPMDGPT_REQUIRE_NPM=1
# where web/'s npm packages are; under one, a test whose prerequisite is missing fails instead of
# skipping (a broken install must not turn the FP8, MoE, plan or browser checks into quiet skips).
def required(flag: str) -> bool:
    return os.environ.get(flag) == "1"


def missing(flag: str, why: str):
    """Skip the test, saying `why`; fail it instead when the environment sets `flag`=1."""
    if required(flag):
        pytest.fail(f"{flag}=1 but {why}")
    pytest.skip(why)


def compile_only_or_skip(topology: str) -> list:
    """The compile-only devices of `topology` (spmdgpt.plan.topology), or `missing` naming the absent
    compiler (SPMDGPT_REQUIRE_PLANS)."""
    from spmdgpt.config import ConfigError
    from spmdgpt.plan.topology import compile_only_devices

    try:
        return compile_only_devices(topology)
    except ConfigError as e:
        missing("SPMDGPT_REQUIRE_PLANS", str(e))


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not required("SPMDGPT_REQUIRE_BROWSER"),
                                    reason="needs Debian's chromium (apt-get install chromium)")


# WebGPU in headless Chromium without a GPU: SwiftShader's CPU Vulkan as the adapter
WEBGPU_ON_CPU = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader", "--enable-features=Vulkan"]


@contextlib.contextmanager
def chromium_tab(url: str, args: tuple = ()):
    """(a headless Chromium tab at `url`, the list its console errors and page errors go to),
    driven by Playwright (Debian's chromium: Playwright cannot download its own browsers here)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", *args])
        try:
            tab = browser.new_page()
            errors = []
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.goto(url)
            yield tab, errors
        finally:
            browser.close()


class TorchSide:
    """A client of tests/torch_side.py, the PyTorch side of the comparisons, served by one
    process in the PyTorch environment (benchmarks/torch_env.py) for a whole test process."""

    def __init__(self, python: str):
        self.dir = Path(tempfile.mkdtemp(prefix="spmdgpt-torch-side-"))
        self.proc = subprocess.Popen([python, str(Path(__file__).parent / "torch_side.py")], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.versions = self._answer()
        self.n = 0

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"tests/torch_side.py ended (exit {self.proc.wait()}); its stderr is above")
        return json.loads(line)

    def _file(self, array=None) -> str:
        self.n += 1
        path = self.dir / f"{self.n}.npy"
        if array is not None:
            np.save(path, np.asarray(array))
        return str(path)

    def ask(self, op: str, **request) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        answer = self._answer()
        if not answer.pop("ok"):
            raise AssertionError(f"tests/torch_side.py {op} failed:\n{answer['error']}")
        return answer

    def ask_array(self, op: str, tokens, **request) -> tuple:
        """(the answer, the array the side wrote) of a request that takes tokens and writes one."""
        out = self._file()
        answer = self.ask(op, tokens=self._file(tokens), out=out, **request)
        return answer, np.load(out)

    def logits(self, folder, tokens) -> np.ndarray:
        """transformers' float32 logits of `tokens` for the model in `folder`."""
        return self.ask_array("logits", tokens, folder=str(folder))[1]

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def torch_python():
    """The Python of the PyTorch side environment (benchmarks/torch_env.py). Without one the test
    skips, saying how to build it, except under `make test`, which builds it and sets
    SPMDGPT_REQUIRE_TORCH=1: there a missing side fails the test."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from torch_env import torch_python as find

    python = find()
    if python is None:
        if os.environ.get("SPMDGPT_REQUIRE_TORCH") == "1":
            pytest.fail("SPMDGPT_REQUIRE_TORCH=1 but no Python with PyTorch: run `make torch-env`")
        pytest.skip("needs PyTorch and transformers in their side environment: run `make torch-env`")
    return python


@pytest.fixture(scope="session")
def torch_side(torch_python):
    """The PyTorch side (transformers, benchmarks/torch_gpt.py), one server for the test process (an
    xdist worker's files share it: its requests hold no state, and its start, importing torch and
    transformers, is ~3.5 s)."""
    side = TorchSide(torch_python)
    yield side
    side.close()


# ------------------------------------------------------------------ the schedule over xdist workers
# `make test` runs pytest-xdist with --dist loadfile: each test file runs whole in one worker (its
# module fixtures are built once), and the files are handed out longest first (their seconds in
# tests/budget.toml), so that the long files start first and none starts last and ends alone
# while the other worker idles. The Makefile turns xdist's own order (by the number of tests in a
# file) off: --no-loadscope-reorder. (Not --dist loadgroup with a group per file: under pytest 9
# xdist 3.8 cannot rename the tests' ids into their groups, and every test runs as its own group.)
def pytest_collection_modifyitems(config, items):
    import tomllib

    budget = Path(__file__).with_name("budget.toml")
    seconds = tomllib.loads(budget.read_text())["files"] if budget.is_file() else {}
    # a file without a budget line (a new one) goes first: it may be long, and the budget check fails it anyway
    items.sort(key=lambda item: -seconds.get(item.path.name, float("inf")))
