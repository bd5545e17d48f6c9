"""The kernels of a compiled step read from its optimized HLO, and their roofline time.

    kernels(compiled.as_text()) -> [Kernel]     every fusion and custom call one step launches
    roofline(kernels, tflops, bandwidth)        each kernel's time and the totals by kind

Every kernel is read from the compiled module: the fusions and custom calls of the entry
computation and of the loops' bodies (a body's kernels once per trip), each with

- bytes read (its operands; a fused parameter that the fusion only slices counts the slices) and
  written (its results);
- FLOPs: a GEMM fusion's dots (2 x the output's elements x the contracted size), the MoE's
  grouped-matmul kernels (Pallas, `model.moe.grouped=pallas`) by their rows and columns; cuDNN's
  fused attention from its score shape ([b, h, q, k] x head size: 4 per element forward, 10
  backward, half of it under a causal mask);
- a time: a GEMM or attention kernel at the larger of its FLOPs at `tflops` (a GEMM of FP8
  operands, kind `gemm-fp8`: at `fp8_tflops`, by default FP8_RATE x `tflops`, what an H200's step
  gave, not the data sheet's 2x; the grouped MoE kernels, kind `gemm-grouped`: each at its
  GROUPED_RATE of it, as an H200's profile measured them; cuDNN's attention at its pass's
  ATTENTION_RATE of it, as an H100's profiles measured it) and its bytes at `bandwidth`;
  every other kernel (XLA's loop, input and Triton fusions, copies) at its bytes: the
  memory-bound tail.

A lower bound per kernel (no launch gaps, no partial waves, a kernel that reads its inputs more
than once counted once). `spmdgpt plan` takes its FLOPs and bytes from here where XLA's cost
analysis gives none (XLA's GPU compiler); benchmarks/roofline.py prints the table. Measured
against on GPUs in benchmarks/BENCHMARKS.md (the MoE's grouped kernels ran at about 40% of the
rate this assumes on an H200).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional

from spmdgpt.plan.hlo import computations, runs_per_step

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
    op: str  # its op_name metadata (the jaxpr path that made it); a grouped MoE kernel's own name; cuDNN
    # attention's pass (attention_forward, attention_backward)
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


def _cudnn_attention(inst: Instruction) -> tuple:
    """(pass, FLOPs) of cuDNN's fused attention: the score matrix [b, h, q, k] (its backend config)
    x the head size x 4 forward (QK^T and PV) or 10 backward (five such products), halved under a
    causal mask."""
    backward = "Backward" in inst.line.split("custom_call_target=")[1][:60]
    name = "attention_backward" if backward else "attention_forward"
    m = _SCORES.search(inst.line)
    if not m:
        return name, 0.0
    scores = math.prod(int(d.strip().strip('"')) for d in m.group(1).split(",") if d.strip())
    head = dims_of(inst.type)[-1]
    causal = 0.5 if '"mask_type": "CAUSAL"' in inst.line or '"mask_type":"CAUSAL"' in inst.line else 1.0
    return name, (10 if backward else 4) * scores * head * causal


_TOKAMAX_ATTENTION = re.compile(r"attention\.pallas_mosaic_gpu(_vjp)?\.PallasMosaicGpuFlashAttention")
_PAYLOAD_ARRAY = r'\\"{}\\":\\"\w+\[([0-9,]*)\]'


def _payload_dims(inst: Instruction, argument: str) -> List[int]:
    """The shape of `argument` as a tokamax kernel's metadata payload names it ([] if it does not)."""
    m = re.search(_PAYLOAD_ARRAY.format(argument), inst.line)
    return [int(d) for d in m.group(1).split(",") if d] if m else []


def _tokamax_attention(inst: Instruction, backward: bool) -> tuple:
    """(pass, FLOPs) of a tokamax Mosaic GPU flash attention kernel (`model.attention=tokamax`), from
    the q [b, t, n, h] and k [b, s, K, h] its metadata payload names: scores b n t s x head size
    x 2 per matmul, halved under a causal mask. The forward kernel has 2 matmuls (QK^T, PV); the
    backward runs as two kernels, dK/dV (4: S, dP, dV, dK; two results) and dQ (3: S, dP, dQ)."""
    q, k = _payload_dims(inst, "q"), _payload_dims(inst, "k")
    if len(q) != 4 or len(k) != 4:
        return "tokamax_forward", 0.0
    causal = 0.5 if re.search(r'causal_mask\\":\{', inst.line) else 1.0
    name, matmuls = ("tokamax_forward", 2) if not backward else \
        ("tokamax_dkv", 4) if inst.type.startswith("(") else ("tokamax_dq", 3)
    return name, 2.0 * matmuls * q[0] * q[1] * q[2] * k[1] * q[3] * causal


def _tokamax_ragged_dot(inst: Instruction) -> float:
    """FLOPs of one of tokamax's ragged_dot kernels (`model.moe.grouped=tokamax`: the forward product
    and both gradients alike): 2 x the payload's lhs rows x its columns x the result's last width."""
    lhs = _payload_dims(inst, "lhs")
    return 2.0 * lhs[0] * lhs[1] * dims_of(inst.type)[-1] if len(lhs) == 2 else 0.0


