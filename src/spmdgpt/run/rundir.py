"""The run directory: resolved config, run metadata (git sha, versions, devices, command), log
truncation on resume, and the lock that keeps a second run out."""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import jax
import numpy as np

from spmdgpt.config import Config, ConfigError, to_yaml
from spmdgpt.mesh.runtime import malloc_in_use
from spmdgpt.run.files import write_json_atomic, write_text_atomic

PACKAGES = ("spmdgpt", "jax", "jaxlib", "optax", "hydra-core", "omegaconf", "numpy", "tiktoken", "tqdm")


def default_run_dir(cfg: Config) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{cfg.run.name}"


def _git(args: list, cwd: Path) -> Optional[str]:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
        return out.stdout
    except (OSError, subprocess.SubprocessError):
        return None


def git_info() -> dict:
    """sha + dirty flag of the checkout the code runs from (else of the working directory)."""
    for where in (Path(__file__).resolve().parent, Path.cwd()):
        sha = _git(["rev-parse", "HEAD"], where)
        if sha:
            status = _git(["status", "--porcelain", "--untracked-files=no"], where) or ""
            return {"sha": sha.strip(), "dirty": bool(status.strip()), "repo": str(where)}
    return {"sha": None, "dirty": None, "repo": None}


def package_versions() -> dict:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


@functools.cache
def pip_freeze() -> tuple:
    """`name==version` of every installed distribution (importlib.metadata, no subprocess).
    Read once a process: parsing ~300 distributions' metadata takes ~0.7 s on a slow CPU, and
    a process that trains several runs (a sweep's worker, the tests) records the same list."""
    seen = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={dist.version}"
    return tuple(sorted(seen.values(), key=str.lower))


def run_metadata(argv: list) -> dict:
    return {
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": argv,
        "git": git_info(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "devices": [
            {"id": d.id, "platform": d.platform, "kind": d.device_kind, "process": d.process_index}
            for d in jax.devices()
        ],
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # (a sweep's GPU group)
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "malloc": malloc_in_use(),  # (tbbmalloc, glibc's tunables or defaults: spmdgpt.mesh.runtime)
        "pip_freeze": pip_freeze(),
    }


def prepare_run_dir(cfg: Config, run_dir: Path, argv: list, resumed_from: Optional[int]) -> None:
    """Create run_dir and write config.yaml + metadata.json (process 0 only).

    A resumed run keeps the first start's files and adds resume-<step>.yaml / .json, so the
    directory records every command, config and code version that produced it.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    stem = "config" if resumed_from is None else f"resume-{resumed_from}"
    write_text_atomic(run_dir / f"{stem}.yaml", to_yaml(cfg))
    meta_name = "metadata.json" if resumed_from is None else f"resume-{resumed_from}.json"
    write_json_atomic(run_dir / meta_name, run_metadata(argv))


def truncate_jsonl(path: Path, last_step: int) -> int:
    """Keep the rows of a JSONL log (metrics, samples) up to `last_step` (and drop a torn last
    line); atomic.

    Returns how many rows were dropped.
    """
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            dropped += 1
            continue
        if row.get("step", 0) <= last_step:
            kept.append(line)
        else:
            dropped += 1
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    os.replace(tmp, path)
    return dropped


LOCK_FILE = "run.lock"


class RunLock:
    """An exclusive lock on run_dir for the life of one training run (process 0 only).

    `fcntl.flock` on run_dir/run.lock: the kernel drops it when the process ends, however it
    ends (kill -9 included), so there is never a stale lock to clean up. The file holds the
    holder's host, PID and start time, which a refused second run reports. Readers (`sample`)
    never take it. On NFS, Linux implements flock with NFS byte-range locks (NFSv4, or v3 with
    lockd); filesystems without working locks (some FUSE mounts) give no protection.

    A start that ends before the run writes anything (a config error: `committed` still False)
    leaves the directory as it found it: a lock file it created is removed again, and so is a
    run_dir it created.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: Optional[int] = None
        self.created_dir = self.created_file = False
        self.committed = False  # set once the run writes into run_dir

    def acquire(self) -> None:
        """Take the lock (creating run_dir) or raise ConfigError naming the holder."""
        import fcntl
        import socket

        try:
            self.created_dir = not self.run_dir.exists()
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.created_file = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise ConfigError([f"run.dir={self.run_dir} cannot be used ({e.strerror or e}); "
                               "choose a writable directory"]) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            try:
                h = json.loads(holder)
                who = f"host {h['host']}, PID {h['pid']}, started {h['started_utc']}"
            except (ValueError, KeyError, TypeError):
                who = "another process"
            raise ConfigError([f"run.dir={self.run_dir} is in use by a running training job ({who}); "
                               "wait for it to end, stop it, or choose another run.dir"]) from None
        info = {"host": socket.gethostname(), "pid": os.getpid(),
                "started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        if not self.committed and self.created_file:  # nothing written: leave no trace
            self.path.unlink(missing_ok=True)
            if self.created_dir and not any(self.run_dir.iterdir()):
                self.run_dir.rmdir()
        os.close(self._fd)  # closing the descriptor releases the lock
        self._fd = None


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Hold RunLock(run_dir) for the body (process 0 takes it; in a multi-process run every
    process learns the outcome, so all of them stop with the same error)."""
    lock, err = RunLock(run_dir), None
    if jax.process_index() == 0:
        try:
            lock.acquire()
        except ConfigError as e:
            err = e
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        ok = int(multihost_utils.broadcast_one_to_all(np.int32(err is None)))
        if not ok and err is None:
            err = ConfigError([f"run.dir={run_dir} could not be locked by process 0 (see its error)"])
    if err is not None:
        raise err
    try:
        yield lock
    finally:
        lock.release()
