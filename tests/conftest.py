"""Test setup: 8 simulated CPU devices (set before JAX starts) and shared helpers."""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One persistent XLA compilation cache for the whole session, shared with the subprocesses the
# tests start (they inherit the environment): the suite compiles the same small training steps
# many times (in process and in every `spmdgpt train` subprocess), and a cache hit replaces
# seconds of compilation. The executables are the same programs, so results are unchanged.
import atexit  # noqa: E402
import contextlib  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _xla_cache = tempfile.mkdtemp(prefix="spmdgpt-tests-xla-cache-")
    atexit.register(shutil.rmtree, _xla_cache, True)
    os.environ.update(JAX_COMPILATION_CACHE_DIR=_xla_cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")

from spmdgpt.runtime import set_default_xla_flags  # noqa: E402

set_default_xla_flags()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.trainer import training_parts  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Token stores of the tests go to one temporary folder, never to ~/.cache."""
    monkeypatch.setenv("SPMDGPT_CACHE", str(tmp_path_factory.getbasetemp() / "token-cache"))


def train_steps(cfg, devices, steps):
    """Run `steps` training steps of `cfg` on `devices`; returns (losses, state, rules)."""
    mesh = make_mesh(cfg.mesh, devices)
    rules = Rules(mesh, cfg.sharding)
    with jax.set_mesh(mesh):
        state, step_fn, batcher, _ = training_parts(cfg, rules)
        losses = []
        for i in range(steps):
            state, m = step_fn(state, *batcher.train_batch(i))
            losses.append(float(m["loss"]))
    return np.array(losses, dtype=np.float32), state, rules


def read_jsonl(path):
    """Rows of a JSONL log, parsed strictly (NaN / Infinity tokens are an error, as in most
    non-Python JSON readers)."""
    import json

    def reject(token):
        raise ValueError(f"{path}: non-standard JSON token {token}")

    return [json.loads(line, parse_constant=reject) for line in open(path)]


@pytest.fixture
def staircase_cfg():
    def make(*overrides):
        return load_config(["+experiment=staircase", *overrides])

    return make


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")


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
