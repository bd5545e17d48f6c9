"""LoRA against full fine-tuning: step time, what the step keeps, and its temporaries.

    python benchmarks/lora.py [--rank 16] [--steps 20] [--pairs 3]

The model of the fine-tuning walk in docs/post-training.md (`+experiment=shakespeare_gpt2`: GPT-2 BPE, its
rows, layers and width), a seeded base, random tokens (the data is not what is measured),
1 device, float32, AdamW for both. Full fine-tuning trains every parameter; LoRA trains rank-r
adapters on every attention and MLP matrix (`lora.targets=[all]`) with the base frozen. Per
variant: the median step time of timed windows that alternate (full, LoRA, ...), the bytes of
what the state keeps between steps (trained parameters + optimizer state; LoRA's frozen base
beside it), and XLA's temporaries of the compiled step (`memory_analysis`). Prints the ratios
LoRA / full. No target: the numbers say what LoRA buys on this implementation (its step merges
each layer's adapters into the weight and differentiates that, so its compute is full
fine-tuning's).
"""

from __future__ import annotations

import argparse
import statistics
import time

from spmdgpt.mesh.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()  # as `spmdgpt train` does
set_default_xla_flags()

from functools import partial  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model import init_params  # noqa: E402
from spmdgpt.training.state import init_state  # noqa: E402
from spmdgpt.training.step import make_train_step, optimizer_of  # noqa: E402

COMMON = ["+experiment=shakespeare_gpt2", "mesh.data=1", "optimizer.name=adamw", "train.time_budget=null",
          "data.batch_size=8", "data.seq_len=256"]


def nbytes(tree) -> int:
    return sum(a.nbytes for a in jax.tree.leaves(tree))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    variants = {"full": load_config(COMMON),
                "lora": load_config(COMMON + [f"lora.rank={args.rank}", f"lora.alpha={2 * args.rank}"])}
    cfg = variants["full"]
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    d = cfg.data
    with jax.set_mesh(mesh):
        base = init_params(cfg.model, jax.random.key(0), rules)
        tokens = jax.random.randint(jax.random.key(1), (d.batch_size, d.seq_len + 1), 0, 50257)
        batch = (tokens[:, :-1], tokens[:, 1:])
        runs = {}
        for name, c in variants.items():
            state = init_state(c, rules, optimizer_of(c))
            if name == "full":
                params = jax.tree.map(jnp.copy, base)  # (the step donates its state; LoRA's base stays)
                state = state._replace(params=params, opt_state=jax.jit(optimizer_of(c).init)(params))
            frozen = base if c.lora.rank else None
            step = make_train_step(c, rules, optimizer_of(c), base=frozen)
            jitted, kw = (step.func, step.keywords) if isinstance(step, partial) else (step, {})
            compiled = jitted.lower(state, *batch, **kw).compile()
            temp = compiled.memory_analysis().temp_size_in_bytes
            kept = nbytes((state.params, state.opt_state))
            state, m = step(state, *batch)  # (compiled again by the jitted step itself, and warmed)
            jax.block_until_ready(m)
            runs[name] = dict(step=step, state=state, temp=temp, kept=kept, times=[])
        for k in range(args.pairs):
            for name in (("full", "lora") if k % 2 == 0 else ("lora", "full")):
                r = runs[name]
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    r["state"], m = r["step"](r["state"], *batch)
                jax.block_until_ready(m)
                r["times"].append((time.perf_counter() - t0) / args.steps)
                print(f"  {name}: {r['times'][-1] * 1e3:7.1f} ms/step", flush=True)
    full, lora = runs["full"], runs["lora"]
    mib = 2.0 ** 20
    for name, r in runs.items():
        print(f"{name:>4}: {statistics.median(r['times']) * 1e3:7.1f} ms/step | kept between steps "
              f"{r['kept'] / mib:8.1f} MiB" + (f" (+ the frozen base, {nbytes(base) / mib:.1f} MiB)" if name == "lora"
                                              else "") + f" | step temporaries {r['temp'] / mib:8.1f} MiB")
    ratio = statistics.median(lora['times']) / statistics.median(full['times'])
    print(f"LoRA rank {args.rank} / full: step time {ratio:.3f}, "
          f"kept {lora['kept'] / full['kept']:.4f}, temporaries {lora['temp'] / full['temp']:.3f}")


if __name__ == "__main__":
    main()
