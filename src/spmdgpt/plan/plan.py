"""An ahead-of-time plan of one training step: will it fit, how much does it compute, and what
does it communicate, before any data is read or any weight is allocated; and every other program
the run executes (`run_programs`: the evaluation, the statistics, the rollouts), each one's
memory beside the device's, which `spmdgpt train` also checks before its first step.

The step is the real one (`training.step.make_train_step`: optimizer, microbatches, loss blocks, remat,
the sharding rules), lowered from abstract shapes (`jax.ShapeDtypeStruct`s carrying each
array's sharding) and compiled for the current mesh (or N simulated CPU devices). Everything is
per device, read from what XLA compiled:

- parameter / optimizer-state / batch bytes: each array's shard shape under its sharding;
- temporary bytes: `compiled.memory_analysis()` (activations, gradients, workspace);
- FLOPs and bytes accessed: `compiled.cost_analysis()`, or where XLA's compiler gives none (its
  GPU compiler) the kernels read from the HLO (`spmdgpt.plan.roofline`: GEMMs, cuDNN attention, the
  grouped MoE kernels, a loop body's once per trip), beside the 6N + attention formula of
  `flops.py`; the FLOPs of FP8 GEMMs apart (`fp8_flops`), which the estimate runs at twice the
  bf16 rate on GPUs (Hopper's data-sheet ratio);
- collectives: the all-gather / reduce-scatter / all-reduce / all-to-all / ragged-all-to-all /
  collective-permute instructions of the compiled program with their result bytes (a ragged
  all-to-all's result is its whole receive buffer: an upper bound of the rows it moves), and
  the bytes a device sends for them in one step on a ring (`hlo.traffic_of`: each over its replica
  group, a loop body's once per trip of the loop), and how much of that the compiler scheduled
  while a matmul runs (`hlo.overlapped_traffic`: an asynchronous collective with a matmul between
  its start and its done, or one fused with a matmul, TPU's async collective fusions; the
  rest waits: tensor parallelism's all-reduces, say). Counts are of instructions in
  the program text: one inside a loop body (the layer scan when model.scan_unroll=false,
  microbatches) runs once per iteration. XLA:CPU has no reduce-scatter pass, so on simulated
  CPU devices FSDP's gradient reduce-scatter appears as an all-reduce followed by a slice; GPU
  and TPU compilers emit reduce-scatters.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Dict, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import Config, ConfigError, compress_kinds, document_batches, preference_data
from spmdgpt.mesh.sharding import Rules, shard_bytes
from spmdgpt.model import abstract_params
from spmdgpt.model.pipeline import schedule_iterations
from spmdgpt.plan.flops import flops_per_token
from spmdgpt.plan.hlo import collectives_of, dot_kinds, overlapped_traffic, traffic_of


@dataclass
class Plan:
    """One training step, per device."""

    devices: int
    mesh: Dict[str, int]
    param_bytes: int  # this device's shards of the parameters
    opt_bytes: int  # ... of the optimizer state
    batch_bytes: int  # ... of one batch (tokens, targets, segment ids, positions)
    temp_bytes: int  # XLA's temporaries during the step (memory_analysis)
    flops: Optional[float]  # this device's program's FLOPs (XLA's cost_analysis, or the HLO's kernels)
    bytes_accessed: Optional[float]  # ... the bytes its operations read and write
    formula_flops: float  # (6 N + attention) x tokens of the step / devices
    loops: bool  # the program has loops (XLA counts a loop body's FLOPs once)
    collectives: Dict[str, tuple] = field(default_factory=dict)  # kind -> (instructions, bytes)
    compile_s: float = 0.0
    traffic: float = 0.0  # bytes this device sends for its collectives (ring estimate, `traffic_of`)
    overlapped: float = 0.0  # ... of them while a matmul runs, as compiled (`overlapped_traffic`)
    recompute: float = 1.0  # the FLOPs the step runs over the formula's: 4/3 with model.remat=full
    stretch: float = 1.0  # a pipeline's iterations over its stages' busy ones (1 / (1 - bubble); 1: none)
    programs: list = field(default_factory=list)  # every program of the run (`run_programs`), when planned
    dots: Dict[str, int] = field(default_factory=dict)  # the step's dots by operand types (`hlo.dot_kinds`)
    counted_by: str = "XLA"  # who counted flops and bytes_accessed: XLA, or "the HLO's kernels"
    fp8_flops: float = 0.0  # the FLOPs of GEMMs with FP8 operands (the HLO's kernels)

    @property
    def total_bytes(self) -> int:
        """Peak bytes a device holds: state and batch (the state is donated, so updated in
        place) plus the step's temporaries."""
        return self.param_bytes + self.opt_bytes + self.batch_bytes + self.temp_bytes




