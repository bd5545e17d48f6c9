"""Parameter initialisation on a CPU: XLA's optimised compile against an unoptimised one, and
the leaves' random bits from one threefry (batched) against one per leaf.

    python benchmarks/init_compile.py [--experiments staircase shakespeare_moe qwen3_5_small deepseek_v3_small
                                       gpt2_124m]

`init_params` draws every leaf in one jitted function. For each experiment's model, on one CPU
device, it compiles that function at XLA's default optimisation level and at
`xla_backend_optimization_level=0` with a threefry per leaf (the code before 2026-11-30), and
unoptimised with one threefry over all leaves (`_init_leaves(batched=True)`: what `init_params`
does below `INIT_UNOPTIMISED` parameters), each a new jit, and runs it once: prints each one's
compile and run seconds and the end-to-end ratios to the optimised one (below 1: quicker). What
`model.params.INIT_UNOPTIMISED` is chosen from.
"""

from __future__ import annotations

import argparse
import time

from spmdgpt.mesh.runtime import set_default_xla_flags

set_default_xla_flags()

import jax  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model import num_params, param_info  # noqa: E402
from spmdgpt.model.layers import dtype_of  # noqa: E402
from spmdgpt.model.params import _init_leaves, param_shardings  # noqa: E402


def timed(cfg, rules, options, batched: bool = False) -> tuple[float, float]:
    """(compile seconds, run seconds) of the init function under these compiler options."""
    make = jax.jit(lambda key: _init_leaves(param_info(cfg), dtype_of(cfg.param_dtype), key, batched),
                   out_shardings=param_shardings(cfg, rules), compiler_options=options)
    lowered = make.lower(jax.random.key(0))
    t0 = time.perf_counter()
    compiled = lowered.compile()
    t1 = time.perf_counter()
    jax.block_until_ready(compiled(jax.random.key(0)))
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--experiments", nargs="+", default=["staircase", "shakespeare_moe", "qwen3_5_small",
                                                             "deepseek_v3_small", "gpt2_124m"])
    args = parser.parse_args()
    print(f"{'experiment':<18} {'params':>12} {'optimised':>18} {'unoptimised':>18} {'ratio':>6} "
          f"{'batched':>18} {'ratio':>6}")
    for name in args.experiments:
        cfg = load_config([f"+experiment={name}", "mesh.data=1"])
        mesh = make_mesh(cfg.mesh, jax.devices()[:1])
        rules = Rules(mesh, cfg.sharding, cfg.model)
        with jax.set_mesh(mesh):
            fast_c, fast_r = timed(cfg.model, rules, None)
            slow_c, slow_r = timed(cfg.model, rules, {"xla_backend_optimization_level": 0})
            one_c, one_r = timed(cfg.model, rules, {"xla_backend_optimization_level": 0}, batched=True)
        print(f"{name:<18} {num_params(cfg.model):>12,} {fast_c:>6.2f} + {fast_r:>5.2f} s "
              f"{slow_c:>6.2f} + {slow_r:>5.2f} s "
              f"{(slow_c + slow_r) / (fast_c + fast_r):>6.2f} {one_c:>6.2f} + {one_r:>5.2f} s "
              f"{(one_c + one_r) / (fast_c + fast_r):>6.2f}", flush=True)


if __name__ == "__main__":
    main()
