"""Collective matmuls: tensor parallelism whose communication overlaps its matmuls.

Plain tensor parallelism (model.collective_matmul=none) keeps the residual stream [tokens, d]
whole on every device of the tensor axis (`model` under the tp / fsdp_tp tables): a unit's input
projections (attention's QKV, the MLP's up and gate) need no communication, and its output
projection (attention's w_o, the MLP's w_down) ends in an all-reduce of [tokens, d] partial sums
that the matmuls wait for.

With model.collective_matmul=uni|bi the stream is split over the tensor axis as well (the
`stream` logical axis: sequence parallelism, Korthikanti et al. 2022), so norms, residual adds
and dropout touch 1/M of the tokens, and each unit turns into

    input:  all-gather the stream's M chunks, multiply them by the local weight columns;
    output: multiply by the local weight rows, reduce-scatter the partial sums to the chunks;

an all-gather plus a reduce-scatter, which together move the bytes of the one all-reduce. Each
is written here as a loop of `ppermute`s inside `shard_map` (the "collective matmul" of the
scaling book's chapter on programming TPUs in JAX; Wang et al. 2023, "Overlap communication
with dependent computation via decomposition"): every step multiplies the chunk that arrived in
the step before (or adds its product to an accumulator that is passed on) while the next
transfer is in flight, so that only the first transfer is exposed. `uni` passes everything one
way round the ring: M - 1 steps. `bi` passes the chunks (accumulators) both ways at once: the
chunks from the right neighbours travel left and those of the left ones right, M / 2 steps, each
link busy in both directions. The backward is JAX's transpose of the loop: reversed `ppermute`s
with the transposed matmuls between them, itself overlapped the same way.

`matmuls_in` and `matmul_out` are the plain einsums when the rules have no split stream
(`Rules.collective == "none"`; FP8 ones under model.matmul_dtype=fp8, `model.fp8`), so model code
calls them unconditionally.
"""

from __future__ import annotations

import math
from typing import Dict, List, Sequence

import jax
import jax.numpy as jnp

from spmdgpt.config import CollectiveMatmul, Config, mesh_axes_of, seq_axes
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import fp8, lora


