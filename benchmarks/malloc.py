"""The allocators a spmdgpt process can run with (spmdgpt.mesh.runtime), on the throughput benchmark:
glibc's defaults (SPMDGPT_MALLOC=system), glibc with spmdgpt's tunables (MALLOC_TUNABLES:
SPMDGPT_MALLOC=glibc) and oneTBB's tbbmalloc (what `spmdgpt train` uses where the `tbb` wheel is
installed, Linux x86-64).

    python benchmarks/malloc.py [--pairs 2] [--configs B1,B2]

Runs benchmarks/throughput.py in fresh processes, the allocators in turn, `--pairs` times each,
and prints per config the mean best-window tokens/s and MFU, kernel time and minor page faults
per step, and each allocator's tokens/s against glibc's defaults. The allocator can only be
chosen when a process starts, hence one process per measurement. (Compile times under the same
three: benchmarks/compile_malloc.py.)
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


MODES = {"system": "system", "glibc": "glibc", "tbbmalloc": ""}  # name -> SPMDGPT_MALLOC
RUNS = {"system": "glibc defaults", "glibc": "glibc tunables", "tbbmalloc": "tbbmalloc"}  # -> malloc_in_use()


def run(mode: str, configs: str, windows: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "SPMDGPT_MALLOC", "LD_PRELOAD",
                                                            "TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD")}
    env["SPMDGPT_MALLOC"] = MODES[mode]
    cmd = [sys.executable, str(THROUGHPUT), "--configs", configs, "--windows", str(windows)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(f"    [{mode}] {line}")
    result = json.loads(lines[-1])
    if not result.pop("malloc").startswith(RUNS[mode]):
        sys.exit(f"malloc.py: error: the {mode} process ran another allocator: is the `tbb` wheel installed "
                 f"(pip install tbb==2023.2.0, Linux x86-64)?")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--configs", default="B1,B2")
    ap.add_argument("--windows", type=int, default=5)
    args = ap.parse_args()
    results: dict = {m: [] for m in MODES}
    for _ in range(args.pairs):
        for mode in MODES:
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
        print("    tokens/s against glibc's defaults: " + ", ".join(
            f"{mode} {mean[mode]['tokens_per_sec'] / mean['system']['tokens_per_sec']:.3f}x" for mode in MODES))


if __name__ == "__main__":
    main()
