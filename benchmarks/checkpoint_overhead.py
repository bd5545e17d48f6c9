"""Training throughput with asynchronous checkpoints every 50 steps vs. without checkpoints.

    python benchmarks/checkpoint_overhead.py [--steps 150] [--pairs 2]

Model B1 (vocab 65, 4 layers, d_model 256, seq 256, batch 16, 1 device) on Tiny Shakespeare
through the real `spmdgpt train` loop. Runs alternate (with, without, with, without, ...) to
spread the machine's noise evenly; each run's throughput is the mean `tokens_per_sec` of its
metrics rows (compilation excluded). Target: with / without >= 0.95.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

B1 = ["+experiment=shakespeare_char", "model.num_layers=4", "model.num_heads=4", "model.d_model=256",
      "model.max_seq_len=256", "data.seq_len=256", "data.batch_size=16", "train.eval_every=0",
      "train.eval_batches=1", "train.log_every=10", "train.progress=false", "mesh.data=1",
      # B1 is AdamW, no QK-norm, fixed steps (the experiment's recipe changed in issue 21)
      "optimizer.name=adamw", "model.qk_norm=false", "train.time_budget=null"]


def run(steps: int, ckpt: list) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "spmdgpt", "train", *B1, f"train.steps={steps}", *ckpt,
               f"run.dir={Path(tmp) / 'r'}"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr[-2000:])
        rows = [json.loads(x) for x in open(Path(tmp) / "r" / "metrics.jsonl")]
        n_ckpt = len(list((Path(tmp) / "r" / "checkpoints").glob("[0-9]*")))
    tps = [r["tokens_per_sec"] for r in rows if r.get("tokens_per_sec")]
    print(f"  {' '.join(ckpt):42s} {np.mean(tps):8,.0f} tokens/s  ({n_ckpt} checkpoints kept)", flush=True)
    return float(np.mean(tps))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    with_c, without = [], []
    for _ in range(args.pairs):
        with_c.append(run(args.steps, ["checkpoint.every=50", "checkpoint.keep=3"]))
        without.append(run(args.steps, ["checkpoint.enabled=false"]))
    ratio = np.mean(with_c) / np.mean(without)
    print(f"with checkpoints every 50 steps: {np.mean(with_c):,.0f} tokens/s; without: "
          f"{np.mean(without):,.0f} tokens/s; ratio {ratio:.3f} (target >= 0.95: "
          f"{'PASS' if ratio >= 0.95 else 'FAIL'})")


if __name__ == "__main__":
    main()
