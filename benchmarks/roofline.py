"""A roofline of one training step from its optimized HLO, compiled for an H100 on any machine.

    python benchmarks/roofline.py                          # GPT-2 124M, bf16 logits, batch 16 x 1024
    python benchmarks/roofline.py --seq 4096 --batch 4     # the 4k shape of benchmarks/gpu.py speed
    python benchmarks/roofline.py --set model.loss_block=256 --top 25 --json out.json
    python benchmarks/roofline.py --experiment llama_1b --seq 2048 --batch 4 --set model.matmul_dtype=fp8

The step is spmdgpt's own (`plan.run_programs`), compiled by XLA's GPU compiler for the stored H100
description (`spmdgpt plan topology=h100`'s path: JAX's CUDA plugin, no GPU). Every kernel the step
launches is read from the compiled module: the fusions and custom calls of the entry computation
and of the loops' bodies (a body's kernels once per trip), each with

- bytes read (its operands; a fused parameter that the fusion only slices counts the slices) and
  written (its results);
- FLOPs: a GEMM fusion's dots (2 x the output's elements x the contracted size), the MoE's
  grouped-matmul kernels (Pallas, `model.moe.grouped=pallas`) by their rows and columns; cuDNN's fused
  attention from its score shape ([b, h, q, k] x head size: 4 per element forward, 10 backward,
  half of it under a causal mask);
- a time: a GEMM or attention kernel at the larger of its FLOPs at `--tflops` (cuDNN's attention
  at its pass's ATTENTION_RATE of it, forward 0.375 and backward 0.345, an H100's profiles; a GEMM of FP8
  operands, kind `gemm-fp8`: at `--fp8-tflops`, by default FP8_RATE = 1.2x that, what an H200's
  steps measured, not the data sheet's 2x) and its bytes at `--bandwidth`;
  every other kernel (XLA's loop, input and Triton fusions, copies) at its bytes at `--bandwidth`:
  the memory-bound tail.

The defaults are the H100 80GB rates measured on the lent machines (BENCHMARKS.md, GPU): cuBLAS's
bf16 GEMMs at ~800 TFLOP/s and ~3.0 TB/s device-to-device copies. It is a lower bound per kernel
(no launch gaps, no partial waves, a kernel that reads its inputs more than once counted once), so
the profile of a GPU visit says how far each kind is from it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from dataclasses import asdict
from typing import Dict, List, Optional

from spmdgpt.plan.roofline import Kernel, kernels, roofline  # noqa: F401  (the reading, in the package: `spmdgpt plan`'s too)

GPT2 = ["+experiment=gpt2_124m", "mesh.data=1", "checkpoint.enabled=false", "train.microbatches=1",
        "model.attention=cudnn", "model.logits_dtype=bfloat16"]

def compile_step(overrides: List[str], topology: str = "h100") -> tuple:
    """(config, the step's compiled text) for `topology`'s compile-only devices."""
    import jax

    from spmdgpt.config import freeze, load_config
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.plan.plan import batch_shapes, run_programs
    from spmdgpt.plan.topology import compile_only_devices, target_default
    from spmdgpt.training.state import abstract_state
    from spmdgpt.training.step import optimizer_of

    cfg = freeze(load_config(overrides))
    devices = compile_only_devices(topology)
    mesh = make_mesh(cfg.mesh, devices[:1] if len(devices) == 1 else devices)
    cached = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)  # (compile-only devices cannot load executables)
    try:
        with jax.set_mesh(mesh), target_default(mesh), warnings.catch_warnings():  # (see spmdgpt.cli.plan)
            warnings.filterwarnings("ignore", message="Error reading persistent compilation cache entry")
            rules = Rules(mesh, cfg.sharding, cfg.model)
            optimizer = optimizer_of(cfg)
            state, batch = abstract_state(cfg, rules, optimizer), batch_shapes(cfg, rules)
            step = run_programs(cfg, rules, optimizer, state, batch, batch, step_only=True)[0]
    finally:
        jax.config.update("jax_enable_compilation_cache", cached)
    return cfg, step.compiled.as_text()


def report(ks: List[Kernel], totals: Dict[str, dict], top: int) -> str:
    lines = [f"{'kind':<12} {'kernels':>8} {'launches':>9} {'GB moved':>9} {'TFLOP':>8} {'ms':>8}"]
    for kind in ("gemm", "gemm-fp8", "gemm-grouped", "attention", "fusion", "other", "step"):
        if kind in totals:
            t = totals[kind]
            lines.append(f"{kind:<12} {t['kernels']:>8} {t['launches']:>9} {t['bytes'] / 1e9:>9.2f} "
                         f"{t['flops'] / 1e12:>8.3f} {t['ms']:>8.3f}")
    lines.append(f"\nthe {top} costliest memory-bound kernels (fusion and other kinds):")
    tail = sorted((k for k in ks if k.kind in ("fusion", "other")), key=lambda k: -k.seconds)[:top]
    for k in tail:
        lines.append(f"  {k.seconds * 1e3:7.3f} ms  {(k.read + k.written) / 1e6:9.1f} MB x{k.runs:<3} {k.name:<34} "
                     f"{k.op[-70:]}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default="gpt2_124m", help="the experiment whose step (on one device)")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--set", action="append", default=[], help="a config override (repeatable)")
    ap.add_argument("--topology", default="h100")
    ap.add_argument("--tflops", type=float, default=800.0, help="GEMM rate, TFLOP/s")
    ap.add_argument("--fp8-tflops", type=float, default=None,
                    help="FP8 GEMMs' rate, TFLOP/s (default FP8_RATE = 1.2 x --tflops, measured)")
    ap.add_argument("--grouped-tflops", type=float, default=None,
                    help="the MoE's grouped Pallas kernels' rate, TFLOP/s (default: GROUPED_RATE x --tflops, measured)")
    ap.add_argument("--attention-tflops", type=float, default=None,
                    help="fused attention kernels' rate, TFLOP/s (default: ATTENTION_RATE x --tflops, by pass)")
    ap.add_argument("--bandwidth", type=float, default=3.0e12, help="memory bandwidth, bytes/s")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", default=None, help="write the totals and every kernel here")
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    overrides = [f"+experiment={args.experiment}", *GPT2[1:], f"data.seq_len={args.seq}",
                 f"model.max_seq_len={args.seq}", f"data.batch_size={args.batch}", *args.set]
    cfg, text = compile_step(overrides, args.topology)
    ks = kernels(text)
    totals = roofline(ks, args.tflops, args.bandwidth, args.fp8_tflops, args.grouped_tflops, args.attention_tflops)
    tokens = cfg.data.batch_size * cfg.data.seq_len
    step_ms = totals["step"]["ms"]
    shown = {o.split("=")[0]: o for o in overrides[1:]}  # (an override given again: the last one)
    print(f"roofline of the step on {args.topology}: {' '.join(shown.values())}")
    rate = f"{args.attention_tflops:g} TFLOP/s" if args.attention_tflops else "ATTENTION_RATE of it"
    print(f"(GEMMs at {args.tflops:g} TFLOP/s, fused attention at {rate}, bytes at "
          f"{args.bandwidth / 1e12:g} TB/s; a lower bound "
          f"per kernel)\n")
    print(report(ks, totals, args.top))
    print(f"\npredicted step {step_ms:.2f} ms = {tokens / step_ms * 1e3:,.0f} tokens/s (batch {cfg.data.batch_size} x "
          f"{cfg.data.seq_len})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"overrides": overrides, "tflops": args.tflops, "bandwidth": args.bandwidth, "totals": totals,
                       "kernels": [asdict(k) for k in ks]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    sys.exit(main())
