"""Decoder-only transformer: parameter types, init, forward (the loss is in `model.loss`).

Shapes (L layers, D = d_model, V vocabulary):

    embed    [V, D]                 token embedding (also the unembedding when tied)
    blocks   Block, every leaf stacked [L, ...], run by lax.scan (an MoE model: its MoE layers):
      ln1    Norm                   before attention
      attn   the attention unit's parameters (attention.Attention: w_qkv [L, D, 3, N, H], w_o;
             attention.GroupedAttention with model.num_kv_heads < N: w_q, w_kv [L, D, 2, K, H], w_o)
      ln2    Norm                   before the MLP
      mlp    the MLP unit's parameters (mlp.Mlp: w_up [L, D, F], w_gate, w_down)
    ln_f     final norm
    unembed  [D, V]                 only when model.tie_embeddings=false
    dense_blocks  Block with the dense MLP, stacked: an MoE model's dense layers (model.moe.
             first_dense_layers, interleave_step), else None

An MoE model with dense layers runs them as two scans (`scan_layers`): one over the first dense
layers, one over groups of (interleave_step - 1) dense layers and one MoE layer, so each kind of
layer is still one stacked array whatever the depth.

A block is made of units. A unit (`Unit`) is one kind of attention or MLP: its parameters (a
NamedTuple of one layer, described by `info` as a tree of `ParamInfo`), the function that
applies them, and its statistics; `block_units(cfg)` picks the block's two. Another attention
or MLP kind is another unit: its own module, its own subtree of `Block`, nothing else here.

`param_info(cfg)` returns the parameter pytree with a `ParamInfo` at every leaf: logical axes (for
the sharding rules), init, whether weight decay applies, and which axes form the matrix
(`fan_in` x `fan_out`, named by logical axis; all other axes are a batch of matrices, e.g.
layers and q/k/v).

The layer function returns the residual stream and a dict of per-layer float32 scalars, the
auxiliary channel: a unit's auxiliary losses (those its `losses(cfg)` weighs; the objective adds
weight x their mean over layers) and, on statistics passes, the model statistics.
"""

from __future__ import annotations

import math
import zlib
from functools import partial
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from spmdgpt.config import DType, ModelConfig, Remat, layer_windows, moe_layers
from spmdgpt.model.attention import (
    KVCache,
    LayerCache,
    attention_info,
    attention_stats,
    causal_mask,
    self_attention,
    window_mask,
)
from spmdgpt.model.context import flatten, from_context_order, sequence_inputs, to_context_order, unflatten
from spmdgpt.model.info import ParamInfo, by_name, is_info, stacked
from spmdgpt.model.layers import Norm, dropout, dtype_of, norm, norm_info, rms
from spmdgpt.model.lora import merged as lora_merged
from spmdgpt.model.mlp import mlp, mlp_info, mlp_stats
from spmdgpt.model.moe import between_steps as moe_between_steps
from spmdgpt.model.moe import moe, moe_info, moe_losses, moe_stats
from spmdgpt.model.pipeline import pipeline, reorder, stack_order
from spmdgpt.sharding import Rules, platform

Array = jax.Array


def no_losses(cfg: ModelConfig) -> dict:
    return {}


class Unit(NamedTuple):
    """One kind of attention or MLP.

    info(cfg): one layer's parameters, a NamedTuple of `ParamInfo` (the block stacks them).
    apply: attention: (cfg, rules, p, x, positions, batch, cache, segment_ids, key, window) ->
      (out, this layer's (k, v) cache or None, aux) (window: the layer's sliding window, traced, or
      None); MLP: (cfg, rules, p, x) -> (out, aux).
      x and out are [stream, embed] (the `stream` logical axis: batch x seq flattened, split over
      the batch's and the sequence's mesh axes, and the tensor axes with model.collective_matmul,
      `sharding.Rules`); aux is a dict of float32 scalars.
    stats: attention: (cfg, rules, p, x, positions, batch, segment_ids) -> dict; MLP:
      (cfg, rules, p, x) -> dict (float32 scalars, on statistics passes only).
    losses(cfg): {aux name: weight}: which of apply's aux outputs are losses, and their weights.
    between_steps: (cfg, old, new, aux) -> the unit's stacked parameters after a step, from those
      before it (old), after the optimizer's update (new) and the step's aux outputs that are not
      scalars (each [layers, ...]): state that is set, not trained (MoE's balancing bias).
    """

    info: Callable[[ModelConfig], Any]
    apply: Callable
    stats: Callable
    losses: Callable[[ModelConfig], dict] = no_losses
    between_steps: Callable = lambda cfg, old, new, aux: new


