"""FP8 matmuls (`model.matmul_dtype=fp8`): the attention projections' and the dense MLPs' matmuls
(every `collective.matmuls_in` / `matmul_out` einsum) with per-tensor scales.

Forward: the input x and the weight w are each scaled by s = amax / max, clipped to the format's
range (e4m3: +-448; it has no infinity, so an unclipped overflow would be NaN) and cast to
float8_e4m3fn; the einsum of the two FP8 operands accumulates in float32 and is multiplied by
s_x s_w. Backward (`jax.custom_vjp`): the output's cotangent g is scaled the same way into
float8_e5m2 (+-57344: the gradients' wider range), and both backward products are FP8 einsums too,
dx = g w^T (e5m2 x e4m3) and dw = x^T g (e4m3 x e5m2), reusing the forward's quantized x and w.
Master weights, optimizer state, norms, softmax and the loss stay as they are; the output head
too, unless model.fp8_head (`head.logits_matmul`: current scaling, the logits in the compute dtype).

Where amax comes from (`model.fp8_scaling`):

    current  the tensor's own largest |value| (over every device: under FSDP or tensor
             parallelism the max is reduced across the sharded axes, so every device uses the
             scale one device would): a reduction over the tensor before its cast.
    delayed  the largest of the last model.fp8_history steps' amaxes (Transformer Engine's
             DelayedScaling, Flax's Fp8DotGeneralOp; Micikevicius et al. 2022, "FP8 formats for
             deep learning"): the cast needs no reduction first, and each tensor's amax is recorded
             as it is cast. The histories are parameters of the units (`fp8_amax` [sites, 3, H]
             per layer: a row each for x, w and g of each FP8 matmul, newest first; zero-initialised,
             weight decay off, a zero gradient for the optimizer) that the step overwrites: the
             product's custom derivative returns the updated history as the history's "gradient"
             (the gradient's amax is only seen in the backward), gradient accumulation keeps the
             largest over its microbatches (`combined`), and `train_step` moves it from the
             gradients into the parameters (`record_histories`). A fresh history scales by 1 (both
             Transformer Engine and Flax start so) until its first step is recorded; a non-finite
             amax is recorded as 0 (left out of the max). Checkpoints hold the histories with the
             parameters, so a resumed run scales exactly as the uninterrupted one.

On Hopper, XLA compiles an einsum of FP8 operands as an FP8 GEMM (the compute-only H100 step's
optimized HLO: its dots take f8e4m3fn / f8e5m2 operands, `tests/test_fp8.py`); on CPUs it runs
as a float32 product of the FP8 values (the numerics, not the speed).
"""
from __future__ import annotations

from functools import partial
from typing import List, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import Config, ModelConfig
from spmdgpt.model.info import ParamInfo, path_name, vector

E4M3, E5M2 = jnp.float8_e4m3fn, jnp.float8_e5m2
E4M3_MAX, E5M2_MAX = 448.0, 57344.0


HISTORY = "fp8_amax"  # the units' field of delayed scaling's amax histories [(layers,) sites, 3, history]
F32 = jnp.float32


def cast(a: jax.Array, scale: jax.Array, dtype, largest: float) -> jax.Array:
    """a / scale, clipped to +-largest, in `dtype` (float32 arithmetic)."""
    return jnp.clip(a.astype(F32) / scale, -largest, largest).astype(dtype)


def amax(a: jax.Array) -> jax.Array:
    return jnp.max(jnp.abs(a.astype(F32)))


def scale_of(largest_seen: jax.Array, largest: float) -> jax.Array:
    """The scale that maps largest_seen to the format's largest value (1 when nothing was seen)."""
    return jnp.where(largest_seen > 0, largest_seen / largest, 1.0)


def quantize(a: jax.Array, dtype, largest: float) -> tuple[jax.Array, jax.Array]:
    """(a / s in `dtype`, s): current scaling, s = max|a| / largest (1 for an all-zero a), the
    values clipped to +-largest; float32 arithmetic."""
    scale = scale_of(amax(a), largest)
    return cast(a, scale, dtype, largest), scale


