"""Process-level settings that must be in place before JAX starts its backends (XLA flags) or
before the process starts at all (the allocator: tbbmalloc or glibc's malloc tunables)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
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


# The allocator of the whole process (benchmarks/malloc.py, BENCHMARKS.md "Host memory"). XLA:CPU
# allocates each execution's temporaries as one block (511 MB for a B1 training step) from the
# thread that runs it; glibc serves blocks over 32 MB with a fresh mmap and unmaps them on free,
# so every step faulted in 125k new zeroed pages (a quarter of the step in the kernel). XLA's
# compiler, multithreaded, spends ~15% of its time in malloc and free.
# - oneTBB's tbbmalloc (the `tbb` wheel, a dependency on Linux x86-64), preloaded, keeping freed
#   blocks of 8 MiB and more for reuse: no faults, and XLA compiles faster than with glibc's malloc
#   (a small DeepSeek-V4's step and evaluation: 13 s against 17 s with glibc's defaults);
# - else glibc with one arena, no mmap and no trimming: the freed block is the next step's block,
#   but XLA's compiler threads then contend for that one arena and mmap-less large blocks (the same
#   compile: 28 s).
MALLOC_TUNABLES = (
    "glibc.malloc.arena_max=1",
    "glibc.malloc.mmap_max=0",
    "glibc.malloc.trim_threshold=4294967296",
)
TBBMALLOC = ("libtbbmalloc.so.2", "libtbbmalloc_proxy.so.2")  # (the proxy replaces malloc, free, ...)
TBB_KEEP = ("TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD", str(8 << 20))  # freed blocks of 8 MiB and more kept
MALLOC_OPT_OUT = "SPMDGPT_MALLOC"  # =system: leave the C library's malloc alone; =glibc: the tunables
MALLOC_CHOICES = ("auto", "glibc", "system")  # (auto, the default: tbbmalloc where installed, else the tunables)


def _libc() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
    except (ValueError, OSError, AttributeError):  # not glibc, or no confstr on this platform
        return ""


def tbbmalloc_libraries() -> Optional[tuple]:
    """The paths of oneTBB's allocator and its malloc proxy where the `tbb` wheel is installed (in
    this interpreter's prefix, or wherever its files went), else None."""
    for folder in (Path(sys.prefix) / "lib", Path(sys.base_prefix) / "lib"):
        if all((folder / name).is_file() for name in TBBMALLOC):
            return tuple(str(folder / name) for name in TBBMALLOC)
    try:  # (pip install --user and the like: the wheel's own record of where its files are)
        from importlib.metadata import PackageNotFoundError, distribution

        dist = distribution("tbb")
    except (ImportError, PackageNotFoundError):
        return None
    for f in dist.files or ():
        if f.name == TBBMALLOC[1]:
            folder = Path(dist.locate_file(f)).parent
            if all((folder / name).is_file() for name in TBBMALLOC):
                return tuple(str(folder / name) for name in TBBMALLOC)
    return None


def malloc_environment(environ: Mapping[str, str], libc: Optional[str] = None,
                       tbb: Optional[tuple] = ()) -> Optional[dict]:
    """The environment to restart this process with so that the retaining allocator applies:
    tbbmalloc preloaded where `tbb` (the libraries' paths; () finds them) is installed, nothing
    else is preloaded and the paths can be preloaded (LD_PRELOAD splits at spaces and colons: a
    folder named with one cannot), else glibc's MALLOC_TUNABLES; None when nothing is to be done:
    not glibc, opted out with SPMDGPT_MALLOC=system, already restarted, or the user's own glibc
    malloc tunables (which win). SPMDGPT_MALLOC=glibc chooses the tunables over tbbmalloc (its
    value: auto, glibc or system, in any case; empty is auto)."""
    libc = _libc() if libc is None else libc
    current = environ.get("GLIBC_TUNABLES", "")
    preload = environ.get("LD_PRELOAD", "")
    choice = environ.get(MALLOC_OPT_OUT, "").strip().lower()
    if choice not in ("", *MALLOC_CHOICES):
        choices = ", ".join(MALLOC_CHOICES)
        raise ValueError(f"{MALLOC_OPT_OUT}={environ[MALLOC_OPT_OUT]}: one of {choices} (unset: auto)")
    if (not libc.startswith("glibc") or choice == "system" or "glibc.malloc." in current
            or "libtbbmalloc" in preload):
        return None
    if choice != "glibc" and not preload.strip():
        tbb = tbbmalloc_libraries() if tbb == () else tbb
        if tbb and not any(ch in path for path in tbb for ch in " \t\n:"):
            return {**environ, "LD_PRELOAD": " ".join(tbb), TBB_KEEP[0]: environ.get(TBB_KEEP[0], TBB_KEEP[1])}
    return {**environ, "GLIBC_TUNABLES": ":".join([*filter(None, [current]), *MALLOC_TUNABLES])}


