"""train.time_budget on a machine that gets busier: the whole command's wall time against its budget.

    python benchmarks/budget_load.py [--budget 60] [--load-at 25] [--burners 2] [--dir runs/budget_load]

Two runs of `spmdgpt train +experiment=shakespeare_char train.time_budget=BUDGET`, each a fresh
process: a quiet one, then one where `--burners` CPU-bound processes (a busy loop each) start
`--load-at` seconds after the command and run to its end. Prints, for each, the command's wall
time (interpreter start to exit), the budget's own `used_s`, the steps planned and trained, and
the re-plans, and the ratio wall / budget. The burners are killed however the script ends.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import subprocess
import sys
import time
from pathlib import Path


def burn() -> None:
    while True:
        pass


def run(budget: float, run_dir: Path, load_at: float | None, burners: int) -> dict:
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "spmdgpt", "train", "+experiment=shakespeare_char", f"train.time_budget={budget:g}",
           "train.progress=false", f"run.dir={run_dir}"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hogs: list = []
    try:
        if load_at is not None:
            try:
                proc.wait(timeout=load_at)
            except subprocess.TimeoutExpired:
                hogs = [multiprocessing.Process(target=burn, daemon=True) for _ in range(burners)]
                for h in hogs:
                    h.start()
        rc = proc.wait()
        wall = time.perf_counter() - t0
    finally:
        for h in hogs:
            h.kill()
        if proc.poll() is None:
            proc.kill()
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    events = [r for r in events if "event" in r]
    cal = next(r for r in events if r["event"] == "time_budget")
    used = next(r for r in events if r["event"] == "time_budget_used")
    replans = [f"{r['step']}:{r['planned']}->{r['steps']}" for r in events if r["event"] == "time_budget_replan"]
    return {"rc": rc, "wall_s": wall, "used_s": used["used_s"], "planned": cal["steps"], "trained": used["step"],
            "replans": replans}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--load-at", type=float, default=25.0)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=Path("runs/budget_load"))
    a = ap.parse_args()
    for name, load_at in (("quiet", None), (f"{a.burners} burners from {a.load_at:g} s", a.load_at)):
        r = run(a.budget, a.dir / name.split()[0], load_at, a.burners)
        print(f"{name:>24}: exit {r['rc']} | wall {r['wall_s']:.1f} s = {r['wall_s'] / a.budget:.3f} x budget "
              f"{a.budget:g} s | used_s {r['used_s']:.1f} | steps {r['trained']} of {r['planned']} planned | "
              f"re-plans {', '.join(r['replans']) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
