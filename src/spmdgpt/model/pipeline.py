"""Pipeline parallelism: the layer stack split over the stage axes (mesh.stage = S under the packaged
tables, whose `layers` parameter rule puts layers [i L/S, (i + 1) L/S) on stage i), microbatches
flowing through the stages inside the one jitted step.

GPipe's schedule (Huang et al. 2019) written as the scaling book's and MaxText's SPMD loop: a
state of S microbatches' activations, one per stage, [S, tokens, d] split over the stage axes.
Each iteration

    1. shifts the state one stage on (`ppermute`: stage s's activations to stage s + 1) and puts
       the next microbatch into stage 0 (a repeat of the last one once all M are in),
    2. runs every stage on its slot at once: `vmap` over the stage dimension of the stage's
       layers (a `lax.scan` over them) and of the state, the vmapped axis being the stage axes
       (`spmd_axis_name`), so each device runs only its own stage,
    3. reads the last stage's output (a microbatch that has passed every stage) into a buffer
       of the M microbatches' outputs, on every device.

GPipe takes M + S - 1 iterations of L / S layers: a stage is busy in M of them, so the bubble is
(S - 1) / (M + S - 1) of the time, spent here computing on repeated inputs whose results are
never read.

The circular schedule (model.pipeline_repeats = R > 1; MaxText's num_pipeline_repeats, the
interleaved schedule of Narayanan et al. 2021) cuts the layers into S R chunks of k = L / (S R)
and gives stage s the chunks s, S + s, 2 S + s, ...: a microbatch passes through the stages R
times, stage 0 taking it back from the output buffer after each pass. Stage 0 takes microbatch
slot i mod P at iteration i (P = max(M, S) slots: with fewer microbatches than stages the extra
slots idle) in pass i // P, so a microbatch's output is back at stage 0 by the time its next
pass starts; stage s runs the chunk of the pass its slot is in. (R - 1) P + M + S - 1
iterations of L / (S R) layers: for M >= S a bubble of (S - 1) / (R M + S - 1), R times less
idle time than GPipe's for the same microbatches, for R - 1 more transfers of each microbatch.
Stage s's chunks are not contiguous layers, so the stored stack is ordered by stage
(`stack_order`) while a pipelined run holds it; checkpoints keep the layers in order.

The backward pass is JAX's transpose of the loop (autodiff): the iterations in reverse, the
permutes reversed, each stage's backward on its own devices; the loop's saved state is every
iteration's stage inputs, GPipe's M microbatches of activations per stage (the layers' own
activations too, less with model.remat, which the layer scan keeps). Autodiff rather than a
hand-written backward: the schedule is a plain `lax.scan`, so its transpose is the reverse
schedule with no code of its own, and remat, microbatching and sharding compose as anywhere
else.

Per-sequence inputs (positions, document ids) travel with their microbatch's activations.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from spmdgpt.config import AttentionImpl, CollectiveMatmul, Config, global_stack, mesh_axes_of
from spmdgpt.mesh.sharding import Rules


def stack_order(num_layers: int, stages: int, repeats: int) -> Optional[np.ndarray]:
    """The layer each position of the stored stack holds while a pipeline with these stages and
    repeats runs: position (s R + r) k + j (stage s's r-th chunk of k = L / (S R) layers; each
    stage's positions contiguous, as the `layers` rule splits them) holds layer (r S + s) k + j.
    None (the layers in order) for GPipe (one repeat) or without stages."""
    if stages == 1 or repeats == 1:
        return None
    k = num_layers // (stages * repeats)
    return np.arange(num_layers).reshape(repeats, stages, k).transpose(1, 0, 2).reshape(-1)


def schedule_iterations(stages: int, microbatches: int, repeats: int = 1) -> int:
    """The iterations of the pipeline's loop, each running every stage on one microbatch's chunk
    of layers: GPipe's M + S - 1; the circular schedule's (R - 1) max(M, S) + M + S - 1. A stage
    is busy in R M of them: the bubble is the rest."""
    if repeats == 1:
        return microbatches + stages - 1
    return (repeats - 1) * max(microbatches, stages) + microbatches + stages - 1


def reorder(a: jax.Array, index: jax.Array) -> jax.Array:
    """a [L, ...] (inside jit) with its rows in `index`'s order, in a's sharding: gathered over the
    stage axes that split it, reordered, split again (a one-off, when a run starts or saves)."""
    spec = tuple(jax.typeof(a).sharding.spec) + (None,) * a.ndim
    whole = jax.sharding.reshard(a, P(None, *spec[1:a.ndim]))
    return jax.sharding.reshard(jnp.take(whole, index, axis=0), P(*spec[:a.ndim]))


def _staged(a: jax.Array, s: int, r: int) -> jax.Array:
    """A stacked parameter [L, ...] (L split over the stage axes, in `stack_order`) as
    [S, R, L / (S R), ...]: a reshape that keeps each stage's layers where they are."""
    spec = jax.typeof(a).sharding.spec
    spec = tuple(spec) + (None,) * (a.ndim - len(spec))
    return jnp.reshape(a, (s, r, a.shape[0] // (s * r)) + a.shape[1:], out_sharding=P(spec[0], None, None, *spec[1:]))


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
             batch: int, microbatches: int, remat: bool = False) -> jax.Array:
    """Runs the layer stack over x [batch * t, d] (the `tokens` layout) as a pipeline of
    `microbatches` microbatches over the stage axes, GPipe's schedule or the circular one
    (rules.repeats > 1); returns x after the last layer, in the same layout.
    stage(stack_chunk, per_layer_chunk, x_mb, *per_sequence_mb) -> x_mb runs one chunk of layers
    (a scan over its [L / (S R)] slices) on one microbatch x_mb [batch / M * t, d] with its
    per-sequence arrays ([batch / M, t] each, or None), under `rules.in_stages()` (x_mb's layout
    and that of the activations inside). stack: the stacked parameters [L, ...] in `stack_order`;
    per_layer: a tree of per-layer inputs [L, ...] in layer order (unsplit); per_sequence:
    [batch, t] arrays or None. remat: each stage's pass under `jax.checkpoint`, so that the
    backward keeps only the passes' inputs (model.pipeline_remat)."""
    s, m, r, axes = rules.stage_size(), microbatches, rules.repeats, rules.stage_axes()
    period = m if r == 1 else max(m, s)  # stage 0 takes slot i mod period at iteration i
    t = x.shape[0] // batch
    d = x.shape[1:]
    outside = rules.spec("tokens", *([None] * len(d)))
    rules = rules.in_stages()  # (the batch split over the stage axes outside: gathered over them here)
    tok, seq = rules.spec("tokens", *([None] * len(d))), rules.spec("batch", None)
    rows = rules.spec("batch", None, *([None] * len(d)))  # x as [batch, t, d]
    x = jax.sharding.reshard(x, tok)
    per_sequence = [None if a is None else jax.sharding.reshard(a, seq) for a in per_sequence]
    order = stack_order(jax.tree.leaves(stack)[0].shape[0], s, r)
    stack = jax.tree.map(lambda a: _staged(a, s, r), stack)

    def chunks(a):  # a per-layer input [L] -> [S, R, L / (S R)] split over the stages, in stack order
        a = a if order is None else a[order]
        return jax.sharding.reshard(jnp.reshape(a, (s, r, a.shape[0] // (s * r)) + a.shape[1:]), P(axes))

    per_layer = jax.tree.map(chunks, per_layer)

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

    def run(p, layers, rep, x, *rest):
        """One stage's chunk of pass `rep` (its [R, k] layers' [rep]) on its slot."""
        p, layers = jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, rep, 0, keepdims=False), (p, layers))
        extras = iter(rest)
        per_seq = [next(extras) if i in kept else None for i in range(len(per_sequence))]
        return stage(p, layers, x, *per_seq)

    if remat:  # (its residuals: the pass's inputs; the stack, the same every iteration, stays out of the loop's)
        run = jax.checkpoint(run, policy=jax.checkpoint_policies.nothing_saveable)

    def iteration(carry, i):
        state, done = carry
        slot = jnp.minimum(i % period, m - 1)  # (the extra slots of period > m repeat the last microbatch)
        new = [a[slot] for a in inputs]
        if r > 1:  # later passes start from the microbatch's output of the pass before
            new[0] = jnp.where(i < period, new[0], done[slot])
        state = shift(state, new)
        reps = jax.sharding.reshard(jnp.clip((i - jnp.arange(s)) // period, 0, r - 1), P(axes))
        x = jax.vmap(run, spmd_axis_name=axes)(stack, per_layer, reps, *state)
        j = i - (s - 1)  # the last stage's slot and pass: j mod period, j // period
        out = jnp.where((j >= 0) & (j % period < m), last(x), done[jnp.minimum(j % period, m - 1)])
        done = jax.lax.dynamic_update_index_in_dim(done, out, jnp.minimum(j % period, m - 1), 0)
        return ((x, *state[1:]), done), None

    state = tuple(jnp.zeros((s,) + a.shape[1:], a.dtype, out_sharding=sp) for a, sp in zip(inputs, staged_specs))
    done = jnp.zeros_like(xs)
    (_, done), _ = jax.lax.scan(iteration, (state, done), jnp.arange(schedule_iterations(s, m, r)))
    out = _whole_batch(jnp.reshape(done, (m, batch // m, t) + d, out_sharding=P(None, *rows)), rows)
    return jax.sharding.reshard(jnp.reshape(out, x.shape, out_sharding=tok), outside)


# ----------------------------------------------------------------------------- configuration checks


def config_errors(cfg: Config, sections: set, sizes: Dict[str, int]) -> List[str]:
    """Pipeline stages: a table that splits the layer stack over the stage axis, layers that
    split into equal stages, and what the pipeline does not run yet, one line each."""
    m, s = cfg.model, cfg.sharding
    axes = mesh_axes_of(s.params.get("layers"))
    stages = math.prod(sizes.get(a, 1) for a in axes)
    if sizes.get("stage", 1) > 1 and "stage" not in axes:
        return [f"mesh.stage={sizes['stage']} but sharding.params.layers={s.params.get('layers')} does not split the "
                f"layer stack over it (sharding={s.name}); add layers: stage to the table's params rules or set "
                "mesh.stage=1"]
    if stages == 1 or "model" not in sections:
        return []
    name = f"mesh.stage={stages}"
    errs = []
    r = m.pipeline_repeats
    if r > 1 and m.num_layers % (stages * r):
        errs.append(f"model.num_layers={m.num_layers} does not split into {name} x model.pipeline_repeats={r} equal "
                    "chunks; choose stages and repeats whose product divides the layers")
    elif m.num_layers % stages:
        errs.append(f"model.num_layers={m.num_layers} does not split into {name} equal stages; use a number of stages "
                    "that divides the layers")
    if m.moe.num_experts:
        errs.append(f"model.moe.num_experts={m.moe.num_experts}: a mixture of experts does not run in a pipeline yet "
                    f"({name}); set mesh.stage=1")
    if m.deltanet.full_attention_interval:
        errs.append(f"model.deltanet.full_attention_interval={m.deltanet.full_attention_interval}: a hybrid's two "
                    f"layer stacks do not run in a pipeline yet ({name}); set mesh.stage=1")
    if global_stack(m):
        errs.append(f"model.global_head_dim / global_kv_heads / global_k_eq_v: the G layers' own stack and the local "
                    f"one do not run in a pipeline yet ({name}); set mesh.stage=1")
    if m.per_layer_dim:
        errs.append(f"model.per_layer_dim={m.per_layer_dim}: per-layer inputs do not run in a pipeline yet ({name}); "
                    "set mesh.stage=1")
    if m.dropout > 0 or (m.attention_dropout or 0) > 0:
        errs.append(f"dropout (model.dropout, model.attention_dropout) does not run in a pipeline yet ({name}); "
                    "set them to 0 or mesh.stage=1")
    if sizes.get("context", 1) > 1:
        errs.append(f"mesh.context={sizes['context']} and {name} do not combine yet; set one of them to 1")
    if m.attention in (AttentionImpl.cudnn, AttentionImpl.tokamax, AttentionImpl.splash):
        errs.append(f"model.attention={m.attention.value} does not run in a pipeline yet ({name}: its kernel does not "
                    "nest in the stages' vmap); use model.attention=auto or xla, or mesh.stage=1")
    if m.collective_matmul != CollectiveMatmul.none:
        errs.append(f"model.collective_matmul={m.collective_matmul.value} does not run in a pipeline yet ({name}); "
                    "set model.collective_matmul=none or mesh.stage=1")
    return errs
