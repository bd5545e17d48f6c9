"""What stands between the sampler's and the trainer's float32 log-probabilities (the RL issue, item 3).

The engine scores a sampled token in its decode step (a few rows at a time, keys and values read
from pages); the trainer scores the same tokens in the training forward pass (every token of the
batch at once). The two programs multiply the same weights by the same activations, so they agree
bitwise only if every kernel gives a row the same result whatever rows are computed beside it
(batch invariance). This script measures:

1. Whether XLA:CPU's float32 dot is batch invariant: `x @ w` computed in blocks of 1, 2 and 5 rows
   against all rows at once, bitwise, for shapes of GPT layers, with spmdgpt's default dot library
   (YNNPACK, `--xla_cpu_experimental_ynn_fusion_type=dot`) and with XLA's own (Eigen).
2. `rl/logp_mismatch` and `rl/logp_kl` of a float32 GRPO run (BENCHMARKS' 6-step command, on 400 of
   the arithmetic walk's problems) under both, each in its own `spmdgpt train` process.

    python benchmarks/logp_match.py [--out DIR]

Each part runs in a fresh process per dot library (XLA reads its flags once, at start).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

LIBRARIES = {"ynnpack (default)": "--xla_cpu_experimental_ynn_fusion_type=dot",
             "eigen": "--xla_cpu_experimental_ynn_fusion_type="}
# (rows, fan_in, fan_out): a GRPO model's q/k/v and head (128 wide), GPT-2 small's MLP and a 1,000-token head
SHAPES = [(32, 128, 384), (32, 128, 16), (48, 256, 1000), (96, 512, 2048), (128, 768, 3072), (7, 384, 1536)]
BLOCKS = (1, 2, 5)

GRPO = ["data.source=text", "+data.datasets.add={paths:[add.jsonl],format:prompts}", "data.seq_len=16",
        "model.max_seq_len=16", "model.num_layers=4", "model.d_model=128", "model.num_heads=4", "model.vocab_size=16",
        "data.batch_size=32", "rl.group_size=8", "rl.max_new_tokens=4", "rl.reward=numeric", "train.steps=6",
        "train.eval_every=0", "mesh.data=1", "model.compute_dtype=float32", "train.progress=false",
        "train.log_every=1"]


def dots() -> dict:
    """{shape: [bitwise equal for each block size]} of x @ w in row blocks against all rows (this process's flags)."""
    import jax
    import numpy as np

    f = jax.jit(lambda a, b: a @ b)
    out = {}
    for rows, fan_in, fan_out in SHAPES:
        x = jax.random.normal(jax.random.key(0), (rows, fan_in))
        w = jax.random.normal(jax.random.key(1), (fan_in, fan_out)) / fan_in ** 0.5
        full = np.asarray(f(x, w))
        equal = []
        for m in BLOCKS:
            n = rows - rows % m
            part = np.concatenate([np.asarray(f(x[i:i + m], w)) for i in range(0, n, m)])
            equal.append(float(np.abs(part - full[:n]).max()))
        out[f"{rows}x{fan_in}x{fan_out}"] = equal
    return out


def sums_folder(folder: Path) -> None:
    """400 of the arithmetic walk's problems (a + b or a - b of 2- and 3-digit numbers) with their answers."""
    from spmdgpt.rl.arithmetic import problems

    lines = [json.dumps({"prompt": q, "answer": a}) for q, a in problems(400, 0)]
    (folder / "add.jsonl").write_text("\n".join(lines) + "\n")


def grpo(folder: Path, run: Path, flag: str) -> list:
    """The float32 GRPO run's (rl/logp_mismatch, rl/logp_kl) per step under dot-library flag `flag`."""
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip(), "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-m", "spmdgpt", "train", f"data.path={folder}", *GRPO, f"run.dir={run}"],
                   check=True, env=env, capture_output=True, text=True, timeout=1200)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["rl/logp_mismatch"], r["rl/logp_kl"]) for r in rows if "rl/logp_mismatch" in r]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    ap.add_argument("--dots-only", action="store_true", help=argparse.SUPPRESS)  # (the child process's part 1)
    args = ap.parse_args()
    if args.dots_only:
        print(json.dumps(dots()))
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="logp-match-"))
    out.mkdir(parents=True, exist_ok=True)
    sums_folder(out)
    results = {}
    for name, flag in LIBRARIES.items():
        env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip(), "JAX_PLATFORMS": "cpu"}
        child = subprocess.run([sys.executable, __file__, "--dots-only"], check=True, env=env, capture_output=True,
                               text=True, timeout=600)
        results[name] = {"dots": json.loads(child.stdout.splitlines()[-1]),
                         "grpo": grpo(out, out / name.split()[0], flag)}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print("max |rows in blocks of 1, 2, 5 - all rows at once| of x @ w, float32 (0 = bitwise)\n")
    print("| rows x fan_in x fan_out | " + " | ".join(f"{n}: 1, 2, 5 rows" for n in results) + " |")
    print("| --- |" + " --- |" * len(results))
    for shape in results[next(iter(results))]["dots"]:
        cells = [", ".join("0" if d == 0 else f"{d:.1e}" for d in r["dots"][shape]) for r in results.values()]
        print(f"| {shape} | " + " | ".join(cells) + " |")
    print("\nfloat32 GRPO, 6 steps: rl/logp_mismatch and rl/logp_kl (min - max over the steps)\n")
    print("| dot library | rl/logp_mismatch | rl/logp_kl | steps at 0 |")
    print("| --- | --- | --- | --- |")
    for name, r in results.items():
        mm, kl = zip(*r["grpo"])
        print(f"| {name} | {min(mm):.2e} - {max(mm):.2e} | {min(kl):.1e} - {max(kl):.1e} | "
              f"{sum(m == 0 for m in mm)} of {len(mm)} |")
    print(f"\n(runs and results.json in {out})")


if __name__ == "__main__":
    main()
