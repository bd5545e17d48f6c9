"""The attention unit: causal multi-head attention with fused QKV and RoPE.

Shapes (D = d_model, N heads, H = head_dim; the block stacks a layer axis in front):

    w_qkv  [D, 3, N, H]   fused query/key/value projection (b_qkv [3, N, H] with model.bias)
    w_o    [N, H, D]      output projection (residual; b_o [D] with model.bias)

Grouped-query attention (`model.num_kv_heads` = K < N, `GroupedAttention`): K key/value heads,
each shared by G = N / K consecutive query heads (query head n reads key/value head n // G, the
Hugging Face convention), so the projections split:

    w_q    [D, N, H]      query projection (b_q [N, H])
    w_kv   [D, 2, K, H]   key/value projection (b_kv [2, K, H])
    w_o    [N, H, D]      as above

The xla path computes the groups without copying keys or values ([b, K, G, t, H] queries
against [b, K, t, H] keys); cuDNN takes K heads natively; splash gets its keys and values
repeated to N heads (the kernel of `make_splash_mha` wants one per query head). The KV cache
holds K heads. Under tensor parallelism K heads that the `model` axis does not divide are
replicated on it and repeated for the local query heads (`local_kv`).

Options of the same unit: Q/K/V-only biases (`model.qkv_bias`, Qwen2), learned QK-norm scales
q_norm / k_norm [H] (`model.qk_norm_scale`, Qwen3), RoPE scalings (`layers.rope_frequencies`;
local layers' own base, `layers.layer_rope`), the scores' scale (`model.query_pre_attn_scalar`),
per-layer sliding windows or chunks (`model.sliding_window`, `model.attention_chunk`: `window_mask`, xla
backend only), NoPE global layers (`model.global_nope`: no rotation and no QK-norm) and their attention
temperature (`model.attn_temperature`, `nope_temperature`).

The residual stream arrives as [stream, embed] (batch x seq flattened, sharded like the batch,
and with model.collective_matmul over the tensor axis too: its projections then gather and
reduce-scatter it, `collective`). Backends (`model.attention`, resolved by `attention_backend`):

- `xla`: einsum + masked float32 softmax, head-major ([batch, heads, seq, head_dim], so its
  matmuls are plain batched GEMMs: measurably faster on CPU than the [b, t, n, h] layout), in
  causal query blocks (`model.attention_block`). Runs everywhere.
- `cudnn`: cuDNN's fused (flash) attention through `jax.nn.dot_product_attention`, on
  [batch, seq, heads, head_dim]; NVIDIA GPUs, bfloat16/float16 compute only. The T x T score
  matrix is never materialised.
- `tokamax`: tokamax's flash attention kernels written in Mosaic GPU (`kernels.tokamax_attention`;
  the `gpu-kernels` extra), on [batch, seq, heads, head_dim] like cudnn; NVIDIA GPUs (Hopper's
  kernels, Ampere's and Blackwell's too), 16-bit compute. Not picked by `auto` until a GPU has
  timed it against cudnn (benchmarks/attention_kernels.py).
- `splash`: Pallas splash attention (`jax.experimental.pallas.ops.tpu.splash_attention`), the
  block-sparse flash attention kernels of TPUs, head-major; causal and document masks are
  skipped block by block. TPU only (its Pallas interpret mode runs the same kernels anywhere,
  slowly: what the CPU tests use); the sequence length must be a multiple of 128.
- `auto`: `cudnn` on NVIDIA GPUs with a 16-bit compute dtype, `splash` on TPUs, else `xla`
  (and `xla` whenever attention dropout is on: the fused kernels have none).

`self_attention` is the one attention of the model: over full sequences (training,
evaluation, and the KV-cache prefill, whose keys and values then start the cache) by the
chosen backend, or, for decode steps, writing the new keys and values into the cache and
attending over everything cached (the xla path, its mask built from the query and key
positions: one query per row attends over the whole cache, where fused kernels gain nothing).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import AttentionImpl, ModelConfig, head_dim, kv_heads, rotary_dims
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import lora
from spmdgpt.model.collective import matmul_out, matmuls_in
from spmdgpt.model.context import context_attention, flatten, from_context_order, unflatten
from spmdgpt.model.fp8 import INPUTS, history_info, sites
from spmdgpt.model.info import matrix, out_init, residual_std, vector
from spmdgpt.model.kernels import (
    SPLASH_BLOCKS,
    TOKEN_MAJOR,
    attention_backend,
    attention_dropout,
    causal_mask,
    document_mask,
    fused_causal_attention,
    local_kv,
    repeat_kv,
    splash_causal_attention,
    window_mask,
)
from spmdgpt.model.layers import dropout, layer_rope, norm_scale, rms_normalize, rope, scale_init
from spmdgpt.model.parametrization import attention_factor


class UnitInputs(NamedTuple):
    """What an attention unit reads besides its parameters and the residual stream x."""

    positions: jax.Array  # RoPE positions, [seq] or [batch, seq] (-1: a cached pass's padding)
    batch: int  # sequences in x ([batch * seq, d])
    segment_ids: Optional[jax.Array] = None  # [batch, seq] document numbers: attention stays inside each
    cache: Optional["LayerCache"] = None  # cached passes: this layer's view of the KV cache
    key: Optional[jax.Array] = None  # training: attention dropout's key
    window: Optional[jax.Array] = None  # this layer's window (`layer_windows`: None or 0 global, < 0 a chunk)
    keep_kv: bool = False  # full sequences: return this layer's keys and values (model.kv_shared_layers' sources)
    shared: Optional[tuple] = None  # full sequences, a KV-shared layer: the (k, v) it attends over (`shared_kv`)
    compress: Optional[jax.Array] = None  # DeepSeek-V4: this layer's kind (`csa.layer_kinds`; None: one kind)


class Attention(NamedTuple):
    """Multi-head attention's parameters (fused q/k/v)."""

    # LoRA's targets in these parameters: {Hugging Face name: (field, q/k/v index or None)}
    LORA = {"q": ("w_qkv", 0), "k": ("w_qkv", 1), "v": ("w_qkv", 2), "o": ("w_o", None)}

    w_qkv: jax.Array
    b_qkv: Optional[jax.Array]  # (model.bias or model.qkv_bias)
    w_o: jax.Array
    b_o: Optional[jax.Array]  # (model.bias)
    q_norm: Optional[jax.Array] = None  # [H] the QK-norm's learned scales (model.qk_norm_scale)
    k_norm: Optional[jax.Array] = None
    fp8_amax: Optional[jax.Array] = None  # [2 (qkv, o), 3, history]: FP8's delayed scaling (`model.fp8`)
    w_gate: Optional[jax.Array] = None  # [D, N, H] the output gate's projection (model.attention_gate)
    b_gate: Optional[jax.Array] = None  # [N, H] (with the query's bias)
    sinks: Optional[jax.Array] = None  # [N] each head's sink logit (model.attention_sinks)


