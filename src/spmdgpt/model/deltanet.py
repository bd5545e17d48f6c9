"""Gated DeltaNet (Yang, Kautz and Hatamizadeh 2024, arXiv:2412.06464; the linear-attention layers
of Qwen3-Next and Qwen3.5): an attention unit whose memory is a fixed-size state per head, not a
growing list of keys and values.

Shapes (D = d_model; `model.deltanet`: Hk key heads of width dk, Hv value heads of width dv, each
group of Hv / Hk consecutive value heads sharing one key head; K = conv; the block stacks a
layer axis in front):

    w_qk      [D, 2, Hk, dk]   query and key projections
    w_v       [D, Hv, dv]      value projection
    w_z       [D, Hv, dv]      the output gate's projection (the gated norm's z)
    w_ab      [D, 2, Hv]       the decay's input a and the write strength's input b, one per value head
    conv_qk   [K, 2, Hk, dk]   the causal depthwise convolution over q and k (tap K - 1: this token)
    conv_v    [K, Hv, dv]      ... and over v
    a_log     [Hv]             the decay rate's log A (g = -A softplus(a + dt_bias) <= 0)
    dt_bias   [Hv]
    norm      [dv]             the gated RMSNorm's scale (a plain scale, whatever model.norm_plus_one)
    w_o       [Hv, dv, D]      output projection (residual)

model.deltanet.gate=channel (Kimi Delta Attention, Kimi Linear's linear layers) replaces w_z and w_ab:

    w_b       [D, Hv]          the write strength's input b
    w_fa      [D, dk]          the decay's low-rank projection (rank dk) ...
    w_fb      [dk, Hv, dk]     ... to one input per value head and key channel
    w_ga      [D, dv]          the output gate's low-rank projection (rank dv) ...
    w_gb      [dv, Hv, dv]     ... to the gated norm's z
    dt_bias   [Hv, dk]         (one a key channel)

and per token g = -exp(a_log) softplus(x w_fa w_fb + dt_bias) [Hv, dk] decays each row of the
state at its own rate (`delta_rule` with a channel gate), out = (RMSNorm(o) * norm *
sigmoid(x w_ga w_gb)) w_o.

Per token: q, k, v = SiLU(causal_conv(x w_qk, x w_v)); q and k L2-normalised (q also by
dk^-1/2); beta = sigmoid(b), g = -exp(a_log) softplus(a + dt_bias); the gated delta rule
(`delta_rule`) gives o per value head; out = (RMSNorm(o) * norm * SiLU(x w_z)) w_o. The
convolution, like the state, never reaches across a document boundary (segment ids).

Full sequences (training, evaluation) run the chunkwise parallel form (`delta_rule.chunked`,
chunks of model.deltanet.chunk). Heads split over the tensor axis like attention heads (the key
heads and the value heads both under the `heads` rule). On a context ring (mesh.context > 1,
sequences split in the zigzag order of `spmdgpt.model.context`) the state passes between the
chunks in sequence order (`_context_rule`) and the convolution reads the inputs before each chunk
(`_context_conv`). Decoding keeps a fixed-size cache per
sequence (`deltanet_state`: the state [Hv, dk, dv] in float32 and the convolution's last K - 1
inputs), which the inference engine holds per slot beside the softmax layers' pages: a prompt's
chunks run the chunked form from the row's state, a decode step the recurrence.
"""

from __future__ import annotations

from functools import partial
from typing import List, NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig, deltanet_dims
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import delta_rule
from spmdgpt.model.attention import UnitInputs, output_projection
from spmdgpt.model.collective import matmuls_in
from spmdgpt.model.context import unflatten
from spmdgpt.model.info import ParamInfo, matrix, out_init, residual_std, vector
from spmdgpt.model.layers import pick_rows, rms_normalize

L2_EPS = 1e-6  # q and k: x / sqrt(sum x^2 + eps) (flash-linear-attention's and transformers' l2norm)


