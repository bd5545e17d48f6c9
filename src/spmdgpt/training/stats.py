"""Model statistics (`train.stats_every=N`): what a researcher looks at to see which layer is
blowing up, every N steps.

Per layer (from a forward pass of the step's batch, `model.activation_stats`): the RMS of the
residual stream after the block, of the attention and MLP outputs and of the MLP
pre-activation, and the largest attention logit; in an MoE model also the routing's (null at
its dense layers, and the MLP pre-activation null at its MoE layers). Per parameter group (every
leaf; the stacked block leaves split per layer of their stack: `dense_blocks.*/<i>` is an MoE
model's i-th dense layer): the gradient norm, the parameter norm and the update/parameter RMS
ratio (the optimizer's update for this step's gradients, before it is applied).

They are computed by a separate jitted function, on those steps only, from the state before
the step and the step's batch (gradients as the step takes them, microbatch by microbatch;
activations of the step's first microbatch): the training step itself is the same program with
statistics on or off, so the run's losses are bitwise the same. Cost on a statistics step: one more forward and
backward pass and one
optimizer update (plus q.k and the up projection again); nothing on the other steps.

Rows in metrics.jsonl (and every tracker): {"step": s, "stats/<name>/<layer>": ...,
"stats/grad_norm/<group>[/<layer>]": ..., "stats/param_norm/...", "stats/update_ratio/..."}.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from spmdgpt.config import Config
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import activation_stats, is_info, param_info
from spmdgpt.model.pipeline import stack_order
from spmdgpt.training.step import step_gradients


def _group_norms(tree, stacked: bool):
    """sqrt(sum of squares) of a leaf: one value, or one per layer for a stacked block leaf."""
    a = tree.astype(jnp.float32)
    axes = tuple(range(1, a.ndim)) if stacked else None
    return jnp.sqrt(jnp.sum(jnp.square(a), axis=axes))


def make_stats_fn(cfg: Config, rules: Rules, optimizer: optax.GradientTransformation):
    """jit(state, inputs, targets, segment_ids=None, positions=None) -> {name: float32 scalar
    or [layers]}."""
    gradients = step_gradients(cfg, rules)
    k = cfg.train.microbatches
    infos = jax.tree.leaves(param_info(cfg.model), is_leaf=is_info)  # (in the parameters' leaf order)
    order = stack_order(cfg.model.num_layers, rules.stage_size(), rules.repeats)
    to_layers = (lambda v: v) if order is None else (lambda v: v[np.argsort(order)])  # (a circular pipeline's stack)

    def first_part(a):  # rows 0, k, 2k, ...: the step's first microbatch, in the batch's sharding
        return None if a is None or k == 1 else jnp.reshape(a, (a.shape[0] // k, k) + a.shape[1:])[:, 0]

    def stats(state, inputs, targets, segment_ids: Optional[jax.Array] = None,
              positions: Optional[jax.Array] = None):
        batch = (inputs, targets, segment_ids, positions)
        _, grads = gradients(state.params, state.step, *batch)  # the step's own gradients
        updates, _ = optimizer.update(grads, state.opt_state, state.params)
        act = [a if k == 1 else first_part(a) for a in (inputs, positions, segment_ids)]
        out = dict(activation_stats(cfg.model, rules, state.params, *act))
        flat, _ = jax.tree_util.tree_flatten_with_path(state.params)
        g_flat = jax.tree.leaves(grads)
        u_flat = jax.tree.leaves(updates)
        for (path, p), g, u, i in zip(flat, g_flat, u_flat, infos, strict=True):
            name = jax.tree_util.keystr(path).lstrip(".")
            stacked = "layers" in i.logical  # (a stacked block leaf: per layer of its stack)
            p_norm, g_norm, u_norm = (_group_norms(x, stacked) for x in (p, g, u))
            if stacked:
                p_norm, g_norm, u_norm = map(to_layers, (p_norm, g_norm, u_norm))
            out[f"grad_norm/{name}"] = g_norm
            out[f"param_norm/{name}"] = p_norm
            # update RMS / parameter RMS (the sizes cancel); NaN (written as null) for a zero leaf
            out[f"update_ratio/{name}"] = jnp.where(p_norm > 0, u_norm / jnp.where(p_norm > 0, p_norm, 1), jnp.nan)
        return out

    return jax.jit(stats)


def stats_row(step: int, stats: dict) -> dict:
    """A metrics row of fetched statistics: per-layer vectors become one key per layer."""
    row = {"step": step}
    for name, v in stats.items():
        v = np.asarray(v, np.float64)
        if v.ndim == 0:
            row[f"stats/{name}"] = float(v)
        else:
            row.update({f"stats/{name}/{i}": float(x) for i, x in enumerate(v)})
    return row
