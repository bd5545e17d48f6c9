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
"""

from __future__ import annotations

import dataclasses
import math
import string
from typing import List, NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import LORA_TARGETS, Config, LoraConfig, OptimizerName, gated
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
                      (t.time_budget is not None, "train.time_budget"),
                      (t.stats_every > 0, "train.stats_every"),
                      (cfg.optimizer.name == OptimizerName.manifold_muon,
                       "optimizer.name=manifold_muon (its matrices start orthonormal; B starts at zero)")):
        if bad:
            errs.append(f"lora.rank={lo.rank} does not work with {what} yet; leave it out")
    return errs