class DeltaNet(NamedTuple):
    """Gated DeltaNet's parameters (one layer)."""

    LORA = {"q": ("w_qk", 0), "k": ("w_qk", 1), "v": ("w_v", None), "o": ("w_o", None)}

    w_qk: jax.Array
    w_v: jax.Array
    w_z: jax.Array
    w_ab: jax.Array
    conv_qk: jax.Array
    conv_v: jax.Array
    a_log: jax.Array
    dt_bias: jax.Array
    norm: jax.Array
    w_o: jax.Array
    w_b: Optional[jax.Array] = None  # (model.deltanet.gate=channel: Kimi Delta Attention's; else None)
    w_fa: Optional[jax.Array] = None
    w_fb: Optional[jax.Array] = None
    w_ga: Optional[jax.Array] = None
    w_gb: Optional[jax.Array] = None


def deltanet_info(cfg: ModelConfig) -> DeltaNet:
    D, std = cfg.d_model, cfg.init_std
    Hk, Hv, dk, dv = deltanet_dims(cfg)
    K = cfg.deltanet.conv
    conv_std = (3 * K) ** -0.5  # (a depthwise Conv1d's default: uniform over +-1/sqrt(K), this std)
    channel = cfg.deltanet.gate == "channel"
    kda = {} if not channel else dict(
        w_z=None, w_ab=None,
        w_b=matrix((D, Hv), ("embed", "heads"), ("embed",), ("heads",), std),
        w_fa=matrix((D, dk), ("embed", "latent"), ("embed",), ("latent",), std),
        w_fb=matrix((dk, Hv, dk), ("latent", "heads", "head_dim"), ("latent",), ("heads", "head_dim"), std),
        w_ga=matrix((D, dv), ("embed", "latent"), ("embed",), ("latent",), std),
        w_gb=matrix((dv, Hv, dv), ("latent", "heads", "head_dim"), ("latent",), ("heads", "head_dim"), std),
        dt_bias=vector((Hv, dk), ("heads", "head_dim"), "dt_bias"))
    return DeltaNet(
        w_qk=matrix((D, 2, Hk, dk), ("embed", "qkv", "heads", "head_dim"), ("embed",), ("heads", "head_dim"), std),
        w_v=matrix((D, Hv, dv), ("embed", "heads", "head_dim"), ("embed",), ("heads", "head_dim"), std),
        w_z=matrix((D, Hv, dv), ("embed", "heads", "head_dim"), ("embed",), ("heads", "head_dim"), std),
        w_ab=matrix((D, 2, Hv), ("embed", "qkv", "heads"), ("embed",), ("heads",), std),
        conv_qk=ParamInfo((K, 2, Hk, dk), (None, "qkv", "heads", "head_dim"), "normal", conv_std),
        conv_v=ParamInfo((K, Hv, dv), (None, "heads", "head_dim"), "normal", conv_std),
        a_log=vector((Hv,), ("heads",), "a_log"),
        dt_bias=vector((Hv,), ("heads",), "dt_bias"),
        norm=vector((dv,), ("head_dim",), "ones"),
        w_o=matrix((Hv, dv, D), ("heads", "head_dim", "embed"), ("heads", "head_dim"), ("embed",), residual_std(cfg),
                   out_init(cfg)),
    )._replace(**kda)


def causal_conv(x: jax.Array, w: jax.Array, segments: Optional[jax.Array]) -> jax.Array:
    """The causal depthwise convolution: x [b, t, ...channels], w [K, ...channels] -> [b, t, ...]
    with out_t = sum_j w[j] x[t - (K - 1) + j], inputs before t = 0 or in another document (segments
    [b, t]) read as zero. Computed in float32 (float64 for float64 x)."""
    K, t = w.shape[0], x.shape[1]
    f = jnp.promote_types(x.dtype, jnp.float32)
    w32 = w.astype(f)
    padded = jnp.pad(x.astype(f), ((0, 0), (K - 1, 0)) + ((0, 0),) * (x.ndim - 2))  # (one copy; each tap a slice)
    if segments is not None:
        seg = jnp.pad(segments, ((0, 0), (K - 1, 0)), constant_values=-1)
    out = None
    for j in range(K):  # tap j reads x[t - (K - 1) + j]
        tap = padded[:, j:j + t] * w32[j]
        if segments is not None and j < K - 1:
            same = seg[:, j:j + t] == segments
            tap = jnp.where(same.reshape(same.shape + (1,) * (x.ndim - 2)), tap, 0)
        out = tap if out is None else out + tap
    return out


