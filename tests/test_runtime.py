"""Process-level settings: the glibc malloc restart (spmdgpt.mesh.runtime.use_retaining_malloc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from spmdgpt.mesh.runtime import MALLOC_TUNABLES, malloc_environment

OURS = ":".join(MALLOC_TUNABLES)
GLIBC = malloc_environment({}) is not None  # this process runs on glibc


def test_malloc_environment_decisions():
    base = {"PATH": "/bin"}
    assert malloc_environment(base, libc="glibc 2.36") == {"PATH": "/bin", "GLIBC_TUNABLES": OURS}
    # other tunables the user set are kept, ours appended
    env = malloc_environment({**base, "GLIBC_TUNABLES": "glibc.pthread.rseq=0"}, libc="glibc 2.36")
    assert env["GLIBC_TUNABLES"] == "glibc.pthread.rseq=0:" + OURS
    # nothing to do: already restarted, the user's own malloc tunables, opted out, not glibc
    assert malloc_environment({**base, "GLIBC_TUNABLES": OURS}, libc="glibc 2.36") is None
    assert malloc_environment({**base, "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, libc="glibc 2.36") is None
    assert malloc_environment({**base, "SPMDGPT_MALLOC": "system"}, libc="glibc 2.36") is None
    assert malloc_environment(base, libc="") is None


def test_failed_restart_carries_on(monkeypatch, capsys):
    """If the restart itself fails, the process goes on with glibc's defaults and says so."""
    import spmdgpt.mesh.runtime as runtime

    calls = []

    def execve(*args):
        calls.append(args)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(runtime, "_libc", lambda: "glibc 2.36")
    monkeypatch.setattr(runtime.os, "execve", execve)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("SPMDGPT_MALLOC", raising=False)
    runtime.use_retaining_malloc()
    if sys.platform.startswith("linux"):
        assert len(calls) == 1 and calls[0][2]["GLIBC_TUNABLES"] == OURS
        assert "could not restart with the glibc malloc settings" in capsys.readouterr().err


PROBE = """
import json, os, resource
from spmdgpt.mesh.runtime import use_retaining_malloc
use_retaining_malloc()
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.sum(jnp.sin(x.T)[::-1] * x + x.T))  # (64 MiB temporaries; a cumsum: 1.6x the time)
x = jnp.ones((4096, 4096), jnp.float32)  # 64 MiB: XLA's temporaries are over glibc's mmap limit
for _ in range(10):
    f(x).block_until_ready()
faults = []
for _ in range(15):
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    f(x).block_until_ready()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
print(json.dumps({"pid": os.getpid(), "tunables": os.environ.get("GLIBC_TUNABLES", ""), "faults": faults}))
"""


@pytest.mark.skipif(not GLIBC or not sys.platform.startswith("linux"), reason="glibc only")
def test_restart_keeps_freed_memory_no_page_faults():
    """The restarted process (same PID) has the tunables, and an XLA:CPU computation with 64+ MiB
    of temporaries stops faulting in fresh pages on every call: with glibc's defaults every call
    faults >= 16k pages (64 MiB of 4 KiB pages); with the retaining settings at least a third of
    the calls fault none. (Alone, every call after the warm-up faults none; with another test
    process loading both cores, a clean-clone CI run saw about half of them fault ~34k pages.)"""
    # (glibc's malloc, whatever this process runs with: a preloaded allocator such as tbbmalloc faults otherwise)
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "SPMDGPT_MALLOC", "LD_PRELOAD",
                                                              "TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD")}
    env["XLA_FLAGS"] = ""
    results, procs = {}, {}
    try:  # (both probes at once)
        for mode in ("retaining", "system"):
            run_env = {**env, "SPMDGPT_MALLOC": "system"} if mode == "system" else env
            procs[mode] = subprocess.Popen(
                [sys.executable, "-c", PROBE], env=run_env, stdout=subprocess.PIPE, text=True
            )
        for mode, proc in procs.items():
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0
            results[mode] = json.loads(out.strip().splitlines()[-1])
            assert results[mode]["pid"] == proc.pid  # restarted in place (exec), not a child
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    assert results["retaining"]["tunables"] == OURS and results["system"]["tunables"] == ""
    system = float(np.min(results["system"]["faults"]))
    retaining = float(np.sort(results["retaining"]["faults"])[len(results["retaining"]["faults"]) // 3])
    assert system >= 16_000, results
    assert retaining <= 0.01 * system, results


def test_os_reason_keeps_the_reason_of_every_tensorstore_form():
    """A failed write names the operating system's reason, whichever form TensorStore's error
    takes (seen in a clean-clone CI run: the bare reason followed by its spec payload)."""
    from spmdgpt.run.files import os_reason

    assert os_reason(OSError(28, "No space left on device")) == "No space left on device"
    assert os_reason(RuntimeError('Failed to write "a/b": File too large [os_error_code=27]')) == "File too large"
    assert os_reason(ValueError("File too large [tensorstore_spec='{\"driver\":\"zarr\"}'] "
                                "[source locations='x.cc:1']")) == "File too large"
    # the third form (a later clean-clone CI run): the "Failed to write" prefix and the spec both
    assert os_reason(RuntimeError("Failed to write \"a/b\": File too large [tensorstore_spec='{\"create\":true}'] "
                                  "[os_error_code=27]")) == "File too large"
    assert os_reason(RuntimeError("something else\nmore")) == "something else"
