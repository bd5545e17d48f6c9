"""The training loss: mean next-token cross-entropy, whole or blocked (`model.loss_block`).

Targets below 0 are not predicted (no loss, no gradient): the prompt and padding of a chat
conversation (`data` format chat). The mean is over the counted targets: their sum over the
step's batch divided by `denominator`, the step's count of counted targets (over all its
microbatches and devices) over its microbatches, so that accumulating k microbatches gives the
same mean as one batch however the counted targets fall between them.

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

from spmdgpt.config import ModelConfig, indexer_warmup
from spmdgpt.mesh.sharding import Rules
from spmdgpt.mesh.sharding import platform as mesh_platform
from spmdgpt.model import fp8
from spmdgpt.model.blocks import block
from spmdgpt.model.context import flatten, from_context_order, sequence_inputs, to_context_order, unflatten
from spmdgpt.model.csa import indexed_layers
from spmdgpt.model.head import embed, softcap, unembed, unembedding_rows
from spmdgpt.model.layers import dtype_of, norm
from spmdgpt.model.params import Params, aux_loss_weights
from spmdgpt.model.transformer import final_norm, hidden_states

Array = jax.Array


# Platforms whose logsumexp over the vocabulary is taken in one pass (`logsumexp`).
ONE_PASS_LSE_PLATFORMS = ("gpu",)


def _lse_one_pass(x: Array) -> Array:
    """logsumexp over the last axis in one pass: a variadic reduction of (running max, sum of
    exp(x - running max)) pairs, each step rescaling the sum to the new max (the online softmax
    of flash attention, applied to a reduction). One exponential per step: the pair with the
    larger max keeps its sum, the other's is scaled by exp(smaller max - larger max)."""
    def combine(a, b):
        first = a[0] >= b[0]
        m, low = jnp.where(first, a[0], b[0]), jnp.where(first, b[0], a[0])
        scale = jnp.exp(jnp.where(jnp.isfinite(m), low - m, -jnp.inf))  # (all -inf so far: nothing to add)
        return m, jnp.where(first, a[1] + b[1] * scale, b[1] + a[1] * scale)

    init = (jnp.array(-jnp.inf, x.dtype), jnp.array(0.0, x.dtype))
    m, s = jax.lax.reduce((x, jnp.ones_like(x)), init, combine, (x.ndim - 1,))
    return m + jnp.log(s)


@jax.custom_jvp
def _lse_one_pass_diff(x: Array) -> Array:
    return _lse_one_pass(x)


@_lse_one_pass_diff.defjvp
def _lse_one_pass_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    lse = _lse_one_pass(x)
    return lse, jnp.sum(jnp.exp(x - lse[..., None]) * t, axis=-1)


def logsumexp(x: Array) -> Array:
    """logsumexp over the last axis (float32 logits [rows, vocab] -> [rows]), differentiable.

    jax.nn.logsumexp reads the logits twice (a max, then a sum of exponentials). On GPUs, where
    the float32 logits of a GPT-2 124M step (16k tokens x 50k vocabulary, 3.3 GB) are read from
    memory at every pass, one pass (`_lse_one_pass`) saves one read of them. It used to compute
    two exponentials per element, which made it compute-bound on an H100 (1.23 ms for 1.65 GB of
    bfloat16 logits, against 0.56 ms for its bytes) and costs more than it saves on CPUs, which
    keep the two passes; it now computes one (benchmarks/BENCHMARKS.md, GPU)."""
    if mesh_platform() in ONE_PASS_LSE_PLATFORMS:
        return _lse_one_pass_diff(x)
    return jax.nn.logsumexp(x, axis=-1)


def count_first(count: jax.Array, *rest):
    """(count, *rest), the count's reduction over the devices (e.g. of the targets >= 0) done
    before anything of `rest` is used (an optimization barrier): left free, it is a collective
    that XLA:CPU may run on some devices before and on others after the step's other
    collectives, and its simulated devices then wait on each other forever (seen on the circular
    pipeline, with executables from the persistent compilation cache)."""
    return jax.lax.optimization_barrier((count, *rest))


