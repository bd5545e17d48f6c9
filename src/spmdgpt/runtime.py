"""Process-level settings that must be in place before JAX starts its backends (XLA flags) or
before the process starts at all (glibc's malloc tunables)."""

from __future__ import annotations

import os
import sys
from typing import Mapping, Optional

# Measured on the 2-core CPU box (benchmarks/BENCHMARKS.md): letting YNNPACK fuse only plain
# dots, and XLA's own emitters the elementwise ops around them, makes a B1 training step about
# 10% faster than the default (which also pulls elementwise ops into YNNPACK fusions).
DEFAULT_XLA_FLAGS = ("--xla_cpu_experimental_ynn_fusion_type=dot",)


def set_default_xla_flags(deterministic: bool = False) -> None:
    """Append spmdgpt's default XLA flags to $XLA_FLAGS, leaving any flag the user set alone.

    deterministic: also ask GPU backends for deterministic ops (reproducible reductions and
    scatters, at some speed cost); the CPU backend is deterministic already.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    wanted = DEFAULT_XLA_FLAGS + (("--xla_gpu_deterministic_ops=true",) if deterministic else ())
    for flag in wanted:
        if flag.split("=")[0] not in flags:
            flags = f"{flags} {flag}".strip()
    os.environ["XLA_FLAGS"] = flags


# glibc malloc settings for the whole process (measured on B1, benchmarks/BENCHMARKS.md): XLA:CPU
# allocates each execution's temporaries as one block (511 MB for a B1 training step) from the
# thread that runs it. glibc serves blocks over 32 MB with a fresh mmap and returns them with
# munmap on free, so every step faulted in 125k new zeroed pages (a quarter of the step in the
# kernel). One arena, no mmap and no trimming make the freed block the next step's block: the
# process keeps its peak host memory, as caching allocators do, and pays no page faults.
MALLOC_TUNABLES = (
    "glibc.malloc.arena_max=1",
    "glibc.malloc.mmap_max=0",
    "glibc.malloc.trim_threshold=4294967296",
)
MALLOC_OPT_OUT = "SPMDGPT_MALLOC"  # =system: leave glibc's defaults alone


def _libc() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
    except (ValueError, OSError, AttributeError):  # not glibc, or no confstr on this platform
        return ""


def malloc_environment(environ: Mapping[str, str], libc: Optional[str] = None) -> Optional[dict]:
    """The environment to restart this process with so that MALLOC_TUNABLES apply, or None when
    nothing is to be done: not glibc, opted out with SPMDGPT_MALLOC=system, or GLIBC_TUNABLES
    already sets malloc tunables (ours after the restart, or the user's own, which win)."""
    libc = _libc() if libc is None else libc
    current = environ.get("GLIBC_TUNABLES", "")
    if not libc.startswith("glibc") or environ.get(MALLOC_OPT_OUT, "") == "system" or "glibc.malloc." in current:
        return None
    return {**environ, "GLIBC_TUNABLES": ":".join([*filter(None, [current]), *MALLOC_TUNABLES])}


def use_retaining_malloc() -> None:
    """Restart the process (same PID, arguments and interpreter) with MALLOC_TUNABLES in the
    environment, which glibc reads only at start-up. Call first thing in an entry point, before
    anything else runs; returns at once in the restarted process or when nothing is to be done."""
    env = malloc_environment(os.environ)
    if env is not None and sys.platform.startswith("linux") and sys.executable:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execve(sys.executable, sys.orig_argv, env)
        except OSError as e:  # carry on with glibc's defaults (slower on CPU, otherwise the same)
            print(f"spmdgpt: warning: could not restart with the glibc malloc settings ({e}); continuing "
                  f"with glibc's defaults ({MALLOC_OPT_OUT}=system skips the restart)", file=sys.stderr)


def host_memory() -> int:
    """This machine's memory in bytes: its physical memory, or its cgroup's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total
