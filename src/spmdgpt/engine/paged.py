"""The engine's device side: a pool of KV pages and the one compiled step over it.

The pool holds, for every layer, what the attention unit caches (`Unit.cache`: k and v for
multi-head and grouped-query attention, the latent and RoPE key for MLA) cut into pages of
`page_size` tokens, in one canonical layout per array: [layers, pages, page_size, ...the rest of
the unit's per-token shape] (the unit's batch axis becomes the page axis, its sequence axis the
offset in the page). Page 0 is the null page: page tables are padded with it, padding tokens
write there, and nothing reads it unmasked. A hybrid's Gated DeltaNet layers keep no pages: what
they carry (`Unit.state`: the state and the convolution's last inputs) is per sequence whatever its
length, so the pool holds it per slot ([their layers, slots + 1, ...]; `Rows.slot` says each row's,
the last slot is the null one that padding rows write), zero for a sequence's first tokens.
DeepSeek-V4's compressed layers (model.csa.pattern's C and H) keep their entries in pages too,
arrays of their own indexed by the same page tables: each compressor (`csa.compressors`) of rate m
holds page_size / m entries a page ("entries.<name>" [its kind's layers, pages, page_size / m, h],
entry e of a sequence at page e m // page_size), so page_size is a multiple of every rate
(`scheduler.page_size_error`); and per slot the window being filled ("window.<name>.kv", ".gate"
[its kind's layers, slots + 1, c m, c, h], `csa.window_entries`), zero for a sequence's first tokens
as a Gated DeltaNet state is.

One step (`Step`) takes a fixed token budget in two groups of rows, so that no prompt length or
arrival pattern changes a shape:

- decode: one token for each of `slots` rows (a running sequence's last sampled token, or
  position -1 for an idle slot);
- prefill: `prefills` rows of `chunk` tokens each (a chunk of a prompt, padded with position -1).

For each layer, each group gathers its rows' pages into the unit's own cache layout (a view of
capacity pages_per_seq x page_size, then `chunk` or 1 empty places where the unit writes the new
keys and values), runs the model's one `block` on it (its cached path: the queries attend over
the view under the mask of the query and key positions, causal inside a chunk), and scatters the
new entries back into the pool at their pages and offsets. The gather is the path that runs on
every backend; its cost is a copy of each row's whole page list per layer and step. On a GPU or a
TPU the decode rows instead write their keys and values and attend by the platform's
paged-attention kernel, which reads the pages in place (`Step`'s kernel, `pool_layouts`). Then the
last token of each row is sampled with the row's own parameters and PRNG stream: row r's key for
its i-th new token is fold_in(fold_in(key(seed), stream), i), so a seeded request samples the
same tokens whatever else runs beside it.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from spmdgpt.config import ModelConfig, compress_kinds, global_stack, linear_layers, local_layers, stack_config
from spmdgpt.mesh.sharding import Rules, platform
from spmdgpt.model import hyper, lora
from spmdgpt.model.attention import LayerCache
from spmdgpt.model.blocks import PerLayer, block, scan_layers, windows
from spmdgpt.model.context import unflatten
from spmdgpt.model.csa import compressors, kinds_present, layer_kinds
from spmdgpt.model.head import unembed
from spmdgpt.model.kernels import causal_mask, paged_decode_attention, window_mask
from spmdgpt.model.layers import dtype_of, norm
from spmdgpt.model.layers import pick_rows as _pick
from spmdgpt.model.loss import mtp_input
from spmdgpt.model.params import Params, block_units
from spmdgpt.model.stages import whole_stack
from spmdgpt.model.transformer import scan_inputs

Array = jax.Array


class Layout(NamedTuple):
    """How one cached array of the unit maps onto pages."""

    seq_axis: int  # the sequence axis in the unit's per-layer shape [batch, ...]
    rest: tuple  # the per-token shape (the unit's shape without batch and sequence)
    logical: tuple  # the per-token logical axes
    lead: int = 0  # axes of `rest` the pool holds before its layer axis (the paged kernels' keys and values:
    #   [heads, layers, pages, page_size, head_dim], so that [heads, layers x pages, ...] is a free reshape)


def states(cfg: ModelConfig) -> dict:
    """{name: (per-sequence shape, logical axes, dtype)} of what a hybrid's Gated DeltaNet layers
    keep per sequence (`Unit.state`); {} for a model without them."""
    if not any(linear_layers(cfg)):
        return {}
    attention, _ = block_units(cfg, "linear_blocks")
    return {name: (shape[1:], logical[1:], jnp.dtype(dtype) if dtype else dtype_of(cfg.compute_dtype))
            for name, (shape, logical, dtype) in attention.state(cfg, 1).items()}


def entry_arrays(cfg: ModelConfig, pages: int, page_size: int, slots: int) -> dict:
    """{name: (shape, logical axes)} of DeepSeek-V4's compressed layers' pool arrays (module docstring;
    {} for a model without them): per compressor "entries.<name>" [layers, pages, page_size / m, h] and
    the window states "window.<name>.kv", "window.<name>.gate" [layers, slots + 1, c m, c, h], its kind's
    layers each."""
    kinds, out = compress_kinds(cfg), {}
    for name, (kind, rate, c, h, axis) in compressors(cfg).items():
        n = kinds.count(kind)
        out[f"entries.{name}"] = ((n, pages, page_size // rate, h), ("layers", None, None, axis))
        for part in ("kv", "gate"):
            out[f"window.{name}.{part}"] = ((n, slots + 1, c * rate, c, h), ("layers", None, None, None, axis))
    return out


def entry_index(cfg: ModelConfig) -> Optional[np.ndarray]:
    """Each layer's index in each compressor's pool arrays (`entry_arrays`), int32 [layers, compressors]:
    its place among the layers of the compressor's kind, -1 in a layer of another kind; None without
    compressed layers."""
    kinds, table = compress_kinds(cfg), compressors(cfg)
    if not table:
        return None
    return np.asarray([[kinds[:i].count(kind) if k == kind else -1 for kind, *_ in table.values()]
                       for i, k in enumerate(kinds)], np.int32)


def pool_index(cfg: ModelConfig) -> np.ndarray:
    """Each layer's index in the pool arrays of its kind: the layer itself, or in a hybrid its
    place among the layers of its kind (the softmax layers' pages, the Gated DeltaNet layers'
    states), in a model with a global stack among its stack's layers (the local layers' pages, the
    global ones'); a layer of model.kv_shared_layers the index of the last earlier layer of its kind,
    whose pages it reads (it keeps none)."""
    linear = linear_layers(cfg) if any(linear_layers(cfg)) else local_layers(cfg)
    n = cfg.num_layers - cfg.kv_shared_layers
    return np.asarray([linear[:min(i, n)].count(kind) - (i >= n) for i, kind in enumerate(linear)], np.int32)


def paged_stacks(cfg: ModelConfig) -> tuple:
    """The parameter stacks whose layers keep pages: "blocks", and "local_blocks" beside it where the
    global layers' keys and values have their own shape (`config.global_stack`, Gemma 4's)."""
    return ("blocks", "local_blocks") if global_stack(cfg) else ("blocks",)


def paged_layers(cfg: ModelConfig, drafts: int = 0) -> dict:
    """{stack: how many layers of it keep pages} (`paged_stacks`): "blocks" the softmax layers (a
    global stack's G layers) and the first `drafts` multi-token-prediction modules, "local_blocks" a
    global stack's local layers; of those, the layers before model.kv_shared_layers' only."""
    n = cfg.num_layers - cfg.kv_shared_layers
    linear, local = linear_layers(cfg)[:n], local_layers(cfg)[:n]
    return {"blocks": linear.count(False) - sum(local) + drafts, "local_blocks": sum(local)}


def pooled(stack: str) -> str:
    """The prefix of a stack's pool arrays ("local." for "local_blocks"; the others' none: a
    multi-token prediction module's pages are the blocks' pool's, after its layers)."""
    return "local." if stack == "local_blocks" else ""


def layouts(cfg: ModelConfig, stack: str = "blocks") -> dict:
    """{name: Layout} of what the attention unit of parameter stack `stack` caches (`Unit.cache`);
    the sequence axis is the one whose length follows the capacity."""
    attention, _ = block_units(cfg, stack)
    seen = stack_config(cfg, stack)
    one, two = attention.cache(seen, 1, 1), attention.cache(seen, 1, 2)
    out = {}
    for name, (shape, logical) in one.items():
        axis = next(i for i, (a, b) in enumerate(zip(shape, two[name][0], strict=True)) if a != b)
        keep = [i for i in range(1, len(shape)) if i != axis]
        out[name] = Layout(axis, tuple(shape[i] for i in keep), tuple(logical[i] for i in keep))
    return out


def pool_layouts(cfg: ModelConfig, kernel: Optional[str] = None, stack: str = "blocks") -> dict:
    """{name: Layout} of the pool's arrays: the unit's (`layouts`), but as a paged-attention
    kernel reads keys and values (`Step`'s kernel): the GPU's head-first ([heads, layers, pages,
    page_size, head_dim]); the TPU's one array "kv" whose heads interleave keys and values (key
    head i at 2i, its value at 2i + 1: `ragged_paged_attention`'s pages)."""
    units = layouts(cfg, stack)
    if kernel == "gpu":
        return {name: lay._replace(lead=1) for name, lay in units.items()}
    if kernel == "tpu":
        k = units["k"]
        return {"kv": k._replace(rest=(2 * k.rest[0],) + k.rest[1:])}
    return units


def init_pool(cfg: ModelConfig, rules: Rules, pages: int, page_size: int, drafts: int = 0, slots: int = 0,
              kernel: Optional[str] = None) -> dict:
    """An empty pool: {name: [layers, pages, page_size, ...rest]} in the compute dtype (a paged
    kernel's keys and values as `pool_layouts` lays them out), the heads split as the rule table
    splits them, the pages whole on every device. The layers: the model's (a
    hybrid's softmax-attention layers), then the first `drafts` multi-token-prediction modules'
    (speculative decoding's drafter). A hybrid's Gated DeltaNet layers add {name: [their layers,
    slots + 1, ...]}: each slot's state, and a null slot (`slots`) that idle rows write."""
    linear, counts = linear_layers(cfg), paged_layers(cfg, drafts)
    paged = {pooled(stack) + name: jnp.zeros(lay.rest[:lay.lead] + (counts[stack], pages, page_size)
                                             + lay.rest[lay.lead:], dtype_of(cfg.compute_dtype),
                                             out_sharding=rules.spec(*lay.logical[:lay.lead], "layers", None, None,
                                                                     *lay.logical[lay.lead:]))
             for stack in paged_stacks(cfg) for name, lay in pool_layouts(cfg, kernel, stack).items()}
    entries = {name: jnp.zeros(shape, dtype_of(cfg.compute_dtype), out_sharding=rules.spec(*logical))
               for name, (shape, logical) in entry_arrays(cfg, pages, page_size, slots).items()}
    return {**paged, **entries, **{name: jnp.zeros((sum(linear), slots + 1) + shape, dtype,
                                                   out_sharding=rules.spec("layers", None, *logical))
                                   for name, (shape, logical, dtype) in states(cfg).items()}}


def pool_bytes(cfg: ModelConfig, pages: int, page_size: int, drafts: int = 0, slots: int = 0) -> int:
    """Bytes of a pool of `pages` pages (all layers, all cached arrays: DeepSeek-V4's compressed entries
    too), with a hybrid's states and the compressed layers' window states for `slots` slots."""
    linear, counts = linear_layers(cfg), paged_layers(cfg, drafts)
    paged = sum(counts[stack] * sum(int(np.prod(lay.rest)) for lay in layouts(cfg, stack).values())
                for stack in paged_stacks(cfg)) * pages * page_size * dtype_of(cfg.compute_dtype).itemsize
    entries = sum(int(np.prod(shape)) for shape, _ in entry_arrays(cfg, pages, page_size, slots).values())
    return paged + entries * dtype_of(cfg.compute_dtype).itemsize + sum(linear) * (slots + 1) * sum(
        int(np.prod(shape)) * dtype.itemsize for shape, _, dtype in states(cfg).values())


class Rows(NamedTuple):
    """One group of a step's rows (decode: t = 1; prefill: t = chunk). Host arrays, int32."""

    tokens: Array  # [b, t]
    positions: Array  # [b, t]: each token's position, -1 for padding (never attended, written to page 0)
    table: Array  # [b, pages_per_seq]: the row's pages in order (0: none)
    cached: Array  # [b]: tokens of the row already in the pool (its keys at positions 0..cached-1)
    last: Array  # [b]: the index in t of the token whose next token is sampled
    ahead: Array  # [b]: the token after the row's last one where known (a prompt's next chunk), else -1 (the
    #   token sampled now): what the drafter reads at the last place (speculative decoding only)
    slot: Array  # [b]: the engine slot the row's sequence holds (a hybrid's Gated DeltaNet states), the null
    #   slot for padding rows


class Draw(NamedTuple):
    """Each row's sampling parameters (float32 / int32 / uint32 [b])."""

    temperature: Array  # <= 0: greedy
    top_k: Array  # 0: no filter
    top_p: Array  # 1: no filter
    seed: Array  # the seed's low 32 bits
    stream: Array  # the request's stream (its choice index)
    index: Array  # which new token of the stream this is
    seed_high: Array  # the seed's high 32 bits (a 64-bit seed; 0 for one below 2**32)
    allowed: Array  # uint32 [b, words]: bit i % 32 of word i // 32 set where the next token may be id i (a
    #   structured output's grammar, `grammar.Constraint`); words 0: no masks in the program
    adjust_ids: Array  # int32 [b, k]: ids whose logits get adjust added (logit_bias, frequency and presence
    adjust: Array  # float32 [b, k]    penalties: `scheduler._adjustments`); padding: id 0, 0.0; k 0: none
    adapter: Array  # int32 [b]: the LoRA adapter the row's request asked for (0: the base; `lora.Stacked`)


def row_keys(seed: Array, stream: Array, index: Array, seed_high: Optional[Array] = None) -> Array:
    """fold_in(fold_in(key(seed), stream), index) for each row; key(seed) of the 64-bit seed
    seed_high * 2**32 + seed: threefry's key data [high, low] (what jax.random.key makes of a
    64-bit seed; key(seed) itself for one below 2**32)."""
    high = jnp.zeros_like(seed) if seed_high is None else seed_high

    def key(s, h, r, i):
        k = jax.random.wrap_key_data(jnp.stack([h, s]).astype(jnp.uint32), impl="threefry2x32")
        return jax.random.fold_in(jax.random.fold_in(k, r), i)

    return jax.vmap(key)(seed, high, stream, index)


def _ordered(x: Array) -> Array:
    """float32 -> uint32 in the same order (-inf lowest), so that a threshold can be bisected on bits."""
    i = jax.lax.bitcast_convert_type(x, jnp.int32)
    i = jnp.where(i < 0, i ^ 0x7FFFFFFF, i)
    return jax.lax.bitcast_convert_type(i, jnp.uint32) ^ jnp.uint32(0x80000000)


def _threshold(keys: Array, enough) -> Array:
    """Per row, the largest t in uint32 such that enough(keys >= t) holds ([b, n] keys; enough is
    monotone: true at t = 0), by bisection on the 32 bits: exact, no sort."""
    def body(_, bounds):
        lo, hi = bounds
        mid = lo + (hi - lo) // 2 + (hi - lo) % 2
        ok = enough(keys >= mid[:, None])
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid - 1)

    hi = jnp.max(keys, axis=-1)
    return jax.lax.fori_loop(0, 32, body, (jnp.zeros_like(hi), hi))[0]


