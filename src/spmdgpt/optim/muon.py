"""optax transformations for the hidden matrices: Muon and manifold Muon.

Both keep an EMA momentum M <- β M + (1 - β) G (Nesterov: the step uses β M + (1 - β) G) and
see every parameter as a batch of matrices (`matrices.MatrixView`).

* Muon (K. Jordan et al., 2024, https://kellerjordan.github.io/posts/muon/): step
  -lr (msign(M) sqrt(max(1, fan_out / fan_in)) + wd W), the width factor as in Jordan's Muon.
* Manifold Muon (J. Bernstein, "Modular Manifolds", Thinking Machines Lab, 2025): W stays on the
  Stiefel manifold (orthonormal columns of the tall view); the step is the solution A of the
  constrained problem in `manifold.py` with ||A||_op <= η = lr (made exactly tangent by
  `manifold.feasible_direction` when the solver stops early), then W <- msign(W + A). The
  update handed to optax is msign(W + A) - W, so `optax.apply_updates` lands on the manifold.
  Parameters must start on the manifold: `project_to_manifold` (train.init_state calls it).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from spmdgpt.model import Params
from spmdgpt.optim.manifold import manifold_muon_direction, retract
from spmdgpt.optim.matrices import map_matrices, orthogonalize, spec_of

Array = jax.Array


class MomentumState(NamedTuple):
    count: Array  # steps taken (drives the step-size schedule)
    mu: Params  # momentum of the governed matrices (MaskedNode elsewhere)


def _init(params) -> MomentumState:
    return MomentumState(jnp.zeros([], jnp.int32), jax.tree.map(jnp.zeros_like, params))


def _momentum(grads, state: MomentumState, beta: float, nesterov: bool):
    """(new momentum, the direction the step uses)."""
    mu = jax.tree.map(lambda m, g: beta * m + (1 - beta) * g, state.mu, grads)
    if not nesterov:
        return mu, mu
    return mu, jax.tree.map(lambda m, g: beta * m + (1 - beta) * g, mu, grads)


def muon(
    info: Params,
    learning_rate: optax.Schedule,
    *,
    beta: float = 0.95,
    nesterov: bool = True,
    ns_steps: int = 5,
    weight_decay: float = 0.0,
) -> optax.GradientTransformation:
    """Muon for the hidden matrices of `info` (other leaves: use optax.partition)."""

    def update(grads, state: MomentumState, params=None):
        if params is None and weight_decay:
            raise ValueError("muon with weight decay needs params")
        mu, direction = _momentum(grads, state, beta, nesterov)
        lr = learning_rate(state.count)

        def step(view, d, w):
            o = orthogonalize(view, d, ns_steps) * max(1.0, view.fan_out / view.fan_in) ** 0.5
            return -lr * (o + weight_decay * w) if weight_decay else -lr * o

        w = params if params is not None else grads
        return map_matrices(step, info, direction, w), MomentumState(state.count + 1, mu)

    return optax.GradientTransformation(_init, update)


def manifold_muon(
    info: Params,
    learning_rate: optax.Schedule,
    *,
    beta: float = 0.95,
    nesterov: bool = True,
    solver: str = "admm",
    steps: int = 10,
    rho: float = 16.0,
    dual_lr: float = 0.003,
    msign_steps: int = 8,
) -> optax.GradientTransformation:
    """Manifold Muon for the hidden matrices of `info`; needs params (they are the base point)."""

    def update(grads, state: MomentumState, params=None):
        if params is None:
            raise ValueError("manifold_muon needs params: optimizer.update(grads, state, params)")
        mu, direction = _momentum(grads, state, beta, nesterov)
        eta = learning_rate(state.count)

        def step(view, d, w):
            wm = view.to_matrices(w)
            a = manifold_muon_direction(
                wm, view.to_matrices(d), eta,
                solver=solver, steps=steps, rho=rho, lr=dual_lr, msign_steps=msign_steps,
            )  # fmt: skip
            return view.from_matrices(retract(wm, a, msign_steps) - wm, spec_of(w))

        return map_matrices(step, info, direction, params), MomentumState(state.count + 1, mu)

    return optax.GradientTransformation(_init, update)


def project_to_manifold(info: Params, params: Params, steps: int = 24) -> Params:
    """Every hidden matrix replaced by its polar factor (orthonormal columns of the tall view).

    24 Polar Express steps: enough for Gaussian square matrices, whose smallest singular value
    can be ~1e-6 of the Frobenius norm. jit this (under the mesh) for sharded params.
    """
    return map_matrices(lambda view, x: orthogonalize(view, x, steps), info, params)
