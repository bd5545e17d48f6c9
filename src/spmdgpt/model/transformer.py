"""The decoder-only transformer's forward pass: tokens -> the residual stream -> logits.

The model package by concern: `params` (the parameter types, their metadata and init; a block's
units), `head` (the embedding and the output head's numerics), `blocks` (one block, the one layer
step, the loops over the layers and the pipeline's stages), `stages` (a circular pipeline's stack
order), and here the passes themselves: `hidden_states` (training, evaluation, statistics and
cached decoding) and `forward`. The loss is in `model.loss`.

The residual stream is [batch x seq, d_model] in float32 (`head.embed`); each layer function
returns it with a dict of per-layer float32 scalars, the auxiliary channel: a unit's auxiliary
losses (those its `losses(cfg)` weighs; the objective adds weight x their mean over layers) and,
on statistics passes, the model statistics.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig, global_stack
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import hyper
from spmdgpt.model.attention import KVCache, causal_mask
from spmdgpt.model.blocks import Cached, PerLayer, layer_step, pipelined_blocks, scan_layers, windows
from spmdgpt.model.context import flatten, from_context_order, sequence_inputs, to_context_order, unflatten
from spmdgpt.model.csa import layer_kinds
from spmdgpt.model.head import embed, flat_tokens, unembed
from spmdgpt.model.layers import dropout, dtype_of, norm
from spmdgpt.model.moe import hash_routes
from spmdgpt.model.params import Params, block_units
from spmdgpt.model.per_layer import layer_inputs
from spmdgpt.model.stages import whole_stack

Array = jax.Array


def hidden_states(
    cfg: ModelConfig, rules: Rules, params: Params, tokens: Array, positions: Optional[Array] = None,
    cache: Optional[KVCache] = None, segment_ids: Optional[Array] = None, prefill: bool = False,
    key: Optional[Array] = None, collect: bool = False, microbatches: int = 1, residual: bool = False,
) -> tuple[Array, Optional[KVCache], dict]:
    """Embedding + all blocks + final norm: tokens [b, t] -> ([b * t, d] in the compute dtype
    (under context parallelism each sequence's tokens in the context order, `model.context`),
    the updated cache or None, the layers' aux outputs {name: float32 [layers, ...]}: in layer
    order, or over the MoE layers for an output only they give, `scan_layers`). See `forward`.
    key (training, full sequences): the dropout masks of model.dropout / attention_dropout
    (embedding: fold_in(key, L); layer i: fold_in(key, i)). collect (full sequences): the
    model statistics too (`blocks.block`); the same layer scan as training. With pipeline stages
    (mesh.stage > 1) full sequences go through the pipeline in `microbatches` microbatches
    (`pipelined_blocks`); statistics and cached passes gather the whole stack instead. residual
    (full sequences, no stages): the residual stream before the final norm instead (float32;
    multi-token prediction's input, `model.mtp`)."""
    batch, t = tokens.shape
    if cache is None:
        positions, segment_ids = sequence_inputs(rules, t, positions, segment_ids)
        tokens = to_context_order(rules, tokens)
        x, inputs, routes = scan_inputs(cfg, rules, params, tokens, key)  # (routes: in the context order)
        if rules.stage_size() > 1 and not collect:
            x = pipelined_blocks(cfg, rules, params, x, positions, segment_ids, batch, microbatches)
            return final_norm(cfg, rules, params, x), None, {}
        params = whole_stack(rules, params)

        def make_step(stack: str, shared=None):  # (shared: a KV-shared layer's source keys and values)
            return layer_step(cfg, rules, batch, positions, segment_ids, key, collect, stack=stack, shared_kv=shared)

        per_layer = PerLayer(window=windows(cfg), index=jnp.arange(cfg.num_layers, dtype=jnp.uint32), routes=routes,
                             inputs=inputs, compress=layer_kinds(cfg))
        x, aux = scan_layers(cfg, params, make_step, x, per_layer, unroll=cfg.scan_unroll, fill=collect)
        if residual:
            return x, None, aux
        return final_norm(cfg, rules, params, x), None, aux

    rules = rules.whole_sequences()  # (a cached pass: one copy of each sequence on every device of a context ring)
    params = whole_stack(rules, params)
    tokens = jax.sharding.reshard(tokens, rules.spec("batch", None))
    positions = jax.sharding.reshard(positions.astype(jnp.int32), rules.spec("batch", None))
    k_pos = jax.lax.dynamic_update_slice(cache.pos, positions, (0, cache.end))
    if prefill and not cfg.attention_chunk:  # the backend's causal attention over the prompt; padding (position -1)
        mask, segment_ids = None, (positions >= 0).astype(jnp.int32)  # apart (chunks: the mask of positions below,
        # whose chunks count from each row's first token however much padding is before it)
    else:
        mask = causal_mask(positions, k_pos)  # [b, t, capacity], the same for every layer
    x, inputs, routes = scan_inputs(cfg, rules, params, tokens)
    cached = Cached(mask, k_pos, cache.end)

    def make_cached_step(stack: str, shared=None):
        return layer_step(cfg, rules, batch, positions, segment_ids, cached=cached, stack=stack)

    # A rolled layer scan: for one-token decode steps it measured 40% faster than the unrolled
    # one that training prefers (benchmarks/BENCHMARKS.md).
    x, arrays = scan_layers(cfg, params, make_cached_step, x, PerLayer(window=windows(cfg), cache=cache.layers,
                                                                       routes=routes, inputs=inputs))
    x = hyper.fold(cfg, rules, params.hc_head, x)
    return norm(cfg, rules, params.ln_f, x), KVCache(arrays, k_pos, cache.end + t), {}


def scan_inputs(cfg: ModelConfig, rules: Rules, params: Params, tokens: Array,
                key: Optional[Array] = None) -> tuple[Array, Optional[Array], Optional[Array]]:
    """What the layer scan starts from, for tokens [b, t] (under context parallelism in the
    context order): the residual stream (the embedding [b * t, d]; model.dropout's mask under
    `key`, fold_in(key, L); model.hyper_connections' n streams [b * t, n, d]), every layer's
    per-layer input (model.per_layer_dim: [L, b * t, P], else None) and its hash routes
    (model.moe.hash_layers: [L, b * t, top_k], else None). Training's pass, the cached one and the
    inference engine's step (each of its row groups) all start here."""
    x = embed(cfg, rules, params, tokens)
    inputs = None if params.per_layer is None else layer_inputs(cfg, rules, params.per_layer, tokens, x)
    if key is not None:
        x = dropout(x, cfg.dropout, jax.random.fold_in(key, cfg.num_layers))
    routes = hash_routes(cfg, rules, params.hash_experts, flat_tokens(rules, tokens))
    return hyper.expand(cfg, rules, x), inputs, routes


def final_norm(cfg: ModelConfig, rules: Rules, params: Params, x: Array) -> Array:
    """The final norm of the residual stream x [b * t, d] (model.hyper_connections: its streams
    [b * t, n, d], folded first) -> the output head's input."""
    x = hyper.fold(cfg, rules, params.hc_head, x)
    return jax.sharding.reshard(norm(cfg, rules, params.ln_f, x), rules.spec("tokens", "embed"))


def init_cache(cfg: ModelConfig, rules: Rules, batch: int, capacity: int) -> KVCache:
    """An empty cache for `batch` sequences of up to `capacity` tokens: what the attention unit
    caches per layer (its `cache`: keys and values), stacked over the layers, in the compute
    dtype, sharded by the rule table."""
    if global_stack(cfg):  # (two shapes of keys and values: the inference engine's pool holds them, `engine.paged`)
        raise ValueError("model.global_head_dim / global_kv_heads / global_k_eq_v: the G layers cache keys and values "
                         "of their own shape, which this cache does not hold; decode by the inference engine "
                         "(spmdgpt.engine)")
    attention, _ = block_units(cfg)
    arrays = {name: jnp.zeros((cfg.num_layers,) + shape, dtype_of(cfg.compute_dtype),
                              out_sharding=rules.spec("layers", *logical))
              for name, (shape, logical) in attention.cache(cfg, batch, capacity).items()}
    pos = jnp.full((batch, capacity), -1, jnp.int32, out_sharding=rules.spec("batch", None))
    return KVCache(arrays, pos, jnp.zeros((), jnp.int32))


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
    Prefill and decode: a KVCache (`init_cache`) and positions [b, t] (-1 marks
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
