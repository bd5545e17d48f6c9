"""The run directory: resolved config, run metadata (git sha, versions, devices, command)."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import jax

from spmdgpt.config import Config, to_yaml

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


def pip_freeze() -> list:
    """`name==version` of every installed distribution (importlib.metadata, no subprocess)."""
    seen = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={dist.version}"
    return sorted(seen.values(), key=str.lower)


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
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "pip_freeze": pip_freeze(),
    }


def write_json_atomic(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def prepare_run_dir(cfg: Config, run_dir: Path, argv: list, resumed_from: Optional[int]) -> None:
    """Create run_dir and write config.yaml + metadata.json (process 0 only).

    A resumed run keeps the first start's files and adds resume-<step>.yaml / .json, so the
    directory records every command, config and code version that produced it.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    stem = "config" if resumed_from is None else f"resume-{resumed_from}"
    tmp = run_dir / f"{stem}.yaml.tmp"
    tmp.write_text(to_yaml(cfg))
    os.replace(tmp, run_dir / f"{stem}.yaml")
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
