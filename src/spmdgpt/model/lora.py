"""LoRA: low-rank adapters on a frozen model (Hu et al. 2021, arXiv:2106.09685).

A targeted matrix W (a `ParamInfo` with fan_in x fan_out axes; its other axes a batch of
matrices: layers, q/k/v) trains as

    W + (alpha / r) A B        A [batch..., fan_in..., r]   B [batch..., r, fan_out...]

with W frozen, A drawn like PEFT's default (variance 1 / (3 fan_in), its kaiming-uniform with
a = sqrt(5)) and B zero, so training starts from the model itself. lora.targets picks the
matrices by their Hugging Face names: q, k, v (slices of the fused w_qkv, or w_q and w_kv's
halves under grouped-query attention), o, up, gate, down; each unit's parameters name theirs (the
class's LORA table, e.g. `attention.Attention.LORA`).

The adapters are a `Params` of their own (`Adapter` leaves where a matrix is targeted, None
elsewhere), so they shard by the same rule table (the rank axis `lora` is never split), are
stacked per layer, reorder for pipelines like parameters, and are all that the optimizer and the
checkpoints hold. `attach(base, adapters)` gives the model a `Params` whose targeted leaves are
`Lora` nodes; each block folds its layer's nodes into plain weights (`merged`) before use, inside
the layer scan, so one layer's W + delta exists at a time and the model code is unchanged.
`merge` folds them all (export, sampling, evaluation of a finished run). The functions take the
model's `param_info` (this module does not import the transformer, which imports `merged`).

Serving several LoRA runs of one base at once (`spmdgpt serve adapters=`) keeps them unmerged:
`stack` puts the K runs' A and B side by side at each weight (`Stacked`), the inference engine
binds each token's adapter to them per step (`bind`), and the units' matmuls add each token's own
(x A_k) B_k (`row_delta`, through `weight` and `collective.matmuls_in` / `matmul_out`), S-LoRA and
Punica's way: one program for any mix of adapters, no merged copy of any weight.
"""

from __future__ import annotations

import dataclasses
import math
import string
from typing import List, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from spmdgpt.config import LORA_TARGETS, Config, LoraConfig, OptimizerName, gated, global_stack
from spmdgpt.model.info import ParamInfo, is_info

Array = jax.Array
RANK_AXIS = "lora"  # the adapters' rank axis (no rule table names it: never sharded)


class Adapter(NamedTuple):
    a: Array  # [batch..., fan_in..., r]
    b: Array  # [batch..., r, fan_out...]


@dataclasses.dataclass(frozen=True)
class Lora:
    """A frozen weight with its adapter (one layer's, or stacked): what the layers see while LoRA
    trains. `merged()` is the weight they use."""

    w: Array
    a: Array
    b: Array
    scale: float  # alpha / r
    eq: str  # einsum of (a, b) -> the delta's axes ("..." the layers, when stacked)
    axis: int  # with `index`: the delta's q/k/v axis, counted from the end (negative)
    index: Optional[tuple] = None  # the q/k/v slices adapted (the delta covers only them)

    def merged(self) -> Array:
        delta = self.scale * jnp.einsum(self.eq, self.a, self.b, preferred_element_type=jnp.float32)
        if self.index is not None and len(self.index) < self.w.shape[self.axis]:  # zeros at the slices not adapted
            part = lambda k: delta[(Ellipsis, k) + (slice(None),) * (-1 - self.axis)]  # noqa: E731
            n = self.w.shape[self.axis]
            delta = jnp.stack([part(self.index.index(j)) if j in self.index else jnp.zeros_like(part(0))
                               for j in range(n)], axis=self.axis)
        return (self.w.astype(jnp.float32) + delta).astype(self.w.dtype)


jax.tree_util.register_dataclass(Lora, data_fields=["w", "a", "b"], meta_fields=["scale", "eq", "axis", "index"])


def is_lora(x) -> bool:
    return isinstance(x, Lora)


def _slices(blocks, targets) -> dict:
    """{(unit field, weight name): None (the whole matrix) or the q/k/v slices} of lora.targets,
    as each unit's parameters name them (their class's LORA table: {target: (weight, index)})."""
    chosen = set(LORA_TARGETS if "all" in targets else targets)
    out: dict = {}
    for field in ("attn", "mlp"):
        names = getattr(type(getattr(blocks, field)), "LORA", {})
        for name in LORA_TARGETS:
            if name in chosen and name in names:
                weight, i = names[name]
                if i is None:
                    out[(field, weight)] = None
                else:
                    out[(field, weight)] = tuple(sorted(set(out.get((field, weight)) or ()) | {i}))
    return out