ATTENTION = Unit(attention_info, self_attention, attention_stats)
DENSE_MLP = Unit(mlp_info, mlp, mlp_stats)
MOE = Unit(moe_info, moe, moe_stats, moe_losses, moe_between_steps)


def block_units(cfg: ModelConfig, dense: bool = False) -> tuple[Unit, Unit]:
    """(the attention unit, the MLP unit) of this model's blocks (dense: of an MoE model's dense
    layers): a new kind is a case here."""
    return ATTENTION, MOE if cfg.moe.num_experts and not dense else DENSE_MLP


class Block(NamedTuple):
    ln1: Norm
    attn: Any  # the attention unit's parameters (attention.Attention or GroupedAttention)
    ln2: Norm
    mlp: Any  # the MLP unit's parameters (mlp.Mlp or moe.Moe)


UNIT_FIELDS = ("attn", "mlp")  # the Block fields that hold a unit's parameters


class Params(NamedTuple):
    embed: Array
    blocks: Block
    ln_f: Norm
    unembed: Optional[Array]
    dense_blocks: Optional[Block] = None


def param_info(cfg: ModelConfig) -> Params:
    def layers(dense: bool, n: int) -> Block:
        attention, mlp_unit = block_units(cfg, dense)
        return stacked(Block(ln1=norm_info(cfg), attn=attention.info(cfg), ln2=norm_info(cfg),
                             mlp=mlp_unit.info(cfg)), n)

    kinds = moe_layers(cfg)
    D, V, std = cfg.d_model, cfg.vocab_size, cfg.init_std
    return Params(
        embed=ParamInfo((V, D), ("vocab", "embed"), "normal", std, False, (), ()),
        blocks=layers(False, sum(kinds) or cfg.num_layers),
        ln_f=norm_info(cfg),
        unembed=None
        if cfg.tie_embeddings
        else ParamInfo((D, V), ("embed", "vocab"), "normal", std, False, ("embed",), ("vocab",)),
        dense_blocks=layers(True, kinds.count(False)) if any(kinds) and not all(kinds) else None,
    )


def aux_loss_weights(cfg: ModelConfig) -> dict:
    """{aux name: weight} of the auxiliary losses the block's units report."""
    attention, mlp_unit = block_units(cfg)
    return {**attention.losses(cfg), **mlp_unit.losses(cfg)}


def between_steps(cfg: ModelConfig, old: Params, new: Params, aux: dict) -> Params:
    """The parameters after a training step: `new` (the optimizer's) with each unit's state that
    is set between steps (`Unit.between_steps`) from `old` and the step's non-scalar aux outputs
    (the objective's metrics["between_steps"])."""
    units = dict(zip(UNIT_FIELDS, block_units(cfg)))
    blocks = new.blocks._replace(**{f: u.between_steps(cfg, getattr(old.blocks, f), getattr(new.blocks, f), aux)
                                    for f, u in units.items()})
    return new._replace(blocks=blocks)


def leaf_name(path) -> str:
    """A parameter's name without the unit that holds it: ".blocks.w_qkv" for
    params.blocks.attn.w_qkv (names are unique within a block). It seeds the parameter's init, so
    that a seed gives the initial model it gave before blocks had units, and names the
    parameter in the web page's files (spmdgpt.web)."""
    return "".join(f".{k.name}" for k in path if getattr(k, "name", None) not in UNIT_FIELDS)


def param_shapes(cfg: ModelConfig) -> dict:
    """{parameter name (`info.path_name`): shape}: what a checkpoint of this model holds."""
    return {name: i.shape for name, i in by_name(param_info(cfg), is_leaf=is_info).items()}


