"""Decoder-only transformer: NamedTuple parameter pytrees and pure functions."""

from spmdgpt.model.attention import KVCache, init_cache
from spmdgpt.model.transformer import (
    Block,
    Norm,
    ParamInfo,
    Params,
    forward,
    init_params,
    loss_fn,
    num_params,
    param_info,
)

__all__ = [
    "Block",
    "KVCache",
    "Norm",
    "ParamInfo",
    "Params",
    "forward",
    "init_cache",
    "init_params",
    "loss_fn",
    "num_params",
    "param_info",
]