def batch_shapes(cfg: Config, rules: Rules) -> tuple:
    """The shapes of one training batch of token rows (ShapeDtypeStructs with their shardings):
    inputs, targets (+ segment ids, positions); another kind of run's: its `RunKind.batch_shapes`."""
    d = cfg.data
    tokens = jax.ShapeDtypeStruct((d.batch_size, d.seq_len), jnp.int32, sharding=rules.batch_sharding())
    segments, positions = document_batches(d)
    return (tokens,) * (2 + segments + positions)  # inputs, targets (+ segment ids, positions)


@dataclass
class Program:
    """One program a run executes (the step, the evaluation, the rollouts, ...), per device: what
    a device holds while it runs. `executable` is the compiled program, which the run then calls
    (nothing compiles twice)."""

    name: str
    temp_bytes: int  # XLA's temporaries (memory_analysis)
    own_bytes: int  # its inputs the resident state does not count (a batch, prompts) and its
    # outputs that do not reuse a donated input's buffer
    resident_bytes: int  # what the run keeps on the device meanwhile: parameters, optimizer state,
    # LoRA's frozen base, DPO's reference, the fixed validation batches
    compile_s: float
    compiled: object = None  # the executable (jax.stages.Compiled)
    bound: dict = field(default_factory=dict)  # keyword arguments of every call (the step's reference, base)
    where: str = ""  # devices other than the trainer's mesh's it runs on (rl.rollout_devices' engine), in words

    @property
    def executable(self):
        """What the run calls: the compiled program with its bound keyword arguments."""
        return partial(self.compiled, **self.bound) if self.bound else self.compiled

    @property
    def total_bytes(self) -> int:
        return self.resident_bytes + self.own_bytes + self.temp_bytes

    def row(self, capacity: Optional[int]) -> dict:
        return {"name": self.name, "total_bytes": self.total_bytes, "temp_bytes": self.temp_bytes,
                "fits": None if capacity is None else self.total_bytes <= capacity, "compile_seconds": self.compile_s,
                **({"where": self.where} if self.where else {})}


def compile_options(device) -> Optional[dict]:
    """XLA's options for a program compiled for `device` (a jax Device): none, except on a compile-only
    GPU (topology=h100-N) no autotuning. With no GPU to time its candidates on, XLA's autotuner
    keeps each kernel's default tiling, and looking costs compile time: a 2-layer step for h100-2
    compiled in 10.3 s with it and 6.2 s without, to the same optimized HLO and memory."""
    if device is None or device.platform != "gpu" or type(device.client).__name__ != "CompileOnlyPyClient":
        return None
    return {"xla_gpu_autotune_level": 0}


def _compiled(name: str, lowered, resident: int, inputs, bound: Optional[dict] = None, device=None) -> Program:
    """`lowered` compiled for `device` (the mesh's first: its kind names it in a refusal) as Program `name`."""
    kind = "device" if device is None else device.device_kind
    t0 = time.perf_counter()
    try:
        compiled = lowered.compile(compiler_options=compile_options(device))
    except Exception as e:  # a compiler that refuses a program too large for its device (TPU; GPU autotuning)
        if "RESOURCE_EXHAUSTED" not in str(e):
            raise
        oom = re.search(r"Out of memory while trying to allocate ([0-9.]+ ?\w+)", str(e))
        if oom:  # (XLA:GPU's autotuner, trying the program's kernels on the device: "All configs failed")
            reason = f"compiling it ran out of device memory (an allocation of {oom.group(1)})"
        else:
            reason = str(e).splitlines()[0].split("RESOURCE_EXHAUSTED: ")[-1].rstrip(".")
            reason = re.sub(r"^E\d+: \w+: ", "", reason)  # libtpu >= 0.0.50's code ("E1000: CompileTimeHbmOom: ")
        raise ConfigError([f"the {name.replace('_', ' ')} does not fit a {kind}: {reason}; {FIXES[name]}"]) from None
    return _program(name, compiled, resident, inputs, time.perf_counter() - t0, bound)


def _program(name: str, compiled, resident: int, inputs, compile_s: float = 0.0, bound: Optional[dict] = None):
    """Program `name` of a compiled executable: its temporaries and outputs (memory_analysis), its
    `inputs`' bytes beside the `resident` ones."""
    mem = compiled.memory_analysis()
    outputs = max(mem.output_size_in_bytes - mem.alias_size_in_bytes, 0)
    return Program(name, mem.temp_size_in_bytes, shard_bytes(inputs) + outputs, resident, compile_s, compiled,
                   bound or {})


