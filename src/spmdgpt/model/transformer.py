"""Decoder-only transformer: parameter types, per-parameter metadata, init, forward (the loss
is in `model.loss`).

Shapes (L layers, D = d_model, N heads, H = D / N, F = MLP width, V vocabulary):

    embed    [V, D]                      token embedding (also the unembedding when tied)
    blocks   Block, every leaf stacked   [L, ...], run by lax.scan
      w_qkv  [L, D, 3, N, H]             fused query/key/value projection
      w_o    [L, N, H, D]                attention output projection (residual)
      w_up   [L, D, F], w_gate [L, D, F] (SwiGLU only), w_down [L, F, D] (residual)
    ln_f     final norm
    unembed  [D, V]                      only when model.tie_embeddings=false

`param_info(cfg)` returns the same pytree with a `ParamInfo` at every leaf: logical axes (for
the sharding rules), init, whether weight decay applies, and which axes form the matrix
(`fan_in` x `fan_out`, named by logical axis; all other axes are a batch of matrices, e.g.
layers and q/k/v).
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import MlpType, ModelConfig, NormType, Remat, head_dim, mlp_hidden
from spmdgpt.model.attention import KVCache, LayerCache, causal_mask, self_attention
from spmdgpt.model.layers import Norm, dropout, dtype_of, mlp, mlp_inputs, norm
from spmdgpt.sharding import Rules

Array = jax.Array


class Block(NamedTuple):
    ln1: Norm
    w_qkv: Array
    b_qkv: Optional[Array]
    w_o: Array
    b_o: Optional[Array]
    ln2: Norm
    w_up: Array
    b_up: Optional[Array]
    w_gate: Optional[Array]
    w_down: Array
    b_down: Optional[Array]


class Params(NamedTuple):
    embed: Array
    blocks: Block
    ln_f: Norm
    unembed: Optional[Array]


@dataclasses.dataclass(frozen=True)
class ParamInfo:
    """Static metadata of one parameter (a pytree leaf, not a node)."""

    shape: tuple
    logical: tuple  # logical axis name per dimension
    init: str  # "normal" | "zeros" | "ones"
    std: float = 0.0  # for init == "normal"
    decay: bool = False  # decoupled weight decay applies (matrices, not norms/biases/embedding)
    fan_in: tuple = ()  # logical names of the matrix's input axes, e.g. ("embed",)
    fan_out: tuple = ()  # logical names of its output axes, e.g. ("heads", "head_dim")

    def __post_init__(self):
        missing = [a for a in self.fan_in + self.fan_out if a not in self.logical]
        if missing or len(self.shape) != len(self.logical):
            raise ValueError(f"ParamInfo{self.logical}: shape {self.shape}, fan axes {missing}")

    def axes(self, names: tuple) -> tuple:
        """Dimension indices of logical axis names (e.g. `axes(self.fan_in)`)."""
        return tuple(self.logical.index(n) for n in names)


def param_info(cfg: ModelConfig) -> Params:
    L, D, N, H, F, V = (
        cfg.num_layers,
        cfg.d_model,
        cfg.num_heads,
        head_dim(cfg),
        mlp_hidden(cfg),
        cfg.vocab_size,
    )
    std = cfg.init_std
    resid_std = std / math.sqrt(2 * L)  # GPT-2: residual projections scaled by depth
    # (model.zero_init_out: they start at zero, so every block starts as the identity)
    out_init = "zeros" if cfg.zero_init_out else "normal"

    def norm_info(stacked: bool) -> Norm:
        pre = (L,) if stacked else ()
        lg = ("layers", "embed") if stacked else ("embed",)
        bias = cfg.bias and cfg.norm == NormType.layernorm
        return Norm(
            ParamInfo(pre + (D,), lg, "ones"),
            ParamInfo(pre + (D,), lg, "zeros") if bias else None,
        )

    def bias(shape, logical):
        return ParamInfo((L,) + shape, ("layers",) + logical, "zeros") if cfg.bias else None

    def matrix(shape, logical, fan_in, fan_out, s=std, init="normal"):
        return ParamInfo((L,) + shape, ("layers",) + logical, init, s, True, fan_in, fan_out)

    blocks = Block(
        ln1=norm_info(True),
        w_qkv=matrix((D, 3, N, H), ("embed", "qkv", "heads", "head_dim"), ("embed",), ("heads", "head_dim")),
        b_qkv=bias((3, N, H), ("qkv", "heads", "head_dim")),
        w_o=matrix((N, H, D), ("heads", "head_dim", "embed"), ("heads", "head_dim"), ("embed",), resid_std, out_init),
        b_o=bias((D,), ("embed",)),
        ln2=norm_info(True),
        w_up=matrix((D, F), ("embed", "mlp"), ("embed",), ("mlp",)),
        b_up=bias((F,), ("mlp",)),
        w_gate=matrix((D, F), ("embed", "mlp"), ("embed",), ("mlp",)) if cfg.mlp == MlpType.swiglu else None,
        w_down=matrix((F, D), ("mlp", "embed"), ("mlp",), ("embed",), resid_std, out_init),
        b_down=bias((D,), ("embed",)),
    )
    return Params(
        embed=ParamInfo((V, D), ("vocab", "embed"), "normal", std, False, (), ()),
        blocks=blocks,
        ln_f=norm_info(False),
        unembed=None
        if cfg.tie_embeddings
        else ParamInfo((D, V), ("embed", "vocab"), "normal", std, False, ("embed",), ("vocab",)),
    )


def is_info(x) -> bool:
    """Leaf test for trees of ParamInfo (`is_leaf=is_info`)."""
    return isinstance(x, ParamInfo)


def param_shapes(cfg: ModelConfig) -> dict:
    """{parameter path: shape}: what a checkpoint of this model holds."""
    flat, _ = jax.tree_util.tree_flatten_with_path(param_info(cfg), is_leaf=is_info)
    return {jax.tree_util.keystr(path): i.shape for path, i in flat}


def num_params(cfg: ModelConfig) -> int:
    return sum(math.prod(i.shape) for i in jax.tree.leaves(param_info(cfg), is_leaf=is_info))


def param_shardings(cfg: ModelConfig, rules: Rules) -> Params:
    return jax.tree.map(lambda i: rules.param_sharding(i.logical), param_info(cfg), is_leaf=is_info)


def abstract_params(cfg: ModelConfig, rules: Rules) -> Params:
    """ShapeDtypeStructs with the parameters' shardings: a restore target that allocates nothing."""
    dtype = dtype_of(cfg.param_dtype)
    return jax.tree.map(lambda i: jax.ShapeDtypeStruct(i.shape, dtype, sharding=rules.param_sharding(i.logical)),
                        param_info(cfg), is_leaf=is_info)


