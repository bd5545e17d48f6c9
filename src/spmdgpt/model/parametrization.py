"""How a model's hyperparameters scale from the shape they were tuned at (`model.parametrization`):
standard, μP (Yang et al. 2022, "Tensor Programs V") and CompleteP (Dey et al. 2025: μP plus
residual branches scaled with depth), so that a learning rate tuned on a small model holds on a
wide or deep one.

The base shape is the model's own config with d_model = model.base_width (and, for completep,
num_layers = model.base_depth). Each parameter is compared with its twins in the base model and in
a model twice as wide, much as the `mup` package compares base shapes: a matrix axis whose size
differs in the wide twin grows with the width. Then, with m = the matrix's fan-in over its base
twin's (AdamW; `ParamInfo.std` and `ParamInfo.lr_scale`):

    hidden matrix   (fan-in and fan-out grow: q/k/v, output, MLP)   init std / sqrt(m), learning rate / m
    readout         (fan-in grows, fan-out fixed: unembedding, router) init std / m,    learning rate / m
    everything else (embedding, norms, biases)                        unchanged

The readout's rule is μP's output multiplier 1/m moved into the weight (for Adam, a forward
multiplier c is the same as an init c times larger and a learning rate c times larger), so the
forward pass has no multiplier and an exported model is the trained one; a tied embedding cannot
take both rules, so μP needs model.tie_embeddings=false. The attention scores are scaled by
1 / head_dim (μP) in the form sqrt(base head_dim) / head_dim, which is the usual 1 / sqrt(head_dim)
at the base shape and unchanged when the model widens by heads of a fixed head_dim.

CompleteP adds, with L = num_layers, L0 = base_depth and alpha = model.depth_alpha (1 for
CompleteP, 0.5 for depth-μP): each residual branch (attention's and the MLP's output) times
(L0 / L)^alpha, hidden matrices' learning rate times (L / L0)^(alpha - 1), and the residual
projections' init std that of the base depth (GPT-2's init_std / sqrt(2 L0)), so that the branch
multiplier alone carries the depth.

At the base shape every rule is the identity: a mup or completep model there is the standard
model, bitwise. Muon's hidden matrices keep Muon's own rate (its update is orthogonalised and
scaled by the matrix's shape already); μP's multipliers reach the parameters AdamW governs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List

import jax

from spmdgpt.config import ModelConfig, Parametrization, head_dim
from spmdgpt.config.validate import whole_width
from spmdgpt.model.info import by_name, is_info

STANDARD = Parametrization.standard


def base_config(m: ModelConfig) -> ModelConfig:
    """The base shape's model config: d_model = base_width (completep: num_layers = base_depth),
    standard parametrization (what the twins' init stds are read from)."""
    depth = m.base_depth if m.parametrization == Parametrization.completep and m.base_depth else m.num_layers
    return dataclasses.replace(m, d_model=m.base_width or m.d_model, num_layers=depth, parametrization=STANDARD,
                               base_width=None, base_depth=None, base_head_dim=None)


def depth_of(m: ModelConfig) -> float:
    """num_layers over the base depth (1 unless completep)."""
    if m.parametrization != Parametrization.completep:
        return 1.0
    return m.num_layers / (m.base_depth or m.num_layers)


def branch_multiplier(m: ModelConfig) -> float:
    """Each residual branch's output multiplier: (base_depth / num_layers)^depth_alpha under
    completep, else 1."""
    return depth_of(m) ** -m.depth_alpha


def attention_factor(m: ModelConfig) -> float:
    """The queries' extra factor sqrt(base head_dim / head_dim): scores scaled by
    sqrt(base head_dim) / head_dim instead of 1 / sqrt(head_dim) (μP); 1 under standard. The base
    head_dim: model.base_head_dim, else the base shape's (base_width / num_heads). A width grown by
    heads of the same width (model.size) keeps the scale: 1."""
    if m.parametrization == STANDARD:
        return 1.0
    return math.sqrt((m.base_head_dim or head_dim(base_config(m))) / head_dim(m))


def parametrized(m: ModelConfig, info, info_of):
    """The ParamInfo tree `info` (the model's) with μP's init stds and AdamW learning-rate
    multipliers. `info_of(config)` gives a config's standard tree: each leaf is read against its
    twin in the base shape's (the fan-in ratio) and in a twice-as-wide model's (which of its axes
    grow with the width). Standard: `info` unchanged."""
    if m.parametrization == STANDARD:
        return info
    depth_lr = depth_of(m) ** (m.depth_alpha - 1)
    base = by_name(info_of(base_config(m)), is_leaf=is_info)
    wide = by_name(info_of(dataclasses.replace(base_config(m), d_model=2 * m.d_model,
                                               num_layers=m.num_layers)), is_leaf=is_info)

    def one(name, i):
        b, w = base.get(name), wide.get(name)
        if b is None or w is None or not i.fan_in:
            return i
        grows = [i.shape[a] != w.shape[a] for a in range(len(i.shape))]
        if not any(grows[a] for a in i.axes(i.fan_in)):
            return i  # (an input matrix: its fan-in is fixed)
        fan_in = math.prod(i.shape[a] for a in i.axes(i.fan_in)) / math.prod(b.shape[a] for a in b.axes(b.fan_in))
        if any(grows[a] for a in i.axes(i.fan_out)):  # hidden
            return dataclasses.replace(i, std=i.std / math.sqrt(fan_in), lr_scale=depth_lr / fan_in)
        return dataclasses.replace(i, std=i.std / fan_in, lr_scale=1.0 / fan_in)  # readout

    # (each leaf's twins by name: the trees may differ in structure, e.g. an MoE's dense layers)
    named = by_name(info, is_leaf=is_info)
    flat, tree = jax.tree_util.tree_flatten(info, is_leaf=is_info)
    return jax.tree_util.tree_unflatten(tree, [one(n, i) for n, i in zip(named, flat, strict=True)])


def config_errors(m: ModelConfig) -> List[str]:
    """model.parametrization and its base shape."""
    errs = []
    for name in ("base_width", "base_depth", "base_head_dim"):
        if getattr(m, name) is not None and not getattr(m, name) > 0:
            errs.append(f"model.{name}={getattr(m, name)} must be > 0, or null for the model's own")
    if not m.depth_alpha > 0:
        errs.append(f"model.depth_alpha={m.depth_alpha} must be > 0 (CompleteP: 1, depth-μP: 0.5)")
    if m.parametrization == STANDARD or errs:
        return errs
    p = f"model.parametrization={m.parametrization.value}"
    if m.tie_embeddings:
        errs.append(f"{p} needs model.tie_embeddings=false (μP's readout rule is the unembedding's own init and "
                    "learning rate, which a tied embedding cannot take)")
    if m.mla.kv_rank:
        errs.append(f"{p} with model.mla.kv_rank={m.mla.kv_rank}: MLA's attention scale has no μP rule here yet; "
                    "use standard attention or model.parametrization=standard")
    base = base_config(m)
    if m.head_dim is None and m.num_heads > 0 and base.d_model % m.num_heads:
        errs.append(f"model.base_width={base.d_model} is not divisible by model.num_heads={m.num_heads} (the base "
                    "shape keeps the heads); choose a multiple of num_heads, or give model.head_dim")
    elif m.head_dim is None and m.num_heads > 0 and (base.d_model // m.num_heads) % 2:
        errs.append(f"model.base_width={base.d_model} / model.num_heads={m.num_heads} is odd (RoPE rotates pairs); "
                    "choose a base width whose head dimension is even")
    whole_width(errs, "model.mlp_factor", m.mlp_factor, base.d_model, "MLP", width="model.base_width")
    return errs


def folded(m: ModelConfig, params):
    """`params` (host arrays) with the forward pass's μP / CompleteP multipliers folded into the
    weights, for a model that computes without them (Hugging Face, the web page): the queries'
    `attention_factor` into the q projection and its bias (under the QK-norm: into its learned
    query scale), each residual branch's `branch_multiplier` into the attention output and MLP
    down projections and their biases (under model.post_norms: into the post-norms). A
    ConfigError names what cannot be folded. Standard, or every multiplier 1: `params` itself."""
    import numpy as np

    from spmdgpt.config import ConfigError

    f, c = attention_factor(m), branch_multiplier(m)
    if f == 1.0 and c == 1.0:
        return params
    p = f"model.parametrization={m.parametrization.value}"
    if f != 1.0 and m.qk_norm and not m.qk_norm_scale:
        raise ConfigError([f"{p}: its attention scale (x {f:.4g}) cannot be folded into a QK-norm without a learned "
                           "scale; export needs model.qk_norm_scale=true, or a base shape of the same head_dim"])
    if c != 1.0 and m.moe.num_experts:
        raise ConfigError([f"{p}: the branch multiplier (x {c:.4g}) of a mixture of experts is not folded into its "
                           "experts yet; export needs model.num_layers equal to model.base_depth"])

    def times(a, k, plus_one=False):  # (a norm's scale stored as w, multiplying by 1 + w: k(1 + w) - 1)
        a = np.asarray(a)
        return (a * k).astype(a.dtype) if not plus_one else ((1 + a) * k - 1).astype(a.dtype)

    def blocks(b):
        if b is None:
            return None
        attn, mlp = b.attn, b.mlp
        if f != 1.0:
            if m.qk_norm:
                attn = attn._replace(q_norm=times(attn.q_norm, f, m.norm_plus_one))
            elif hasattr(attn, "w_qkv"):  # (fused q/k/v: [layers, d, 3, heads, head_dim], q at index 0)
                attn = attn._replace(w_qkv=np.asarray(attn.w_qkv).copy(),
                                     b_qkv=None if attn.b_qkv is None else np.asarray(attn.b_qkv).copy())
                attn.w_qkv[:, :, 0] *= f
                if attn.b_qkv is not None:
                    attn.b_qkv[:, 0] *= f
            else:
                attn = attn._replace(w_q=times(attn.w_q, f), b_q=None if attn.b_q is None else times(attn.b_q, f))
        out = b._replace(attn=attn, mlp=mlp)
        if c == 1.0:
            return out
        if b.ln_post_attn is not None:  # (model.post_norms: the branch is normed, then multiplied)
            if b.ln_post_attn.scale is None:
                raise ConfigError(["model.norm_scale=false with model.post_norms: the branch multiplier has no "
                                   "norm scale to fold into; export needs model.norm_scale=true"])
            post = [n._replace(scale=times(n.scale, c, m.norm_plus_one),
                               bias=None if n.bias is None else times(n.bias, c))
                    for n in (b.ln_post_attn, b.ln_post_mlp)]
            return out._replace(ln_post_attn=post[0], ln_post_mlp=post[1])
        attn = attn._replace(w_o=times(attn.w_o, c), b_o=None if attn.b_o is None else times(attn.b_o, c))
        mlp = mlp._replace(w_down=times(mlp.w_down, c), b_down=None if mlp.b_down is None else times(mlp.b_down, c))
        return out._replace(attn=attn, mlp=mlp)

    return params._replace(blocks=blocks(params.blocks), dense_blocks=blocks(params.dense_blocks))
