"""DeepSeek-V4's attention unit (`model.csa.q_rank` > 0): shared key/value multi-query attention,
one key/value head of model.head_dim (512) whose keys are its values, partial RoPE on the last
csa.rope_dim dimensions of each head (interleaved pairs), a learned sink per head, the grouped
low-rank output projection, and in the layers model.csa.pattern marks C or H its compressors. Over
the layers' windows (model.sliding_window) it is DeepSeek-V4's sliding-window branch. Its cache holds
one row a token ("shared_kv": the keys are the values).

    cq = RMSNorm(x w_qa) q_norm                 [R]     the query latent (q_lora_rank)
    q  = RMSNorm_head(cq w_qb)                  [N, H]  each head normalised, no scale
    kv = RMSNorm(x w_kv) kv_norm                [H]     one head, the keys and the values
    q, kv rotated on their last r dimensions (pairs 2i, 2i + 1; frequencies theta^(-2i / r))
    o  = softmax(q kv^T / sqrt(H), the head's sink) kv, its last r dimensions rotated back by the
         query's position (the values' own rotation made relative)
    out = sum_g (o's heads of group g, flattened) w_oa[g] w_ob[g]   (o_groups G, o_lora_rank O)

The compressed layers (transformers' DeepseekV4HCACompressor, DeepseekV4CSACompressor, DeepseekV4Indexer)
add entries to the keys (each also a value): an H layer one per window of m = csa.heavy_rate tokens,

    entry_w = RMSNorm(sum_{j in window w} softmax_j(x_j w_gate + bias_j) * (x_j w_kv)) norm

(the softmax over the window's tokens, per dimension), rotated at the window's first position; a C
layer (m = csa.sparse_rate) the same over twice as many slots, window w - 1's tokens through the
first of its two projections (c = 0) and window w's through the second (c = 1), the first window's
first half empty. Query i sees entry w once its window is whole, (w + 1) m - 1 <= i; in a C layer
only the csa.index_topk of those that the lightning indexer scores highest, sum_j w_ij ReLU(q_ij .
k_w / sqrt(d)), its keys k the same compression of its own (width d = index_dim), its queries q from
the query latent cq, its head weights w from x (the scores of DeepSeek-V3.2's indexer, `mla.index_scores`,
and its selection, `mla.top_keys`; it learns by its own KL loss against the attention, model.csa.index_train
and index_kl: `compressed_attention`). The compressed layers rotate by csa.compress_theta with
model.rope_scaling (the S layers by model.rope_theta unscaled). With documents (segment ids) an
entry is seen only inside the document that holds its whole span. Training scores each block of queries
(the smallest divisor of the sequence that holds the window) against its own rows, the block before's and
every entry (`banded_attention`; the dense queries x (tokens + entries) where the sequence is shorter than two
blocks or the layers' windows differ); the S layers the same without entries (the key blocks their window
cannot reach skipped; else `blocked_causal_attention`, which masks them).

The inference engine decodes the compressed layers from its pages (`engine.paged`): each compressor's
entries (`compressors`: "H", "C" and the indexer's keys "I") in pool arrays of their own, a page of
page_size tokens holding page_size / m of them, and per sequence the window being filled (`window_entries`:
the last c m tokens' contributions x w_kv and gate logits x w_gate, before the bias), so that a prefill
chunk of any length, or a decode step, makes the entries its tokens complete as one pass over the whole
sequence would (`cached_compressed`).

Shapes (D = d_model, N heads, H = head_dim, R = csa.q_rank, G = csa.out_groups, O = csa.out_rank,
m = the layer kind's rate, c = 1 (H) or 2 (C), I = csa.index_heads, d = csa.index_dim; the block stacks
a layer axis in front): w_qa [D, R], q_norm [R], w_qb [R, N, H], w_kv [D, H], kv_norm [H], sinks [N],
w_oa [G, N / G, H, O], w_ob [G, O, D]; with H layers in the pattern `heavy` (a Compressor: w_kv and
w_gate [D, 1, H], bias [m, 1, H], norm [H]), with C layers `sparse` (the same, [D, 2, H]) and `index`
(an Indexer: keys a Compressor [D, 2, d], w_q [R, I, d], w_w [D, I]). A model whose pattern mixes kinds
gives every layer the parameters of every kind it has (those of the other kinds unused there: a few
D x H matrices per layer) and picks its computation by the layer's kind (`lax.switch`). Under the FSDP rule
tables R and O are split over the data axis (logical axis "latent", as MLA's latents; D where a matrix has no
R or O), so no matrix of the unit is whole on every device.
"""

from __future__ import annotations

import dataclasses
from typing import List, NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import (
    ModelConfig,
    RopeScaling,
    compress_kinds,
    head_dim,
    layer_windows,
    moe_layers,
    stack_config,
)
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.attention import (
    UnitInputs,
    blocked_causal_attention,
    causal_blocks,
    dot_product_attention,
    probabilities,
    write_cache,
)
from spmdgpt.model.context import flatten, unflatten
from spmdgpt.model.info import matrix, residual_std, vector
from spmdgpt.model.kernels import causal_mask, window_mask
from spmdgpt.model.layers import rms, rms_normalize, rope_frequencies
from spmdgpt.model.mla import index_scores, indexer_kl, indexer_training_errors, top_keys

F32 = jnp.float32


class Compressor(NamedTuple):
    """One compressor's parameters (c = 1: an H layer's; 2: a C layer's and its indexer's two series)."""

    w_kv: jax.Array  # [D, c, h] the tokens' contributions
    w_gate: jax.Array  # [D, c, h] their gate logits
    bias: jax.Array  # [m, c, h] the gate's bias by place in the window (position_bias)
    norm: jax.Array  # [h] the entries' RMSNorm scale


