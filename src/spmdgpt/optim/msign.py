"""msign(X) = X (XᵀX)^(-1/2), the orthogonal polar factor, with matmuls only.

For X = U Σ Vᵀ (thin SVD), msign(X) = U Vᵀ: every non-zero singular value becomes 1. It is
computed by composing odd quintic polynomials p(x) = a x + b x³ + c x⁵ applied to the singular
values (p(X) = a X + b X XᵀX + c X (XᵀX)²), after scaling X so that its singular values lie
in (0, 1].

Coefficients: the Polar Express sequence (Amsel, Persson, Musco, Gower, "The Polar Express:
Optimal Matrix Sign Methods and Their Application to the Muon Algorithm", arXiv:2505.16932,
2025), each step the minimax-optimal quintic for the interval the previous steps leave, designed
for singular values in [1e-3, 1]; the sequence is greedy-optimal, so any prefix is the best
k-step method. After the eight listed steps it repeats (15/8, -10/8, 3/8), the quintic
Newton-Schulz step that fixes 1 to third order. On [1e-3, 1] the first 5 steps leave singular
values in [0.87, 1.13] (enough for Muon), 7 steps within 1e-8 of 1 in exact arithmetic (what
manifold Muon's solver and retraction need). Tests check all this against an SVD.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

POLAR_EXPRESS = (
    (8.28721201814563, -23.595886519098837, 17.300387312530933),
    (4.107059111542203, -2.9478499167379106, 0.5448431082926601),
    (3.9486908534822946, -2.908902115962949, 0.5518191394370137),
    (3.3184196573706015, -2.488488024314874, 0.51004894012372),
    (2.300652019954817, -1.6689039845747493, 0.4188073119525673),
    (1.891301407787398, -1.2679958271945868, 0.37680408948524835),
    (1.8750014808534479, -1.2500016453999487, 0.3750001645474248),
    (1.875, -1.25, 0.375),
)
SAFETY = 1.01  # divide by 1.01 * ||X||_F: keeps the top singular value inside (0, 1] after rounding


def coefficients(steps: int) -> tuple:
    """The first `steps` Polar Express steps, the last one repeated beyond the table."""
    return tuple(POLAR_EXPRESS[min(i, len(POLAR_EXPRESS) - 1)] for i in range(steps))


def msign(x: Array, steps: int = 8, eps: float = 1e-7) -> Array:
    """Orthogonal polar factor of the matrices in the last two axes of x (leading axes batch).

    Works for tall and wide matrices (iterates on the side with the smaller Gram matrix) and in
    any float dtype (bf16 on accelerators: the iteration is only matmuls). msign(0) = 0.
    """
    if x.ndim < 2:
        raise ValueError(f"msign needs a matrix, got shape {x.shape}")
    wide = x.shape[-2] <= x.shape[-1]
    if not wide:
        x = jnp.matrix_transpose(x)
    norm = jnp.sqrt(jnp.sum(jnp.square(x.astype(jnp.float32)), axis=(-2, -1), keepdims=True))
    x = x / (SAFETY * norm + eps).astype(x.dtype)
    for a, b, c in coefficients(steps):
        gram = x @ jnp.matrix_transpose(x)  # [.., m, m] with m the short side
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x if wide else jnp.matrix_transpose(x)


def nuclear_norm(x: Array, steps: int = 8) -> Array:
    """Sum of singular values, <msign(X), X>, per matrix (matmuls only)."""
    return jnp.sum(msign(x, steps) * x, axis=(-2, -1))
