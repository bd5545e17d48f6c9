"""Soak test: kill -9 a training run at random moments, restart it, N times; nothing may be lost.

    python benchmarks/soak.py --cycles 20 [--steps 1000] [--seed 0] [--dir runs/soak]

One uninterrupted reference run, then one run that is killed with SIGKILL and restarted with
the same command `--cycles` times. Kill points rotate through:

    random      a random moment 0.5-8 s after the start (start-up, compilation or training)
    checkpoint  as soon as an asynchronous checkpoint write is in flight (a *-tmp folder exists)
    eval        right after an evaluation step's metrics row, before its val/loss row

After the last kill the run goes to the end. Passes (exit 0) when the killed run's loss
sequence and final parameters and optimizer state are bitwise identical to the reference, and
metrics.jsonl holds every training step exactly once, in order. Prints one line per cycle.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

CONFIG = ["+experiment=staircase", "train.log_every=1", "train.eval_every=25", "checkpoint.every=7",
          "checkpoint.keep=2", "train.progress=false", "mesh.data=1"]
ENV = {**os.environ, "XLA_FLAGS": "", "PYTHONUNBUFFERED": "1"}
MODES = ("random", "checkpoint", "eval")


def command(run_dir: Path, steps: int) -> list:
    return [sys.executable, "-m", "spmdgpt", "train", *CONFIG, f"train.steps={steps}", f"run.dir={run_dir}"]


def rows(run_dir: Path) -> list:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line (the resumed run drops it)
            pass
    return out


def kill_moment(mode: str, run_dir: Path, proc: subprocess.Popen, rng: random.Random, deadline: float,
                after: int) -> bool:
    """Wait for the mode's moment past step `after` (where this start resumes from, or later);
    True if it came before the process ended."""
    if mode == "random":
        end = time.time() + rng.uniform(0.5, 8.0)
        while time.time() < end and proc.poll() is None:
            time.sleep(0.01)
        return proc.poll() is None
    while time.time() < deadline and proc.poll() is None:
        if mode == "checkpoint" and any(int(p.name.split(".")[0]) > after
                                        for p in (run_dir / "checkpoints").glob("*tmp*")):
            return True
        if mode == "eval":
            r = rows(run_dir)
            if r and "loss" in r[-1] and r[-1]["step"] % 25 == 0 and r[-1]["step"] > after:
                return True
        time.sleep(0.002)
    return False


def final_state(run_dir: Path):
    import jax

    from spmdgpt import build_optimizer, init_state, load_config, make_mesh, param_info
    from spmdgpt.mesh.sharding import Rules
    from spmdgpt.training.checkpoint import CheckpointManager

    cfg = load_config(CONFIG)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        state = init_state(
            cfg, Rules(mesh, cfg.sharding, cfg.model), build_optimizer(cfg.optimizer, param_info(cfg.model), 10)
        )
        mngr = CheckpointManager.reader(run_dir)
        params, opt_state, _ = mngr.restore(mngr.steps()[-1], state.params, state.opt_state)
    return jax.device_get((params, opt_state))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default="runs/soak")
    args = ap.parse_args()
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    ref, run = root / "reference", root / "killed"
    t0 = time.time()
    subprocess.run(command(ref, args.steps), env=ENV, check=True, capture_output=True)
    print(f"reference: {args.steps} steps in {time.time() - t0:.0f} s")
    rng = random.Random(args.seed)
    kills = 0
    for cycle in range(args.cycles):
        mode = MODES[cycle % len(MODES)]
        proc = subprocess.Popen(command(run, args.steps), env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        after = max((r["step"] for r in rows(run) if "loss" in r), default=0)
        hit = kill_moment(mode, run, proc, rng, time.time() + 120, after)
        if hit:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        last = max((r["step"] for r in rows(run) if "loss" in r), default=0)
        print(f"cycle {cycle + 1:2d}: {mode:<10} {'killed' if hit else 'ended first':<11} "
              f"(exit {proc.returncode}) at metrics step {last}")
        if proc.returncode == 0:
            break
    final = subprocess.run(command(run, args.steps), env=ENV, capture_output=True, text=True)
    if final.returncode != 0:
        print(final.stderr[-2000:])
        return 1
    a = [(r["step"], r["loss"]) for r in rows(ref) if "loss" in r]
    b = [(r["step"], r["loss"]) for r in rows(run) if "loss" in r]
    steps_ok = [s for s, _ in b] == list(range(1, args.steps + 1))
    losses_ok = a == b
    import numpy as np

    sa, sb = final_state(ref), final_state(run)
    import jax

    state_ok = all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(sa), jax.tree.leaves(sb), strict=True))
    print(f"{kills} kills in {cycle + 1} cycles, {time.time() - t0:.0f} s | every step once, in order: "
          f"{steps_ok} | losses bitwise equal: {losses_ok} | final params + optimizer state bitwise "
          f"equal: {state_ok}")
    return 0 if steps_ok and losses_ok and state_ok else 1


if __name__ == "__main__":
    sys.exit(main())
