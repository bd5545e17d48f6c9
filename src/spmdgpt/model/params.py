"""The parameters of the decoder-only transformer: their types, metadata and initialisation.

Shapes (L layers, D = d_model, V vocabulary):

    embed    [V, D]                 token embedding (also the unembedding when tied)
    blocks   Block, every leaf stacked [L, ...], run by lax.scan (an MoE model: its MoE layers):
      ln1    Norm                   before attention
      attn   the attention unit's parameters (attention.Attention: w_qkv [L, D, 3, N, H], w_o;
             attention.GroupedAttention with model.num_kv_heads < N: w_q, w_kv [L, D, 2, K, H], w_o;
             mla.Mla with model.mla.kv_rank > 0: the latent projections, w_o; csa.Csa with
             model.csa.q_rank > 0: DeepSeek-V4's shared key/value attention)
      ln2    Norm                   before the MLP
      ln_post_attn, ln_post_mlp  Norm  after the attention / the MLP, before the residual add
             (model.post_norms, Gemma's sandwich), else None
      mlp    the MLP unit's parameters (mlp.Mlp: w_up [L, D, F], w_gate, w_down)
    ln_f     final norm
    unembed  [D, V]                 only when model.tie_embeddings=false
    dense_blocks  Block with the dense MLP, stacked: an MoE model's dense layers (model.moe.
             first_dense_layers, interleave_step; a hybrid's: Gated DeltaNet layers), else None
    linear_blocks  Block with Gated DeltaNet (deltanet.DeltaNet) for attention, stacked: a hybrid's
             linear-attention layers (model.deltanet.full_attention_interval; those of dense_blocks
             apart), else None; `blocks` then holds its softmax-attention layers
    mtp      multi-token prediction's modules (model.mtp_depth > 0, `mtp.Mtp`), else None
    hash_experts  [H, V, top_k] the experts of each token id in the first H MoE layers
             (model.moe.hash_layers = H, `moe.hash_routes`), else None
    hc_head  the fold of model.hyper_connections' streams before ln_f (`hyper.Hyper`; a block's
             hc_attn and hc_mlp: its hyper-connections around the two branches), else None
    per_layer  the per-layer input embeddings' table and projection (model.per_layer_dim > 0,
             `per_layer.PerLayerInputs`; each Block's gate: Block.per_layer), else None

A block is made of units. A unit (`Unit`) is one kind of attention or MLP: its parameters (a
NamedTuple of one layer, described by `info` as a tree of `ParamInfo`), the function that
applies them, and its statistics; `block_units(cfg)` picks the block's two. Another attention
or MLP kind is another unit: its own module, its own subtree of `Block`, nothing else here.

`param_info(cfg)` returns the parameter pytree with a `ParamInfo` at every leaf: logical axes (for
the sharding rules), init, whether weight decay applies, and which axes form the matrix
(`fan_in` x `fan_out`, named by logical axis; all other axes are a batch of matrices, e.g.
layers and q/k/v). Checkpoints store each leaf under its path's name (`info.path_name`).
"""

from __future__ import annotations

import math
import zlib
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p

from spmdgpt.config import (
    ModelConfig,
    global_stack,
    indexer_warmup,
    kv_heads,
    kv_shared,
    linear_layers,
    local_layers,
    moe_layers,
    stack_config,
)
from spmdgpt.mesh.sharding import Rules, platform
from spmdgpt.model.attention import (
    attention_info,
    attention_unit_functions,
    fused_qkv,
    grouped_attention_info,
    grouped_qkv,
    kv_cache,
    shared_kv,
    shared_kv_info,
)
from spmdgpt.model.csa import csa_attention, csa_cache, csa_info, csa_losses, csa_stats
from spmdgpt.model.deltanet import deltanet_attention, deltanet_info, deltanet_state, deltanet_stats
from spmdgpt.model.fp8 import HISTORY as FP8_HISTORY
from spmdgpt.model.fp8 import record_histories
from spmdgpt.model.hyper import Hyper, hyper_info
from spmdgpt.model.info import ParamInfo, by_name, is_info, stacked, vector
from spmdgpt.model.layers import Norm, dtype_of, norm_info
from spmdgpt.model.mla import mla_attention, mla_cache, mla_info, mla_losses, mla_stats
from spmdgpt.model.mlp import mlp, mlp_info, mlp_stats
from spmdgpt.model.moe import between_steps as moe_between_steps
from spmdgpt.model.moe import expert_hash, hash_info, moe, moe_info, moe_losses, moe_stats
from spmdgpt.model.mtp import Mtp, mtp_info
from spmdgpt.model.parametrization import STANDARD, parametrized
from spmdgpt.model.per_layer import PerLayerGate, PerLayerInputs, gate_info, inputs_info