def _hops(rules: Rules) -> tuple[int, int, tuple, int]:
    """(hops leftwards, hops rightwards, the tensor axes, their size M): `uni` M - 1 and 0, `bi`
    M // 2 and (M - 1) // 2."""
    axes, m = rules.tensor_axes(), rules.tensor_size()
    return (m - 1, 0, axes, m) if rules.collective == "uni" else (m // 2, (m - 1) // 2, axes, m)


def _send(x: jax.Array, axes: tuple, m: int, step: int) -> jax.Array:
    """Each device's x to its neighbour `step` (-1: left, d -> d - 1; +1: right) on the ring."""
    return jax.lax.ppermute(x, axes, [(d, (d + step) % m) for d in range(m)])


def _roll(x: jax.Array, shift: jax.Array, m: int) -> jax.Array:
    """x [m * n, ...] as m chunks of rows, chunk j moved to place (j + shift) % m (shift traced)."""
    return jnp.reshape(jnp.roll(jnp.reshape(x, (m, x.shape[0] // m) + x.shape[1:]), shift, axis=0), x.shape)


def matmuls_in(rules: Rules, x: jax.Array, *terms: tuple, history=None) -> list[jax.Array]:
    """x [stream, embed] (the compute dtype) times each term's weight, one gather of x for all:
    term = (einsum equation "td,d...->t...", weight w [embed, ...] in its compute layout, w's
    logical axes, the output's logical axes after `tokens`). Returns [tokens, ...] each, as
    `jnp.einsum(eq, x, w)` would (each device its tokens and its output columns). history: FP8's
    delayed scaling, the terms' amax histories [terms, 3, H] (`fp8.einsum`)."""
    if any(lora.is_stacked(w) for _, w, _, _ in terms):  # (several LoRA adapters: each token adds its own's)
        plain = ((eq, w.w if lora.is_stacked(w) else w, *rest) for eq, w, *rest in terms)
        ys = matmuls_in(rules, x, *plain, history=history)
        return [lora.row_delta(eq, x, w, y) if lora.is_stacked(w) else y for (eq, w, _, _), y in zip(terms, ys)]
    outs = [rules.spec("tokens", *out) for _, _, _, out in terms]
    if rules.collective == "none":
        return [fp8.einsum(rules, eq, x, w, o, fp8.sites(history, j)) for j, ((eq, w, _, _), o) in
                enumerate(zip(terms, outs))]
    left, right, axes, m = _hops(rules)
    eqs = [eq for eq, *_ in terms]

    def body(x, *ws):
        i = jax.lax.axis_index(axes)
        products = [[jnp.einsum(eq, x, w) for eq, w in zip(eqs, ws)]]  # offset 0: the device's own chunk
        from_right, from_left = [None] * m, [None] * m
        a = b = x
        for s in range(1, max(left, right) + 1):
            if s <= left:  # chunk i + s, arrived from the right
                a = _send(a, axes, m, -1)
                from_right[s] = [jnp.einsum(eq, a, w) for eq, w in zip(eqs, ws)]
            if s <= right:  # chunk i - s, arrived from the left
                b = _send(b, axes, m, +1)
                from_left[m - s] = [jnp.einsum(eq, b, w) for eq, w in zip(eqs, ws)]
        for offset in range(1, m):
            products.append(from_right[offset] if from_right[offset] is not None else from_left[offset])
        # products[offset] is chunk (i + offset) % m: concatenated, then rotated into chunk order
        return tuple(_roll(jnp.concatenate(p, axis=0), i, m) for p in zip(*products))

    w_specs = [rules.spec(*logical) for _, _, logical, _ in terms]
    # An output whose columns are not split over the tensor axes (grouped-query attention's
    # key/value heads when they do not divide over them) is the same on all its devices, which
    # shard_map cannot infer from the permutes: it is then told so (its transpose divides the
    # cotangent among the copies).
    whole = any(not set(axes) & {a for part in o for a in mesh_axes_of(part)} for o in outs)
    f = jax.shard_map(body, in_specs=(rules.spec("stream", "embed"), *w_specs), out_specs=tuple(outs),
                      check_vma=not whole)
    return list(f(jax.sharding.reshard(x, rules.spec("stream", "embed")),
                  *(jax.sharding.reshard(w, s) for (_, w, _, _), s in zip(terms, w_specs))))


def matmul_out(rules: Rules, eq: str, h: jax.Array, w: jax.Array, h_logical: Sequence[str],
               w_logical: Sequence[str], history=None) -> jax.Array:
    """h [tokens, *h_logical] times w (its compute layout; logical axes w_logical, the last
    `embed`), summed over the contracted (tensor-split) axes -> [stream, embed]: the plain einsum
    (an all-reduce under tensor parallelism), or with a split stream the reduce-scatter of the
    partial products, accumulators passed round the ring while the next chunk is multiplied.
    history: FP8's delayed scaling, the amax history [3, H] (`fp8.einsum`)."""
    if lora.is_stacked(w):  # (several LoRA adapters: each token adds its own's)
        return lora.row_delta(eq, h, w, matmul_out(rules, eq, h, w.w, h_logical, w_logical, history))
    out = rules.spec("stream", "embed")
    if rules.collective == "none":
        return fp8.einsum(rules, eq, h, w, out, history)
    left, right, axes, m = _hops(rules)
    h_spec, w_spec = rules.spec("tokens", *h_logical), rules.spec(*w_logical)

    def body(h, w):
        i = jax.lax.axis_index(axes)
        chunks = jnp.split(_roll(h, -i, m), m)  # chunks[offset]: the rows of chunk (i + offset) % m
        total = jnp.einsum(eq, chunks[0], w)  # this device's own chunk
        for hops, step, offset in ((left, -1, lambda s: s - left), (right, +1, lambda s: right - s)):
            acc = None  # the sum for chunk i + offset(s), which `hops - s` more steps carry to its owner
            for s in range(hops):
                part = jnp.einsum(eq, chunks[offset(s) % m], w)
                acc = _send(part if acc is None else acc + part, axes, m, step)
            if acc is not None:
                total = total + acc
        return total

    f = jax.shard_map(body, in_specs=(h_spec, w_spec), out_specs=out)
    return f(jax.sharding.reshard(h, h_spec), jax.sharding.reshard(w, w_spec))


# ----------------------------------------------------------------------------- configuration checks


def config_errors(cfg: Config, sections: set, sizes: Dict[str, int], training: bool) -> List[str]:
    """Collective matmuls: a tensor axis (training: where they would do nothing, one line), the
    heads and the MLP width split over the same axes, and each device's positions splitting into
    a chunk per device of the tensor axis (the split residual stream)."""
    m, s = cfg.model, cfg.sharding
    if "model" not in sections or m.collective_matmul == CollectiveMatmul.none:
        return []
    name = f"model.collective_matmul={m.collective_matmul.value}"
    outside = set(mesh_axes_of(s.compute.get("batch"))) | set(mesh_axes_of(s.compute.get("seq")))
    axes = {u: [a for a in mesh_axes_of(s.compute.get(u)) if a not in outside] for u in ("heads", "mlp")}
    size = math.prod(sizes.get(a, 1) for a in dict.fromkeys(axes["heads"] + axes["mlp"]))
    if size == 1:
        return [f"{name} needs tensor parallelism (sharding={s.name} with "
                f"{' x '.join(f'mesh.{a}={v}' for a, v in sizes.items())} splits no attention heads or MLP width over "
                "more than one device); use sharding=tp or fsdp_tp with mesh.model>1, or model.collective_matmul=none"
                ] if training else []
    if axes["heads"] != axes["mlp"]:
        return [f"{name} needs the heads and the MLP width split over the same mesh axes (sharding.compute.heads="
                f"{s.compute.get('heads')}, mlp={s.compute.get('mlp')}); make them equal or set "
                "model.collective_matmul=none"]
    ring = math.prod(sizes.get(a, 1) for a in seq_axes(s))
    if "batch" in sections and cfg.data.seq_len > 0 and (cfg.data.seq_len // ring) % size:
        return [
            f"{name} splits each device's {cfg.data.seq_len // ring} positions of a sequence (data.seq_len="
            f"{cfg.data.seq_len}{f' / mesh.context={ring}' if ring > 1 else ''}) over the {size} devices of the tensor "
            f"axis; use a data.seq_len they divide into equal chunks"
        ]
    return []