def _unbound(fn):
    """(the jitted function, its bound keyword arguments) of make_train_step's step."""
    return (fn.func, fn.keywords) if isinstance(fn, partial) else (fn, {})


def run_programs(cfg: Config, rules: Rules, optimizer, state, batch: tuple, eval_batch: tuple, *, base=None,
                 reference=None, held_bytes: Optional[int] = None, engine=None, step_only: bool = False,
                 vocab_limit: Optional[int] = None) -> list:
    """[Program]: every program a run of `cfg` executes, lowered for these inputs (arrays, or
    ShapeDtypeStructs carrying their shardings) and compiled on `rules`' mesh (call inside
    jax.set_mesh): `train_step`; `statistics` (train.stats_every); `evaluation` (the validation
    loss, `evaluate.loss_sums`, in the step's microbatches); `rollout` (train.rollout_tokens: the
    inference engine's step with decode and prefill rows, its largest program; the pool is its
    input and output). What `spmdgpt plan` reports and what
    `spmdgpt train` checks against the device's memory before step 1 (then runs).

    held_bytes: the validation batches the run keeps on the device (default: train.eval_batches
    of eval_batch's shape, one validation set); base: LoRA's frozen model; reference: DPO's;
    engine: the rollouts' Engine (default: a new one, `evaluate.text_engine`); step_only: the step
    alone; vocab_limit: the tokenizer's vocabulary (GRPO's log-probabilities: `make_train_step`)."""
    from spmdgpt.eval.evaluate import loss_sums, text_engine
    from spmdgpt.model import param_info
    from spmdgpt.model.lora import attach
    from spmdgpt.training.stats import make_stats_fn
    from spmdgpt.training.step import make_train_step

    t = cfg.train
    device = rules.mesh.devices.flat[0]
    if held_bytes is None:
        held_bytes = t.eval_batches * shard_bytes(eval_batch)
    resident = shard_bytes((state, base, reference)) + held_bytes
    step, bound = _unbound(make_train_step(cfg, rules, optimizer, reference, base, vocab_limit))
    programs = [_compiled("train_step", step.lower(state, *batch, **bound), resident, batch, bound, device)]
    if step_only:
        return programs
    if t.stats_every:
        programs.append(_compiled("statistics", make_stats_fn(cfg, rules, optimizer).lower(state, *batch), resident,
                                  batch, device=device))
    params = state.params if base is None else attach(param_info(cfg.model), cfg.lora, base, state.params)
    sums = loss_sums(cfg, rules, t.microbatches)
    programs.append(_compiled("evaluation", sums.lower(params, *eval_batch, reference=reference), resident, (),
                              device=device))
    if t.rollout_tokens > 0:
        from spmdgpt.engine import Engine

        engine = engine or Engine(cfg.model, rules, None, None, text_engine(cfg, rules))
        programs.append(_compiled("rollout", engine.lower(params), resident, engine.shapes(), device=device))
        engine.use(programs[-1].compiled)
    return programs


def local_capacity() -> tuple:
    """(bytes one of this process's devices can hold or None, what it is): a GPU's or TPU's own
    limit (JAX's allocator's share of it), or for CPU devices this host's memory (`host_memory`)
    over their number."""
    from spmdgpt.mesh.runtime import host_memory

    device = jax.local_devices()[0]
    limit = (device.memory_stats() or {}).get("bytes_limit")
    if limit is not None:
        return int(limit), device.device_kind
    if device.platform == "cpu":
        n = len(jax.local_devices())
        return host_memory() // n, f"CPU device (this host's {size(host_memory())} over {n} device{'s' * (n != 1)})"
    return None, device.device_kind


def too_large(programs: list, capacity: Optional[int], device: str) -> Optional[str]:
    """The one-line refusal for the first program that does not fit `capacity` bytes per device,
    or None when all fit (or the capacity is unknown)."""
    if capacity is None:
        return None
    for p in programs:
        if p.total_bytes > capacity:
            base, _, at = p.name.partition(" ")  # (a step of a smaller size: "decode_step (2 rows x 8 pages)")
            return (f"the {base.replace('_', ' ')}{' ' * bool(at)}{at} needs {size(p.total_bytes)} per device "
                    f"({size(p.temp_bytes)} of it temporaries) but a {device} holds {size(capacity)}; {FIXES[base]}")
    return None


