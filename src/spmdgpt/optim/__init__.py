"""The optax chain built from config + per-parameter metadata.

adamw, sgd: one rule for every parameter. muon, manifold_muon: the hidden matrices (see
`matrices.is_hidden_matrix`) get Muon / manifold Muon, every other parameter AdamW
(`optax.partition`). optimizer.embed_lr / unembed_lr give the embedding / unembedding AdamW
at a peak learning rate of their own. Gradient clipping by global norm comes first in every case.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import jax
import jax.numpy as jnp
import optax

from spmdgpt.config import OptimizerConfig, OptimizerName, Schedule
from spmdgpt.model import Params, is_info
from spmdgpt.optim.manifold import manifold_muon_direction
from spmdgpt.optim.matrices import is_hidden_matrix
from spmdgpt.optim.msign import msign
from spmdgpt.optim.muon import manifold_muon, muon, project_to_manifold

__all__ = [
    "build_optimizer",
    "initial_params",
    "learning_rate_schedule",
    "manifold_muon_direction",
    "msign",
    "weight_decay_mask",
]


def learning_rate_schedule(cfg: OptimizerConfig, total_steps: int, peak: float | None = None,
                           replans: Sequence[Tuple[int, int]] = ()) -> optax.Schedule:
    """Linear warmup from 0 to peak (default lr) over `warmup_steps`, then cosine decay to peak * min_lr_ratio,
    constant, or (wsd) constant until the last cooldown_fraction of the steps and a linear decay
    to peak * min_lr_ratio over them. replans (train.replans, as config.replan_points): the
    schedule is laid out over the first plan's steps and squeezed after each re-plan (`squeezed`)."""
    if not replans:
        return _schedule(cfg, total_steps, peak)
    horizon = replans[0][1]
    return squeezed(_schedule(cfg, horizon, peak), horizon, replans, total_steps)


def squeezed(schedule: optax.Schedule, horizon: int, replans: Sequence[Tuple[int, int]], steps: int) -> optax.Schedule:
    """`schedule` (laid out over `horizon` steps) as a run re-planned at `replans` takes it: step
    by step up to the first re-plan; from a re-plan at step s to the next (the last: to `steps`)
    its position moves linearly from where it was at s to `horizon` at that stretch's planned
    end, so the learning rate goes on from its value at s, without a jump, and still ends where
    the schedule ends. The position is an exact function of the step count, so a rerun of the
    recorded re-plans takes the same learning rates, bitwise."""
    ends = [planned for _, planned in replans[1:]] + [steps]
    stretches = []  # (first step, the schedule's position there, position per step)
    position, since, rate = 0.0, 0, 1.0
    for (at, _), end in zip(replans, ends):
        position += (at - since) * rate
        since, rate = at, (horizon - position) / (end - at)
        stretches.append((at, position, rate))

    def lr(count):
        value = schedule(count)
        for at, start, per_step in stretches:
            value = jnp.where(count >= at, schedule(start + (count - at) * per_step), value)
        return value

    return lr


def warmup_steps(cfg: OptimizerConfig, total_steps: int) -> int:
    """The warmup's steps in a run of `total_steps`: optimizer.warmup_share of them (rounded) when
    set, else optimizer.warmup_steps; at most the run."""
    steps = cfg.warmup_steps if cfg.warmup_share is None else round(cfg.warmup_share * total_steps)
    return min(steps, total_steps)


def _schedule(cfg: OptimizerConfig, total_steps: int, peak: float | None) -> optax.Schedule:
    peak = cfg.lr if peak is None else peak
    warmup = warmup_steps(cfg, total_steps)
    if cfg.schedule == Schedule.wsd:
        decay = max(1, round(cfg.cooldown_fraction * total_steps))
        stable_end = max(warmup, total_steps - decay)
        return optax.join_schedules(
            [optax.linear_schedule(0.0, peak, max(warmup, 1)), optax.constant_schedule(peak),
             optax.linear_schedule(peak, peak * cfg.min_lr_ratio, max(total_steps - stable_end, 1))],
            [warmup, stable_end],
        )
    if cfg.schedule == Schedule.cosine:
        return optax.warmup_cosine_decay_schedule(
            init_value=0.0,
            peak_value=peak,
            warmup_steps=warmup,
            decay_steps=max(total_steps, warmup + 1),
            end_value=peak * cfg.min_lr_ratio,
        )
    return optax.join_schedules(
        [optax.linear_schedule(0.0, peak, max(warmup, 1)), optax.constant_schedule(peak)],
        [warmup],
    )


def weight_decay_mask(info: Params) -> Params:
    """True for parameters that get weight decay, read from their metadata (not from ndim)."""
    return jax.tree.map(lambda i: i.decay, info, is_leaf=is_info)


