"""A pytest plugin: where each test's time goes between XLA's compiler and the rest.

    PYTHONPATH=tools COMPILE_PROFILE=/tmp/prof .venv/bin/python -m pytest -p compile_profile -n 2 ...
    python tools/compile_profile.py /tmp/prof          # the tests' table, longest first

Each process (each xdist worker) records, per test, its wall time, the seconds JAX spent in XLA's
backend compiler (`/jax/core/compile/backend_compile_duration`, persistent-cache retrievals
included) and in tracing and lowering to MLIR, the compilations and the persistent-cache hits
(`jax.monitoring`'s events), and per jitted function its compile seconds; it writes them to
$COMPILE_PROFILE/<worker>.json at the end. Only the test processes' own compilations are seen:
a `spmdgpt` subprocess's time counts as the rest."""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from pathlib import Path

import pytest

BACKEND = "/jax/core/compile/backend_compile_duration"
TRACE = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
HITS = "/jax/compilation_cache/cache_hits"

_test = ["<outside tests>"]
_tests: dict = collections.defaultdict(lambda: collections.defaultdict(float))
_functions: dict = collections.defaultdict(lambda: [0.0, 0])


def _duration(event: str, seconds: float, **kwargs) -> None:
    row = _tests[_test[0]]
    if event == BACKEND:
        row["compile_s"] += seconds
        row["compiles"] += 1
        f = _functions[kwargs.get("fun_name", "?")]
        f[0] += seconds
        f[1] += 1
    elif event in TRACE:
        row["trace_s"] += seconds


def _event(event: str, **kwargs) -> None:
    if event == HITS:
        _tests[_test[0]]["cache_hits"] += 1


def pytest_configure(config):
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_duration)
    jax.monitoring.register_event_listener(_event)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _test[0] = item.nodeid
    start = time.perf_counter()
    yield
    _tests[item.nodeid]["wall_s"] += time.perf_counter() - start
    _test[0] = "<between tests>"


def pytest_sessionfinish(session):
    out = os.environ.get("COMPILE_PROFILE")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        rows = {"tests": {k: dict(v) for k, v in _tests.items()}, "functions": dict(_functions)}
        (Path(out) / f"{worker}.json").write_text(json.dumps(rows))


def summary(folder: str, top: int = 40) -> str:
    """The folder's tests, longest first, and the functions that took the most compiling."""
    tests, functions = {}, collections.defaultdict(lambda: [0.0, 0])
    for path in Path(folder).glob("*.json"):
        rows = json.loads(path.read_text())
        tests.update(rows["tests"])
        for name, (s, n) in rows["functions"].items():
            functions[name][0] += s
            functions[name][1] += n
    total = {k: sum(r.get(k, 0) for r in tests.values()) for k in ("wall_s", "compile_s", "trace_s", "compiles",
                                                                   "cache_hits")}
    lines = [f"{len(tests)} tests: {total['wall_s']:.0f} s, of which XLA compiling {total['compile_s']:.0f} s "
             f"({total['compiles']:.0f} compilations, {total['cache_hits']:.0f} persistent-cache hits) and tracing "
             f"and lowering {total['trace_s']:.0f} s", "", "   wall  compile  trace  test"]
    for name, r in sorted(tests.items(), key=lambda kv: -kv[1].get("wall_s", 0))[:top]:
        lines.append(f"{r.get('wall_s', 0):7.1f} {r.get('compile_s', 0):8.1f} {r.get('trace_s', 0):6.1f}  {name}")
    lines += ["", "compile s  count  function"]
    for name, (s, n) in sorted(functions.items(), key=lambda kv: -kv[1][0])[:top // 2]:
        lines.append(f"{s:9.1f} {n:6d}  {name}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/compile_profile.py FOLDER (the COMPILE_PROFILE of a test run)")
    print(summary(sys.argv[1]))
