"""The optax chain built from config + per-parameter metadata."""

from __future__ import annotations

import jax
import optax

from spmdgpt.config import OptimizerConfig, OptimizerName, Schedule
from spmdgpt.model.transformer import ParamInfo, Params


def learning_rate_schedule(cfg: OptimizerConfig, total_steps: int) -> optax.Schedule:
    """Linear warmup from 0 to lr, then cosine decay to lr * min_lr_ratio, or constant."""
    warmup = min(cfg.warmup_steps, total_steps)
    if cfg.schedule == Schedule.cosine:
        return optax.warmup_cosine_decay_schedule(
            init_value=0.0,
            peak_value=cfg.lr,
            warmup_steps=warmup,
            decay_steps=max(total_steps, warmup + 1),
            end_value=cfg.lr * cfg.min_lr_ratio,
        )
    return optax.join_schedules(
        [optax.linear_schedule(0.0, cfg.lr, max(warmup, 1)), optax.constant_schedule(cfg.lr)],
        [warmup],
    )


def weight_decay_mask(info: Params) -> Params:
    """True for parameters that get weight decay, read from their metadata (not from ndim)."""
    return jax.tree.map(lambda i: i.decay, info, is_leaf=lambda x: isinstance(x, ParamInfo))


def build_optimizer(cfg: OptimizerConfig, info: Params, total_steps: int) -> optax.GradientTransformation:
    schedule = learning_rate_schedule(cfg, total_steps)
    mask = weight_decay_mask(info)
    if cfg.name == OptimizerName.adamw:
        opt = optax.adamw(
            schedule, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay, mask=mask
        )
    else:  # SGD with momentum; decoupled weight decay scaled by the learning rate
        opt = optax.chain(
            optax.add_decayed_weights(cfg.weight_decay, mask),
            optax.sgd(schedule, momentum=cfg.momentum or None, nesterov=cfg.nesterov),
        )
    if cfg.grad_clip > 0:
        opt = optax.chain(optax.clip_by_global_norm(cfg.grad_clip), opt)
    return opt