Array = jax.Array


def no_losses(cfg: ModelConfig) -> dict:
    return {}


class Unit(NamedTuple):
    """One kind of attention or MLP.

    info(cfg): one layer's parameters, a NamedTuple of `ParamInfo` (the block stacks them).
    apply: attention: (cfg, rules, p, x, inputs: attention.UnitInputs: positions, batch, segment
      ids, this layer's cache, dropout key, sliding window) -> (out, this layer's (k, v) cache or
      None, aux); MLP: (cfg, rules, p, x) -> (out, aux).
      x and out are [stream, embed] (the `stream` logical axis: batch x seq flattened, split over
      the batch's and the sequence's mesh axes, and the tensor axes with model.collective_matmul,
      `sharding.Rules`); aux is a dict of float32 scalars.
    stats: attention: (cfg, rules, p, x, inputs) -> dict; MLP: (cfg, rules, p, x) -> dict
      (float32 scalars, on statistics passes only).
    losses(cfg): {aux name: weight}: which of apply's aux outputs are losses, and their weights.
    between_steps: (cfg, old, new, aux) -> the unit's stacked parameters after a step, from those
      before it (old), after the optimizer's update (new) and the step's aux outputs that are not
      scalars (each [layers, ...]): state that is set, not trained (MoE's balancing bias).
    cache: (cfg, batch, capacity) -> {name: (one layer's shape, its logical axes)}: what an
      attention unit caches for decoding (`transformer.init_cache` stacks it over the layers);
      apply reads this layer's arrays from inputs.cache and returns them updated.
    state: (cfg, batch) -> {name: (shape, logical axes, dtype or None)}: what an attention unit
      whose memory does not grow keeps per sequence instead (Gated DeltaNet's state; the
      inference engine holds it per slot); apply reads and returns it as it does a cache.
    """

    info: Callable[[ModelConfig], Any]
    apply: Callable
    stats: Callable
    losses: Callable[[ModelConfig], dict] = no_losses
    between_steps: Callable = lambda cfg, old, new, aux: new
    cache: Callable = lambda cfg, batch, capacity: {}  # attention: what it caches per layer for decoding
    state: Callable = lambda cfg, batch: {}  # attention: what it keeps per sequence instead, whatever its length


ATTENTION = Unit(attention_info, *attention_unit_functions(fused_qkv), cache=kv_cache)  # multi-head
GROUPED_ATTENTION = Unit(grouped_attention_info, *attention_unit_functions(grouped_qkv), cache=kv_cache)
# multi-head latent attention (MLA; with DeepSeek Sparse Attention's indexer, its KL loss)
LATENT_ATTENTION = Unit(mla_info, mla_attention, mla_stats, mla_losses, cache=mla_cache)
# DeepSeek-V4's attention: shared key/value MQA, partial RoPE on the heads' last dimensions, the grouped output
# (with C layers, their indexer's KL loss)
SHARED_KV_ATTENTION = Unit(csa_info, csa_attention, csa_stats, csa_losses, cache=csa_cache)
# Gated DeltaNet: a hybrid's linear attention, a fixed-size state per sequence instead of a growing cache
DELTANET = Unit(deltanet_info, deltanet_attention, deltanet_stats, state=deltanet_state)
# a layer that reads an earlier layer's keys and values (model.kv_shared_layers): queries and output alone, no cache
SHARED_KV = Unit(shared_kv_info, shared_kv, lambda cfg, rules, p, x, inputs: {})
DENSE_MLP = Unit(mlp_info, mlp, mlp_stats)
MOE = Unit(moe_info, moe, moe_stats, moe_losses, moe_between_steps)


