"""Decoder-only transformer: NamedTuple parameter pytrees and pure functions."""

from spmdgpt.model.attention import Attention, GroupedAttention, KVCache, attention_backend
from spmdgpt.model.info import ParamInfo, is_info
from spmdgpt.model.layers import Norm
from spmdgpt.model.loss import loss_fn, objective
from spmdgpt.model.mlp import Mlp
from spmdgpt.model.params import (
    Block,
    Params,
    Unit,
    abstract_params,
    between_steps,
    block_units,
    init_params,
    leaf_name,
    num_params,
    param_info,
    param_shapes,
)
from spmdgpt.model.stages import to_layer_order, to_stage_order
from spmdgpt.model.transformer import activation_stats, forward, init_cache

__all__ = [
    "abstract_params",
    "activation_stats",
    "between_steps",
    "Attention",
    "GroupedAttention",
    "Block",
    "block_units",
    "KVCache",
    "attention_backend",
    "Mlp",
    "Norm",
    "ParamInfo",
    "Params",
    "Unit",
    "forward",
    "init_cache",
    "init_params",
    "is_info",
    "leaf_name",
    "loss_fn",
    "num_params",
    "objective",
    "param_info",
    "param_shapes",
    "to_layer_order",
    "to_stage_order",
]
