"""Causal multi-head attention with fused QKV and RoPE.

Backends: `xla` (einsum + masked float32 softmax). The mask is built from query and key
positions, so the same function serves training (positions 0..T-1) and cached decoding.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig
from spmdgpt.model.layers import rope
from spmdgpt.sharding import Rules


def causal_mask(q_pos: jax.Array, k_pos: jax.Array) -> jax.Array:
    """True where query i may attend to key j: k_pos[j] <= q_pos[i] (and k_pos[j] >= 0)."""
    return (k_pos[..., None, :] <= q_pos[..., :, None]) & (k_pos[..., None, :] >= 0)


def dot_product_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, rules: Rules
) -> jax.Array:
    """q: [b, t, n, h], k/v: [b, s, n, h], mask: [t, s] or [b, t, s] -> [b, t, n, h]."""
    scale = q.shape[-1] ** -0.5
    scores = jnp.einsum(
        "btnh,bsnh->bnts",
        q,
        k,
        out_sharding=rules.spec("batch", "heads", None, None),
        preferred_element_type=jnp.float32,
    )
    if mask.ndim == 3:
        mask = mask[:, None]
    scores = jnp.where(mask, scores * scale, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    return jnp.einsum(
        "bnts,bsnh->btnh", probs, v, out_sharding=rules.spec("batch", "seq", "heads", "head_dim")
    )


def qkv_projection(cfg: ModelConfig, rules: Rules, p, x: jax.Array, positions: jax.Array):
    """x: [b, t, d] -> q, k, v: [b, t, n, h], with RoPE applied to q and k."""
    dt = x.dtype
    w = rules.gather(p.w_qkv.astype(dt), ("embed", "qkv", "heads", "head_dim"))
    qkv = jnp.einsum(
        "btd,dcnh->cbtnh", x, w, out_sharding=rules.spec("qkv", "batch", "seq", "heads", "head_dim")
    )
    if p.b_qkv is not None:
        qkv = qkv + p.b_qkv.astype(dt)[:, None, None]
    q, k, v = qkv[0], qkv[1], qkv[2]
    return rope(q, positions, cfg.rope_theta), rope(k, positions, cfg.rope_theta), v


def output_projection(rules: Rules, p, o: jax.Array) -> jax.Array:
    """o: [b, t, n, h] -> [b, t, d] (a sum over heads: an all-reduce under tensor parallelism)."""
    w = rules.gather(p.w_o.astype(o.dtype), ("heads", "head_dim", "embed"))
    out = jnp.einsum("btnh,nhd->btd", o, w, out_sharding=rules.spec("batch", "seq", "embed"))
    if p.b_o is not None:
        out = out + p.b_o.astype(o.dtype)
    return out


def self_attention(cfg: ModelConfig, rules: Rules, p, x: jax.Array, positions: jax.Array):
    """Causal self-attention over one full sequence (training and evaluation)."""
    q, k, v = qkv_projection(cfg, rules, p, x, positions)
    o = dot_product_attention(q, k, v, causal_mask(positions, positions), rules)
    return output_projection(rules, p, o)