class GroupedAttention(NamedTuple):
    """Grouped-query attention's parameters (K key/value heads)."""

    LORA = {"q": ("w_q", None), "k": ("w_kv", 0), "v": ("w_kv", 1), "o": ("w_o", None)}

    w_q: jax.Array
    b_q: Optional[jax.Array]
    w_kv: jax.Array
    b_kv: Optional[jax.Array]
    w_o: jax.Array
    b_o: Optional[jax.Array]
    q_norm: Optional[jax.Array] = None
    k_norm: Optional[jax.Array] = None
    fp8_amax: Optional[jax.Array] = None  # [3 (q, kv, o), 3, history]
    w_gate: Optional[jax.Array] = None
    b_gate: Optional[jax.Array] = None
    sinks: Optional[jax.Array] = None


class SharedKvAttention(NamedTuple):
    """A layer that reads an earlier layer's keys and values (model.kv_shared_layers): its queries and
    output projection only (`shared_kv`)."""

    LORA = {"q": ("w_q", None), "o": ("w_o", None)}

    w_q: jax.Array
    b_q: Optional[jax.Array]
    w_o: jax.Array
    b_o: Optional[jax.Array]
    q_norm: Optional[jax.Array] = None
    sinks: Optional[jax.Array] = None


def shared_kv_info(cfg: ModelConfig) -> SharedKvAttention:
    """One KV-shared layer's parameters: grouped attention's without the key/value projection."""
    g = grouped_attention_info(cfg)
    return SharedKvAttention(g.w_q, g.b_q, g.w_o, g.b_o, g.q_norm, g.sinks)


def shared_kv(cfg: ModelConfig, rules: Rules, p: SharedKvAttention, x: jax.Array, u: UnitInputs):
    """A KV-shared layer's attention (`self_attention`'s contract): its queries (the QK-norm's query
    half, RoPE) over the keys and values of the last earlier layer of its kind: on full sequences
    u.shared (that layer's, in the backend's layout), on a cached pass u.cache.arrays (that layer's
    cache, this pass's entries in it) under u.cache.mask. It writes no cache."""
    positions, batch, cache = u.positions, u.batch, u.cache
    if cache is not None:
        if cache.mask is None or cache.paged is not None:
            raise ValueError("model.kv_shared_layers: a cached pass reads the source layer's cache under a mask "
                             "(the inference engine's gather path)")
        q = _queries(cfg, rules, p, x, positions, batch, True, u.window)
        o = dot_product_attention(q, cache.arrays["k"], cache.arrays["v"], cache.mask, rules, sinks=p.sinks)
        return output_projection(rules, p, o), {}, {}
    backend = sequence_backend(cfg, rules)
    head_major = backend not in TOKEN_MAJOR
    q = _queries(cfg, rules, p, x, positions, batch, head_major, u.window)
    o = sequence_attention(cfg, rules, backend, q, *u.shared, u, p.sinks)
    return output_projection(rules, p, o, head_major), None, {}