def init_params(cfg: ModelConfig, key: Array, rules: Rules) -> Params:
    """Parameters created directly in their sharded layout (never whole on one device).

    Each leaf's key is folded from its path name, so adding a parameter leaves the others'
    initial values unchanged."""
    make = jax.jit(_init_leaves, static_argnums=(0, 1), out_shardings=param_shardings(cfg, rules))
    return make(param_info(cfg), dtype_of(cfg.param_dtype), key)


def _init_leaves(info: Params, dtype, key: Array) -> Params:
    """(A module-level function of hashable metadata, so that its compilation is cached across
    calls with the same model: the random-number code takes seconds to compile on a CPU.)"""
    def leaf(path, i: ParamInfo):
        k = jax.random.fold_in(key, zlib.crc32(jax.tree_util.keystr(path).encode()))
        if i.init == "normal":
            return (i.std * jax.random.normal(k, i.shape, jnp.float32)).astype(dtype)
        return (jnp.ones if i.init == "ones" else jnp.zeros)(i.shape, dtype)

    return jax.tree_util.tree_map_with_path(leaf, info, is_leaf=is_info)


# ----------------------------------------------------------------------------- forward


def block(cfg: ModelConfig, rules: Rules, p: Block, x: Array, positions: Array, batch: int,
          cache: Optional[LayerCache] = None, segment_ids: Optional[Array] = None, collect: bool = False,
          key: Optional[Array] = None):
    """One pre-norm block on the residual stream x: [tokens, embed] -> (x, this layer's
    updated (k, v) cache or None), or with collect=True (model statistics, spmdgpt.stats;
    full sequences only) -> (x, its statistics: a dict of float32 scalars). key (training
    only): dropout on the attention probabilities and on both branch outputs."""
    k_attn, k_a, k_m = (None,) * 3 if key is None else jax.random.split(key, 3)
    h = norm(cfg, rules, p.ln1, x)
    a, kv = self_attention(cfg, rules, p, h, positions, batch, cache, segment_ids, k_attn)
    a = dropout(a, cfg.dropout, k_a)
    x = x + a
    h2 = norm(cfg, rules, p.ln2, x)
    m = dropout(mlp(cfg, rules, p, h2), cfg.dropout, k_m)
    x = x + m
    if not collect:
        return x, kv
    return x, _block_stats(cfg, rules, p, h, h2, a, m, x, positions, batch, segment_ids)


