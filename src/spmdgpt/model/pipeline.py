"""Pipeline parallelism: the layer stack split over the stage axes (mesh.stage = S under the packaged
tables, whose `layers` parameter rule puts layers [i L/S, (i + 1) L/S) on stage i), microbatches
flowing through the stages inside the one jitted step.

GPipe's schedule (Huang et al. 2019) written as the scaling book's and MaxText's SPMD loop: a
state of S microbatches' activations, one per stage, [S, tokens, d] split over the stage axes.
Each of M + S - 1 iterations

    1. shifts the state one stage on (`ppermute`: stage s's activations to stage s + 1) and puts
       the next microbatch into stage 0 (a repeat of the last one once all M are in),
    2. runs every stage on its slot at once: `vmap` over the stage dimension of the stage's
       layers (its [L/S] slice of the stack, a `lax.scan`) and of the state, the vmapped axis
       being the stage axes (`spmd_axis_name`), so each device runs only its own stage,
    3. reads the last stage's output (microbatch i - S + 1 once i >= S - 1).

A stage is busy in M of the M + S - 1 iterations: the bubble is (S - 1) / (M + S - 1) of the
time, spent here computing on repeated inputs whose results are never read. The backward pass
is JAX's transpose of the loop (autodiff): the iterations in reverse, the permutes reversed,
each stage's backward on its own devices; the loop's saved state is GPipe's M microbatches of
activations per stage (less with model.remat, which the layer scan keeps). Autodiff rather than
a hand-written backward: the schedule is a plain `lax.scan`, so its transpose is the reverse
schedule with no code of its own, and remat, microbatching and sharding compose as anywhere else.

Per-sequence inputs (positions, document ids) travel with their microbatch's activations.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from spmdgpt.sharding import Rules


def _staged(a: jax.Array, s: int) -> jax.Array:
    """A stacked parameter [L, ...] (L split over the stage axes) as [S, L / S, ...]: a reshape
    that keeps each stage's layers where they are."""
    spec = jax.typeof(a).sharding.spec
    spec = tuple(spec) + (None,) * (a.ndim - len(spec))
    return jnp.reshape(a, (s, a.shape[0] // s) + a.shape[1:], out_sharding=P(spec[0], None, *spec[1:]))


def _microbatches(a: jax.Array, m: int, spec: Sequence) -> jax.Array:
    """[B, ...] -> [M, B / M, ...], microbatch j the rows j, j + M, ... (each keeps the batch's
    split over its devices, as gradient accumulation's parts do); spec: [B, ...]'s."""
    b = a.shape[0]
    a = jnp.reshape(a, (b // m, m) + a.shape[1:], out_sharding=P(spec[0], None, *spec[1:]))
    return jnp.swapaxes(a, 0, 1)


def _whole_batch(a: jax.Array, spec: Sequence) -> jax.Array:
    """The inverse of `_microbatches`."""
    a = jnp.swapaxes(a, 0, 1)
    return jnp.reshape(a, (a.shape[0] * a.shape[1],) + a.shape[2:], out_sharding=P(*spec))


def pipeline(rules: Rules, stage: Callable, stack, per_layer, x: jax.Array, per_sequence: Sequence[Optional[jax.Array]],
             batch: int, microbatches: int) -> jax.Array:
    """Runs the layer stack over x [batch * t, d] (the `tokens` layout) as a GPipe pipeline of
    `microbatches` microbatches over the stage axes; returns x after the last layer, in the same
    layout. stage(stack_slice, per_layer_slice, x_mb, *per_sequence_mb) -> x_mb runs one stage's
    layers (a scan over its [L / S] slices) on one microbatch x_mb [batch / M * t, d] with its
    per-sequence arrays ([batch / M, t] each, or None). stack: the stacked parameters [L, ...];
    per_layer: a tree of per-layer inputs [L, ...] (unsplit); per_sequence: [batch, t] arrays or
    None."""
    s, m, axes = rules.stage_size(), microbatches, rules.stage_axes()
    t = x.shape[0] // batch
    d = x.shape[1:]
    tok, seq = rules.spec("tokens", *([None] * len(d))), rules.spec("batch", None)
    rows = rules.spec("batch", None, *([None] * len(d)))  # x as [batch, t, d]
    stack = jax.tree.map(lambda a: _staged(a, s), stack)
    per_layer = jax.tree.map(lambda a: jax.sharding.reshard(jnp.reshape(a, (s, a.shape[0] // s) + a.shape[1:]),
                                                            P(axes)), per_layer)

    # microbatches: x as [M, B / M * t, d], each per-sequence array [M, B / M, t]
    xs = _microbatches(jnp.reshape(x, (batch, t) + d, out_sharding=rows), m, rows)
    xs = jnp.reshape(xs, (m, batch // m * t) + d, out_sharding=P(None, *tok))
    carried = [None if a is None else _microbatches(a, m, seq) for a in per_sequence]
    kept = [i for i, a in enumerate(carried) if a is not None]
    inputs = [xs] + [carried[i] for i in kept]
    specs = [tok] + [seq] * len(kept)
    staged_specs = [P(axes, *sp) for sp in specs]

    def shift(state, new):
        """Each stage's slot to the next stage; stage 0's from `new` (the next microbatch)."""
        def body(*arrays):
            k = len(arrays) // 2
            first = jax.lax.axis_index(axes) == 0
            moved = [jax.lax.ppermute(a, axes, [(i, i + 1) for i in range(s - 1)]) for a in arrays[:k]]
            return tuple(jnp.where(first, n[None], a) for a, n in zip(moved, arrays[k:]))

        return jax.shard_map(body, in_specs=(*staged_specs, *specs), out_specs=tuple(staged_specs))(*state, *new)

    def last(a):
        """The last stage's slot, on every device (a sum over the stage axes of it and zeros)."""
        def body(a):
            return jax.lax.psum(jnp.where(jax.lax.axis_index(axes) == s - 1, a[0], 0), axes)

        return jax.shard_map(body, in_specs=staged_specs[0], out_specs=specs[0])(a)

    def run(p, layers, x, *rest):
        extras = iter(rest)
        per_seq = [next(extras) if i in kept else None for i in range(len(per_sequence))]
        return stage(p, layers, x, *per_seq)

    def iteration(state, i):
        new = [a[jnp.minimum(i, m - 1)] for a in inputs]
        state = shift(state, new)
        x = jax.vmap(run, spmd_axis_name=axes)(stack, per_layer, *state)
        return (x, *state[1:]), last(x)

    state = tuple(jnp.zeros((s,) + a.shape[1:], a.dtype, out_sharding=sp) for a, sp in zip(inputs, staged_specs))
    _, outs = jax.lax.scan(iteration, state, jnp.arange(m + s - 1))
    out = _whole_batch(jnp.reshape(outs[s - 1:], (m, batch // m, t) + d, out_sharding=P(None, *rows)), rows)
    return jnp.reshape(out, x.shape, out_sharding=tok)
