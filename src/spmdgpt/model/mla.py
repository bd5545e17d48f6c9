"""Multi-head latent attention (MLA; DeepSeek-V2, arXiv:2405.04434, and DeepSeek-V3,
arXiv:2412.19437): an attention unit whose keys and values come from one low-rank latent per
token, so that the KV cache holds R + r numbers a token per layer instead of 2 N H.

Shapes (D = d_model, N heads; `model.mla`: R = kv_rank, Q = q_rank, n = nope_dim, r = rope_dim,
v = v_dim; the block stacks a layer axis in front):

    w_dq            [D, Q]          the query's down-projection (q_rank > 0; else None)
    q_latent_norm   [Q]             RMSNorm scale of the query latent (q_rank > 0)
    w_q             [Q or D, N, n + r]  the query's up-projection (or the whole query projection)
    w_dkv           [D, R + r]      the key/value latent and the one RoPE key all heads share
    kv_latent_norm  [R]             RMSNorm scale of the key/value latent
    w_ukv           [R, N, n + v]   the latent's up-projection to each head's unrotated key and value
    w_o             [N, v, D]       output projection (residual)

Per token: c = norm(x w_dkv[:R]) (the latent), k_rope = rope(x w_dkv[R:]); each head's key is
[c w_ukv[.., :n], k_rope] and its value c w_ukv[.., n:]; its query [q_nope, rope(q_rope)] from
norm(x w_dq) w_q. Scores are scaled by 1 / sqrt(n + r), times mscale(rope_mscale_all_dim)^2
under DeepSeek's YaRN (`softmax_scale`); the unit scales q by the ratio, so every backend's
own 1 / sqrt(width) gives the scale. The latent norms' epsilon is 1e-6 (transformers'
DeepseekV3RMSNorm default, whatever rms_norm_eps says).

Full sequences (training, evaluation, a prefill) expand the keys and values and run the
backend of `model.attention` (`attention.sequence_attention`: xla, cudnn and splash, the last two
with the values zero-padded to the query width; context parallelism's ring and all-gather).
The KV cache (`mla_cache`) holds the normalised latent and the rotated RoPE key; a decode step
absorbs the up-projections (the paper's section 2.1.2): each head's query is taken into the
latent space (q_nope w_uk^T), scored against the cached latents directly, and the attention's
latent output is taken up by w_uv, so no expanded key or value is ever built for the cache.
Under tensor parallelism the heads are split (w_q, w_ukv, w_o) and the latent is computed whole
on every device of the tensor axis; FSDP splits the latent axes (`latent`) like `embed`.

DeepSeek Sparse Attention (DSA; DeepSeek-V3.2, arXiv:2512.02556, section 2.1; `model.mla.index_heads`
= I > 0, d = index_dim): a lightning indexer beside the latent attention,

    w_iq      [Q, I, d]   its queries from the normalised query latent (transformers' indexer.wq_b)
    w_ik      [D, d]      its one key per token (wk), LayerNorm-ed (eps 1e-6; k_norm's weight ik_scale
    ik_scale, ik_bias [d]  and bias ik_bias)
    w_iw      [D, I]      each head's weight per token (weights_proj)

scores each query t against each past token s as I_ts = sum_j w_tj I^-1/2 ReLU(q_tj . k_s d^-1/2)
(the paper's equation 1, with transformers 5.24's scales), its queries and keys rotated by RoPE on
their first rope_dim dimensions (the half-split pairing of `layers.rope`, unlike MLA's interleaved
checkpoint rows); each query then attends only to the index_topk keys of highest score among its
causal ones (all of them while there are fewer). Here the selection is a mask on the dense scores
(a query keeps the keys whose score reaches its k-th largest; a tie at the k-th keeps every tied
key): the masked dense form, O(t^2) like dense attention, in causal query blocks of
model.attention_block as the xla backend (key blocks above the diagonal skipped), what runs on
every backend (not a sparse kernel: DeepSeek's FlashMLA gathers the k keys instead). The
indexer's keys are cached beside the latent ("index_k"), so a decode step scores the cache and
attends over its top-k there too.
The indexer learns by its own loss alone (its inputs detached, the top-k not differentiable): the
KL divergence from the main attention's distribution (summed over heads, L1-normalised, no
gradient) to softmax of its scores, averaged over the queries (`aux/indexer_kl`, weight
model.mla.index_kl). model.mla.index_train=dense is the paper's warm-up: dense attention, the KL over
every causal key, every other parameter frozen (the objective's other terms give no gradient);
sparse: attention over the top-k, the KL over the selected keys (the paper's sparse training stage).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig, RopeScaling, mla_dims
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.attention import (
    UnitInputs,
    attention_stats,
    causal_blocks,
    output_projection,
    probabilities,
    sequence_attention,
    sequence_backend,
    write_cache,
)
from spmdgpt.model.collective import matmuls_in
from spmdgpt.model.context import unflatten
from spmdgpt.model.info import matrix, out_init, residual_std, vector
from spmdgpt.model.kernels import TOKEN_MAJOR, attention_dropout
from spmdgpt.model.layers import layer_rope, rms_normalize, rope, yarn_mscale

LATENT_EPS = 1e-6


class Mla(NamedTuple):
    """Multi-head latent attention's parameters (one layer)."""

    # LoRA's targets: the query's (up-)projection, the latent's up-projection (keys and values), the output
    LORA = {"q": ("w_q", None), "k": ("w_ukv", None), "v": ("w_ukv", None), "o": ("w_o", None)}

    w_dq: Optional[jax.Array]
    q_latent_norm: Optional[jax.Array]
    w_q: jax.Array
    w_dkv: jax.Array
    kv_latent_norm: jax.Array
    w_ukv: jax.Array
    w_o: jax.Array
    w_iq: Optional[jax.Array] = None  # the lightning indexer's (model.mla.index_heads > 0; see the module docstring)
    w_ik: Optional[jax.Array] = None
    ik_scale: Optional[jax.Array] = None
    ik_bias: Optional[jax.Array] = None
    w_iw: Optional[jax.Array] = None