def loss_fn(cfg: ModelConfig, rules: Rules, params: Params, inputs: Array, targets: Array,
            segment_ids: Optional[Array] = None, positions: Optional[Array] = None) -> Array:
    """Mean next-token cross-entropy (float32) of inputs [b, t] against targets [b, t] (over the
    targets >= 0; with a batch's document segment ids and positions, when it carries them; see
    `forward`). When the objective is the cross-entropy alone (no model.z_loss, no auxiliary
    loss), it is also the training objective (differentiable, whole or blocked); otherwise
    differentiate `objective` instead (the blocked loss gives its cross-entropy no gradient of
    its own)."""
    obj, metrics = objective(cfg, rules, params, inputs, targets, segment_ids, positions)
    plain = not (cfg.z_loss or aux_loss_weights(cfg) or cfg.mtp_depth)
    return obj if plain else metrics["loss"]  # (equal, bitwise, when plain)


def objective(cfg: ModelConfig, rules: Rules, params: Params, inputs: Array, targets: Array,
              segment_ids: Optional[Array] = None, positions: Optional[Array] = None,
              key: Optional[Array] = None, microbatches: int = 1,
              denominator: Optional[Array] = None) -> tuple[Array, dict]:
    """(what training minimises, its metrics {"loss": the mean cross-entropy over the targets
    >= 0, "tokens": their count (float32; without a denominator), "aux/<name>": each
    auxiliary output's mean over layers, losses and statistics alike}, float32 scalars, and
    "between_steps": the non-scalar aux outputs per layer, for `between_steps`, when any). The
    objective is the cross-entropy plus model.z_loss * mean(logsumexp(logits)^2) (PaLM's z-loss)
    plus weight x each auxiliary loss the block's units report (`aux_loss_weights`), plus
    model.mtp_weight x multi-token prediction's loss ("mtp/loss", `model.mtp`); without any of
    them it is the cross-entropy.
    key: dropout (model.dropout); None: none. microbatches: the pipeline's (mesh.stage > 1).
    denominator: what the sums over the counted targets are divided by (see the module
    docstring); None: their count in this batch (at least 1), counted first (`count_first`).
    For `jax.value_and_grad(..., has_aux=True)`."""
    count = None
    if denominator is None:
        count, params, inputs = count_first(jnp.sum(targets >= 0, dtype=jnp.float32), params, inputs)
        denominator = jnp.maximum(count, 1.0)
    x, _, aux = hidden_states(cfg, rules, params, inputs, positions, segment_ids=segment_ids, key=key,
                              microbatches=microbatches, residual=bool(cfg.mtp_depth))
    targets = to_context_order(rules, targets)  # (the order of x's tokens)
    counted = targets >= 0
    safe = jnp.where(counted, targets, 0)  # (an id to gather for the targets not counted)
    extra = {}
    if cfg.mtp_depth:  # (x: the residual stream; the modules read it before the final norm)
        pos, seg = sequence_inputs(rules, inputs.shape[1], positions, segment_ids)
        extra["mtp/loss"], index_kl = mtp_loss(cfg, rules, params, x, to_context_order(rules, inputs), safe, counted,
                                               pos, seg, inputs.shape[0])
        if index_kl is not None:  # (the modules' indexers learn by their KL too, `mla`)
            extra["mtp/indexer_kl"] = index_kl
        x = final_norm(cfg, rules, params, x)
    if cfg.loss_block and targets.shape[1] % (cfg.loss_block * rules.context_size()) == 0:
        total, ce = blocked_cross_entropy(cfg, rules, params, x, safe, counted)
        obj, ce = total / denominator, ce / denominator
    else:
        ce, lse = _token_losses(cfg, rules, params, x, safe)
        weight = flatten(rules, jax.sharding.reshard(counted, rules.spec("batch", "seq"))).astype(jnp.float32)
        ce = jnp.sum(ce * weight) / denominator
        obj = ce + cfg.z_loss * jnp.sum(jnp.square(lse) * weight) / denominator if cfg.z_loss else ce
    metrics = {"loss": ce, **({} if count is None else {"tokens": count}),
               **{f"aux/{name}": jnp.mean(value) for name, value in aux.items() if value.ndim == 1}}
    vectors = {name: value for name, value in aux.items() if value.ndim > 1}  # ([layers, ...]: for between_steps)
    if vectors:
        metrics["between_steps"] = vectors
    for name, weight in aux_loss_weights(cfg).items():
        if name != "indexer_kl":
            obj = obj + weight * metrics[f"aux/{name}"]
    if extra:
        metrics.update(extra)
        obj = obj + cfg.mtp_weight * extra["mtp/loss"]
    if "indexer_kl" in aux_loss_weights(cfg):  # (DeepSeek Sparse Attention's indexer, `mla`, or DeepSeek-V4's C
        # layers', `csa`; the dense warm-up trains the indexer alone: every other term gives no gradient, the paper's
        # other parameters frozen)
        if cfg.csa.q_rank:  # (the mean over the C layers: the others give 0)
            metrics["aux/indexer_kl"] = jnp.sum(aux["indexer_kl"]) / indexed_layers(cfg)
        if indexer_warmup(cfg):
            obj = jax.lax.stop_gradient(obj)
        weight = aux_loss_weights(cfg)["indexer_kl"]
        obj = obj + weight * (metrics["aux/indexer_kl"] + metrics.get("mtp/indexer_kl", 0.0))
    return obj, metrics