def _context_local(rules: Rules, body, *arrays):
    """body(device index on the context ring, *each device's blocks) in a `shard_map` over every
    mesh axis (the arrays' own layouts in and, for the result, the first array's), the
    sequences split over the context ring (`rules.seq_axes()`) in context order
    (`spmdgpt.model.context`: device d holds sequence chunks d and 2C - 1 - d)."""
    specs = tuple(None if a is None else jax.typeof(a).sharding.spec for a in arrays)
    axes = rules.seq_axes()

    def local(*blocks):
        return body(jax.lax.axis_index(axes), *blocks)

    return jax.shard_map(local, in_specs=specs, out_specs=specs[0])(*arrays)


def _ring_in_order(a: jax.Array, axes: tuple, c: int) -> jax.Array:
    """Each device's [b, 2, ...] (its early and late chunk's values) all-gathered over the context
    ring -> [2C, b, ...] every chunk's in sequence order (chunk j < C: device j's early one;
    j >= C: device 2C - 1 - j's late one)."""
    gathered = jax.lax.all_gather(a, axes).swapaxes(1, 2)  # [C, 2, b, ...]
    return jnp.concatenate([gathered[:, 0], jnp.flip(gathered[:, 1], axis=0)])


def _context_conv(rules: Rules, x: jax.Array, w: jax.Array, segments: Optional[jax.Array]) -> jax.Array:
    """`causal_conv` of sequences split over the context ring: each chunk reads the last K - 1
    inputs of the chunk before it in the sequence (and their document ids), all-gathered over the
    ring (K - 1 tokens a chunk)."""
    K, c = w.shape[0], rules.context_size()
    axes = rules.seq_axes()

    def body(d, x, w, segments):
        b, t = x.shape[:2]
        halves = x.reshape((b, 2, t // 2) + x.shape[2:])
        ring = lambda a: _ring_in_order(a, axes, c)  # noqa: E731
        tails = ring(halves[:, :, t // 2 - (K - 1):])  # [2C, b, K - 1, ...]
        mine = (d, 2 * c - 1 - d)
        before = [jnp.where(j > 0, tails[jnp.maximum(j - 1, 0)], 0) for j in mine]  # (none before the sequence)
        if segments is not None:
            seg = segments.reshape(b, 2, t // 2)
            seg_tails = ring(seg[:, :, t // 2 - (K - 1):])
            seg_before = [jnp.where(j > 0, seg_tails[jnp.maximum(j - 1, 0)], -1) for j in mine]
        out = [causal_conv(jnp.concatenate([before[h], halves[:, h]], axis=1), w,
                           None if segments is None else jnp.concatenate([seg_before[h], seg[:, h]], axis=1))[:, K - 1:]
               for h in range(2)]
        return jnp.concatenate(out, axis=1)

    return _context_local(rules, body, x, w, segments)


def _context_rule(rules: Rules, q, k, v, g, beta, segments: Optional[jax.Array], chunk: int) -> jax.Array:
    """The chunked delta rule over sequences split over the context ring ([b, h, t, ...], t in
    context order): each device's two chunks run the chunked form from a zero state to find what
    they do to a state (`delta_rule.transition`: M, B); the ring all-gathers those, every device
    carries the state through the 2C chunks in sequence order (S <- M S + B; zero where a document
    starts at a chunk's first token), and its chunks run again from their own carried states. Two
    passes of the chunked form (the first over dk more value columns); equal to one device's."""
    c = rules.context_size()
    axes = rules.seq_axes()

    def body(d, q, k, v, g, beta, segments):
        b, h, t = q.shape[:3]

        def halves(a, heads=True):  # [b, (h,) 2 (t / 2), ...] -> [2b, (h,) t / 2, ...]: the two chunks as rows
            a = a.reshape(a.shape[:1 + heads] + (2, t // 2) + a.shape[2 + heads:])
            return jnp.concatenate([a[:, :, 0] if heads else a[:, 0], a[:, :, 1] if heads else a[:, 1]])

        q2, k2, v2, g2, beta2 = map(halves, (q, k, v, g, beta))
        seg2 = None if segments is None else halves(segments, heads=False)
        m, add = delta_rule.transition(k2, v2, g2, beta2, seg2, chunk=chunk)  # [2b, h, dk, dk], [2b, h, dk, dv]
        ring = lambda a: _ring_in_order(a.reshape((2, b) + a.shape[1:]).swapaxes(0, 1), axes, c)  # noqa: E731
        # ([2b, ...], the rows of this device's early chunk then its late one's -> [2C, b, ...])
        ms, adds = ring(m), ring(add)
        if seg2 is None:
            starts = jnp.zeros((2 * c, b), bool)
        else:  # (a chunk whose first token is not in the document of the chunk before's last token)
            firsts, lasts = ring(seg2[:, 0]), ring(seg2[:, -1])
            starts = jnp.concatenate([jnp.zeros((1, b), bool), firsts[1:] != lasts[:-1]])

        def carry(s, xs):
            m_j, add_j, start_j = xs
            s = jnp.where(start_j[:, None, None, None], 0, s)
            return jnp.einsum("bhkj,bhjv->bhkv", m_j, s) + add_j, s

        _, before = jax.lax.scan(carry, 0 * adds[0], (ms, adds, starts))  # [2C, b, h, dk, dv]
        state = jnp.concatenate([before[d], before[2 * c - 1 - d]])  # [2b, ...]: this device's chunks'
        o, _ = delta_rule.chunked(q2, k2, v2, g2, beta2, seg2, state=state, chunk=chunk)  # [2b, h, t / 2, dv]
        return jnp.concatenate([o[:b], o[b:]], axis=2)

    return _context_local(rules, body, q, k, v, g, beta, segments)


def _l2(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.sum(jnp.square(x), axis=-1, keepdims=True) + L2_EPS)


def deltanet_state(cfg: ModelConfig, batch: int) -> dict:
    """What the unit keeps per sequence for decoding, whatever its length (the inference engine's
    slots): {name: (shape, logical axes, dtype or None for the compute dtype)}: the state, float32,
    and the convolution's last K - 1 inputs (before it) of q and k and of v."""
    Hk, Hv, dk, dv = deltanet_dims(cfg)
    K = cfg.deltanet.conv
    return {"state": ((batch, Hv, dk, dv), ("batch", "heads", None, None), "float32"),
            "conv_qk": ((batch, K - 1, 2, Hk, dk), ("batch", None, "qkv", "heads", "head_dim"), None),
            "conv_v": ((batch, K - 1, Hv, dv), ("batch", None, "heads", "head_dim"), None)}


def _conv_cached(x: jax.Array, w: jax.Array, tail: jax.Array, valid: jax.Array):
    """The convolution of a cached pass: x [b, t, ...] after the row's earlier inputs `tail`
    [b, K - 1, ...] -> (the output [b, t, ...], the new tail: the last K - 1 inputs up to the row's
    last valid token; valid [b, t]: its tokens, then padding)."""
    K = w.shape[0]
    both = jnp.concatenate([tail.astype(x.dtype), x], axis=1)
    out = causal_conv(both, w, None)[:, K - 1:]
    n = jnp.sum(valid, axis=1)
    return out, jnp.stack([pick_rows(both, n + j) for j in range(K - 1)], axis=1)


def deltanet_attention(cfg: ModelConfig, rules: Rules, p: DeltaNet, x: jax.Array, u: UnitInputs):
    """The unit's apply: x [batch * seq, D] -> ([batch * seq, D], the updated state cache or None,
    {}). Full sequences (no cache): from a zero state, documents apart. A cached pass (the
    inference engine's; u.cache.arrays: `deltanet_state`'s arrays of each row, u.positions [b, t]
    with -1 for padding after a row's tokens): from the row's state, the padding neither decaying
    nor writing it, the convolution continuing from the row's last inputs."""
    cache = u.cache
    dt = x.dtype
    Hk, Hv, dk, dv = deltanet_dims(cfg)
    w = lambda a, *logical: rules.gather(a.astype(dt), logical)  # noqa: E731
    channel = cfg.deltanet.gate == "channel"
    terms = [("td,dcnh->tcnh", w(p.w_qk, "embed", "qkv", "heads", "head_dim"), ("qkv", "heads", "head_dim")),
             ("td,dnh->tnh", w(p.w_v, "embed", "heads", "head_dim"), ("heads", "head_dim"))]
    if channel:  # (Kimi Delta Attention: b; the decay's and the output gate's low-rank inputs)
        terms += [("td,dn->tn", w(p.w_b, "embed", "heads"), ("heads",)),
                  ("td,dr->tr", w(p.w_fa, "embed", "latent"), (None,)),
                  ("td,dr->tr", w(p.w_ga, "embed", "latent"), (None,))]
    else:
        terms += [("td,dnh->tnh", w(p.w_z, "embed", "heads", "head_dim"), ("heads", "head_dim")),
                  ("td,dcn->tcn", w(p.w_ab, "embed", "qkv", "heads"), ("qkv", "heads"))]
    ys = matmuls_in(rules, x, *((eq, a, ("embed", *logical), logical) for eq, a, logical in terms))
    qk, v, *rest = (unflatten(rules, y, u.batch, *logical) for y, (_, _, logical) in zip(ys, terms))
    if channel:
        b_in, f_in, g_in = rest
        up = lambda lo, a: jnp.einsum("btr,rnh->btnh", lo, w(a, None, "heads", "head_dim"),  # noqa: E731
                                      out_sharding=rules.spec("batch", "seq", "heads", None))
        a_in, z = up(f_in, p.w_fb), up(g_in, p.w_gb)  # [b, t, Hv, dk], [b, t, Hv, dv]
    else:
        z, ab = rest
        a_in, b_in = ab[:, :, 0], ab[:, :, 1]
    seg = u.segment_ids
    if seg is not None and rules.context_size() > 1 and cache is None:
        seg = jax.sharding.reshard(seg, rules.spec("batch", "seq"))
    w_qk, w_v = w(p.conv_qk, None, "qkv", "heads", "head_dim"), w(p.conv_v, None, "heads", "head_dim")
    ring = cache is None and rules.context_size() > 1  # (sequences split over the context ring)
    if ring:
        qk, v = _context_conv(rules, qk, w_qk, seg), _context_conv(rules, v, w_v, seg)
    elif cache is None:
        qk, v = causal_conv(qk, w_qk, seg), causal_conv(v, w_v, seg)
    else:
        valid = u.positions >= 0
        qk, tail_qk = _conv_cached(qk, w_qk, cache.arrays["conv_qk"], valid)
        v, tail_v = _conv_cached(v, w_v, cache.arrays["conv_v"], valid)
    qk, v = jax.nn.silu(qk), jax.nn.silu(v)
    q, k = _l2(qk[:, :, 0]) * dk ** -0.5, _l2(qk[:, :, 1])  # [b, t, Hk, dk], float32
    if Hv != Hk:  # each key head serves Hv / Hk consecutive value heads
        q, k = (jnp.repeat(a, Hv // Hk, axis=2, out_sharding=rules.spec("batch", "seq", "heads", None)) for a in (q, k))
    f = jnp.promote_types(dt, jnp.float32)  # (the gates, the rule and the norm: float32, or float64 for float64 x)
    beta = jax.nn.sigmoid(b_in.astype(f))
    rate = jnp.exp(p.a_log.astype(f))
    g = -(rate[:, None] if channel else rate) * jax.nn.softplus(a_in.astype(f) + p.dt_bias.astype(f))
    # ([b, t, Hv], or [b, t, Hv, dk]: a rate per key channel)

    def heads_first(a):  # [b, t, h, ...] -> [b, h, t, ...], whole sequences (the chunks are scanned), or a
        # device's chunks of them on a context ring
        return jax.sharding.reshard(jnp.swapaxes(a, 1, 2), rules.spec("batch", "heads", "seq" if ring else None,
                                                                      *(None,) * (a.ndim - 3)))

    arrays = None
    if ring:
        o = _context_rule(rules, *map(heads_first, (q, k, v, g, beta)), seg, cfg.deltanet.chunk)
    elif cache is None:
        if seg is not None:
            seg = jax.sharding.reshard(seg, rules.spec("batch", None))
        o, _ = delta_rule.chunked(*map(heads_first, (q, k, v, g, beta)), seg, chunk=cfg.deltanet.chunk)
    else:  # (padding: no decay, no write)
        g, beta = (jnp.where(valid.reshape(valid.shape + (1,) * (a.ndim - 2)), a, 0) for a in (g, beta))
        rule = delta_rule.recurrent if x.shape[0] == u.batch else partial(delta_rule.chunked, chunk=cfg.deltanet.chunk)
        o, state = rule(*map(heads_first, (q, k, v, g, beta)), state=cache.arrays["state"])
        new = {"state": state, "conv_qk": tail_qk, "conv_v": tail_v}
        arrays = {n: a.astype(cache.arrays[n].dtype) for n, a in new.items()}
    o = jax.sharding.reshard(jnp.swapaxes(o, 1, 2), rules.spec("batch", "seq", "heads", None))  # [b, t, Hv, dv]
    gate = jax.nn.sigmoid if channel else jax.nn.silu
    o = rms_normalize(o.astype(f), cfg.norm_eps, w(p.norm, "head_dim")) * gate(z.astype(f))  # the gated norm
    return output_projection(rules, p, o.astype(dt), head_major=False), arrays, {}


def deltanet_stats(cfg: ModelConfig, rules: Rules, p: DeltaNet, x: jax.Array, u: UnitInputs) -> dict:
    """None of its own yet (the block's RMS statistics cover the layer; softmax attention's largest
    logit has no counterpart here)."""
    return {}


def config_errors(m: ModelConfig) -> List[str]:
    """model.deltanet.*: checked only with Gated DeltaNet layers on (full_attention_interval > 0)."""
    d = m.deltanet
    if d.full_attention_interval < 0:
        return [f"model.deltanet.full_attention_interval={d.full_attention_interval} must be >= 0 (0: no Gated "
                "DeltaNet layers; 4: three of them, then one softmax-attention layer, as Qwen3-Next and Qwen3.5)"]
    if d.gate not in ("head", "channel"):
        return [f"model.deltanet.gate={d.gate} is not a gate: head (Gated DeltaNet, one decay rate per head) or "
                "channel (Kimi Delta Attention, one per head and key channel)"]
    if not d.full_attention_interval:
        return [] if d.gate == "head" else [
            f"model.deltanet.gate={d.gate} without linear-attention layers (model.deltanet.full_attention_interval=0)"
            "; set full_attention_interval=k > 0 or leave gate=head"]
    errs = []
    if d.full_attention_interval < 2:
        errs.append(f"model.deltanet.full_attention_interval={d.full_attention_interval}: every layer would be "
                    "softmax attention; choose k >= 2 (k - 1 Gated DeltaNet layers, then one softmax-attention layer)")
    elif m.num_layers < d.full_attention_interval:
        errs.append(f"model.num_layers={m.num_layers} is fewer than model.deltanet.full_attention_interval="
                    f"{d.full_attention_interval}: the layers run as groups of (interval - 1) Gated DeltaNet layers "
                    "and one softmax-attention layer (a last group of num_layers mod interval layers: its last one "
                    "softmax); choose num_layers >= the interval")
    for name in ("key_heads", "key_dim", "conv", "chunk"):
        if not getattr(d, name) > 0:
            errs.append(f"model.deltanet.{name}={getattr(d, name)} must be > 0")
    for name in ("value_heads", "value_dim"):
        if getattr(d, name) is not None and not getattr(d, name) > 0:
            errs.append(f"model.deltanet.{name}={getattr(d, name)} must be > 0, or null (the key's)")
    Hk, Hv, _, _ = deltanet_dims(m)
    if Hk > 0 and Hv > 0 and Hv % Hk:
        errs.append(f"model.deltanet.value_heads={Hv} must be a multiple of model.deltanet.key_heads={Hk} (each key "
                    "head serves value_heads / key_heads value heads)")
    k, n = d.full_attention_interval, m.moe.first_dense_layers
    if m.moe.num_experts and m.moe.interleave_step != 1:
        errs.append(f"model.moe.interleave_step={m.moe.interleave_step} in a hybrid (model.deltanet): its MoE layers "
                    "are every layer after model.moe.first_dense_layers (Qwen3-Next, Kimi Linear); set "
                    "interleave_step=1")
    elif m.moe.num_experts and k >= 2 and k - 1 < n < m.num_layers:  # (n < 0 or >= num_layers: moe.py's line)
        errs.append(f"model.moe.first_dense_layers={n} in a hybrid: its dense layers are Gated DeltaNet layers of "
                    f"the first group of model.deltanet.full_attention_interval={k} (Kimi-Linear-48B-A3B: 1); "
                    f"choose 0 to {k - 1}")
    if m.parametrization.value != "standard":
        errs.append(f"model.deltanet with model.parametrization={m.parametrization.value}: μP's rules are not worked "
                    "out for Gated DeltaNet's parameters yet; use model.parametrization=standard")
    if m.mtp_depth:
        errs.append("model.deltanet with model.mtp_depth > 0: the multi-token prediction modules are not built for "
                    "hybrids yet; set model.mtp_depth=0")
    return errs