def _sharding(a: jax.Array):
    """a's PartitionSpec under a mesh (the backward products' layouts: their primals'), else None."""
    s = jax.typeof(a).sharding
    return s.spec if s.mesh.axis_names else None


def _product(eq, out, qx, qw):
    return jnp.einsum(eq, qx, qw, preferred_element_type=F32, out_sharding=out)


def _gradients(eq, dtype, qx, sx, qw, sw, qg, sg):
    """(dx, dw) of the product from the FP8 operands and the FP8 cotangent, scaled back."""
    ins, o = eq.split("->")
    a, b = ins.split(",")
    dx = jnp.einsum(f"{o},{b}->{a}", qg, qw, preferred_element_type=F32, out_sharding=_sharding(qx))
    dw = jnp.einsum(f"{a},{o}->{b}", qx, qg, preferred_element_type=F32, out_sharding=_sharding(qw))
    return (dx * (sg * sw)).astype(dtype), (dw * (sx * sg)).astype(dtype)


@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def fp8_einsum(eq: str, out, dtype, x: jax.Array, w: jax.Array) -> jax.Array:
    """jnp.einsum(eq, x, w) (two operands, "xs,ws->outs", every index of x in w or the output)
    as an FP8 product scaled back (current scaling), in `dtype`, laid out as `out` (a
    PartitionSpec)."""
    return _forward(eq, out, dtype, x, w)[0]


def _forward(eq, out, dtype, x, w):
    qx, sx = quantize(x, E4M3, E4M3_MAX)
    qw, sw = quantize(w, E4M3, E4M3_MAX)
    return (_product(eq, out, qx, qw) * (sx * sw)).astype(dtype), (qx, sx, qw, sw)


def _backward(eq, out, dtype, res, g):
    qg, sg = quantize(g, E5M2, E5M2_MAX)
    return _gradients(eq, dtype, *res, qg, sg)


fp8_einsum.defvjp(_forward, _backward)


@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def delayed_einsum(eq: str, out, dtype, x: jax.Array, w: jax.Array, history: jax.Array) -> jax.Array:
    """`fp8_einsum` with delayed scaling: x's, w's and the cotangent's scales from the largest
    amax of their rows of `history` [3, H] (x, w, g; newest first). Its derivative with respect to
    the history is the history updated: this step's three amaxes in front, the oldest dropped."""
    return _delayed_forward(eq, out, dtype, x, w, history)[0]


def _delayed_forward(eq, out, dtype, x, w, history):
    sx, sw, sg = (scale_of(m, big) for m, big in
                  zip(jnp.max(history.astype(F32), axis=1), (E4M3_MAX, E4M3_MAX, E5M2_MAX)))
    qx, qw = cast(x, sx, E4M3, E4M3_MAX), cast(w, sw, E4M3, E4M3_MAX)
    y = (_product(eq, out, qx, qw) * (sx * sw)).astype(dtype)
    return y, (qx, sx, qw, sw, sg, amax(x), amax(w), history)


def _delayed_backward(eq, out, dtype, res, g):
    qx, sx, qw, sw, sg, ax, aw, history = res
    dx, dw = _gradients(eq, dtype, qx, sx, qw, sw, cast(g, sg, E5M2, E5M2_MAX), sg)
    seen = jnp.stack([ax, aw, amax(g)])
    seen = jnp.where(jnp.isfinite(seen), seen, 0.0)
    return dx, dw, jnp.concatenate([seen[:, None], history[:, :-1].astype(F32)], axis=1).astype(history.dtype)


delayed_einsum.defvjp(_delayed_forward, _delayed_backward)


def einsum(rules, eq: str, x: jax.Array, w: jax.Array, out, history: Optional[jax.Array] = None) -> jax.Array:
    """The model's projection einsum: FP8 under model.matmul_dtype=fp8 (`rules.fp8`), with
    delayed scaling when given this matmul's amax history [3, H], else plain."""
    if history is not None:
        return delayed_einsum(eq, out, x.dtype, x, w, history)
    if getattr(rules, "fp8", False):
        return fp8_einsum(eq, out, x.dtype, x, w)
    return jnp.einsum(eq, x, w, out_sharding=out)