def _unit(temperature: Array) -> Array:
    """Each row's temperature as the divisor of its logits (greedy rows, 0: 1)."""
    return jnp.where(temperature > 0, temperature, 1.0)


def limited(logits: Array, vocab_limit: int) -> Array:
    """Logits [..., vocab] with the ids past vocab_limit (the table's padding) at -inf."""
    return jnp.where(jnp.arange(logits.shape[-1]) < vocab_limit, logits, -jnp.inf)


def allowed_only(logits: Array, allowed: Array) -> Array:
    """Logits [b, vocab] with the ids each row's bitmask (uint32 [b, words]) leaves out at -inf; a step
    where every row allows every id (no structured output running) skips it."""
    b, vocab = logits.shape

    def mask(logits):
        as_bytes = jax.lax.bitcast_convert_type(allowed, jnp.uint8).reshape(b, -1)  # (little-endian words)
        bits = jnp.unpackbits(as_bytes, axis=-1, bitorder="little")[:, :vocab]
        return jnp.where(jax.sharding.reshard(bits == 1, jax.typeof(logits).sharding.spec), logits, -jnp.inf)

    everyone = jnp.all(jax.sharding.reshard(allowed, P(None, None)) == jnp.uint32(2**32 - 1))  # (one branch everywhere)
    return jax.lax.cond(everyone, lambda x: x, mask, logits)