def indexed(cfg: ModelConfig) -> bool:
    """MLA with DeepSeek Sparse Attention's indexer (model.mla.index_heads > 0)."""
    return bool(cfg.mla.kv_rank and cfg.mla.index_heads)


def mla_info(cfg: ModelConfig) -> Mla:
    D, N, std = cfg.d_model, cfg.num_heads, cfg.init_std
    R, Q, n, r, v = mla_dims(cfg)
    q_in = ("latent",) if Q else ("embed",)
    index = {}
    if indexed(cfg):  # (its axes "index_heads", "index_dim" in no rule table: the indexer is small, computed whole
        # on each device of the tensor axis)
        I, d = cfg.mla.index_heads, cfg.mla.index_dim
        index = dict(w_iq=matrix((Q, I, d), ("latent", "index_heads", "index_dim"), ("latent",),
                                 ("index_heads", "index_dim"), std),
                     w_ik=matrix((D, d), ("embed", "index_dim"), ("embed",), ("index_dim",), std),
                     ik_scale=vector((d,), ("index_dim",), "ones"), ik_bias=vector((d,), ("index_dim",)),
                     w_iw=matrix((D, I), ("embed", "index_heads"), ("embed",), ("index_heads",), std))
    return Mla(**index,
        w_dq=matrix((D, Q), ("embed", "latent"), ("embed",), ("latent",), std) if Q else None,
        q_latent_norm=vector((Q,), ("latent",), "ones") if Q else None,
        w_q=matrix((Q or D, N, n + r), q_in + ("heads", "head_dim"), q_in, ("heads", "head_dim"), std),
        w_dkv=matrix((D, R + r), ("embed", "latent"), ("embed",), ("latent",), std),
        kv_latent_norm=vector((R,), ("latent",), "ones"),
        w_ukv=matrix((R, N, n + v), ("latent", "heads", "head_dim"), ("latent",), ("heads", "head_dim"), std),
        w_o=matrix((N, v, D), ("heads", "head_dim", "embed"), ("heads", "head_dim"), ("embed",), residual_std(cfg),
                   out_init(cfg)),
    )


