"""The gated delta rule (Yang, Kautz and Hatamizadeh 2024, "Gated Delta Networks", arXiv:2412.06464):
linear attention whose state is a fast-weight matrix, decayed by a gate and corrected by a
delta-rule write. Per head, with a state S [dk, dv] and per token t a query q_t and key k_t [dk]
(L2-normalised by the caller, q also scaled), a value v_t [dv], a log decay g_t <= 0 and a write
strength beta_t in (0, 1):

    S <- exp(g_t) S                             (the gate forgets)
    S <- S + k_t (beta_t (v_t - S^T k_t))^T     (the delta rule: write the value's error)
    o_t = S^T q_t

Two ways to run it, equal in exact arithmetic (tests/test_deltanet.py checks them in float64 to
1e-10, and their gradients):

- `recurrent`: the rule token by token (a `lax.scan`): the reference, and the inference engine's
  decode step (one token from a cached state).
- `chunked`: the chunkwise parallel form used for training and prefill. The sequence is cut
  into chunks of C tokens; inside a chunk, with cumulative log decays c (c_i = g_1 + ... + g_i)
  and Gamma_ij = exp(c_i - c_j) (i >= j), the C delta-rule writes collapse into one triangular
  system (the WY / UT representation: T = (I + tril(diag(beta) K K^T * Gamma, -1))^-1,
  U = T diag(beta) V, W = T diag(beta exp(c)) K), so a chunk is a handful of [C, C] and
  [C, d] matmuls; only the state crosses chunks, carried by a `lax.scan`:

      V' = U - W S,   O = diag(exp(c)) Q S + tril(Q K^T * Gamma) V',
      S <- exp(c_C) S + (diag(exp(c_C - c)) K)^T V'.

Documents (segment ids, as attention's document masks): a token whose segment differs from the
one before it starts from a zero state. Inside a chunk this masks Gamma to pairs in one segment
and the carried state to the tokens still in the segment the chunk started in, so the chunked
form stays exact with any packing. Each row of a batch starts from its own initial state (zero
unless given).

Kimi Delta Attention (KDA; Kimi Linear, arXiv:2510.26692) gates per key channel instead: g_t
[dk] <= 0 and S <- diag(exp(g_t)) S, each row of the state decaying at its own rate. The same two
forms run it when given g [b, h, t, dk]: Gamma_ij becomes per channel, exp(c_i - c_j) [dk], and
sits inside the key products (K K^T and Q K^T sum over k_ik k_jk Gamma_ijk, a [C, C, dk] tensor a
chunk, never the unstable exp(c_i) k_i . exp(-c_j) k_j), exp(c) scales q and k elementwise, and
the carried state decays row by row.

Shapes: q, k [b, h, t, dk], v [b, h, t, dv], g [b, h, t] (or [b, h, t, dk]: KDA) and beta
[b, h, t], segments [b, t], the state [b, h, dk, dv]. Everything is computed in float32 (or
float64 when given float64), as the reference kernels (flash-linear-attention) do, and the output returned in v's dtype.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

Array = jax.Array

CHUNK = 64  # Gated DeltaNet's chunk (the paper's and flash-linear-attention's)
# The scan over chunks, unrolled this many chunks a trip: rolled, each trip of XLA's loop writes its
# chunk's outputs into the stacked result by a copy of the whole buffer (the H100 roofline of a GPT-2
# 124M-shaped hybrid at 16 x 1024: 319 ms a step rolled, 76 ms unrolled); unrolled whole, compiles
# grow with the length and a CPU's step at 8,192 tokens slows 2x (BENCHMARKS, "Gated DeltaNet").
UNROLL = 16


def _plain() -> bool:
    """No mesh to lay arrays out on: none, or every axis manual (inside a `shard_map`'s body)."""
    mesh = jax.sharding.get_abstract_mesh()
    return mesh.empty or mesh.are_all_axes_manual


def _compute_dtype(*arrays) -> jnp.dtype:
    return jnp.float64 if any(a.dtype == jnp.float64 for a in arrays) else jnp.float32


def _state(q: Array, dv: int, f, state: Optional[Array]) -> Array:
    """The state before the first token, [b, h, dk, dv] in dtype f, laid out as q's batch and heads."""
    shape = q.shape[:2] + (q.shape[-1], dv)
    if _plain():  # (plain arrays, outside a mesh or inside a shard_map, where it varies over q's devices as the
        # scan's carry does: + 0 x q)
        s = jnp.zeros(shape, f) if state is None else state.astype(f)
        return s if jax.sharding.get_abstract_mesh().empty else s + 0 * q.reshape(q.shape[:2] + (-1, 1))[:, :, :1]
    spec = tuple(jax.typeof(q).sharding.spec) + (None,) * q.ndim
    layout = P(spec[0], spec[1], None, None)
    if state is None:
        return jnp.zeros(shape, f, out_sharding=layout)
    return jax.sharding.reshard(state.astype(f), layout)


def _unit_lower_solve(system: Array, rhs: Array) -> Array:
    return jax.lax.linalg.triangular_solve(system, rhs, left_side=True, lower=True, unit_diagonal=True)


def _local(fn, *arrays: Array) -> Array:
    """fn(*arrays) on each device's own rows (a `shard_map` over the arrays' own layouts; their
    sharded axes are batch axes of fn): the triangular solve's derivative rules build masks that
    explicit sharding refuses to mix with sharded operands."""
    if _plain():
        return fn(*arrays)
    specs = tuple(jax.typeof(a).sharding.spec for a in arrays)
    return jax.shard_map(fn, in_specs=specs, out_specs=specs[-1])(*arrays)


def _resets(segments: Optional[Array], g: Array, pad: int = 0) -> Array:
    """[b, t + pad] bool: where a document starts (its first token: the state before it is dropped),
    never at token 0 (which continues the given state) or in the padding; rows laid out as g's
    [b, h, t]."""
    if segments is not None:
        return jnp.pad(segments[:, 1:] != segments[:, :-1], ((0, 0), (1, pad)))
    shape = (g.shape[0], g.shape[2] + pad)
    if _plain():
        return jnp.zeros(shape, bool)
    return jnp.zeros(shape, bool, out_sharding=P(jax.typeof(g).sharding.spec[0], None))


def recurrent(q: Array, k: Array, v: Array, g: Array, beta: Array, segments: Optional[Array] = None,
              state: Optional[Array] = None) -> tuple[Array, Array]:
    """The rule token by token: (o [b, h, t, dv], the final state [b, h, dk, dv]); g [b, h, t] or, for
    KDA, [b, h, t, dk]. `state`: the
    state before the first token (zero by default), which token 0 continues; segments [b, t]:
    each later document start drops the state before it."""
    b, h, t, dk = q.shape
    dv = v.shape[-1]
    f = _compute_dtype(q, k, v)
    reset = _resets(segments, g)
    s0 = _state(q, dv, f, state)

    channel = g.ndim == 4  # (KDA: a decay per key channel, each row of the state its own)

    def one(s, xs):
        q_t, k_t, v_t, g_t, b_t, r_t = xs
        keep = jnp.where(r_t[..., None] if channel else r_t, 0.0, jnp.exp(g_t))
        s = s * (keep[..., None] if channel else keep[..., None, None])
        error = v_t - jnp.einsum("bhk,bhkv->bhv", k_t, s)
        s = s + jnp.einsum("bhk,bhv->bhkv", k_t, b_t[..., None] * error)
        return s, jnp.einsum("bhk,bhkv->bhv", q_t, s)

    xs = (jnp.moveaxis(q.astype(f), 2, 0), jnp.moveaxis(k.astype(f), 2, 0), jnp.moveaxis(v.astype(f), 2, 0),
          jnp.moveaxis(g.astype(f), 2, 0), jnp.moveaxis(beta.astype(f), 2, 0),
          jnp.broadcast_to(jnp.moveaxis(reset, 1, 0)[:, :, None], (t, b, h)))
    s, o = jax.lax.scan(one, s0, xs)
    return jnp.moveaxis(o, 0, 2).astype(v.dtype), s


def chunked(q: Array, k: Array, v: Array, g: Array, beta: Array, segments: Optional[Array] = None,
            state: Optional[Array] = None, chunk: int = CHUNK, unroll: int = UNROLL) -> tuple[Array, Array]:
    """The chunkwise parallel form (module docstring): (o [b, h, t, dv], the final state). The
    sequence is padded to a multiple of `chunk` with tokens that neither decay nor write; the scan
    over chunks is unrolled `unroll` chunks a trip (`UNROLL`)."""
    b, h, t, dk = q.shape
    dv, out_dtype = v.shape[-1], v.dtype
    f = _compute_dtype(q, k, v)
    C = min(chunk, t)
    pad = -t % C
    n = (t + pad) // C
    reset = _resets(segments, g, pad).reshape(b, 1, n, C)

    def chunks(a, fill=0):  # [b, h, t, ...] -> [b, h, n, C, ...]
        a = a.astype(f) if jnp.issubdtype(a.dtype, jnp.floating) else a
        widths = [(0, 0)] * a.ndim
        widths[2] = (0, pad)
        a = jnp.pad(a, widths, constant_values=fill)
        return a.reshape(a.shape[:2] + (n, C) + a.shape[3:])

    q, k, v, g, beta = chunks(q), chunks(k), chunks(v), chunks(g), chunks(beta)
    doc = jnp.cumsum(reset, axis=-1)  # [b, 1, n, C]: documents started inside the chunk so far
    carried = doc == 0  # tokens still in the document the chunk started in (they read the carried state)
    lower = jnp.tril(jnp.ones((C, C), bool))
    pairs = lower & (doc[..., :, None] == doc[..., None, :])  # [b, 1, n, C, C]
    if g.ndim == 5:  # (KDA: c [b, h, n, C, dk], Gamma [b, h, n, C, C, dk] inside the key products)
        c = jnp.cumsum(g, axis=-2)
        gamma = jnp.exp(jnp.where(pairs[..., None], c[..., :, None, :] - c[..., None, :, :], -jnp.inf))
        kk = jnp.einsum("bhnik,bhnjk,bhnijk->bhnij", k, k, gamma) * beta[..., :, None]
        qk = jnp.einsum("bhnik,bhnjk,bhnijk->bhnij", q, k, gamma)
        decay, last = jnp.exp(c), c[..., -1:, :]  # [b, h, n, C, dk], [b, h, n, 1, dk]
        to_end = jnp.exp(last - c)
        last = last[..., 0, :]  # [b, h, n, dk]
    else:
        c = jnp.cumsum(g, axis=-1)  # [b, h, n, C]
        gamma = jnp.exp(jnp.where(pairs, c[..., :, None] - c[..., None, :], -jnp.inf))  # [b, h, n, C, C]
        kk = jnp.einsum("bhnik,bhnjk->bhnij", k, k) * gamma * beta[..., :, None]
        qk = jnp.einsum("bhnik,bhnjk->bhnij", q, k) * gamma
        decay, last = jnp.exp(c)[..., None], c[..., -1:]  # [b, h, n, C, 1], [b, h, n, 1]
        to_end = jnp.exp(last - c)[..., None]
    system = jnp.eye(C, dtype=f) + jnp.tril(kk, -1)
    solve = lambda rhs: _local(_unit_lower_solve, system, rhs)  # noqa: E731
    u = solve(beta[..., None] * v)  # [b, h, n, C, dv]
    w = solve((beta * carried)[..., None] * decay * k)  # [b, h, n, C, dk]
    q_in = carried[..., None] * decay * q  # reads the carried state
    k_out = (doc == doc[..., -1:])[..., None] * to_end * k  # writes into the next chunk's state
    keep = jnp.exp(last) * jnp.all(carried, axis=-1)[..., None]  # [b, h, n, 1 or dk]: no document starts inside

    def one(s, xs):
        u_i, w_i, qk_i, q_i, k_i, keep_i = xs
        v_new = u_i - jnp.einsum("bhck,bhkv->bhcv", w_i, s)
        o = jnp.einsum("bhck,bhkv->bhcv", q_i, s) + jnp.einsum("bhij,bhjv->bhiv", qk_i, v_new)
        s = keep_i[..., None] * s + jnp.einsum("bhck,bhcv->bhkv", k_i, v_new)
        return s, o

    s0 = _state(q, dv, f, state)
    per_chunk = lambda a: jnp.moveaxis(a, 2, 0)  # noqa: E731
    s, o = jax.lax.scan(one, s0, tuple(map(per_chunk, (u, w, qk, q_in, k_out, keep))), unroll=min(unroll, n))
    o = jnp.moveaxis(o, 0, 2).reshape(b, h, n * C, dv)[:, :, :t]
    return o.astype(out_dtype), s


def transition(k: Array, v: Array, g: Array, beta: Array, segments: Optional[Array] = None,
               chunk: int = CHUNK) -> tuple[Array, Array]:
    """What a stretch of tokens does to the state before it: (M [b, h, dk, dk], B [b, h, dk, dv])
    with final state = M S + B for any state S before the first token (the rule is affine in S:
    each of S's columns evolves alone). One chunked pass over values [v | 0] from the state
    [0 | I]: B's columns start at zero and take the writes, M's start at the identity and take
    none (a document start inside the stretch zeroes M's part before it). Context parallelism
    combines the shards' (M, B) in sequence order (`spmdgpt.model.deltanet`)."""
    b, h, _, dk = k.shape
    dv = v.shape[-1]
    f = _compute_dtype(k, v)
    values = jnp.concatenate([v.astype(f), jnp.zeros(v.shape[:-1] + (dk,), f)], axis=-1)
    start = jnp.broadcast_to(jnp.concatenate([jnp.zeros((dk, dv), f), jnp.eye(dk, dtype=f)], axis=-1),
                             (b, h, dk, dv + dk))
    _, s = chunked(k, k, values, g, beta, segments, state=start, chunk=chunk)  # (the outputs: unused)
    return s[..., dv:], s[..., :dv]
