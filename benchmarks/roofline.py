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
- a time: a GEMM or attention kernel at the larger of its FLOPs at `--tflops` (a GEMM of FP8
  operands, kind `gemm-fp8`: at `--fp8-tflops`, by default twice that, Hopper's ratio of dense FP8 to
  bf16 peaks: 1,979 to 989 TFLOP/s on the H100 SXM's data sheet) and its bytes at `--bandwidth`;
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
import math
import os
import re
import sys
import warnings
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

GPT2 = ["+experiment=gpt2_124m", "mesh.data=1", "checkpoint.enabled=false", "train.microbatches=1",
        "model.attention=cudnn", "model.logits_dtype=bfloat16"]

_ARRAY = re.compile(r"\b(pred|s4|u4|s8|u8|f8e4m3fn|f8e5m2|s16|u16|f16|bf16|s32|u32|f32|s64|u64|f64)\[([0-9,]*)\]")
_BITS = {"pred": 8, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "f8e4m3fn": 8, "f8e5m2": 8, "s16": 16, "u16": 16, "f16": 16,
         "bf16": 16, "s32": 32, "u32": 32, "f32": 32, "s64": 64, "u64": 64, "f64": 64}
# "%name = TYPE opcode(operands), attributes" (TYPE: an array or a tuple of arrays)
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (.*?) ([a-z][a-z0-9-]*)\((.*?)\)(?:, |$)")
_CALLS = re.compile(r"calls=%([^,\s}]+)")
_WHILE_BODY = re.compile(r"body=%([^,\s]+)")
_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_CONTRACTING = re.compile(r"lhs_contracting_dims=\{([0-9,]*)\}")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_SCORES = re.compile(r'"intermediate_tensor_shape":\s*\{"element_type":\s*"\w+",\s*"dimensions":\s*\[([^\]]*)\]')
_LAYOUTS = re.compile(r"\{[0-9,]*\}")  # (layouts, e.g. {1,0}, say nothing about size)
SLICING = ("slice", "dynamic-slice")


def type_bytes(text: str) -> int:
    """Bytes of the arrays a type string names (an array, or every element of a tuple)."""
    return sum(_BITS[t] * math.prod(int(d) for d in dims.split(",") if d) // 8 for t, dims in _ARRAY.findall(text))


def dims_of(text: str) -> List[int]:
    """The dimensions of the first array a type string names."""
    m = _ARRAY.search(text)
    return [int(d) for d in m.group(2).split(",") if d] if m else []


@dataclass
class Instruction:
    name: str
    type: str  # its result type
    opcode: str
    operands: List[str]
    line: str


def parse(hlo_text: str) -> Dict[str, List[Instruction]]:
    """A compiled HLO module's text as {computation name: its instructions} (ENTRY: "")."""
    from spmdgpt.hlo import computations

    out = {}
    for comp, lines in computations(hlo_text).items():
        rows = []
        for line in lines:
            m = _INSTRUCTION.match(_LAYOUTS.sub("", line))
            if m:
                name, typ, opcode, operands = m.groups()
                names = [o.strip().split(" ")[-1].lstrip("%") for o in operands.split(",") if o.strip()]
                rows.append(Instruction(name, typ, opcode, names, line))
        out[comp] = rows
    return out


@dataclass
class Kernel:
    name: str
    kind: str  # gemm | attention | fusion (memory-bound) | other
    read: int  # bytes, per run
    written: int
    flops: float
    runs: int  # times one step launches it (a loop body's: once per trip)
    op: str  # its op_name metadata (the jaxpr path that made it)
    seconds: float = 0.0  # the roofline's time for all its runs


def _read_bytes(inst: Instruction, symbols: Dict[str, str], comps: Dict[str, List[Instruction]]) -> int:
    """Bytes a fusion or custom call reads: each operand whole, except a fusion's parameter that
    its computation only slices (the slices' bytes)."""
    called = _CALLS.search(inst.line)
    body = comps.get(called.group(1), []) if called and inst.opcode == "fusion" else []
    params = {}
    for i in body:
        if i.opcode == "parameter":
            index = re.search(r"parameter\((\d+)\)", i.line)
            params[int(index.group(1))] = i.name
    total = 0
    for k, operand in enumerate(inst.operands):
        whole = type_bytes(symbols.get(operand, ""))
        p = params.get(k)
        users = [i for i in body if p is not None and p in i.operands]
        if users and all(u.opcode in SLICING for u in users):
            whole = min(whole, sum(type_bytes(u.type) for u in users))
        total += whole
    return total


def _dot_flops(inst: Instruction, symbols: Dict[str, str]) -> float:
    """2 x the dot's output elements x its contracted size."""
    lhs = dims_of(symbols.get(inst.operands[0], ""))
    m = _CONTRACTING.search(inst.line)
    contracted = math.prod(lhs[int(d)] for d in m.group(1).split(",") if d) if m and lhs else 1
    return 2.0 * math.prod(dims_of(inst.type)) * contracted


def _dots(comp: str, comps: Dict[str, List[Instruction]], seen=None) -> List[tuple]:
    """(FLOPs: 2 x output elements x contracted size, whether its operands are FP8) of every dot
    in a computation and those it calls."""
    seen = seen if seen is not None else set()
    if comp in seen:
        return []
    seen.add(comp)
    insts = comps.get(comp, [])
    symbols = {i.name: i.type for i in insts}
    out = []
    for i in insts:
        if i.opcode == "dot":
            out.append((_dot_flops(i, symbols), any("f8e" in symbols.get(o, "") for o in i.operands)))
        for called in _CALLS.findall(i.line):
            out += _dots(called, comps, seen)
    return out


_KERNEL_NAME = re.compile(r'\bname = "([^"]+)"')
GROUPED_KERNELS = ("grouped_rows", "grouped_weights")  # (spmdgpt.model.grouped's Pallas kernels)


def _grouped_flops(inst: Instruction, symbols: Dict[str, str]) -> float:
    """The MoE's grouped-matmul kernels (`spmdgpt.model.grouped`): 2 x R x K x N, the rows x
    [R, K] (operand 1 of grouped_rows, 2 of grouped_weights) times N columns (the output's last)."""
    m = _KERNEL_NAME.search(inst.line)
    x = dims_of(symbols.get(inst.operands[1 if m.group(1) == "grouped_rows" else 2], ""))
    return 2.0 * x[0] * x[1] * dims_of(inst.type)[-1] if len(x) == 2 else 0.0


def _attention_flops(inst: Instruction) -> float:
    """cuDNN's fused attention: the score matrix [b, h, q, k] (its backend config) x the head size
    x 4 forward (QK^T and PV) or 10 backward (five such products), halved under a causal mask."""
    m = _SCORES.search(inst.line)
    if not m:
        return 0.0
    scores = math.prod(int(d.strip().strip('"')) for d in m.group(1).split(",") if d.strip())
    head = dims_of(inst.type)[-1]
    per = 10 if "Backward" in inst.line.split("custom_call_target=")[1][:60] else 4
    causal = 0.5 if '"mask_type": "CAUSAL"' in inst.line or '"mask_type":"CAUSAL"' in inst.line else 1.0
    return per * scores * head * causal


def kernels(hlo_text: str) -> List[Kernel]:
    """Every kernel one step launches (see the module docstring), from a compiled module's text."""
    from spmdgpt.hlo import computations, runs_per_step

    comps = parse(hlo_text)
    counted = runs_per_step(computations(hlo_text))  # (from the loop conditions, where XLA gives no trip count)
    runs = {"": 1}
    top = [""]  # the computations that launch kernels: the entry and the loops' bodies
    for comp in top:
        for i in comps.get(comp, []):
            if i.opcode == "while" and (m := _WHILE_BODY.search(i.line)):
                known = _TRIPS.search(i.line)
                runs[m.group(1)] = runs[comp] * (int(known.group(1)) if known else counted.get(m.group(1), 1))
                top.append(m.group(1))
    out = []
    for comp in top:
        symbols = {i.name: i.type for i in comps[comp]}
        for i in comps[comp]:
            if i.opcode in ("parameter", "get-tuple-element", "bitcast", "tuple", "constant", "while", "after-all",
                            "partition-id", "replica-id"):
                continue
            op = m.group(1) if (m := _OP_NAME.search(i.line)) else ""
            flops, kind = 0.0, "other"
            if i.opcode == "fusion":  # a GEMM when its computation holds a dot (Triton's GEMM fusions, ...)
                dots = _dots(_CALLS.search(i.line).group(1), comps)
                flops = sum(f for f, _ in dots)
                kind = ("gemm-fp8" if any(fp8 for _, fp8 in dots) else "gemm") if flops else "fusion"
            elif i.opcode == "dot":  # (a dot left unfused)
                kind, flops = "gemm", _dot_flops(i, symbols)
            elif i.opcode == "custom-call":
                if "__cudnn$fmha" in i.line:
                    kind, flops = "attention", _attention_flops(i)
                elif "__cublas" in i.line:
                    kind = "gemm"
                elif "xla.gpu.triton" in i.line and (n := _KERNEL_NAME.search(i.line)) and n[1] in GROUPED_KERNELS:
                    kind, flops = "gemm", _grouped_flops(i, symbols)
            out.append(Kernel(i.name, kind, _read_bytes(i, symbols, comps), type_bytes(i.type), flops,
                              runs.get(comp, 1), op))
    return out


def roofline(ks: List[Kernel], tflops: float, bandwidth: float, fp8_tflops: Optional[float] = None) -> Dict[str, dict]:
    """Each kernel's time (its FLOPs at `tflops` x 1e12 FLOP/s, an FP8 GEMM's at `fp8_tflops`
    (default 2 x tflops), or its bytes at `bandwidth` bytes/s, the larger; the FLOPs of a
    memory-bound kind are not counted) and the totals by kind."""
    totals: Dict[str, dict] = defaultdict(lambda: {"kernels": 0, "launches": 0, "bytes": 0, "flops": 0.0, "ms": 0.0})
    rates = {"gemm": tflops, "attention": tflops, "gemm-fp8": fp8_tflops or 2 * tflops}
    for k in ks:
        compute = k.flops / (rates[k.kind] * 1e12) if k.kind in rates else 0.0
        k.seconds = k.runs * max(compute, (k.read + k.written) / bandwidth)
        t = totals[k.kind]
        t["kernels"] += 1
        t["launches"] += k.runs
        t["bytes"] += k.runs * (k.read + k.written)
        t["flops"] += k.runs * k.flops
        t["ms"] += k.seconds * 1e3
    totals["step"] = {key: sum(t[key] for t in list(totals.values())) for key in ("kernels", "launches", "bytes",
                                                                                  "flops", "ms")}
    return dict(totals)


def compile_step(overrides: List[str], topology: str = "h100") -> tuple:
    """(config, the step's compiled text) for `topology`'s compile-only devices."""
    import jax

    from spmdgpt.config import freeze, load_config
    from spmdgpt.plan import batch_shapes, run_programs
    from spmdgpt.sharding import Rules, make_mesh
    from spmdgpt.state import abstract_state
    from spmdgpt.topology import compile_only_devices
    from spmdgpt.train_step import optimizer_of

    cfg = freeze(load_config(overrides))
    devices = compile_only_devices(topology)
    mesh = make_mesh(cfg.mesh, devices[:1] if len(devices) == 1 else devices)
    cached = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)  # (compile-only devices cannot load executables)
    try:
        with jax.set_mesh(mesh), warnings.catch_warnings():  # (see spmdgpt.cli.plan)
            warnings.filterwarnings("ignore", message="Error reading persistent compilation cache entry")
            rules = Rules(mesh, cfg.sharding, cfg.model)
            optimizer = optimizer_of(cfg)
            state, batch = abstract_state(cfg, rules, optimizer), batch_shapes(cfg, rules)
            step = run_programs(cfg, rules, optimizer, state, batch, batch, step_only=True)[0]
    finally:
        jax.config.update("jax_enable_compilation_cache", cached)
    return cfg, step.compiled.as_text()


def report(ks: List[Kernel], totals: Dict[str, dict], top: int) -> str:
    lines = [f"{'kind':<10} {'kernels':>8} {'launches':>9} {'GB moved':>9} {'TFLOP':>8} {'ms':>8}"]
    for kind in ("gemm", "gemm-fp8", "attention", "fusion", "other", "step"):
        if kind in totals:
            t = totals[kind]
            lines.append(f"{kind:<10} {t['kernels']:>8} {t['launches']:>9} {t['bytes'] / 1e9:>9.2f} "
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
    ap.add_argument("--tflops", type=float, default=800.0, help="GEMM and attention rate, TFLOP/s")
    ap.add_argument("--fp8-tflops", type=float, default=None,
                    help="FP8 GEMMs' rate, TFLOP/s (default 2 x --tflops: Hopper's FP8 to bf16 peak ratio)")
    ap.add_argument("--bandwidth", type=float, default=3.0e12, help="memory bandwidth, bytes/s")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", default=None, help="write the totals and every kernel here")
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    overrides = [f"+experiment={args.experiment}", *GPT2[1:], f"data.seq_len={args.seq}",
                 f"model.max_seq_len={args.seq}", f"data.batch_size={args.batch}", *args.set]
    cfg, text = compile_step(overrides, args.topology)
    ks = kernels(text)
    totals = roofline(ks, args.tflops, args.bandwidth, args.fp8_tflops)
    tokens = cfg.data.batch_size * cfg.data.seq_len
    step_ms = totals["step"]["ms"]
    print(f"roofline of the step on {args.topology}: {' '.join(overrides[1:])}")
    print(f"(GEMM/attention at {args.tflops:g} TFLOP/s, bytes at {args.bandwidth / 1e12:g} TB/s; a lower bound "
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
