"""Per-layer input embeddings (`model.per_layer_dim` = P > 0; Gemma 4 E2B's and E4B's): every
layer adds to the residual stream a gated projection of an input of its own, P wide, made once
from the tokens and the embedding.

Shapes (V vocabulary, D = d_model, L layers):

    PerLayerInputs (Params.per_layer, once)
      embed  [V, L, P]   a second embedding table: each token's P-wide slice for every layer
                         (embed_tokens_per_layer), times sqrt(P)
      proj   [D, L, P]   the embedding's projection to every layer's slice (per_layer_model_projection),
                         times D^-0.5, then RMS-normed over P with `norm` [P] (per_layer_projection_norm)
    the layer inputs: (table slice + normed projection) x 2^-0.5, [L, tokens, P]

    PerLayerGate (Block.per_layer, each layer)
      w_gate [D, P]      the residual stream's gate (per_layer_input_gate), through the tanh GELU,
                         times the layer's input
      w_out  [P, D]      back to the stream (per_layer_projection), RMS-normed with `norm` [D]
                         (post_per_layer_input_norm) and added to it after the MLP's residual add
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.context import flatten
from spmdgpt.model.info import ParamInfo, matrix, residual_std, vector
from spmdgpt.model.layers import Norm, dtype_of, norm, rms_normalize
from spmdgpt.model.mlp import gelu_tanh

Array = jax.Array
F32 = jnp.float32


class PerLayerInputs(NamedTuple):
    embed: Array
    proj: Array
    norm: Array  # [P] the projection's RMSNorm scale


class PerLayerGate(NamedTuple):
    w_gate: Array
    w_out: Array
    norm: Norm  # [D] the output's RMSNorm (model.norm's kind)


def inputs_info(cfg: ModelConfig) -> PerLayerInputs:
    V, D, L, P = cfg.vocab_size, cfg.d_model, cfg.num_layers, cfg.per_layer_dim
    return PerLayerInputs(
        embed=ParamInfo((V, L, P), ("vocab", "layer_inputs", "per_layer"), "normal", cfg.init_std),  # (as `embed`)
        proj=matrix((D, L, P), ("embed", "layer_inputs", "per_layer"), ("embed",), ("per_layer",), cfg.init_std),
        norm=vector((P,), ("per_layer",), "ones"),
    )


def gate_info(cfg: ModelConfig) -> PerLayerGate:
    D, P = cfg.d_model, cfg.per_layer_dim
    return PerLayerGate(
        w_gate=matrix((D, P), ("embed", "per_layer"), ("embed",), ("per_layer",), cfg.init_std),
        w_out=matrix((P, D), ("per_layer", "embed"), ("per_layer",), ("embed",), residual_std(cfg)),
        norm=Norm(vector((D,), ("embed",), "ones"), None),
    )


def layer_inputs(cfg: ModelConfig, rules: Rules, p: PerLayerInputs, tokens: Array, x: Array) -> Array:
    """Every layer's input [L, tokens, P] (float32) of tokens [b, t] (as `head.embed` reads them: in
    the context order) and the embedding x [b * t, D] (`head.embed`'s, scaled)."""
    D, P = cfg.d_model, cfg.per_layer_dim
    table = rules.gather(p.embed.astype(dtype_of(cfg.compute_dtype)), (None, None, None))  # (the compute dtype's
    # copy: the table is layers x P wide, E4B's 42 x 256)
    flat = flatten(rules, jax.sharding.reshard(tokens, rules.spec("batch", "seq")))
    own = table.at[flat].get(out_sharding=rules.spec("stream", None, None)).astype(F32) * F32(P ** 0.5)
    proj = jnp.einsum("td,dlp->tlp", x.astype(F32), rules.gather(p.proj.astype(F32), (None, None, None)),
                      out_sharding=rules.spec("stream", None, None)) * F32(D ** -0.5)
    proj = rms_normalize(proj, cfg.norm_eps, rules.gather(p.norm.astype(F32), (None,)))
    return jnp.transpose((proj + own) * F32(2 ** -0.5), (1, 0, 2))


def gated(cfg: ModelConfig, rules: Rules, p: PerLayerGate, x: Array, inputs: Array) -> Array:
    """What a layer adds to the residual stream x [stream, D] from its input [stream, P]."""
    dt = dtype_of(cfg.compute_dtype)
    g = jnp.einsum("td,dp->tp", x.astype(dt), rules.gather(p.w_gate.astype(dt), (None, None)),
                   out_sharding=rules.spec("stream", None))
    h = gelu_tanh(g) * inputs.astype(dt)
    out = jnp.einsum("tp,pd->td", h, rules.gather(p.w_out.astype(dt), (None, None)),
                     out_sharding=rules.spec("stream", "embed"))
    return norm(cfg, rules, p.norm, out)
