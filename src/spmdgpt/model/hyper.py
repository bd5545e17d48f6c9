"""Manifold-constrained hyper-connections (`model.hyper_connections` = n > 0; DeepSeek-V4's mHC,
its hc_mult): the residual is n streams [tokens, n, D] instead of one [tokens, D].

Around each branch (attention, then the MLP) of a block, a `Hyper` unit reads the n streams X
(flattened to n D and RMS-normalised without a scale) and projects them to 2 n + n^2 mixes, each
group times its own learned scale plus a learned bias:

    pre  = sigmoid(.) + eps          [n]     the branch's input: sum_j pre_j X_j (then the block's norm)
    post = 2 sigmoid(.)              [n]     how much of the branch's output each stream gets
    comb = softmax(., rows) + eps    [n, n]  then Sinkhorn-Knopp (columns, then hyper_sinkhorn_iters - 1
                                             rounds of rows and columns, each sum + eps): doubly stochastic
    X'_k = post_k out + sum_j comb_jk X_j

so the streams' own mixing is a convex combination (its norm does not grow with depth). The
embedding starts every stream at the token's embedding (`expand`); before the final norm the
`HyperHead`'s pre weights fold them into one (`fold`). Everything here runs in float32.

Shapes (n streams, D = d_model, m = (2 + n) n mixes; the block stacks a layer axis in front):

    w      [n, D, m]   the projection of the normalised streams (transformers' fn [m, n D], transposed)
    bias   [m]         (transformers' base)
    scale  [3]         pre's, post's and comb's scales
    the head's: w [n, D, n], bias [n], scale [1]
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.info import matrix, vector
from spmdgpt.model.layers import rms_normalize

F32 = jnp.float32
Array = jax.Array


class Hyper(NamedTuple):
    w: Array  # [n, D, mixes]
    bias: Array  # [mixes]
    scale: Array  # [3] (a block's: pre, post, comb) or [1] (the head's: pre)


def hyper_info(cfg: ModelConfig, head: bool = False) -> Optional[Hyper]:
    """One block's hyper-connection around a branch (head=True: the final fold's), or None
    without model.hyper_connections."""
    n, D = cfg.hyper_connections, cfg.d_model
    if not n:
        return None
    m = n if head else (2 + n) * n
    return Hyper(w=matrix((n, D, m), ("hyper", "embed", "hyper_mix"), ("hyper", "embed"), ("hyper_mix",),
                          cfg.init_std),
                 bias=vector((m,), ("hyper_mix",)),
                 scale=vector((1 if head else 3,), ("hyper_scale",), "ones"))


def expand(cfg: ModelConfig, rules: Rules, x: Array) -> Array:
    """The embedding [tokens, D] -> the n streams [tokens, n, D], each a copy of it (unchanged
    without model.hyper_connections)."""
    n = cfg.hyper_connections
    if not n:
        return x
    return jnp.broadcast_to(x[:, None], (x.shape[0], n, x.shape[1]), out_sharding=rules.spec("stream", None, "embed"))


def _mixes(cfg: ModelConfig, rules: Rules, p: Hyper, x: Array) -> Array:
    """The streams x [tokens, n, D] normalised over all n D and projected: [tokens, mixes] float32."""
    x32 = x.astype(F32)
    flat = rms_normalize(x32, cfg.norm_eps, axes=(-2, -1))
    w = rules.gather(p.w.astype(F32), ("hyper", "embed", "hyper_mix"))
    return jnp.einsum("tnd,ndm->tm", flat, w, out_sharding=rules.spec("stream", None))


def sinkhorn(cfg: ModelConfig, comb: Array) -> Array:
    """[..., n, n] positive -> nearly doubly stochastic: its columns normalised, then
    model.hyper_sinkhorn_iters - 1 rounds of rows and columns (each sum + model.hyper_eps)."""
    eps = cfg.hyper_eps
    comb = comb / (jnp.sum(comb, axis=-2, keepdims=True) + eps)

    def round_(c, _):
        c = c / (jnp.sum(c, axis=-1, keepdims=True) + eps)
        return c / (jnp.sum(c, axis=-2, keepdims=True) + eps), None

    return jax.lax.scan(round_, comb, None, length=cfg.hyper_sinkhorn_iters - 1)[0]


def weights(cfg: ModelConfig, rules: Rules, p: Hyper, x: Array) -> tuple[Array, Array, Array]:
    """(pre [tokens, n], post [tokens, n], comb [tokens, n, n]) of the streams x [tokens, n, D]."""
    n = cfg.hyper_connections
    s = p.scale.astype(F32)
    scale = jnp.concatenate([jnp.full((n,), s[0]), jnp.full((n,), s[1]), jnp.full((n * n,), s[2])])
    mixes = _mixes(cfg, rules, p, x) * scale + p.bias.astype(F32)
    pre = jax.nn.sigmoid(mixes[:, :n]) + cfg.hyper_eps
    post = 2.0 * jax.nn.sigmoid(mixes[:, n:2 * n])
    comb = jax.nn.softmax(jnp.reshape(mixes[:, 2 * n:], (-1, n, n)), axis=-1) + cfg.hyper_eps
    return pre, post, sinkhorn(cfg, comb)


def collapse(rules: Rules, pre: Array, x: Array) -> Array:
    """sum_j pre_j x_j: [tokens, n] x [tokens, n, D] -> [tokens, D] float32."""
    return jnp.einsum("tn,tnd->td", pre, x.astype(F32), out_sharding=rules.spec("stream", "embed"))


def merge(rules: Rules, post: Array, comb: Array, out: Array, x: Array) -> Array:
    """The streams after a branch: post_k out + sum_j comb_jk x_j -> [tokens, n, D] float32."""
    mixed = jnp.einsum("tjk,tjd->tkd", comb, x.astype(F32), out_sharding=rules.spec("stream", None, "embed"))
    out = jax.sharding.reshard(out.astype(F32), rules.spec("stream", "embed"))
    return mixed + post[:, :, None] * out[:, None]


def around(cfg: ModelConfig, rules: Rules, p: Hyper, x: Array, branch) -> tuple:
    """A branch run between hyper-connected streams x [tokens, n, D]: branch(its input [tokens, D])
    -> (out, *rest); returns (the streams after it, out, *rest)."""
    pre, post, comb = weights(cfg, rules, p, x)
    out, *rest = branch(collapse(rules, pre, x))
    return (merge(rules, post, comb, out, x), out, *rest)


def fold(cfg: ModelConfig, rules: Rules, p: Optional[Hyper], x: Array) -> Array:
    """The streams [tokens, n, D] -> [tokens, D] by the head's pre weights (sigmoid + eps),
    before the final norm; x unchanged without model.hyper_connections (p None)."""
    if p is None:
        return x
    pre = jax.nn.sigmoid(_mixes(cfg, rules, p, x) * p.scale.astype(F32) + p.bias.astype(F32)) + cfg.hyper_eps
    return collapse(rules, pre, x)


# ----------------------------------------------------------------------------- configuration checks

DEFAULT_ITERS, DEFAULT_EPS = 20, 1e-6


def config_errors(m) -> List[str]:
    """model.hyper_connections and its Sinkhorn-Knopp fields, and what they do not combine with yet."""
    n = m.hyper_connections
    if n < 0:
        return [f"model.hyper_connections={n} must be >= 0 (0 = one plain residual stream; DeepSeek-V4: 4)"]
    if not n:
        changed = [f"model.{name}" for name, default in (("hyper_sinkhorn_iters", DEFAULT_ITERS),
                                                         ("hyper_eps", DEFAULT_EPS)) if getattr(m, name) != default]
        return [f"{', '.join(changed)} set without model.hyper_connections; set model.hyper_connections=n "
                "(DeepSeek-V4: 4) or leave them at their defaults"] if changed else []
    errs: List[str] = []
    if m.hyper_sinkhorn_iters < 1:
        errs.append(f"model.hyper_sinkhorn_iters={m.hyper_sinkhorn_iters} must be >= 1 (DeepSeek-V4: 20)")
    if not 0 <= m.hyper_eps < 1:  # (1e300 trained to a NaN loss at step 1)
        errs.append(f"model.hyper_eps={m.hyper_eps} must be in [0, 1) (DeepSeek-V4: 1e-6)")
    for bad, name, fix in ((m.mtp_depth, "model.mtp_depth", "0"),
                           (m.parametrization.value != "standard", "model.parametrization", "standard"),
                           (m.per_layer_dim, "model.per_layer_dim", "0"),  # (Gemma 4's: one residual stream)
                           (m.kv_shared_layers, "model.kv_shared_layers", "0")):
        if bad:
            errs.append(f"model.hyper_connections={n} and {name} do not combine yet; set {name}={fix}")
    return errs
