"""Norms, rotary position embeddings, dropout: pure functions on sharded arrays."""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig, NormType, RopeScaling
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.info import vector


def dtype_of(d) -> jnp.dtype:
    """The jnp dtype of a config DType (model.param_dtype, model.compute_dtype)."""
    return jnp.dtype(d.value)


class Norm(NamedTuple):
    scale: Optional[jax.Array]  # [..., embed] (None: model.norm_scale=false, no parameters)
    bias: Optional[jax.Array]  # [..., embed] (LayerNorm with model.bias=true), else None


def norm_info(cfg: ModelConfig) -> Norm:
    """A norm's parameters: a scale (ones; zeros with model.norm_plus_one, which multiplies by
    1 + scale; none with model.norm_scale=false), and a bias (zeros) for LayerNorm with model.bias."""
    bias = cfg.bias and cfg.norm == NormType.layernorm
    D = cfg.d_model
    return Norm(vector((D,), ("embed",), scale_init(cfg)) if cfg.norm_scale else None,
                vector((D,), ("embed",)) if bias else None)


def scale_init(cfg: ModelConfig) -> str:
    """A norm scale's init: ones, or zeros with model.norm_plus_one (the identity either way)."""
    return "zeros" if cfg.norm_plus_one else "ones"


def norm_scale(cfg: ModelConfig, w: jax.Array) -> jax.Array:
    """The factor a stored norm scale w multiplies by: w, or 1 + w (model.norm_plus_one; float32)."""
    return 1.0 + w.astype(jnp.float32) if cfg.norm_plus_one else w


def norm(cfg: ModelConfig, rules: Rules, p: Norm, x: jax.Array) -> jax.Array:
    """LayerNorm or RMSNorm over the last axis, computed in float32, returned in the compute
    dtype (the input of the matmuls that follow; the residual stream itself is float32)."""
    x32 = x.astype(jnp.float32)
    if cfg.norm == NormType.layernorm:
        x32 = x32 - jnp.mean(x32, axis=-1, keepdims=True)
    y = x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + cfg.norm_eps)
    if p.scale is not None:  # (model.norm_scale=false: none)
        y = y * norm_scale(cfg, rules.gather(p.scale.astype(jnp.float32), ("embed",)))
    if p.bias is not None:
        y = y + rules.gather(p.bias.astype(jnp.float32), ("embed",))
    return y.astype(dtype_of(cfg.compute_dtype))


def rms_normalize(x: jax.Array, eps: float, scale: Optional[jax.Array] = None, axes: tuple = (-1,)) -> jax.Array:
    """x / RMS(x) over the last axis (or `axes`), computed in float32 (float64 for float64 x), in
    x's dtype, times `scale` (broadcast against x; none: no learned scale): the QK-norm of
    `model.qk_norm` (queries and keys of every head get unit RMS; `model.qk_norm_whole`: all of a
    token's heads together) and its learned per-dimension scale (`model.qk_norm_scale`), Gated
    DeltaNet's gated norm."""
    x32 = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    y = (x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=axes, keepdims=True) + eps)).astype(x.dtype)
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