def num_params(cfg: ModelConfig) -> int:
    return sum(math.prod(i.shape) for i in jax.tree.leaves(param_info(cfg), is_leaf=is_info))


def param_shardings(cfg: ModelConfig, rules: Rules) -> Params:
    return jax.tree.map(lambda i: rules.param_sharding(i.logical), param_info(cfg), is_leaf=is_info)


def abstract_params(cfg: ModelConfig, rules: Rules) -> Params:
    """ShapeDtypeStructs with the parameters' shardings: a restore target that allocates nothing."""
    return abstract_tree(param_info(cfg), dtype_of(cfg.param_dtype), rules)


def abstract_tree(info, dtype, rules: Rules):
    """init_tree's ShapeDtypeStructs, with the rule table's shardings, computing nothing."""
    return jax.tree.map(lambda i: jax.ShapeDtypeStruct(i.shape, dtype, sharding=rules.param_sharding(i.logical)),
                        info, is_leaf=is_info)


def init_params(cfg: ModelConfig, key: Array, rules: Rules) -> Params:
    """Parameters created directly in their sharded layout (never whole on one device).

    Each leaf's key is folded from its name (`leaf_name`), so adding a parameter leaves the
    others' initial values unchanged."""
    # On a CPU, XLA spends 1-2.5 s optimising the random-number code (threefry and the normal's
    # inverse erf, once per leaf) that then runs in milliseconds for a small model; unoptimised it
    # compiles in ~0.35 s and runs at ~0.09 s per million parameters (~0.02 optimised): quicker
    # in all below ~14M parameters (benchmarks/init_compile.py), so a model of fewer than
    # INIT_UNOPTIMISED parameters is initialised unoptimised. (The values differ from the
    # optimised code's in the last bit of some elements.)
    return init_tree(param_info(cfg), dtype_of(cfg.param_dtype), key, rules)


def init_tree(info, dtype, key: Array, rules: Rules):
    """The arrays of a tree of ParamInfo (init_params'; LoRA's adapters), created sharded."""
    quick = (
        platform() == "cpu"
        and sum(math.prod(i.shape) for i in jax.tree.leaves(info, is_leaf=is_info)) < INIT_UNOPTIMISED
    )
    make = jax.jit(_init_leaves, static_argnums=(0, 1),
                   out_shardings=jax.tree.map(lambda i: rules.param_sharding(i.logical), info, is_leaf=is_info),
                   compiler_options={"xla_backend_optimization_level": 0} if quick else None)
    return make(info, dtype, key)


INIT_UNOPTIMISED = 8_000_000


def _init_leaves(info: Params, dtype, key: Array) -> Params:
    """(A module-level function of hashable metadata, so that its compilation is cached across
    calls with the same model: the random-number code takes seconds to compile on a CPU.)"""
    def leaf(path, i: ParamInfo):
        k = jax.random.fold_in(key, zlib.crc32(leaf_name(path).encode()))
        if i.init == "normal":
            return (i.std * jax.random.normal(k, i.shape, jnp.float32)).astype(dtype)
        return (jnp.ones if i.init == "ones" else jnp.zeros)(i.shape, dtype)

    return jax.tree_util.tree_map_with_path(leaf, info, is_leaf=is_info)


# ----------------------------------------------------------------------------- forward