def _adapted(info, lora: LoraConfig):
    """[(unit field, weight name, its stacked ParamInfo, q/k/v slices or None)] of the weights
    that the model of `info` (its `param_info`) has and lora.targets names."""
    blocks = info.blocks
    found = []
    for (field, weight), index in _slices(blocks, lora.targets).items():
        weight_info = getattr(getattr(blocks, field), weight, None)
        if weight_info is not None:
            found.append((field, weight, weight_info, index))
    return found


def _adapter_info(info: ParamInfo, rank: int, index: Optional[tuple]) -> Adapter:
    batch = [ax for ax in info.logical if ax not in info.fan_in + info.fan_out]
    size = dict(zip(info.logical, info.shape))
    if index is not None:
        size["qkv"] = len(index)
    fan_in = math.prod(size[ax] for ax in info.fan_in)
    a = ParamInfo(tuple(size[ax] for ax in batch + list(info.fan_in)) + (rank,),
                  tuple(batch) + info.fan_in + (RANK_AXIS,), "normal", (3 * fan_in) ** -0.5, True,
                  info.fan_in, (RANK_AXIS,))
    b = ParamInfo(tuple(size[ax] for ax in batch) + (rank,) + tuple(size[ax] for ax in info.fan_out),
                  tuple(batch) + (RANK_AXIS,) + info.fan_out, "zeros", 0.0, True, (RANK_AXIS,), info.fan_out)
    return Adapter(a, b)


def adapter_info(info, lora: LoraConfig):
    """The adapters' `Params` for the model of `info` (its `param_info`): an `Adapter` of
    ParamInfo at each targeted weight, None elsewhere (what the optimizer, the initialisation and
    the checkpoints see)."""
    units = {"attn": {}, "mlp": {}}
    for field, weight, weight_info, index in _adapted(info, lora):
        units[field][weight] = _adapter_info(weight_info, lora.rank, index)
    blocks = info.blocks

    def unit(p, adapters):
        return type(p)(**{name: adapters.get(name) for name in p._fields})

    return type(info)(embed=None, blocks=type(blocks)(ln1=None, attn=unit(blocks.attn, units["attn"]), ln2=None,
                                                      mlp=unit(blocks.mlp, units["mlp"])),
                      ln_f=None, unembed=None, dense_blocks=None)


def _einsum(info: ParamInfo, index: Optional[tuple]) -> tuple[str, int]:
    """(einsum (a, b) -> delta for one weight, its q/k/v axis counted from the end)."""
    names = [ax for ax in info.logical if ax != "layers"]
    letter = dict(zip(names, string.ascii_lowercase))
    r = "z"
    batch = "".join(letter[ax] for ax in names if ax not in info.fan_in + info.fan_out)
    a = batch + "".join(letter[ax] for ax in info.fan_in) + r
    b = batch + r + "".join(letter[ax] for ax in info.fan_out)
    out = "".join(letter[ax] for ax in names)
    axis = names.index("qkv") - len(names) if index is not None else 0
    return f"...{a},...{b}->...{out}", axis


def attach(info, lora: LoraConfig, base, adapters):
    """The model's parameters (`info`: their `param_info`) with the adapters attached: base's
    targeted weights become `Lora` nodes (merged layer by layer in the forward pass); base's
    other leaves unchanged."""
    scale = lora.alpha / lora.rank
    blocks = base.blocks
    units = {"attn": {}, "mlp": {}}
    for field, weight, weight_info, index in _adapted(info, lora):
        adapter = getattr(getattr(adapters.blocks, field), weight)
        eq, axis = _einsum(weight_info, index)
        units[field][weight] = Lora(getattr(getattr(blocks, field), weight), adapter.a, adapter.b, scale, eq, axis,
                                    index)
    blocks = blocks._replace(attn=blocks.attn._replace(**units["attn"]), mlp=blocks.mlp._replace(**units["mlp"]))
    return base._replace(blocks=blocks)


# ----------------------------------------------------------------------------- several adapters at once


@dataclasses.dataclass(frozen=True)
class Stacked:
    """A frozen weight with the adapters of K LoRA runs of it stacked (serving them side by side,
    as S-LoRA and Punica do): each token adds its own adapter's (x A_k) B_k, k chosen per token by
    `select` (one-hot [tokens, K]; a row of zeros: the base alone), which the engine binds per
    group of rows (`bind`). The matmuls take it where they take a weight (`weight`,
    `collective.matmuls_in` / `matmul_out`, which add `row_delta`)."""

    w: Array  # [layers, *weight]
    a: Array  # [layers, K, batch..., fan_in..., r]: zeros where a run has no adapter (or a smaller rank)
    b: Array  # [layers, K, batch..., r, fan_out...]: alpha / r folded in
    roles: str  # per axis of the weight (without layers): "i" fan-in, "b" a batch of matrices (q/k/v), "o" fan-out
    select: Optional[Array] = None  # [tokens, K] (bound per group: `bind`)