def _rms(a: Array) -> Array:
    return jnp.sqrt(jnp.mean(jnp.square(a.astype(jnp.float32))))


def _block_stats(cfg, rules, p, h, h2, a, m, x, positions, batch, segment_ids) -> dict:
    """A block's statistics: the RMS of its residual stream output, attention output, MLP output
    and MLP pre-activation (the nonlinearity's input), and the largest
    attention logit (q.k / sqrt(head_dim) over the pairs the causal, document mask allows: the
    usual early sign of an unstable run). Recomputes q, k and that projection; the logits one
    block of model.attention_block queries at a time (never all [b, n, t, t] at once)."""
    from spmdgpt.model.attention import causal_blocks, qkv_projection

    q, k, _ = qkv_projection(cfg, rules, p, h, positions, batch)  # [b, n, t, hd]
    maxima = []
    for rows, end, mask in causal_blocks(q.shape[2], cfg.attention_block, segment_ids):
        scores = jnp.einsum("bnqh,bnkh->bnqk", q[:, :, rows], k[:, :, :end], preferred_element_type=jnp.float32,
                            out_sharding=rules.spec("batch", "heads", None, None)) * q.shape[-1] ** -0.5
        allowed = mask[None, None] if mask.ndim == 2 else mask[:, None]
        maxima.append(jnp.max(jnp.where(allowed, scores, -jnp.inf)))
    up, gate = mlp_inputs(cfg, rules, p, h2)  # the nonlinearity's input: SwiGLU's gate, else the up projection
    pre = up if gate is None else gate
    return {"resid_rms": _rms(x), "attn_rms": _rms(a), "mlp_rms": _rms(m), "mlp_pre_rms": _rms(pre),
            "max_attn_logit": jnp.max(jnp.stack(maxima))}