def _queries(cfg: ModelConfig, rules: Rules, p, x: jax.Array, positions: jax.Array, batch: int, head_major: bool,
             window=None) -> jax.Array:
    """`grouped_qkv`'s queries alone: [b, n, t, h] (head_major) or [b, t, n, h]."""
    logical = ("heads", "head_dim")
    q, = matmuls_in(rules, x, ("td,dnh->tnh", lora.weight(rules, p.w_q, x.dtype, ("embed", *logical)),
                               ("embed", *logical), logical))
    if p.b_q is not None:
        q = q + rules.gather(p.b_q.astype(x.dtype), logical)
    q = unflatten(rules, q, batch, *logical)
    if cfg.qk_norm:
        scale = None if p.q_norm is None else norm_scale(cfg, rules.gather(p.q_norm, ("head_dim",)))
        q = rope_layers_only(cfg, window, rms_normalize(q, cfg.norm_eps, scale), q)
    q = nope_temperature(cfg, query_scale(cfg, rotate(cfg, q, positions, window)), positions, window)
    return jnp.transpose(q, (0, 2, 1, 3)) if head_major else q


def _shared_info(cfg: ModelConfig, fp8_sites: int) -> dict:
    D, N, H = cfg.d_model, cfg.num_heads, head_dim(cfg)
    return dict(
        w_o=matrix((N, H, D), ("heads", "head_dim", "embed"), ("heads", "head_dim"), ("embed",), residual_std(cfg),
                   out_init(cfg)),
        b_o=vector((D,), ("embed",)) if cfg.bias else None,
        **qk_norm_info(cfg),
        fp8_amax=history_info(cfg, fp8_sites),
        w_gate=matrix((D, N, H), ("embed", "heads", "head_dim"), ("embed",), ("heads", "head_dim"), cfg.init_std)
        if cfg.attention_gate else None,
        b_gate=vector((N, H), ("heads", "head_dim")) if cfg.attention_gate and (cfg.bias or cfg.qkv_bias) else None,
        sinks=vector((N,), ("heads",)) if cfg.attention_sinks else None,
    )


def qk_norm_info(cfg: ModelConfig) -> dict:
    """The QK-norm's learned scales: q_norm and k_norm [H] (model.qk_norm_scale), or [N, H] and
    [K, H] with model.qk_norm_whole (a scale per head and dimension: OLMo's norm of the whole
    projection); none without model.qk_norm_scale."""
    H, N, K = head_dim(cfg), cfg.num_heads, kv_heads(cfg)
    if not cfg.qk_norm_scale:
        return dict(q_norm=None, k_norm=None)
    if not cfg.qk_norm_whole:
        return dict(q_norm=vector((H,), ("head_dim",), scale_init(cfg)), k_norm=vector((H,), ("head_dim",),
                                                                                          scale_init(cfg)))
    k_axis = "kv_heads" if K != N else "heads"
    return dict(q_norm=vector((N, H), ("heads", "head_dim"), scale_init(cfg)),
                k_norm=vector((K, H), (k_axis, "head_dim"), scale_init(cfg)))


def attention_info(cfg: ModelConfig) -> Attention:
    """One layer's multi-head attention parameters (fused q/k/v)."""
    D, N, H = cfg.d_model, cfg.num_heads, head_dim(cfg)
    return Attention(
        w_qkv=matrix((D, 3, N, H), ("embed", "qkv", "heads", "head_dim"), ("embed",), ("heads", "head_dim"),
                     cfg.init_std),
        b_qkv=vector((3, N, H), ("qkv", "heads", "head_dim")) if cfg.bias or cfg.qkv_bias else None,
        **_shared_info(cfg, 2),
    )


def grouped_attention_info(cfg: ModelConfig) -> GroupedAttention:
    """One layer's grouped-query attention parameters (model.num_kv_heads < model.num_heads)."""
    D, N, H, K = cfg.d_model, cfg.num_heads, head_dim(cfg), kv_heads(cfg)
    qkv_bias = cfg.bias or cfg.qkv_bias
    c = 1 if cfg.global_k_eq_v else 2  # (values from keys, `config.stack_config`'s G layers: w_kv holds the keys)
    return GroupedAttention(
        w_q=matrix((D, N, H), ("embed", "heads", "head_dim"), ("embed",), ("heads", "head_dim"), cfg.init_std),
        b_q=vector((N, H), ("heads", "head_dim")) if qkv_bias else None,
        w_kv=matrix((D, c, K, H), ("embed", "qkv", "kv_heads", "head_dim"), ("embed",), ("kv_heads", "head_dim"),
                    cfg.init_std),
        b_kv=vector((c, K, H), ("qkv", "kv_heads", "head_dim")) if qkv_bias else None,
        **_shared_info(cfg, 3),
    )


