"""Per-parameter metadata: a `ParamInfo` at every leaf of a parameter pytree, from which init,
sharding, weight decay, Muon's matrix grouping and the checkpoint checks all follow.

A unit (an attention or MLP kind, a norm) describes one layer's parameters with the builders
below; `stacked` prepends the layer axis for the blocks that `lax.scan` runs.
"""

from __future__ import annotations

import dataclasses
import math

import jax

from spmdgpt.config import ModelConfig, Parametrization


@dataclasses.dataclass(frozen=True)
class ParamInfo:
    """Static metadata of one parameter (a pytree leaf, not a node)."""

    shape: tuple
    logical: tuple  # logical axis name per dimension
    init: str  # "normal" | "zeros" | "ones" | "a_log" | "dt_bias" (Gated DeltaNet's decay, `params.DECAY_INITS`) |
    # "expert_hash" (a hash-routed MoE's table, `moe.hash_info`)
    std: float = 0.0  # for init == "normal"
    decay: bool = False  # decoupled weight decay applies (matrices, not norms/biases/embedding)
    fan_in: tuple = ()  # logical names of the matrix's input axes, e.g. ("embed",)
    fan_out: tuple = ()  # logical names of its output axes, e.g. ("heads", "head_dim")
    lr_scale: float = 1.0  # its AdamW learning rate's multiplier (μP: `model.parametrization`)
    modulus: int = 0  # init == "expert_hash": the number of experts (`moe.hash_info`)

    def __post_init__(self):
        missing = [a for a in self.fan_in + self.fan_out if a not in self.logical]
        if missing or len(self.shape) != len(self.logical):
            raise ValueError(f"ParamInfo{self.logical}: shape {self.shape}, fan axes {missing}")

    def axes(self, names: tuple) -> tuple:
        """Dimension indices of logical axis names (e.g. `axes(self.fan_in)`)."""
        return tuple(self.logical.index(n) for n in names)


def path_name(path) -> str:
    """A pytree leaf's name from its path: the keys joined by dots, "blocks.attn.w_qkv" for
    params.blocks.attn.w_qkv, "1.0.mu.blocks.attn.w_qkv" for a leaf of optax's state. Checkpoints
    store every leaf under this name (`spmdgpt.training.checkpoint`)."""
    return ".".join(str(next(getattr(k, a) for a in ("name", "key", "idx") if hasattr(k, a))) for k in path)


def by_name(tree, is_leaf=None) -> dict:
    """{path_name: leaf} of a pytree (None subtrees hold no leaf)."""
    return {path_name(p): x for p, x in jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)[0]}


def is_info(x) -> bool:
    """Leaf test for trees of ParamInfo (`is_leaf=is_info`)."""
    return isinstance(x, ParamInfo)


def matrix(shape: tuple, logical: tuple, fan_in: tuple, fan_out: tuple, std: float, init: str = "normal") -> ParamInfo:
    """A weight matrix (or a batch of them): weight decay applies, Muon sees fan_in x fan_out."""
    return ParamInfo(shape, logical, init, std, True, fan_in, fan_out)


def vector(shape: tuple, logical: tuple, init: str = "zeros") -> ParamInfo:
    """A bias or a norm's scale: no weight decay, no matrix."""
    return ParamInfo(shape, logical, init)


def stacked(tree, layers: int):
    """One layer's ParamInfo tree -> the tree of `layers` such layers, stacked on a leading
    "layers" axis (what `lax.scan` runs over)."""
    return jax.tree.map(lambda i: dataclasses.replace(i, shape=(layers,) + i.shape, logical=("layers",) + i.logical),
                        tree, is_leaf=is_info)


def residual_std(cfg: ModelConfig) -> float:
    """The init std of a residual projection (attention's and the MLP's output): GPT-2's
    init_std / sqrt(2 L), so that the residual stream's variance does not grow with depth
    (model.parametrization=completep: L the base depth; its branch multiplier carries the depth)."""
    completep = cfg.parametrization == Parametrization.completep and cfg.base_depth
    return cfg.init_std / math.sqrt(2 * (cfg.base_depth if completep else cfg.num_layers))


def out_init(cfg: ModelConfig) -> str:
    """model.zero_init_out: residual projections start at zero (every block the identity)."""
    return "zeros" if cfg.zero_init_out else "normal"
