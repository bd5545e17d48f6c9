"""Manifold Muon's inner problem: the steepest-descent step on the Stiefel manifold.

For a tall W (m >= n) with WᵀW = I, a gradient (or momentum) G and a step size η, find

    A* = argmin <A, G>   subject to   ||A||_op <= η,   AᵀW + WᵀA = 0   (A tangent at W),

then retract: W <- msign(W + A*). Its dual is min over symmetric Λ of ||G + 2WΛ||_* (nuclear
norm), and A* = -η msign(G + 2WΛ*). Two solvers for Λ (J. Bernstein, "Modular Manifolds",
Thinking Machines Lab, 2025, for the problem and dual ascent; the ADMM splitting is the one in
the issue's write-up):

* dual ascent: (sub)gradient descent on the dual, Λ <- Λ - γ_k sym(WᵀM + MᵀW) with
  M = msign(G + 2WΛ) and γ_k decaying linearly to 0; one msign per iteration.
* ADMM: split X = G + 2WΛ with penalty ρ and scaled dual Ω; the X-update is singular value
  thresholding written with two msigns (one m x n, one n x n); ~10 iterations instead of ~100.

Both start from Λ₀ = -¼(WᵀG + GᵀW) (which makes G + 2WΛ₀ the tangent projection of G) and work
on G / ||G||_F: the problem is scale-invariant, so a fixed ρ or γ means the same thing for every
gradient. Wide matrices are solved transposed. Everything is batched over leading axes.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from spmdgpt.optim.msign import msign, nuclear_norm

Array = jax.Array
Solver = Literal["admm", "dual_ascent"]
SOLVERS = ("admm", "dual_ascent")


def _sym(x: Array) -> Array:
    return 0.5 * (x + jnp.matrix_transpose(x))


def normalize(g: Array, eps: float = 1e-30) -> Array:
    """G / ||G||_F per matrix (the solvers' step sizes are set for this scale)."""
    norm = jnp.sqrt(jnp.sum(jnp.square(g), axis=(-2, -1), keepdims=True))
    return g / (norm + eps)


def _check(w: Array, g: Array, solver: str) -> None:
    if w.shape != g.shape or w.ndim < 2:
        raise ValueError(f"W and G must be matrices of one shape, got {w.shape} and {g.shape}")
    if w.shape[-2] < w.shape[-1]:
        raise ValueError(f"expected a tall W (m >= n), got {w.shape}; transpose wide matrices")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")


def dual_iterates(
    w: Array,
    g: Array,
    *,
    solver: Solver = "admm",
    steps: int = 10,
    rho: float = 16.0,
    lr: float = 0.003,
    msign_steps: int = 8,
    trace: bool = False,
) -> Array:
    """Λ after `steps` iterations (tall W, G normalised here); trace=True: every Λ_k, k=0..steps
    stacked on a new leading axis (for convergence plots)."""
    _check(w, g, solver)
    g = normalize(g)
    lam0 = -0.5 * _sym(jnp.matrix_transpose(w) @ g)  # -¼(WᵀG + GᵀW)

    if solver == "dual_ascent":

        def body(lam, k):
            m = msign(g + 2 * w @ lam, msign_steps)
            gamma = lr * (1.0 - k / steps)
            lam = lam - gamma * _sym(jnp.matrix_transpose(w) @ m)
            return lam, lam if trace else None

        lam, lams = jax.lax.scan(body, lam0, jnp.arange(steps, dtype=g.dtype))
    else:
        eye = jnp.eye(w.shape[-1], dtype=g.dtype)

        def body(carry, _):
            lam, x, omega = carry
            p = jnp.matrix_transpose(w) @ (omega / rho + x - g)
            lam = 0.5 * _sym(p)  # ¼(P + Pᵀ)
            wl2 = 2 * w @ lam
            b = g + wl2 - omega / rho
            # Singular value thresholding of B at 1/ρ: U max(Σ - 1/ρ, 0) Vᵀ.
            keep = 0.5 * (eye + msign(jnp.matrix_transpose(b) @ b - eye / rho**2, msign_steps))
            x = (b - msign(b, msign_steps) / rho) @ keep
            omega = omega + rho * (x - wl2 - g)
            return (lam, x, omega), lam if trace else None

        x0 = g + 2 * w @ lam0
        (lam, _, _), lams = jax.lax.scan(body, (lam0, x0, jnp.zeros_like(g)), None, length=steps)
    if trace:
        return jnp.concatenate([lam0[None], lams], axis=0)
    return lam


def direction_from_dual(w: Array, g: Array, lam: Array, eta, msign_steps: int = 8) -> Array:
    """A = -η msign(G + 2WΛ) (scale of G irrelevant)."""
    return -eta * msign(normalize(g) + 2 * w @ lam, msign_steps)


def manifold_muon_direction(
    w: Array,
    g: Array,
    eta,
    *,
    solver: Solver = "admm",
    steps: int = 10,
    rho: float = 16.0,
    lr: float = 0.003,
    msign_steps: int = 8,
) -> Array:
    """The update A (same shape as W) for W on the Stiefel manifold; wide W is solved as Wᵀ.

    jit- and vmap-able; leading axes are a batch of matrices (stacked layers).
    """
    if w.ndim >= 2 and w.shape[-2] < w.shape[-1]:
        kw = dict(solver=solver, steps=steps, rho=rho, lr=lr, msign_steps=msign_steps)
        return jnp.matrix_transpose(manifold_muon_direction(jnp.matrix_transpose(w), jnp.matrix_transpose(g), eta, **kw))
    lam = dual_iterates(w, g, solver=solver, steps=steps, rho=rho, lr=lr, msign_steps=msign_steps)
    return direction_from_dual(w, g, lam, eta, msign_steps)


def retract(w: Array, a: Array, msign_steps: int = 10) -> Array:
    """Back onto the manifold: msign(W + A)."""
    return msign(w + a, msign_steps)


def tangent_violation(w: Array, a: Array) -> Array:
    """||AᵀW + WᵀA||_F per matrix (0 when A is tangent at W; W tall)."""
    s = jnp.matrix_transpose(a) @ w
    return jnp.sqrt(jnp.sum(jnp.square(s + jnp.matrix_transpose(s)), axis=(-2, -1)))


def dual_objective(w: Array, g: Array, lam: Array, msign_steps: int = 8) -> Array:
    """||Ĝ + 2WΛ||_* with Ĝ = G/||G||_F; equals -<A*, Ĝ>/η at the optimum."""
    return nuclear_norm(normalize(g) + 2 * w @ lam, msign_steps)