def softmax_scale(cfg: ModelConfig) -> float:
    """The scores' scale: 1 / sqrt(nope_dim + rope_dim), times mscale(factor, rope_mscale_all_dim)^2
    under YaRN when rope_mscale_all_dim is set (DeepSeek-V3's long-context checkpoints)."""
    _, _, n, r, _ = mla_dims(cfg)
    scale = (n + r) ** -0.5
    if cfg.rope_scaling == RopeScaling.yarn and cfg.rope_mscale_all_dim:
        scale *= yarn_mscale(cfg.rope_factor, cfg.rope_mscale_all_dim) ** 2
    return scale


def _project(cfg: ModelConfig, rules: Rules, p: Mla, x: jax.Array, positions: jax.Array, batch: int, window=None,
             latent_query: bool = False):
    """x [stream, D] -> (q [b, t, N, n + r], rotated and scaled by softmax_scale x sqrt(n + r);
    the normalised latent [b, t, R]; the rotated RoPE key [b, t, r]), one gather of x for both
    down-projections; latent_query: and the normalised query latent [stream, Q] (the indexer's input)."""
    dt = x.dtype
    R, Q, n, r, _ = mla_dims(cfg)
    w = lambda a, *logical: rules.gather(a.astype(dt), logical)  # noqa: E731
    kv_term = ("td,dr->tr", w(p.w_dkv, "embed", "latent"), ("embed", "latent"), ("latent",))
    if Q:
        q_term = ("td,dr->tr", w(p.w_dq, "embed", "latent"), ("embed", "latent"), ("latent",))
    else:
        q_term = ("td,dnh->tnh", w(p.w_q, "embed", "heads", "head_dim"), ("embed", "heads", "head_dim"),
                  ("heads", "head_dim"))
    ckv, q = matmuls_in(rules, x, kv_term, q_term)
    cq = None
    if Q:
        cq = rms_normalize(q, LATENT_EPS, w(p.q_latent_norm, "latent"))
        q = jnp.einsum("tr,rnh->tnh", cq, w(p.w_q, "latent", "heads", "head_dim"),
                       out_sharding=rules.spec("tokens", "heads", "head_dim"))
    q = unflatten(rules, q, batch, "heads", "head_dim")
    ckv = unflatten(rules, ckv, batch, None)
    latent = rms_normalize(ckv[..., :R], LATENT_EPS, w(p.kv_latent_norm, "latent"))
    freq = layer_rope(cfg, r, window)
    k_rope = rope(ckv[..., R:], positions, *freq)
    q = jnp.concatenate([q[..., :n], rope(q[..., n:], positions, *freq)], axis=-1)
    boost = softmax_scale(cfg) * (n + r) ** 0.5
    if boost != 1.0:
        q = q * jnp.asarray(boost, dt)
    return (q, latent, k_rope, cq) if latent_query else (q, latent, k_rope)


def _keys_values(cfg: ModelConfig, rules: Rules, p: Mla, latent: jax.Array, k_rope: jax.Array):
    """The latent [b, t, R] and RoPE key [b, t, r] -> each head's keys [b, t, N, n + r] and values
    [b, t, N, v]."""
    _, _, n, r, _ = mla_dims(cfg)
    w = rules.gather(p.w_ukv.astype(latent.dtype), ("latent", "heads", "head_dim"))
    kv = jnp.einsum("btr,rnh->btnh", latent, w, out_sharding=rules.spec("batch", "seq", "heads", "head_dim"))
    shared = jnp.broadcast_to(k_rope[:, :, None], kv.shape[:3] + (r,),
                              out_sharding=rules.spec("batch", "seq", "heads", None))
    return jnp.concatenate([kv[..., :n], shared], axis=-1), kv[..., n:]


def mla_qkv(cfg: ModelConfig, rules: Rules, p: Mla, x: jax.Array, positions: jax.Array, batch: int,
            head_major: bool = True, window=None):
    """The expanded q, k, v ([b, N, t, h] head-major, else [b, t, N, h]; q pre-scaled): the
    projection of `attention_stats` and of full-sequence passes."""
    q, latent, k_rope = _project(cfg, rules, p, x, positions, batch, window)
    k, v = _keys_values(cfg, rules, p, latent, k_rope)
    if not head_major:
        return q, k, v
    return tuple(jnp.transpose(a, (0, 2, 1, 3)) for a in (q, k, v))


