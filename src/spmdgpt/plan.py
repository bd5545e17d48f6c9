"""An ahead-of-time plan of one training step: will it fit, how much does it compute, and what
does it communicate, before any data is read or any weight is allocated.

The step is the real one (`trainer.make_train_step`: optimizer, microbatches, loss blocks, remat,
the sharding rules), lowered from abstract shapes (`jax.ShapeDtypeStruct`s carrying each
array's sharding) and compiled for the current mesh (or N simulated CPU devices). Everything is
per device, read from what XLA compiled:

- parameter / optimizer-state / batch bytes: each array's shard shape under its sharding;
- temporary bytes: `compiled.memory_analysis()` (activations, gradients, workspace);
- FLOPs: `compiled.cost_analysis()` beside the 6N + attention formula of `flops.py`;
- collectives: the all-gather / reduce-scatter / all-reduce / all-to-all / ragged-all-to-all /
  collective-permute instructions of the compiled program with their result bytes (a ragged
  all-to-all's result is its whole receive buffer: an upper bound of the rows it moves). Counts are of instructions in
  the program text: one inside a loop body (the layer scan when model.scan_unroll=false,
  microbatches) runs once per iteration. XLA:CPU has no reduce-scatter pass, so on simulated
  CPU devices FSDP's gradient reduce-scatter appears as an all-reduce followed by a slice; GPU
  and TPU compilers emit reduce-scatters.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Dict, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import Config
from spmdgpt.flops import flops_per_token
from spmdgpt.model import abstract_params
from spmdgpt.sharding import Rules

COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "ragged-all-to-all", "collective-permute")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%\S+ = (.+?) (" + "|".join(sorted(COLLECTIVES, key=len, reverse=True))
                          + r")(?:-start)?\(")
_ARRAY = re.compile(r"\b(pred|s8|u8|s16|u16|f16|bf16|s32|u32|f32|s64|u64|f64)\[([0-9,]*)\]")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
          "f32": 4, "s64": 8, "u64": 8, "f64": 8}


@dataclass
class Plan:
    """One training step, per device."""

    devices: int
    mesh: Dict[str, int]
    param_bytes: int  # this device's shards of the parameters
    opt_bytes: int  # ... of the optimizer state
    batch_bytes: int  # ... of one batch (tokens, targets, segment ids, positions)
    temp_bytes: int  # XLA's temporaries during the step (memory_analysis)
    flops: Optional[float]  # XLA's count for this device's program (cost_analysis)
    bytes_accessed: Optional[float]  # XLA's count of the bytes its operations read and write
    formula_flops: float  # (6 N + attention) x tokens of the step / devices
    loops: bool  # the program has loops (XLA counts a loop body's FLOPs once)
    collectives: Dict[str, tuple] = field(default_factory=dict)  # kind -> (instructions, bytes)
    compile_s: float = 0.0

    @property
    def total_bytes(self) -> int:
        """Peak bytes a device holds: state and batch (the state is donated, so updated in
        place) plus the step's temporaries."""
        return self.param_bytes + self.opt_bytes + self.batch_bytes + self.temp_bytes


