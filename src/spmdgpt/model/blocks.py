"""The layers: one pre-norm block (`block`), the one scan body that runs a layer in every loop
(`layer_step`), and the loops over the stack: `scan_layers` (in layer order; an MoE model's dense
and MoE layers as their own stacks) and `pipelined_blocks` (the stages of `model.pipeline`).

Three passes run the layers, each for a reason: full sequences (training, evaluation, statistics:
rematerialised by model.remat, unrolled by model.scan_unroll), cached passes (prefill and decode:
the KV cache scanned with the layers, a rolled scan), and the pipeline's stages (each a scan over
its slice of the stack). `layer_step` is their one body.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from spmdgpt.config import ModelConfig, Remat, layer_windows, local_layers, moe_layers, stack_config
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import hyper
from spmdgpt.model.attention import LayerCache, UnitInputs, window_mask
from spmdgpt.model.layers import dropout, dtype_of, norm, rms
from spmdgpt.model.lora import merged as lora_merged
from spmdgpt.model.moe import Moe
from spmdgpt.model.parametrization import branch_multiplier
from spmdgpt.model.params import Block, Params, block_units
from spmdgpt.model.per_layer import gated
from spmdgpt.model.pipeline import pipeline

Array = jax.Array


def block(cfg: ModelConfig, rules: Rules, p: Block, x: Array, positions: Array, batch: int,
          cache: Optional[LayerCache] = None, segment_ids: Optional[Array] = None, collect: bool = False,
          key: Optional[Array] = None, window: Optional[Array] = None, stack: str = "blocks",
          routes: Optional[Array] = None, layer_input: Optional[Array] = None, shared_kv: Optional[tuple] = None,
          compress: Optional[Array] = None):
    """One pre-norm block (with model.post_norms a norm on each branch's output too, Gemma's
    sandwich) on the residual stream x: [stream, embed] (model.hyper_connections = n: the n streams
    [stream, n, embed], each branch between them, `model.hyper`) -> (x, this layer's
    updated cache arrays or None, aux: the units' auxiliary outputs, a dict of float32 scalars).
    collect=True (model statistics, spmdgpt.training.stats; full sequences only) adds the statistics to
    aux: the RMS of the block's output, of the attention and MLP outputs, and the units' own.
    key (training only): dropout on the attention probabilities and on both branch outputs.
    window: this layer's window (`attention.window_mask`: a sliding window or a chunk; None: global). stack: the
    parameter stack the layer belongs to, which picks its units (`block_units`). routes: this layer's
    row of the hash-routed layers' experts (`moe.hash_routes`; an MoE layer's, else unused).
    layer_input: its per-layer input [stream, model.per_layer_dim] (`per_layer.layer_inputs`), added
    through the layer's gate after the MLP's residual add (not with model.hyper_connections).
    shared_kv (full sequences, a layer of model.kv_shared_layers): the (k, v) of the last earlier
    layer of its kind, which it attends over; the layers before them return their keys and values
    ({"k", "v"}) in place of a cache on full sequences. compress: this layer's kind of DeepSeek-V4
    attention (`csa.layer_kinds`; None: the model has one)."""
    attention, mlp_unit = block_units(cfg, stack)
    cfg = stack_config(cfg, stack)  # (a global stack's G layers: their own head width and key/value heads)
    p = lora_merged(p)  # (LoRA: this layer's adapters folded into its weights, model/lora.py)
    k_attn, k_a, k_m = (None,) * 3 if key is None else jax.random.split(key, 3)
    keep = bool(cfg.kv_shared_layers) and cache is None and not stack.startswith("shared_")
    inputs = UnitInputs(positions, batch, segment_ids, cache, k_attn, window, keep, shared_kv, compress)
    branch = branch_multiplier(cfg)  # (model.parametrization=completep: (base_depth / num_layers)^alpha, else 1)

    def attention_branch(x):
        h = norm(cfg, rules, p.ln1, x) if p.ln1 is not None else x.astype(dtype_of(cfg.compute_dtype))  # (OLMo: none)
        a, kv, aux_a = attention.apply(cfg, rules, p.attn, h, inputs)
        if p.ln_post_attn is not None:  # (model.post_norms: each branch's output normed before the add)
            a = norm(cfg, rules, p.ln_post_attn, a)
        a = dropout(a, cfg.dropout, k_a)
        if branch != 1.0:
            a = a * jnp.asarray(branch, a.dtype)
        return a, h, kv, aux_a

    def mlp_branch(x):
        h2 = norm(cfg, rules, p.ln2, x) if p.ln2 is not None else x.astype(dtype_of(cfg.compute_dtype))
        extra = {} if routes is None or not isinstance(p.mlp, Moe) else {"routes": routes}
        if getattr(p.mlp, "dense", None) is not None:  # (model.moe.dense_mlp: Gemma 4's router and experts read the
            extra["residual"] = x  # residual stream too)
        m, aux_m = mlp_unit.apply(cfg, rules, p.mlp, h2, **extra)
        if p.ln_post_mlp is not None:
            m = norm(cfg, rules, p.ln_post_mlp, m)
        m = dropout(m, cfg.dropout, k_m)
        if branch != 1.0:
            m = m * jnp.asarray(branch, m.dtype)
        return m, h2, aux_m

    if p.hc_attn is None:
        a, h, kv, aux_a = attention_branch(x)
        x = x + a
        m, h2, aux_m = mlp_branch(x)
        x = x + m
        if p.per_layer is not None:  # (model.per_layer_dim: Gemma 4 E2B's and E4B's per-layer inputs)
            x = x + gated(cfg, rules, p.per_layer, x, layer_input)
    else:  # (model.hyper_connections: x is the n streams [stream, n, embed], each branch between them)
        x, a, h, kv, aux_a = hyper.around(cfg, rules, p.hc_attn, x, attention_branch)
        x, m, h2, aux_m = hyper.around(cfg, rules, p.hc_mlp, x, mlp_branch)
    if p.layer_scale is not None:  # (model.layer_scale: the whole residual stream, Gemma 4's layer_scalar)
        x = x * p.layer_scale.astype(x.dtype)
    aux = {**aux_a, **aux_m}
    if collect:
        aux.update(resid_rms=rms(x), attn_rms=rms(a), mlp_rms=rms(m),
                   **attention.stats(cfg, rules, p.attn, h, inputs._replace(key=None)),
                   **mlp_unit.stats(cfg, rules, p.mlp, h2))
    return x, kv, aux


_REMAT_POLICIES = {
    Remat.full: None,
    Remat.dots: jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


class PerLayer(NamedTuple):
    """A layer's slice of what the layer loops scan besides its parameters (None: not given)."""

    window: Optional[Array] = None  # its window, int32 (`windows`: 0 global, < 0 a chunk; None: every layer global)
    index: Optional[Array] = None  # its number (training's dropout keys)
    cache: Optional[dict] = None  # its arrays of the cache (cached passes; the attention unit's `cache`)
    routes: Optional[Array] = None  # its row of the hash-routed layers' experts [stream, k] (`moe.hash_routes`)
    inputs: Optional[Array] = None  # its per-layer input [stream, P] (model.per_layer_dim, `per_layer.layer_inputs`)
    compress: Optional[Array] = None  # its kind of DeepSeek-V4 attention, int32 (`csa.layer_kinds`)
    entries: Optional[Array] = None  # the inference engine: its index in each compressor's pool arrays, int32
    #   [compressors] (-1: another kind's; `engine.paged.entry_index`)