def adjusted(logits: Array, ids: Array, values: Array) -> Array:
    """Logits [b, vocab] with values [b, k] added at ids [b, k] of each row (OpenAI's logit_bias and
    penalties); a step where every value is 0 skips it."""
    def add(logits):
        out = jax.vmap(lambda row, i, v: row.at[i].add(v))(logits, ids, values)
        return jax.sharding.reshard(out, jax.typeof(logits).sharding.spec)

    anything = jnp.any(jax.sharding.reshard(values, P(None, None)) != 0)  # (one branch everywhere)
    return jax.lax.cond(anything, add, lambda x: x, logits)


def filtered(logits: Array, temperature: Array, top_k: Array, top_p: Array, vocab_limit: int,
             allowed: Optional[Array] = None, adjust: Optional[tuple] = None):
    """(the argmax [b], the logits over the temperature [b, vocab] with what top-k and top-p filter
    out at -inf): the distribution `sample_rows` draws from (see there). `adjust`: (ids, values) added
    to each row's logits first (`Draw.adjust`); `allowed`: each row's bitmask of the ids it may take
    (`Draw.allowed`)."""
    if adjust is not None and adjust[0].shape[-1]:
        logits = adjusted(logits, *adjust)
    logits = limited(logits, vocab_limit)  # never a padding id
    if allowed is not None and allowed.shape[-1]:
        logits = allowed_only(logits, allowed)
    greedy = jnp.argmax(logits, axis=-1)

    def top_k_filter(logits):
        ranks = _ordered(logits)
        kth = _threshold(ranks, lambda kept: jnp.sum(kept, axis=-1) >= top_k)
        return jnp.where((top_k[:, None] > 0) & (ranks < kth[:, None]), -jnp.inf, logits)

    # (each cond's predicate from a replicated copy, so that every device takes the same branch:
    # reduced from the rows' shards, devices of a data 2 x model 4 mesh diverged into different
    # collectives and hung, on 8 CPU devices)
    everywhere = lambda a: jax.sharding.reshard(a, P(None))  # noqa: E731
    logits = jax.lax.cond(jnp.any(everywhere(top_k) > 0), top_k_filter, lambda x: x, logits)
    scaled = logits / jnp.maximum(temperature, 1e-6)[:, None]

    def top_p_filter(scaled):
        probs = jax.nn.softmax(scaled, axis=-1)
        ranks = jax.lax.bitcast_convert_type(probs, jnp.uint32)  # (non-negative floats: their bits are in order)
        cut = _threshold(ranks, lambda kept: jnp.sum(jnp.where(kept, probs, 0), axis=-1) >= top_p)
        return jnp.where(ranks >= cut[:, None], scaled, -jnp.inf)

    return greedy, jax.lax.cond(jnp.any(everywhere(top_p) < 1), top_p_filter, lambda x: x, scaled)