def mla_cache(cfg: ModelConfig, batch: int, capacity: int) -> dict:
    """What MLA caches per layer: the normalised latent and the rotated RoPE key of each token."""
    R, _, _, r, _ = mla_dims(cfg)
    index = {"index_k": ((batch, capacity, cfg.mla.index_dim), ("batch", None, None))} if indexed(cfg) else {}
    return {"latent": ((batch, capacity, R), ("batch", None, None)),
            "k_rope": ((batch, capacity, r), ("batch", None, None)), **index}


def mla_attention(cfg: ModelConfig, rules: Rules, p: Mla, x: jax.Array, u: UnitInputs):
    """The unit's apply: x [batch * seq, D] -> ([batch * seq, D], this layer's updated cache
    {"latent", "k_rope"} or None, {}). Full sequences (no cache, or a prefill) expand keys and
    values and run the backend; a decode step attends in the latent space over the cache."""
    if indexed(cfg):
        return _sparse_attention(cfg, rules, p, x, u)
    cache = u.cache
    if cache is not None and cache.mask is not None:
        q, latent, k_rope = _project(cfg, rules, p, x, u.positions, u.batch, u.window)
        arrays = write_cache(cache, 1, latent=latent, k_rope=k_rope)
        return output_projection(rules, p, _absorbed(cfg, rules, p, q, arrays, cache.mask), head_major=False), \
            arrays, {}
    backend = sequence_backend(cfg, rules)
    head_major = backend not in TOKEN_MAJOR
    q, latent, k_rope = _project(cfg, rules, p, x, u.positions, u.batch, u.window)
    k, v = _keys_values(cfg, rules, p, latent, k_rope)
    if head_major:
        q, k, v = (jnp.transpose(a, (0, 2, 1, 3)) for a in (q, k, v))
    o = sequence_attention(cfg, rules, backend, q, k, v, u)
    # (a prefill starts the cache)
    arrays = None if cache is None else write_cache(cache, 1, latent=latent, k_rope=k_rope)
    return output_projection(rules, p, o, head_major), arrays, {}


def _absorbed(cfg: ModelConfig, rules: Rules, p: Mla, q: jax.Array, arrays: dict, mask: jax.Array) -> jax.Array:
    """Attention over the cache in the latent space: q [b, t, N, n + r] (pre-scaled) against
    the cached latents [b, S, R] and RoPE keys [b, S, r] under mask [b, t, S] -> [b, t, N, v]."""
    _, _, n, r, _ = mla_dims(cfg)
    dt = q.dtype
    w = rules.gather(p.w_ukv.astype(dt), ("latent", "heads", "head_dim"))
    latents, keys = arrays["latent"].astype(dt), arrays["k_rope"].astype(dt)
    heads = rules.spec("batch", None, "heads", None)
    q_latent = jnp.einsum("btnh,rnh->btnr", q[..., :n], w[..., :n], out_sharding=heads)
    scores = (jnp.einsum("btnr,bsr->bnts", q_latent, latents, preferred_element_type=jnp.float32,
                         out_sharding=rules.spec("batch", "heads", None, None))
              + jnp.einsum("btnh,bsh->bnts", q[..., n:], keys, preferred_element_type=jnp.float32,
                           out_sharding=rules.spec("batch", "heads", None, None)))
    probs = probabilities(scores, mask[:, None], (n + r) ** -0.5, 0.0, None, dt)
    o_latent = jnp.einsum("bnts,bsr->btnr", probs, latents, out_sharding=heads)
    return jnp.einsum("btnr,rnh->btnh", o_latent, w[..., n:], out_sharding=heads)