_SHARD = "shard more (sharding=fsdp, more devices)"
FIXES = {  # the settings that shrink each program, for its refusal
    "train_step": f"{_SHARD}, lower data.batch_size, set model.remat=full, train.microbatches=k or model.loss_block=c",
    "statistics": f"{_SHARD}, lower data.batch_size, raise train.microbatches, or set train.stats_every=0",
    "evaluation": f"{_SHARD}, lower data.batch_size, raise train.microbatches (the evaluation runs in the step's "
                  "parts) or set model.loss_block=c",
    "rollout": f"{_SHARD}, lower train.rollout_prompts or train.rollout_tokens, or set train.rollout_tokens=0",
    "rl_rollout": f"{_SHARD}, lower data.batch_size or rl.max_new_tokens",
    "rl_logps": f"{_SHARD}, lower data.batch_size or data.seq_len",
    "rl_ref_logps": f"{_SHARD}, lower data.batch_size or data.seq_len",
    "serving_step": f"{_SHARD}, lower slots= or chunk=, or give pages= fewer pages",
    "decode_step": f"{_SHARD}, lower slots=, or give pages= fewer pages",
    "prefill_step": f"{_SHARD}, lower chunk=, or give pages= fewer pages",
    "logprobs": f"{_SHARD}, or serve a shorter context (model.max_seq_len=)",
}
STEP_PROGRAMS = {(True, True): "serving_step", (True, False): "decode_step", (False, True): "prefill_step"}


@dataclass
class ServePlan:
    """`spmdgpt plan serve=true`: the inference engine's step for a model on a mesh, per device."""

    program: Program  # the program that leaves the fewest pages room (the step with decode and prefill rows,
    #   or the scorer of a full-context prompt for logprobs)
    pages: int  # pages in the pool (page 0, the null page, included)
    page_size: int
    page_bytes: int  # one page of every layer's cache, per device
    param_bytes: int
    fit: Optional[int]  # the most pages the device holds beside the rest (None: capacity unknown)
    state_bytes: int = 0  # a hybrid's Gated DeltaNet states (DeepSeek-V4's compressed layers' windows), every
    #   slot's, per device
    decode: str = "gather"  # how its decode rows attend (`Engine.attention_name`)
    programs: list = field(default_factory=list)  # every program the server compiles: [Program], each with the
    #   pool's bytes counted (the step's input and output; resident beside the scorer)
    sizes: tuple = ((), ())  # the step's decode row counts and page-table widths (`Engine.programs`; buckets=)

    def lines(self, cfg: Config, capacity: Optional[int]) -> str:
        p, ps = self.program, self.page_size
        pool = self.pages * self.page_bytes
        out = [f"  parameters       {size(self.param_bytes)}",
               f"  page pool        {size(pool)}: {self.pages - 1} pages of {ps} tokens (+ the null page), "
               f"{self.page_bytes / 2**10:,.1f} KiB a page"]
        if self.state_bytes:
            what = "compressed layers' windows" if set(compress_kinds(cfg.model)) - {"S"} else "Gated DeltaNet states"
            out.append(f"  slot states      {size(self.state_bytes)}: the {what} of every slot")
        step = next((q for q in self.programs if q.name == "serving_step"), p)
        out += [f"  step             {size(step.temp_bytes)} of temporaries, "
                f"{size(step.own_bytes - pool - self.state_bytes)} of rows and outputs"]
        out += [f"  {q.name:<16s} {size(q.total_bytes)} in all, {size(q.temp_bytes)} of temporaries; compiled in "
                f"{q.compile_s:.1f} s" for q in self.programs]
        rows, widths = self.sizes
        if len(rows) * len(widths) > 1:
            out.append(f"  step sizes       {len(rows) * len(widths) + 2 * len(widths)} programs: decoding at "
                       f"{', '.join(map(str, rows))} rows x {', '.join(map(str, widths))} pages, prefill and both at "
                       "each width (above: the whole size; serve compiles each and checks it against the device)")
        out += [f"  total            {size(p.total_bytes)}" + (f" of {size(capacity)}" if capacity else "")
                + (f" (the largest: {p.name})" if len(self.programs) > 1 else "")]
        if self.fit is not None and self.fit < 2:
            out.append(f"  pages that fit   none: the parameters and the step alone need {size(p.total_bytes - pool)}")
        elif self.fit is not None:
            tokens = (self.fit - 1) * ps
            out.append(f"  pages that fit   {self.fit - 1:,} ({tokens:,} tokens: {tokens // cfg.model.max_seq_len:,} "
                       f"sequences at the full context of {cfg.model.max_seq_len}; serve pages={self.fit})")
        return "\n".join(out)