class Cached(NamedTuple):
    """What every layer of a cached pass shares: the attention mask [b, t, capacity] (None: a
    prefill's causal attention by the backend), the cache's key positions, where the new ones go."""

    mask: Optional[Array]
    k_pos: Array
    end: Array


def layer_step(cfg: ModelConfig, rules: Rules, batch: int, positions: Array, segment_ids: Optional[Array] = None,
               key: Optional[Array] = None, collect: bool = False, cached: Optional[Cached] = None,
               stack: str = "blocks", shared_kv: Optional[tuple] = None) -> Callable:
    """The `lax.scan` body of one layer, (x, (its Block parameters, PerLayer)) -> (x, outputs):
    the units' aux dict, or on a cached pass the layer's updated cache arrays. Every layer
    loop runs it (`hidden_states`' two, a pipeline stage's); model.remat applies here, to the
    passes that are differentiated (not cached ones). key: layer i's dropout key is
    fold_in(key, i). stack: the parameter stack of the layers it runs (`block_units`). With
    model.kv_shared_layers, full sequences: the layers before them add their keys and values to the
    outputs ("shared_k.<stack>", "shared_v.<stack>", which `scan_layers` takes), and theirs attend
    over shared_kv."""
    def step(x, layer):
        p, s = layer
        cache = None
        if cached is not None:
            mask = cached.mask
            if mask is not None and s.window is not None:
                mask = mask & window_mask(positions, cached.k_pos, s.window)
            cache = LayerCache(s.cache, mask, cached.end)
        k = None if key is None else jax.random.fold_in(key, s.index)
        x, kv, aux = block(cfg, rules, p, x, positions, batch, cache, segment_ids, collect, k, s.window, stack,
                           s.routes, s.inputs, shared_kv, s.compress)
        if cached is None and kv is not None:  # (the KV-shared layers' sources)
            aux = {**aux, f"shared_k.{stack}": kv["k"], f"shared_v.{stack}": kv["v"]}
        return x, (aux if cached is None else kv)

    if cached is None and cfg.remat != Remat.none:
        return jax.checkpoint(step, policy=_REMAT_POLICIES[cfg.remat])
    return step