def _indexer(cfg: ModelConfig, rules: Rules, p: Mla, x: jax.Array, cq: jax.Array, positions: jax.Array, batch: int,
             window=None):
    """The lightning indexer's queries [b, t, I, d], keys [b, t, d] (both rotated on their first
    rope_dim dimensions) and head weights [b, t, I] (float32, times I^-1/2) of the residual x
    [stream, D] and the query latent cq [stream, Q], both detached (the indexer learns by its KL
    loss alone)."""
    x, cq = jax.lax.stop_gradient(x), jax.lax.stop_gradient(cq)
    r, f32 = cfg.mla.rope_dim, jnp.float32
    w = lambda a, *logical: rules.gather(a.astype(x.dtype), logical)  # noqa: E731
    q = jnp.einsum("tr,rnh->tnh", cq, w(p.w_iq, "latent", "index_heads", "index_dim"),
                   out_sharding=rules.spec("tokens", None, None))
    k = jnp.einsum("td,dh->th", x, w(p.w_ik, "embed", "index_dim"), out_sharding=rules.spec("tokens", None))
    weights = jnp.einsum("td,dn->tn", x.astype(f32), rules.gather(p.w_iw.astype(f32), ("embed", "index_heads")),
                         out_sharding=rules.spec("tokens", None)) * cfg.mla.index_heads ** -0.5
    k32 = k.astype(f32)
    k32 = k32 - jnp.mean(k32, axis=-1, keepdims=True)  # (LayerNorm, eps 1e-6: transformers' k_norm)
    k32 = k32 * jax.lax.rsqrt(jnp.mean(jnp.square(k32), axis=-1, keepdims=True) + 1e-6)
    k = (k32 * p.ik_scale.astype(f32) + p.ik_bias.astype(f32)).astype(x.dtype)
    q, k = unflatten(rules, q, batch, None, None), unflatten(rules, k, batch, None)
    freq = layer_rope(cfg, r, window)
    q = jnp.concatenate([rope(q[..., :r], positions, *freq), q[..., r:]], axis=-1)
    k = jnp.concatenate([rope(k[..., :r], positions, *freq), k[..., r:]], axis=-1)
    return q, k, unflatten(rules, weights, batch, None)


def index_scores(rules: Rules, q: jax.Array, k: jax.Array, weights: jax.Array) -> jax.Array:
    """The indexer's scores, float32 [b, t, s]: sum_j weights[b, t, j] ReLU(q[b, t, j] . k[b, s] / sqrt(d))."""
    s = jnp.einsum("btnh,bsh->btns", q, k, preferred_element_type=jnp.float32,
                   out_sharding=rules.spec("batch", None, None, None))
    s = jax.nn.relu(s * q.shape[-1] ** -0.5)
    return jnp.einsum("btn,btns->bts", weights, s, out_sharding=rules.spec("batch", None, None))


def top_keys(scores: jax.Array, mask: jax.Array, k: int) -> jax.Array:
    """[b, t, s]: True at the k keys of highest score among each query's allowed ones (`mask`; all
    of them while there are no more than k; a tie at the k-th score keeps every tied key)."""
    if k >= scores.shape[-1]:
        return mask
    masked = jnp.where(mask, scores, -jnp.inf)
    kth = jax.lax.top_k(masked, k)[0][..., -1:]
    return mask & (masked >= kth)


def indexer_kl(probs: jax.Array, scores: jax.Array, support: jax.Array) -> jax.Array:
    """The indexer's loss summed over queries, float32 []: KL(p || softmax(scores over `support`))
    of each, p the main attention's probabilities [b, N, t, s] summed over heads and L1-normalised
    (no gradient); support [b, t, s] the keys it is taken over (the causal ones in the dense
    warm-up, the selected ones in sparse training: where p lives). A query with no key in its support
    (DeepSeek-V4's C layers: before its first whole entry) adds nothing, and no NaN to the gradient."""
    p = jax.lax.stop_gradient(jnp.sum(probs.astype(jnp.float32), axis=1))
    p = p / jnp.maximum(jnp.sum(p, axis=-1, keepdims=True), 1e-30)
    some = jnp.any(support, axis=-1, keepdims=True)
    log_q = jax.nn.log_softmax(jnp.where(support, scores, jnp.where(some, -jnp.inf, 0.0)), axis=-1)
    return jnp.sum(jnp.where(support & (p > 0), p * (jnp.log(jnp.where(p > 0, p, 1.0)) - log_q), 0.0))