# the Params fields that hold stacked layers
STACKS = ("blocks", "dense_blocks", "linear_blocks", "local_blocks", "shared_blocks", "shared_local_blocks")


def block_units(cfg: ModelConfig, stack: str = "blocks") -> tuple[Unit, Unit]:
    """(the attention unit, the MLP unit) of the layers in parameter stack `stack` (`STACKS`:
    "blocks"; an MoE model's dense layers "dense_blocks"; a hybrid's Gated DeltaNet layers
    "linear_blocks"; the local layers of a model whose global ones have their own geometry
    "local_blocks", `config.stack_config`; the layers that read an earlier layer's keys and values
    "shared_blocks" and "shared_local_blocks", model.kv_shared_layers): a new kind is a case here."""
    dense = stack == "dense_blocks"
    cfg = stack_config(cfg, stack)
    if stack.startswith("shared_"):
        attention = SHARED_KV
    elif stack == "linear_blocks" or (dense and cfg.deltanet.full_attention_interval):  # (a hybrid's dense
        attention = DELTANET  # first layers: Gated DeltaNet layers of its first group, model.moe.first_dense_layers)
    elif cfg.mla.kv_rank:
        attention = LATENT_ATTENTION
    elif cfg.csa.q_rank:
        attention = SHARED_KV_ATTENTION
    else:  # (values from keys: the grouped unit, its w_kv holding the keys alone)
        attention = GROUPED_ATTENTION if kv_heads(cfg) != cfg.num_heads or cfg.global_k_eq_v else ATTENTION
    return attention, MOE if cfg.moe.num_experts and not dense else DENSE_MLP


class Block(NamedTuple):
    ln1: Norm
    attn: Any  # the attention unit's parameters (attention.Attention, GroupedAttention, mla.Mla)
    ln2: Norm
    mlp: Any  # the MLP unit's parameters (mlp.Mlp or moe.Moe)
    ln_post_attn: Optional[Norm] = None  # model.post_norms: the attention output's norm (Gemma 2/3)
    ln_post_mlp: Optional[Norm] = None  # model.post_norms: the MLP output's norm
    layer_scale: Optional[Any] = None  # [] model.layer_scale: the residual stream times it after the layer (Gemma 4)
    hc_attn: Optional[Hyper] = None  # model.hyper_connections: the streams' hyper-connection around the attention
    hc_mlp: Optional[Hyper] = None  # ... and around the MLP (`model.hyper`)
    per_layer: Optional[PerLayerGate] = None  # model.per_layer_dim: the layer's gate of its per-layer input


UNIT_FIELDS = ("attn", "mlp")  # the Block fields that hold a unit's parameters


class Params(NamedTuple):
    embed: Array
    blocks: Block
    ln_f: Norm
    unembed: Optional[Array]
    dense_blocks: Optional[Block] = None
    mtp: Optional[Mtp] = None  # model.mtp_depth > 0: the multi-token prediction modules (`model.mtp`)
    linear_blocks: Optional[Block] = None  # a hybrid's Gated DeltaNet layers (model.deltanet)
    local_blocks: Optional[Block] = None  # the local layers beside global ones of their own geometry
    # (model.global_head_dim, global_kv_heads, global_k_eq_v: Gemma 4); `blocks` then holds the global ones
    hc_head: Optional[Hyper] = None  # model.hyper_connections: the fold of the streams before ln_f (`model.hyper`)
    hash_experts: Optional[Array] = None  # model.moe.hash_layers: [hash layers, vocab, top_k] each token's experts
    # there (stored as numbers, never trained: `moe.hash_routes`)
    per_layer: Optional[PerLayerInputs] = None  # model.per_layer_dim: the per-layer inputs' table and projection
    shared_blocks: Optional[Block] = None  # model.kv_shared_layers: the last layers, which read an earlier layer's
    shared_local_blocks: Optional[Block] = None  # keys and values: their G and L layers (`blocks`, `local_blocks`
    # then hold the others)


