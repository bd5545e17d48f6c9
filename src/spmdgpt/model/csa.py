"""DeepSeek-V4's attention unit (`model.csa.q_rank` > 0), its parts that need no compressor: shared
key/value multi-query attention, one key/value head of model.head_dim (512) whose keys are its
values, partial RoPE on the last csa.rope_dim dimensions of each head (interleaved pairs), a
learned sink per head, and the grouped low-rank output projection. Over the layers' windows
(model.sliding_window) it is DeepSeek-V4's sliding-window branch; the CSA / HCA compressors and
their indexer are not built yet. Its cache holds one row a token ("shared_kv": the keys are the values).

    cq = RMSNorm(x w_qa) q_norm                 [R]     the query latent (q_lora_rank)
    q  = RMSNorm_head(cq w_qb)                  [N, H]  each head normalised, no scale
    kv = RMSNorm(x w_kv) kv_norm                [H]     one head, the keys and the values
    q, kv rotated on their last r dimensions (pairs 2i, 2i + 1; frequencies theta^(-2i / r))
    o  = softmax(q kv^T / sqrt(H), the head's sink) kv, its last r dimensions rotated back by the
         query's position (the values' own rotation made relative)
    out = sum_g (o's heads of group g, flattened) w_oa[g] w_ob[g]   (o_groups G, o_lora_rank O)

Shapes (D = d_model, N heads, H = head_dim, R = csa.q_rank, G = csa.out_groups, O = csa.out_rank;
the block stacks a layer axis in front): w_qa [D, R], q_norm [R], w_qb [R, N, H], w_kv [D, H],
kv_norm [H], sinks [N], w_oa [G, N / G, H, O], w_ob [G, O, D].
"""

from __future__ import annotations

from typing import List, NamedTuple

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig, head_dim
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.attention import UnitInputs, blocked_causal_attention, dot_product_attention, write_cache
from spmdgpt.model.context import flatten, unflatten
from spmdgpt.model.info import matrix, residual_std, vector
from spmdgpt.model.layers import rms, rms_normalize

F32 = jnp.float32


class Csa(NamedTuple):
    w_qa: jax.Array
    q_norm: jax.Array
    w_qb: jax.Array
    w_kv: jax.Array
    kv_norm: jax.Array
    sinks: jax.Array
    w_oa: jax.Array
    w_ob: jax.Array