def _sparse_attention(cfg: ModelConfig, rules: Rules, p: Mla, x: jax.Array, u: UnitInputs):
    """`mla_attention` with the lightning indexer (DeepSeek Sparse Attention): each query attends to
    the index_topk keys of highest index score, in the masked dense form (module docstring); full
    sequences also give the indexer's KL loss {"indexer_kl"}. A cached pass writes the indexer's keys
    beside the latent and selects over the cache under its mask."""
    cache, a = u.cache, cfg.mla
    q, latent, k_rope, cq = _project(cfg, rules, p, x, u.positions, u.batch, u.window, latent_query=True)
    qi, ki, weights = _indexer(cfg, rules, p, x, cq, u.positions, u.batch, u.window)
    if cache is not None and cache.mask is not None:
        arrays = write_cache(cache, 1, latent=latent, k_rope=k_rope, index_k=ki)
        scores = index_scores(rules, qi, arrays["index_k"].astype(qi.dtype), weights)
        mask = top_keys(scores, cache.mask, a.index_topk)
        return output_projection(rules, p, _absorbed(cfg, rules, p, q, arrays, mask), head_major=False), arrays, {}
    _, _, n, r, _ = mla_dims(cfg)
    t = x.shape[0] // u.batch
    k, v = _keys_values(cfg, rules, p, latent, k_rope)
    q, k, v = (jnp.transpose(z, (0, 2, 1, 3)) for z in (q, k, v))
    outs, kl = [], jnp.zeros((), jnp.float32)
    # (in query blocks of model.attention_block, as the xla backend: block i's queries over keys [0, end))
    for i, (rows, end, causal) in enumerate(causal_blocks(t, cfg.attention_block, u.segment_ids)):
        causal = jnp.broadcast_to(causal, (u.batch,) + causal.shape[-2:], out_sharding=rules.spec("batch", None, None))
        scores = index_scores(rules, qi[:, rows], ki[:, :end], weights[:, rows])
        mask = causal if a.index_train == "dense" else top_keys(scores, causal, a.index_topk)
        logits = jnp.einsum("bnqh,bnkh->bnqk", q[:, :, rows], k[:, :, :end], preferred_element_type=jnp.float32,
                            out_sharding=rules.spec("batch", "heads", None, None))
        key = None if u.key is None else jax.random.fold_in(u.key, i)
        probs = probabilities(logits, mask[:, None], (n + r) ** -0.5, attention_dropout(cfg), key, q.dtype)
        outs.append(jnp.einsum("bnqk,bnkh->bnqh", probs, v[:, :, :end],
                               out_sharding=rules.spec("batch", "heads", None, "head_dim")))
        kl = kl + indexer_kl(probs, scores, mask)
    o = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=2)
    arrays = None if cache is None else write_cache(cache, 1, latent=latent, k_rope=k_rope, index_k=ki)
    return output_projection(rules, p, o, True), arrays, {"indexer_kl": kl / (u.batch * t)}


def indexer_training_errors(section: str, train: str, kl: float) -> List[str]:
    """The indexer's training fields of `section` (model.mla, or model.csa for DeepSeek-V4's C layers):
    index_train sparse or dense, index_kl finite and >= 0, and > 0 for the dense warm-up."""
    errs = []
    if train not in ("sparse", "dense"):
        errs.append(f"{section}.index_train={train!r} must be sparse or dense (the warm-up)")
    if not 0 <= kl < float("inf"):
        errs.append(f"{section}.index_kl={kl} must be a finite number >= 0 (the indexer's KL loss weight)")
    elif train == "dense" and not kl:
        errs.append(f"{section}.index_train=dense with {section}.index_kl=0: the warm-up trains the indexer by its "
                    f"KL loss alone, so nothing would learn; set {section}.index_kl > 0")
    return errs


def mla_losses(cfg: ModelConfig) -> dict:
    """The indexer's KL loss and its weight (model.mla.index_kl), with the indexer on."""
    return {"indexer_kl": cfg.mla.index_kl} if indexed(cfg) else {}