def kernels(hlo_text: str) -> List[Kernel]:
    """Every kernel one step launches (see the module docstring), from a compiled module's text."""
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
                if "__cudnn$fmha" in i.line:  # (op: each kind's rate's name)
                    kind, (op, flops) = "attention", _cudnn_attention(i)
                elif "mosaic_gpu" in i.line and "ragged_dot.pallas_mosaic_gpu" in i.line:  # (moe.grouped=tokamax)
                    kind, op, flops = "gemm-grouped", "tokamax_ragged_dot", _tokamax_ragged_dot(i)
                elif "mosaic_gpu" in i.line and (t := _TOKAMAX_ATTENTION.search(i.line)):
                    kind, (op, flops) = "attention", _tokamax_attention(i, bool(t.group(1)))
                elif "__cublas" in i.line:
                    kind = "gemm"
                elif "xla.gpu.triton" in i.line and (n := _KERNEL_NAME.search(i.line)) and n[1] in GROUPED_KERNELS:
                    kind, flops, op = "gemm-grouped", _grouped_flops(i, symbols), n[1]  # (its rate's name)
            out.append(Kernel(i.name, kind, _read_bytes(i, symbols, comps), type_bytes(i.type), flops,
                              runs.get(comp, 1), op))
    return out


# The MoE's grouped-matmul Pallas kernels (`model/grouped.py`, Triton) by kernel, against the GEMM
# rate, with bf16's default tiles (`grouped.HALF_TILES`). An H200's profile (2026-11-27, the GPU
# section's sixth visit in benchmarks/BENCHMARKS.md) measured the previous tiles at 16,384 x 1,024:
# the row products (forward and dx) near 453 TFLOP/s, the weight gradients near 286, cuBLAS's GEMMs
# 814 (0.57 and 0.36 of this tool's 800). The seventh visit's sweep (no profile) took the layer from
# 2.09x to 1.71x the dense MLP's time with HALF_TILES: 0.2 ms of the 0.9 ms saved came with the row
# tiles' doubled width, the rest with the weight gradient's larger tile and 8 warps, which reads
# 0.64 and 0.54 (the layer predicted at 1.71x). To profile again at the next visit.
# tokamax's ragged_dot (Mosaic GPU, `model.moe.grouped=tokamax`; each of its kernels, forward and
# the two gradients, 2 x lhs rows x lhs columns x the result's last width) has not run on a GPU
# here yet: priced at the Pallas row kernels' measured rate until one times it.
GROUPED_RATE = {"grouped_rows": 0.64, "grouped_weights": 0.54, "tokamax_ragged_dot": 0.64}

# cuDNN's fused attention (kind attention) by pass, against the GEMM rate. An H100's profiles of
# GPT-2 124M (bf16, 16 x 1024, head size 64, causal; BENCHMARKS.md, the GPU section's third and
# fourth visits) measured the 12 forward kernels at 1.03 ms for 309 GFLOP (300 TFLOP/s) and the 12
# backward ones at 2.80 ms for 773 GFLOP (276 TFLOP/s), where the GEMMs ran near 770: the tool
# assumed the GEMM rate and predicted 1.37 ms for the 3.83 measured, the step's largest miss.
# tokamax's Mosaic GPU kernels (`model.attention=tokamax`) have not run on a GPU here yet: until one
# times them (benchmarks/attention_kernels.py), they are priced at cuDNN's rates, pass for pass.
ATTENTION_RATE = {"attention_forward": 0.375, "attention_backward": 0.345, "tokamax_forward": 0.375,
                  "tokamax_dkv": 0.345, "tokamax_dq": 0.345}

# FP8 GEMMs (kind gemm-fp8) against the bf16 rate: Hopper's data sheet says 2x (1,979 to 989 dense
# TFLOP/s on the H100 SXM), but an H200 (2026-11-27, the sixth visit) ran a 1.1B of GPT-2's kind
# (d_model 2048, 16 layers, 8 x 1024) at 92,891 tokens/s in FP8 (delayed scaling, the head too)
# against 85,311 in bf16: 1.09x, where 2x predicted 1.44x. With the step's other kernels as this
# tool reads them, its FP8 GEMMs ran at about 1.2x the bf16 ones' rate (inferred from the two
# steps' totals, not yet from a profile), and 1.2 predicts 1.06x.
FP8_RATE = 1.2


def roofline(ks: List[Kernel], tflops: float, bandwidth: float, fp8_tflops: Optional[float] = None,
             grouped_tflops: Optional[float] = None, attention_tflops: Optional[float] = None) -> Dict[str, dict]:
    """Each kernel's time (its FLOPs at `tflops` x 1e12 FLOP/s, an FP8 GEMM's at `fp8_tflops`
    (default FP8_RATE x tflops), a grouped MoE kernel's at `grouped_tflops` (default its
    GROUPED_RATE x tflops), cuDNN's attention at `attention_tflops` (default its pass's
    ATTENTION_RATE x tflops), or its bytes at `bandwidth` bytes/s, the larger; the FLOPs of a memory-bound kind
    are not counted) and the totals by kind."""
    totals: Dict[str, dict] = defaultdict(lambda: {"kernels": 0, "launches": 0, "bytes": 0, "flops": 0.0, "ms": 0.0})
    rates = {"gemm": tflops, "gemm-fp8": fp8_tflops or FP8_RATE * tflops}
    for k in ks:
        if k.kind == "gemm-grouped":
            rate = grouped_tflops or GROUPED_RATE[k.op] * tflops
        elif k.kind == "attention":
            rate = attention_tflops or ATTENTION_RATE.get(k.op, 1.0) * tflops
        else:
            rate = rates.get(k.kind)
        compute = k.flops / (rate * 1e12) if rate else 0.0
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