def _gumbel_max(scaled: Array, keys: Array) -> Array:
    noise = jax.vmap(lambda k: jax.random.gumbel(k, (scaled.shape[-1],), jnp.float32))(keys)
    return jnp.argmax(scaled + jax.sharding.reshard(noise, jax.typeof(scaled).sharding.spec), axis=-1)


def sample_rows(logits: Array, keys: Array, temperature: Array, top_k: Array, top_p: Array,
                vocab_limit: int, allowed: Optional[Array] = None, adjust: Optional[tuple] = None) -> Array:
    """One token per row of float32 logits [b, vocab], each row with its own temperature (<= 0:
    the argmax), top-k (0: none; ties with the k-th kept) and top-p (1: none; the smallest set of
    most likely tokens whose probability reaches top_p), by Gumbel-max on its own key. The filters'
    thresholds are found by bisection on the values' bits (a sort of the vocabulary costs ~75 ms a
    step for 16 rows of 50k on a CPU) and skipped when no row asks for them."""
    greedy, scaled = filtered(logits, temperature, top_k, top_p, vocab_limit, allowed, adjust)
    return jnp.where(temperature <= 0, greedy, _gumbel_max(scaled, keys)).astype(jnp.int32)


def verify(logits: Array, drafts: Array, keys: Array, temperature: Array, top_k: Array, top_p: Array,
           vocab_limit: int):
    """Speculative decoding's check of a row's drafts: logits [b, n, vocab] (float32) at the n
    places of a row that read [its last token, drafts [b, n - 1]], keys [b, n] (place j's: the
    row's key of its (index + j)-th token) -> (tokens [b, n], count [b]): each row's first
    count - 1 tokens are the drafts it accepted, the next one the token sampled where the first
    draft was refused (or after the last one); the places after are undefined.

    The drafts are a deterministic drafter's (the multi-token-prediction modules' argmax), so the
    standard rule (Leviathan et al. 2023; Chen et al. 2023) with a point-mass draft distribution
    reads: draft d at place j is accepted with probability p_j(d), p_j the row's distribution there
    (`filtered`: temperature, top-k, top-p); where it is refused, the token is drawn from p_j
    without d, renormalised; each output token is then distributed exactly as p_j. Greedy rows
    (temperature <= 0) accept a draft equal to the argmax, so their tokens are plain decoding's."""
    b, n, vocab = logits.shape
    flat = jnp.reshape(logits, (b * n, vocab))
    by_row = lambda a: jax.sharding.reshard(jnp.reshape(a, (-1,)), P(jax.typeof(flat).sharding.spec[0]))  # noqa: E731
    each = lambda a: by_row(jnp.broadcast_to(a[:, None], (b, n)))  # noqa: E731  (a row's value at each place)
    greedy, scaled = filtered(flat, each(temperature), each(top_k), each(top_p), vocab_limit)
    d = by_row(jnp.pad(drafts, ((0, 0), (0, 1)), constant_values=-1))  # (no draft after the last place)
    is_d = jnp.arange(vocab)[None] == d[:, None]
    p_d = jnp.sum(jnp.where(is_d, jax.nn.softmax(scaled, axis=-1), 0), axis=-1)
    keys = by_row(keys)
    u = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(k, 1), (), jnp.float32))(keys)
    argmax_rows = each(temperature) <= 0
    accept = (d >= 0) & jnp.where(argmax_rows, d == greedy, u < p_d)
    other = jnp.where(argmax_rows, greedy, _gumbel_max(jnp.where(is_d, -jnp.inf, scaled), keys))
    by_place = lambda a: jax.sharding.reshard(jnp.reshape(a, (b, n)), P(jax.typeof(flat).sharding.spec[0], None))  # noqa: E731
    count = jnp.sum(jnp.cumprod(by_place(accept).astype(jnp.int32), axis=1), axis=1) + 1
    tokens = jnp.where(jnp.arange(n)[None] < count[:, None] - 1, by_place(d), by_place(other))
    return tokens.astype(jnp.int32), count.astype(jnp.int32)


def _view(pool: Array, layer: Array, table: Array, lay: Layout, rules: Rules) -> Array:
    """Layer `layer`'s pages of each row (table [b, m]) in the unit's cache layout, capacity m x
    page_size (the table's last pages are the null page: room where the unit writes the step's
    keys and values)."""
    b, m = table.shape
    lead = lay.lead
    spec = rules.spec(*lay.logical[:lead], "batch", None, None, *lay.logical[lead:])
    rows = pool.at[(slice(None),) * lead + (layer, table)].get(out_sharding=spec)  # [b, m, page_size, ...rest]
    rows = jnp.moveaxis(rows, tuple(range(lead)), tuple(range(3, 3 + lead)))  # (a head-first pool's)
    rows = jnp.reshape(rows, (b, m * pool.shape[lead + 2]) + lay.rest,
                       out_sharding=rules.spec("batch", None, *lay.logical))
    return jnp.moveaxis(rows, 1, lay.seq_axis)


def _entries(arrays: Array, lay: Layout, capacity: int, t: int, rules: Rules) -> Array:
    """The view's new entries (places capacity..capacity + t of `arrays`, the unit's layout) as
    [b * t, ...rest]."""
    new = jnp.moveaxis(arrays, lay.seq_axis, 1)[:, capacity:capacity + t]  # [b, t, ...rest]
    return jnp.reshape(new, (-1,) + lay.rest, out_sharding=rules.spec("batch", *lay.logical))