def param_info(cfg: ModelConfig) -> Params:
    """Every parameter's metadata (`ParamInfo`): shapes, logical axes, init, and under
    model.parametrization=mup / completep μP's init stds and learning-rate multipliers, read
    against the base shape's own tree and a wider one's (`parametrization.parametrized`)."""
    if cfg.parametrization != STANDARD:
        return parametrized(cfg, _param_info(cfg), _param_info)
    return _param_info(cfg)


def _param_info(cfg: ModelConfig) -> Params:
    def layer(stack: str) -> Block:
        attention, mlp_unit = block_units(cfg, stack)
        post = norm_info(cfg) if cfg.post_norms else None
        pre = norm_info(cfg) if cfg.pre_norms else None
        seen = stack_config(cfg, stack)  # (a global stack's layers: their own head width and key/value heads)
        return Block(ln1=pre, attn=attention.info(seen), ln2=pre, mlp=mlp_unit.info(seen), ln_post_attn=post,
                     ln_post_mlp=post, layer_scale=vector((), (), "ones") if cfg.layer_scale else None,
                     hc_attn=hyper_info(cfg), hc_mlp=hyper_info(cfg),
                     per_layer=gate_info(cfg) if cfg.per_layer_dim else None)

    def layers(stack: str, n: int) -> Block:
        return stacked(layer(stack), n)

    kinds, linear, local, shared = moe_layers(cfg), linear_layers(cfg), local_layers(cfg), kv_shared(cfg)
    D, V, std = cfg.d_model, cfg.vocab_size, cfg.init_std
    split = linear if any(linear) else local  # (a hybrid's Gated DeltaNet layers, a global stack's local ones)
    own = [not s for s in shared]  # (model.kv_shared_layers: the others' stacks of their own)
    count = lambda kind, mine: sum(k == kind and m for k, m in zip(split, mine, strict=True))  # noqa: E731
    plain = sum(linear) - kinds.count(False) * any(kinds) if any(linear) else 0  # (a hybrid's Gated DeltaNet layers
    # but its dense ones)
    return Params(
        embed=ParamInfo((V, D), ("vocab", "embed"), "normal", std, False, (), ()),
        # (a hybrid's softmax layers, a global stack's G layers, else an MoE model's MoE layers, else every layer)
        blocks=layers("blocks", count(False, own) if any(split) else sum(kinds) or cfg.num_layers),
        ln_f=norm_info(cfg),
        unembed=None
        if cfg.tie_embeddings
        else ParamInfo((D, V), ("embed", "vocab"), "normal", std, False, ("embed",), ("vocab",)),
        dense_blocks=layers("dense_blocks", kinds.count(False)) if any(kinds) and not all(kinds) else None,
        mtp=mtp_info(cfg, layer("dense_blocks")) if cfg.mtp_depth else None,
        linear_blocks=layers("linear_blocks", plain) if plain else None,
        local_blocks=layers("local_blocks", count(True, own)) if global_stack(cfg) else None,
        hc_head=hyper_info(cfg, head=True),
        hash_experts=hash_info(cfg),
        per_layer=inputs_info(cfg) if cfg.per_layer_dim else None,
        shared_blocks=layers("shared_blocks", count(False, shared)) if any(shared) else None,
        shared_local_blocks=layers("shared_local_blocks", count(True, shared)) if any(shared) else None,
    )


def aux_loss_weights(cfg: ModelConfig) -> dict:
    """{aux name: weight} of the auxiliary losses the block's units report."""
    attention, mlp_unit = block_units(cfg)
    return {**attention.losses(cfg), **mlp_unit.losses(cfg)}


