"""`spmdgpt plan <train overrides> [devices=N | topology=NAME [slices=K]] [memory_gb=G]`: compile the
config's training step from abstract shapes (no data, no weights) and print, per device, the
bytes of parameters, optimizer state, batch and temporaries, the FLOPs per step and the
collectives (see spmdgpt.plan.plan); then every other program the run executes (its evaluation, its
rollouts, its statistics: `plan.run_programs`), each one's memory beside the device's.
devices=N plans on N simulated CPU devices; topology=NAME (h100-8, v5p-128, v5e-16, v6e-256,
...) compiles for those devices with their own compiler, on any machine, and adds a roofline
estimate of the step time (spmdgpt.plan.topology); slices=K makes that K TPU pod slices (multislice:
the mesh takes their devices slice after slice, so the first mesh axis, data, spans the slices
and the last ones stay inside a slice); memory_gb=G (default: what the device reports, if it
does; for a topology, a GPU's share that JAX's allocator takes or a TPU chip's HBM; for this
host's CPU devices, its memory (or its cgroup's limit) over their number) turns a plan any of
whose programs does not fit into exit code 2. search=true (with a topology): compile the
candidate layouts and rank them (spmdgpt.plan.search). serve=true [slots= page_size= pages= chunk=
speculate= decode_attention= buckets=]: plan `spmdgpt serve` of the model instead: the inference engine's
step with those arguments (serve's defaults), its memory per device, and how many pages of KV cache fit
(`plan.plan_serving`); exit 2 when the pool asked for does not. With serve=true, run.dir=RUN (or hf:DIR)
plans the model `serve run.dir=RUN` would serve, the other overrides on top."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from dataclasses import dataclass
from typing import List

from spmdgpt.cli.args import EXIT_OK, EXIT_USAGE, parse
from spmdgpt.config import ConfigError
from spmdgpt.mesh.runtime import host_memory


@dataclass
class PlanArgs:
    devices: int = 0  # plan on this many simulated CPU devices (0 = this machine's devices)
    memory_gb: float = 0.0  # per-device memory the plan must fit (0 = the device's own, if known)
    topology: str = ""  # compile for these devices instead, e.g. h100-8 (spmdgpt.plan.topology)
    slices: int = 1  # with a TPU topology: this many pod slices of it (multislice)
    format: str = "text"  # text | json (the plan as one JSON object on stdout; the report on stderr)
    search: bool = False  # with topology=: compile the candidate layouts and rank them (spmdgpt.plan.search)
    tables: str = ""  # search: the rule tables to try, comma-separated (default: every packaged one)
    jobs: int = 0  # search: compiles at a time (0: one per core, within this host's memory)
    serve: bool = False  # plan `spmdgpt serve` of the model (the engine's step) instead of training
    slots: int = 8  # serve=true: serve's engine arguments
    page_size: int = 16
    pages: int = 0  # serve=true: pages in the pool (0: every slot at the model's full context)
    chunk: int = 64
    speculate: int = 0
    decode_attention: str = "auto"  # serve=true: auto | gather | kernel (the platform's paged-attention kernel)
    buckets: int = 4  # serve=true: sizes of the engine's step (serve's buckets=; the plan compiles the whole one)


def _simulate_devices(n: int) -> None:
    """Ask for n CPU devices; possible only before JAX starts its backend."""
    if "jax" in sys.modules:
        import jax

        if jax.device_count() != n or jax.devices()[0].platform != "cpu":
            raise ConfigError([f"devices={n}: JAX already started with {jax.device_count()} "
                               f"{jax.devices()[0].platform} device(s) in this process; run spmdgpt plan "
                               "in a fresh process"])
        return
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={n}".strip()
    os.environ["JAX_PLATFORMS"] = "cpu"


def _search(args: PlanArgs, overrides: List[str]) -> int:
    """search=true: every candidate layout compiled for the topology, ranked (spmdgpt.plan.search)."""
    from spmdgpt.config import load_config, packaged_names
    from spmdgpt.plan.search import default_jobs, held_axes, own_layout, ranked, report, search
    from spmdgpt.plan.topology import parse_topology

    if not args.topology:
        raise ConfigError(["search=true needs topology=NAME: the layouts are ranked by the target's compiler and "
                           "data sheet (e.g. topology=v5p-64)"])
    known = packaged_names("sharding")
    tables = [t for t in args.tables.split(",") if t] or known
    if unknown := [t for t in tables if t not in known]:
        raise ConfigError([f"tables={args.tables}: {unknown[0]} is not a packaged rule table ({', '.join(known)})"])
    if args.jobs < 0:
        raise ConfigError([f"jobs={args.jobs} must be >= 0 (0: one per core, within this host's memory)"])
    top = parse_topology(args.topology, args.slices)
    kept = [o for o in overrides if not own_layout(o)]
    cfg = load_config(kept)
    if cfg.rl.rollout_devices:  # (its candidates would span every device, the engine's too)
        raise ConfigError([f"rl.rollout_devices={cfg.rl.rollout_devices}: the layout search does not split the "
                           "devices yet; search without it, then plan the split with mesh.* set"])
    base = [*kept, f"topology={args.topology}", f"slices={args.slices}"]
    if args.memory_gb:
        base.append(f"memory_gb={args.memory_gb:g}")
    layouts = search(base, top.devices, cfg.data.batch_size, tables, args.jobs or default_jobs(),
                     held_axes(load_config(overrides).mesh), progress=sys.stderr.isatty())  # (mesh.stage=2: kept)
    text = sys.stderr if args.format == "json" else sys.stdout  # (format=json: the JSON alone on stdout)
    print(f"search on {args.topology}{f' x {args.slices} slices' if args.slices > 1 else ''} ({top.devices} devices), "
          f"tables {', '.join(tables)}:", file=text)
    print(report(layouts, kept), file=text)
    best = ranked(layouts)
    if args.format == "json":
        print(json.dumps({"layouts": [{"overrides": lay.overrides(), "plan": lay.result, "error": lay.error or None}
                                      for lay in layouts],
                          "best": best[0].overrides() if best else None}))
    if not best:
        from spmdgpt.plan.plan import FIXES

        print(f"spmdgpt: error: no layout fits {args.topology}; {FIXES['train_step']}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


SERVE_ARGS = ("slots", "page_size", "pages", "chunk", "speculate", "decode_attention", "buckets")


def _capacity(devices, capacity, note: str) -> tuple:
    """(bytes a device holds, the note saying where that figure comes from)."""
    from spmdgpt.plan.plan import size

    if capacity is None:
        capacity = (devices[0].memory_stats() or {}).get("bytes_limit")
    if capacity is None and devices[0].platform == "cpu":  # this host's CPU devices share its memory
        host = host_memory()
        capacity = host // len(devices)
        note += (f"\n  (the {size(capacity)} above: this host's {size(host)} of memory shared by {len(devices)} CPU "
                 "device(s); memory_gb=G or topology=NAME plans for other devices)")
    return capacity, note


@contextlib.contextmanager
def _compiling(mesh, compile_only: bool):
    """Under `mesh`, for compiling ahead of time: compile-only devices cannot load executables, so
    the persistent compilation cache is off for them (in a process whose cache is already running,
    JAX still looks: that warning is dropped); the cache's setting comes back after. Compile-only
    GPUs are also the default device meanwhile (`topology.target_default`: tokamax's kernels are
    chosen for it)."""
    import jax

    from spmdgpt.plan.topology import target_default

    cached = jax.config.jax_enable_compilation_cache
    try:
        jax.config.update("jax_enable_compilation_cache", cached and not compile_only)
        with jax.set_mesh(mesh), target_default(mesh if compile_only else None), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Error reading persistent compilation cache entry")
            yield
    finally:
        jax.config.update("jax_enable_compilation_cache", cached)


def _without_cudnn(e: RuntimeError, args: PlanArgs, cfg) -> Exception:
    """The one line for a compile that needs cuDNN's library where it is not installed (JAX's CUDA
    plugin alone), or `e` itself."""
    if "cuDNN not found" not in str(e):
        return e
    return ConfigError([f"topology={args.topology}: cuDNN attention (model.attention={cfg.model.attention.value}) "
                        "needs cuDNN's library to compile: pip install 'spmdgpt[gpu-plan-cudnn]', or plan with "
                        "model.attention=xla"])


def _serve(args: PlanArgs, cfg, mesh, devices, capacity, note: str, compile_only: bool) -> int:
    """serve=true: the engine's step for the model, and the pages that fit (`plan.plan_serving`)."""
    from spmdgpt.cli.serve import DECODE_ATTENTION, engine_config
    from spmdgpt.engine.scheduler import page_size_error, speculate_error
    from spmdgpt.mesh.sharding import Rules
    from spmdgpt.plan.plan import plan_serving

    errs = [f"{f}={getattr(args, f)} must be >= 1" for f in ("slots", "page_size", "chunk", "buckets")
            if getattr(args, f) < 1]
    if args.pages < 0 or args.pages == 1:
        errs.append(f"pages={args.pages} must be 0 (enough for every slot) or >= 2 (page 0 is the null page)")
    errs += [e for e in [speculate_error(cfg.model, args.speculate), page_size_error(cfg.model, args.page_size)] if e]
    if args.decode_attention not in DECODE_ATTENTION:
        errs.append(f"decode_attention={args.decode_attention}: one of {', '.join(DECODE_ATTENTION)}")
    if errs:
        raise ConfigError(errs)
    capacity, note = _capacity(devices, capacity, note)
    config = engine_config(args, cfg.model)
    try:
        with _compiling(mesh, compile_only):
            plan = plan_serving(cfg, Rules(mesh, cfg.sharding, cfg.model), config, capacity)
    except ValueError as e:  # (slots the mesh's batch ways do not divide)
        raise ConfigError([str(e)]) from None
    except RuntimeError as e:  # (the scorer for logprobs runs the model's attention: cuDNN's on GPUs)
        raise _without_cudnn(e, args, cfg) from None
    drafts = f", {args.speculate} drafts" if args.speculate else ""
    print(f"serving {cfg.run.name}: the engine's step ({args.slots} slots, prefill chunks of {args.chunk}{drafts}, "
          f"decode rows by {plan.decode}) "
          f"on mesh {dict(mesh.shape)}, {len(devices)} x {devices[0].device_kind}, {len(plan.programs)} programs "
          f"compiled in {sum(q.compile_s for q in plan.programs):.1f} s\n" + plan.lines(cfg, capacity) + note)
    if capacity is not None and plan.program.total_bytes > capacity:
        fix = (f"serve pages={plan.fit}" if plan.fit and plan.fit >= 2 else "a device with more memory")
        print(f"spmdgpt: error: the page pool of {plan.pages - 1} pages does not fit a {devices[0].device_kind} "
              f"beside the model: {fix}, or lower slots=", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def run(items: List[str]) -> int:
    args, overrides = parse(items, PlanArgs)
    if args.devices < 0:
        raise ConfigError([f"devices={args.devices} must be >= 0 (0 = this machine's devices)"])
    if args.format not in ("text", "json"):
        raise ConfigError([f"format={args.format}: expected text or json"])
    if args.memory_gb < 0:
        raise ConfigError([f"memory_gb={args.memory_gb} must be >= 0 (0 = the device's own memory)"])
    from spmdgpt.config import SECTIONS, freeze, load_config, validate
    from spmdgpt.mesh.runtime import set_default_xla_flags

    if args.slices != 1 and not args.topology:
        raise ConfigError([f"slices={args.slices} needs topology=NAME (the pod slice to take {args.slices} of)"])
    if args.devices and args.topology:
        raise ConfigError([f"devices={args.devices} and topology={args.topology}: give one (devices=N simulates "
                           "CPU devices, topology= compiles for the devices it names)"])
    if args.search:
        return _search(args, overrides)
    if not args.serve and any(getattr(args, f) != getattr(PlanArgs, f) for f in SERVE_ARGS):
        raise ConfigError([f"{', '.join(f for f in SERVE_ARGS if getattr(args, f) != getattr(PlanArgs, f))}: the "
                           "engine's arguments plan serving; add serve=true"])
    run_dir = next((o.split("=", 1)[1] for o in overrides if o.startswith("run.dir=")), None)
    if args.serve and run_dir:  # (serve's own reading: the run's or the Hugging Face folder's model)
        from spmdgpt.cli.runs import model_source

        cfg, _ = model_source(run_dir, [o for o in overrides if not o.startswith("run.dir=")])
    else:
        cfg = load_config(overrides)
    note, top = "", None
    if args.topology:
        from spmdgpt.plan.topology import parse_topology

        top = parse_topology(args.topology, args.slices)  # (a bad name fails here, before JAX starts)
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the process runs on the CPU; it compiles for others
    if args.devices:
        _simulate_devices(args.devices)
    set_default_xla_flags()
    import jax

    from spmdgpt.kinds import run_kind
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import attention_backend
    from spmdgpt.plan.flops import device_peak_flops
    from spmdgpt.plan.plan import as_json, estimate, estimate_lines, plan_step, report, size, too_large

    devices = jax.devices()
    capacity = int(args.memory_gb * 2**30) if args.memory_gb else None
    if top is not None:
        from spmdgpt.plan.topology import capacity as device_capacity
        from spmdgpt.plan.topology import compile_only_devices

        devices = compile_only_devices(args.topology, slices=args.slices)
        if capacity is None:
            capacity, what = device_capacity(top)
            note = f"\n  (the {size(capacity)} above: {what})"
    # the step's shapes matter here; where the tokens come from does not (no data is read)
    errs = validate(cfg, len(devices), sections=[s for s in SECTIONS if s != "corpus"])
    if errs:
        raise ConfigError(errs)
    freeze(cfg)
    attention = attention_backend(cfg.model, devices[0].platform).value  # a backend those devices can run
    kind = run_kind(cfg)
    mesh = make_mesh(cfg.mesh, devices if args.serve else kind.devices(cfg, devices))  # (rl.rollout_devices: fewer)
    if args.serve:
        return _serve(args, cfg, mesh, devices, capacity, note, top is not None)
    capacity, note = _capacity(devices, capacity, note)
    # (planned for this machine's own devices, none named: a state that cannot fit them is refused before the
    # compile, which takes minutes at a published shape; a named target gets its whole plan, fitting or not)
    local = not (args.topology or args.devices or args.memory_gb)
    try:
        with _compiling(mesh, top is not None):
            plan = plan_step(cfg, Rules(mesh, cfg.sharding, cfg.model), whole_run=True, kind=kind,
                             capacity=capacity if local else None)
            plan.programs += kind.side_programs(cfg, devices)  # (rl.rollout_devices: the engine's, on its own)
    except RuntimeError as e:  # (a program too large for its device is a ConfigError: `plan.run_programs`)
        raise _without_cudnn(e, args, cfg) from None
    est = None
    text = sys.stderr if args.format == "json" else sys.stdout  # (format=json: the JSON alone on stdout)
    if top is not None:
        compiler = "XLA's GPU compiler" if top.chip.platform == "gpu" else "libtpu's compiler"
        slices = f" x {top.slices} slices" if top.slices > 1 else ""
        print(
            f"compiled for {args.topology}{slices} ({top.xla_name}{slices}): {len(devices)} x {devices[0].device_kind} "
            f"({compiler}; no {top.chip.platform.upper()} used)", file=text
        )
        t = cfg.train  # (the peak MFU is reported against in training, as the trainer takes it)
        peak = t.peak_flops or device_peak_flops(devices[0], cfg.model.compute_dtype, t.cpu_peak_flops, 1)
        fp8_speedup = 2.0 if top.chip.platform == "gpu" else 1.0  # (Hopper: dense FP8 at twice bf16's rate)
        est = estimate(plan, peak, top.chip.bandwidth, top.chip.ici, fp8_speedup)
        note = "\n" + (estimate_lines(plan, est, peak, top.chip.bandwidth, top.chip.ici, fp8_speedup) if est else
                       "  estimate         none: the compiler counted no bytes accessed") + note
    print(report(cfg, plan, capacity) + note, file=text)
    if args.format == "json":
        print(json.dumps(as_json(cfg, plan, capacity, attention, args.topology or None, est, args.slices)))
    refusal = too_large(plan.programs, capacity, "device")
    if refusal:
        print(f"spmdgpt: error: {refusal}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