def _put(pool: Array, layer: Array, new: Array, lay: Layout, pages: Array, offsets: Array, rules: Rules) -> Array:
    """The pool with entries new [n, ...rest] written into layer `layer` at pages and offsets [n]."""
    new = jax.sharding.reshard(new.astype(pool.dtype), rules.spec(None, *lay.logical))
    new = jnp.moveaxis(new, tuple(range(1, 1 + lay.lead)), tuple(range(lay.lead)))  # (a head-first pool's)
    return pool.at[(slice(None),) * lay.lead + (layer, pages, offsets)].set(
        new, out_sharding=jax.typeof(pool).sharding.spec)


class Group(NamedTuple):
    """One group of a step's rows on the devices, with what every layer of it needs."""

    rows: Rows
    draw: Draw
    capacity: int  # the view's places before the row's new tokens (pages_per_seq x page_size)
    table: Array  # [b, pages_per_seq + room]: the rows' pages, then null pages where the new entries go
    k_pos: Array  # [b, capacity + room x page_size]: each place's key position (-1: none)
    mask: Array  # [b, t, capacity + room x page_size]: which places each token attends to
    where: tuple  # ([b * t] pages, [b * t] offsets): where the rows' new entries go in the pool
    decode: bool  # the decode rows (one query each without drafts: what a paged kernel attends)
    select: Optional[Array] = None  # [b * t, K]: each token's LoRA adapter, one-hot (none: no adapters stacked)
    seen: Optional[Array] = None  # [b, capacity + room x page_size]: each place's key position once this step's
    # entries are in the pages (model.kv_shared_layers' layers read their source's pages so, -1: none)


