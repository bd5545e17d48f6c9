"""The model's two ends: the token embedding into the residual stream, and the output head
(the unembedding and the numerics of its logits: float32 or compute-dtype GEMM outputs,
soft-capping, the rows the loss gathers)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from spmdgpt.config import DType, ModelConfig
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import fp8
from spmdgpt.model.context import flatten
from spmdgpt.model.layers import rms_normalize
from spmdgpt.model.params import Params

Array = jax.Array


def embed(cfg: ModelConfig, rules: Rules, params: Params, tokens: Array) -> Array:
    """tokens [b, t] -> the residual stream [b * t, d], float32 whatever the compute dtype.

    The residual stream is 2-D (matmuls on [tokens, features] operands compile to much faster
    kernels on CPU than 3-D ones) and float32: each block's norm hands its matmuls the compute
    dtype and their outputs are added back in float32, as PyTorch's autocast does (a bfloat16
    sum of 2L branch outputs keeps 8 significant bits). A no-op for float32 compute."""
    table = rules.gather(params.embed.astype(jnp.float32), (None, "embed"))
    x = table.at[flat_tokens(rules, tokens)].get(out_sharding=rules.spec("stream", "embed"))
    if cfg.embed_norm:  # (nanochat: x / RMS(x), no parameters)
        x = rms_normalize(x, cfg.norm_eps)
    return x * jnp.float32(cfg.d_model ** 0.5) if cfg.embed_scale else x  # (Gemma: the embedding x sqrt(d))


def flat_tokens(rules: Rules, tokens: Array) -> Array:
    """tokens [b, t] -> [b * t] in the residual stream's order (what `embed` reads)."""
    return flatten(rules, jax.sharding.reshard(tokens, rules.spec("batch", "seq")))


def float32_matmul(eq: str, spec, x: Array, w: Array) -> Array:
    """einsum(eq, x, w) with a float32 result, whose backward pass casts the float32 cotangent
    to x's dtype first: with bfloat16 compute both backward matmuls stay bfloat16 GEMMs (as with
    autocast) instead of float32/TF32 ones. On an H100 the unembedding's two TF32 backward GEMMs
    took 7.9 ms of a 42 ms GPT-2 124M step (benchmarks/BENCHMARKS.md). Float32 inputs take the
    plain einsum (nothing to cast)."""
    def plain(x, w):
        return jnp.einsum(eq, x, w, out_sharding=spec, preferred_element_type=jnp.float32)

    if x.dtype == jnp.float32:
        return plain(x, w)
    matmul = jax.custom_vjp(plain)

    def fwd(x, w):
        return matmul(x, w), (x, w)

    def bwd(res, g):
        x, w = res
        _, vjp = jax.vjp(lambda x, w: jnp.einsum(eq, x, w, out_sharding=spec), x, w)
        return vjp(g.astype(x.dtype))

    matmul.defvjp(fwd, bwd)
    return matmul(x, w)


def softcap(cfg: ModelConfig, logits: Array) -> Array:
    """model.logit_softcap=c: c * tanh(logits / c), every logit inside (-c, c) (Gemma 2; the
    modded-nanogpt speedrun uses it too); c = 0: unchanged."""
    c = cfg.logit_softcap
    return logits if not c else c * jnp.tanh(logits / c)


def logits_matmul(cfg: ModelConfig, eq: str, spec, x: Array, w: Array) -> Array:
    """The unembedding matmul einsum(eq, x, w) -> float32 logits. model.logits_dtype=float32: a
    float32 result (`float32_matmul`); the compute dtype: the GEMM writes the logits in it (as
    under autocast) and they are widened to float32 where they are read (XLA fuses the cast into
    the loss's reductions), so the [tokens, vocab] array in memory has half the bytes.
    model.fp8_head: an FP8 product (`fp8.fp8_einsum`, current scaling: each block of logits its
    own scales) that writes the logits in the compute dtype."""
    if fp8.in_head(cfg):
        return fp8.fp8_einsum(eq, spec, x.dtype, x, w).astype(jnp.float32)
    if cfg.logits_dtype == DType.float32:
        return float32_matmul(eq, spec, x, w)
    return jnp.einsum(eq, x, w, out_sharding=spec).astype(jnp.float32)


def unembed(cfg: ModelConfig, rules: Rules, params: Params, x: Array) -> Array:
    """x [tokens, d] -> float32 logits [tokens, vocab] (vocab sharded by the `vocab` rule),
    soft-capped by model.logit_softcap."""
    out = rules.spec("tokens", "vocab")
    if params.unembed is None:
        w = rules.gather(params.embed.astype(x.dtype), ("vocab", "embed"))
        return softcap(cfg, logits_matmul(cfg, "td,vd->tv", out, x, w))
    w = rules.gather(params.unembed.astype(x.dtype), ("embed", "vocab"))
    return softcap(cfg, logits_matmul(cfg, "td,dv->tv", out, x, w))


def unembedding_rows(cfg: ModelConfig, rules: Rules, params: Params, ids: Array, dtype) -> Array:
    """The unembedding vectors of token ids [tokens] -> [tokens, d] in `dtype` (rows of the tied
    embedding, or columns of the separate unembedding).

    The rows are gathered from the float32 table and cast afterwards, so that the backward
    pass's scatter-add into the table adds in float32 even with bfloat16 compute (the same
    values forward). A bfloat16 scatter-add has no hardware atomic on GPUs: on an H100 it made a
    GPT-2 124M step on real text (whose frequent tokens hit the same rows) 17% slower than on
    random tokens (benchmarks/BENCHMARKS.md, GPU)."""
    if params.unembed is None:
        table = rules.gather(params.embed.astype(jnp.float32), (None, "embed"))
    else:
        table = rules.gather(params.unembed.astype(jnp.float32), ("embed", None)).T
    return table.at[ids].get(out_sharding=rules.spec("tokens", "embed")).astype(dtype)