def pool_parts(engine) -> tuple:
    """(bytes of one page of the engine's pool, bytes of its per-slot state rows) per device, from
    its shapes: nothing allocated."""
    pool = engine.shapes()[0]
    per_slot = engine.step_fn.slot_arrays
    pages = shard_bytes({n: a for n, a in pool.items() if n not in per_slot})
    return pages // engine.num_pages, shard_bytes({n: a for n, a in pool.items() if n in per_slot})


def pool_refusal(cfg: Config, rules: Rules, config, resident: int) -> Optional[str]:
    """`spmdgpt serve`'s check before its pool is allocated: the one-line refusal when the pool of
    EngineConfig `config` and the `resident` bytes (the parameters) exceed a device of this
    process (`local_capacity`), naming the pages that fit; else None. (Without the step's own
    temporaries, which `spmdgpt plan ... serve=true` compiles for: a bound, not the plan.)"""
    from spmdgpt.engine import Engine

    capacity, what = local_capacity()
    engine = Engine(cfg.model, rules, None, None, config)  # (abstract: no pool yet)
    page_bytes, state_bytes = pool_parts(engine)
    if capacity is None or resident + state_bytes + engine.num_pages * page_bytes <= capacity:
        return None
    fit = (capacity - resident - state_bytes) // page_bytes
    fix = f"serve pages={fit} at most" if fit >= 2 else "a device with more memory, or a smaller model"
    return (f"pages={config.pages or engine.num_pages}: the page pool needs {size(engine.num_pages * page_bytes)} "
            f"per device beside the model's {size(resident)}, and a {what} holds {size(capacity)}: {fix} (spmdgpt plan "
            "... serve=true counts the step's own memory too), or lower slots=")


def step_refusal(engine, resident: int) -> Optional[str]:
    """`spmdgpt serve`'s second check, once the engine's step is compiled (`Engine.warm`) and before
    its port opens: the one-line refusal (`too_large`) when one of the step's programs, beside the
    `resident` bytes (the parameters) and the pool it reads, needs more than a device of this
    process holds (its temporaries, which `pool_refusal` could not count); else None."""
    capacity, what = local_capacity()
    return too_large([_program(step_program(engine, *key), compiled, resident, engine.shapes(*key[1:]))
                      for key, compiled in sorted(engine.compiled.items(), reverse=True)], capacity, what)


def step_program(engine, groups: tuple, rows: int, width: int) -> str:
    """The name of the engine's step program of these row groups and sizes (`Engine.programs`):
    STEP_PROGRAMS' name, with its size in parentheses where it is not the whole one."""
    name = STEP_PROGRAMS[groups]
    if (rows, width) == (engine.slots_n, engine.pages_per_seq):
        return name
    row = f"{rows} row{'s' * (rows != 1)} x " if groups == (True, False) else ""
    return f"{name} ({row}{width} pages)"


def plan_serving(cfg: Config, rules: Rules, config, capacity: Optional[int], vocab: Optional[int] = None) -> ServePlan:
    """Compile every program `spmdgpt serve` runs (`engine.EngineConfig` `config`: slots, pages,
    chunk, drafts) for `cfg`'s model on `rules`' mesh from abstract parameters (call inside
    jax.set_mesh): the engine's step with decode rows, prefill rows and both, and the scorer of
    a full-context prompt for logprobs; and how many pages of KV cache the device holds beside
    the parameters and the largest program's other bytes (`capacity` per device; None: unknown).
    vocab: the tokenizer's ids (default: the model's)."""
    from spmdgpt.engine import Engine
    from spmdgpt.engine.server import MAX_LOGPROBS, scorer

    params = abstract_params(cfg.model, rules)
    engine = Engine(cfg.model, rules, None, vocab, config)
    shapes, device = engine.shapes(), rules.mesh.devices.flat[0]
    resident = shard_bytes(params)
    page_bytes, state_bytes = pool_parts(engine)
    pool = engine.num_pages * page_bytes + state_bytes
    # the step's three programs (decode rows, prefill rows, both: `Engine.warm`), the pool their input and
    # output; then the scorer of a prompt of the full context for logprobs (its largest), the pool resident
    programs = [_compiled(name, engine.lower(params, groups), resident, shapes, device=device)
                for groups, name in STEP_PROGRAMS.items()]
    tokens = jax.ShapeDtypeStruct((rules.batch_divisor(), cfg.model.max_seq_len), jnp.int32,
                                  sharding=rules.batch_sharding())
    ids = vocab or cfg.model.vocab_size
    score = scorer(cfg, rules, ids).lower(params, tokens, min(MAX_LOGPROBS, ids),  # (`Backend._scored`'s k)
                                          jax.ShapeDtypeStruct((), jnp.int32))  # (the request's LoRA adapter)
    programs.append(_compiled("logprobs", score, resident + pool, (tokens,), device=device))
    worst = max(programs, key=lambda q: q.total_bytes)
    fit = None if capacity is None else (capacity - (worst.total_bytes - pool) - state_bytes) // page_bytes
    return ServePlan(worst, engine.num_pages, engine.page_size, page_bytes, resident, fit, state_bytes,
                     engine.attention_name(), programs, (engine.row_sizes, engine.width_sizes))


