"""Causal multi-head attention with fused QKV and RoPE.

The residual stream arrives as [tokens, embed] (tokens = batch x seq flattened, sharded like
the batch). Backends (`model.attention`, resolved by `attention_backend`):

- `xla`: einsum + masked float32 softmax, head-major ([batch, heads, seq, head_dim], so its
  matmuls are plain batched GEMMs: measurably faster on CPU than the [b, t, n, h] layout), in
  causal query blocks (`model.attention_block`). Runs everywhere.
- `cudnn`: cuDNN's fused (flash) attention through `jax.nn.dot_product_attention`, on
  [batch, seq, heads, head_dim]; NVIDIA GPUs, bfloat16/float16 compute only. The T x T score
  matrix is never materialised.
- `auto`: `cudnn` where it can run (GPU and a 16-bit compute dtype), else `xla`.

The xla mask is built from query and key positions, so the same function serves training
(positions 0..T-1) and cached decoding (which uses the xla path).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from spmdgpt.config import AttentionImpl, ConfigError, DType, ModelConfig
from spmdgpt.model.layers import rope
from spmdgpt.sharding import Rules


def causal_mask(q_pos: jax.Array, k_pos: jax.Array) -> jax.Array:
    """True where query i may attend to key j: k_pos[j] <= q_pos[i] (and k_pos[j] >= 0)."""
    return (k_pos[..., None, :] <= q_pos[..., :, None]) & (k_pos[..., None, :] >= 0)


def dot_product_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, rules: Rules
) -> jax.Array:
    """q: [b, n, q, h], k/v: [b, n, k, h], mask: [q, k] or [b, q, k] -> [b, n, q, h]."""
    scale = q.shape[-1] ** -0.5
    scores = jnp.einsum(
        "bnqh,bnkh->bnqk",
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
        "bnqk,bnkh->bnqh", probs, v, out_sharding=rules.spec("batch", "heads", "seq", "head_dim")
    )


def blocked_causal_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, positions: jax.Array, block: int, rules: Rules
) -> jax.Array:
    """Causal self-attention computed in query blocks; block i attends to keys [0, (i+1)*block).

    Key blocks above the diagonal are never computed (about half the work for many blocks);
    the result equals `dot_product_attention` with the full causal mask.
    """
    t = q.shape[2]
    if block <= 0 or block >= t or t % block:
        return dot_product_attention(q, k, v, causal_mask(positions, positions), rules)
    outs = []
    for i in range(t // block):
        end = (i + 1) * block
        q_i = q[:, :, i * block : end]
        mask = causal_mask(positions[i * block : end], positions[:end])
        outs.append(dot_product_attention(q_i, k[:, :, :end], v[:, :, :end], mask, rules))
    return jnp.concatenate(outs, axis=2)


def qkv_projection(
    cfg: ModelConfig, rules: Rules, p, x: jax.Array, positions: jax.Array, batch: int, head_major: bool = True
):
    """x: [tokens, d] -> q, k, v with RoPE applied to q and k: [batch, n, seq, h] (head_major, the
    xla backend's layout) or [batch, seq, n, h] (the fused kernels' layout)."""
    dt = x.dtype
    w = rules.gather(p.w_qkv.astype(dt), ("embed", "qkv", "heads", "head_dim"))
    qkv = jnp.einsum(
        "td,dcnh->tcnh", x, w, out_sharding=rules.spec("batch", "qkv", "heads", "head_dim")
    )
    if p.b_qkv is not None:
        qkv = qkv + p.b_qkv.astype(dt)
    qkv = jnp.reshape(
        qkv,
        (batch, -1) + qkv.shape[1:],
        out_sharding=rules.spec("batch", "seq", "qkv", "heads", "head_dim"),
    )
    qk = rope(qkv[:, :, :2], positions, cfg.rope_theta)  # q and k rotated in one op
    if not head_major:
        return qk[:, :, 0], qk[:, :, 1], qkv[:, :, 2]
    qk = jnp.transpose(qk, (2, 0, 3, 1, 4))  # [2, b, n, t, h]
    return qk[0], qk[1], jnp.transpose(qkv[:, :, 2], (0, 2, 1, 3))


def output_projection(rules: Rules, p, o: jax.Array, head_major: bool = True) -> jax.Array:
    """o: [b, n, q, h] (head_major) or [b, q, n, h] -> [tokens, d] (a sum over heads: an
    all-reduce under tensor parallelism)."""
    if head_major:
        o = jnp.transpose(o, (0, 2, 1, 3))
    o = jnp.reshape(o, (-1,) + o.shape[2:], out_sharding=rules.spec("batch", "heads", "head_dim"))
    w = rules.gather(p.w_o.astype(o.dtype), ("heads", "head_dim", "embed"))
    out = jnp.einsum("tnh,nhd->td", o, w, out_sharding=rules.spec("batch", "embed"))
    if p.b_o is not None:
        out = out + p.b_o.astype(o.dtype)
    return out


def attention_backend(cfg: ModelConfig, platform: str) -> AttentionImpl:
    """The backend `model.attention` means on this platform ('cpu', 'gpu', 'tpu'): `auto`
    resolved, an impossible explicit choice a ConfigError naming the field."""
    half = cfg.compute_dtype in (DType.bfloat16, DType.float16)
    if cfg.attention == AttentionImpl.auto:
        return AttentionImpl.cudnn if platform == "gpu" and half else AttentionImpl.xla
    if cfg.attention == AttentionImpl.cudnn:
        if platform != "gpu":
            raise ConfigError([f"model.attention=cudnn needs an NVIDIA GPU (this run's devices are "
                               f"{platform}); use model.attention=auto or xla"])
        if not half:
            raise ConfigError([f"model.attention=cudnn needs model.compute_dtype=bfloat16 or float16 "
                               f"(got {cfg.compute_dtype.value}); change one of the two"])
    return cfg.attention


def fused_causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, rules: Rules, implementation: str) -> jax.Array:
    """`jax.nn.dot_product_attention` (causal) run per device: q/k/v [b, t, n, h] -> [b, t, n, h].

    Attention is independent per sequence and per head, so under a batch- and/or head-sharded
    layout each device attends over its own rows and heads: the kernel runs inside `shard_map`
    on local, unsharded arrays (fused kernels such as cuDNN's are custom calls that do not carry
    explicit shardings through their gradients)."""
    spec = rules.spec("batch", "seq", "heads", "head_dim")

    def local(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=implementation)

    q, k, v = (jax.sharding.reshard(x, spec) for x in (q, k, v))
    return jax.shard_map(local, in_specs=(spec, spec, spec), out_specs=spec)(q, k, v)


def self_attention(cfg: ModelConfig, rules: Rules, p, x: jax.Array, positions: jax.Array, batch: int):
    """Causal self-attention over full sequences: x [batch * seq, d] -> [batch * seq, d], by the
    backend `model.attention` resolves to on the default device's platform (the one branch
    point: a new backend is a new case here)."""
    if attention_backend(cfg, jax.devices()[0].platform) == AttentionImpl.cudnn:
        q, k, v = qkv_projection(cfg, rules, p, x, positions, batch, head_major=False)
        return output_projection(rules, p, fused_causal_attention(q, k, v, rules, "cudnn"), head_major=False)
    q, k, v = qkv_projection(cfg, rules, p, x, positions, batch)
    o = blocked_causal_attention(q, k, v, positions, cfg.attention_block, rules)
    return output_projection(rules, p, o)
