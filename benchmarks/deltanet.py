"""Gated DeltaNet on this CPU: the chunkwise form against the token-by-token recurrence and against
softmax attention of the same width, and a hybrid's decoding at a long context against all-softmax.

    python benchmarks/deltanet.py [--lengths 512 2048 8192] [--repeats 3] [--decode-context 4096]

1. One layer's token mixing, forward + backward (the gradient of sum(o * cos(o)) with respect to
   q, k, v), at each length: `delta_rule.chunked` (chunks of 64), `delta_rule.recurrent`, and
   causal softmax attention by the xla path (`blocked_causal_attention`, query blocks of 64), with
   qwen3_5_small's widths (4 value heads of 32, keys of 32; the softmax: 4 heads of 32). Printed:
   the best of --repeats wall times and the compiled program's temporary bytes.
2. One layer of qwen3_5_small at its training shape (32 x 128 tokens), forward + backward of the
   unit's apply (`Unit.apply`, the gradient of the sum of squares of its output with respect to
   its parameters and input): the Gated DeltaNet layer against the softmax one. Printed: the best
   of 10 wall times.
3. Decoding at --decode-context cached tokens: qwen3_5_small (3 Gated DeltaNet layers, 1 softmax)
   against shakespeare_char (4 softmax layers) of the same widths, random weights, one slot on the
   inference engine: a prompt of --decode-context tokens, then 64 new tokens (greedy). Printed: the
   decode tokens/s (after the first token) and the engine's pool bytes.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.config import load_config
from spmdgpt.engine import Engine, EngineConfig, Request
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import delta_rule, init_params
from spmdgpt.model.attention import blocked_causal_attention

B, H, DK, DV = 1, 4, 32, 32


def _mixing(kind: str, rules: Rules):
    def loss(q, k, v, g, beta):
        if kind == "chunked":
            o = delta_rule.chunked(q, k, v, g, beta)[0]
        elif kind == "recurrent":
            o = delta_rule.recurrent(q, k, v, g, beta)[0]
        else:
            o = blocked_causal_attention(q, k, v, 64, rules)
        return jnp.sum(o * jnp.cos(o))

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def mixing(lengths, repeats: int) -> None:
    print(f"one layer's mixing, forward + backward: b={B}, {H} heads, dk={DK}, dv={DV} ({jax.devices()[0]})")
    print(f"{'tokens':>7} {'form':>10} {'seconds':>9} {'temp MiB':>9}")
    r = np.random.default_rng(0)
    cfg = load_config(["+experiment=staircase", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        for t in lengths:
            _one_length(t, r, rules, repeats)


def _one_length(t: int, r, rules: Rules, repeats: int) -> None:
    unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)  # noqa: E731
    args = [jnp.asarray(unit(r.normal(size=(B, H, t, DK))), jnp.float32),
            jnp.asarray(unit(r.normal(size=(B, H, t, DK))), jnp.float32),
            jnp.asarray(r.normal(size=(B, H, t, DV)), jnp.float32),
            jnp.asarray(-r.uniform(0, 0.1, size=(B, H, t)), jnp.float32),
            jnp.asarray(r.uniform(size=(B, H, t)), jnp.float32)]
    for kind in ("chunked", "recurrent", "softmax"):
        fn = _mixing(kind, rules)
        compiled = fn.lower(*args).compile()
        temp = compiled.memory_analysis().temp_size_in_bytes / 2**20
        jax.block_until_ready(compiled(*args))
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            best = min(best, time.perf_counter() - start)
        print(f"{t:>7} {kind:>10} {best:>9.4f} {temp:>9.1f}", flush=True)


def layers(batch: int = 32, t: int = 128) -> None:
    from spmdgpt.model.attention import UnitInputs
    from spmdgpt.model.params import block_units

    cfg = load_config(["+experiment=qwen3_5_small", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    print(f"\none layer of qwen3_5_small, forward + backward at {batch} x {t} tokens")
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = init_params(cfg.model, jax.random.key(0), rules)
        x = jax.random.normal(jax.random.key(1), (batch * t, cfg.model.d_model))
        for stack, name in (("linear_blocks", "Gated DeltaNet"), ("blocks", "softmax attention")):
            unit = block_units(cfg.model, stack)[0]
            p = jax.tree.map(lambda a: a[0], getattr(params, stack).attn)
            out = lambda p, x, unit=unit: unit.apply(cfg.model, rules, p, x, UnitInputs(jnp.arange(t), batch))[0]  # noqa: E731
            grad = jax.jit(jax.grad(lambda p, x, out=out: jnp.sum(out(p, x) ** 2), argnums=(0, 1)))
            jax.block_until_ready(grad(p, x))
            best = float("inf")
            for _ in range(10):
                start = time.perf_counter()
                jax.block_until_ready(grad(p, x))
                best = min(best, time.perf_counter() - start)
            print(f"{name:>18}: {best * 1e3:7.2f} ms", flush=True)


def decoding(context: int, new: int = 64) -> None:
    print(f"\ndecoding one sequence after {context} cached tokens, {new} new tokens (greedy, random weights)")
    for name in ("qwen3_5_small", "shakespeare_char"):
        cfg = load_config([f"+experiment={name}", "mesh.data=1", f"model.max_seq_len={context + new}"])
        mesh = make_mesh(cfg.mesh, jax.devices()[:1])
        with jax.set_mesh(mesh):
            rules = Rules(mesh, cfg.sharding, cfg.model)
            params = init_params(cfg.model, jax.random.key(0), rules)
            engine = Engine(cfg.model, rules, params, 65, EngineConfig(slots=1, chunk=512))
            prompt = list(np.random.default_rng(1).integers(0, 65, context))
            engine.run([Request(prompt[:600], 4, temperature=0.0)])  # (compiles the step's variants)
            times = []
            request = Request(prompt, new, temperature=0.0, on_token=lambda r, t: times.append(time.perf_counter()))
            engine.run([request])
            rate = (len(times) - 1) / (times[-1] - times[0])
            print(f"{name:>18}: {rate:8.1f} tokens/s decoding, pool {engine.pool_bytes / 2**20:.1f} MiB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", type=int, nargs="*", default=[512, 2048, 8192])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--decode-context", type=int, default=4096)
    args = ap.parse_args()
    mixing(args.lengths, args.repeats)
    layers()
    if args.decode_context:
        decoding(args.decode_context)


if __name__ == "__main__":
    main()
