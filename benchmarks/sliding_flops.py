"""DeepSeek-V4's S layers (model.csa, pattern S) in query blocks that skip the key blocks their window
cannot reach (`csa.banded_attention` without entries) against `blocked_causal_attention`, which computes
them and masks them: the training step's FLOPs by XLA's cost analysis, compiled for this machine's CPU.

    python benchmarks/sliding_flops.py [--seq 2048] [--window 128]

One S layer (d_model 256, 4 heads of 64, a query latent of 64), 2 sequences, one device; the step's
loss and gradient both ways.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import spmdgpt.model.csa as csa  # noqa: E402
from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model import init_params  # noqa: E402
from spmdgpt.model.loss import objective  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--window", type=int, default=128)
    args = ap.parse_args()
    cfg = load_config(["+experiment=staircase", "mesh.data=1", "model.num_layers=1", "model.d_model=256",
                       "model.num_heads=4", "model.num_kv_heads=1", "model.head_dim=64", "model.csa.q_rank=64",
                       "model.csa.rope_dim=16", "model.csa.out_groups=2", "model.csa.out_rank=64",
                       "model.csa.pattern=S", f"model.sliding_window={args.window}", f"model.max_seq_len={args.seq}",
                       "model.attention_block=256", "model.vocab_size=64"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    toks = jnp.zeros((2, args.seq), jnp.int32)
    flops, banded = {}, csa.band_block
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        for name, block in (("query blocks, skipped", banded), ("masked key blocks", lambda m, t: 0)):
            csa.band_block = block
            step = jax.jit(jax.value_and_grad(lambda p: objective(cfg.model, rules, p, toks, toks)[0]))
            flops[name] = step.lower(params).compile().cost_analysis()["flops"]
    csa.band_block = banded
    print(f"block {banded(cfg.model, args.seq)} of {args.seq} tokens, window {args.window}")
    for name, f in flops.items():
        print(f"  {name:22s} {f / 1e9:8.2f} GFLOP a step")
    print(f"  ratio {flops['query blocks, skipped'] / flops['masked key blocks']:.3f}")


if __name__ == "__main__":
    main()