def token_losses(cfg: ModelConfig, rules: Rules, params: Params, inputs: Array, targets: Array,
                 segment_ids: Optional[Array] = None, positions: Optional[Array] = None,
                 temperature: float = 1.0, vocab_limit: Optional[int] = None) -> Array:
    """The cross-entropy of every next-token prediction, float32 [b, t] (what `loss_fn`
    averages; for evaluation: sums, masks, bits per byte; 0 where a target is < 0). Whole
    logits, whatever loss_block. temperature: of the distribution softmax(logits / temperature)
    the sampler draws from at that temperature (the logits soft-capped first, as it has them).
    vocab_limit: the distribution over the ids below it alone (the tokenizer's; the table's
    padding rows past it never sampled), as the inference engine samples."""
    x, _, _ = hidden_states(cfg, rules, params, inputs, positions, segment_ids=segment_ids)
    losses = _token_losses(cfg, rules, params, x, to_context_order(rules, jnp.maximum(targets, 0)), temperature,
                           vocab_limit)[0]
    losses = from_context_order(rules, unflatten(rules, losses, targets.shape[0]))
    return jnp.where(targets >= 0, losses, 0.0)


def _token_losses(cfg: ModelConfig, rules: Rules, params: Params, x: Array, targets: Array,
                  temperature: float = 1.0, vocab_limit: Optional[int] = None):
    """Hidden states x [b * t, d] against targets [b, t] -> (losses, logsumexp of the logits),
    float32 [b * t] each; the (soft-capped) logits divided by `temperature` (a Python float);
    the ids from `vocab_limit` on left out of the logsumexp (None, or the whole table: none)."""
    logits = unembed(cfg, rules, params, x)  # (soft-capped)
    if vocab_limit is not None and vocab_limit < logits.shape[-1]:
        logits = jnp.where(jnp.arange(logits.shape[-1]) < vocab_limit, logits, -jnp.inf)
    lse = logsumexp(logits.astype(jnp.float32) / temperature)  # (/ 1.0 is exact: the same numbers at temperature 1)
    flat_targets = flatten(rules, jax.sharding.reshard(targets, rules.spec("batch", "seq")))
    rows = unembedding_rows(cfg, rules, params, flat_targets, x.dtype)
    target_logit = jnp.einsum(
        "td,td->t", x, rows, out_sharding=rules.spec("tokens"), preferred_element_type=jnp.float32
    )
    return lse - softcap(cfg, target_logit) / temperature, lse