def mla_stats(cfg: ModelConfig, rules: Rules, p: Mla, x: jax.Array, u: UnitInputs) -> dict:
    return attention_stats(mla_qkv, cfg, rules, p, x, u)


def config_errors(m: ModelConfig) -> List[str]:
    """model.mla.*: checked only with MLA on (kv_rank > 0)."""
    a = m.mla
    if a.kv_rank < 0 or a.q_rank < 0:
        return [f"model.mla.kv_rank={a.kv_rank} and q_rank={a.q_rank} must be >= 0 (kv_rank 0: MLA off; q_rank 0: "
                "a full query projection)"]
    if not a.kv_rank:
        return [f"model.mla.index_heads={a.index_heads}: DeepSeek Sparse Attention's indexer is a unit of multi-head "
                "latent attention; set model.mla.kv_rank > 0 (and q_rank), or leave index_heads at 0"] \
            if a.index_heads else []
    errs = []
    if a.rope_dim <= 0 or a.rope_dim % 2:
        errs.append(f"model.mla.rope_dim={a.rope_dim} must be even and > 0 (RoPE rotates pairs; DeepSeek-V3: 64)")
    for name in ("nope_dim", "v_dim"):
        if getattr(a, name) is not None and getattr(a, name) <= 0:
            errs.append(f"model.mla.{name}={getattr(a, name)} must be > 0 (default model.head_dim)")
    if m.num_kv_heads is not None and m.num_kv_heads != m.num_heads:
        errs.append(f"model.num_kv_heads={m.num_kv_heads} with model.mla.kv_rank={a.kv_rank}: MLA shares one latent "
                    "among all heads instead; unset model.num_kv_heads")
    if m.attention_gate or m.rope_fraction != 1.0:
        errs.append("model.attention_gate / model.rope_fraction with model.mla.kv_rank > 0: multi-head latent "
                    "attention has its own RoPE dimensions (model.mla.rope_dim) and no output gate; unset them")
    if m.attention_sinks:
        errs.append("model.attention_sinks=true with model.mla.kv_rank > 0: multi-head latent attention has no sink "
                    "logits yet; set model.attention_sinks=false")
    for name in ("qk_norm", "bias", "qkv_bias", "norm_plus_one"):
        if getattr(m, name):
            errs.append(f"model.{name}=true with model.mla.kv_rank > 0: multi-head latent attention has none (its "
                        f"latents are RMS-normalised with plain scales); set model.{name}=false")
    if a.index_heads < 0:
        errs.append(f"model.mla.index_heads={a.index_heads} must be >= 0 (0: no indexer; DeepSeek-V3.2: 64)")
    if a.index_heads > 0:
        if not a.q_rank:
            errs.append("model.mla.index_heads > 0 with model.mla.q_rank=0: the lightning indexer's queries come from "
                        "the query latent; set model.mla.q_rank > 0")
        if a.index_dim < a.rope_dim or a.index_dim % 2:
            errs.append(f"model.mla.index_dim={a.index_dim} must be even and >= model.mla.rope_dim={a.rope_dim} (the "
                        "indexer rotates its first rope_dim dimensions)")
        if a.index_topk < 1:
            errs.append(f"model.mla.index_topk={a.index_topk} must be >= 1 (keys each query attends to)")
        errs += indexer_training_errors("model.mla", a.index_train, a.index_kl)
        if m.sliding_window or m.attention_chunk:
            errs.append("model.sliding_window / attention_chunk with model.mla.index_heads > 0: DeepSeek Sparse "
                        "Attention selects among all past keys; unset them")
    elif a.index_heads == 0 and (a.index_train != "sparse" or a.index_kl != 1.0):
        errs.append("model.mla.index_train / index_kl without model.mla.index_heads: they train the lightning "
                    "indexer, which this model does not have; set model.mla.index_heads > 0 or leave them unset")
    _, _, n, r, v = mla_dims(m)
    if v > n + r:
        errs.append(f"model.mla.v_dim={v} is wider than the query/key heads (nope_dim + rope_dim = {n + r}): the fused "
                    "attention kernels take the values padded to the query width; choose v_dim <= nope_dim + rope_dim")
    return errs