def plan_step(cfg: Config, rules: Rules, whole_run: bool = False, kind=None,
              capacity: Optional[int] = None) -> Plan:
    """Compile `cfg`'s training step on `rules`' mesh from abstract shapes (call inside
    jax.set_mesh) and read its per-device plan; whole_run: every program of the run
    (`run_programs`) too, in Plan.programs. kind: the run's `kinds.RunKind` (its batch, its
    reference, which of its programs the plan compiles: `kinds.run_kind(cfg)`); None: a run on
    token rows (a run of another kind's data is refused: its batch is not token rows).
    capacity: a device's bytes; a run whose parameters, optimizer state and batches alone exceed it
    is refused (ConfigError) before anything compiles (a published shape on one CPU device compiled
    for minutes to say so)."""
    from spmdgpt.config import prompts_data
    from spmdgpt.training.objectives import objective_of
    from spmdgpt.training.state import abstract_state
    from spmdgpt.training.step import optimizer_of

    if kind is None and prompts_data(cfg.data):
        raise ValueError("plan_step of a run on prompts data needs its kind: kind=spmdgpt.kinds.run_kind(cfg)")
    optimizer = optimizer_of(cfg)
    state = abstract_state(cfg, rules, optimizer)  # LoRA (lora.rank > 0): the adapters and their optimizer state
    base = abstract_params(cfg.model, rules) if cfg.lora.rank else None  # LoRA's frozen model, read by the step
    # the run's frozen reference: DPO's, which the step reads; GRPO's, which its rollouts read
    # (none with rl.kl_beta = 0; LoRA's frozen base serves as it)
    keeps = kind.keeps_reference(cfg) if kind is not None else preference_data(cfg.data)
    read = objective_of(cfg, rules).reference
    reference = abstract_params(cfg.model, rules) if keeps and read else None
    held_reference = abstract_params(cfg.model, rules) if keeps and not read and not cfg.lora.rank else None
    frozen = kind.frozen(cfg, rules) if kind is not None else None  # (distillation's teacher, held beside it)
    if frozen is not None:
        held_reference = (held_reference, frozen)
    batch = kind.batch_shapes(cfg, rules) if kind is not None else batch_shapes(cfg, rules)
    resident = shard_bytes((state, base, reference, held_reference, batch))
    if capacity is not None and resident > capacity:
        raise ConfigError([f"the parameters, optimizer state and batches alone need {size(resident)} per device (of "
                           f"{size(shard_bytes(state.params))} parameters) but a device holds {size(capacity)}, "
                           "before any temporaries: plan for the devices it is meant for (topology=NAME, e.g. "
                           "h100-8 or v5p-64; memory_gb=G) or split it over more (sharding=fsdp)"])
    # (a kind whose other programs its own preflight compiles, as GRPO's sampler: the step alone)
    programs = run_programs(cfg, rules, optimizer, state, batch, batch, base=base, reference=reference,
                            held_bytes=cfg.train.eval_batches * shard_bytes(batch) + shard_bytes(held_reference),
                            step_only=not whole_run or (kind is not None and kind.step_only))
    step = programs[0]
    compiled, compile_s = step.compiled, step.compile_s
    text = compiled.as_text()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    n = rules.mesh.size
    tokens = cfg.data.batch_size * cfg.data.seq_len
    flops, accessed, counted_by, fp8_flops = (cost or {}).get("flops"), (cost or {}).get("bytes accessed"), "XLA", 0.0
    if not flops or not accessed or cfg.model.matmul_dtype.value == "fp8":
        from spmdgpt.plan.roofline import kernels

        ks = kernels(text)
        fp8_flops = sum(k.runs * k.flops for k in ks if k.kind == "gemm-fp8")
        if not flops or not accessed:  # (XLA's GPU compiler counts nothing)
            flops = sum(k.runs * k.flops for k in ks) or None
            accessed = sum(k.runs * (k.read + k.written) for k in ks) or None
            counted_by = "the HLO's kernels"
    return Plan(
        devices=n,
        mesh=dict(rules.mesh.shape),
        param_bytes=shard_bytes((state.params, base, reference, held_reference)),
        opt_bytes=shard_bytes(state.opt_state),
        batch_bytes=shard_bytes(batch),
        temp_bytes=compiled.memory_analysis().temp_size_in_bytes,
        flops=flops,
        bytes_accessed=accessed,
        counted_by=counted_by,
        fp8_flops=fp8_flops,
        formula_flops=flops_per_token(cfg.model, cfg.data.seq_len) * tokens / n,
        loops=" while(" in text,
        collectives=collectives_of(text),
        compile_s=compile_s,
        traffic=traffic_of(text, n),
        overlapped=overlapped_traffic(text, n),
        recompute=recompute(cfg, rules),
        # (one stage: M iterations of M microbatches, 1)
        stretch=schedule_iterations(rules.stage_size(), cfg.train.microbatches, rules.repeats)
        / (cfg.train.microbatches * rules.repeats),
        programs=programs if whole_run else [],
        dots=dot_kinds(text),
    )