class Indexer(NamedTuple):
    """A C layer's lightning indexer: its keys' compressor, its queries from the query latent, its heads' weights."""

    keys: Compressor  # [D, 2, d]
    w_q: jax.Array  # [R, I, d]
    w_w: jax.Array  # [D, I]


class Csa(NamedTuple):
    w_qa: jax.Array
    q_norm: jax.Array
    w_qb: jax.Array
    w_kv: jax.Array
    kv_norm: jax.Array
    sinks: jax.Array
    w_oa: jax.Array
    w_ob: jax.Array
    heavy: Optional[Compressor] = None  # the H layers' compressor (an H in model.csa.pattern)
    sparse: Optional[Compressor] = None  # the C layers' compressor and indexer (a C in it)
    index: Optional[Indexer] = None


def compressor_info(cfg: ModelConfig, rate: int, c: int, h: int, axis: str) -> Compressor:
    D, std = cfg.d_model, cfg.init_std
    return Compressor(w_kv=matrix((D, c, h), ("embed", None, axis), ("embed",), (axis,), std),
                      w_gate=matrix((D, c, h), ("embed", None, axis), ("embed",), (axis,), std),
                      bias=vector((rate, c, h), (None, None, axis)), norm=vector((h,), (axis,), "ones"))


def csa_info(cfg: ModelConfig) -> Csa:
    D, N, H, c = cfg.d_model, cfg.num_heads, head_dim(cfg), cfg.csa
    R, G, O = c.q_rank, c.out_groups, c.out_rank
    std = cfg.init_std
    return Csa(
        w_qa=matrix((D, R), ("embed", "latent"), ("embed",), ("latent",), std),
        q_norm=vector((R,), ("latent",), "ones"),
        w_qb=matrix((R, N, H), ("latent", "heads", "head_dim"), ("latent",), ("heads", "head_dim"), std),
        w_kv=matrix((D, H), ("embed", "head_dim"), ("embed",), ("head_dim",), std),
        kv_norm=vector((H,), ("head_dim",), "ones"),
        sinks=vector((N,), ("heads",)),
        w_oa=matrix((G, N // G, H, O), ("out_groups", "group_heads", "head_dim", "latent"),
                    ("group_heads", "head_dim"), ("latent",), std),
        w_ob=matrix((G, O, D), ("out_groups", "latent", "embed"), ("out_groups", "latent"), ("embed",),
                    residual_std(cfg)),
        **compressed_info(cfg),
    )


def compressed_info(cfg: ModelConfig) -> dict:
    """The compressors of the kinds model.csa.pattern has (`Csa`'s heavy, sparse and index; the indexer's
    axes "index_heads", "index_dim" are in no rule table: it is small, computed whole on each device)."""
    c = cfg.csa
    made = {n: compressor_info(cfg, rate, series, h, axis)
            for n, (_, rate, series, h, axis) in compressors(cfg).items()}
    out = {} if "H" not in made else {"heavy": made["H"]}
    if "C" in made:
        I, d = c.index_heads, c.index_dim
        out["sparse"] = made["C"]
        out["index"] = Indexer(keys=made["I"],
                               w_q=matrix((c.q_rank, I, d), ("latent", "index_heads", "index_dim"), ("latent",),
                                          ("index_heads", "index_dim"), cfg.init_std),
                               w_w=matrix((cfg.d_model, I), ("embed", "index_heads"), ("embed",), ("index_heads",),
                                          cfg.init_std))
    return out


def tail_frequencies(cfg: ModelConfig, compressed: bool = False) -> jax.Array:
    """The inverse frequencies [r / 2] of the rotated tail: model.rope_theta^(-2i / r) (an S layer's,
    transformers' "main" RoPE), or in a compressed layer csa.compress_theta's under model.rope_scaling
    ("compress"; YaRN's attention factor is not applied, as transformers' default 1.0 for it)."""
    r = cfg.csa.rope_dim
    if not compressed:
        return cfg.rope_theta ** (-jnp.arange(0, r, 2, dtype=F32) / r)
    return rope_frequencies(dataclasses.replace(cfg, rope_theta=cfg.csa.compress_theta), r)[0]


def rotate_tail(cfg: ModelConfig, x: jax.Array, positions: jax.Array, sign: float = 1.0,
                inv: Optional[jax.Array] = None) -> jax.Array:
    """x [b, t, ..., h] with its last csa.rope_dim dimensions rotated by position (positions [t] or
    [b, t]) in interleaved pairs (2i, 2i + 1) at the inverse frequencies inv (default an S layer's,
    `tail_frequencies`), in float32; sign=-1: rotated back."""
    r = cfg.csa.rope_dim
    inv = tail_frequencies(cfg) if inv is None else inv
    pos = positions.astype(F32) if positions.ndim == 2 else positions.astype(F32)[None]
    angle = pos[..., None] * inv  # [b or 1, t, r / 2]
    angle = jnp.reshape(angle, angle.shape[:2] + (1,) * (x.ndim - 3) + angle.shape[-1:])
    cos, sin = jnp.cos(angle), sign * jnp.sin(angle)
    tail = x[..., -r:].astype(F32)
    a, b = tail[..., 0::2], tail[..., 1::2]
    turned = jnp.reshape(jnp.stack([a * cos - b * sin, b * cos + a * sin], axis=-1), tail.shape)
    return jnp.concatenate([x[..., :-r], turned.astype(x.dtype)], axis=-1)


def csa_cache(cfg: ModelConfig, batch: int, capacity: int) -> dict:
    """What the unit caches per layer: {"shared_kv": [batch, capacity, H]}, each token's one key/value row
    (normed and rotated: the keys and the values at once, half of a key/value head pair's bytes)."""
    return {"shared_kv": ((batch, capacity, head_dim(cfg)), ("batch", None, "head_dim"))}


def compressors(cfg: ModelConfig) -> dict:
    """{name: (kind, rate m, series c, width h, logical axis of h)} of the model's compressors, in the
    order "C", "I", "H" of those its pattern has: "C" the C layers' entries, "I" their indexer's keys,
    "H" the H layers' entries (what the inference engine keeps in pages and per slot, `engine.paged`)."""
    kinds, c, H = set(compress_kinds(cfg)), cfg.csa, head_dim(cfg)
    out = {}
    if "C" in kinds:
        out["C"] = ("C", c.sparse_rate, 2, H, "head_dim")
        out["I"] = ("C", c.sparse_rate, 2, c.index_dim, "index_dim")
    if "H" in kinds:
        out["H"] = ("H", c.heavy_rate, 1, H, "head_dim")
    return out


def _compressor(p: Csa, name: str) -> Compressor:
    return {"C": lambda: p.sparse, "I": lambda: p.index.keys, "H": lambda: p.heavy}[name]()


def kinds_present(cfg: ModelConfig) -> tuple:
    """The kinds of layer ("S", "C", "H") the model has, in that order: `lax.switch`'s branches."""
    kinds = set(compress_kinds(cfg))
    return tuple(k for k in "SCH" if k in kinds)


def layer_kinds(cfg: ModelConfig) -> Optional[jax.Array]:
    """Each layer's kind as its place in its parameter stack's `kinds_present` (an MoE model's dense and MoE
    layers: `config.stack_config`), int32 [layers] (scanned with the layers: UnitInputs.compress), or None
    when each stack's layers are of one kind."""
    moe = moe_layers(cfg)
    stacks = ["dense_blocks" if any(moe) and not m else "blocks" for m in moe]
    present = {s: kinds_present(stack_config(cfg, s)) for s in set(stacks)}
    if all(len(p) == 1 for p in present.values()):
        return None
    return jnp.asarray([present[s].index(k) for s, k in zip(stacks, compress_kinds(cfg), strict=True)], jnp.int32)


def csa_attention(cfg: ModelConfig, rules: Rules, p: Csa, x: jax.Array, u: UnitInputs):
    """x [stream, D] -> ([stream, D], this layer's cache {"shared_kv"} or None, no auxiliary outputs).
    Full sequences (and a prefill, whose rows then start the cache): the xla path's blocked causal
    attention (u.window: the layer's sliding window; documents by u.segment_ids), a compressed
    layer's entries beside it (`compressed_attention`). Decode (a cache with a mask, the window's in
    it): the new rows written at cache.end, the queries over the whole cache; a compressed layer's
    entries too, from the inference engine's pages and window states (`cached_compressed`: its
    outputs "entries.<name>" and "window.<name>.*" beside "shared_kv"; another cache of a compressed
    layer is refused). A model of several kinds of layer runs this layer's by u.compress (`layer_kinds`)."""
    present = kinds_present(cfg)
    engine = u.cache is not None and any(n.startswith("entries.") for n in u.cache.arrays)
    if u.cache is not None and present != ("S",) and not engine:
        raise ValueError(f"model.csa.pattern={cfg.csa.pattern!r}: the compressed layers (C, H) decode only in the "
                         "inference engine (spmdgpt.engine), from its pages")
    if len(present) == 1:
        return _attention(cfg, rules, p, x, u, present[0])
    if engine:  # (each kind's branch gives every compressor's outputs: `_unchanged` for the other kinds')
        branches = [lambda x, kind=kind: _attention(cfg, rules, p, x, u, kind)[:2] for kind in present]
        out, new = jax.lax.switch(u.compress, branches, x)
        return out, new, {}
    if u.cache is not None or "C" not in present:
        branches = [lambda x, kind=kind: _attention(cfg, rules, p, x, u, kind)[0] for kind in present]
        return jax.lax.switch(u.compress, branches, x), None, {}

    def with_kl(x, kind):  # (full sequences in a stack with C layers: the indexer's KL loss, 0 at the other layers)
        out, _, aux = _attention(cfg, rules, p, x, u, kind)
        return out, aux.get("indexer_kl", jnp.zeros((), F32))

    out, kl = jax.lax.switch(u.compress, [lambda x, kind=kind: with_kl(x, kind) for kind in present], x)
    return out, None, {"indexer_kl": kl}


def _attention(cfg: ModelConfig, rules: Rules, p: Csa, x: jax.Array, u: UnitInputs, kind: str):
    """`csa_attention` of a layer of kind `kind` ("S", "C" or "H")."""
    dt, eps, b = x.dtype, cfg.norm_eps, u.batch
    inv = tail_frequencies(cfg, kind != "S")
    g = lambda w, *logical: rules.gather(w.astype(dt), logical)  # noqa: E731
    cq = jnp.einsum("td,dr->tr", x, g(p.w_qa, "embed", "latent"), out_sharding=rules.spec("stream", None))
    cq = rms_normalize(cq, eps, g(p.q_norm, "latent"))
    q = jnp.einsum("tr,rnh->tnh", cq, g(p.w_qb, "latent", "heads", "head_dim"),
                   out_sharding=rules.spec("stream", "heads", "head_dim"))
    q = rms_normalize(q, eps)
    kv = jnp.einsum("td,dh->th", x, g(p.w_kv, "embed", "head_dim"), out_sharding=rules.spec("stream", "head_dim"))
    kv = rms_normalize(kv, eps, p.kv_norm.astype(dt))
    q = rotate_tail(cfg, unflatten(rules, q, b, "heads", "head_dim"), u.positions, inv=inv)  # [b, t, N, H]
    kv = rotate_tail(cfg, unflatten(rules, kv, b, "head_dim"), u.positions, inv=inv)  # [b, t, H]
    q = jnp.transpose(q, (0, 2, 1, 3))  # head-major: [b, N, t, H]
    new, aux = None, {}
    if u.cache is not None and u.cache.mask is not None:  # decode: over everything cached
        new = write_cache(u.cache, 1, shared_kv=kv)
        whole = new["shared_kv"].astype(dt)[:, None]  # [b, 1, capacity, H]
        if kind == "S":
            o = dot_product_attention(q, whole, whole, u.cache.mask, rules, sinks=p.sinks)
        else:  # (the engine's pages: the entries too)
            o, entries = cached_compressed(cfg, rules, p, x, cq, q, whole, u, kind, inv)
            new.update(entries)
        new = _unchanged(u.cache.arrays, new, u.positions.shape[-1])
    elif kind == "S":
        block = band_block(cfg, kv.shape[1])
        if block:  # (in query blocks over their own rows and the block before's: the key blocks the window
            # cannot reach are skipped, not masked; `banded_attention` with no entries)
            whole = jax.sharding.reshard(kv, rules.spec("batch", None, None))
            none = jnp.zeros((b, 0, kv.shape[-1]), kv.dtype, out_sharding=rules.spec("batch", None, None))
            hidden = jnp.zeros((b, kv.shape[1], 0), bool, out_sharding=rules.spec("batch", None, None))
            o = banded_attention(rules, q, whole, none, hidden, u.segment_ids, u.window, block, p.sinks)[0]
        else:
            o = blocked_causal_attention(q, kv[:, None], kv[:, None], cfg.attention_block, rules, u.segment_ids,
                                         window=u.window, sinks=p.sinks)
        if u.cache is not None:  # prefill: these rows start the cache
            new = write_cache(u.cache, 1, shared_kv=kv)
    else:
        o, kl = compressed_attention(cfg, rules, p, x, cq, q, kv, u, kind, inv)
        if kl is not None:
            aux["indexer_kl"] = kl
    o = rotate_tail(cfg, jnp.transpose(o, (0, 2, 1, 3)), u.positions, -1.0, inv)  # [b, t, N, H], rotated back
    G = cfg.csa.out_groups
    o = flatten(rules, jnp.reshape(o, o.shape[:2] + (G, o.shape[2] // G, o.shape[3])), None, None, None)
    mid = jnp.einsum("tgmh,gmho->tgo", o, g(p.w_oa, None, None, "head_dim", None),
                     out_sharding=rules.spec("stream", None, None))
    out = jnp.einsum("tgo,god->td", mid, g(p.w_ob, None, None, "embed"), out_sharding=rules.spec("stream", "embed"))
    return out, new, aux


def compressed_attention(cfg: ModelConfig, rules: Rules, p: Csa, x: jax.Array, cq: jax.Array, q: jax.Array,
                         kv: jax.Array, u: UnitInputs, kind: str, inv: jax.Array) -> tuple:
    """A C or H layer's attention over full sequences: q [b, N, t, H] over the layer's own rows kv
    [b, t, H] (causal, u.window, documents) and its compressed entries (`compress`; a C layer's those
    its indexer selects, `index_select`), one softmax with the sinks -> ([b, N, t, H], a C layer's
    indexer KL loss or None): in query blocks (`banded_attention`) where `band_block` gives one, else dense
    (every query with every row and entry). The KL (a C layer's, without a cache): `mla.indexer_kl` of the
    attention's probabilities of the entries (summed over heads, L1-normalised over the entries it is taken
    over) against softmax of the indexer's scores, over the selected entries (model.csa.index_train=sparse)
    or, in the dense warm-up, every visible entry, which the attention then reads whole; summed over the
    queries, divided by b x t."""
    b, t = kv.shape[:2]
    c = cfg.csa
    comp, rate = (p.heavy, c.heavy_rate) if kind == "H" else (p.sparse, c.sparse_rate)
    entries, visible = compress(cfg, rules, comp, x, u, rate, inv)
    scores = None
    if kind == "C":
        scores = index_scores_of(cfg, rules, p.index, x, cq, u, inv)
        if c.index_train != "dense" or u.cache is not None:
            visible = top_keys(scores, visible, c.index_topk)
    train = scores is not None and u.cache is None
    whole = lambda a: jax.sharding.reshard(a, rules.spec("batch", None, None))  # noqa: E731  (every row, entry)
    block = band_block(cfg, t)
    if block:
        o, probs = banded_attention(rules, q, whole(kv), whole(entries.astype(kv.dtype)), visible, u.segment_ids,
                                    u.window, block, p.sinks)
    else:
        local = next(causal_blocks(t, 0, u.segment_ids, u.window))[2]
        local = jnp.broadcast_to(local, (b, t, t), out_sharding=rules.spec("batch", None, None))
        keys = jnp.concatenate([whole(kv), whole(entries.astype(kv.dtype))], axis=1)  # [b, t + W, H]
        mask = jnp.concatenate([local, visible], axis=-1)
        logits = jnp.einsum("bnqh,bkh->bnqk", q, keys, out_sharding=rules.spec("batch", "heads", None, None),
                            preferred_element_type=F32)
        probs = probabilities(logits, mask[:, None], q.shape[-1] ** -0.5, 0.0, None, keys.dtype,
                              p.sinks[None, :, None, None])
        o = jnp.einsum("bnqk,bkh->bnqh", probs, keys, out_sharding=rules.spec("batch", "heads", "seq", "head_dim"))
        probs = probs[..., t:]
    if not train:
        return o, None
    return o, indexer_kl(probs, scores, visible) / (b * t)


def band_block(cfg: ModelConfig, t: int) -> int:
    """The query block of `banded_attention` for sequences of t tokens: the smallest divisor of t that holds
    model.sliding_window, when every layer has that window and t is at least two such blocks; else 0 (the
    dense form)."""
    w = cfg.sliding_window
    if w <= 0 or set(layer_windows(cfg)) != {w}:
        return 0
    block = next((d for d in range(w, t + 1) if t % d == 0), t)
    return block if t >= 2 * block else 0


def banded_attention(rules: Rules, q: jax.Array, kv: jax.Array, entries: jax.Array, visible: jax.Array,
                     segment_ids: Optional[jax.Array], window, block: int, sinks: jax.Array) -> jax.Array:
    """`compressed_attention`'s softmax in query blocks of B = `block` tokens (B >= the layers' window): each
    block's queries against its own rows and the previous block's (all a window can reach) and every entry,
    q [b, N, t, H], kv [b, t, H], entries [b, W, H] (keys and values both), visible [b, t, W] -> ([b, N, t, H],
    the entries' probabilities [b, N, t, W]).
    The scores are t x (2B + W) a head where the dense form's are t x (t + W); the same softmax (the rows
    outside the window masked in both)."""
    b, N, t, H = q.shape
    nb, W = t // block, entries.shape[1]
    spec = lambda *axes: rules.spec("batch", *axes)  # noqa: E731
    rows = jnp.reshape(kv, (b, nb, block, H), out_sharding=spec(None, None, None))
    before = jnp.pad(rows[:, :-1], ((0, 0), (1, 0), (0, 0), (0, 0)))  # (block j - 1's rows; none before block 0)
    keys = jnp.concatenate([before, rows, jnp.broadcast_to(entries[:, None], (b, nb, W, H), out_sharding=spec(
        None, None, None))], axis=2)  # [b, nb, 2B + W, H]
    idx = jnp.arange(t, dtype=jnp.int32)
    q_pos = jnp.reshape(idx, (nb, block))
    k_pos = (jnp.arange(nb, dtype=jnp.int32)[:, None] - 1) * block + jnp.arange(2 * block, dtype=jnp.int32)[None]
    local = causal_mask(q_pos, k_pos) & window_mask(q_pos, k_pos, window)  # [nb, B, 2B] (k_pos < 0: none)
    if segment_ids is not None:
        seg = jnp.reshape(jnp.pad(segment_ids, ((0, 0), (block, 0)), constant_values=-1), (b, nb + 1, block))
        k_seg = jnp.concatenate([seg[:, :-1], seg[:, 1:]], axis=2)  # [b, nb, 2B]
        local = local[None] & (seg[:, 1:, :, None] == k_seg[:, :, None, :])
    local = jnp.broadcast_to(local, (b, nb, block, 2 * block), out_sharding=spec(None, None, None))
    mask = jnp.concatenate([local, jnp.reshape(visible, (b, nb, block, W), out_sharding=spec(None, None, None))], -1)
    qb = jnp.reshape(jax.sharding.reshard(q, spec("heads", None, None)), (b, N, nb, block, H),
                     out_sharding=spec("heads", None, None, None))
    scores = jnp.einsum("bnjqh,bjkh->bnjqk", qb, keys, out_sharding=spec("heads", None, None, None),
                        preferred_element_type=F32)
    probs = probabilities(scores, mask[:, None], H ** -0.5, 0.0, None, keys.dtype, sinks[None, :, None, None, None])
    out = jnp.einsum("bnjqk,bjkh->bnjqh", probs, keys, out_sharding=spec("heads", None, None, None))
    entry_probs = jnp.reshape(probs[..., 2 * block:], (b, N, t, W), out_sharding=spec("heads", None, None))
    return jnp.reshape(out, (b, N, t, H), out_sharding=spec("heads", "seq", "head_dim")), entry_probs


def compress(cfg: ModelConfig, rules: Rules, p: Compressor, x: jax.Array, u: UnitInputs, rate: int,
             inv: jax.Array) -> tuple:
    """The compressed entries of the sequences x [stream, D] (module docstring; its whole windows of
    `rate` tokens, the rest left out) -> (entries [b, W, h] in x's dtype, normed and rotated at each
    window's first position; visible [b, t, W]: query i sees entry w once its window is whole, within
    its document)."""
    b, (c, h) = u.batch, p.w_kv.shape[-2:]
    kv, gate = _project(rules, p, x, b)
    t = kv.shape[1]
    W = t // rate
    windows = lambda a: jnp.reshape(a[:, :W * rate], (b, W, rate, c, h),  # noqa: E731
                                    out_sharding=rules.spec("batch", None, None, None, None))
    kv, gate = windows(kv), windows(gate).astype(F32) + p.bias.astype(F32)
    if c == 2:  # (window w - 1's first series, then window w's second; the first window's first half empty)
        before = lambda a, fill: jnp.pad(a[:, :-1, :, 0], ((0, 0), (1, 0), (0, 0), (0, 0)),  # noqa: E731
                                         constant_values=fill)
        kv = jnp.concatenate([before(kv, 0), kv[:, :, :, 1]], axis=2)
        gate = jnp.concatenate([before(gate, -jnp.inf), gate[:, :, :, 1]], axis=2)
    else:
        kv, gate = kv[:, :, :, 0], gate[:, :, :, 0]
    entries = _pooled(cfg, p, kv, gate, u.positions[..., :W * rate:rate], inv)  # [b, W, h]
    i, w = jnp.arange(t)[:, None], jnp.arange(W)[None]
    visible = jnp.broadcast_to((w + 1) * rate - 1 <= i, (b, t, W), out_sharding=rules.spec("batch", None, None))
    if u.segment_ids is not None:  # (an entry inside the document that holds its whole span)
        start = u.segment_ids[:, jnp.maximum(jnp.arange(W) - (c - 1), 0) * rate]  # [b, W]
        visible = visible & (start[:, None, :] == u.segment_ids[:, :, None])
    return entries, visible


def _pooled(cfg: ModelConfig, p: Compressor, kv: jax.Array, gate: jax.Array, first: jax.Array,
            inv: jax.Array) -> jax.Array:
    """Windows' entries: kv [..., slots, h] weighted by the softmax over each window's slots of its
    float32 gate logits [..., slots, h] (bias added; -inf where a slot is empty), RMS-normed by the
    compressor's scale and rotated at each window's first position `first` [...] -> [..., h] in kv's dtype."""
    dt = kv.dtype
    entries = jnp.sum(kv * jax.nn.softmax(gate, axis=-2).astype(dt), axis=-2)
    return rotate_tail(cfg, rms_normalize(entries, cfg.norm_eps, p.norm.astype(dt)), first, inv=inv)


def index_scores_of(cfg: ModelConfig, rules: Rules, p: Indexer, x: jax.Array, cq: jax.Array, u: UnitInputs,
                    inv: jax.Array, keys: Optional[jax.Array] = None) -> jax.Array:
    """A C layer's lightning indexer's scores of the entries, float32 [b, t, W] (`mla.index_scores` of its
    queries from the query latent cq [stream, R] and its own compressed keys, or `keys` [b, W, d] where
    given: the engine's). Its inputs are detached: it learns by its KL loss alone (`compressed_attention`)."""
    x, cq = jax.lax.stop_gradient(x), jax.lax.stop_gradient(cq)
    c, b = cfg.csa, u.batch
    if keys is None:
        keys, _ = compress(cfg, rules, p.keys, x, u, c.sparse_rate, inv)
    q = jnp.einsum("tr,rnh->tnh", cq, rules.gather(p.w_q.astype(cq.dtype), ("latent", None, None)),
                   out_sharding=rules.spec("stream", None, None))
    q = rotate_tail(cfg, unflatten(rules, q, b, None, None), u.positions, inv=inv)  # [b, t, I, d]
    weights = jnp.einsum("td,dn->tn", x.astype(F32), rules.gather(p.w_w.astype(F32), ("embed", None)),
                         out_sharding=rules.spec("stream", None)) * c.index_heads ** -0.5
    return index_scores(rules, q, keys, unflatten(rules, weights, b, None))


def index_select(cfg: ModelConfig, rules: Rules, p: Indexer, x: jax.Array, cq: jax.Array, u: UnitInputs,
                 visible: jax.Array, inv: jax.Array, keys: Optional[jax.Array] = None) -> jax.Array:
    """A C layer's lightning indexer's selection: of the entries each query may see (visible [b, t, W]), the
    csa.index_topk of highest score (`index_scores_of`, `mla.top_keys`) -> [b, t, W]."""
    return top_keys(index_scores_of(cfg, rules, p, x, cq, u, inv, keys), visible, cfg.csa.index_topk)


def _project(rules: Rules, p: Compressor, x: jax.Array, b: int) -> tuple:
    """A compressor's contributions x w_kv and gate logits x w_gate (no bias) of x [stream, D] -> two
    [b, t, c, h] in x's dtype."""
    dt, axis = x.dtype, (None, None)
    kv = jnp.einsum("td,dch->tch", x, rules.gather(p.w_kv.astype(dt), ("embed", *axis)),
                    out_sharding=rules.spec("stream", *axis))
    gate = jnp.einsum("td,dch->tch", x, rules.gather(p.w_gate.astype(dt), ("embed", *axis)),
                      out_sharding=rules.spec("stream", *axis))
    return unflatten(rules, kv, b, *axis), unflatten(rules, gate, b, *axis)


def window_entries(cfg: ModelConfig, rules: Rules, p: Compressor, x: jax.Array, u: UnitInputs, name: str,
                   rate: int, inv: jax.Array) -> tuple:
    """The engine's compression of a chunk (prefill) or a token (decode) of each row, x [b * t, D] at
    u.positions [b, t] (the row's tokens from its first position on, then padding at -1), from the row's
    window state (u.cache.arrays "window.<name>.kv" and ".gate" [b, L, c, h], L = c m: the contributions
    and gate logits of the L positions before the chunk's first, oldest first; zeros for a new sequence)
    -> (entries [b, t, h]: at each token that completes a window ((w + 1) m - 1 = its position) that
    window's entry, as `compress` makes it over the whole sequence, else 0; done [b, t]: where; the new
    window state {"window.<name>.kv", ".gate"}: the L positions up to the row's last token). Each token's
    window is read from [state, chunk] by a gather of L places: O(t L c h) a row."""
    b, dt = u.batch, x.dtype
    kv, gate = _project(rules, p, x, b)  # [b, t, c, h]
    c = kv.shape[2]
    L, pos = c * rate, u.positions
    t = pos.shape[-1]
    spec = rules.spec("batch", None, None, None)
    old = [jax.sharding.reshard(u.cache.arrays[f"window.{name}.{n}"].astype(dt), spec) for n in ("kv", "gate")]
    seq_kv, seq_gate = (jnp.concatenate([o, jax.sharding.reshard(a, spec)], axis=1)
                        for o, a in zip(old, (kv, gate), strict=True))  # [b, L + t, c, h]: positions p0 - L on
    places = jnp.arange(t)[:, None] + 1 + jnp.arange(L)[None]  # [t, L]: token j's window, up to it
    win_kv, win_gate = (jnp.take(a, places, axis=1) for a in (seq_kv, seq_gate))  # [b, t, L, c, h]
    bias = p.bias.astype(F32)  # [m, c, h]
    win_gate = win_gate.astype(F32)
    if c == 2:  # (window w - 1's first series, then window w's second)
        win_kv = jnp.concatenate([win_kv[:, :, :rate, 0], win_kv[:, :, rate:, 1]], axis=2)
        win_gate = jnp.concatenate([win_gate[:, :, :rate, 0] + bias[:, 0], win_gate[:, :, rate:, 1] + bias[:, 1]],
                                   axis=2)
    else:
        win_kv, win_gate = win_kv[:, :, :, 0], win_gate[:, :, :, 0] + bias[:, 0]
    at = pos[:, :, None] - L + 1 + jnp.arange(L)  # [b, t, L]: each place's position (< 0: none, the gate -inf)
    win_gate = jnp.where((at >= 0)[..., None], win_gate, -jnp.inf)
    entries = _pooled(cfg, p, win_kv, win_gate, pos - rate + 1, inv)  # [b, t, h] (at the window's first position)
    done = (pos >= 0) & ((pos + 1) % rate == 0)
    entries = jnp.where(done[..., None], entries, jnp.zeros_like(entries))  # (0, never NaN: a padding token's
    # softmax over no position)
    keep = jnp.sum(pos >= 0, axis=1)[:, None] + jnp.arange(L)[None]  # [b, L]: past the row's last token, L back
    state = {f"window.{name}.{n}": jnp.take_along_axis(a, keep[:, :, None, None], axis=1)
             for n, a in (("kv", seq_kv), ("gate", seq_gate))}
    return entries, done, state


def cached_compressed(cfg: ModelConfig, rules: Rules, p: Csa, x: jax.Array, cq: jax.Array, q: jax.Array,
                      rows: jax.Array, u: UnitInputs, kind: str, inv: jax.Array) -> tuple:
    """A C or H layer's attention in the inference engine: q [b, N, t, H] at u.positions [b, t] over the
    cached rows [b, 1, capacity, H] (u.cache.mask: causal, the window), the entries in the pages
    (u.cache.arrays "entries.<name>" [b, E, h]: entry e of the row's pages in order, whole before the
    chunk once (e + 1) m <= its first position) and the entries this chunk completes (`window_entries`),
    a C layer's those of them its indexer selects (`index_select`) -> (o [b, N, t, H], {"entries.<name>":
    [b, t, h] the new entries by the token that completes each, "window.<name>.kv", ".gate": the new
    window states}) for the layer's compressors."""
    c, pos = cfg.csa, u.positions
    name, rate = ("H", c.heavy_rate) if kind == "H" else ("C", c.sparse_rate)
    names = (name,) if kind == "H" else (name, "I")
    out, entries = {}, {}
    for n in names:
        fresh, done, state = window_entries(cfg, rules, _compressor(p, n), x, u, n, rate, inv)
        whole = lambda a: jax.sharding.reshard(a, rules.spec("batch", None, None))  # noqa: E731
        entries[n] = jnp.concatenate([whole(u.cache.arrays[f"entries.{n}"].astype(x.dtype)), whole(fresh)], axis=1)
        out.update({f"entries.{n}": fresh, **state})
    E = u.cache.arrays[f"entries.{name}"].shape[1]
    first = pos[:, :1, None]  # [b, 1, 1]: the chunk's first position (every token's in the pages before it)
    paged = ((jnp.arange(E) + 1) * rate <= first) & (pos[:, :, None] >= 0)  # [b, t, E]
    new = done[:, None, :] & (pos[:, None, :] <= pos[:, :, None])  # [b, t, t]
    visible = jnp.concatenate([paged, new], axis=-1)
    if kind == "C":
        visible = index_select(cfg, rules, p.index, x, cq, u, visible, inv, keys=entries["I"])
    keys = jnp.concatenate([jax.sharding.reshard(rows, rules.spec("batch", None, None, None)),
                            entries[name].astype(rows.dtype)[:, None]], axis=2)  # [b, 1, capacity + E + t, H]
    mask = jnp.concatenate([u.cache.mask, visible], axis=-1)
    return dot_product_attention(q, keys, keys, mask, rules, sinks=p.sinks), out


def _unchanged(arrays: dict, new: dict, t: int) -> dict:
    """A cached layer's outputs `new` with those of the compressors it does not run (another kind's, in a
    model of several: `lax.switch`'s branches give the same outputs): no entries (0), the window states as
    they were."""
    out = dict(new)
    for n, a in arrays.items():
        if n.startswith("entries.") and n not in out:
            out[n] = jnp.zeros((a.shape[0], t, a.shape[-1]), a.dtype, out_sharding=jax.typeof(a).sharding.spec)
        elif n.startswith("window.") and n not in out:
            out[n] = a
    return out


def csa_losses(cfg: ModelConfig) -> dict:
    """The C layers' indexer KL loss and its weight (model.csa.index_kl), with C layers in the pattern (the
    objective's aux/indexer_kl: the layers' sum over the model's C layers, `indexed_layers`)."""
    return {"indexer_kl": cfg.csa.index_kl} if "C" in compress_kinds(cfg) else {}


def indexed_layers(cfg: ModelConfig) -> int:
    """The model's layers with an indexer: its C layers (the others' aux indexer_kl: 0)."""
    return compress_kinds(cfg).count("C")


def csa_stats(cfg: ModelConfig, rules: Rules, p: Csa, x: jax.Array, u: UnitInputs) -> dict:
    """The RMS of the shared key/value head before its norm."""
    return {"kv_pre_rms": rms(jnp.einsum("td,dh->th", x, p.w_kv.astype(x.dtype)))}


def config_errors(m: ModelConfig) -> List[str]:
    """model.csa.*: checked when it is on (q_rank > 0); set without it, refused by name."""
    c = m.csa
    if c.q_rank < 0:
        return [f"model.csa.q_rank={c.q_rank} must be >= 0 (0 = off; DeepSeek-V4: 1024)"]
    if not c.q_rank:
        changed = [f"model.csa.{f.name}" for f in dataclasses.fields(c)
                   if f.name != "q_rank" and getattr(c, f.name) != f.default]
        return [f"{', '.join(changed)} set without model.csa.q_rank; set model.csa.q_rank=R (DeepSeek-V4's query "
                "latent: 1024) or leave them at their defaults"] if changed else []
    errs: List[str] = []
    H = head_dim(m) if m.num_heads > 0 and m.d_model > 0 else 0
    if c.rope_dim <= 0 or c.rope_dim % 2 or c.rope_dim > H:
        errs.append(f"model.csa.rope_dim={c.rope_dim} must be even, > 0 and at most the head width {H}; set "
                    f"model.csa.rope_dim to an even number up to {H} (DeepSeek-V4: 64 of 512)")
    if c.out_groups < 1 or m.num_heads % c.out_groups:
        divisors = [g for g in range(1, m.num_heads + 1) if m.num_heads % g == 0] if m.num_heads > 0 else []
        errs.append(f"model.csa.out_groups={c.out_groups} must divide model.num_heads={m.num_heads}; set "
                    f"model.csa.out_groups to one of {', '.join(map(str, divisors))} (DeepSeek-V4: 8 groups)")
    if c.out_rank < 1:
        errs.append(f"model.csa.out_rank={c.out_rank} must be >= 1 (each output group's width; DeepSeek-V4: 1024)")
    if not c.pattern or set(c.pattern) - set("SCH"):
        errs.append(f"model.csa.pattern={c.pattern!r} must be letters S (sliding), C (compressed sparse) and H "
                    "(heavily compressed), repeated over the layers")
    kinds = set(compress_kinds(m)) if not errs else set()
    for kind, name in (("C", "sparse_rate"), ("H", "heavy_rate")):
        if getattr(c, name) < 2:
            errs.append(f"model.csa.{name}={getattr(c, name)} must be >= 2 (tokens per compressed entry; DeepSeek-V4: "
                        f"{4 if kind == 'C' else 128})")
        elif kind in kinds and getattr(c, name) > m.max_seq_len > 0:
            errs.append(f"model.csa.{name}={getattr(c, name)} is longer than model.max_seq_len={m.max_seq_len}: no "
                        f"window of it would ever be whole (no entry); set it to at most {m.max_seq_len}")
    if "C" in kinds:
        if c.index_heads < 1:
            errs.append(f"model.csa.index_heads={c.index_heads} must be >= 1 (the C layers' indexer; DeepSeek-V4: 64)")
        if c.index_dim < c.rope_dim or c.index_dim % 2:
            errs.append(f"model.csa.index_dim={c.index_dim} must be even and >= model.csa.rope_dim={c.rope_dim} (the "
                        "indexer rotates its last rope_dim dimensions; DeepSeek-V4: 128)")
        if c.index_topk < 1:
            errs.append(f"model.csa.index_topk={c.index_topk} must be >= 1 (entries each query attends to; all while "
                        "there are fewer)")
        errs += indexer_training_errors("model.csa", c.index_train, c.index_kl)
    elif c.index_train != "sparse" or c.index_kl != 1.0:
        errs.append(f"model.csa.index_train / index_kl with model.csa.pattern={c.pattern!r}: they train the C layers' "
                    "indexer, and this model has no C layer; add C to the pattern or leave them unset")
    if kinds - {"S"}:
        if m.sliding_window <= 0:
            errs.append(f"model.sliding_window={m.sliding_window}: DeepSeek-V4's compressed layers (model.csa.pattern="
                        f"{c.pattern!r}) attend over a sliding window of their own rows beside the entries; set "
                        "model.sliding_window > 0 (DeepSeek-V4: 128)")
        for bad, name in ((m.global_head_dim is not None or m.global_kv_heads is not None or m.global_k_eq_v,
                           "model.global_head_dim / global_kv_heads / global_k_eq_v"),
                          (m.kv_shared_layers, "model.kv_shared_layers"), (m.mtp_depth, "model.mtp_depth")):
            if bad:
                errs.append(f"model.csa.pattern={c.pattern!r} (compressed layers) and {name} do not combine yet; "
                            f"unset {name}")
        if not c.compress_theta > 0:
            errs.append(f"model.csa.compress_theta={c.compress_theta} must be > 0 (the compressed layers' RoPE base; "
                        "DeepSeek-V4: 160000)")
        if m.rope_scaling == RopeScaling.yarn and m.rope_attention_factor not in (None, 1.0):
            errs.append(f"model.rope_attention_factor={m.rope_attention_factor}: DeepSeek-V4's compressed layers "
                        "scale no RoPE by YaRN's attention factor (transformers' 1.0); leave it unset or 1")
    elif m.rope_scaling != RopeScaling.none:
        errs.append(f"model.rope_scaling={m.rope_scaling.value} with model.csa.pattern={c.pattern!r}: DeepSeek-V4 "
                    "scales only its compressed layers' RoPE (C, H), and this model has none; set model.rope_scaling="
                    "none or add C / H layers")
    for bad, name, fix in ((m.mla.kv_rank, "model.mla.kv_rank", "0"), (m.num_kv_heads not in (None, 1),
                           "model.num_kv_heads", "1 (one shared key/value head)"),
                           (m.deltanet.full_attention_interval, "model.deltanet.full_attention_interval", "0"),
                           (m.attention_sinks, "model.attention_sinks", "false (the unit has its sinks)"),
                           (m.bias or m.qkv_bias or m.qk_norm, "model.bias / qkv_bias / qk_norm", "false"),
                           (m.attention.value not in ("auto", "xla"), "model.attention", "xla")):
        if bad:
            errs.append(f"model.csa.q_rank={c.q_rank} (DeepSeek-V4's attention) and {name} do not combine; set "
                        f"{name}={fix}")
    return errs