MALLOCS = ("libtbbmalloc_proxy", "libjemalloc", "libtcmalloc", "libmimalloc")  # (preloaded allocators by name)


def malloc_in_use(environ: Mapping[str, str] = os.environ, maps: Optional[str] = None) -> str:
    """This process's allocator as the run's metadata records it, from what the process has mapped
    (/proc/self/maps on Linux; `maps` its text): "tbbmalloc", another preloaded allocator's file
    name (jemalloc, tcmalloc, mimalloc), "glibc tunables <...>" or "glibc defaults" (or the C
    library's, not glibc)."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:  # (not Linux: what the environment asks for)
            maps = environ.get("LD_PRELOAD", "")
    mapped = {Path(line.split(maxsplit=5)[-1]).name for line in maps.splitlines() if any(m in line for m in MALLOCS)}
    if any(name.startswith("libtbbmalloc_proxy") for name in mapped):
        return "tbbmalloc"
    if mapped:
        return ", ".join(sorted(mapped))
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return f"glibc tunables {environ['GLIBC_TUNABLES']}"
    return "glibc defaults" if _libc().startswith("glibc") else (_libc() or "the C library's")


def use_retaining_malloc() -> None:
    """Restart the process (same PID, arguments and interpreter) with the retaining allocator
    (malloc_environment), which the dynamic loader and glibc read only at start-up. Call first
    thing in an entry point, before anything else runs; returns at once in the restarted process
    or when nothing is to be done."""
    try:
        env = malloc_environment(os.environ)
    except ValueError as e:  # (a bad SPMDGPT_MALLOC: before anything has run or been written)
        print(f"spmdgpt: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if env is not None and sys.argv[:1] in (["-"], [""]):  # (a program read from stdin, or typed: a restart
        # would find it consumed)
        print(f"spmdgpt: warning: a program read from standard input cannot restart with the allocator; run it "
              f"from a file for it ({MALLOC_OPT_OUT}=system silences this)", file=sys.stderr)
        return
    if env is not None and sys.platform.startswith("linux") and sys.executable:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execve(sys.executable, sys.orig_argv, env)
        except OSError as e:  # carry on with glibc's defaults (slower on CPU, otherwise the same)
            print(f"spmdgpt: warning: could not restart with the malloc settings ({e}); continuing "
                  f"with glibc's defaults ({MALLOC_OPT_OUT}=system skips the restart)", file=sys.stderr)


def host_memory() -> int:
    """This machine's memory in bytes: its physical memory, or its cgroup's limit or this
    process's address-space limit (`ulimit -v`) when lower."""
    import resource

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        total = min(total, soft)
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def _installed_plugins() -> str:
    """The names of the JAX PJRT plugins installed (jax_plugins.*, e.g. xla_cuda13), and libtpu,
    joined: read from the file system, without importing JAX."""
    import importlib.util
    import pkgutil

    spec = importlib.util.find_spec("jax_plugins")
    names = [m.name for m in pkgutil.iter_modules(list(spec.submodule_search_locations))] if spec else []
    return " ".join(names + (["libtpu"] if importlib.util.find_spec("libtpu") else []))