def recompute(cfg: Config, rules: Rules) -> float:
    """The step's FLOPs over the 6N formula's: model.remat=full runs each block's forward pass
    again in the backward pass (8N instead of 6N per token; the unembedding, not recomputed,
    counted too: a small overestimate; `dots` keeps the matmul outputs and recomputes only
    elementwise work), and model.pipeline_remat runs each stage's pass again (another 2N)."""
    forwards = 1 + (cfg.model.remat.value == "full") + (cfg.model.pipeline_remat and rules.stage_size() > 1)
    return (4 + 2 * forwards) / 6


@dataclass
class Estimate:
    """A roofline estimate of one step on a device of `peak_flops` (bf16 FLOP/s), memory
    `bandwidth` (bytes/s) and interconnect `ici` (bytes/s one device sends in a ring collective):
    the FLOPs (the larger of XLA's count and the formula's, with remat's second forward passes,
    `recompute`, over a pipeline's busy share of its iterations, `Plan.stretch`) at the peak
    rate, XLA's bytes accessed at the bandwidth, the collectives' traffic (`traffic_of`) at the
    interconnect. The step takes
    the largest of the three when the collectives overlap the compute (`step_s`, which implies an
    MFU), up to the larger of the first two plus the collectives when they do not (`serial_s`).
    Between the two, `scheduled_s`: the collectives the compiler did not schedule beside a
    matmul (`Plan.overlapped`) added to the larger of the first two, and no less than all the
    collectives' time (the others hide only where their matmuls last long enough)."""

    compute_s: float
    memory_s: float
    step_s: float
    mfu: float
    collective_s: float = 0.0
    serial_s: float = 0.0
    scheduled_s: float = 0.0


def estimate(plan: Plan, peak_flops: float, bandwidth: float, ici: Optional[float] = None,
             fp8_speedup: float = 1.0) -> Optional[Estimate]:
    """None when the plan has no count of the bytes accessed (an estimate from the FLOPs alone
    would read as 100% MFU). fp8_speedup: the FP8 GEMMs' rate over the bf16 peak (2 on Hopper)."""
    if not plan.bytes_accessed:
        return None
    # (a pipeline's stages idle through its bubble: the formula's FLOPs over the busy iterations)
    compute = max(plan.flops or 0.0, plan.formula_flops * plan.recompute * plan.stretch) / peak_flops
    compute -= plan.fp8_flops * (1 - 1 / fp8_speedup) / peak_flops  # (FP8 GEMMs at their own rate)
    memory = plan.bytes_accessed / bandwidth
    collective = plan.traffic / ici if ici else 0.0
    step = max(compute, memory, collective)
    waiting = (plan.traffic - plan.overlapped) / ici if ici else 0.0
    return Estimate(compute, memory, step, plan.formula_flops / step / peak_flops, collective,
                    max(compute, memory) + collective, max(max(compute, memory) + waiting, collective))


