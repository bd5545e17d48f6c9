"""Process-level settings: the allocator restart (spmdgpt.mesh.runtime.use_retaining_malloc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from spmdgpt.mesh.runtime import MALLOC_TUNABLES, TBB_KEEP, malloc_environment, tbbmalloc_libraries

OURS = ":".join(MALLOC_TUNABLES)
GLIBC = malloc_environment({}, tbb=None) is not None  # this process runs on glibc
TBB = tbbmalloc_libraries()  # the `tbb` wheel's libraries (a dependency on Linux x86-64)


def test_malloc_environment_decisions():
    base, libs, glibc = {"PATH": "/bin"}, ("/x/libtbbmalloc.so.2", "/x/libtbbmalloc_proxy.so.2"), "glibc 2.36"
    # tbbmalloc where the wheel is installed, its freed blocks of 8 MiB and more kept (the user's threshold wins)
    assert malloc_environment(base, libc=glibc, tbb=libs) == {
        "PATH": "/bin", "LD_PRELOAD": "/x/libtbbmalloc.so.2 /x/libtbbmalloc_proxy.so.2", TBB_KEEP[0]: "8388608"}
    assert malloc_environment({**base, TBB_KEEP[0]: "1048576"}, libc=glibc, tbb=libs)[TBB_KEEP[0]] == "1048576"
    # glibc's tunables without it, when asked (SPMDGPT_MALLOC=glibc), or when the user preloads another library
    assert malloc_environment(base, libc=glibc, tbb=None) == {"PATH": "/bin", "GLIBC_TUNABLES": OURS}
    assert malloc_environment({**base, "SPMDGPT_MALLOC": "glibc"}, libc=glibc, tbb=libs)["GLIBC_TUNABLES"] == OURS
    env = malloc_environment({**base, "LD_PRELOAD": "/y/libjemalloc.so.2"}, libc=glibc, tbb=libs)
    assert env["LD_PRELOAD"] == "/y/libjemalloc.so.2" and env["GLIBC_TUNABLES"] == OURS
    # other tunables the user set are kept, ours appended
    env = malloc_environment({**base, "GLIBC_TUNABLES": "glibc.pthread.rseq=0"}, libc=glibc, tbb=None)
    assert env["GLIBC_TUNABLES"] == "glibc.pthread.rseq=0:" + OURS
    # nothing to do: already restarted (either way), the user's own malloc tunables, opted out, not glibc
    for done in ({"GLIBC_TUNABLES": OURS}, {"LD_PRELOAD": " ".join(libs)}, {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"},
                 {"SPMDGPT_MALLOC": "system"}):
        assert malloc_environment({**base, **done}, libc=glibc, tbb=libs) is None, done
    assert malloc_environment(base, libc="", tbb=libs) is None
    for auto in ("auto", " Auto ", ""):  # (any case, spaces around it; empty: auto)
        env = malloc_environment({**base, "SPMDGPT_MALLOC": auto}, libc=glibc, tbb=libs)
        assert env["LD_PRELOAD"] == " ".join(libs)
    # a folder LD_PRELOAD cannot name (it splits at spaces and colons): glibc's tunables
    spaced = ("/a b/libtbbmalloc.so.2", "/a b/libtbbmalloc_proxy.so.2")
    assert malloc_environment(base, libc=glibc, tbb=spaced) == {"PATH": "/bin", "GLIBC_TUNABLES": OURS}


def test_the_metadata_names_the_allocator_the_process_has_mapped():
    """malloc_in_use reads what is mapped, not what was asked for: a preload that failed is not
    tbbmalloc, the user's own jemalloc is named, glibc's tunables or defaults otherwise."""
    from spmdgpt.mesh.runtime import malloc_in_use

    line = "7f2a00000000-7f2a00020000 r-xp 00000000 08:01 4242                       {}"
    tbb = line.format("/opt/my env/lib/libtbbmalloc_proxy.so.2")
    jemalloc = line.format("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    libc = line.format("/usr/lib/x86_64-linux-gnu/libc.so.6")
    preloaded = {"LD_PRELOAD": "/opt/my env/lib/libtbbmalloc_proxy.so.2"}
    assert malloc_in_use(preloaded, "\n".join([libc, tbb])) == "tbbmalloc"
    assert malloc_in_use(preloaded, libc) == ("glibc defaults" if GLIBC else malloc_in_use({}, libc))
    assert malloc_in_use({"GLIBC_TUNABLES": OURS}, "\n".join([libc, jemalloc])) == "libjemalloc.so.2"
    if GLIBC:
        assert malloc_in_use({"GLIBC_TUNABLES": OURS}, libc) == f"glibc tunables {OURS}"


@pytest.mark.skipif(not GLIBC or not sys.platform.startswith("linux"), reason="glibc only")
def test_a_program_from_standard_input_runs_without_the_restart():
    """`python - < script.py`: a restart would find standard input consumed and run nothing; the
    program runs on, with one line saying why it has no allocator of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "LD_PRELOAD", "SPMDGPT_MALLOC")}
    out = subprocess.run([sys.executable, "-"], input="from spmdgpt.mesh.runtime import use_retaining_malloc\n"
                         "use_retaining_malloc()\nprint('ran')\n", env=env, capture_output=True, text=True,
                         timeout=60)
    assert (out.returncode, out.stdout) == (0, "ran\n")
    assert out.stderr.startswith("spmdgpt: warning: a program read from standard input cannot restart")


