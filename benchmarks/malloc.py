"""spmdgpt's glibc malloc settings against glibc's defaults, on the throughput benchmark.

    python benchmarks/malloc.py [--pairs 2] [--configs B1,B2]

Runs benchmarks/throughput.py in fresh processes, alternating SPMDGPT_MALLOC=system (glibc's
defaults) and spmdgpt's settings (spmdgpt.mesh.runtime.MALLOC_TUNABLES, what `spmdgpt train` uses),
`--pairs` times each, and prints per config the mean best-window tokens/s and MFU, kernel time
and minor page faults per step, and the ratio retaining / system. The malloc setting can only be
chosen when a process starts, hence one process per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

THROUGHPUT = Path(__file__).with_name("throughput.py")


def run(mode: str, configs: str, windows: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "SPMDGPT_MALLOC")}
    if mode == "system":
        env["SPMDGPT_MALLOC"] = "system"
    cmd = [sys.executable, str(THROUGHPUT), "--configs", configs, "--windows", str(windows)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(f"    [{mode}] {line}")
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--configs", default="B1,B2")
    ap.add_argument("--windows", type=int, default=5)
    args = ap.parse_args()
    results = {"system": [], "retaining": []}
    for _ in range(args.pairs):
        for mode in ("system", "retaining"):
            results[mode].append(run(mode, args.configs, args.windows))
    for name in args.configs.split(","):
        mean = {m: {k: float(np.mean([r[name][k] for r in rs])) for k in rs[0][name]} for m, rs in results.items()}
        print(f"{name} (mean of {args.pairs} processes each)")
        for mode, v in mean.items():
            print(
                f"    {mode:9s} {v['tokens_per_sec']:8,.0f} tokens/s  MFU {100 * v['mfu']:5.1f}% "
                f"(median window {100 * v['median_mfu']:5.1f}%)  {v['sys_ms_per_step']:5.0f} ms sys/step  "
                f"{v['faults_per_step']:9,.0f} page faults/step"
            )
        ratio = mean["retaining"]["tokens_per_sec"] / mean["system"]["tokens_per_sec"]
        print(f"    retaining / system: {ratio:.3f}x tokens/s")


if __name__ == "__main__":
    main()