def block(cfg: ModelConfig, rules: Rules, p: Block, x: Array, positions: Array, batch: int,
          cache: Optional[LayerCache] = None, segment_ids: Optional[Array] = None, collect: bool = False,
          key: Optional[Array] = None, window: Optional[Array] = None, dense: bool = False):
    """One pre-norm block on the residual stream x: [stream, embed] -> (x, this layer's
    updated (k, v) cache or None, aux: the units' auxiliary outputs, a dict of float32 scalars).
    collect=True (model statistics, spmdgpt.stats; full sequences only) adds the statistics to
    aux: the RMS of the block's output, of the attention and MLP outputs, and the units' own.
    key (training only): dropout on the attention probabilities and on both branch outputs.
    window: this layer's sliding window (`attention.window_mask`; None: global). dense: an MoE
    model's dense layer (`block_units`)."""
    attention, mlp_unit = block_units(cfg, dense)
    p = lora_merged(p)  # (LoRA: this layer's adapters folded into its weights, model/lora.py)
    k_attn, k_a, k_m = (None,) * 3 if key is None else jax.random.split(key, 3)
    h = norm(cfg, rules, p.ln1, x)
    a, kv, aux_a = attention.apply(cfg, rules, p.attn, h, positions, batch, cache, segment_ids, k_attn, window)
    a = dropout(a, cfg.dropout, k_a)
    x = x + a
    h2 = norm(cfg, rules, p.ln2, x)
    m, aux_m = mlp_unit.apply(cfg, rules, p.mlp, h2)
    m = dropout(m, cfg.dropout, k_m)
    x = x + m
    aux = {**aux_a, **aux_m}
    if collect:
        aux.update(resid_rms=rms(x), attn_rms=rms(a), mlp_rms=rms(m),
                   **attention.stats(cfg, rules, p.attn, h, positions, batch, segment_ids, window),
                   **mlp_unit.stats(cfg, rules, p.mlp, h2))
    return x, kv, aux


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
    flat = flatten(rules, jax.sharding.reshard(tokens, rules.spec("batch", "seq")))
    return table.at[flat].get(out_sharding=rules.spec("stream", "embed"))


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


def logits_matmul(cfg: ModelConfig, eq: str, spec, x: Array, w: Array) -> Array:
    """The unembedding matmul einsum(eq, x, w) -> float32 logits. model.logits_dtype=float32: a
    float32 result (`float32_matmul`); the compute dtype: the GEMM writes the logits in it (as
    under autocast) and they are widened to float32 where they are read (XLA fuses the cast into
    the loss's reductions), so the [tokens, vocab] array in memory has half the bytes."""
    if cfg.logits_dtype == DType.float32:
        return float32_matmul(eq, spec, x, w)
    return jnp.einsum(eq, x, w, out_sharding=spec).astype(jnp.float32)


def unembed(cfg: ModelConfig, rules: Rules, params: Params, x: Array) -> Array:
    """x [tokens, d] -> float32 logits [tokens, vocab] (vocab sharded by the `vocab` rule),
    soft-capped by model.logit_softcap."""
    out = rules.spec("tokens", "vocab")
    if params.unembed is None:
        w = rules.gather(params.embed.astype(x.dtype), ("vocab", "embed"))
        return softcap(cfg, logits_matmul(cfg, "td,vd->tv", out, x, w))
    w = rules.gather(params.unembed.astype(x.dtype), ("embed", "vocab"))
    return softcap(cfg, logits_matmul(cfg, "td,dv->tv", out, x, w))


