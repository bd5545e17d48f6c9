"""Norms, rotary position embeddings, dropout: pure functions on sharded arrays."""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig, NormType
from spmdgpt.model.info import vector
from spmdgpt.sharding import Rules


def dtype_of(d) -> jnp.dtype:
    """The jnp dtype of a config DType (model.param_dtype, model.compute_dtype)."""
    return jnp.dtype(d.value)


class Norm(NamedTuple):
    scale: jax.Array  # [..., embed]
    bias: Optional[jax.Array]  # [..., embed] (LayerNorm with model.bias=true), else None


def norm_info(cfg: ModelConfig) -> Norm:
    """A norm's parameters: a scale (ones), and a bias (zeros) for LayerNorm with model.bias."""
    bias = cfg.bias and cfg.norm == NormType.layernorm
    return Norm(vector((cfg.d_model,), ("embed",), "ones"), vector((cfg.d_model,), ("embed",)) if bias else None)


def norm(cfg: ModelConfig, rules: Rules, p: Norm, x: jax.Array) -> jax.Array:
    """LayerNorm or RMSNorm over the last axis, computed in float32, returned in the compute
    dtype (the input of the matmuls that follow; the residual stream itself is float32)."""
    x32 = x.astype(jnp.float32)
    if cfg.norm == NormType.layernorm:
        x32 = x32 - jnp.mean(x32, axis=-1, keepdims=True)
    y = x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + cfg.norm_eps)
    y = y * rules.gather(p.scale.astype(jnp.float32), ("embed",))
    if p.bias is not None:
        y = y + rules.gather(p.bias.astype(jnp.float32), ("embed",))
    return y.astype(dtype_of(cfg.compute_dtype))


def rms_normalize(x: jax.Array, eps: float, scale: Optional[jax.Array] = None) -> jax.Array:
    """x / RMS(x) over the last axis, computed in float32, in x's dtype, times `scale` (broadcast
    against x; none: no learned scale): the QK-norm of `model.qk_norm` (queries and keys of every
    head get unit RMS) and its learned per-dimension scale (`model.qk_norm_scale`)."""
    x32 = x.astype(jnp.float32)
    y = (x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + eps)).astype(x.dtype)
    return y if scale is None else y * scale.astype(x.dtype)


def dropout(x: jax.Array, rate: float, key: Optional[jax.Array]) -> jax.Array:
    """Inverted dropout: each element zeroed with probability `rate`, the rest scaled by
    1 / (1 - rate). The mask is a pure function of `key` (laid out like x, and the same bits on
    any mesh: JAX's partitionable threefry), so a resumed run draws the same masks. No key
    (evaluation, sampling) or rate 0: x unchanged."""
    if key is None or rate <= 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape, out_sharding=jax.typeof(x).sharding)
    return jnp.where(keep, x * (1.0 / (1.0 - rate)), 0).astype(x.dtype)


def rope(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
    """Rotary position embedding: rotate pairs (x[i], x[i + h/2]) by position * theta^(-2i/h).

    x: [batch, seq, *other, head_dim] (e.g. q and k stacked as [b, t, 2, n, h], so both are
    rotated in one fused op); positions: [seq] or [batch, seq] (integers). The dot product of
    two rotated vectors depends only on the difference of their positions.
    """
    h = x.shape[-1]
    half = h // 2
    inv_freq = theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angles = positions.astype(jnp.float32)[..., None] * inv_freq  # [..., seq, half]
    cos = jnp.concatenate([jnp.cos(angles)] * 2, axis=-1)
    sin = jnp.concatenate([-jnp.sin(angles), jnp.sin(angles)], axis=-1)  # sign of the rotation
    other = (1,) * (x.ndim - 3)  # the axes between seq and head_dim (e.g. q/k and heads)
    cos = cos.reshape(cos.shape[:-1] + other + (h,))
    sin = sin.reshape(sin.shape[:-1] + other + (h,))
    x32 = x.astype(jnp.float32)
    swapped = jnp.concatenate([x32[..., half:], x32[..., :half]], axis=-1)  # (x2, x1)
    return (x32 * cos + swapped * sin).astype(x.dtype)


def rms(a: jax.Array) -> jax.Array:
    """The root mean square of every element, a float32 scalar (for statistics)."""
    return jnp.sqrt(jnp.mean(jnp.square(a.astype(jnp.float32))))