def estimate_lines(plan: Plan, est: Estimate, peak_flops: float, bandwidth: float, ici: Optional[float] = None,
                   fp8_speedup: float = 1.0) -> str:
    """The estimate as the plan report's lines, labelled as an estimate."""
    bound = max((est.compute_s, "compute"), (est.memory_s, "memory"), (est.collective_s, "collective"))[1]
    lines = (f"  estimate         {est.step_s * 1e3:.1f} ms per step, {bound}-bound: at most {est.mfu:.0%} MFU "
             "(a roofline estimate, not a measurement)\n"
             f"                   FLOPs at {peak_flops / 1e12:.0f} TFLOP/s"
             + (f" (FP8 GEMMs' {flop(plan.fp8_flops)} at twice it)" if plan.fp8_flops and fp8_speedup > 1 else "")
             + f" {est.compute_s * 1e3:.1f} ms; bytes accessed ({size(plan.bytes_accessed or 0)}, counted by "
             f"{plan.counted_by}) at {bandwidth / 1e12:.2f} TB/s {est.memory_s * 1e3:.1f} ms"
             + (", a lower bound (XLA counts a loop body's bytes once)" if plan.loops and plan.counted_by == "XLA"
                else ""))
    if not ici:
        return lines + "; collectives not counted"
    return lines + (
        f"\n                   collectives: {size(plan.traffic)} sent per device (ring) at "
        f"{ici / 1e9:.0f} GB/s {est.collective_s * 1e3:.1f} ms"
        + (" (a loop's once per trip)" if plan.loops else "")
        + f"; {est.serial_s * 1e3:.1f} ms per step if they do not overlap the compute"
        + f"\n                   of them {size(plan.overlapped)} scheduled beside a matmul by the compiler; "
        + f"{est.scheduled_s * 1e3:.1f} ms per step if those hide and the rest waits"
    )


def as_json(cfg: Config, plan: Plan, capacity: Optional[int], attention: str, topology: Optional[str],
            est: Optional[Estimate], slices: int = 1) -> dict:
    """The plan as one JSON-able object (`spmdgpt plan format=json`'s last line); bytes per device,
    collectives as kind -> [instructions, bytes]; step_seconds and mfu from the estimate (null
    without a topology); slices: the TPU pod slices of the topology."""
    return {
        "topology": topology,
        "slices": slices,
        "devices": plan.devices,
        "mesh": plan.mesh,
        "sharding": cfg.sharding.name,
        "attention": attention,
        "param_bytes": plan.param_bytes,
        "opt_bytes": plan.opt_bytes,
        "batch_bytes": plan.batch_bytes,
        "temp_bytes": plan.temp_bytes,
        "total_bytes": plan.total_bytes,
        "capacity_bytes": capacity,
        "fits": None if capacity is None else all(p.total_bytes <= capacity for p in plan.programs or [plan]),
        "programs": [p.row(capacity) for p in plan.programs],
        "flops": plan.flops,
        "formula_flops": plan.formula_flops,
        "bytes_accessed": plan.bytes_accessed,
        "counted_by": plan.counted_by,
        "fp8_flops": plan.fp8_flops,
        "loops": plan.loops,
        "collectives": {k: list(v) for k, v in plan.collectives.items()},
        "dots": plan.dots,
        "step_seconds": None if est is None else est.step_s,
        "mfu": None if est is None else est.mfu,
        "traffic_bytes": plan.traffic,
        "collective_seconds": None if est is None else est.collective_s,
        "serial_step_seconds": None if est is None else est.serial_s,
        "overlapped_bytes": plan.overlapped,
        "scheduled_step_seconds": None if est is None else est.scheduled_s,
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
    counted = "-" if plan.flops is None else flop(plan.flops)
    note = " (loop bodies counted once)" if plan.loops and plan.counted_by == "XLA" else ""
    lines.append(f"  FLOPs per step   {counted} by {plan.counted_by}{note}; {flop(plan.formula_flops)} by 6N + "
                 "attention")
    if plan.stretch > 1:
        lines.append(f"  pipeline         the stages busy {1 / plan.stretch:.0%} of its iterations (a bubble of "
                     f"{1 - 1 / plan.stretch:.1%}, charged to the estimate's compute time)")
    used = [f"{k} x{c} ({size(b)})" for k, (c, b) in plan.collectives.items() if c]
    lines.append("  collectives      " + ("; ".join(used) if used else "none"))
    if m.matmul_dtype.value == "fp8":  # (which matmuls the compiler kept in FP8)
        fp8 = {k: n for k, n in plan.dots.items() if "f8" in k}
        lines.append(f"  FP8 GEMMs        {sum(fp8.values())} of {sum(plan.dots.values())} dots ("
                     + ", ".join(f"{n} {k}" for k, n in sorted(fp8.items())) + f"){note}")
    if plan.programs:
        lines.append("programs of the run (per device: what the run keeps resident + the program's inputs, outputs "
                     "and temporaries):")
        for p in plan.programs:
            fits = "" if capacity is None or p.total_bytes <= capacity else ", does not fit"
            share = "" if capacity is None else f" ({p.total_bytes / capacity:.0%}{fits})"
            lines.append(f"  {p.name:<16} {size(p.total_bytes)}{share}, temporaries {size(p.temp_bytes)}; "
                         f"compiled in {p.compile_s:.1f} s" + (f"; on {p.where}" if p.where else ""))
    return "\n".join(lines)
