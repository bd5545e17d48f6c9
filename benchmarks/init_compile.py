"""Parameter initialisation on a CPU: XLA's optimised compile against an unoptimised one.

    python benchmarks/init_compile.py [--experiments staircase shakespeare_moe gpt2_124m]

`init_params` draws every leaf in one jitted function (threefry and the normal's inverse erf
per leaf). For each experiment's model, on one CPU device, it compiles that function at XLA's
default optimisation level and at `xla_backend_optimization_level=0`, each in a fresh process
state (a new jit), and runs it once: prints the compile and run seconds of both, their totals
and the ratio (unoptimised / optimised; below 1: unoptimised is quicker end to end). What
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


def timed(cfg, rules, options) -> tuple[float, float]:
    """(compile seconds, run seconds) of the init function under these compiler options."""
    make = jax.jit(lambda key: _init_leaves(param_info(cfg), dtype_of(cfg.param_dtype), key),
                   out_shardings=param_shardings(cfg, rules), compiler_options=options)
    lowered = make.lower(jax.random.key(0))
    t0 = time.perf_counter()
    compiled = lowered.compile()
    t1 = time.perf_counter()
    jax.block_until_ready(compiled(jax.random.key(0)))
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--experiments", nargs="+", default=["staircase", "shakespeare_moe", "gpt2_124m"])
    args = parser.parse_args()
    print(f"{'experiment':<18} {'params':>12} {'optimised':>18} {'unoptimised':>18} {'ratio':>6}")
    for name in args.experiments:
        cfg = load_config([f"+experiment={name}", "mesh.data=1"])
        mesh = make_mesh(cfg.mesh, jax.devices()[:1])
        rules = Rules(mesh, cfg.sharding, cfg.model)
        with jax.set_mesh(mesh):
            fast_c, fast_r = timed(cfg.model, rules, None)
            slow_c, slow_r = timed(cfg.model, rules, {"xla_backend_optimization_level": 0})
        print(f"{name:<18} {num_params(cfg.model):>12,} {fast_c:>6.2f} + {fast_r:>5.2f} s "
              f"{slow_c:>6.2f} + {slow_r:>5.2f} s "
              f"{(slow_c + slow_r) / (fast_c + fast_r):>6.2f}")


if __name__ == "__main__":
    main()