def _spec_of(a: Array) -> tuple:
    return tuple(jax.typeof(a).sharding.spec) + (None,) * (a.ndim - len(jax.typeof(a).sharding.spec))


# The layer stacks' reshapes keep each array's layout explicitly: a plain reshape may drop a spec
# over mesh axes of size 1 (a batch of one row's over (data, expert) in a KV cache), and the layer
# scans' caches must come back in one layout to be concatenated or written.
def split_layers(a: Array, g: int, m: int) -> Array:
    """[g m, ...] -> [g, m, ...] (the first axis's spec goes to g)."""
    spec = _spec_of(a)
    return jnp.reshape(a, (g, m) + a.shape[1:], out_sharding=P(spec[0], None, *spec[1:]))


def merge_layers(a: Array) -> Array:
    """[g, m, ...] -> [g m, ...] (the layer axes unsharded)."""
    return jnp.reshape(a, (-1,) + a.shape[2:], out_sharding=P(None, *_spec_of(a)[2:]))


def scan_layers(cfg: ModelConfig, params: Params, make_step: Callable, x: Array, xs, unroll=1, fill: bool = False):
    """Runs the layers in order: make_step(stack) is a `lax.scan` body (x, (a layer's block
    parameters, its slice of xs)) -> (x, a dict of outputs) for the layers of parameter stack
    `stack` ("blocks"; an MoE model's dense layers "dense_blocks"; a hybrid's Gated DeltaNet layers
    "linear_blocks"); xs: a tree of per-layer inputs [layers, ...] in layer order. Returns
    (x, {name: [layers, ...]}) in layer order; an output that only one kind of layer gives is NaN
    at the other kind's layers (fill=True, statistics) or only that kind's, in order ([MoE
    layers, ...]: the auxiliary losses and the balancing's expert shares).

    With one stack, one scan over `blocks`. With two: a scan over the first N layers of the
    other stack, then a scan over G groups, each an inner scan over its k - 1 layers of the other
    stack and then its `blocks` layer (an MoE model: N = model.moe.first_dense_layers, k =
    interleave_step; a global stack: N = 0, k = len(model.window_pattern), its local layers the other
    stack); the other stack's layers N, N + 1, ... are cut into the groups by a reshape, not copied
    one by one. A hybrid (`hybrid_scan`): its groups so, k = model.deltanet.full_attention_interval,
    the Gated DeltaNet layers the other stack, and with dense first layers (a third stack) or a last
    group of num_layers mod k layers those groups apart.

    With model.kv_shared_layers (`shared_scan`): the layers before them so, then theirs
    (make_step(stack, their source's (k, v) or None), stacks "shared_blocks" and "shared_local_blocks")."""
    if params.shared_blocks is not None:
        return shared_scan(cfg, params, make_step, x, xs, unroll, fill)
    if cfg.deltanet.full_attention_interval:
        return hybrid_scan(cfg, params, make_step, x, xs, unroll, fill)
    scan = partial(jax.lax.scan, unroll=unroll)
    if params.local_blocks is not None:  # (window_pattern: k - 1 local layers, then the global one)
        other, n, k = "local_blocks", 0, len(cfg.window_pattern)
        g = jax.tree.leaves(params.blocks)[0].shape[0]  # (the G layers: one a group)
    elif params.dense_blocks is not None:
        other, n, k = "dense_blocks", cfg.moe.first_dense_layers, cfg.moe.interleave_step
        g = sum(moe_layers(cfg))
    else:
        return scan(make_step("blocks"), x, (params.blocks, xs))
    others = getattr(params, other)
    head = lambda t: jax.tree.map(lambda a: a[:n], t)
    dense_step, moe_step = make_step(other), make_step("blocks")
    pieces = []
    if n:
        x, first = scan(dense_step, x, (head(others), head(xs)))
        pieces.append(Piece(n, first))
    rest = lambda t: jax.tree.map(lambda a: a[n:], t)  # noqa: E731
    x, piece = _groups(scan, dense_step, moe_step, x, rest(others) if k > 1 else None, params.blocks, rest(xs), g, k)
    return x, _in_order(pieces + [piece], fill)