_REMAT_POLICIES = {
    Remat.full: None,
    Remat.dots: jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def embed(cfg: ModelConfig, rules: Rules, params: Params, tokens: Array) -> Array:
    """tokens [b, t] -> the residual stream [b * t, d], float32 whatever the compute dtype.

    The residual stream is 2-D (matmuls on [tokens, features] operands compile to much faster
    kernels on CPU than 3-D ones) and float32: each block's norm hands its matmuls the compute
    dtype and their outputs are added back in float32, as PyTorch's autocast does (a bfloat16
    sum of 2L branch outputs keeps 8 significant bits). A no-op for float32 compute."""
    table = rules.gather(params.embed.astype(jnp.float32), (None, "embed"))
    flat = jnp.reshape(tokens, (-1,), out_sharding=rules.spec("batch"))
    return table.at[flat].get(out_sharding=rules.spec("batch", "embed"))


def float32_matmul(eq: str, spec, x: Array, w: Array) -> Array:
    """einsum(eq, x, w) with a float32 result, whose backward pass casts the float32 cotangent
    to x's dtype first: with bfloat16 compute both backward matmuls stay bfloat16 GEMMs (as with
    autocast) instead of float32/TF32 ones. On an H100 the unembedding's two TF32 backward GEMMs
    took 7.9 ms of a 42 ms GPT-2 124M step (benchmarks/BENCHMARKS.md). Float32 inputs take the
    plain einsum (nothing to cast)."""
    def plain(x, w):
        return jnp.einsum(eq, x, w, out_sharding=spec, preferred_element_type=jnp.float32)

    if x.dtype == jnp.float32:
        return plain(x, w)
    matmul = jax.custom_vjp(plain)

    def fwd(x, w):
        return matmul(x, w), (x, w)

    def bwd(res, g):
        x, w = res
        _, vjp = jax.vjp(lambda x, w: jnp.einsum(eq, x, w, out_sharding=spec), x, w)
        return vjp(g.astype(x.dtype))

    matmul.defvjp(fwd, bwd)
    return matmul(x, w)


def softcap(cfg: ModelConfig, logits: Array) -> Array:
    """model.logit_softcap=c: c * tanh(logits / c), every logit inside (-c, c) (Gemma 2; the
    modded-nanogpt speedrun uses it too); c = 0: unchanged."""
    c = cfg.logit_softcap
    return logits if not c else c * jnp.tanh(logits / c)


def unembed(cfg: ModelConfig, rules: Rules, params: Params, x: Array) -> Array:
    """x [tokens, d] -> float32 logits [tokens, vocab] (vocab sharded by the `vocab` rule),
    soft-capped by model.logit_softcap."""
    out = rules.spec("batch", "vocab")
    if params.unembed is None:
        w = rules.gather(params.embed.astype(x.dtype), ("vocab", "embed"))
        return softcap(cfg, float32_matmul("td,vd->tv", out, x, w))
    w = rules.gather(params.unembed.astype(x.dtype), ("embed", "vocab"))
    return softcap(cfg, float32_matmul("td,dv->tv", out, x, w))


def _sequence_inputs(rules: Rules, t: int, positions: Optional[Array], segment_ids: Optional[Array]):
    """Full-sequence positions (default 0..t-1, else [b, t] laid out like the batch) and
    segment ids (int32, laid out like the batch, or None)."""
    if positions is None:
        positions = jnp.arange(t, dtype=jnp.int32)
    else:
        positions = jax.sharding.reshard(positions.astype(jnp.int32), rules.spec("batch", None))
    if segment_ids is not None:
        segment_ids = jax.sharding.reshard(segment_ids.astype(jnp.int32), rules.spec("batch", None))
    return positions, segment_ids


def hidden_states(
    cfg: ModelConfig, rules: Rules, params: Params, tokens: Array, positions: Optional[Array] = None,
    cache: Optional[KVCache] = None, segment_ids: Optional[Array] = None, prefill: bool = False,
    key: Optional[Array] = None,
) -> tuple[Array, Optional[KVCache]]:
    """Embedding + all blocks + final norm: tokens [b, t] -> ([b * t, d] in the compute dtype,
    the updated cache or None). See `forward`. key (training, full sequences): the dropout
    masks of model.dropout / attention_dropout (embedding: fold_in(key, L); layer i: fold_in(key, i))."""
    batch, t = tokens.shape
    if cache is None:
        positions, segment_ids = _sequence_inputs(rules, t, positions, segment_ids)
        x = embed(cfg, rules, params, tokens)
        layers = jnp.arange(cfg.num_layers, dtype=jnp.uint32)
        if key is not None:
            x = dropout(x, cfg.dropout, jax.random.fold_in(key, cfg.num_layers))

        def step(x, layer):
            p, i = layer
            k = None if key is None else jax.random.fold_in(key, i)
            return block(cfg, rules, p, x, positions, batch, segment_ids=segment_ids, key=k)

        if cfg.remat != Remat.none:
            step = jax.checkpoint(step, policy=_REMAT_POLICIES[cfg.remat])
        x, _ = jax.lax.scan(step, x, (params.blocks, layers), unroll=cfg.scan_unroll)
        return norm(cfg, rules, params.ln_f, x), None

    tokens = jax.sharding.reshard(tokens, rules.spec("batch", None))
    positions = jax.sharding.reshard(positions.astype(jnp.int32), rules.spec("batch", None))
    k_pos = jax.lax.dynamic_update_slice(cache.pos, positions, (0, cache.end))
    if prefill:  # the backend's causal attention over the prompt; padding (position -1) apart
        mask, segment_ids = None, (positions >= 0).astype(jnp.int32)
    else:
        mask = causal_mask(positions, k_pos)  # [b, t, capacity], the same for every layer
    x = embed(cfg, rules, params, tokens)

    def cached_step(x, layer):
        p, k, v = layer
        return block(cfg, rules, p, x, positions, batch, LayerCache(k, v, mask, cache.end), segment_ids)

    # A rolled layer scan: for one-token decode steps it measured 40% faster than the unrolled
    # one that training prefers (benchmarks/BENCHMARKS.md).
    x, (ks, vs) = jax.lax.scan(cached_step, x, (params.blocks, cache.k, cache.v))
    return norm(cfg, rules, params.ln_f, x), KVCache(ks, vs, k_pos, cache.end + t)


def activation_stats(cfg: ModelConfig, rules: Rules, params: Params, tokens: Array,
                     positions: Optional[Array] = None, segment_ids: Optional[Array] = None) -> dict:
    """Per-layer statistics of a forward pass over full sequences (`block` with collect=True):
    {name: float32 [layers]}. The same layers as `hidden_states`, unrolled or not."""
    batch, t = tokens.shape
    positions, segment_ids = _sequence_inputs(rules, t, positions, segment_ids)
    x = embed(cfg, rules, params, tokens)

    def step(x, p):
        return block(cfg, rules, p, x, positions, batch, segment_ids=segment_ids, collect=True)

    return jax.lax.scan(step, x, params.blocks)[1]


def forward(
    cfg: ModelConfig, rules: Rules, params: Params, tokens: Array, positions: Optional[Array] = None,
    cache: Optional[KVCache] = None, segment_ids: Optional[Array] = None, prefill: bool = False,
) -> tuple[Array, Optional[KVCache]]:
    """The model: tokens [b, t] (int) -> (float32 logits [b, t, vocab], updated cache or None).

    Training and evaluation: no cache; positions default to 0..t-1 (or [b, t], e.g. restarting
    at each document); segment_ids [b, t] (document numbers) keep attention inside documents.
    Prefill and decode: a KVCache (`attention.init_cache`) and positions [b, t] (-1 marks
    padding, never attended); the tokens' keys and values are written at cache.end and the
    returned cache has end + t. prefill=True (a prompt's first pass, into an empty cache; left
    padding only) runs attention by the `model.attention` backend over the prompt itself, as
    training does; otherwise the queries attend over the whole cache (decode). The same layers
    run every way; attention branches once, on the cache.
    """
    x, cache = hidden_states(cfg, rules, params, tokens, positions, cache, segment_ids, prefill)
    logits = unembed(cfg, rules, params, x)
    spec = rules.spec("batch", "seq", "vocab")
    return jnp.reshape(logits, tokens.shape + logits.shape[-1:], out_sharding=spec), cache


def unembedding_rows(cfg: ModelConfig, rules: Rules, params: Params, ids: Array, dtype) -> Array:
    """The unembedding vectors of token ids [tokens] -> [tokens, d] in `dtype` (rows of the tied
    embedding, or columns of the separate unembedding).

    The rows are gathered from the float32 table and cast afterwards, so that the backward
    pass's scatter-add into the table adds in float32 even with bfloat16 compute (the same
    values forward). A bfloat16 scatter-add has no hardware atomic on GPUs: on an H100 it made a
    GPT-2 124M step on real text (whose frequent tokens hit the same rows) 17% slower than on
    random tokens (benchmarks/BENCHMARKS.md, GPU)."""
    if params.unembed is None:
        table = rules.gather(params.embed.astype(jnp.float32), (None, "embed"))
    else:
        table = rules.gather(params.unembed.astype(jnp.float32), ("embed", None)).T
    return table.at[ids].get(out_sharding=rules.spec("batch", "embed")).astype(dtype)