class Step:
    """The compiled step: (params, pool, decode Rows, prefill Rows, decode Draw, prefill Draw) ->
    (the pool updated, per group (tokens [b, n], count [b], log-probabilities [b, n] of the model's
    distribution, the same at the row's temperature [b, n] (greedy rows: 1), drafts [b, D]): a row's
    first `count` tokens are new; the pool donated and updated in place in the layer
    loop's carry. A group that has no row this step is left out of the program (`run`'s static
    `groups`: three programs at most).

    With `drafts` = D > 0 (speculative decoding from the model's multi-token-prediction modules,
    `model.mtp`), a decode row reads its last token and its D drafts, `verify` keeps the drafts
    the model agrees with and samples one token more (n = D + 1 places, count 1..D + 1), and after
    every group the first D modules run over its rows (their own pages in the pool, layers
    num_layers..num_layers + D - 1) and draft the row's next D tokens by their argmax; a prefill
    row samples one token (n = 1) and drafts after it.

    With `kernel` ('gpu' or 'tpu', `kernels.paged_kernel_error` permitting), the decode rows'
    attention layers write their keys and values into the pool and attend over their pages by
    the platform's paged-attention kernel (`kernels.paged_decode_attention`), which reads each
    page where it lies, with no gathered copy; the pool then keeps keys and values as that kernel
    reads them (`pool_layouts`), all layers' pages one page range for it (layer l's page i: l x
    pages + i). Prefill rows gather as before. A kernel of another platform than the mesh's runs in
    Pallas' interpreter (a CPU's tests)."""

    def __init__(self, cfg: ModelConfig, rules: Rules, page_size: int, vocab_limit: int, drafts: int = 0,
                 kernel: Optional[str] = None, adapters: int = 0):
        self.cfg, self.rules, self.page_size, self.vocab_limit = cfg, rules, page_size, vocab_limit
        self.drafts, self.kernel = drafts, kernel
        self.adapters = adapters  # LoRA adapters stacked in the parameters (`lora.Stacked`), each row choosing one
        self.interpret = kernel is not None and kernel != platform()
        self.layouts = {stack: layouts(cfg, stack) for stack in paged_stacks(cfg)}
        self.states = states(cfg)
        self.compressors = compressors(cfg)  # (DeepSeek-V4's compressed layers: their entries' pool arrays)
        # (the pool's per-slot arrays: the Gated DeltaNet states, the compressed layers' windows)
        self.slot_arrays = {*self.states, *(n for n in entry_arrays(cfg, 1, page_size, 0) if n.startswith("window."))}
        # (the unit's arrays, or as the kernel reads them; a global stack's local layers' under "local.")
        self.stacks = {stack: pool_layouts(cfg, kernel, stack) for stack in paged_stacks(cfg)}
        self.pools = self.stacks["blocks"]
        self.run = jax.jit(self._step, donate_argnums=1, static_argnames="groups")

    def _group(self, rules: Rules, rows: Rows, draw: Draw, decode: bool) -> Group:
        ps = self.page_size
        rows = Rows(*(jax.sharding.reshard(a, rules.spec("batch", *([None] * (a.ndim - 1)))) for a in rows))
        t = rows.tokens.shape[1]
        capacity = rows.table.shape[1] * ps
        room = -(-t // ps)  # null pages after the row's own: where the unit writes the new entries
        table = jnp.pad(rows.table, ((0, 0), (0, room)))
        slots = jnp.arange(capacity + room * ps, dtype=jnp.int32)
        k_pos = jnp.where(slots[None] < rows.cached[:, None], slots[None], -1)
        k_pos = jax.lax.dynamic_update_slice_in_dim(k_pos, rows.positions, capacity, axis=1)
        valid = rows.positions >= 0
        # [b, t]: each token's page, by a select (a gather would lose the rows' sharding)
        index = jnp.maximum(rows.positions, 0) // ps
        hit = jnp.arange(rows.table.shape[1]) == index[..., None]
        page = jnp.sum(jnp.where(hit, rows.table[:, None], 0), axis=-1)
        where = (jnp.where(valid, page, 0).reshape(-1), (jnp.maximum(rows.positions, 0) % ps).reshape(-1))
        draw = Draw(*(jax.sharding.reshard(a, rules.spec("batch")) for a in draw))
        select = None
        if self.adapters:  # (adapter 0, the base: a row of zeros)
            one_hot = jax.nn.one_hot(draw.adapter - 1, self.adapters, dtype=jnp.float32)
            select = jnp.reshape(jnp.broadcast_to(one_hot[:, None], (rows.tokens.shape[0], t, self.adapters)),
                                 (-1, self.adapters), out_sharding=rules.spec("batch", None))
        seen = None
        if self.cfg.kv_shared_layers:  # (the rows' places up to their last new token, in the pages)
            last = jnp.max(rows.positions, axis=1, keepdims=True)
            seen = jnp.where((slots[None] < capacity) & (slots[None] <= last), slots[None], -1)
        return Group(rows, draw, capacity, table, k_pos, causal_mask(rows.positions, k_pos), where, decode, select,
                     seen)

    def _layer(self, rules, p, x: Array, pool: dict, layer, g: Group, mask: Array, stack: str, window=None,
               routes=None, inputs=None, compress=None, entries=None):
        """One block over a group's rows, reading layer `layer` of the pool and writing its new entries
        (routes: the layer's hash-routed experts of the rows' tokens, `moe.hash_routes`; inputs: the
        rows' per-layer inputs of this layer, model.per_layer_dim; compress, entries: DeepSeek-V4's, the
        layer's kind, `csa.layer_kinds`, and its place in the compressors' arrays, `entry_index`)."""
        if stack == "linear_blocks" or (stack == "dense_blocks" and self.states):  # (a hybrid's dense first
            return self._state_layer(rules, p, x, pool, layer, g, mask, routes, stack)  # layers: Gated DeltaNet)
        b, t = g.rows.tokens.shape
        if self.kernel and g.decode:
            paged = lambda q, k, v: self._paged(rules, pool, layer, g, q, k, v)  # noqa: E731
            cache = LayerCache({}, mask, jnp.int32(0), paged=paged)
            x, kv, _ = block(self.cfg, rules, p, x, g.rows.positions, b, cache, window=window, stack=stack,
                             routes=routes, layer_input=inputs)
            return x, {**pool, **kv}
        paged = "local_blocks" if stack == "local_blocks" else "blocks"
        views = self._views(pool, layer, g.table, rules, paged)
        mine = self._mine(stack, entries)  # {compressor: (whether the layer is of its kind, its index there)}
        for n, (_, at) in mine.items():
            views.update(self._compressed_views(rules, pool, n, at, g))
        x, kv, _ = block(self.cfg, rules, p, x, g.rows.positions, b,
                         LayerCache(views, mask, jnp.int32(g.capacity)),
                         window=window, stack=stack, routes=routes, layer_input=inputs, compress=compress)
        new = {n: _entries(kv[n], lay, g.capacity, t, rules) for n, lay in self.layouts[paged].items()}
        pool = self._store(pool, layer, new, g.where, rules, paged)
        for n, (is_mine, at) in mine.items():
            pool = self._compressed_store(rules, pool, n, is_mine, at, g, kv)
        return x, pool

    def _mine(self, stack: str, entries) -> dict:
        """{compressor: (traced bool: the layer is of its kind, its index in the compressor's arrays)} of
        the compressors whose kind parameter stack `stack` has (`csa.kinds_present`)."""
        if entries is None:
            return {}
        kinds = kinds_present(stack_config(self.cfg, stack))
        return {n: (entries[i] >= 0, jnp.maximum(entries[i], 0))
                for i, (n, (kind, *_)) in enumerate(self.compressors.items()) if kind in kinds}

    def _compressed_views(self, rules, pool: dict, name: str, at, g: Group) -> dict:
        """A compressor's entries in each row's pages ("entries.<name>" [b, pages_per_seq x page_size / m,
        h]) and its rows' window states ("window.<name>.kv", ".gate" [b, c m, c, h]; zero for a sequence's
        first tokens), from index `at` of its arrays."""
        *_, axis = self.compressors[name]
        rows, b = g.rows, g.rows.tokens.shape[0]
        h = pool[f"entries.{name}"].shape[-1]
        out = {f"entries.{name}": _view(pool[f"entries.{name}"], at, rows.table, Layout(1, (h,), (axis,)), rules)}
        fresh = rows.cached == 0
        for part in ("kv", "gate"):
            a = pool[f"window.{name}.{part}"].at[at, rows.slot].get(out_sharding=rules.spec("batch", None, None, axis))
            out[f"window.{name}.{part}"] = jnp.where(fresh.reshape((b, 1, 1, 1)), jnp.zeros_like(a), a)
        return out

    def _compressed_store(self, rules, pool: dict, name: str, mine, at, g: Group, kv: dict) -> dict:
        """The pool with a compressor's new entries (kv["entries.<name>"] [b, t, h], each at the token that
        completes its window: page_size / m a page, at the token's page) and its rows' new window states
        written at index `at`; a layer of another kind (`mine` False) and padding write the null page and
        the null slot."""
        _, rate, _, h, axis = self.compressors[name]
        rows = g.rows
        pos = rows.positions
        done = (mine & (pos >= 0) & ((pos + 1) % rate == 0)).reshape(-1)
        offsets = ((jnp.maximum(pos, 0) % self.page_size) // rate).reshape(-1)
        new = jnp.reshape(kv[f"entries.{name}"], (-1, h), out_sharding=rules.spec("batch", axis))
        pool = {**pool, f"entries.{name}": _put(pool[f"entries.{name}"], at, new, Layout(1, (h,), (axis,)),
                                                 jnp.where(done, g.where[0], 0), offsets, rules)}
        null = pool[f"window.{name}.kv"].shape[1] - 1
        target = jax.sharding.reshard(jnp.where(mine & jnp.any(pos >= 0, axis=1), rows.slot, null), P(None))
        for part in ("kv", "gate"):
            n = f"window.{name}.{part}"
            value = jax.sharding.reshard(kv[n].astype(pool[n].dtype), rules.spec(None, None, None, axis))
            pool[n] = pool[n].at[at, target].set(value, out_sharding=jax.typeof(pool[n]).sharding.spec)
        return pool

    def _shared_layer(self, rules, p, x: Array, pool: dict, layer, g: Group, stack: str, window=None, inputs=None):
        """A layer of model.kv_shared_layers over a group's rows: its queries over the pages of layer
        `layer` of its kind (its source's, this step's entries written), nothing written."""
        paged = stack[len("shared_"):]
        mask = causal_mask(g.rows.positions, g.seen)
        if window is not None:
            mask = mask & window_mask(g.rows.positions, g.seen, window)
        x, _, _ = block(self.cfg, rules, p, x, g.rows.positions, g.rows.tokens.shape[0],
                        LayerCache(self._views(pool, layer, g.table, rules, paged), mask, jnp.int32(g.capacity)),
                        window=window, stack=stack, layer_input=inputs)
        return x, pool

    def _views(self, pool: dict, layer, table: Array, rules, stack: str = "blocks") -> dict:
        """{the unit's name: layer `layer`'s pages of each row in its cache layout} (`_view`), of the pool
        arrays of parameter stack `stack` (`paged_stacks`)."""
        if "kv" not in self.pools:
            return {n: _view(pool[pooled(stack) + n], layer, table, lay, rules)
                    for n, lay in self.stacks[stack].items()}
        both = _view(pool["kv"], layer, table, self.pools["kv"], rules)  # [b, 2K, capacity, h]: k, v interleaved
        heads = self.pools["kv"].logical[0]
        pairs = jnp.reshape(both, (both.shape[0], both.shape[1] // 2, 2) + both.shape[2:],
                            out_sharding=rules.spec("batch", heads, None, None, "head_dim"))
        return {"k": pairs[:, :, 0], "v": pairs[:, :, 1]}

    def _store(self, pool: dict, layer, new: dict, where: tuple, rules, stack: str = "blocks") -> dict:
        """The pool with the unit's new entries ({name: [n, ...rest]}) written into layer `layer` of stack
        `stack`'s arrays at `where`'s pages and offsets."""
        if "kv" in self.pools:  # (keys and values interleaved: [n, K, 2, h] -> [n, 2K, h])
            k, v = new["k"], new["v"]
            both = jnp.stack([k, v], axis=2)
            new = {"kv": jnp.reshape(both, (k.shape[0], 2 * k.shape[1]) + k.shape[2:],
                                     out_sharding=rules.spec("batch", *self.pools["kv"].logical))}
        at = pooled(stack)
        return {**pool, **{at + n: _put(pool[at + n], layer, a, self.stacks[stack][n], *where, rules)
                           for n, a in new.items()}}

    def _paged(self, rules, pool: dict, layer, g: Group, q: Array, k: Array, v: Array):
        """A decode group's attention by the paged kernel: q, k, v [b, heads, 1, h] (q scaled) ->
        (o [b, heads, 1, h], the pool's keys and values with k and v written into layer `layer`).
        The kernel reads every layer's pages as one range (a free reshape of the pool): layer l's
        page i is l x pages + i."""
        written = self._store(pool, layer, {"k": k[:, :, 0], "v": v[:, :, 0]}, g.where, rules)
        if "kv" in self.pools:  # [layers, pages, page_size, 2K, h]
            layers, pages = written["kv"].shape[:2]
            arrays = (jnp.reshape(written["kv"], (layers * pages,) + written["kv"].shape[2:]),)
        else:  # k, v [K, layers, pages, page_size, h]
            heads, layers, pages = written["k"].shape[:3]
            arrays = tuple(jnp.reshape(written[n], (heads, layers * pages) + written[n].shape[3:]) for n in ("k", "v"))
        position = g.rows.positions[:, 0]
        lengths = jnp.where(position >= 0, position + 1, 0).astype(jnp.int32)
        o = paged_decode_attention(q[:, :, 0], arrays, g.rows.table + layer * pages, lengths, rules, self.kernel,
                                   self.interpret)
        return (jax.sharding.reshard(o[:, :, None], rules.spec("batch", "heads", "seq", "head_dim")),
                {n: written[n] for n in self.pools})

    def _state_layer(self, rules, p, x: Array, pool: dict, layer, g: Group, mask: Array, routes=None,
                     stack: str = "linear_blocks"):
        """A Gated DeltaNet layer over a group's rows: each row's state read from its slot (a zero
        state for a sequence's first tokens), run on, and written back (padding rows: to the null
        slot)."""
        rows = g.rows
        b = rows.tokens.shape[0]
        fresh = rows.cached == 0
        view = {}
        for n, (_, logical, _) in self.states.items():
            a = pool[n].at[layer, rows.slot].get(out_sharding=rules.spec("batch", *logical))
            view[n] = jnp.where(fresh.reshape((b,) + (1,) * (a.ndim - 1)), jnp.zeros_like(a), a)
        x, new, _ = block(self.cfg, rules, p, x, rows.positions, b, LayerCache(view, mask, jnp.int32(g.capacity)),
                          stack=stack, routes=routes)
        null = pool[next(iter(self.states))].shape[1] - 1
        target = jax.sharding.reshard(jnp.where(jnp.any(rows.positions >= 0, axis=1), rows.slot, null), P(None))
        pool = dict(pool)
        for n, (_, logical, _) in self.states.items():
            value = jax.sharding.reshard(new[n].astype(pool[n].dtype), rules.spec(None, *logical))
            pool[n] = pool[n].at[layer, target].set(value, out_sharding=jax.typeof(pool[n]).sharding.spec)
        return x, pool

    def _logits(self, rules, params, x: Array) -> Array:
        """Float32 logits [n, vocab] (replicated over the vocabulary) of final-normed states x [n, d]."""
        logits = unembed(self.cfg, rules, params, jax.sharding.reshard(x, rules.spec("batch", "embed")))
        return jax.sharding.reshard(logits.astype(jnp.float32), rules.spec("batch", None))

    def _step(self, params: Params, pool: dict, decode: Rows, prefill: Rows, draw_d: Draw, draw_p: Draw, *,
              groups: tuple = (True, True)):
        cfg, rules = self.cfg, self.rules.whole_sequences()
        params = whole_stack(rules, params)
        live = [self._group(rules, r, d, i == 0) for i, (r, d, on) in
                enumerate(((decode, draw_d, groups[0]), (prefill, draw_p, groups[1]))) if on]
        verifying = [i == 0 and self.drafts > 0 for i, on in enumerate(groups) if on]  # (decode rows with drafts)
        # each group's residual stream, per-layer inputs (model.per_layer_dim) and hash routes (moe.hash_layers)
        xs, inputs, routes = zip(*(scan_inputs(cfg, rules, params, g.rows.tokens) for g in live), strict=True)
        inputs = None if params.per_layer is None else inputs
        routes = None if params.hash_experts is None else routes

        def make_step(stack: str, shared=None):  # (a KV-shared layer reads its source's pages, not `shared`)
            def step(carry, layer):
                (xs, pool), (p, s) = carry, layer
                out = []
                for i, (x, g) in enumerate(zip(xs, live, strict=True)):
                    mask = g.mask if s.window is None else g.mask & window_mask(g.rows.positions, g.k_pos, s.window)
                    p_g = p if g.select is None else lora.bind(p, g.select)  # (each row's adapter)
                    inputs = None if s.inputs is None else s.inputs[i]
                    if stack.startswith("shared_"):
                        x, pool = self._shared_layer(rules, p_g, x, pool, s.index, g, stack, s.window, inputs)
                    else:
                        x, pool = self._layer(rules, p_g, x, pool, s.index, g, mask, stack, s.window,
                                              None if s.routes is None else s.routes[i], inputs, s.compress,
                                              s.entries)
                    out.append(x)
                return (tuple(out), pool), {}

            return step

        index = entry_index(cfg)
        per_layer = PerLayer(window=windows(cfg), index=jnp.asarray(pool_index(cfg)), routes=routes, inputs=inputs,
                             compress=layer_kinds(cfg), entries=None if index is None else jnp.asarray(index))
        (xs, pool), _ = scan_layers(cfg, params, make_step, (xs, pool), per_layer)
        results = []
        for h, g, checks in zip(xs, live, verifying, strict=True):
            rows, draw = g.rows, g.draw
            b, t = rows.tokens.shape
            x = unflatten(rules, norm(cfg, rules, params.ln_f, hyper.fold(cfg, rules, params.hc_head, h)), b,
                          "embed")  # [b, t, d]
            if checks:  # [last token, drafts]: the logits at every place
                flat = jnp.reshape(x, (b * t, -1), out_sharding=rules.spec("batch", None))
                logits = self._logits(rules, params, flat)
                logits = jnp.reshape(logits, (b, t, -1), out_sharding=rules.spec("batch", None, None))
                keys = jnp.stack([row_keys(draw.seed, draw.stream, draw.index + j, draw.seed_high) for j in range(t)],
                                 axis=1)
                tok, count = verify(logits, rows.tokens[:, 1:], keys, draw.temperature, draw.top_k, draw.top_p,
                                    self.vocab_limit)
                real = limited(logits, self.vocab_limit)
                picked = lambda lsm: jnp.sum(jnp.where(jnp.arange(lsm.shape[-1]) == tok[..., None], lsm, 0), -1)  # noqa: E731
                logp = picked(jax.nn.log_softmax(real))
                logp_t = picked(jax.nn.log_softmax(real / _unit(draw.temperature)[:, None, None]))
                anchor = count - 1  # the place whose next token was sampled
                new = _pick(tok, anchor)
            else:
                logits = self._logits(rules, params, _pick(x, rows.last))
                keys = row_keys(draw.seed, draw.stream, draw.index, draw.seed_high)
                new = sample_rows(logits, keys, draw.temperature, draw.top_k, draw.top_p, self.vocab_limit,
                                  draw.allowed, (draw.adjust_ids, draw.adjust))
                tok, count, anchor = new[:, None], jnp.ones_like(new), rows.last
                real = limited(logits, self.vocab_limit)
                logp = _pick(jax.nn.log_softmax(real), new)[:, None]
                logp_t = _pick(jax.nn.log_softmax(real / _unit(draw.temperature)[:, None]), new)[:, None]
            if self.drafts:
                pool, drafts = self._draft(rules, params, pool, h, g, anchor, new)
            else:
                drafts = jnp.zeros((b, 0), jnp.int32)
            # (replicated: every process of a multi-host mesh reads every row's token)
            results.append(tuple(jax.sharding.reshard(a, rules.spec(*([None] * a.ndim)))
                                 for a in (tok, count, logp, logp_t, drafts)))
        return pool, tuple(results)

    def _draft(self, rules, params, pool: dict, h: Array, g: Group, anchor: Array, new: Array):
        """The next `drafts` tokens of each row after its token `new` (sampled at place `anchor`):
        module k (from 0) reads, at each place i, module k - 1's hidden state (k = 0: the model's
        residual stream h [b * t, d]) and the token k + 1 places on, writes its entries into its
        own pages, and drafts the token after the previous draft by its argmax at the anchor.
        (Its entries at the last k places before the next step's tokens read drafts not yet
        checked: they only make the next drafts worse, never an output token wrong.)"""
        cfg, rows = self.cfg, g.rows
        b, t = rows.tokens.shape
        anchor, new = (jax.sharding.reshard(a, rules.spec("batch")) for a in (anchor, new))
        at_anchor = jnp.arange(t)[None] == anchor[:, None]
        shift = lambda a: jnp.pad(a[:, 1:], ((0, 0), (0, 1)))  # noqa: E731
        following = jnp.where(at_anchor, jnp.where(rows.ahead >= 0, rows.ahead, new)[:, None], shift(rows.tokens))
        drafts = []
        for k in range(self.drafts):
            p = jax.tree.map(lambda a, k=k: a[k], params.mtp)
            x = mtp_input(cfg, rules, params, p, h, following)
            h, pool = self._layer(rules, p.block, x, pool, cfg.num_layers + k, g, g.mask, stack="dense_blocks")
            out = unflatten(rules, norm(cfg, rules, p.ln_f, h), b, "embed")
            d = jnp.argmax(limited(self._logits(rules, params, _pick(out, anchor)), self.vocab_limit), axis=-1)
            drafts.append(d.astype(jnp.int32))
            following = jnp.where(at_anchor, drafts[-1][:, None], shift(following))
        return pool, jnp.stack(drafts, axis=1)


def shared_step(cfg: ModelConfig, rules: Rules, page_size: int, vocab_limit: int, drafts: int = 0,
                kernel: Optional[str] = None, adapters: int = 0) -> Step:
    """The `Step` of these arguments, one per rules object: engines built alike on the same mesh
    (a chat's, a sampler's, an evaluation's, a test's several) share its jitted function, so a
    program already traced and compiled for one is not traced, lowered and compiled again for the
    next. The steps live in the rules object itself (`_engine_steps`), so they, their compiled
    programs and the rules go together once nothing else holds the rules; a copy of the rules
    (`whole_sequences`, `in_stages`: another compute table) starts its own. (A module-level
    WeakKeyDictionary keyed by the rules kept them all: each Step holds its rules, so no key ever
    died; a test process then grew past the kernel's 65,530 memory maps of loaded programs and
    aborted.)"""
    key = (repr(cfg), page_size, vocab_limit, drafts, kernel, adapters)
    owner, steps = rules.__dict__.get("_engine_steps", (None, None))
    if owner is not rules:  # (none yet, or a copy's: copy.copy shares the original's attribute)
        steps = {}
        rules._engine_steps = (rules, steps)
    if key not in steps:
        steps[key] = Step(cfg, rules, page_size, vocab_limit, drafts, kernel, adapters)
    return steps[key]