def layer_rope(cfg: ModelConfig, h: int, window=None) -> tuple:
    """(inverse frequencies [h / 2], scale) of a layer whose window is `window` (traced int32 or
    None, `config.layer_windows`): `rope_frequencies`; for a local layer (a sliding window or a
    chunk: window != 0) with model.rope_local_theta set, that base unscaled (Gemma 3's local
    layers); for a global layer (window 0) with model.global_nope, zero frequencies: a rotation by
    nothing, which leaves q and k exactly as they are (Llama 4's NoPE layers); with
    model.rope_global_fraction < 1, a global layer's (window 0 or None) pairs past that fraction at
    frequency 0 (Gemma 4's proportional RoPE)."""
    freq, scale = rope_frequencies(cfg, h)
    if cfg.rope_global_fraction < 1.0:  # (Gemma 4's proportional RoPE: a global layer's pairs past the fraction
        # at frequency 0, unrotated)
        rotated = jnp.arange(h // 2) < int(cfg.rope_global_fraction * h) // 2
        freq = jnp.where(rotated | (False if window is None else window != 0), freq, 0.0)
    if window is None:
        return freq, scale
    local = window != 0
    if cfg.rope_local_theta is not None:
        half = h // 2
        theta = cfg.rope_local_theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
        freq, scale = jnp.where(local, theta, freq), jnp.where(local, 1.0, scale)
    if cfg.global_nope:
        freq, scale = jnp.where(local, freq, 0.0), jnp.where(local, scale, 1.0)
    return freq, scale


def rope_frequencies(cfg: ModelConfig, h: int) -> tuple:
    """(inverse frequencies [h / 2] float32, scale of q and k) of `model.rope_scaling` for heads of
    width h: theta^(-2i/h) as trained (none), or stretched for a longer context as transformers'
    `rope_type` of the same name computes them (llama3: Llama 3.1's by wavelength; yarn: by
    rotations over the original context, with the attention factor)."""
    half = h // 2
    inv_freq = cfg.rope_theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
    factor, original = cfg.rope_factor, cfg.rope_original_max_len
    if cfg.rope_scaling == RopeScaling.linear:
        return inv_freq / factor, 1.0
    if cfg.rope_scaling == RopeScaling.llama3:
        low, high = cfg.rope_low_freq_factor, cfg.rope_high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        scaled = jnp.where(wavelen > original / low, inv_freq / factor, inv_freq)
        smooth = (original / wavelen - low) / ((high - low) or 1.0)  # (equal factors, Llama 4 Scout's: no band)
        medium = (wavelen >= original / high) & (wavelen <= original / low)
        return jnp.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled), 1.0
    if cfg.rope_scaling == RopeScaling.yarn:
        def dim(rotations):  # the dimension whose wavelength makes this many rotations over `original`
            return h * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(cfg.rope_theta))

        lo, hi = dim(cfg.rope_beta_fast), dim(cfg.rope_beta_slow)
        if cfg.rope_truncate:  # (whole dimensions; gpt-oss's YaRN keeps the fractions)
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, h - 1)
        ramp = jnp.clip((jnp.arange(half, dtype=jnp.float32) - lo) / (hi - lo if hi > lo else 0.001), 0, 1)
        keep = 1 - ramp  # 1: extrapolate (the frequency as trained), 0: interpolate (divided by factor)
        scale = cfg.rope_attention_factor
        if scale is None:
            scale = yarn_mscale(factor)
            if cfg.rope_mscale and cfg.rope_mscale_all_dim:  # (DeepSeek's variant)
                scale = yarn_mscale(factor, cfg.rope_mscale) / yarn_mscale(factor, cfg.rope_mscale_all_dim)
        return inv_freq / factor * (1 - keep) + inv_freq * keep, scale
    return inv_freq, 1.0


def yarn_mscale(factor: float, m: float = 1.0) -> float:
    """YaRN's attention scale for a context `factor` times longer: 0.1 m ln(factor) + 1 (1 unstretched)."""
    return 0.1 * m * math.log(factor) + 1.0 if factor > 1 else 1.0


def rope(x: jax.Array, positions: jax.Array, theta, scale: float = 1.0) -> jax.Array:
    """Rotary position embedding: rotate pairs (x[i], x[i + h/2]) by position * theta^(-2i/h).

    x: [batch, seq, *other, head_dim] (e.g. q and k stacked as [b, t, 2, n, h], so both are
    rotated in one fused op); positions: [seq] or [batch, seq] (integers); theta: the base, or
    the inverse frequencies [h / 2] (`rope_frequencies`); scale: multiplies the result. The dot
    product of two rotated vectors depends only on the difference of their positions.
    """
    h = x.shape[-1]
    half = h // 2
    inv_freq = theta ** (-jnp.arange(half, dtype=jnp.float32) / half) if jnp.ndim(theta) == 0 else theta
    angles = positions.astype(jnp.float32)[..., None] * inv_freq  # [..., seq, half]
    cos = jnp.concatenate([jnp.cos(angles)] * 2, axis=-1)
    sin = jnp.concatenate([-jnp.sin(angles), jnp.sin(angles)], axis=-1)  # sign of the rotation
    if not isinstance(scale, float) or scale != 1.0:  # (a traced scale: `layer_rope`)
        cos, sin = cos * scale, sin * scale
    other = (1,) * (x.ndim - 3)  # the axes between seq and head_dim (e.g. q/k and heads)
    cos = cos.reshape(cos.shape[:-1] + other + (h,))
    sin = sin.reshape(sin.shape[:-1] + other + (h,))
    x32 = x.astype(jnp.float32)
    swapped = jnp.concatenate([x32[..., half:], x32[..., :half]], axis=-1)  # (x2, x1)
    return (x32 * cos + swapped * sin).astype(x.dtype)


def pick_rows(a: jax.Array, index: jax.Array) -> jax.Array:
    """a[r, index[r]] for each row r (a: [b, n, ...]; a select and a sum, which keeps the rows'
    sharding where a gather would not)."""
    hit = jnp.arange(a.shape[1])[None] == index[:, None]
    return jnp.sum(jnp.where(hit.reshape(hit.shape + (1,) * (a.ndim - 2)), a, 0), axis=1)


def rms(a: jax.Array) -> jax.Array:
    """The root mean square of every element, a float32 scalar (for statistics)."""
    return jnp.sqrt(jnp.mean(jnp.square(a.astype(jnp.float32))))