def in_head(cfg: ModelConfig) -> bool:
    """model.fp8_head with model.matmul_dtype=fp8: the output head's products in FP8 too."""
    return cfg.fp8_head and cfg.matmul_dtype.value == "fp8"


# ----------------------------------------------------------------------------- the amax histories


def history_info(cfg: ModelConfig, sites: int) -> Optional[ParamInfo]:
    """A unit's `fp8_amax` parameter under delayed scaling (one layer's: [sites, 3, H], its FP8
    matmuls' histories in the unit's order: the input projections, then the output one), else
    None."""
    if cfg.matmul_dtype.value != "fp8" or cfg.fp8_scaling.value != "delayed":
        return None
    return vector((sites, 3, cfg.fp8_history), (None, None, None))


def is_history(path) -> bool:
    return getattr(path[-1], "name", None) == HISTORY


def accumulate(path, total: jax.Array, g: jax.Array) -> jax.Array:
    """Gradient accumulation's sum of a leaf's gradients over the microbatches: a history's
    "gradient" (the updated history) the largest of them, elementwise."""
    return jnp.maximum(total, g.astype(total.dtype)) if is_history(path) else total + g.astype(total.dtype)


def averaged(path, total: jax.Array, k: int) -> jax.Array:
    return total if is_history(path) else total / k


def split_histories(grads) -> tuple:
    """(grads with zeros at the amax histories, {name: updated history}: empty without delayed
    scaling): what the optimizer sees, and what `record_histories` writes into the parameters."""
    histories = {path_name(p): g for p, g in jax.tree_util.tree_flatten_with_path(grads)[0] if is_history(p)}
    if not histories:
        return grads, {}
    zeroed = jax.tree_util.tree_map_with_path(lambda p, g: jnp.zeros_like(g) if is_history(p) else g, grads)
    return zeroed, histories


def record_histories(params, histories: dict):
    """params with each amax history replaced by its updated one (`split_histories`)."""
    if not histories:
        return params
    return jax.tree_util.tree_map_with_path(
        lambda p, x: histories[path_name(p)].astype(x.dtype) if is_history(p) else x, params)


INPUTS = slice(0, -1)  # a unit's input projections' histories (its output projection's: -1)


def sites(history: Optional[jax.Array], which) -> Optional[jax.Array]:
    """A unit's histories of some of its FP8 matmuls, `INPUTS` or -1 (None without delayed
    scaling)."""
    return None if history is None else history[which]


def config_errors(cfg: Config) -> List[str]:
    """model.matmul_dtype=fp8, its scaling, and what it cannot be combined with yet."""
    m = cfg.model
    delayed = m.fp8_scaling.value == "delayed"
    if m.matmul_dtype.value != "fp8":
        return [f"model.{name} is for FP8 matmuls, and model.matmul_dtype={m.matmul_dtype.value} has none; set "
                f"model.matmul_dtype=fp8 or {fix}" for name, bad, fix in
                (("fp8_scaling=delayed", delayed, "model.fp8_scaling=current"),
                 ("fp8_head=true", m.fp8_head, "model.fp8_head=false")) if bad]
    errs = []
    if delayed and m.fp8_history < 1:
        errs.append(f"model.fp8_history={m.fp8_history} must be >= 1 (the steps of amax history; e.g. 16)")
    for bad, what in ((m.collective_matmul.value != "none", f"model.collective_matmul={m.collective_matmul.value}"),
                      (m.mla.kv_rank > 0, "model.mla.kv_rank > 0 (multi-head latent attention)"),
                      (cfg.lora.rank > 0, f"lora.rank={cfg.lora.rank}")):
        if bad:
            errs.append(f"model.matmul_dtype=fp8 with {what}: not supported yet; set model.matmul_dtype=compute")
    if delayed and cfg.mesh.stage > 1:  # (a stage's layers run once per microbatch: their histories' updates would add)
        errs.append(f"model.fp8_scaling=delayed with mesh.stage={cfg.mesh.stage} (pipeline stages): not supported yet; "
                    "set model.fp8_scaling=current")
    return errs