def device_platforms() -> Optional[str]:
    """The JAX platforms of the accelerators this machine has, then the CPU: "cuda,cpu" where an
    NVIDIA driver is loaded (/proc/driver/nvidia, /dev/nvidia0), "rocm,cpu" with AMD's (/dev/kfd),
    "tpu,cpu" where TPU chips are (/dev/accel*, or /dev/vfio/N on v5p and v6e hosts), each when
    its JAX plugin is installed; "cpu" without any; None (JAX's own choice) for a device whose
    plugin is not installed. Without JAX_PLATFORMS, JAX starts every plugin installed, and the
    compile-only ones of the plan extras (JAX's CUDA plugin, libtpu) print tracebacks and warnings
    on a machine without their device; a platform named but not installed is an error."""
    import glob

    kinds = (("cuda", os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0"), "cuda"),
             ("rocm", os.path.exists("/dev/kfd"), "rocm"),
             ("tpu", bool(glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*")), "tpu"))
    present = [(platform, plugin) for platform, here, plugin in kinds if here]
    if not present:
        return "cpu"
    plugins = _installed_plugins()
    for platform, plugin in present:
        if plugin in plugins:
            return f"{platform},cpu"
    return None


def choose_platforms() -> None:
    """Set JAX_PLATFORMS to `device_platforms()` (when it names them) unless the environment
    already sets it (before JAX starts its backends)."""
    if not os.environ.get("JAX_PLATFORMS"):
        chosen = device_platforms()
        if chosen:
            os.environ["JAX_PLATFORMS"] = chosen


def cache_root() -> Path:
    """spmdgpt's cache folder: $SPMDGPT_CACHE, else spmdgpt/ under $XDG_CACHE_HOME or ~/.cache
    (token stores, the compilation cache)."""
    env = os.environ.get("SPMDGPT_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spmdgpt"


COMPILE_CACHE_ENV = "SPMDGPT_COMPILE_CACHE"  # a folder for JAX's persistent compilation cache, or "off"
COMPILE_CACHE_MAX_BYTES = 8 * 2**30  # the cache's size, least recently used entries evicted beyond it


def simulated_cpu_devices() -> int:
    """The CPU devices XLA_FLAGS asks for (--xla_force_host_platform_device_count) when
    JAX_PLATFORMS is cpu alone (`choose_platforms` sets it so on a machine without accelerators);
    0 otherwise."""
    if os.environ.get("JAX_PLATFORMS", "").strip() != "cpu":
        return 0
    found = re.findall(r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(found[-1]) if found else 0


def use_compilation_cache() -> Optional[str]:
    """Turn on JAX's persistent compilation cache (before JAX is imported) and return its folder:
    $JAX_COMPILATION_CACHE_DIR where the user set it, else $SPMDGPT_COMPILE_CACHE, else `xla/`
    beside the token stores ($SPMDGPT_CACHE or ~/.cache/spmdgpt); None with
    SPMDGPT_COMPILE_CACHE=off. A run started again (a resume after preemption, a rerun with
    other logging) loads its executables instead of compiling them (a GPT-2 124M step and
    evaluation: 99.6 s of compilation on an H100), and with it JAX keeps XLA:GPU's per-fusion
    autotuning results, which programs that share kernels reuse. The executables are the ones
    the compiler would build: results are unchanged. At most COMPILE_CACHE_MAX_BYTES unless
    $JAX_COMPILATION_CACHE_MAX_SIZE says otherwise.

    None on simulated CPU devices (JAX_PLATFORMS=cpu with --xla_force_host_platform_device_count
    > 1), $SPMDGPT_COMPILE_CACHE's folder too; only JAX's own $JAX_COMPILATION_CACHE_DIR is used
    there as given (the tests' is): an 8-device CPU program loaded from the cache by a later process can run its
    collectives in another order on one device than on the others and deadlock (jaxlib 0.12.0.1:
    a rerun of a staircase run with rollouts on 8 simulated devices hung at its first rollout,
    one device at the step's all-gather 8 and seven at its all-gather 2, and XLA aborted it after
    its 40 s rendezvous timeout, every time; a fresh compile never did)."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return os.environ["JAX_COMPILATION_CACHE_DIR"]
    choice = os.environ.get(COMPILE_CACHE_ENV, "")
    if choice.lower() == "off" or simulated_cpu_devices() > 1:
        return None
    folder = os.path.expanduser(choice) if choice else str(cache_root() / "xla")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(COMPILE_CACHE_MAX_BYTES))
    return folder
