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

Square W needs no solver: its tangent vectors are WK with K skew, so the problem is
min <K, skew(WᵀG)> s.t. ||K||_op <= η, solved by K = -η msign(skew(WᵀG)) (the polar factor of a
skew matrix is skew), i.e. A* = -η msign(G + 2WΛ₀): Λ₀ is already optimal, and
`manifold_muon_direction` skips the iterations (measured on B1's 256x256 attention matrices:
optimal to 1e-7 at k = 0). Tall W (the MLP's 1024x256 views) is where the solvers work;
steps=0 takes this Λ₀ step for them too (feasible, not optimal: 7.5e-2 off on B1's).

Both start from Λ₀ = -¼(WᵀG + GᵀW) (which makes G + 2WΛ₀ the tangent projection of G) and work
on G / ||G||_F: the problem is scale-invariant, so a fixed ρ or γ means the same thing for every
gradient. Wide matrices are solved transposed. Everything is batched over leading axes.

Primal recovery (`feasible_direction`). -η msign(G + 2WΛ) is the answer only at the exact dual
optimum, and real gradients are nearly low-rank (stable rank 2-3 on the B1 model), where the
dual is flat and non-smooth: on 1024x256 MLP matrices, after 10 ADMM iterations the dual
objective is within 1e-3 of optimal while that A violates tangency by ||AᵀW + WᵀA||_F ~ 5η
(benchmarks/BENCHMARKS.md). So the returned A is made feasible: each candidate is projected onto
the tangent space, A - W sym(WᵀA), and scaled to ||A||_op <= η; the candidate with the better
objective wins, per matrix. Candidates: -msign(G + 2WΛ) (exact at the optimum); the same at Λ₀,
-msign of G's tangent projection (one msign more: ADMM's primal is not monotone, and on the
tall B1 matrices no solver beats this before ~20 iterations); for ADMM, its multiplier Ω,
which converges to the primal solution and satisfies ||Ω||_op <= 1 (best from ~20 iterations).
The retraction discards the normal part of a step anyway (msign(W + WS) = W for symmetric S
small), so this is the step that is really taken, with its step size kept honest.
`duality_gap` certifies how far from optimal it is.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

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


class Dual(NamedTuple):
    """The solver's output: Λ (symmetric, n x n) and ADMM's multiplier Ω (m x n; None for dual
    ascent), per matrix."""

    lam: Array
    omega: Array | None


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
) -> Dual:
    """Λ (and ADMM's Ω) after `steps` iterations (tall W, G normalised here); trace=True: every
    iterate k = 0..steps stacked on a new leading axis (for convergence plots)."""
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
        if trace:
            return Dual(jnp.concatenate([lam0[None], lams], axis=0), None)
        return Dual(lam, None)
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
            return (lam, x, omega), (lam, omega) if trace else None

        x0 = g + 2 * w @ lam0
        omega0 = jnp.zeros_like(g)
        (lam, _, omega), iterates = jax.lax.scan(body, (lam0, x0, omega0), None, length=steps)
        if trace:
            lams, omegas = iterates
            return Dual(jnp.concatenate([lam0[None], lams]), jnp.concatenate([omega0[None], omegas]))
        return Dual(lam, omega)


def tangent_project(w: Array, a: Array) -> Array:
    """A - W sym(WᵀA): the nearest matrix tangent to the manifold at W (W tall, WᵀW = I)."""
    return a - w @ _sym(jnp.matrix_transpose(w) @ a)


def op_norm(a: Array, squarings: int = 6, iters: int = 16) -> Array:
    """Largest singular value per matrix (matmuls only): power iteration on (AᵀA)^(2^squarings),
    then the Rayleigh quotient on AᵀA. An estimate from below: within ~1e-6 of an SVD for
    separated top values, within their spread when they cluster (as for polar factors)."""
    gram = jnp.matrix_transpose(a) @ a if a.shape[-2] >= a.shape[-1] else a @ jnp.matrix_transpose(a)
    power = gram
    for _ in range(squarings):
        power = power / (jnp.trace(power, axis1=-2, axis2=-1)[..., None, None] + 1e-30)
        power = power @ power
    v = jnp.ones_like(gram[..., :1])  # [.., n, 1], in the batch's sharding
    for _ in range(iters):
        v = power @ v
        v = v / (jnp.linalg.norm(v, axis=-2, keepdims=True) + 1e-30)
    return jnp.sqrt(jnp.maximum(jnp.sum(v * (gram @ v), axis=(-2, -1)), 0.0))


def _feasible(w: Array, a: Array) -> Array:
    """A projected onto the tangent space at W, scaled down to ||A||_op <= 1 if needed."""
    a = tangent_project(w, a)
    return a / jnp.maximum(1.0, op_norm(a))[..., None, None]


def _start_step(w: Array, gn: Array, msign_steps: int) -> Array:
    """-msign(Ĝ + 2WΛ₀) = -msign of Ĝ's tangent projection: the optimum for square W, a floor
    for early stops on tall W (module docstring)."""
    return -msign(tangent_project(w, gn), msign_steps)


def feasible_direction(w: Array, g: Array, dual: Dual, eta, msign_steps: int = 8) -> Array:
    """A with AᵀW + WᵀA = 0 and ||A||_op <= η, the best of the candidates (module docstring): each
    projected onto the tangent space and scaled by η / max(1, ||·||_op), the lowest <A, Ĝ> wins."""
    g = normalize(g)
    candidates = [
        -msign(g + 2 * w @ dual.lam, msign_steps),  # the write-up's recovery at the final Λ
        _start_step(w, g, msign_steps),  # the same at Λ₀: a floor for early stops
    ]
    if dual.omega is not None:  # ADMM: ||Ω||_op <= 1 by construction, ~tangent
        candidates.append(dual.omega)
    best = _feasible(w, candidates[0])
    for other in candidates[1:]:
        other = _feasible(w, other)
        better = jnp.sum(other * g, axis=(-2, -1)) < jnp.sum(best * g, axis=(-2, -1))  # <A, Ĝ>/η lower
        best = jnp.where(better[..., None, None], other, best)
    return eta * best


def duality_gap(w: Array, g: Array, lam: Array, a: Array, eta, msign_steps: int = 8) -> Array:
    """||Ĝ + 2WΛ||_* + <A, Ĝ>/η >= 0 for a feasible A: how far its objective is from optimal at
    most (relative to the optimum it is this divided by ~||Ĝ + 2WΛ||_*)."""
    return dual_objective(w, g, lam, msign_steps) + jnp.sum(a * normalize(g), axis=(-2, -1)) / eta


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
        return jnp.matrix_transpose(
            manifold_muon_direction(jnp.matrix_transpose(w), jnp.matrix_transpose(g), eta, **kw)
        )
    if w.shape[-2] == w.shape[-1] or steps == 0:  # square W: Λ₀ is the dual optimum (docstring)
        return eta * _feasible(w, _start_step(w, normalize(g), msign_steps))
    dual = dual_iterates(w, g, solver=solver, steps=steps, rho=rho, lr=lr, msign_steps=msign_steps)
    return feasible_direction(w, g, dual, eta, msign_steps)


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
