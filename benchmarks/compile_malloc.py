"""XLA:CPU compile time with glibc's malloc against oneTBB's tbbmalloc (preloaded), on the test
suite's kind of program: the loss-and-gradient step of small models, compiled at -O0 as
tests/conftest.py compiles them.

    python benchmarks/compile_malloc.py [--pairs 3] [--models staircase,deepseek_v4_small]

Each measurement is a fresh process (an allocator is chosen when a process starts), alternating
glibc (LD_PRELOAD unset) and tbbmalloc (LD_PRELOAD of the `tbb` wheel's libtbbmalloc_proxy: `pip
install tbb==2023.2.0`, Linux x86-64; freed blocks of 8 MiB and more kept); each process compiles
every model's step once on 8
simulated CPU devices (data-parallel) without the persistent compilation cache and prints XLA's
backend compile seconds (`/jax/core/compile/backend_compile_duration`), tracing and lowering, and
its wall and CPU seconds. The table: the mean per model and allocator, and tbbmalloc / glibc.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

LIB = Path(sys.prefix) / "lib"
TBB = (LIB / "libtbbmalloc.so.2", LIB / "libtbbmalloc_proxy.so.2")
OVERRIDES = {  # the tests' shapes: a staircase model and DeepSeek-V4's small experiment, both shortened
    "staircase": ["+experiment=staircase", "model.num_layers=4"],
    "deepseek_v4_small": ["+experiment=deepseek_v4_small", "data.seq_len=64", "model.max_seq_len=64",
                          "data.batch_size=8"],
}


def child(models: list[str]) -> None:
    """One process: compile each model's loss-and-gradient step, print {model: seconds} as JSON."""
    import collections

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
    print(json.dumps(out))


def measure(allocator: str, models: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "JAX_COMPILATION_CACHE_DIR")}
    env.update(JAX_PLATFORMS="cpu", SPMDGPT_COMPILE_CACHE="off",
               XLA_FLAGS="--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0")
    if allocator == "tbbmalloc":
        env.update(LD_PRELOAD=" ".join(map(str, TBB)), TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD="8388608")
    out = subprocess.run([sys.executable, __file__, "--child", ",".join(models)], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--models", default=",".join(OVERRIDES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child.split(","))
    models = args.models.split(",")
    if unknown := [m for m in models if m not in OVERRIDES]:
        sys.exit(f"compile_malloc.py: error: --models {','.join(unknown)}: not one of {', '.join(OVERRIDES)}")
    if not all(p.exists() for p in TBB):
        sys.exit(f"compile_malloc.py: error: {TBB[1]} not found: install the dev extra (pip install tbb==2023.2.0)")
    runs: dict = {"glibc": [], "tbbmalloc": []}
    for i in range(args.pairs):
        for allocator in runs:
            runs[allocator].append(measure(allocator, models))
            print(f"pair {i + 1} {allocator:9s} " + "  ".join(
                f"{m} {r['backend_s']:.2f} s" for m, r in runs[allocator][-1].items()), flush=True)
    for m in models:
        mean = {a: {k: sum(r[m][k] for r in rs) / len(rs) for k in rs[0][m]} for a, rs in runs.items()}
        print(f"{m} (mean of {args.pairs} processes each)")
        for a, v in mean.items():
            print(f"    {a:9s} backend compile {v['backend_s']:6.2f} s  tracing {v['trace_s']:5.2f} s  "
                  f"wall {v['wall_s']:6.2f} s  CPU {v['cpu_s']:6.2f} s")
        ratio = {k: mean["tbbmalloc"][k] / mean["glibc"][k] for k in ("backend_s", "wall_s", "cpu_s")}
        print(f"    tbbmalloc / glibc: backend compile {ratio['backend_s']:.3f}x, wall {ratio['wall_s']:.3f}x, "
              f"CPU {ratio['cpu_s']:.3f}x")


if __name__ == "__main__":
    main()
