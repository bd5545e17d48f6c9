"""`spmdgpt launch nproc=N devices_per_proc=D -- train <overrides>`: N local processes.

(`--nproc N --devices-per-proc D` is the same; the `--` is optional: the command starts at the
first command name.)

Starts N copies of `spmdgpt <command>` on this machine, joined by jax.distributed through a
free coordinator port on 127.0.0.1 (the same code path as a multi-host cluster). Each process
sees D simulated CPU devices. Output lines are prefixed with the rank; SIGINT/SIGTERM are
forwarded to every process; if one process fails, the others are stopped (SIGTERM, then SIGKILL
after `grace_s` seconds) and the launcher exits with that process's code, so nothing hangs in a
collective waiting for a dead peer.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import List

from spmdgpt.cli.args import parse
from spmdgpt.config import ConfigError


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pump(rank: int, stream, out) -> None:
    for line in iter(stream.readline, ""):
        out.write(f"[{rank}] {line}")
        out.flush()


def _stop(procs, grace: float) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.time() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@dataclass
class LaunchArgs:
    nproc: int = 0  # processes to start (required)
    devices_per_proc: int = 1  # simulated CPU devices per process
    grace_s: float = 10.0  # stopping the others after a failure: SIGTERM, then SIGKILL this much later


def split_command(items: List[str]) -> tuple[list, list]:
    """(launch's own items, the command to run): split at `--`, else at the first command name;
    `--nproc N` / `--devices-per-proc=D` spellings become nproc=N / devices_per_proc=D."""
    from spmdgpt.cli import COMMANDS

    cut = items.index("--") if "--" in items else next(
        (i for i, a in enumerate(items) if a in COMMANDS), len(items))
    own, cmd = items[:cut], items[cut + 1 if items[cut:cut + 1] == ["--"] else cut:]
    normal, i = [], 0
    while i < len(own):
        a = own[i]
        if a.startswith("--"):
            key, sep, value = a[2:].partition("=")
            if not sep and i + 1 < len(own):
                value, i = own[i + 1], i + 1
            a = f"{key.replace('-', '_')}={value}"
        normal.append(a)
        i += 1
    return normal, cmd


def run(items: List[str]) -> int:
    from spmdgpt.cli import COMMANDS

    own, cmd = split_command(items)
    args, extra = parse(own, LaunchArgs)
    example = "e.g. spmdgpt launch nproc=2 -- train +experiment=staircase (the -- is optional)"
    if extra:
        raise ConfigError([f"launch: {extra[0]} is not one of launch's own keys (nproc, devices_per_proc, "
                           f"grace_s), and the command comes after them; {example}"])
    if not cmd or cmd[0] not in COMMANDS:
        what = "no command to run" if not cmd else f"{cmd[0]} is not a spmdgpt command ({', '.join(COMMANDS)})"
        raise ConfigError([f"launch: {what}; {example}"])
    for name in ("nproc", "devices_per_proc"):
        if getattr(args, name) < 1:
            raise ConfigError([f"launch: {name}={getattr(args, name)} must be >= 1; {example}"])
    if args.grace_s < 0:
        raise ConfigError([f"launch: grace_s={args.grace_s:g} must be >= 0 (seconds from SIGTERM to SIGKILL)"])
    port = free_port()
    flags = os.environ.get("XLA_FLAGS", "")
    flags = " ".join(f for f in flags.split() if not f.startswith("--xla_force_host_platform_device_count"))
    env = {**os.environ, "XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={args.devices_per_proc}".strip(),
           "PYTHONUNBUFFERED": "1"}
    procs, pumps = [], []
    for rank in range(args.nproc):
        full = [sys.executable, "-m", "spmdgpt", *cmd, f"dist.coordinator=127.0.0.1:{port}",
                f"dist.num_processes={args.nproc}", f"dist.process_id={rank}"]
        p = subprocess.Popen(full, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(p)
        t = threading.Thread(target=_pump, args=(rank, p.stdout, sys.stdout), daemon=True)
        t.start()
        pumps.append(t)

    def forward(signum, frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                rank, code = failed[0]
                print(f"spmdgpt launch: process {rank} exited with {code}; stopping the others",
                      file=sys.stderr, flush=True)
                _stop(procs, args.grace_s)
                break
            if all(c == 0 for c in codes):
                break
            time.sleep(0.2)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _stop(procs, args.grace_s)
        for t in pumps:
            t.join(timeout=5)
    return code if code >= 0 else 128 - code  # a signal -N becomes 128 + N
