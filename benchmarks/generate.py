"""Decode speed: the KV-cache sampler against re-running the full forward pass for each token.

    python benchmarks/generate.py [--new 256] [--prompt 64] [--batches 1,16] [--heads 4] [--kv-heads K] [--no-baseline]
                                  [--set model.FIELD=VALUE ...]

B1 model (vocab 65, 4 layers, 4 heads, d_model 256; random weights: speed does not depend on
them), a 64-token prompt, 256 new tokens, batch 1 and 16, 1 CPU device. --heads / --kv-heads:
that many query heads / key/value heads (grouped-query attention); --set: any model override
(multi-head latent attention: --set model.mla.kv_rank=64 ...); the cache's bytes per token (all
layers) and the parameter count are printed first. The baseline keeps the
sequence in a fixed [batch, prompt + new] buffer and runs the whole forward pass over it for
every new token (one compiled function, the fair no-cache baseline). Prints decode tokens/s of
both, their ratio (target >= 10x at batch 1) and the sampler's first call with compilation
(target < 10 s).
"""

from __future__ import annotations

import argparse
import time

from spmdgpt.mesh.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()  # the process settings of `spmdgpt train` (spmdgpt.mesh.runtime)
set_default_xla_flags()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from padded_sampler import Sampler, SamplingParams  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model import forward, init_cache, init_params, num_params  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=None)
    ap.add_argument("--no-baseline", action="store_true", help="the KV-cache sampler only")
    ap.add_argument("--set", nargs="*", default=[], help="model overrides, e.g. model.mla.kv_rank=64")
    args = ap.parse_args()
    total = args.prompt + args.new
    cfg = load_config(["model.num_layers=4", f"model.num_heads={args.heads}", "model.d_model=256",
                       "model.vocab_size=65", f"model.max_seq_len={total}", "mesh.data=1",
                       *([f"model.num_kv_heads={args.kv_heads}"] if args.kv_heads else []), *args.set])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = init_params(cfg.model, jax.random.key(0), rules)
        rng = np.random.default_rng(0)
        sampler = Sampler(cfg.model, rules)
        sp = SamplingParams(max_new_tokens=args.new, temperature=0.8, top_k=50, seed=0)

        @jax.jit
        def naive_step(buf, i, key):
            logits, _ = forward(cfg.model, rules, params, buf)
            last = jax.lax.dynamic_index_in_dim(logits, i - 1, axis=1, keepdims=False)
            tok = jax.random.categorical(key, last / 0.8).astype(jnp.int32)
            return jax.lax.dynamic_update_index_in_dim(buf, tok, i, axis=1)

        cache = jax.eval_shape(lambda: init_cache(cfg.model, rules, 1, total))
        size = sum(a.size * a.dtype.itemsize for a in cache.layers.values())
        print(f"{args.heads} heads, cache {', '.join(f'{n} {list(a.shape)}' for n, a in cache.layers.items())}: "
              f"{size // total:,} bytes per token; {num_params(cfg.model):,} parameters")
        for batch in map(int, args.batches.split(",")):
            prompts = rng.integers(0, 65, (batch, args.prompt)).tolist()
            t0 = time.perf_counter()
            sampler.generate(params, prompts, sp)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            sampler.generate(params, prompts, sp)
            cached = batch * args.new / (time.perf_counter() - t0)
            if args.no_baseline:
                print(f"batch {batch:2d}: KV cache {cached:9,.0f} tokens/s | first call incl. compile {first:.1f} s")
                continue

            buf = np.zeros((batch, total), np.int32)
            buf[:, : args.prompt] = prompts
            buf = jax.device_put(buf, rules.batch_sharding())
            key = jax.random.key(0)
            jax.block_until_ready(naive_step(buf, args.prompt, key))  # compile
            t0 = time.perf_counter()
            for i in range(args.prompt, total):
                buf = naive_step(buf, i, jax.random.fold_in(key, i))
            jax.block_until_ready(buf)
            naive = batch * args.new / (time.perf_counter() - t0)
            print(f"batch {batch:2d}: KV cache {cached:9,.0f} tokens/s | full forward per token "
                  f"{naive:8,.0f} tokens/s | speed-up {cached / naive:5.1f}x"
                  f"{' (target >= 10x: ' + ('PASS' if cached / naive >= 10 else 'FAIL') + ')' if batch == 1 else ''}"
                  f" | first call incl. compile {first:.1f} s"
                  f"{' (target < 10 s: ' + ('PASS' if first < 10 else 'FAIL') + ')' if batch == 1 else ''}")


if __name__ == "__main__":
    main()