def hidden_states(
    cfg: ModelConfig, rules: Rules, params: Params, tokens: Array, positions: Optional[Array] = None,
    cache: Optional[KVCache] = None, segment_ids: Optional[Array] = None, prefill: bool = False,
    key: Optional[Array] = None, collect: bool = False, microbatches: int = 1,
) -> tuple[Array, Optional[KVCache], dict]:
    """Embedding + all blocks + final norm: tokens [b, t] -> ([b * t, d] in the compute dtype
    (under context parallelism each sequence's tokens in the context order, `model.context`),
    the updated cache or None, the layers' aux outputs {name: float32 [layers, ...]}: in layer
    order, or over the MoE layers for an output only they give, `scan_layers`). See `forward`.
    key (training, full sequences): the dropout masks of model.dropout / attention_dropout
    (embedding: fold_in(key, L); layer i: fold_in(key, i)). collect (full sequences): the
    model statistics too (`block`); the same layer scan as training. With pipeline stages
    (mesh.stage > 1) full sequences go through the pipeline in `microbatches` microbatches
    (`pipelined_blocks`); statistics and cached passes gather the whole stack instead."""
    batch, t = tokens.shape
    if cache is None:
        positions, segment_ids = sequence_inputs(rules, t, positions, segment_ids)
        x = embed(cfg, rules, params, to_context_order(rules, tokens))
        layers = jnp.arange(cfg.num_layers, dtype=jnp.uint32)
        if key is not None:
            x = dropout(x, cfg.dropout, jax.random.fold_in(key, cfg.num_layers))
        if rules.stage_size() > 1 and not collect:
            x = pipelined_blocks(cfg, rules, params, x, positions, segment_ids, batch, microbatches)
            return jax.sharding.reshard(norm(cfg, rules, params.ln_f, x), rules.spec("tokens", "embed")), None, {}
        params = whole_stack(rules, params)

        def make_step(dense: bool):
            def step(x, layer):
                p, (i, window) = layer
                k = None if key is None else jax.random.fold_in(key, i)
                x, _, aux = block(cfg, rules, p, x, positions, batch, segment_ids=segment_ids, collect=collect,
                                  key=k, window=window, dense=dense)
                return x, aux

            return step if cfg.remat == Remat.none else jax.checkpoint(step, policy=_REMAT_POLICIES[cfg.remat])

        x, aux = scan_layers(cfg, params, make_step, x, (layers, _windows(cfg)), unroll=cfg.scan_unroll, fill=collect)
        return jax.sharding.reshard(norm(cfg, rules, params.ln_f, x), rules.spec("tokens", "embed")), None, aux

    rules = rules.whole_sequences()  # (a cached pass: one copy of each sequence on every device of a context ring)
    params = whole_stack(rules, params)
    tokens = jax.sharding.reshard(tokens, rules.spec("batch", None))
    positions = jax.sharding.reshard(positions.astype(jnp.int32), rules.spec("batch", None))
    k_pos = jax.lax.dynamic_update_slice(cache.pos, positions, (0, cache.end))
    if prefill:  # the backend's causal attention over the prompt; padding (position -1) apart
        mask, segment_ids = None, (positions >= 0).astype(jnp.int32)
    else:
        mask = causal_mask(positions, k_pos)  # [b, t, capacity], the same for every layer
    x = embed(cfg, rules, params, tokens)

    def make_cached_step(dense: bool):
        def cached_step(x, layer):
            p, (k, v, window) = layer
            layer_mask = mask if mask is None or window is None else mask & window_mask(positions, k_pos, window)
            x, (k, v), _ = block(cfg, rules, p, x, positions, batch, LayerCache(k, v, layer_mask, cache.end),
                                 segment_ids, window=window, dense=dense)
            return x, {"k": k, "v": v}

        return cached_step

    # A rolled layer scan: for one-token decode steps it measured 40% faster than the unrolled
    # one that training prefers (benchmarks/BENCHMARKS.md).
    x, kv = scan_layers(cfg, params, make_cached_step, x, (cache.k, cache.v, _windows(cfg)))
    return norm(cfg, rules, params.ln_f, x), KVCache(kv["k"], kv["v"], k_pos, cache.end + t), {}


def pipelined_blocks(cfg: ModelConfig, rules: Rules, params: Params, x: Array, positions: Array,
                     segment_ids: Optional[Array], batch: int, microbatches: int) -> Array:
    """The blocks over the residual stream x [tokens, d] as a pipeline over the stage axes
    (`model.pipeline`): each stage a scan over its slice of the layers, `microbatches` of the
    batch flowing through them."""
    mb, inside = batch // microbatches, rules.in_stages()  # (the batch not split over the stages in them)

    def stage(p, layers, x, pos, seg):
        def step(x, layer):
            p_layer, window = layer
            return block(cfg, inside, p_layer, x, positions if pos is None else pos, mb, segment_ids=seg,
                         window=window)[0], None

        if cfg.remat != Remat.none:
            step = jax.checkpoint(step, policy=_REMAT_POLICIES[cfg.remat])
        return jax.lax.scan(step, x, (p, layers), unroll=cfg.scan_unroll)[0]

    per_sequence = [positions if positions.ndim == 2 else None, segment_ids]
    return pipeline(rules, stage, params.blocks, _windows(cfg), x, per_sequence, batch, microbatches,
                    remat=cfg.pipeline_remat)


def whole_stack(rules: Rules, params: Params) -> Params:
    """params with the layer stack gathered from the pipeline stages onto every device, in layer
    order (for the passes that do not pipeline: statistics, cached decoding); unchanged without
    stages."""
    if rules.stage_size() == 1:
        return params

    def whole(a):
        spec = tuple(jax.typeof(a).sharding.spec) + (None,) * a.ndim
        return jax.sharding.reshard(a, P(None, *spec[1:a.ndim]))

    blocks = jax.tree.map(whole, params.blocks)
    order = _stack_order(rules, blocks)
    if order is not None:
        blocks = jax.tree.map(lambda a: jnp.take(a, np.argsort(order), axis=0), blocks)
    return params._replace(blocks=blocks)


