"""The MoE layer's dispatch modes against a dense MLP of equal active parameters, on one device.

    python benchmarks/moe.py [--tokens 4096] [--d 256] [--experts 8] [--top-k 2] [--rounds 5]

One MoE MLP unit (spmdgpt.model.moe; SwiGLU experts of width F = 2 d, top-k of E, softmax
router), forward + backward of sum(sin(out)) with respect to the parameters and the input, under
jit: dropless (copies sorted by expert, then `grouped=blocks` and `grouped=ragged`, i.e.
`jax.lax.ragged_dot`), capacity at factors 1.0 and 1.25 (fixed [E, C, d] buffers, batched
einsums) and the masked reference that runs every expert on every token (`moe.every_expert`:
what a dropless layer costs without grouping, E / k times the active FLOPs). The
baseline is the dense SwiGLU MLP of width k x F (the same active parameters per token). Prints
each one's time per call (median of --rounds), its ratio to the baseline and the temporaries
XLA's memory analysis gives for the compiled function.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from spmdgpt.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()
set_default_xla_flags()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from spmdgpt.config import GroupedMatmul, MoeDispatch, load_config  # noqa: E402
from spmdgpt.model import init_params  # noqa: E402
from spmdgpt.model.mlp import mlp  # noqa: E402
from spmdgpt.model.moe import every_expert, moe  # noqa: E402
from spmdgpt.sharding import Rules, make_mesh  # noqa: E402


def timed(fn, args, rounds):
    compiled = jax.jit(fn).lower(*args).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), temp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    E, k, d = args.experts, args.top_k, args.d
    base = ["model.num_layers=1", f"model.d_model={d}", "model.num_heads=4", "model.mlp=swiglu", "mesh.data=1"]
    moe_cfg = load_config([*base, f"model.moe.num_experts={E}", f"model.moe.top_k={k}", "model.mlp_factor=2"]).model
    dense_cfg = load_config([*base, f"model.mlp_factor={2 * k}"]).model
    mesh = make_mesh(load_config(base).mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, load_config(base).sharding, moe_cfg)
        p_moe = jax.tree.map(lambda a: a[0], init_params(moe_cfg, jax.random.key(0), rules).blocks.mlp)
        p_dense = jax.tree.map(lambda a: a[0], init_params(dense_cfg, jax.random.key(0), rules).blocks.mlp)
        x = jax.random.normal(jax.random.key(1), (args.tokens, d), jnp.float32)

        def grad_of(f):
            return jax.grad(lambda p, x: jnp.sum(jnp.sin(f(p, x))), argnums=(0, 1))

        def moe_with(**kw):
            c = dataclasses.replace(moe_cfg, moe=dataclasses.replace(moe_cfg.moe, **kw))
            return lambda p, x: moe(c, rules, p, x)[0]

        capacity = MoeDispatch.capacity
        rows = [("dense MLP, width k x F (baseline)", lambda p, x: mlp(dense_cfg, rules, p, x)[0], p_dense),
                ("MoE dropless, blocks", moe_with(grouped=GroupedMatmul.blocks), p_moe),
                ("MoE dropless, ragged_dot", moe_with(grouped=GroupedMatmul.ragged), p_moe),
                ("MoE capacity 1.0", moe_with(dispatch=capacity, capacity_factor=1.0), p_moe),
                ("MoE capacity 1.25", moe_with(dispatch=capacity, capacity_factor=1.25), p_moe),
                ("masked reference (every expert)", lambda p, x: every_expert(moe_cfg, rules, p, x), p_moe)]
        print(f"{args.tokens} tokens x d {d}, {E} SwiGLU experts of {2 * d}, top-{k}; forward + backward; "
              f"{jax.devices()[0].device_kind}")
        base_t = None
        for name, f, p in rows:
            t, temp = timed(grad_of(f), (p, x), args.rounds)
            base_t = base_t or t
            print(f"  {name:36s} {t * 1e3:8.1f} ms  {t / base_t:5.2f}x  temporaries {temp / 2**20:7.1f} MiB")


if __name__ == "__main__":
    main()
