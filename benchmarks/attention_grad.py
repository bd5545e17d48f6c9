"""Attention's backward on CPU: autodiff (what the model runs) against hand-written gradients.

    python benchmarks/attention_grad.py [--rounds 10]

One layer's causal attention at B1's shapes (batch 16, 4 heads, 256 positions, head 64), in
query blocks of 64 (`causal_blocks`, the model's own walk), forward and backward under `jax.jit`
on a one-device mesh;
each variant's gradients are checked against autodiff's first, then the variants are timed in
alternating rounds (5 calls each) in this process and the medians printed with the ratio to
autodiff. The hand-written variants (`jax.custom_vjp` of one block):

- by_hand: dP = dO V^T, dS = P * (dP - rowsum(dO * O)) (flash attention's form of the softmax
  term), dQ = dS K, dK = dS^T Q, dV = P^T dO;
- by_hand_exact: the same with rowsum(dP * P), the form autodiff's graph has;
- key_major: scores kept transposed (S^T, [keys, queries]) so that every dot is written as
  YNNPACK takes it (lhs contracting its last axis, rhs its second-to-last).

Measured in BENCHMARKS.md ("CPU"): up to 1.19x for one layer, no measurable change in a whole
B1 step, so the model keeps autodiff's gradient; this script is how to check that again.
"""

from __future__ import annotations

import argparse
import statistics
import time

from spmdgpt.mesh.runtime import set_default_xla_flags

set_default_xla_flags()  # spmdgpt's XLA flags, set before JAX starts

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model.attention import causal_blocks, dot_product_attention  # noqa: E402

B, N, T, H, BLOCK = 16, 4, 256, 64, 64
NEG = jnp.finfo(jnp.float32).min


def one_device_rules() -> Rules:
    cfg = load_config(["mesh.data=1"])
    return Rules(make_mesh(cfg.mesh, jax.devices()[:1]), cfg.sharding)


def autodiff(rules: Rules):
    """The model's attention of one block (`dot_product_attention`), differentiated by autodiff."""
    return lambda q, k, v, mask: dot_product_attention(q, k, v, mask, rules)


def by_hand(exact: bool):
    @jax.custom_vjp
    def attend(q, k, v, mask):
        return forward(q, k, v, mask)[0]

    def forward(q, k, v, mask):
        s = jnp.where(mask, jnp.einsum("bnqh,bnkh->bnqk", q, k) * H ** -0.5, NEG)
        p = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bnqk,bnkh->bnqh", p, v)
        return o, (q, k, v, p, o)

    def backward(res, do):
        q, k, v, p, o = res
        dp = jnp.einsum("bnqh,bnkh->bnqk", do, v)
        row = jnp.sum(dp * p if exact else do * o, axis=-1, keepdims=True)
        ds = p * (dp - row) * H ** -0.5
        return (jnp.einsum("bnqk,bnkh->bnqh", ds, k), jnp.einsum("bnqk,bnqh->bnkh", ds, q),
                jnp.einsum("bnqk,bnqh->bnkh", p, do), None)

    attend.defvjp(forward, backward)
    return attend


def key_major():
    t = lambda x: jnp.swapaxes(x, 2, 3)

    @jax.custom_vjp
    def attend(q, k, v, mask):
        return forward(q, k, v, mask)[0]

    def forward(q, k, v, mask):
        st = jnp.where(mask.T, jnp.einsum("bnkh,bnhq->bnkq", k, t(q)) * H ** -0.5, NEG)
        pt = jax.nn.softmax(st, axis=-2)
        o = t(jnp.einsum("bnhk,bnkq->bnhq", t(v), pt))
        return o, (q, k, v, pt, o)

    def backward(res, do):
        q, k, v, pt, o = res
        dpt = jnp.einsum("bnkh,bnhq->bnkq", v, t(do))
        dst = pt * (dpt - jnp.sum(do * o, axis=-1)[:, :, None, :]) * H ** -0.5
        return (t(jnp.einsum("bnhk,bnkq->bnhq", t(k), dst)), jnp.einsum("bnkq,bnqh->bnkh", dst, q),
                jnp.einsum("bnkq,bnqh->bnkh", pt, do), None)

    attend.defvjp(forward, backward)
    return attend


def layer_grad(attend):
    """jit(grad) of sum(w * blocked causal attention(q, k, v)) with respect to q, k, v."""
    def loss(q, k, v, w):
        outs = [attend(q[:, :, rows], k[:, :, :end], v[:, :, :end], mask)  # mask: [queries, keys]
                for rows, end, mask in causal_blocks(T, BLOCK)]
        return jnp.sum(jnp.concatenate(outs, axis=2) * w)
    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    rules = one_device_rules()
    with jax.set_mesh(rules.mesh):
        q, k, v, w = (jax.random.normal(key, (B, N, T, H)) for key in jax.random.split(jax.random.key(0), 4))
        fns = {"autodiff": layer_grad(autodiff(rules)), "by_hand": layer_grad(by_hand(False)),
               "by_hand_exact": layer_grad(by_hand(True)), "key_major": layer_grad(key_major())}
        want = fns["autodiff"](q, k, v, w)
        for name, fn in fns.items():
            err = max(float(jnp.max(jnp.abs(g - r))) for g, r in zip(fn(q, k, v, w), want))
            if err > 1e-4:
                raise SystemExit(f"{name}: gradients differ from autodiff's by {err:.3g}")
        times = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(5):
                    out = fn(q, k, v, w)
                jax.block_until_ready(out)
                times[name].append((time.perf_counter() - t0) / 5)
    base = statistics.median(times["autodiff"])
    print(f"one layer's blocked causal attention [{B}, {N}, {T}, {H}], block {BLOCK}, forward + backward, "
          f"median of {args.rounds} alternating rounds")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:14s} {m * 1e3:7.2f} ms  {base / m:.2f}x autodiff")


if __name__ == "__main__":
    main()
