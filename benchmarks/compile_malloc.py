"""XLA:CPU compile time under the three allocators a spmdgpt process can run with
(spmdgpt.mesh.runtime): glibc's defaults (SPMDGPT_MALLOC=system), glibc with spmdgpt's tunables (one
arena, no mmap, no trimming: SPMDGPT_MALLOC=glibc) and oneTBB's tbbmalloc (the default where the `tbb`
wheel is installed, Linux x86-64: preloaded, freed blocks of 8 MiB and more kept), on the loss-and-
gradient step of small models.

    python benchmarks/compile_malloc.py [--pairs 3] [--models staircase,deepseek_v4_small] [--users]

Each measurement is a fresh process (an allocator is chosen when a process starts: each child
restarts itself as `spmdgpt` does), the allocators in turn; each process compiles every model's
step once without the persistent compilation cache and prints XLA's backend compile seconds
(`/jax/core/compile/backend_compile_duration`), tracing and lowering, and its wall and CPU
seconds. By default on 8 simulated CPU devices (data-parallel) at -O0, as tests/conftest.py
compiles; --users: on one device at XLA's default optimisation, as a user's CPU run compiles. The
table: the mean per model and allocator, and each against glibc's defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

# name (as spmdgpt.mesh.runtime.malloc_in_use() says it) -> SPMDGPT_MALLOC
ALLOCATORS = {"glibc defaults": "system", "glibc tunables": "glibc", "tbbmalloc": ""}
OVERRIDES = {  # the tests' shapes: a staircase model and DeepSeek-V4's small experiment, both shortened
    "staircase": ["+experiment=staircase", "model.num_layers=4"],
    "deepseek_v4_small": ["+experiment=deepseek_v4_small", "data.seq_len=64", "model.max_seq_len=64",
                          "data.batch_size=8"],
}


def child(models: list[str]) -> None:
    """One process: compile each model's loss-and-gradient step, print {model: seconds} as JSON."""
    import collections

    from spmdgpt.mesh.runtime import malloc_in_use, use_retaining_malloc

    use_retaining_malloc()  # (as `spmdgpt` starts: a restart with the allocator SPMDGPT_MALLOC chooses)

    import jax
    import jax.monitoring

    from spmdgpt.config import load_config
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import init_params
    from spmdgpt.model.loss import loss_fn

    spent: collections.Counter = collections.Counter()
    jax.monitoring.register_event_duration_secs_listener(lambda e, s, **_: spent.__setitem__(e, spent[e] + s))
    out = {}
    for name in models:
        cfg = load_config(OVERRIDES[name])
        mesh = make_mesh(cfg.mesh, jax.devices())
        with jax.set_mesh(mesh):
            rules = Rules(mesh, cfg.sharding, cfg.model)
            params = init_params(cfg.model, jax.random.key(0), rules)  # (its own compiles: not counted)
        spent.clear()
        wall, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        with jax.set_mesh(mesh):
            b, t = cfg.data.batch_size, cfg.data.seq_len
            toks = jax.ShapeDtypeStruct((b, t), jax.numpy.int32, sharding=rules.batch_sharding())
            step = jax.jit(jax.value_and_grad(lambda p, x, y: loss_fn(cfg.model, rules, p, x, y)))
            step.lower(params, toks, toks).compile()
        used = resource.getrusage(resource.RUSAGE_SELF)
        out[name] = {"backend_s": spent["/jax/core/compile/backend_compile_duration"],
                     "trace_s": spent["/jax/core/compile/jaxpr_trace_duration"]
                     + spent["/jax/core/compile/jaxpr_to_mlir_module_duration"],
                     "wall_s": time.perf_counter() - wall,
                     "cpu_s": used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime}
    out["malloc"] = malloc_in_use()
    print(json.dumps(out))


def measure(allocator: str, models: list[str], users: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "JAX_COMPILATION_CACHE_DIR",
                                                            "GLIBC_TUNABLES", "TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD")}
    env.update(JAX_PLATFORMS="cpu", SPMDGPT_COMPILE_CACHE="off", SPMDGPT_MALLOC=ALLOCATORS[allocator],
               XLA_FLAGS="" if users else "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0")
    out = subprocess.run([sys.executable, __file__, "--child", ",".join(models)], env=env, capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if not result.pop("malloc").startswith(allocator):
        sys.exit(f"compile_malloc.py: error: the {allocator} process ran another allocator: is the `tbb` wheel "
                 f"installed (pip install tbb==2023.2.0, Linux x86-64)?")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--models", default=",".join(OVERRIDES))
    ap.add_argument("--users", action="store_true", help="one device at XLA's default optimisation")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child.split(","))
    models = args.models.split(",")
    if unknown := [m for m in models if m not in OVERRIDES]:
        sys.exit(f"compile_malloc.py: error: --models {','.join(unknown)}: not one of {', '.join(OVERRIDES)}")
    runs: dict = {a: [] for a in ALLOCATORS}
    for i in range(args.pairs):
        for allocator in runs:
            runs[allocator].append(measure(allocator, models, args.users))
            print(f"round {i + 1} {allocator:14s} " + "  ".join(
                f"{m} {r['backend_s']:.2f} s" for m, r in runs[allocator][-1].items()), flush=True)
    for m in models:
        mean = {a: {k: sum(r[m][k] for r in rs) / len(rs) for k in rs[0][m]} for a, rs in runs.items()}
        print(f"{m} (mean of {args.pairs} processes each; {'one device, default' if args.users else '8 devices, -O0'})")
        for a, v in mean.items():
            ratio = {k: v[k] / mean["glibc defaults"][k] for k in ("backend_s", "wall_s", "cpu_s")}
            print(f"    {a:14s} backend compile {v['backend_s']:6.2f} s  tracing {v['trace_s']:5.2f} s  "
                  f"wall {v['wall_s']:6.2f} s  CPU {v['cpu_s']:6.2f} s  against glibc's defaults: backend "
                  f"{ratio['backend_s']:.3f}x, wall {ratio['wall_s']:.3f}x, CPU {ratio['cpu_s']:.3f}x")


if __name__ == "__main__":
    main()
