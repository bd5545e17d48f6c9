"""Memory knobs of the accelerators issue, measured from XLA's compile-time memory analysis
(`compiled.memory_analysis().temp_size_in_bytes`) of a training step (loss + gradients), and the
step time of the blocked cross-entropy against the whole one on this CPU, in the same run.

    python benchmarks/memory.py loss          # temp bytes: whole loss vs model.loss_block=c
    python benchmarks/memory.py microbatches  # temp bytes: train.microbatches=1 vs k
    python benchmarks/memory.py speed         # B2 step time, whole vs blocked loss (ratio)

Shapes: B2 (vocab 50257, 4 layers, d_model 256, 4 heads, seq 256, batch 8) and a 128K-vocabulary
config (vocab 128256, the same blocks, seq 1024, batch 4). "loss part" = the step's temp bytes
minus the same step's with a 64-token vocabulary (what the loss itself adds).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import abstract_params, init_params, loss_fn

SHAPES = {"B2": (50257, 8, 256, (64, 32, 16)), "128K": (128256, 4, 1024, (256, 128, 64))}


def _setup(vocab: int, seq: int, *overrides):
    cfg = load_config(["model.num_layers=4", "model.d_model=256", "model.num_heads=4", f"model.vocab_size={vocab}",
                       f"model.max_seq_len={seq}", f"data.seq_len={seq}", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    return cfg, mesh, Rules(mesh, cfg.sharding, cfg.model)


def _grad_step(cfg, rules):
    return jax.jit(jax.value_and_grad(lambda p, x, y: loss_fn(cfg.model, rules, p, x, y)))


def temp_bytes(vocab: int, batch: int, seq: int, *overrides) -> int:
    cfg, mesh, rules = _setup(vocab, seq, *overrides)
    with jax.set_mesh(mesh):
        tokens = jax.ShapeDtypeStruct((batch, seq), jnp.int32, sharding=rules.batch_sharding())
        compiled = _grad_step(cfg, rules).lower(abstract_params(cfg.model, rules), tokens, tokens).compile()
        return compiled.memory_analysis().temp_size_in_bytes


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def loss_table() -> None:
    print("| shape | loss_block | step temp | loss part | loss part vs whole |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (vocab, batch, seq, blocks) in SHAPES.items():
        base = temp_bytes(64, batch, seq)
        whole = temp_bytes(vocab, batch, seq)
        print(f"| {name} | 0 (whole) | {mib(whole)} | {mib(whole - base)} | 1.00x |")
        for c in blocks:
            t = temp_bytes(vocab, batch, seq, f"model.loss_block={c}")
            print(f"| {name} | {c} | {mib(t)} | {mib(t - base)} | {(whole - base) / (t - base):.2f}x smaller |")


def microbatch_table() -> None:
    from functools import partial

    from spmdgpt.training.step import accumulated_grads

    print("| shape | microbatches | step temp | vs 1 |")
    print("| --- | ---: | ---: | ---: |")
    vocab, batch, seq = 50257, 32, 256
    cfg, mesh, rules = _setup(vocab, seq, "model.loss_block=32")
    first = None
    with jax.set_mesh(mesh):
        tokens = jax.ShapeDtypeStruct((batch, seq), jnp.int32, sharding=rules.batch_sharding())
        grad_fn = jax.value_and_grad(lambda p, x, y: loss_fn(cfg.model, rules, p, x, y))
        for k in (1, 2, 4, 8):
            step = jax.jit(partial(accumulated_grads, grad_fn, k))
            t = (
                step.lower(abstract_params(cfg.model, rules), tokens, tokens)
                .compile()
                .memory_analysis()
                .temp_size_in_bytes
            )
            first = first or t
            print(f"| B2 vocab, batch 32, loss_block 32 | {k} | {mib(t)} | {first / t:.2f}x smaller |")


def speed(repeats: int) -> None:
    vocab, batch, seq, _ = SHAPES["B2"]
    times = {}
    fns = {}
    for c in (0, 16, 64):
        cfg, mesh, rules = _setup(vocab, seq, f"model.loss_block={c}")
        fns[c] = (cfg, mesh, rules, _grad_step(cfg, rules))
    rng = np.random.default_rng(0)
    x, y = (jnp.asarray(rng.integers(0, vocab, (batch, seq)), jnp.int32) for _ in range(2))
    cfg, mesh, rules, _ = fns[0]
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
    for c, (_, mesh, _, f) in fns.items():
        with jax.set_mesh(mesh):
            jax.block_until_ready(f(params, x, y))  # compile
    for _ in range(repeats):  # alternate the variants, so drift hits them alike
        for c, (_, mesh, _, f) in fns.items():
            with jax.set_mesh(mesh):
                t0 = time.perf_counter()
                jax.block_until_ready(f(params, x, y))
                times.setdefault(c, []).append(time.perf_counter() - t0)
    base = statistics.median(times[0])
    for c, ts in times.items():
        m = statistics.median(ts)
        print(f"B2 loss + gradients, loss_block={c}: median {m * 1e3:.1f} ms of {repeats} "
              f"(whole / this = {base / m:.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["loss", "microbatches", "speed"])
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    {"loss": loss_table, "microbatches": microbatch_table, "speed": lambda: speed(args.repeats)}[args.what]()


if __name__ == "__main__":
    main()
