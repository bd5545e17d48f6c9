"""`spmdgpt launch --nproc N --devices-per-proc D -- train <overrides>`: N local processes.

Starts N copies of `spmdgpt <command>` on this machine, joined by jax.distributed through a
free coordinator port on 127.0.0.1 (the same code path as a multi-host cluster). Each process
sees D simulated CPU devices. Output lines are prefixed with the rank; SIGINT/SIGTERM are
forwarded to every process; if one process fails, the others are stopped (SIGTERM, then SIGKILL
after a grace period) and the launcher exits with that process's code, so nothing hangs in a
collective waiting for a dead peer.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

GRACE_S = 10.0  # SIGTERM -> SIGKILL


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pump(rank: int, stream, out) -> None:
    for line in iter(stream.readline, ""):
        out.write(f"[{rank}] {line}")
        out.flush()


def _stop(procs, grace: float = GRACE_S) -> None:
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


def main(argv: list) -> int:
    ap = argparse.ArgumentParser(prog="spmdgpt launch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, required=True, help="processes to start")
    ap.add_argument("--devices-per-proc", type=int, default=1, help="simulated CPU devices per process")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- train <overrides>")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.nproc < 1 or args.devices_per_proc < 1 or not cmd:
        print("spmdgpt: error: launch needs --nproc >= 1, --devices-per-proc >= 1 and a command "
              "after --, e.g. spmdgpt launch --nproc 2 -- train +experiment=staircase", file=sys.stderr)
        return 2
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
                _stop(procs)
                break
            if all(c == 0 for c in codes):
                break
            time.sleep(0.2)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _stop(procs)
        for t in pumps:
            t.join(timeout=5)
    return code if code >= 0 else 128 - code  # a signal -N becomes 128 + N