class Piece(NamedTuple):
    """A run of consecutive layers' outputs (`scan_layers`): `count` layers of one stack ({name: [count,
    ...]}), or with `grouped` `count` groups of k - 1 layers of one stack (ys: {name: [count, k - 1, ...]})
    and one of another (grouped: {name: [count, ...]})."""

    count: int
    ys: dict
    grouped: Optional[dict] = None
    k: int = 1


def _groups(scan, other_step, group_step, x, others, blocks, xs, g: int, k: int):
    """G groups, each an inner scan over its k - 1 layers of the other stack (`others`, its layers cut into
    the groups by a reshape, not copied one by one; None when k = 1) and then its layer of `blocks`
    (group_step) -> (x, their Piece)."""
    def group(x, layers):
        p_other, p_last, xs_group = layers
        ys_other = {}
        if k > 1:
            x, ys_other = scan(other_step, x, (p_other, jax.tree.map(lambda a: a[:k - 1], xs_group)))
        x, ys_last = group_step(x, (p_last, jax.tree.map(lambda a: a[k - 1], xs_group)))
        return x, (ys_other, ys_last)

    cut = lambda t, m: jax.tree.map(lambda a: split_layers(a, g, m), t)  # noqa: E731
    # (k = 1: no other layers; an empty reshape of a sharded stack is refused)
    x, (ys_other, ys_last) = scan(group, x, (None if others is None else cut(others, k - 1), blocks, cut(xs, k)))
    return x, Piece(g, ys_other, ys_last, k)


def _in_order(pieces: list, fill: bool) -> dict:
    """{name: [layers, ...]} of the pieces' outputs in layer order: every layer's, NaN at the layers of a kind
    that gives none (fill=True, statistics), else the layers' that give it alone."""
    def first_row(name):
        for p in pieces:
            if p.grouped is None and name in p.ys:
                return p.ys[name][0]
            if p.grouped is not None and name in p.grouped:
                return p.grouped[name][0]
            if p.grouped is not None and name in p.ys:
                return p.ys[name][0, 0]

    def ordered(name):
        like = first_row(name)
        blank = lambda *lead: jnp.full(lead + like.shape, jnp.nan, like.dtype)  # noqa: E731
        parts = []
        for p in pieces:
            if p.grouped is None:
                y = p.ys.get(name)
                parts.append(blank(p.count) if y is None and fill else y)
                continue
            g, k = p.count, p.k
            d, m = p.ys.get(name), p.grouped.get(name)
            if not fill and (d is None or m is None):  # one kind's output: its layers only
                parts.append(m if d is None else merge_layers(d))
                continue
            m = blank(g) if m is None else m
            rest = jnp.concatenate([blank(g, k - 1) if d is None else d, m[:, None]], axis=1) if k > 1 else m[:, None]
            parts.append(merge_layers(rest))
        parts = [y for y in parts if y is not None]
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts)

    names = {name for p in pieces for ys in (p.ys, p.grouped or {}) for name in ys}
    return {name: ordered(name) for name in names}


def hybrid_scan(cfg: ModelConfig, params: Params, make_step: Callable, x: Array, xs, unroll=1, fill: bool = False):
    """`scan_layers` of a hybrid (model.deltanet.full_attention_interval = k, `linear_layers`): G groups,
    each a scan over its k - 1 Gated DeltaNet layers ("linear_blocks") and then its softmax-attention layer
    ("blocks"). Run apart, each as a scan over its Gated DeltaNet layers and a step of its softmax one: with
    an MoE's dense first layers (model.moe.first_dense_layers = N <= k - 1: "dense_blocks", Gated DeltaNet
    beside the dense MLP) the first group, its N dense layers scanned first; a last group of
    num_layers mod k layers (Kimi-Linear-48B-A3B's 27 = 6 x 4 + 3)."""
    scan = partial(jax.lax.scan, unroll=unroll)
    k, layers = cfg.deltanet.full_attention_interval, cfg.num_layers
    n = 0 if params.dense_blocks is None else cfg.moe.first_dense_layers
    linear_step, full_step = make_step("linear_blocks"), make_step("blocks")
    rows = lambda t, start, count: jax.tree.map(lambda a: a[start:start + count], t)  # noqa: E731
    pieces, at = [], {"layer": 0, "linear_blocks": 0, "blocks": 0}  # (the next layer, each stack's next row)

    def run(x, stack, count, step=None):  # the next `count` layers, all of `stack` (step: one, not scanned)
        p, s = rows(getattr(params, stack), at.get(stack, 0), count), rows(xs, at["layer"], count)
        if step is None:
            x, ys = scan(make_step(stack) if stack == "dense_blocks" else linear_step, x, (p, s))
        else:
            x, ys = step(x, jax.tree.map(lambda a: a[0], (p, s)))
            ys = jax.tree.map(lambda a: a[None], ys)
        pieces.append(Piece(count, ys))
        at["layer"] += count
        at[stack] = at.get(stack, 0) + count
        return x

    def apart(x, dense: int, linear: int):  # one group: `dense` dense layers, `linear` others, its softmax one
        if dense:
            x = run(x, "dense_blocks", dense)
        if linear:
            x = run(x, "linear_blocks", linear)
        return run(x, "blocks", 1, full_step)

    if n:
        x = apart(x, n, k - 1 - n)
    g = (layers - at["layer"]) // k
    if g:
        x, piece = _groups(scan, linear_step, full_step, x,
                           rows(params.linear_blocks, at["linear_blocks"], g * (k - 1)),
                           rows(params.blocks, at["blocks"], g), rows(xs, at["layer"], g * k), g, k)
        pieces.append(piece)
        at.update(layer=at["layer"] + g * k, linear_blocks=at["linear_blocks"] + g * (k - 1), blocks=at["blocks"] + g)
    if at["layer"] < layers:
        x = apart(x, 0, layers - at["layer"] - 1)
    return x, _in_order(pieces, fill)


