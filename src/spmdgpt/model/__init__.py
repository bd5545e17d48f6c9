"""Decoder-only transformer: NamedTuple parameter pytrees and pure functions."""

from spmdgpt.model.attention import KVCache, attention_backend, init_cache
from spmdgpt.model.loss import loss_fn, objective
from spmdgpt.model.transformer import (
    Block,
    Norm,
    ParamInfo,
    Params,
    abstract_params,
    activation_stats,
    forward,
    init_params,
    is_info,
    num_params,
    param_info,
    param_shapes,
)

__all__ = [
    "abstract_params",
    "activation_stats",
    "Block",
    "KVCache",
    "attention_backend",
    "Norm",
    "ParamInfo",
    "Params",
    "forward",
    "init_cache",
    "init_params",
    "is_info",
    "loss_fn",
    "num_params",
    "objective",
    "param_info",
    "param_shapes",
]