def between_steps(cfg: ModelConfig, old: Params, new: Params, aux: dict) -> Params:
    """The parameters after a training step: `new` (the optimizer's) with each unit's state that
    is set between steps (`Unit.between_steps`) from `old` and the step's non-scalar aux outputs
    (the objective's metrics["between_steps"]), and FP8's amax histories (`fp8.record_histories`). In the
    indexer's dense warm-up (`config.indexer_warmup`) the units' state stays as it was: the indexer alone learns."""
    if indexer_warmup(cfg):
        return record_histories(new, aux.get(FP8_HISTORY, {}))
    stacks = {"blocks": aux}
    if new.linear_blocks is not None and cfg.moe.num_experts:  # (a hybrid's experts in both stacks: their
        # per-layer outputs [layers, ...] in layer order, each stack's rows its own)
        linear = np.asarray(linear_layers(cfg))[np.asarray(moe_layers(cfg))]  # (the MoE layers': a hybrid's
        # dense first layers, model.moe.first_dense_layers, give no router outputs)
        per_layer = {k: v for k, v in aux.items() if k != FP8_HISTORY}
        stacks = {"blocks": {**aux, **{k: v[~linear] for k, v in per_layer.items()}},
                  "linear_blocks": {k: v[linear] for k, v in per_layer.items()}}
    out = new
    for stack, stack_aux in stacks.items():
        units = dict(zip(UNIT_FIELDS, block_units(cfg, stack)))
        o, n = getattr(old, stack), getattr(new, stack)
        out = out._replace(**{stack: n._replace(**{f: u.between_steps(cfg, getattr(o, f), getattr(n, f), stack_aux)
                                                   for f, u in units.items()})})
    return record_histories(out, aux.get(FP8_HISTORY, {}))


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
    # On a CPU, XLA spent 1-2.5 s optimising the random-number code (threefry and the normal's
    # inverse erf, once per leaf) that then runs in milliseconds for a small model; unoptimised it
    # compiles in ~0.35 s and runs at ~0.09 s per million parameters (~0.02 optimised): quicker
    # in all below ~14M parameters (benchmarks/init_compile.py), so a model of fewer than
    # INIT_UNOPTIMISED parameters is initialised unoptimised (the values differ from the
    # optimised code's in the last bit of some elements), its leaves' keys folded and their random
    # bits drawn by one threefry each over all of them (`_init_leaves`' batched: the same values,
    # 36-52% of the unoptimised compile: benchmarks/init_compile.py).
    return init_tree(param_info(cfg), dtype_of(cfg.param_dtype), key, rules)


def init_tree(info, dtype, key: Array, rules: Rules):
    """The arrays of a tree of ParamInfo (init_params'; LoRA's adapters), created sharded."""
    quick = (
        platform() == "cpu"
        and sum(math.prod(i.shape) for i in jax.tree.leaves(info, is_leaf=is_info)) < INIT_UNOPTIMISED
    )
    make = jax.jit(_init_leaves, static_argnums=(0, 1, 3),
                   out_shardings=jax.tree.map(lambda i: rules.param_sharding(i.logical), info, is_leaf=is_info),
                   compiler_options={"xla_backend_optimization_level": 0} if quick else None)
    return make(info, dtype, key, quick and str(jax.random.key_impl(key)) == "threefry2x32")  # (`_folded`'s hash)


INIT_UNOPTIMISED = 8_000_000

# Gated DeltaNet's decay (deltanet.DeltaNet: g = -exp(a_log) softplus(a + dt_bias)), initialised as
# flash-linear-attention and Mamba 2 do: A ~ U(1, 16), and softplus(dt_bias) = dt log-uniform in
# [0.001, 0.1], so that a fresh layer's state keeps most of itself from token to token. Each is a
# function of uniform(low, high): the leaf's uniform draws in [low, high) (`_uniform`).
DECAY_INITS = {
    "a_log": lambda uniform: jnp.log(uniform(1.0, 16.0)),
    "dt_bias": lambda uniform: (lambda dt: dt + jnp.log(-jnp.expm1(-dt)))(  # softplus^-1(dt)
        jnp.exp(uniform(jnp.log(1e-3), jnp.log(0.1)))),
}


def _uniform(bits: Array, low, high) -> Array:
    """float32 uniform in [low, high) from uint32 random bits, as jax.random.uniform makes them
    (its 23 mantissa bits under the exponent of 1.0: [1, 2), less 1, scaled; clipped at low)."""
    low, high = jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32)
    unit = jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32) - jnp.float32(1.0)
    return jnp.maximum(low, unit * (high - low) + low)