def shared_scan(cfg: ModelConfig, params: Params, make_step: Callable, x: Array, xs, unroll=1, fill: bool = False):
    """`scan_layers` of a model with model.kv_shared_layers: the layers before them (`blocks`,
    `local_blocks`), whose keys and values come out of their steps on full sequences ("shared_k.<stack>",
    "shared_v.<stack>": the last layer of each stack's are its source's), then the shared layers' stacks
    as `blocks` and `local_blocks` (make_step(stack, (k, v) or None: the cached passes read the source's
    cache)). The outputs are in layer order, the sources' keys and values taken out."""
    n = cfg.num_layers - cfg.kv_shared_layers
    first = params._replace(shared_blocks=None, shared_local_blocks=None)
    x, ys = scan_layers(cfg, first, lambda stack: make_step(stack, None), x, jax.tree.map(lambda a: a[:n], xs),
                        unroll, fill)
    local = local_layers(cfg)[:n]
    sources = {}
    for stack, mine in (("local_blocks", True), ("blocks", False)):
        if f"shared_k.{stack}" in ys:  # (statistics' filled outputs: every layer's place, else the stack's own)
            last = max(i for i, m in enumerate(local) if m == mine) if fill else -1
            sources[stack] = tuple(ys.pop(f"shared_{c}.{stack}")[last] for c in "kv")
    rest = first._replace(blocks=params.shared_blocks, local_blocks=params.shared_local_blocks)
    x, ys_rest = scan_layers(cfg, rest, lambda stack: make_step("shared_" + stack, sources.get(stack)), x,
                             jax.tree.map(lambda a: a[n:], xs), unroll, fill)
    return x, {name: jnp.concatenate([y[name] for y in (ys, ys_rest) if name in y]) for name in {**ys, **ys_rest}}


def pipelined_blocks(cfg: ModelConfig, rules: Rules, params: Params, x: Array, positions: Array,
                     segment_ids: Optional[Array], batch: int, microbatches: int) -> Array:
    """The blocks over the residual stream x [tokens, d] as a pipeline over the stage axes
    (`model.pipeline`): each stage a scan over its slice of the layers, `microbatches` of the
    batch flowing through them."""
    mb, inside = batch // microbatches, rules.in_stages()  # (the batch not split over the stages in them)

    def stage(p, windows, x, pos, seg):
        step = layer_step(cfg, inside, mb, positions if pos is None else pos, seg)
        return jax.lax.scan(step, x, (p, PerLayer(window=windows)), unroll=cfg.scan_unroll)[0]

    per_sequence = [positions if positions.ndim == 2 else None, segment_ids]
    return pipeline(rules, stage, params.blocks, windows(cfg), x, per_sequence, batch, microbatches,
                    remat=cfg.pipeline_remat)


def windows(cfg: ModelConfig) -> Optional[Array]:
    """Each layer's window as a scanned int32 [layers] (`layer_windows`: 0 global, > 0 a sliding
    window, < 0 a chunk), or None when every layer is global and alike (no model.sliding_window or
    model.attention_chunk; with model.global_nope the zeros, which make the layers NoPE)."""
    windows = layer_windows(cfg)
    return jnp.asarray(windows, jnp.int32) if any(windows) or cfg.global_nope else None
