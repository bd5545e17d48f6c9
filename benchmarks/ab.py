"""The training step's speed of this checkout against another revision's, on this machine, in one run.

    python benchmarks/ab.py REV [--rounds 3] [--configs B1,B2] [--steps 10] [--windows 3]

REV (a commit, tag or branch) is checked out in a temporary git worktree; each round runs
`benchmarks/throughput.py` of both trees (each tree's own script on its own `src/`, so the
revisions may differ in layout and names), in alternating order (this tree first in odd rounds),
so that the machine's drift falls on both. Each run is a fresh process: its best and median
tokens/s per config. The summary is the median over rounds of each side's median tokens/s and
their ratio (this tree / REV): above 1, this tree is faster. Use it when a change touches the
model, the loss or the step; a difference inside the rounds' spread (printed) is noise.

B1, B2: throughput.py's bars (vocab 65 / 50257, 4 layers, d_model 256, seq 256, batch 16 / 8,
float32, AdamW, one device). The worktree is removed at the end, also after an error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def measure(tree: Path, configs: str, steps: int, windows: int) -> dict:
    """throughput.py of `tree` on its own src/: {config: {"tokens_per_sec", "median_tokens_per_sec", ...}}."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, str(tree / "benchmarks" / "throughput.py"), "--configs", configs,
                          "--steps", str(steps), "--windows", str(windows)], cwd=tree, env=env, capture_output=True,
                         text=True)
    if out.returncode:
        sys.exit(f"ab.py: throughput.py of {tree} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default="B1,B2")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--windows", type=int, default=3)
    args = ap.parse_args()
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{args.rev}^{{commit}}"], cwd=ROOT, capture_output=True,
                         text=True)
    if sha.returncode:
        print(f"ab.py: {args.rev!r} is not a revision of this repository (git rev-parse: "
              f"{sha.stderr.strip()})", file=sys.stderr)
        sys.exit(2)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    names = args.configs.split(",")
    with tempfile.TemporaryDirectory(prefix="spmdgpt-ab-") as tmp:
        other = Path(tmp) / "rev"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(other), sha.stdout.strip()], cwd=ROOT,
                       check=True)
        try:
            got = {"this": [], "rev": []}
            for r in range(args.rounds):
                order = [("this", ROOT), ("rev", other)]
                for side, tree in order if r % 2 == 0 else order[::-1]:
                    res = measure(tree, args.configs, args.steps, args.windows)
                    got[side].append(res)
                    print(f"round {r + 1} {side:4s}: " + " | ".join(
                        f"{n} {res[n]['median_tokens_per_sec']:,.0f} tokens/s (best {res[n]['tokens_per_sec']:,.0f})"
                        for n in names), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
    label = f"{head.strip()}{' (uncommitted changes)' if dirty else ''}"
    print(f"\nthis tree {label} against {args.rev} ({sha.stdout.strip()[:9]}), median of {args.rounds} rounds:")
    summary = {}
    for n in names:
        a = np.array([x[n]["median_tokens_per_sec"] for x in got["this"]])
        b = np.array([x[n]["median_tokens_per_sec"] for x in got["rev"]])
        ratio = float(np.median(a) / np.median(b))
        spread = float((max(a.max(), b.max()) - min(a.min(), b.min())) / np.median(b))
        summary[n] = {"this": float(np.median(a)), "rev": float(np.median(b)), "ratio": ratio}
        print(f"  {n}: {np.median(a):,.0f} vs {np.median(b):,.0f} tokens/s: {ratio:.3f}x "
              f"(the rounds spread over {100 * spread:.0f}% of REV's median)")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