def csa_info(cfg: ModelConfig) -> Csa:
    D, N, H, c = cfg.d_model, cfg.num_heads, head_dim(cfg), cfg.csa
    R, G, O = c.q_rank, c.out_groups, c.out_rank
    std = cfg.init_std
    return Csa(
        w_qa=matrix((D, R), ("embed", "q_latent"), ("embed",), ("q_latent",), std),
        q_norm=vector((R,), ("q_latent",), "ones"),
        w_qb=matrix((R, N, H), ("q_latent", "heads", "head_dim"), ("q_latent",), ("heads", "head_dim"), std),
        w_kv=matrix((D, H), ("embed", "head_dim"), ("embed",), ("head_dim",), std),
        kv_norm=vector((H,), ("head_dim",), "ones"),
        sinks=vector((N,), ("heads",)),
        w_oa=matrix((G, N // G, H, O), ("out_groups", "group_heads", "head_dim", "out_rank"),
                    ("group_heads", "head_dim"), ("out_rank",), std),
        w_ob=matrix((G, O, D), ("out_groups", "out_rank", "embed"), ("out_groups", "out_rank"), ("embed",),
                    residual_std(cfg)),
    )


def rotate_tail(cfg: ModelConfig, x: jax.Array, positions: jax.Array, sign: float = 1.0) -> jax.Array:
    """x [b, t, ..., H] with its last csa.rope_dim dimensions rotated by position (positions [t] or
    [b, t]) in interleaved pairs (2i, 2i + 1) at frequency theta^(-2i / r), in float32; sign=-1:
    rotated back."""
    r = cfg.csa.rope_dim
    inv = cfg.rope_theta ** (-jnp.arange(0, r, 2, dtype=F32) / r)
    pos = positions.astype(F32) if positions.ndim == 2 else positions.astype(F32)[None]
    angle = pos[..., None] * inv  # [b or 1, t, r / 2]
    angle = jnp.reshape(angle, angle.shape[:2] + (1,) * (x.ndim - 3) + angle.shape[-1:])
    cos, sin = jnp.cos(angle), sign * jnp.sin(angle)
    tail = x[..., -r:].astype(F32)
    a, b = tail[..., 0::2], tail[..., 1::2]
    turned = jnp.reshape(jnp.stack([a * cos - b * sin, b * cos + a * sin], axis=-1), tail.shape)
    return jnp.concatenate([x[..., :-r], turned.astype(x.dtype)], axis=-1)


def csa_cache(cfg: ModelConfig, batch: int, capacity: int) -> dict:
    """What the unit caches per layer: {"shared_kv": [batch, capacity, H]}, each token's one key/value row
    (normed and rotated: the keys and the values at once, half of a key/value head pair's bytes)."""
    return {"shared_kv": ((batch, capacity, head_dim(cfg)), ("batch", None, "head_dim"))}


def csa_attention(cfg: ModelConfig, rules: Rules, p: Csa, x: jax.Array, u: UnitInputs):
    """x [stream, D] -> ([stream, D], this layer's cache {"shared_kv"} or None, no auxiliary outputs).
    Full sequences (and a prefill, whose rows then start the cache): the xla path's blocked causal
    attention (u.window: the layer's sliding window; documents by u.segment_ids). Decode (a cache
    with a mask, the window's in it): the new rows written at cache.end, the queries over the
    whole cache."""
    dt, eps, b = x.dtype, cfg.norm_eps, u.batch
    g = lambda w, *logical: rules.gather(w.astype(dt), logical)  # noqa: E731
    cq = jnp.einsum("td,dr->tr", x, g(p.w_qa, "embed", "q_latent"), out_sharding=rules.spec("stream", None))
    cq = rms_normalize(cq, eps, p.q_norm.astype(dt))
    q = jnp.einsum("tr,rnh->tnh", cq, g(p.w_qb, "q_latent", "heads", "head_dim"),
                   out_sharding=rules.spec("stream", "heads", "head_dim"))
    q = rms_normalize(q, eps)
    kv = jnp.einsum("td,dh->th", x, g(p.w_kv, "embed", "head_dim"), out_sharding=rules.spec("stream", "head_dim"))
    kv = rms_normalize(kv, eps, p.kv_norm.astype(dt))
    q = rotate_tail(cfg, unflatten(rules, q, b, "heads", "head_dim"), u.positions)  # [b, t, N, H]
    kv = rotate_tail(cfg, unflatten(rules, kv, b, "head_dim"), u.positions)  # [b, t, H]
    q = jnp.transpose(q, (0, 2, 1, 3))  # head-major: [b, N, t, H]
    new = None
    if u.cache is not None and u.cache.mask is not None:  # decode: over everything cached
        new = write_cache(u.cache, 1, shared_kv=kv)
        whole = new["shared_kv"].astype(dt)[:, None]  # [b, 1, capacity, H]
        o = dot_product_attention(q, whole, whole, u.cache.mask, rules, sinks=p.sinks)
    else:
        o = blocked_causal_attention(q, kv[:, None], kv[:, None], cfg.attention_block, rules, u.segment_ids,
                                     window=u.window, sinks=p.sinks)
        if u.cache is not None:  # prefill: these rows start the cache
            new = write_cache(u.cache, 1, shared_kv=kv)
    o = rotate_tail(cfg, jnp.transpose(o, (0, 2, 1, 3)), u.positions, -1.0)  # [b, t, N, H], rotated back
    G = cfg.csa.out_groups
    o = flatten(rules, jnp.reshape(o, o.shape[:2] + (G, o.shape[2] // G, o.shape[3])), None, None, None)
    mid = jnp.einsum("tgmh,gmho->tgo", o, g(p.w_oa, None, None, "head_dim", None),
                     out_sharding=rules.spec("stream", None, None))
    out = jnp.einsum("tgo,god->td", mid, g(p.w_ob, None, None, "embed"), out_sharding=rules.spec("stream", "embed"))
    return out, new, {}


def csa_stats(cfg: ModelConfig, rules: Rules, p: Csa, x: jax.Array, u: UnitInputs) -> dict:
    """The RMS of the shared key/value head before its norm."""
    return {"kv_pre_rms": rms(jnp.einsum("td,dh->th", x, p.w_kv.astype(x.dtype)))}


def config_errors(m: ModelConfig) -> List[str]:
    """model.csa.*: checked when it is on (q_rank > 0)."""
    c = m.csa
    if c.q_rank < 0:
        return [f"model.csa.q_rank={c.q_rank} must be >= 0 (0 = off; DeepSeek-V4: 1024)"]
    if not c.q_rank:
        return []
    errs: List[str] = []
    H = head_dim(m) if m.num_heads > 0 and m.d_model > 0 else 0
    if c.rope_dim <= 0 or c.rope_dim % 2 or c.rope_dim > H:
        errs.append(f"model.csa.rope_dim={c.rope_dim} must be even, > 0 and at most the head width {H} (DeepSeek-V4: "
                    "64 of 512)")
    if c.out_groups < 1 or m.num_heads % c.out_groups or c.out_rank < 1:
        errs.append(f"model.csa.out_groups={c.out_groups} must divide model.num_heads={m.num_heads} and "
                    f"model.csa.out_rank={c.out_rank} be >= 1 (DeepSeek-V4: 8 groups of 1024)")
    for bad, name, fix in ((m.mla.kv_rank, "model.mla.kv_rank", "0"), (m.num_kv_heads not in (None, 1),
                           "model.num_kv_heads", "1 (one shared key/value head)"),
                           (m.deltanet.full_attention_interval, "model.deltanet.full_attention_interval", "0"),
                           (m.attention_sinks, "model.attention_sinks", "false (the unit has its sinks)"),
                           (m.bias or m.qkv_bias or m.qk_norm, "model.bias / qkv_bias / qk_norm", "false"),
                           (m.attention.value not in ("auto", "xla"), "model.attention", "xla")):
        if bad:
            errs.append(f"model.csa.q_rank={c.q_rank} (DeepSeek-V4's attention) and {name} do not combine; set "
                        f"{name}={fix}")
    return errs
