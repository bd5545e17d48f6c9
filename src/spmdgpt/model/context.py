"""Context parallelism: each sequence split over the `seq` logical axis's mesh axes (mesh.context
= C under the packaged rule tables), so that no device holds a whole sequence's activations.

Layout (load-balanced for the causal mask): a sequence of t positions is cut into 2C chunks of
t / 2C, and device c holds chunk c and chunk 2C - 1 - c, an early one and a late one. Under a
causal mask every device then has the same attention work (Brandon et al. 2023, "Striped
Attention", and the zigzag layout of Llama 3's context parallelism). Token ids reach the model
whole on every device of the context ring (`Rules.batch_sharding`), and `to_context_order`
reorders them (and the targets, positions and document ids) with local slices: everything
position-wise (embedding, norms, MLPs, the loss's mean) is indifferent to the order, RoPE takes
each token's own position, and attention knows the order (each place's sequence index,
`context_order`). The residual stream's [tokens, d] keeps each device's tokens in one block
(`flatten`), so that its reshapes to [batch, seq, ...] and back move nothing between devices.

Attention (`context_attention`, per device in `shard_map`), by `model.context_attention`:

- `ring`: the local queries stay; the keys and values (with their document ids) go around the
  ring by `ppermute`, one device's block a step, C steps, combined by the online softmax of flash
  attention (running maximum, sum, output), in blocks of model.attention_block queries and keys
  (flash attention's tiling, so that a long sequence's scores never exist whole). After the first step every block is
  half masked
  (the zigzag layout: a block from an earlier device is seen whole by all local queries and its
  late half by none; one from a later device only by the local late half), so each computes the
  half that counts. Its backward is a ring too (a custom VJP): the blocks go around again with
  their gradient accumulators, which arrive back at their owners after C hops; only the output
  and its log-sum-exp are saved from the forward pass (Liu et al. 2023, "Ring Attention with
  Blockwise Transformers").
- `allgather`: every device gathers all keys and values (an all-gather forward, a
  reduce-scatter backward) and attends its queries over them at once: fewer, larger transfers,
  for short rings; memory for the whole sequence's keys and values.

The causal mask is by sequence index (not by RoPE position, which a document may restart), the
document mask by segment id, the sliding window by sequence index too (as in `attention`).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Dict, List, Optional

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.config import AttentionImpl, Config, ContextAttention, ModelConfig, seq_axes
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.kernels import causal_mask, local_kv, window_mask

F32 = jnp.float32
NEG = float(np.finfo(np.float32).min)  # a masked score (finite: exp(NEG - max) is 0, no NaN)


def context_order(t: int, c: int) -> np.ndarray:
    """The sequence index at each place of the context order: device d's places hold chunks d
    and 2c - 1 - d of 2c chunks (t / 2c positions each)."""
    chunks = np.arange(t).reshape(2 * c, t // (2 * c))
    return np.concatenate([np.concatenate([chunks[d], chunks[2 * c - 1 - d]]) for d in range(c)])


def to_context_order(rules: Rules, a: jax.Array, *tail: Optional[str]) -> jax.Array:
    """[batch, seq, ...] in sequence order, laid out like the batch -> the same in the context
    order, the sequence split over the `seq` axes (tail: the other dimensions' logical axes).
    A reshape, a flip and a transpose of what each device holds whole, then a local slice."""
    c = rules.context_size()
    if c == 1:
        return a
    b, t = a.shape[:2]
    a = jax.sharding.reshard(a, rules.spec("batch", None, *tail))
    x = jnp.reshape(a, (b, 2, c, t // (2 * c)) + a.shape[2:])  # [b, half, chunk, ...]
    x = jnp.concatenate([x[:, :1], jnp.flip(x[:, 1:], axis=2)], axis=1)  # late chunks in reverse
    x = jnp.reshape(jnp.swapaxes(x, 1, 2), a.shape)  # [b, c, (early, late), ...] -> [b, t, ...]
    return jax.sharding.reshard(x, rules.spec("batch", "seq", *tail))


def from_context_order(rules: Rules, a: jax.Array, *tail: Optional[str]) -> jax.Array:
    """The inverse of `to_context_order`: [batch, seq, ...] in sequence order, each sequence
    whole on every device of the ring (an all-gather of it)."""
    c = rules.context_size()
    if c == 1:
        return a
    b, t = a.shape[:2]
    a = jax.sharding.reshard(a, rules.spec("batch", None, *tail))
    x = jnp.swapaxes(jnp.reshape(a, (b, c, 2, t // (2 * c)) + a.shape[2:]), 1, 2)  # [b, half, chunk, ...]
    x = jnp.concatenate([x[:, :1], jnp.flip(x[:, 1:], axis=2)], axis=1)
    return jnp.reshape(x, a.shape)


def flatten(rules: Rules, a: jax.Array, *tail: Optional[str]) -> jax.Array:
    """[batch, seq, ...] (laid out [batch, seq, *tail]) -> [batch * seq, ...] in the order of the
    `tokens` axis, where each device's tokens are one contiguous block: with the batch split D
    ways and each sequence C ways, [D, C, batch / D, seq / C] flattened, so that the reshape
    moves nothing between devices (a plain reshape when C = 1)."""
    b, t = a.shape[:2]
    c = rules.context_size()
    if c > 1:
        d = rules.batch_divisor()
        a = jnp.reshape(
            a, (d, b // d, c, t // c) + a.shape[2:], out_sharding=rules.spec("batch", None, "seq", None, *tail)
        )
        a = jnp.swapaxes(a, 1, 2)
    return jnp.reshape(a, (b * t,) + a.shape[(4 if c > 1 else 2):], out_sharding=rules.spec("tokens", *tail))


def unflatten(rules: Rules, a: jax.Array, b: int, *tail: Optional[str]) -> jax.Array:
    """The inverse of `flatten`: [batch * seq, ...] -> [batch, seq, ...] (b: the batch size)."""
    t = a.shape[0] // b
    c = rules.context_size()
    spec = rules.spec("batch", "seq", *tail)
    if c == 1:
        return jnp.reshape(a, (b, t) + a.shape[1:], out_sharding=spec)
    d = rules.batch_divisor()
    a = jnp.reshape(a, (d, c, b // d, t // c) + a.shape[1:], out_sharding=rules.spec("batch", "seq", None, None, *tail))
    return jnp.reshape(jnp.swapaxes(a, 1, 2), (b, t) + a.shape[4:], out_sharding=spec)


def sequence_inputs(rules: Rules, t: int, positions: Optional[jax.Array], segment_ids: Optional[jax.Array]):
    """A batch's positions ([t] or [b, t]; default 0..t-1) and document ids ([b, t] or None)
    in the context order (unchanged without context parallelism), int32."""
    if positions is None:
        positions = jnp.arange(t, dtype=jnp.int32)
        if rules.context_size() > 1:
            positions = jax.sharding.reshard(jnp.asarray(context_order(t, rules.context_size()), jnp.int32),
                                             rules.spec("seq"))
    else:
        positions = to_context_order(rules, jax.sharding.reshard(positions.astype(jnp.int32),
                                                                 rules.spec("batch", None)))
    if segment_ids is not None:
        segment_ids = to_context_order(rules, jax.sharding.reshard(segment_ids.astype(jnp.int32),
                                                                   rules.spec("batch", None)))
    return positions, segment_ids


def _scores(q, k, q_idx, k_idx, q_seg, k_seg, window, scale):
    """Masked float32 scores of q [b, K, G, tq, h] against k [b, K, tk, h]: [b, K, G, tq, tk]."""
    s = jnp.einsum("bkgqh,bkth->bkgqt", q, k, preferred_element_type=F32) * scale
    mask = causal_mask(q_idx, k_idx)[None]
    if window is not None:
        mask = mask & window_mask(q_idx, k_idx, window)
    if q_seg is not None:
        mask = mask & (q_seg[:, :, None] == k_seg[:, None, :])
    return jnp.where(mask[:, None, None], s, NEG)


def _split(x, axis: int, n: int):
    """Cut x's axis into n blocks, stacked in front: [..., R, ...] -> [n, ..., R / n, ...]."""
    if x is None:
        return None
    axis %= x.ndim
    return jnp.moveaxis(jnp.reshape(x, x.shape[:axis] + (n, x.shape[axis] // n) + x.shape[axis + 1:]), axis, 0)


def _join(x, axis: int):
    """The inverse of `_split`: [n, ..., R / n, ...] -> [..., R, ...]."""
    x = jnp.moveaxis(x, 0, axis % (x.ndim - 1))
    axis %= x.ndim - 1
    return jnp.reshape(x, x.shape[:axis] + (-1,) + x.shape[axis + 2:])


def _put(a, axis: int, part: slice, value):
    """a with its `part` along `axis` replaced by value, by concatenation (XLA:CPU 0.11.2's
    compiler crashes on the scatter that `.at[..., part].set` makes inside shard_map)."""
    axis %= a.ndim
    n = a.shape[axis]
    start, stop, _ = part.indices(n)
    pieces = [jax.lax.slice_in_dim(a, 0, start, axis=axis)] if start else []
    pieces.append(value)
    if stop < n:
        pieces.append(jax.lax.slice_in_dim(a, stop, n, axis=axis))
    return pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces, axis=axis)


class _Ring:
    """One device's ring attention (inside `shard_map` over the `seq` axes `axes`, a ring of c):
    q [b, K, G, t, h], k/v [b, K, t, h], idx [t] the sequence index of each local place, seg
    [b, t] or None, window a traced scalar or None. Each visiting block is attended `block`
    queries by `block` keys at a time (model.attention_block, when it divides them; the online
    softmax across key blocks as across devices), so that at most [block, block] scores per head
    exist at once, as in flash attention."""

    def __init__(self, axes: tuple, c: int, scale: float, block: int):
        self.axes, self.c, self.scale, self.block = axes, c, scale, block

    def pass_on(self, *xs):
        """Each array to the next device of the ring (device d's to d + 1)."""
        perm = [(d, (d + 1) % self.c) for d in range(self.c)]
        return tuple(None if x is None else jax.lax.ppermute(x, self.axes, perm) for x in xs)

    def blocks(self, rows: int) -> int:
        """How many blocks `rows` queries (or keys) make."""
        return rows // self.block if 0 < self.block < rows and rows % self.block == 0 else 1

    def steps(self, visit, carry, k, v, idx, seg, extra=()):
        """Runs visit(carry, rows, cols, k, v, k_idx, k_seg, extra) over the c blocks: first this
        device's own (every query and key), then the one from device d - s at step s, of which
        only its early half can be seen (it comes from an earlier device: by every local query)
        or only by the local late half (a later device: against all its keys). extra: arrays
        that travel with the blocks (the backward's gradient accumulators), passed on once more
        at the end, home again."""
        half = k.shape[2] // 2
        every, early, late = slice(None), slice(0, half), slice(half, None)
        carry, extra = visit(carry, every, every, k, v, idx, seg, extra)
        k_idx = idx
        for _ in range(1, self.c):
            k, v, k_idx, seg, *extra = self.pass_on(k, v, k_idx, seg, *extra)
            carry, extra = jax.lax.cond(
                k_idx[0] < idx[0],  # (each block's first place holds its device's first chunk)
                lambda cr, ex: visit(cr, every, early, k, v, k_idx, seg, ex),
                lambda cr, ex: visit(cr, late, every, k, v, k_idx, seg, ex),
                carry, tuple(extra))
        return carry, (tuple(self.pass_on(*extra)) if extra else ())

    def keys(self, k, v, k_idx, k_seg, cols):
        """The visiting keys, values, indices and document ids of `cols`, cut into key blocks
        (stacked in front, for a scan)."""
        n = self.blocks(k[:, :, cols].shape[2])
        return (_split(k[:, :, cols], 2, n), _split(v[:, :, cols], 2, n), _split(k_idx[cols], 0, n),
                None if k_seg is None else _split(k_seg[:, cols], 1, n))

    def queries(self, rows, *parts):
        """Per-query arrays (q [b, K, G, t, h], idx [t], seg [b, t], then [b, K, G, t] or
        [b, K, G, t, h] ones) restricted to `rows` and cut into query blocks."""
        axes = (-2, 0, 1) + tuple(-1 if a.ndim == 4 else -2 for a in parts[3:])
        picked = [None if a is None else a[:, rows] if ax == 1 else a[rows] if ax == 0 else
                  a[..., rows] if ax == -1 else a[..., rows, :] for a, ax in zip(parts, axes)]
        n = self.blocks(picked[0].shape[-2])
        return tuple(_split(a, ax, n) for a, ax in zip(picked, axes))

    def forward(self, q, k, v, idx, seg, window):
        def visit(carry, rows, cols, k, v, k_idx, k_seg, extra):
            keys = self.keys(k, v, k_idx, k_seg, cols)

            def block(args):  # one query block against the visiting keys, a key block at a time
                qb, ib, sb, m, l, acc = args

                def key_block(carry, kv):  # the online softmax's update
                    m, l, acc = carry
                    kb, vb, kib, ksb = kv
                    s = _scores(qb, kb, ib, kib, sb, ksb, window, self.scale)
                    m_new = jnp.maximum(m, jnp.max(s, axis=-1))
                    p = jnp.exp(s - m_new[..., None])
                    fix = jnp.exp(m - m_new)
                    pv = jnp.einsum("bkgqt,bkth->bkgqh", p.astype(vb.dtype), vb, preferred_element_type=F32)
                    return (m_new, l * fix + jnp.sum(p, axis=-1), acc * fix[..., None] + pv), None

                return jax.lax.scan(key_block, (m, l, acc), keys)[0]

            m, l, acc = carry
            m_r, l_r, acc_r = jax.lax.map(block, self.queries(rows, q, idx, seg, m, l, acc))
            return (_put(m, -1, rows, _join(m_r, -1)), _put(l, -1, rows, _join(l_r, -1)),
                    _put(acc, -2, rows, _join(acc_r, -2))), extra

        # (varying over the mesh axes like q: they become scan carries)
        # (the output's accumulator as wide as the values: MLA's are narrower than the queries)
        acc = jnp.zeros_like(q[..., :1], F32) + jnp.zeros((v.shape[-1],), F32)
        carry = (jnp.full_like(q[..., 0], -jnp.inf, F32), jnp.zeros_like(q[..., 0], F32), acc)
        (m, l, acc), _ = self.steps(visit, carry, k, v, idx, seg)
        return (acc / l[..., None]).astype(q.dtype), m + jnp.log(l)

    def backward(self, q, k, v, idx, seg, window, o, lse, do):
        delta = jnp.sum(do.astype(F32) * o.astype(F32), axis=-1)  # [b, K, G, t]
        dt = q.dtype

        def visit(dq, rows, cols, k, v, k_idx, k_seg, extra):
            dk, dv = extra
            keys = self.keys(k, v, k_idx, k_seg, cols)

            def block(grads, args):  # one query block: its dq, and its part of the visiting keys' dk, dv
                qb, ib, sb, lse_b, delta_b, do_b = args

                def key_block(dq_b, kv):
                    kb, vb, kib, ksb = kv
                    p = jnp.exp(_scores(qb, kb, ib, kib, sb, ksb, window, self.scale) - lse_b[..., None])
                    dv_b = jnp.einsum("bkgqt,bkgqh->bkth", p.astype(dt), do_b, preferred_element_type=F32)
                    dp = jnp.einsum("bkgqh,bkth->bkgqt", do_b, vb, preferred_element_type=F32)
                    ds = (p * (dp - delta_b[..., None]) * self.scale).astype(dt)
                    dk_b = jnp.einsum("bkgqt,bkgqh->bkth", ds, qb, preferred_element_type=F32)
                    return dq_b + jnp.einsum("bkgqt,bkth->bkgqh", ds, kb, preferred_element_type=F32), (dk_b, dv_b)

                # (zeros varying over the mesh axes like qb: a scan's carry must match its output)
                dq_b, (dk_bs, dv_bs) = jax.lax.scan(key_block, jnp.zeros_like(qb, F32), keys)
                return (grads[0] + _join(dk_bs, 2), grads[1] + _join(dv_bs, 2)), dq_b

            zeros = (jnp.zeros_like(k[:, :, cols], F32), jnp.zeros_like(v[:, :, cols], F32))
            (dkc, dvc), dq_r = jax.lax.scan(block, zeros, self.queries(rows, q, idx, seg, lse, delta, do))
            return (_put(dq, -2, rows, dq[..., rows, :] + _join(dq_r, -2)),
                    (_put(dk, 2, cols, dk[:, :, cols] + dkc), _put(dv, 2, cols, dv[:, :, cols] + dvc)))

        zeros = (jnp.zeros(k.shape, F32), jnp.zeros(v.shape, F32))
        dq, (dk, dv) = self.steps(visit, jnp.zeros(q.shape, F32), k, v, idx, seg, zeros)
        return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype)


def _ring_attention(axes: tuple, c: int, scale: float, block: int, q, k, v, idx, seg, window):
    """Ring attention with its ring backward (`_Ring`), differentiable in q, k and v."""
    ring = _Ring(axes, c, scale, block)

    @jax.custom_vjp
    def attend(q, k, v, idx, seg, window):
        return ring.forward(q, k, v, idx, seg, window)[0]

    def fwd(q, k, v, idx, seg, window):
        o, lse = ring.forward(q, k, v, idx, seg, window)
        return o, (q, k, v, idx, seg, window, o, lse)

    def bwd(res, do):
        q, k, v, idx, seg, window, o, lse = res
        return ring.backward(q, k, v, idx, seg, window, o, lse, do) + (None, None, None)  # (none for the ids)

    attend.defvjp(fwd, bwd)
    return attend(q, k, v, idx, seg, window)


def _allgather_attention(axes: tuple, c: int, scale: float, block: int, q, k, v, idx, seg, window):
    """Every key and value gathered from the ring, the local queries attending over them."""
    k_all, v_all, k_idx = (jax.lax.all_gather(a, axes, axis=a.ndim - 2 if a.ndim > 1 else 0, tiled=True)
                           for a in (k, v, idx))
    k_seg = None if seg is None else jax.lax.all_gather(seg, axes, axis=1, tiled=True)
    p = jax.nn.softmax(_scores(q, k_all, idx, k_idx, seg, k_seg, window, scale), axis=-1).astype(v.dtype)
    return jnp.einsum("bkgqt,bkth->bkgqh", p, v_all, preferred_element_type=F32).astype(q.dtype)


def context_attention(cfg: ModelConfig, rules: Rules, q: jax.Array, k: jax.Array, v: jax.Array,
                      segment_ids: Optional[jax.Array] = None, window=None) -> jax.Array:
    """Causal attention over sequences split over the context ring: q [b, n, t, h], k/v
    [b, K, t, h] (head-major, t in the context order and split over the `seq` axes; K key/value
    heads dividing n), segment_ids [b, t] (the same order) or None, window a layer's sliding
    window or None -> [b, n, t, v's h], by model.context_attention."""
    n = q.shape[1]
    k, v = local_kv(k, v, n, rules)
    grouped = k.shape[1] != n
    spec = rules.spec("batch", "heads", "seq", "head_dim")
    kv_spec = rules.spec("batch", "kv_heads" if grouped else "heads", "seq", "head_dim")
    seg_spec = rules.spec("batch", "seq")
    axes = rules.seq_axes()
    c = rules.context_size()
    attend = _ring_attention if cfg.context_attention == ContextAttention.ring else _allgather_attention
    attend = partial(attend, axes, c, q.shape[-1] ** -0.5, cfg.attention_block)

    def local(q, k, v, idx, seg, window):
        b, nl, t, h = q.shape
        out = attend(jnp.reshape(q, (b, k.shape[1], nl // k.shape[1], t, h)), k, v, idx, seg, window)
        return jnp.reshape(out, q.shape[:-1] + v.shape[-1:])  # (as wide as the values)

    # the sequence index of every place (the causal mask's and the sliding window's), an input so
    # that the masks are computed from data: masks of constants alone hoist out of shard_map badly
    idx = jax.sharding.reshard(jnp.asarray(context_order(q.shape[2], c), jnp.int32), rules.spec("seq"))
    q = jax.sharding.reshard(q, spec)
    k, v = (jax.sharding.reshard(a, kv_spec) for a in (k, v))
    args, specs = [q, k, v, idx], [spec, kv_spec, kv_spec, rules.spec("seq")]
    if segment_ids is not None:
        args.append(jax.sharding.reshard(segment_ids, seg_spec))
        specs.append(seg_spec)
    if window is not None:
        args.append(window)
        specs.append(jax.sharding.PartitionSpec())
    has_seg, has_window = segment_ids is not None, window is not None

    def body(q, k, v, idx, *rest):
        return local(q, k, v, idx, rest[0] if has_seg else None, rest[-1] if has_window else None)

    return jax.shard_map(body, in_specs=tuple(specs), out_specs=spec)(*args)


# ----------------------------------------------------------------------------- configuration checks


def config_errors(cfg: Config, sections: set, sizes: Dict[str, int]) -> List[str]:
    """Context parallelism: the sequence splits into 2 chunks per device of the ring, under a
    table that splits `seq` over the context axis, with an attention that runs on a ring."""
    errs: List[str] = []
    m, d = cfg.model, cfg.data
    axes = seq_axes(cfg.sharding)
    ring = math.prod(sizes.get(a, 1) for a in axes)
    if sizes.get("context", 1) > 1 and "context" not in axes:
        errs.append(
            f"mesh.context={sizes['context']} but sharding.compute.seq={cfg.sharding.compute.get('seq')} does "
            f"not split sequences over it (sharding={cfg.sharding.name}); add seq: context to the table's compute "
            "rules or set mesh.context=1"
        )
    if ring == 1 or "model" not in sections:
        return errs
    if m.attention in (AttentionImpl.cudnn, AttentionImpl.tokamax, AttentionImpl.splash):
        errs.append(f"model.attention={m.attention.value} does not run on a context ring (mesh.context={ring}): ring "
                    "attention computes its blocks itself; use model.attention=auto or xla, or mesh.context=1")
    if (m.deltanet.full_attention_interval and "batch" in sections and 0 < d.seq_len < 2 * ring * (m.deltanet.conv - 1)
            and d.seq_len % (2 * ring) == 0):  # (else the split itself is the one error)
        errs.append(f"data.seq_len={d.seq_len} over 2 x {ring} chunks (mesh.context={ring}) leaves chunks shorter than "
                    f"Gated DeltaNet's convolution reaches back (model.deltanet.conv - 1 = {m.deltanet.conv - 1} "
                    "tokens); use a longer data.seq_len or a smaller mesh.context")
    if m.attention_sinks:
        errs.append(f"model.attention_sinks=true: ring attention has no sink logit yet (mesh.context={ring}); set "
                    "mesh.context=1")
    if (m.dropout if m.attention_dropout is None else m.attention_dropout) > 0:
        errs.append(f"attention dropout (model.attention_dropout, default model.dropout) has no context-parallel "
                    f"version (mesh.context={ring}); set model.attention_dropout=0 or mesh.context=1")
    if "batch" in sections and d.seq_len > 0:
        if d.seq_len % (2 * ring):
            errs.append(f"data.seq_len={d.seq_len} does not split into 2 x {ring} equal chunks (two per device of the "
                        f"context ring, mesh.context={ring}); use a multiple of {2 * ring}")
        elif m.loss_block > 0 and (d.seq_len // ring) % m.loss_block:
            errs.append(
                f"model.loss_block={m.loss_block} does not divide the {d.seq_len // ring} positions each device "
                f"of the context ring holds (data.seq_len={d.seq_len} / mesh.context={ring}); choose a divisor"
            )
    return errs