def dot_product_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, rules: Rules,
    drop: float = 0.0, key: Optional[jax.Array] = None, sinks: Optional[jax.Array] = None,
) -> jax.Array:
    """q: [b, n, q, h], k/v: [b, n, k, h], mask: [q, k] or [b, q, k] -> [b, n, q, h]. With a
    key, dropout of rate `drop` on the attention probabilities. k/v with fewer heads (K, a
    divisor of n): grouped-query attention (`grouped_attention`, or repeated, `local_kv`).
    sinks [n]: each head's sink logit in the softmax's denominator (`probabilities`)."""
    k, v = local_kv(k, v, q.shape[1], rules)
    if k.shape[1] != q.shape[1]:
        return grouped_attention(q, k, v, mask, rules, drop, key, sinks)
    scale = q.shape[-1] ** -0.5
    scores = jnp.einsum(
        "bnqh,bnkh->bnqk",
        q,
        k,
        out_sharding=rules.spec("batch", "heads", None, None),
        preferred_element_type=jnp.float32,
    )
    probs = probabilities(scores, mask[:, None] if mask.ndim == 3 else mask, scale, drop, key, v.dtype,
                          None if sinks is None else sinks[None, :, None, None])
    return jnp.einsum(
        "bnqk,bnkh->bnqh", probs, v, out_sharding=rules.spec("batch", "heads", "seq", "head_dim")
    )


def probabilities(scores: jax.Array, mask: jax.Array, scale: float, drop: float, key: Optional[jax.Array], dtype,
                  sinks: Optional[jax.Array] = None):
    """Attention probabilities from float32 scores: scaled, masked (mask broadcast to the scores),
    softmax over keys, dropout of rate `drop` with a key, cast to `dtype`. sinks (broadcast to the
    scores' shape but the keys' axis): one more logit in each softmax, of no key, whose weight is
    dropped: exp(s_j) / (exp(sink) + sum_i exp(s_i)), so a row's weights sum to less than 1
    (gpt-oss's attention sinks)."""
    scores = jnp.where(mask, scores * scale, jnp.finfo(jnp.float32).min)
    if sinks is None:
        return dropout(jax.nn.softmax(scores, axis=-1), drop, key).astype(dtype)
    sinks = sinks.astype(jnp.float32)
    top = jax.lax.stop_gradient(jnp.maximum(jnp.max(scores, axis=-1, keepdims=True), sinks))
    e = jnp.exp(scores - top)
    probs = e / (jnp.sum(e, axis=-1, keepdims=True) + jnp.exp(sinks - top))
    return dropout(probs, drop, key).astype(dtype)