def shard_bytes(tree) -> int:
    """Bytes of one device's shards of a pytree of ShapeDtypeStructs (unsharded leaves whole)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        shape = leaf.shape if leaf.sharding is None else leaf.sharding.shard_shape(leaf.shape)
        total += math.prod(shape) * jnp.dtype(leaf.dtype).itemsize
    return total


def collectives_of(hlo_text: str) -> Dict[str, tuple]:
    """{kind: (instructions, result bytes)} of a compiled HLO module's text."""
    out = {k: [0, 0] for k in COLLECTIVES}
    for line in hlo_text.splitlines():
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        result, kind = m.groups()
        if kind + "-start(" in line:  # async pair: the result tuple also holds the operands
            arrays = _ARRAY.findall(result)
            arrays = arrays[len(arrays) // 2:]
        else:
            arrays = _ARRAY.findall(result)
        nbytes = sum(_BYTES[t] * math.prod(int(d) for d in dims.split(",") if d) for t, dims in arrays)
        out[kind][0] += 1
        out[kind][1] += nbytes
    return {k: tuple(v) for k, v in out.items()}


def batch_shapes(cfg: Config, rules: Rules) -> tuple:
    d = cfg.data
    tokens = jax.ShapeDtypeStruct((d.batch_size, d.seq_len), jnp.int32, sharding=rules.batch_sharding())
    return (tokens,) * (4 if d.document_mask else 2)  # inputs, targets (+ segment ids, positions)


def plan_step(cfg: Config, rules: Rules) -> Plan:
    """Compile `cfg`'s training step on `rules`' mesh from abstract shapes (call inside
    jax.set_mesh) and read its per-device plan."""
    from spmdgpt.state import TrainState
    from spmdgpt.train_step import make_train_step, optimizer_of

    optimizer = optimizer_of(cfg)
    params = abstract_params(cfg.model, rules)
    state = TrainState(jax.ShapeDtypeStruct((), jnp.int32), params, jax.eval_shape(optimizer.init, params))
    batch = batch_shapes(cfg, rules)
    t0 = time.perf_counter()
    compiled = make_train_step(cfg, rules, optimizer).lower(state, *batch).compile()
    compile_s = time.perf_counter() - t0
    text = compiled.as_text()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    n = rules.mesh.size
    tokens = cfg.data.batch_size * cfg.data.seq_len
    return Plan(
        devices=n,
        mesh=dict(rules.mesh.shape),
        param_bytes=shard_bytes(params),
        opt_bytes=shard_bytes(state.opt_state),
        batch_bytes=shard_bytes(batch),
        temp_bytes=compiled.memory_analysis().temp_size_in_bytes,
        flops=(cost or {}).get("flops"),
        bytes_accessed=(cost or {}).get("bytes accessed"),
        formula_flops=flops_per_token(cfg.model, cfg.data.seq_len) * tokens / n,
        loops=" while(" in text,
        collectives=collectives_of(text),
        compile_s=compile_s,
    )


@dataclass
class Estimate:
    """A roofline estimate of one step on a device of `peak_flops` (bf16 FLOP/s) and memory
    `bandwidth` (bytes/s): the FLOPs (the larger of XLA's count and the formula's) at the peak
    rate, XLA's bytes accessed at the bandwidth; the step takes the larger of the two, which
    implies an MFU. Collectives are not in it (they may overlap with compute, or not)."""

    compute_s: float
    memory_s: float
    step_s: float
    mfu: float


def estimate(plan: Plan, peak_flops: float, bandwidth: float) -> Estimate:
    compute = max(plan.flops or 0.0, plan.formula_flops) / peak_flops
    memory = (plan.bytes_accessed or 0.0) / bandwidth
    step = max(compute, memory)
    return Estimate(compute, memory, step, plan.formula_flops / step / peak_flops)


def estimate_lines(plan: Plan, est: Estimate, peak_flops: float, bandwidth: float) -> str:
    """The estimate as the plan report's lines, labelled as an estimate."""
    bound = "compute" if est.compute_s >= est.memory_s else "memory"
    return (f"  estimate         {est.step_s * 1e3:.1f} ms per step, {bound}-bound: at most {est.mfu:.0%} MFU "
            "(a roofline estimate, not a measurement)\n"
            f"                   FLOPs at {peak_flops / 1e12:.0f} TFLOP/s {est.compute_s * 1e3:.1f} ms; XLA's bytes "
            f"accessed ({size(plan.bytes_accessed or 0)}) at {bandwidth / 1e12:.2f} TB/s {est.memory_s * 1e3:.1f} ms"
            + (", a lower bound (XLA counts a loop body's bytes once)" if plan.loops else "")
            + "; collectives not counted")


def as_json(cfg: Config, plan: Plan, capacity: Optional[int], attention: str, topology: Optional[str],
            est: Optional[Estimate], slices: int = 1) -> dict:
    """The plan as one JSON-able object (`spmdgpt plan format=json`'s last line); bytes per device,
    collectives as kind -> [instructions, bytes]; step_seconds and mfu from the estimate (null
    without a topology); slices: the TPU pod slices of the topology."""
    return {
        "topology": topology, "slices": slices, "devices": plan.devices, "mesh": plan.mesh, "sharding": cfg.sharding.name,
        "attention": attention, "param_bytes": plan.param_bytes, "opt_bytes": plan.opt_bytes,
        "batch_bytes": plan.batch_bytes, "temp_bytes": plan.temp_bytes, "total_bytes": plan.total_bytes,
        "capacity_bytes": capacity, "fits": None if capacity is None else plan.total_bytes <= capacity,
        "flops": plan.flops, "formula_flops": plan.formula_flops, "bytes_accessed": plan.bytes_accessed,
        "loops": plan.loops, "collectives": {k: list(v) for k, v in plan.collectives.items()},
        "step_seconds": None if est is None else est.step_s, "mfu": None if est is None else est.mfu,
        "compile_seconds": plan.compile_s,
    }


def size(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def flop(n: float) -> str:
    return f"{n / 1e12:.2f} TFLOP" if n >= 1e12 else f"{n / 1e9:.2f} GFLOP"


def report(cfg: Config, plan: Plan, capacity: Optional[int]) -> str:
    """The plan as a short text table."""
    m = cfg.model
    lines = [
        f"plan: {m.num_layers} layers x d_model {m.d_model}, vocab {m.vocab_size}, batch "
        f"{cfg.data.batch_size} x {cfg.data.seq_len} tokens, {cfg.train.microbatches} microbatch(es), "
        f"sharding {cfg.sharding.name} on mesh {plan.mesh} ({plan.devices} device(s)); compiled in "
        f"{plan.compile_s:.1f} s",
        "per device:",
        f"  parameters       {size(plan.param_bytes)}",
        f"  optimizer state  {size(plan.opt_bytes)}",
        f"  batch            {size(plan.batch_bytes)}",
        f"  temporaries      {size(plan.temp_bytes)}",
        f"  total            {size(plan.total_bytes)}"
        + ("" if capacity is None else f" of {size(capacity)} ({plan.total_bytes / capacity:.0%})"),
    ]
    xla = "-" if plan.flops is None else flop(plan.flops)
    note = " (loop bodies counted once)" if plan.loops else ""
    lines.append(f"  FLOPs per step   {xla} by XLA{note}; {flop(plan.formula_flops)} by 6N + attention")
    used = [f"{k} x{c} ({size(b)})" for k, (c, b) in plan.collectives.items() if c]
    lines.append("  collectives      " + ("; ".join(used) if used else "none"))
    return "\n".join(lines)