def initial_params(cfg: OptimizerConfig, info: Params, params: Params) -> Params:
    """The parameters an optimizer starts from: manifold_muon needs its matrices orthonormal."""
    if cfg.name != OptimizerName.manifold_muon:
        return params
    return jax.jit(project_to_manifold, static_argnums=0)(info, params)


def build_optimizer(cfg: OptimizerConfig, info: Params, total_steps: int,
                    replans: Sequence[Tuple[int, int]] = ()) -> optax.GradientTransformation:
    """The optimizer of a run of total_steps steps (re-planned at `replans`, train.replans)."""
    mask = weight_decay_mask(info)

    def adamw_with(peak):
        return optax.adamw(learning_rate_schedule(cfg, total_steps, peak, replans), b1=cfg.b1, b2=cfg.b2,
                           eps=cfg.eps, weight_decay=cfg.weight_decay, mask=mask)

    schedule = learning_rate_schedule(cfg, total_steps, replans=replans)
    if cfg.name == OptimizerName.sgd:  # decoupled weight decay scaled by the learning rate
        rest = optax.chain(
            optax.add_decayed_weights(cfg.weight_decay, mask),
            optax.sgd(schedule, momentum=cfg.momentum or None, nesterov=cfg.nesterov),
        )
    else:
        rest = adamw_with(cfg.lr)
    # One rule per label: "matrix" (muon / manifold_muon: the hidden matrices), "embed" /
    # "unembed" (optimizer.embed_lr / unembed_lr: AdamW at their own peak, same schedule shape),
    # and the rest: "sgd", or "adamw" (also beside Muon; the label names the optimizer state).
    other = "sgd" if cfg.name == OptimizerName.sgd else "adamw"
    rules = {other: rest}
    labels = jax.tree.map(lambda _: other, info, is_leaf=is_info)
    if cfg.name in (OptimizerName.muon, OptimizerName.manifold_muon):
        matrix_lr = learning_rate_schedule(cfg, total_steps, cfg.muon_lr, replans)
        common = dict(beta=cfg.muon_momentum, nesterov=cfg.muon_nesterov)
        if cfg.name == OptimizerName.muon:
            rules["matrix"] = muon(info, matrix_lr, ns_steps=cfg.ns_steps, weight_decay=cfg.weight_decay, **common)
        else:
            rules["matrix"] = manifold_muon(
                info, matrix_lr, solver=cfg.solver.value, steps=cfg.solver_steps, rho=cfg.rho,
                dual_lr=cfg.dual_lr, msign_steps=cfg.msign_steps, **common,
            )  # fmt: skip
        labels = jax.tree.map(lambda i: "matrix" if is_hidden_matrix(i) else other, info, is_leaf=is_info)
    for name, lr in (("embed", cfg.embed_lr), ("unembed", cfg.unembed_lr)):
        if lr is not None and getattr(info, name) is not None:
            rules[name] = adamw_with(lr)
            labels = labels._replace(**{name: name})
    opt = rest if len(rules) == 1 else optax.partition(rules, labels)
    # μP (model.parametrization): each AdamW-governed parameter's update times its lr_scale (Muon's
    # matrices keep Muon's own rate)
    scales = jax.tree.map(lambda i, label: i.lr_scale if label != "matrix" else 1.0, info, labels, is_leaf=is_info)
    if any(s != 1.0 for s in jax.tree.leaves(scales)):
        opt = optax.chain(opt, scaled_per_parameter(scales))
    if cfg.grad_clip > 0:
        opt = optax.chain(optax.clip_by_global_norm(cfg.grad_clip), opt)
    if cfg.state_dtype is not None:
        opt = stored_as(opt, jnp.dtype(cfg.state_dtype.value))
    return opt


def scaled_per_parameter(scales: Params) -> optax.GradientTransformation:
    """Each parameter's update times its constant in `scales` (a tree of floats like the
    parameters'): μP's learning-rate multipliers on top of one optimizer's rule. Stateless."""
    def update(updates, state, params=None):
        return jax.tree.map(lambda u, c: u if c == 1.0 else u * jnp.asarray(c, u.dtype), updates, scales), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def stored_as(inner: optax.GradientTransformation, dtype) -> optax.GradientTransformation:
    """`inner` with every floating-point leaf of its state stored in `dtype` (e.g. bfloat16
    moments): each update reads the state back as float32, runs `inner`, and rounds the new state
    to `dtype` again. Counters and other integer leaves are left alone."""
    def cast(tree, to):
        return jax.tree.map(lambda x: x.astype(to) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)

    def init(params):
        return cast(inner.init(params), dtype)

    def update(updates, state, params=None):
        updates, state = inner.update(updates, cast(state, jnp.float32), params)
        return updates, cast(state, dtype)

    return optax.GradientTransformation(init, update)