jax.tree_util.register_dataclass(Stacked, data_fields=["w", "a", "b", "select"], meta_fields=["roles"])


def is_stacked(x) -> bool:
    return isinstance(x, Stacked)


def stack(info, base, runs) -> tuple:
    """(base's parameters with the adapters of `runs` [(LoraConfig, adapters)] stacked at every
    weight any of them adapts (`Stacked`; run k is adapter k + 1 of a request, 0 the base), the
    union of their targets' (field, weight) names). A and B are host arrays (numpy), for the
    caller to put on its mesh (replicated: each is a few percent of its weight at most)."""
    import numpy as np

    runs = list(runs)
    rank = max(lo.rank for lo, _ in runs)
    found = {}
    for k, (lo, adapters) in enumerate(runs):
        for field, weight, weight_info, index in _adapted(info, lo):
            found.setdefault((field, weight), (weight_info, {}))[1][k] = (lo, getattr(getattr(adapters.blocks, field),
                                                                                      weight), index)
    units = {"attn": {}, "mlp": {}}
    for (field, weight), (wi, per_run) in found.items():
        if wi.logical[0] != "layers":
            raise ValueError(f"LoRA serving expects {field}.{weight} stacked per layer; it has {wi.logical}")
        roles = "".join("i" if ax in wi.fan_in else "o" if ax in wi.fan_out else "b" for ax in wi.logical[1:])
        size = dict(zip(wi.logical, wi.shape))
        batch = [ax for ax in wi.logical[1:] if ax not in wi.fan_in + wi.fan_out]
        lead = (wi.shape[0], len(runs)) + tuple(size[ax] for ax in batch)
        a = np.zeros(lead + tuple(size[ax] for ax in wi.fan_in) + (rank,), np.float32)
        b = np.zeros(lead + (rank,) + tuple(size[ax] for ax in wi.fan_out), np.float32)
        for k, (lo, adapter, index) in per_run.items():
            a_k, b_k = np.asarray(adapter.a, np.float32), np.asarray(adapter.b, np.float32) * (lo.alpha / lo.rank)
            for full, part, rank_axis in ((a, a_k, a.ndim - 2), (b, b_k, 1 + len(batch))):
                where = [slice(None)] * (full.ndim - 1)  # (full[:, k]: [layers, batch..., ...])
                if index is not None:  # (q/k/v: the slices adapted)
                    where[1 + batch.index("qkv")] = list(index)
                where[rank_axis] = slice(0, lo.rank)
                full[:, k][tuple(where)] = part
        base_w = getattr(getattr(base.blocks, field), weight)
        units[field][weight] = Stacked(base_w, a, b, roles)
    blocks = base.blocks
    blocks = blocks._replace(attn=blocks.attn._replace(**units["attn"]), mlp=blocks.mlp._replace(**units["mlp"]))
    return base._replace(blocks=blocks), sorted(found)


def serving_error(model) -> Optional[str]:
    """Why adapters by name (`Stacked`) cannot serve `model` yet, or None: they cover multi-head
    and grouped-query attention and the dense MLP (whose matmuls take a `Stacked` weight)."""
    if model.mla.kv_rank:
        return (f"model.mla.kv_rank={model.mla.kv_rank}: multi-head latent attention is not covered by adapters by "
                "name yet; serve each LoRA run alone with run.dir=")
    return None


def adapter_count(tree) -> int:
    """K, the adapters stacked in `tree`'s `Stacked` nodes (0: none)."""
    return max((x.a.shape[1] for x in jax.tree.leaves(tree, is_leaf=is_stacked) if is_stacked(x)), default=0)


def bind(tree, select: Array):
    """tree with `select` ([tokens, K] one-hot, float: each token's adapter; zeros: none) bound
    to its `Stacked` nodes (one layer's, in the layer scan)."""
    return jax.tree.map(lambda x: dataclasses.replace(x, select=select) if is_stacked(x) else x, tree,
                        is_leaf=is_stacked)


def bind_layers(tree, adapter: Array, tokens: int):
    """tree (whole parameters, stacked per layer) with every token of a pass over `tokens` tokens
    taking adapter `adapter` (an int32 scalar; 0: the base), bound to each layer of its `Stacked`
    nodes (the full-sequence pass: a server scoring a prompt for logprobs)."""

    def one(x):
        layers, k = x.a.shape[:2]
        select = jnp.broadcast_to(jax.nn.one_hot(adapter - 1, k, dtype=jnp.float32), (layers, tokens, k))
        return dataclasses.replace(x, select=select)

    return jax.tree.map(lambda x: one(x) if is_stacked(x) else x, tree, is_leaf=is_stacked)