def _stack_order(rules: Rules, blocks) -> Optional[np.ndarray]:
    return stack_order(jax.tree.leaves(blocks)[0].shape[0], rules.stage_size(), rules.repeats)


def _reordered(tree, index: Array):
    def blocks(p):
        n = index.shape[0]
        return p._replace(blocks=jax.tree.map(lambda a: reorder(a, index) if a.ndim and a.shape[0] == n else a,
                                              p.blocks))

    return jax.tree.map(lambda x: blocks(x) if isinstance(x, Params) else x, tree,
                        is_leaf=lambda x: isinstance(x, Params))


_reorder_copy = jax.jit(_reordered)
_reorder_in_place = jax.jit(_reordered, donate_argnums=0)


def to_stage_order(rules: Rules, tree, donate: bool = True):
    """tree (parameters, or an optimizer state holding Params) with every layer stack in the
    order a circular pipeline holds it (`pipeline.stack_order`), from layer order: what a run
    does to the parameters it initialises or restores. The tree itself without one. donate:
    tree's arrays are not used again (their memory is reused)."""
    return _reorder(rules, tree, donate, invert=False)


def to_layer_order(rules: Rules, tree, donate: bool = False):
    """The inverse of `to_stage_order` (what a checkpoint holds)."""
    return _reorder(rules, tree, donate, invert=True)


def _reorder(rules: Rules, tree, donate: bool, invert: bool):
    stacks = [p.blocks for p in jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, Params))
              if isinstance(p, Params) and jax.tree.leaves(p.blocks)]
    order = _stack_order(rules, stacks[0]) if stacks else None
    if order is None:
        return tree
    index = jnp.asarray(np.argsort(order) if invert else order, jnp.int32)
    return (_reorder_in_place if donate else _reorder_copy)(tree, index)


def scan_layers(cfg: ModelConfig, params: Params, make_step: Callable, x: Array, xs, unroll=1, fill: bool = False):
    """Runs the layers in order: make_step(dense) is a `lax.scan` body (x, (a layer's block
    parameters, its slice of xs)) -> (x, a dict of outputs) for the MoE model's dense layers
    (dense=True) or the `blocks` layers; xs: a tree of per-layer inputs [layers, ...] in layer
    order. Returns (x, {name: [layers, ...]}) in layer order; an output that only one kind of
    layer gives is NaN at the other kind's layers (fill=True, statistics) or only that kind's,
    in order ([MoE layers, ...]: the auxiliary losses and the balancing's expert shares).

    Without dense_blocks, one scan over `blocks`. With them: a scan over the first N dense
    layers, then a scan over G groups, each an inner scan over its k - 1 dense layers and then
    its MoE layer (N = model.moe.first_dense_layers, k = interleave_step); the dense stack's
    layers N, N + 1, ... are cut into the groups by a reshape, not copied one by one."""
    scan = partial(jax.lax.scan, unroll=unroll)
    if params.dense_blocks is None:
        return scan(make_step(False), x, (params.blocks, xs))
    n, k = cfg.moe.first_dense_layers, cfg.moe.interleave_step
    g = sum(moe_layers(cfg))
    head = lambda t: jax.tree.map(lambda a: a[:n], t)
    groups = lambda t, m: jax.tree.map(lambda a: jnp.reshape(a[n:], (g, m) + a.shape[1:]), t)
    dense_step, moe_step = make_step(True), make_step(False)
    first = {}
    if n:
        x, first = scan(dense_step, x, (head(params.dense_blocks), head(xs)))

    def group(x, layers):
        p_dense, p_moe, xs_group = layers
        ys_dense = {}
        if k > 1:
            x, ys_dense = scan(dense_step, x, (p_dense, jax.tree.map(lambda a: a[:k - 1], xs_group)))
        x, ys_moe = moe_step(x, (p_moe, jax.tree.map(lambda a: a[k - 1], xs_group)))
        return x, (ys_dense, ys_moe)

    x, (ys_dense, ys_moe) = scan(group, x, (groups(params.dense_blocks, k - 1), params.blocks, groups(xs, k)))

    def ordered(name):  # first [N] + dense [G, k - 1] + MoE [G] -> [L]
        f, d, m = first.get(name), ys_dense.get(name), ys_moe.get(name)
        like = m[0] if m is not None else f[0] if f is not None else d[0, 0]
        blank = lambda *lead: jnp.full(lead + like.shape, jnp.nan, like.dtype)
        dense_gives = f is not None or d is not None
        if not fill and not (dense_gives and m is not None):  # one kind's output: its layers only
            if m is not None:
                return m
            return jnp.concatenate(([f] if n else []) + ([jnp.reshape(d, (-1,) + like.shape)] if k > 1 else []))
        m = blank(g) if m is None else m
        rest = jnp.concatenate([blank(g, k - 1) if d is None else d, m[:, None]], axis=1) if k > 1 else m[:, None]
        rest = jnp.reshape(rest, (g * k,) + like.shape)
        return jnp.concatenate([blank(n) if f is None else f, rest]) if n else rest

    return x, {name: ordered(name) for name in {**first, **ys_dense, **ys_moe}}


