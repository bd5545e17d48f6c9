"""The training loss: mean next-token cross-entropy, whole or blocked (`model.loss_block`).

Whole (loss_block=0): float32 logits [tokens, vocab] are computed at once; the target logit is
the dot product of the hidden state and the target's unembedding vector (no one-hot).

Blocked (loss_block=c): the sequence is cut into chunks of c positions and a `lax.scan` takes
one chunk [batch, c] at a time, so at most [batch x c, vocab] float32 logits exist at once (the
token chunking MaxText calls vocab tiling; the vocabulary itself is not split). The loss is the
last node of the graph, so its gradients are computed in the same pass, chunk by chunk, and
kept for the backward pass (a custom VJP, as Liger's fused linear cross-entropy does): three
matmuls per chunk, as many as the whole loss takes, and no logits recomputed. The unembedding
gradient is accumulated in float32, left unreduced over the batch's mesh axes inside the scan,
and reduced once at the end (one all-reduce, or under FSDP one reduce-scatter, not one per
chunk).
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from spmdgpt.config import ModelConfig
from spmdgpt.model.transformer import Params, hidden_states, unembed, unembedding_rows
from spmdgpt.sharding import Rules

Array = jax.Array


def loss_fn(cfg: ModelConfig, rules: Rules, params: Params, inputs: Array, targets: Array,
            segment_ids: Optional[Array] = None, positions: Optional[Array] = None) -> Array:
    """Mean next-token cross-entropy (float32) of inputs [b, t] against targets [b, t] (with a
    batch's document segment ids and positions, when it carries them; see `forward`)."""
    x, _ = hidden_states(cfg, rules, params, inputs, positions, segment_ids=segment_ids)
    if cfg.loss_block and targets.shape[1] % cfg.loss_block == 0:
        return blocked_cross_entropy(cfg, rules, params, x, targets) / targets.size
    return jnp.mean(_token_losses(cfg, rules, params, x, targets))


def token_losses(cfg: ModelConfig, rules: Rules, params: Params, inputs: Array, targets: Array,
                 segment_ids: Optional[Array] = None, positions: Optional[Array] = None) -> Array:
    """The cross-entropy of every next-token prediction, float32 [b, t] (what `loss_fn`
    averages; for evaluation: sums, masks, bits per byte). Whole logits, whatever loss_block."""
    x, _ = hidden_states(cfg, rules, params, inputs, positions, segment_ids=segment_ids)
    return jnp.reshape(_token_losses(cfg, rules, params, x, targets), targets.shape,
                       out_sharding=rules.spec("batch", None))


def _token_losses(cfg: ModelConfig, rules: Rules, params: Params, x: Array, targets: Array) -> Array:
    """Hidden states x [b * t, d] against targets [b, t] -> losses [b * t] (float32)."""
    logits = unembed(cfg, rules, params, x)
    lse = jax.nn.logsumexp(logits.astype(jnp.float32), axis=-1)
    flat_targets = jnp.reshape(targets, (-1,), out_sharding=rules.spec("batch"))
    rows = unembedding_rows(cfg, rules, params, flat_targets, x.dtype)
    target_logit = jnp.einsum(
        "td,td->t", x, rows, out_sharding=rules.spec("batch"), preferred_element_type=jnp.float32
    )
    return lse - target_logit


def blocked_cross_entropy(cfg: ModelConfig, rules: Rules, params: Params, x: Array, targets: Array) -> Array:
    """Summed cross-entropy of hidden states x [b * t, d] (the final norm's output, compute
    dtype) against targets [b, t], in chunks of cfg.loss_block positions (see the module
    docstring). Differentiable in x and the unembedding (tied or not)."""
    b, t = targets.shape
    c = cfg.loss_block
    n = t // c
    tied = params.unembed is None
    w = params.embed if tied else params.unembed  # stored layout and dtype
    logical = ("vocab", "embed") if tied else ("embed", "vocab")
    into, back = ("td,vd->tv", "tv,vd->td") if tied else ("td,dv->tv", "tv,dv->td")
    dt = x.dtype
    rows_spec, logit_spec = rules.spec("batch", "embed"), rules.spec("batch", "vocab")
    # the weight gradient as [embed, vocab] (a plain matmul of the chunk's rows), summed over the
    # chunks on each device and left unreduced over the batch's devices until the end
    partial_spec = P(*rules.spec("embed", "vocab"), unreduced=frozenset(rules.batch_axes()))

    def chunks(a: Array) -> Array:  # [b, t, ...] -> [n, b, c, ...]
        return jnp.swapaxes(jnp.reshape(a, (b, n, c) + a.shape[2:]), 0, 1)

    def flat(x_c, t_c):  # one chunk [b, c, d], [b, c] -> its rows [b * c, d], [b * c]
        return (jnp.reshape(x_c, (b * c, x_c.shape[-1]), out_sharding=rows_spec),
                jnp.reshape(t_c, (b * c,), out_sharding=rules.spec("batch")))

    def chunk_terms(wg, x_c, t_c):
        """One chunk's rows: (their loss sum, d loss / d logits) with logits [rows, vocab] in
        float32. The target logit is the hidden state's dot product with the target's
        unembedding vector (nothing of [rows, vocab] is materialised for it)."""
        logits = jnp.einsum(into, x_c, wg, out_sharding=logit_spec, preferred_element_type=jnp.float32)
        lse = jax.nn.logsumexp(logits, axis=-1)
        rows = (wg if tied else wg.T).at[t_c].get(out_sharding=rows_spec)
        target_logit = jnp.einsum("td,td->t", x_c, rows, out_sharding=rules.spec("batch"),
                                  preferred_element_type=jnp.float32)
        hit = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1, out_sharding=logit_spec) == t_c[:, None]
        return jnp.sum(lse - target_logit), jnp.exp(logits - lse[:, None]) - hit

    def inputs(w, x):
        wg = rules.gather(w.astype(dt), logical)  # once, outside the scan (the FSDP all-gather)
        x3 = jnp.reshape(x, (b, t, x.shape[-1]), out_sharding=rules.spec("batch", None, "embed"))
        return wg, chunks(x3), chunks(targets)

    def loss_only(w, x):
        wg, xs, ts = inputs(w, x)

        def body(total, xt):
            return total + chunk_terms(wg, *flat(*xt))[0], None

        return jax.lax.scan(body, jnp.zeros((), jnp.float32), (xs, ts))[0]

    def loss_and_grads(w, x):
        wg, xs, ts = inputs(w, x)

        def body(carry, xt):
            total, dw = carry
            x_c, t_c = flat(*xt)
            loss, dlogits = chunk_terms(wg, x_c, t_c)
            dlogits = dlogits.astype(dt)
            dx_c = jnp.einsum(back, dlogits, wg, out_sharding=rows_spec)
            dw = dw + jnp.einsum("td,tv->dv", x_c, dlogits, out_sharding=partial_spec,
                                 preferred_element_type=jnp.float32)
            return (total + loss, dw), jnp.reshape(dx_c, (b, c, dx_c.shape[-1]), out_sharding=rules.spec("batch", None, "embed"))

        dw0 = jnp.zeros((wg.shape[1], wg.shape[0]) if tied else wg.shape, jnp.float32, out_sharding=partial_spec)
        (total, dw), dxs = jax.lax.scan(body, (jnp.zeros((), jnp.float32), dw0), (xs, ts))
        dx = jnp.reshape(jnp.swapaxes(dxs, 0, 1), x.shape, out_sharding=rules.spec("batch", "embed"))
        if tied:
            dw = dw.T
        dw = jax.sharding.reshard(dw, rules.param_spec(logical)).astype(w.dtype)  # the one reduction
        return total, (dw, dx)

    loss = jax.custom_vjp(loss_only)
    loss.defvjp(loss_and_grads, lambda grads, g: tuple((g * d).astype(d.dtype) for d in grads))
    return loss(w, x)