def mtp_input(cfg: ModelConfig, rules: Rules, params: Params, p, h: Array, following: Array) -> Array:
    """A multi-token-prediction module's input [tokens, d] (`model.mtp`; p: one module's Mtp): its
    projection of [the embedding of `following` (the token each position's module reads, [b, t]);
    the previous depth's hidden state h [b * t, d]], each normed (`mtp_loss` in training, the
    engine's drafts in inference)."""
    e = embed(cfg, rules, params, following)
    x = jnp.concatenate([norm(cfg, rules, p.norm_e, e), norm(cfg, rules, p.norm_h, h)], axis=-1)
    w = rules.gather(p.w_in.astype(x.dtype), ("mtp_in", "embed", "mtp_out"))
    x = jnp.einsum("tcd,cde->te", jnp.reshape(x, (x.shape[0], 2, -1)), w, out_sharding=rules.spec("stream", None),
                   preferred_element_type=jnp.float32)
    return jax.sharding.reshard(x, rules.spec("stream", "embed"))


def mtp_loss(cfg: ModelConfig, rules: Rules, params: Params, h: Array, inputs: Array, targets: Array,
             counted: Array, positions: Array, segment_ids: Optional[Array], batch: int) -> tuple:
    """Multi-token prediction's loss (`model.mtp`): the mean over the D modules of their mean
    cross-entropy, and the mean of their blocks' indexer KL losses (DeepSeek Sparse Attention's,
    `mla`; None without an indexer). h [b * t, d]: the main model's residual stream (float32, before its final
    norm); inputs [b, t]: the model's input tokens; targets [b, t] (ids >= 0) and counted [b, t]:
    the main loss's; positions and segment_ids as the model's layers got them. Module k (from 0)
    reads the previous depth's hidden state and the embedding of the real token k + 1 places on,
    inputs[i + k + 1] (never a masked target's stand-in: a prompt's last position embeds the
    answer's first token), and predicts targets[i + k + 1] where that exists, is counted and lies
    in position i's document."""
    t = targets.shape[1]
    place = jnp.arange(t)[None]
    shifted = lambda a, s: jnp.roll(a, -s, axis=1)  # noqa: E731  (position i: a[i + s])
    losses, kls = [], []
    for k in range(cfg.mtp_depth):
        p = jax.tree.map(lambda a: a[k], params.mtp)
        h = mtp_input(cfg, rules, params, p, h, shifted(inputs, k + 1))  # t_{i+k+1} is inputs[i + k + 1]
        h, _, aux = block(cfg, rules, p.block, h, positions, batch, segment_ids=segment_ids, stack="dense_blocks")
        if "indexer_kl" in aux:
            kls.append(aux["indexer_kl"])
        out = norm(cfg, rules, p.ln_f, h)
        ok = (place < t - k - 1) & shifted(counted, k + 1)  # the target t_{i+k+2} = targets[i + k + 1] exists
        if segment_ids is not None:  # (and in position i's document)
            ok = ok & (segment_ids == shifted(segment_ids, k + 1))
        ok = flatten(rules, jax.sharding.reshard(ok, rules.spec("batch", "seq"))).astype(jnp.float32)
        ce = _token_losses(cfg, rules, params, out, shifted(targets, k + 1))[0]
        losses.append(jnp.sum(ce * ok) / jnp.maximum(jnp.sum(ok), 1.0))
    return jnp.mean(jnp.stack(losses)), jnp.mean(jnp.stack(kls)) if kls else None