def _normal(bits: Array) -> Array:
    """float32 standard normals from uint32 random bits, as jax.random.normal makes them: sqrt(2)
    erfinv(u), u uniform in (-1, 1)."""
    low = np.nextafter(np.float32(-1.0), np.float32(0.0))
    return jnp.float32(np.sqrt(2.0)) * jax.lax.erf_inv(_uniform(bits, low, 1.0))


def _folded(key: Array, data: list) -> tuple:
    """The key data (two uint32 [n]) of jax.random.fold_in(key, d) for each d of `data` (Python
    ints below 2**32), from one threefry: fold_in hashes the pair (0, d) under the key."""
    k1, k2 = jax.random.key_data(key)
    return threefry2x32_p.bind(k1, k2, jnp.zeros(len(data), jnp.uint32), jnp.asarray(data, jnp.uint32))


def _bits(k1: Array, k2: Array, shapes: list) -> Array:
    """[jax.random.bits(key_i, shape_i)] for keys of data (k1[i], k2[i]), flattened and
    concatenated (uint32; threefry's partitionable bits: element j of a leaf is threefry(key,
    (0, j)) folded to 32 bits), from one threefry over all of them, not one per leaf: the same
    values, a fraction of the compile. Whole on one device: for small models (fewer than 2**32
    elements in all)."""
    sizes = [math.prod(s) for s in shapes]
    if sum(sizes) >= 2**32:
        raise ValueError(f"batched random bits for {sum(sizes)} elements: at most 2**32 - 1")
    each = lambda k: jnp.concatenate([jnp.full((n,), k[i], jnp.uint32) for i, n in enumerate(sizes)])  # noqa: E731
    counts = jnp.concatenate([jax.lax.iota(jnp.uint32, n) for n in sizes])
    high, low = threefry2x32_p.bind(each(k1), each(k2), jnp.zeros_like(counts), counts)
    return high ^ low


def _init_leaves(info: Params, dtype, key: Array, batched: bool = False) -> Params:
    """(A module-level function of hashable metadata, so that its compilation is cached across
    calls with the same model: the random-number code takes seconds to compile on a CPU.)
    batched: the leaves' random bits from one threefry (`_bits`; a small model), else each its own."""
    paths, leaves = zip(*jax.tree_util.tree_flatten_with_path(info, is_leaf=is_info)[0], strict=True)
    names = [zlib.crc32(leaf_name(path).encode()) for path in paths]
    drawn = [n for n, i in enumerate(leaves) if i.init == "normal" or i.init in DECAY_INITS]
    if batched:  # (the keys folded at once, and the normals' transform once over every drawn leaf: elementwise)
        flat = _bits(*_folded(key, [names[n] for n in drawn]), [leaves[n].shape for n in drawn])
        sizes = [math.prod(leaves[n].shape) for n in drawn]
        starts = np.cumsum([0] + sizes[:-1])
        part = lambda a, k: a[starts[k]:starts[k] + sizes[k]].reshape(leaves[drawn[k]].shape)  # noqa: E731
        normals = _normal(flat)
        bits = {n: part(flat, k) for k, n in enumerate(drawn)}
        drawn_normal = {n: part(normals, k) for k, n in enumerate(drawn)}
    else:
        bits = {n: jax.random.bits(jax.random.fold_in(key, names[n]), leaves[n].shape, jnp.uint32) for n in drawn}
        drawn_normal = {n: _normal(bits[n]) for n in drawn if leaves[n].init == "normal"}

    def leaf(n: int, i: ParamInfo):
        if i.init == "normal":
            return (i.std * drawn_normal[n]).astype(dtype)
        if i.init in DECAY_INITS:
            return DECAY_INITS[i.init](lambda low, high: _uniform(bits[n], low, high)).astype(dtype)
        if i.init == "expert_hash":
            return expert_hash(i.shape, i.modulus).astype(dtype)
        return (jnp.ones if i.init == "ones" else jnp.zeros)(i.shape, dtype)

    return jax.tree.unflatten(jax.tree.structure(info, is_leaf=is_info), [leaf(n, i) for n, i in enumerate(leaves)])