def grouped_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, rules: Rules,
    drop: float = 0.0, key: Optional[jax.Array] = None, sinks: Optional[jax.Array] = None,
) -> jax.Array:
    """`dot_product_attention` with K key/value heads for n query heads: q [b, n, q, h] is viewed
    as [b, K, n / K, q, h] (query head i reads key/value head i // (n / K)) and each group attends
    over its one key/value head, which is never repeated in memory."""
    b, n, tq, h = q.shape
    nk = k.shape[1]
    q = jnp.reshape(q, (b, nk, n // nk, tq, h), out_sharding=rules.spec("batch", "kv_heads", None, "seq", "head_dim"))
    scores = jnp.einsum("bkgqh,bkth->bkgqt", q, k, out_sharding=rules.spec("batch", "kv_heads", None, None, None),
                        preferred_element_type=jnp.float32)
    if sinks is not None:  # [n] -> [1, K, n / K, 1, 1], as the queries' heads
        sinks = jnp.reshape(sinks, (nk, n // nk), out_sharding=rules.spec("kv_heads", None))[None, :, :, None, None]
    probs = probabilities(scores, mask[:, None, None] if mask.ndim == 3 else mask, h ** -0.5, drop, key, v.dtype,
                          sinks)
    o = jnp.einsum("bkgqt,bkth->bkgqh", probs, v, out_sharding=rules.spec("batch", "kv_heads", None, "seq", "head_dim"))
    return jnp.reshape(o, (b, n, tq, h), out_sharding=rules.spec("batch", "heads", "seq", "head_dim"))


def causal_blocks(t: int, block: int, segment_ids: Optional[jax.Array] = None, window=None):
    """Causal attention over t positions cut into query blocks of `block` (one block of all t when
    block is not a proper divisor of t): for each, (its query rows, the end of its keys [0, end),
    its mask [queries, keys], or [b, queries, keys] with segment_ids). Key blocks above the
    diagonal are left out. window: a sliding window (`window_mask`) too."""
    idx = jnp.arange(t, dtype=jnp.int32)
    if block <= 0 or block >= t or t % block:
        block = t
    for i in range(t // block):
        rows, end = slice(i * block, (i + 1) * block), (i + 1) * block
        mask = causal_mask(idx[rows], idx[:end])
        if window is not None:
            mask = mask & window_mask(idx[rows], idx[:end], window)
        if segment_ids is not None:
            mask = mask[None] & document_mask(segment_ids, rows, slice(0, end))
        yield rows, end, mask


def blocked_causal_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, block: int, rules: Rules,
    segment_ids: Optional[jax.Array] = None, drop: float = 0.0, key: Optional[jax.Array] = None, window=None,
    sinks: Optional[jax.Array] = None,
) -> jax.Array:
    """Causal self-attention computed in query blocks; block i attends to keys [0, (i+1)*block).

    Key blocks above the diagonal are never computed (about half the work for many blocks);
    the result equals `dot_product_attention` with the full causal mask. With segment_ids
    [b, t] (document numbers), a query also attends only to keys of its own document. With a
    key, attention dropout of rate `drop` (block i's mask from fold_in(key, i)). window: a sliding
    window (`window_mask`; its key blocks are computed and masked, not skipped). sinks [n]: the
    heads' sink logits (`probabilities`).
    """
    outs = []
    for i, (rows, end, mask) in enumerate(causal_blocks(q.shape[2], block, segment_ids, window)):
        block_key = None if key is None else jax.random.fold_in(key, i)
        outs.append(dot_product_attention(q[:, :, rows], k[:, :, :end], v[:, :, :end], mask, rules, drop, block_key,
                                          sinks))
    return outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=2)


def fused_qkv(
    cfg: ModelConfig, rules: Rules, p: Attention, x: jax.Array, positions: jax.Array, batch: int,
    head_major: bool = True, window=None,
):
    """Multi-head attention's projection (`Attention`): x [stream, d] -> q, k, v with RoPE applied
    to q and k: [batch, n, seq, h] (head_major, the xla backend's layout) or [batch, seq, n, h]
    (the fused kernels' layout). window: the layer's sliding window (its RoPE, `layers.layer_rope`);
    q scaled for model.query_pre_attn_scalar (`query_scale`)."""
    dt = x.dtype
    logical = ("qkv", "heads", "head_dim")
    w = lora.weight(rules, p.w_qkv, dt, ("embed", *logical))
    qkv, = matmuls_in(rules, x, ("td,dcnh->tcnh", w, ("embed", *logical), logical), history=sites(p.fp8_amax, INPUTS))
    if p.b_qkv is not None:
        qkv = qkv + rules.gather(p.b_qkv.astype(dt), ("qkv", "heads", "head_dim"))
    qkv = unflatten(rules, qkv, batch, "qkv", "heads", "head_dim")  # [b, t, 3, n, h]
    qk = qkv[:, :, :2]
    if cfg.qk_norm_whole:  # (OLMo: over all of a token's heads, a scale per head and dimension)
        scale = norm_scale(cfg, rules.gather(jnp.stack([p.q_norm, p.k_norm]), ("qkv", "heads", "head_dim")))
        qk = rms_normalize(qk, cfg.norm_eps, scale, axes=(-2, -1))
    elif cfg.qk_norm:  # unit-RMS queries and keys per head (times their learned scales), before the rotation
        scale = (
            None
            if p.q_norm is None
            else norm_scale(cfg, rules.gather(jnp.stack([p.q_norm, p.k_norm])[:, None], ("qkv", None, "head_dim")))
        )
        qk = rope_layers_only(cfg, window, rms_normalize(qk, cfg.norm_eps, scale), qk)
    qk = rotate(cfg, qk, positions, window)  # q and k rotated in one op
    q, k = nope_temperature(cfg, query_scale(cfg, qk[:, :, 0]), positions, window), qk[:, :, 1]
    v = value_norm(cfg, qkv[:, :, 2])
    if not head_major:
        return q, k, v
    return tuple(jnp.transpose(a, (0, 2, 1, 3)) for a in (q, k, v))


def value_norm(cfg: ModelConfig, v: jax.Array) -> jax.Array:
    """v [b, t, k, h] RMS-normalised per head without a scale (model.v_norm, Gemma 4), else v."""
    return rms_normalize(v, cfg.norm_eps) if cfg.v_norm else v


def rotate(cfg: ModelConfig, x: jax.Array, positions: jax.Array, window=None) -> jax.Array:
    """RoPE over the first `rotary_dims` of each head's last axis (all of it unless
    model.rope_fraction < 1, Qwen3.5's partial rotation), the rest passed through."""
    h = x.shape[-1]
    r = rotary_dims(cfg, h)
    if r == h:
        return rope(x, positions, *layer_rope(cfg, h, window))
    return jnp.concatenate([rope(x[..., :r], positions, *layer_rope(cfg, r, window)), x[..., r:]], axis=-1)


def rope_layers_only(cfg: ModelConfig, window, normed: jax.Array, raw: jax.Array) -> jax.Array:
    """The QK-norm's output (`normed`) on the layers that rotate: with model.global_nope, `raw` (q or
    k as projected) on a NoPE layer (window 0; Llama 4 norms only its RoPE layers' queries and keys)."""
    if not cfg.global_nope or window is None:
        return normed
    return jnp.where(window != 0, normed, raw)


def nope_temperature(cfg: ModelConfig, q: jax.Array, positions: jax.Array, window) -> jax.Array:
    """q [b, t, n, h] times Llama 4's attention temperature on a NoPE layer (window 0 under
    model.global_nope; model.attn_temperature > 0): each query's at its position p, 1 + attn_temperature
    x log1p(floor((p + 1) / attn_temperature_floor)), so that the scores sharpen as the context grows
    (1 up to the floor's first step, and at padding's position -1); q itself elsewhere."""
    if not cfg.attn_temperature or window is None:
        return q
    steps = jnp.floor((positions.astype(jnp.float32) + 1.0) / cfg.attn_temperature_floor)
    scale = jnp.where(window == 0, 1.0 + cfg.attn_temperature * jnp.log1p(steps), 1.0)
    return (q.astype(jnp.float32) * scale.reshape(scale.shape + (1, 1))).astype(q.dtype)


def output_gate(cfg: ModelConfig, rules: Rules, p, x: jax.Array, batch: int, head_major: bool) -> Optional[jax.Array]:
    """sigmoid(x w_gate (+ b_gate)) per head and dimension ([b, n, t, h] head-major, else [b, t, n, h]),
    what the attention's output is multiplied by before the output projection (model.attention_gate);
    None without it."""
    if getattr(p, "w_gate", None) is None:
        return None
    logical = ("heads", "head_dim")
    w = rules.gather(p.w_gate.astype(x.dtype), ("embed", *logical))
    gate, = matmuls_in(rules, x, ("td,dnh->tnh", w, ("embed", *logical), logical))
    if p.b_gate is not None:
        gate = gate + rules.gather(p.b_gate.astype(x.dtype), logical)
    gate = jax.nn.sigmoid(unflatten(rules, gate, batch, *logical).astype(jnp.float32)).astype(x.dtype)
    return jnp.transpose(gate, (0, 2, 1, 3)) if head_major else gate


def gated(o: jax.Array, gate: Optional[jax.Array]) -> jax.Array:
    return o if gate is None else o * gate


def query_scale(cfg: ModelConfig, q: jax.Array) -> jax.Array:
    """q scaled so that the backends' 1 / sqrt(head_dim) gives scores scaled by
    model.query_pre_attn_scalar^-0.5 (Gemma 3), times μP's sqrt(base head_dim / head_dim)
    (`parametrization.attention_factor`); q itself without either."""
    factor = attention_factor(cfg)
    if cfg.query_pre_attn_scalar is not None:
        factor *= (q.shape[-1] / cfg.query_pre_attn_scalar) ** 0.5
    return q if factor == 1.0 else q * jnp.asarray(factor, q.dtype)


def grouped_qkv(cfg: ModelConfig, rules: Rules, p: GroupedAttention, x: jax.Array, positions: jax.Array,
                batch: int, head_major: bool = True, window=None):
    """Grouped-query attention's projection (`GroupedAttention`): `fused_qkv`'s, q from w_q, k
    and v (K heads) from w_kv."""
    dt = x.dtype
    terms = (("td,dnh->tnh", p.w_q, p.b_q, ("heads", "head_dim")),
             ("td,dckh->tckh", p.w_kv, p.b_kv, ("qkv", "kv_heads", "head_dim")))
    ys = matmuls_in(rules, x, *((eq, lora.weight(rules, w, dt, ("embed", *logical)), ("embed", *logical), logical)
                                for eq, w, _, logical in terms), history=sites(p.fp8_amax, INPUTS))
    parts = []
    for y, (_, _, b, logical) in zip(ys, terms):
        if b is not None:
            y = y + rules.gather(b.astype(dt), logical)
        parts.append(unflatten(rules, y, batch, *logical))
    q, kv = parts  # [b, t, N, h], [b, t, 2, K, h] ([b, t, 1, K, h] with values from keys: model.global_k_eq_v)
    k, v = kv[:, :, 0], value_norm(cfg, kv[:, :, -1])
    if cfg.qk_norm_whole:  # (OLMo: over all of a token's heads, a scale per head and dimension)
        q, k = (rms_normalize(a, cfg.norm_eps, norm_scale(cfg, rules.gather(s, (heads, "head_dim"))), axes=(-2, -1))
                for a, s, heads in ((q, p.q_norm, "heads"), (k, p.k_norm, "kv_heads")))
    elif cfg.qk_norm:
        q, k = (rope_layers_only(cfg, window, rms_normalize(a, cfg.norm_eps, None if s is None else
                                                            norm_scale(cfg, rules.gather(s, ("head_dim",)))), a)
                for a, s in ((q, p.q_norm), (k, p.k_norm)))
    q, k = query_scale(cfg, rotate(cfg, q, positions, window)), rotate(cfg, k, positions, window)
    q = nope_temperature(cfg, q, positions, window)
    if not head_major:
        return q, k, v
    return tuple(jnp.transpose(a, (0, 2, 1, 3)) for a in (q, k, v))


def output_projection(rules: Rules, p: Attention, o: jax.Array, head_major: bool = True) -> jax.Array:
    """o: [b, n, q, h] (head_major) or [b, q, n, h] -> [stream, d] (a sum over heads: an
    all-reduce under tensor parallelism, or a reduce-scatter onto a split stream)."""
    if head_major:
        o = jnp.transpose(o, (0, 2, 1, 3))
    o = flatten(rules, o, "heads", "head_dim")
    w = lora.weight(rules, p.w_o, o.dtype, ("heads", "head_dim", "embed"))
    out = matmul_out(rules, "tnh,nhd->td", o, w, ("heads", "head_dim"), ("heads", "head_dim", "embed"),
                     history=sites(getattr(p, "fp8_amax", None), -1))
    if getattr(p, "b_o", None) is not None:
        out = out + rules.gather(p.b_o.astype(o.dtype), ("embed",))
    return out


class KVCache(NamedTuple):
    """What the attention unit caches, for every layer, for cached decoding at a static capacity."""

    layers: dict  # {name: [layers, batch, ..., capacity, ...]}: the unit's `cache` arrays, stacked
    pos: jax.Array  # [batch, capacity] int32: the position of the token in each slot, -1 = empty
    end: jax.Array  # int32 scalar: the next free slot (tokens written so far)


def kv_cache(cfg: ModelConfig, batch: int, capacity: int) -> dict:
    """What multi-head and grouped-query attention cache per layer (their units' `cache`):
    {"k", "v": ([batch, kv heads, capacity, head_dim], its logical axes)}."""
    grouped = kv_heads(cfg) != cfg.num_heads
    shape = (batch, kv_heads(cfg), capacity, head_dim(cfg))
    logical = ("batch", "kv_heads" if grouped else "heads", None, "head_dim")
    return {"k": (shape, logical), "v": (shape, logical)}


class LayerCache(NamedTuple):
    """One layer's view of the KV cache during a cached forward pass."""

    arrays: dict  # this layer's cached arrays ({"k", "v": [batch, kv heads, capacity, head_dim]})
    mask: Optional[jax.Array]  # [batch, queries, capacity]: causal_mask(query positions, slot
    #   positions); None in a prefill (the queries attend only to each other, by the backend)
    end: jax.Array  # int32 scalar: where this pass's keys and values go
    paged: Optional[Callable] = None  # the inference engine's paged-attention kernel for a decode step:
    #   (q, k, v [b, heads, 1, h]; q scaled) -> (o [b, heads, 1, h], the pool with k and v written), in place
    #   of `arrays` and `mask` (`engine.paged.Step`)


def self_attention(project, cfg: ModelConfig, rules: Rules, p, x: jax.Array, u: UnitInputs):
    """Causal self-attention with the unit's projection `project` (`fused_qkv`, `grouped_qkv`):
    x [batch * seq, d] -> ([batch * seq, d], this layer's updated cache {"k", "v"} or None, no
    auxiliary outputs: {}). u.key (training): attention dropout (`model.attention_dropout`; the
    xla backend only, which `attention_backend` ensures). u.window: this layer's sliding window
    (`window_mask`; None or 0: global), for full sequences (a decode step's cache.mask has it).

    Full sequences (no cache, or a prefill: a cache with mask None): by the backend
    `model.attention` resolves to on the default device's platform; positions (RoPE) [seq] or
    [batch, seq]; segment_ids [batch, seq], when given, keep attention inside each document (a
    prefill's left padding is a document of its own). A prefill's keys and values are then
    written at cache.end. Decode (a cache with a mask): x's keys and values are written at
    cache.end and x's queries attend over the whole cache under cache.mask. The one branch
    point for backends: a new backend is a new case here."""
    positions, batch, cache = u.positions, u.batch, u.cache
    if cache is not None and cache.mask is not None:
        q, k, v = project(cfg, rules, p, x, positions, batch, window=u.window)  # [b, n, t, h]
        if cache.paged is not None:  # the keys and values go into the engine's pages, a kernel attends
            o, kv = cache.paged(q * jnp.asarray(q.shape[-1] ** -0.5, q.dtype), k, v)
        else:
            kv = write_cache(cache, 2, k=k, v=v)
            o = dot_product_attention(q, kv["k"], kv["v"], cache.mask, rules, sinks=p.sinks)
        return output_projection(rules, p, gated(o, output_gate(cfg, rules, p, x, batch, True))), kv, {}
    backend = sequence_backend(cfg, rules)
    head_major = backend not in TOKEN_MAJOR
    q, k, v = project(cfg, rules, p, x, positions, batch, head_major, window=u.window)
    o = sequence_attention(cfg, rules, backend, q, k, v, u, p.sinks)
    kv = {"k": k, "v": v} if u.keep_kv and cache is None else None  # (the KV-shared layers' source, `shared_kv`)
    if cache is not None:  # prefill: these keys and values start the cache (head-major)
        if not head_major:
            k, v = (jnp.transpose(a, (0, 2, 1, 3)) for a in (k, v))
        kv = write_cache(cache, 2, k=k, v=v)
    return output_projection(rules, p, gated(o, output_gate(cfg, rules, p, x, batch, head_major)), head_major), kv, {}


def sequence_backend(cfg: ModelConfig, rules: Rules) -> Optional[AttentionImpl]:
    """The backend of a pass over full sequences: None when they are split over a context ring
    (`context_attention`, head-major), else `model.attention` resolved on the default device's
    platform (xla inside a pipeline's vmap over stages, where the fused kernels' shard_map does not
    nest yet). q, k and v are head-major for every backend but cudnn and tokamax (`TOKEN_MAJOR`)."""
    if rules.context_size() > 1:
        return None
    return attention_backend(cfg) if rules.stage_size() == 1 else AttentionImpl.xla


def sequence_attention(cfg: ModelConfig, rules: Rules, backend: Optional[AttentionImpl], q: jax.Array, k: jax.Array,
                       v: jax.Array, u: UnitInputs, sinks: Optional[jax.Array] = None) -> jax.Array:
    """Causal attention over full sequences by `backend` (`sequence_backend`): q, k, v in its
    layout -> o in the same layout, scores scaled by 1 / sqrt(q's head width) (a unit with another
    scale scales q). Values narrower than the queries and keys (MLA's) are zero-padded to their
    width for the fused kernels, which take one head width, and the output cut back. sinks [n]:
    the heads' sink logits (the xla path's; validation keeps them off the others)."""
    if backend is None:  # sequences split over a context ring (training, evaluation)
        return context_attention(cfg, rules, q, k, v, u.segment_ids, u.window)
    width = v.shape[-1]
    if backend != AttentionImpl.xla and width < q.shape[-1]:
        v = jnp.pad(v, ((0, 0),) * 3 + ((0, q.shape[-1] - width),))
    if backend in TOKEN_MAJOR:
        o = fused_causal_attention(q, k, v, rules, backend.value, u.segment_ids)
    elif backend == AttentionImpl.splash and q.shape[2] % SPLASH_BLOCKS[-1] == 0:
        # (other lengths, which validation refuses for training, e.g. a prompt: the xla path)
        o = splash_causal_attention(q, k, v, rules, u.segment_ids)
    else:
        o = blocked_causal_attention(q, k, v, cfg.attention_block, rules, u.segment_ids,
                                     attention_dropout(cfg), u.key, u.window, sinks)
    return o[..., :width]


def write_cache(cache: LayerCache, axis: int, **arrays: jax.Array) -> dict:
    """The layer's cache with `arrays` (by the cache's names) written at cache.end along their
    positions' `axis` (keys and values [b, kv heads, t, h]: 2; MLA's latents [b, t, R]: 1)."""
    return {name: jax.lax.dynamic_update_slice_in_dim(cache.arrays[name], a.astype(cache.arrays[name].dtype),
                                                      cache.end, axis)
            for name, a in arrays.items()}


def attention_stats(project, cfg: ModelConfig, rules: Rules, p, x: jax.Array, u: UnitInputs) -> dict:
    """The largest attention logit (q.k / sqrt(head_dim) over the pairs the causal, document
    mask allows: the usual early sign of an unstable run), q and k recomputed by the unit's
    projection, the logits one block of model.attention_block queries at a time (never all
    [b, n, t, t] at once)."""
    positions, batch, segment_ids, window = u.positions, u.batch, u.segment_ids, u.window
    q, k, _ = project(cfg, rules, p, x, positions, batch, window=window)  # [b, n, t, hd]
    if rules.context_size() > 1:  # (whole sequences in their order on every device of the ring)
        q, k = (jnp.swapaxes(from_context_order(rules, jnp.swapaxes(a, 1, 2), None, None), 1, 2) for a in (q, k))
        segment_ids = None if segment_ids is None else from_context_order(rules, segment_ids)
        rules = rules.whole_sequences()
    k = repeat_kv(k, q.shape[1], rules)
    maxima = []
    for rows, end, mask in causal_blocks(q.shape[2], cfg.attention_block, segment_ids, window):
        scores = jnp.einsum("bnqh,bnkh->bnqk", q[:, :, rows], k[:, :, :end], preferred_element_type=jnp.float32,
                            out_sharding=rules.spec("batch", "heads", None, None)) * q.shape[-1] ** -0.5
        allowed = mask[None, None] if mask.ndim == 2 else mask[:, None]
        maxima.append(jnp.max(jnp.where(allowed, scores, -jnp.inf)))
    return {"max_attn_logit": jnp.max(jnp.stack(maxima))}


def attention_unit_functions(project):
    """(apply, stats) of the attention unit (`model.params.Unit`) whose q/k/v projection is `project`."""
    return partial(self_attention, project), partial(attention_stats, project)