def test_a_bad_choice_is_one_line_before_anything_runs(tmp_path):
    """SPMDGPT_MALLOC other than auto, glibc or system: one line, exit 2, nothing written."""
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "LD_PRELOAD")}
    out = subprocess.run([sys.executable, "-m", "spmdgpt", "train", "+experiment=staircase",
                          f"run.dir={tmp_path / 'r'}"], env={**env, "SPMDGPT_MALLOC": "jemalloc"},
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr) == (2, "spmdgpt: error: SPMDGPT_MALLOC=jemalloc: one of auto, glibc, system "
                                               "(unset: auto)\n")
    assert not (tmp_path / "r").exists()


def test_failed_restart_carries_on(monkeypatch, capsys):
    """If the restart itself fails, the process goes on with glibc's defaults and says so."""
    import spmdgpt.mesh.runtime as runtime

    calls = []

    def execve(*args):
        calls.append(args)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(runtime, "_libc", lambda: "glibc 2.36")
    monkeypatch.setattr(runtime, "tbbmalloc_libraries", lambda: None)
    monkeypatch.setattr(runtime.os, "execve", execve)
    for name in ("GLIBC_TUNABLES", "SPMDGPT_MALLOC", "LD_PRELOAD"):
        monkeypatch.delenv(name, raising=False)
    runtime.use_retaining_malloc()
    if sys.platform.startswith("linux"):
        assert len(calls) == 1 and calls[0][2]["GLIBC_TUNABLES"] == OURS
        assert "could not restart with the malloc settings" in capsys.readouterr().err


PROBE = """
import json, os, resource
from spmdgpt.mesh.runtime import malloc_in_use, use_retaining_malloc
use_retaining_malloc()
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.sum(jnp.sin(x.T)[::-1] * x + x.T))  # (64 MiB temporaries; a cumsum: 1.6x the time)
x = jnp.ones((4096, 4096), jnp.float32)  # 64 MiB: XLA's temporaries are over glibc's mmap limit
for _ in range(6):
    f(x).block_until_ready()
faults = []
for _ in range(12):
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    f(x).block_until_ready()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
maps = open("/proc/self/maps").read()
print(json.dumps({"pid": os.getpid(), "malloc": malloc_in_use(), "tbb_mapped": "libtbbmalloc_proxy" in maps,
                  "faults": faults}))
"""


@pytest.mark.skipif(not GLIBC or not sys.platform.startswith("linux"), reason="glibc only")
def test_restart_keeps_freed_memory_no_page_faults():
    """The restarted process (same PID) runs the retaining allocator, tbbmalloc where the `tbb`
    wheel is installed (mapped in the process) or glibc's tunables (SPMDGPT_MALLOC=glibc), and an
    XLA:CPU computation with 64+ MiB of temporaries stops faulting in fresh pages on every call:
    with glibc's defaults every call faults >= 16k pages (64 MiB of 4 KiB pages); with either
    retaining allocator at least a third of the calls fault none. (Alone, every call after the
    warm-up faults none; with another test process loading both cores, a clean-clone CI run saw
    about half of them fault ~34k pages.)"""
    # (glibc's malloc, whatever this process runs with: a preloaded allocator such as tbbmalloc faults otherwise)
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "SPMDGPT_MALLOC", "LD_PRELOAD",
                                                              TBB_KEEP[0])}
    env["XLA_FLAGS"] = ""
    modes = {"default": env, "glibc": {**env, "SPMDGPT_MALLOC": "glibc"}, "system": {**env, "SPMDGPT_MALLOC": "system"}}
    results, procs = {}, {}
    try:  # (the probes at once)
        for mode, run_env in modes.items():
            procs[mode] = subprocess.Popen([sys.executable, "-c", PROBE], env=run_env, stdout=subprocess.PIPE,
                                           text=True)
        for mode, proc in procs.items():
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0
            results[mode] = json.loads(out.strip().splitlines()[-1])
            assert results[mode]["pid"] == proc.pid  # restarted in place (exec), not a child
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    assert results["default"]["malloc"] == ("tbbmalloc" if TBB else f"glibc tunables {OURS}")
    assert results["default"]["tbb_mapped"] == bool(TBB) and not results["glibc"]["tbb_mapped"]
    assert (results["glibc"]["malloc"], results["system"]["malloc"]) == (f"glibc tunables {OURS}", "glibc defaults")
    system = float(np.min(results["system"]["faults"]))
    assert system >= 16_000, results
    for mode in ("default", "glibc"):
        retaining = float(np.sort(results[mode]["faults"])[len(results[mode]["faults"]) // 3])
        assert retaining <= 0.01 * system, (mode, results)


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