def blocked_cross_entropy(cfg: ModelConfig, rules: Rules, params: Params, x: Array, targets: Array,
                          counted: Optional[Array] = None):
    """(summed objective, summed cross-entropy) of hidden states x [b * t, d] (the final norm's
    output, compute dtype) against targets [b, t] (ids >= 0; only where `counted` [b, t],
    when given, is true), in chunks of cfg.loss_block positions (see
    the module docstring); the objective adds model.z_loss * logsumexp^2 per position, and
    logits are soft-capped by model.logit_softcap. The objective is differentiable in x and the
    unembedding (tied or not); the cross-entropy is a by-product (its gradient is not defined:
    it must not be differentiated)."""
    b, t = targets.shape
    c, ring = cfg.loss_block, rules.context_size()
    n = t // (c * ring)  # chunks on each device of a context ring (each holds t / ring positions)
    tied = params.unembed is None
    w = params.embed if tied else params.unembed  # stored layout and dtype
    logical = ("vocab", "embed") if tied else ("embed", "vocab")
    into, back = ("td,vd->tv", "tv,vd->td") if tied else ("td,dv->tv", "tv,dv->td")
    dt = x.dtype
    rows_spec, logit_spec = rules.spec("tokens", "embed"), rules.spec("tokens", "vocab")
    # the weight gradient as [embed, vocab] (a plain matmul of the chunk's rows), summed over the
    # chunks on each device and left unreduced over the batch's devices until the end
    partial_spec = P(*rules.spec("embed", "vocab"), unreduced=frozenset(rules.token_axes()))

    def chunks(a: Array) -> Array:  # [b, t, ...] -> [n, b, ring * c, ...] (ring: the context ring's parts)
        a = jnp.reshape(a, (b, ring, n, c) + a.shape[2:], out_sharding=rules.spec("batch", "seq"))
        return jnp.reshape(
            jnp.moveaxis(a, 2, 0), (n, b, ring * c) + a.shape[4:], out_sharding=P(None, *rules.spec("batch", "seq"))
        )

    # one chunk [b, ring * c, d], [b, ring * c] x 2 -> its rows [b * ring * c, d], [b * ring * c] x 2
    def flat(x_c, t_c, m_c):
        return flatten(rules, x_c, "embed"), flatten(rules, t_c), flatten(rules, m_c)

    z, cap = cfg.z_loss, cfg.logit_softcap
    weights = (jnp.ones(targets.shape, jnp.float32, out_sharding=rules.spec("batch", "seq")) if counted is None
               else jax.sharding.reshard(counted.astype(jnp.float32), rules.spec("batch", "seq")))

    fp8_head = fp8.in_head(cfg)  # (the head's three products in FP8: see
    # g_scale below)

    def chunk_terms(wg, x_c, t_c, m_c, q=None):
        """One chunk's rows: (their objective sum, their cross-entropy sum, d objective / d raw
        logits) with logits [rows, vocab] in float32. The target logit is the hidden state's dot
        product with the target's unembedding vector (nothing of [rows, vocab] is materialised
        for it). q: model.fp8_head's (x_c in FP8, its scale, the weight in FP8, its scale)."""
        if q is not None:
            qx, sx, qw, sw = q
            raw = jnp.einsum(into, qx, qw, out_sharding=logit_spec, preferred_element_type=jnp.float32) * (sx * sw)
        else:
            raw = jnp.einsum(into, x_c, wg, out_sharding=logit_spec,
                             preferred_element_type=dtype_of(cfg.logits_dtype)).astype(jnp.float32)
        logits = softcap(cfg, raw)
        lse = logsumexp(logits)
        rows = (wg if tied else wg.T).at[t_c].get(out_sharding=rows_spec)
        target_logit = softcap(cfg, jnp.einsum("td,td->t", x_c, rows, out_sharding=rules.spec("tokens"),
                                               preferred_element_type=jnp.float32))
        hit = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1, out_sharding=logit_spec) == t_c[:, None]
        probs = jnp.exp(logits - lse[:, None])
        ce = jnp.sum((lse - target_logit) * m_c)
        dlogits = probs * (1 + 2 * z * lse[:, None]) - hit if z else probs - hit
        if cap:  # d (c tanh(raw / c)) / d raw = 1 - (logits / c)^2
            dlogits = dlogits * (1 - jnp.square(logits / cap))
        return ce + z * jnp.sum(jnp.square(lse) * m_c), ce, dlogits * m_c[:, None]

    # model.fp8_head: x and the weight quantized once for all chunks (current scaling over each whole
    # tensor); the logits' cotangent, probs - onehot (times 1 + 2 z lse with a z-loss, which stays
    # below 2 while z lse < 0.5), by a fixed scale that maps 1 (or 2) to e5m2's largest value: one
    # scale for every chunk, so that the weight gradient's partial sums (left unreduced over the
    # batch's devices until the end) are scaled once, after their reduction. e5m2's 32 binades
    # still hold probabilities down to ~1e-10 of the bound.
    g_scale = (2.0 if z else 1.0) / fp8.E5M2_MAX

    def inputs(w, x):
        """(the gathered weight, what the scan runs over: the chunks of x, targets and weights, and
        with model.fp8_head x's chunks in FP8; with model.fp8_head (x's scale, the weight in FP8,
        its scale), else None)."""
        wg = rules.gather(w.astype(dt), logical)  # once, outside the scan (the FSDP all-gather)
        scanned = [chunks(unflatten(rules, x, b, "embed")), chunks(targets), chunks(weights)]
        if not fp8_head:
            return wg, scanned, None
        (qx, sx), (qw, sw) = (fp8.quantize(a, fp8.E4M3, fp8.E4M3_MAX) for a in (x, wg))
        return wg, scanned + [chunks(unflatten(rules, qx, b, "embed"))], (sx, qw, sw)

    def chunk(xtm, q8):  # a chunk's rows, targets, weights, and its FP8 operands (or None)
        return (*flat(*xtm[:3]), None if q8 is None else (flatten(rules, xtm[3], "embed"), *q8))

    def loss_only(w, x):
        wg, scanned, q8 = inputs(w, x)

        def body(totals, xtm):
            obj, ce, _ = chunk_terms(wg, *chunk(xtm, q8))
            return (totals[0] + obj, totals[1] + ce), None

        zero = jnp.zeros((), jnp.float32)
        return jax.lax.scan(body, (zero, zero), tuple(scanned))[0]

    def loss_and_grads(w, x):
        wg, scanned, q8 = inputs(w, x)

        def body(carry, xtm):
            total, total_ce, dw = carry
            x_c, t_c, m_c, q = chunk(xtm, q8)
            loss, ce, dlogits = chunk_terms(wg, x_c, t_c, m_c, q)
            if q is not None:  # (both backward products of FP8 operands: the cotangent in e5m2)
                qx_c, _, qw, sw = q
                qg = fp8.cast(dlogits, g_scale, fp8.E5M2, fp8.E5M2_MAX)
                dx_c = (jnp.einsum(back, qg, qw, out_sharding=rows_spec, preferred_element_type=jnp.float32)
                        * (g_scale * sw)).astype(dt)
                dw = dw + jnp.einsum("td,tv->dv", qx_c, qg, out_sharding=partial_spec,
                                     preferred_element_type=jnp.float32)  # (scaled once, after the reduction)
            else:
                dlogits = dlogits.astype(dt)
                dx_c = jnp.einsum(back, dlogits, wg, out_sharding=rows_spec)
                dw = dw + jnp.einsum("td,tv->dv", x_c, dlogits, out_sharding=partial_spec,
                                     preferred_element_type=jnp.float32)
            return (total + loss, total_ce + ce, dw), unflatten(rules, dx_c, b, "embed")

        dw0 = jnp.zeros((wg.shape[1], wg.shape[0]) if tied else wg.shape, jnp.float32, out_sharding=partial_spec)
        zero = jnp.zeros((), jnp.float32)
        (total, total_ce, dw), dxs = jax.lax.scan(body, (zero, zero, dw0), tuple(scanned))
        dxs = jnp.reshape(dxs, (n, b, ring, c, x.shape[-1]), out_sharding=P(None, *rules.spec("batch", "seq")))
        dx = flatten(
            rules,
            jnp.reshape(jnp.moveaxis(dxs, 0, 2), (b, t, x.shape[-1]), out_sharding=rules.spec("batch", "seq")),
            "embed",
        )
        if tied:
            dw = dw.T
        dw = jax.sharding.reshard(dw, rules.param_spec(logical))  # the one reduction
        if q8 is not None:  # (x's scale and the cotangent's fixed one)
            dw = dw * (q8[0] * g_scale)
        return (total, total_ce), (dw.astype(w.dtype), dx)

    loss = jax.custom_vjp(loss_only)  # (the cross-entropy output's cotangent is ignored: see above)
    loss.defvjp(loss_and_grads, lambda grads, g: tuple((g[0] * d).astype(d.dtype) for d in grads))
    return loss(w, x)
