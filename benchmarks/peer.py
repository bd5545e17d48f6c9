"""spmdgpt against PyTorch on this CPU, same model, same shapes, alternating fresh processes.

    python benchmarks/peer.py [--rounds 2] [--configs B1,B2] [--steps 10] [--windows 5]

Each round runs, one process after another: the square float32 (and bfloat16) matmul rate of
JAX and of PyTorch, then per config spmdgpt (benchmarks/throughput.py, with `spmdgpt train`'s
XLA flags and malloc settings), the PyTorch reference benchmarks/torch_gpt.py in eager mode and
the same under `torch.compile`, all float32 (PyTorch runs in its side environment, torch_env.py). The reference is the
same model written compactly in
PyTorch (pre-norm LayerNorm without bias, RoPE, tanh-GELU MLP, tied embeddings, AdamW with
clipping). Every process times `--windows` windows of `--steps` steps after 3 warm-up steps
and reports the median window; the table shows the median over rounds, and the ratio is spmdgpt
over the faster of PyTorch eager and compiled. The CPU (lscpu model name and its vector flags)
heads the output, to go with every row recorded in benchmarks/BENCHMARKS.md.

B1: vocab 65, 4 layers, 4 heads, d_model 256, seq 256, batch 16. B2: the same with vocabulary
50257 and batch 8 (as in benchmarks/throughput.py). Target (issue 20): spmdgpt >= 1.1x.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from torch_env import require_torch_python
from train_shakespeare import cpu_model  # (this folder is on sys.path when a script here runs)

HERE = Path(__file__).parent
SHAPES = {"B1": {"vocab": 65, "batch": 16}, "B2": {"vocab": 50257, "batch": 8}}
COMMON = {"layers": 4, "heads": 4, "d": 256, "seq": 256}

MATMUL = r"""
import json, sys, time
lib, sizes = sys.argv[1], (1024, 2048, 3072)
rates = {}
if lib == "jax":
    from spmdgpt.mesh.runtime import set_default_xla_flags
    set_default_xla_flags()
    import jax, jax.numpy as jnp
    for dt in ("float32", "bfloat16"):
        best = 0.0
        for n in sizes:
            a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32).astype(dt)
            b = a + 1
            f = jax.jit(lambda a, b: a @ b)
            f(a, b).block_until_ready()
            for _ in range(5):
                t0 = time.perf_counter()
                f(a, b).block_until_ready()
                best = max(best, 2 * n**3 / (time.perf_counter() - t0))
        rates[dt] = best / 1e9
else:
    import torch
    for dt in ("float32", "bfloat16"):
        best = 0.0
        for n in sizes:
            a = torch.randn(n, n).to(getattr(torch, dt))
            b = a + 1
            a @ b
            for _ in range(5):
                t0 = time.perf_counter()
                a @ b
                best = max(best, 2 * n**3 / (time.perf_counter() - t0))
        rates[dt] = best / 1e9
print(json.dumps(rates))
"""


def last_json(cmd: list) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"peer.py: {' '.join(cmd)} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spmdgpt(name: str, steps: int, windows: int) -> float:
    r = last_json([sys.executable, str(HERE / "throughput.py"), "--configs", name, "--steps", str(steps),
                   "--windows", str(windows)])
    return r[name]["median_tokens_per_sec"]


def pytorch(python: str, name: str, steps: int, windows: int, compiled: bool) -> float:
    shape = {**COMMON, **SHAPES[name]}
    cmd = [python, str(HERE / "torch_gpt.py"), "--dtype", "float32", "--steps", str(steps),
           "--windows", str(windows), *[a for k, v in shape.items() for a in (f"--{k}", str(v))]]
    return last_json(cmd + ([] if compiled else ["--no-compile"]))["tokens_per_sec"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--configs", default="B1,B2")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed window")
    ap.add_argument("--windows", type=int, default=5, help="timed windows per process (median reported)")
    args = ap.parse_args()
    names = args.configs.split(",")
    for n in names:
        if n not in SHAPES:
            print(f"peer.py: unknown config {n!r} in --configs; choose from {', '.join(SHAPES)}", file=sys.stderr)
            sys.exit(2)
    python = {"jax": sys.executable, "torch": require_torch_python("peer.py")}  # PyTorch: its own environment

    cpu = cpu_model()
    print(f"CPU: {cpu}", flush=True)
    runs = {"matmul_jax": [], "matmul_torch": [], **{f"{n}/{impl}": [] for n in names
                                                       for impl in ("spmdgpt", "eager", "compile")}}
    for r in range(args.rounds):
        for lib in ("jax", "torch"):
            runs[f"matmul_{lib}"].append(last_json([python[lib], "-c", MATMUL, lib]))
            print(f"round {r + 1}: {lib} matmul GFLOP/s {runs[f'matmul_{lib}'][-1]}", flush=True)
        for n in names:
            for impl in ("spmdgpt", "eager", "compile"):
                rate = (spmdgpt(n, args.steps, args.windows) if impl == "spmdgpt"
                        else pytorch(python["torch"], n, args.steps, args.windows, impl == "compile"))
                runs[f"{n}/{impl}"].append(rate)
                print(f"round {r + 1}: {n} {impl}: {rate:,.0f} tokens/s", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items() if not k.startswith("matmul")}
    mm = {lib: {dt: statistics.median(r[dt] for r in runs[f"matmul_{lib}"]) for dt in ("float32", "bfloat16")}
          for lib in ("jax", "torch")}
    print(f"\nsquare matmul GFLOP/s (best of 1024-3072, median of {args.rounds} rounds): "
          f"JAX float32 {mm['jax']['float32']:.0f}, bfloat16 {mm['jax']['bfloat16']:.0f} | "
          f"PyTorch float32 {mm['torch']['float32']:.0f}, bfloat16 {mm['torch']['bfloat16']:.0f}")
    print("| config | spmdgpt tokens/s | PyTorch eager | PyTorch compile | spmdgpt / best PyTorch |")
    print("| --- | ---: | ---: | ---: | ---: |")
    result = {"cpu": cpu, "matmul_gflops": mm, "runs": runs}
    for n in names:
        s, e, c = med[f"{n}/spmdgpt"], med[f"{n}/eager"], med[f"{n}/compile"]
        ratio = s / max(e, c)
        result[n] = {"spmdgpt": s, "eager": e, "compile": c, "ratio": ratio}
        print(f"| {n} | {s:,.0f} | {e:,.0f} | {c:,.0f} | {ratio:.2f}x ({'PASS' if ratio >= 1.1 else 'FAIL'} vs 1.1x) |")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