def weight(rules, w, dtype, logical):
    """`rules.gather(w.astype(dtype), logical)`: a weight in its compute layout, or a `Stacked`
    one with its weight so (its adapters are replicated)."""
    if is_stacked(w):
        return dataclasses.replace(w, w=rules.gather(w.w.astype(dtype), logical))
    return rules.gather(w.astype(dtype), logical)


def row_delta(eq: str, x: Array, node: Stacked, y: Array) -> Array:
    """y + each token's adapter's (alpha / r) (x A_k) B_k, for `jnp.einsum(eq, x, node.w) = y`
    ("t...,w...->t...": x's first axis the tokens, as every matmul of the units has it). Costs
    2 K r (fan_in + fan_out) multiply-adds a token: no gathered weights, the same program for any
    mix of adapters."""
    ins, out = eq.split("->")
    xl, wl = ins.split(",")
    part = lambda role: "".join(c for c, r in zip(wl, node.roles) if r == role)  # noqa: E731
    fan_in, batch, fan_out = part("i"), part("b"), part("o")
    tokens = "".join(c for c in xl if c not in fan_in)
    xa = jnp.einsum(f"{xl},K{batch}{fan_in}Z->{tokens}K{batch}Z", x, node.a.astype(x.dtype))
    rows = (tuple(jax.typeof(xa).sharding.spec) + (None,))[0]  # (the tokens' split)
    select = jax.sharding.reshard(node.select.astype(x.dtype), P(rows, None))
    xa = xa * select.reshape(select.shape + (1,) * (xa.ndim - 2))
    delta = jnp.einsum(f"{tokens}K{batch}Z,K{batch}Z{fan_out}->{out}", xa, node.b.astype(x.dtype))
    return y + jax.sharding.reshard(delta, jax.typeof(y).sharding.spec)


def merged(tree):
    """tree with every `Lora` node folded into its weight (W + (alpha / r) A B)."""
    return jax.tree.map(lambda x: x.merged() if is_lora(x) else x, tree, is_leaf=is_lora)


def merge(info, lora: LoraConfig, base, adapters):
    """Plain parameters: base with the adapters folded in (what export and sampling use)."""
    return jax.jit(lambda b, a: merged(attach(info, lora, b, a)))(base, adapters)


def num_adapter_params(info, lora: LoraConfig) -> int:
    return sum(math.prod(i.shape) for i in jax.tree.leaves(adapter_info(info, lora), is_leaf=is_info))


# ----------------------------------------------------------------------------- configuration checks


def config_errors(cfg: Config) -> List[str]:
    """lora.*: its own fields, and what LoRA does not combine with yet, one line each."""
    lo, m, t, errs = cfg.lora, cfg.model, cfg.train, []
    if lo.rank < 0:
        errs.append(f"lora.rank={lo.rank} must be >= 0 (0 = off, e.g. 8 or 16)")
    if lo.rank <= 0:
        return errs
    if not lo.alpha > 0:
        errs.append(f"lora.alpha={lo.alpha} must be > 0 (the update is scaled by alpha / rank; e.g. 16)")
    unknown = [x for x in lo.targets if x not in LORA_TARGETS + ("all",)]
    if unknown or not lo.targets:
        errs.append(f"lora.targets={list(lo.targets)}: choose among {', '.join(LORA_TARGETS)} or all")
    if "gate" in lo.targets and not gated(m):
        errs.append(f"lora.targets: gate needs a gated MLP (model.mlp={m.mlp.value} has none); leave gate out")
    if not cfg.checkpoint.init_from:
        errs.append(f"lora.rank={lo.rank} adapts a trained model, which stays frozen: set checkpoint.init_from=RUN "
                    "or hf:DIR")
    for bad, what in ((cfg.mesh.stage > 1, f"mesh.stage={cfg.mesh.stage}: pipeline stages"),
                      (m.moe.num_experts > 0, "model.moe.num_experts: mixture-of-experts layers"),
                      (global_stack(m), "the G layers' own attention stack (model.global_head_dim / global_kv_heads / "
                                        "global_k_eq_v)"),
                      (m.per_layer_dim > 0, "model.per_layer_dim: per-layer input embeddings"),
                      (t.time_budget is not None, "train.time_budget"),
                      (t.stats_every > 0, "train.stats_every"),
                      (cfg.optimizer.name == OptimizerName.manifold_muon,
                       "optimizer.name=manifold_muon (its matrices start orthonormal; B starts at zero)")):
        if bad:
            errs.append(f"lora.rank={lo.rank} does not work with {what} yet; leave it out")
    return errs