def _windows(cfg: ModelConfig) -> Optional[Array]:
    """Each layer's sliding window as a scanned int32 [layers] (0: global), or None when no
    layer has one (model.sliding_window, model.window_pattern)."""
    windows = layer_windows(cfg)
    return jnp.asarray(windows, jnp.int32) if any(windows) else None


def activation_stats(cfg: ModelConfig, rules: Rules, params: Params, tokens: Array,
                     positions: Optional[Array] = None, segment_ids: Optional[Array] = None) -> dict:
    """Per-layer statistics of a forward pass over full sequences (`block` with collect=True):
    {name: float32 [layers]}, from the training forward's own layer scan (a statistic that one
    kind of layer lacks is NaN at its layers: an MoE model's dense ones have no router)."""
    aux = hidden_states(cfg, rules, params, tokens, positions, segment_ids=segment_ids, collect=True)[2]
    return {name: value for name, value in aux.items() if value.ndim == 1}  # (not the per-expert shares)


def forward(
    cfg: ModelConfig, rules: Rules, params: Params, tokens: Array, positions: Optional[Array] = None,
    cache: Optional[KVCache] = None, segment_ids: Optional[Array] = None, prefill: bool = False,
    last: bool = False,
) -> tuple[Array, Optional[KVCache]]:
    """The model: tokens [b, t] (int) -> (float32 logits [b, t, vocab], updated cache or None).

    Training and evaluation: no cache; positions default to 0..t-1 (or [b, t], e.g. restarting
    at each document); segment_ids [b, t] (document numbers) keep attention inside documents.
    Prefill and decode: a KVCache (`attention.init_cache`) and positions [b, t] (-1 marks
    padding, never attended); the tokens' keys and values are written at cache.end and the
    returned cache has end + t. prefill=True (a prompt's first pass, into an empty cache; left
    padding only) runs attention by the `model.attention` backend over the prompt itself, as
    training does; otherwise the queries attend over the whole cache (decode). The same layers
    run every way; attention branches once, on the cache. last=True (with a cache: a prefill whose
    continuation needs only the prompt's last prediction) computes the logits of the last
    position alone, [b, 1, vocab]: a prompt's whole float32 logits are never made.
    """
    x, cache, _ = hidden_states(cfg, rules, params, tokens, positions, cache, segment_ids, prefill)
    b = tokens.shape[0]
    if cache is not None:
        rules = rules.whole_sequences()
        if last:  # (whole sequences: the flattened tokens are rows in order)
            x = flatten(rules, unflatten(rules, x, b, "embed")[:, -1:], "embed")
    logits = unembed(cfg, rules, params, x)
    return from_context_order(rules, unflatten(rules, logits, b, "vocab"), "vocab"), cache


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
    return table.at[ids].get(out_sharding=rules.spec("tokens", "embed")).astype(dtype)
