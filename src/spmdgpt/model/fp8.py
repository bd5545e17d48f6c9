"""FP8 matmuls (`model.matmul_dtype=fp8`): the attention projections' and the dense MLPs' matmuls
(every `collective.matmuls_in` / `matmul_out` einsum) with per-tensor scales, current scaling.

Forward: the input x and the weight w are each scaled by s = amax / max (amax: the largest |value|
of the whole tensor, over every device: under FSDP or tensor parallelism the max is reduced
across the sharded axes, so every device uses the same scale as one device would), clipped to
the format's range (e4m3: +-448; it has no infinity, so an unclipped overflow would be NaN) and
cast to float8_e4m3fn; the einsum of the two FP8 operands accumulates in float32 and is multiplied
by s_x s_w. Backward (`jax.custom_vjp`): the output's cotangent g is scaled the same way into
float8_e5m2 (+-57344: the gradients' wider range), and both backward products are FP8 einsums too,
dx = g w^T (e5m2 x e4m3) and dw = x^T g (e4m3 x e5m2), reusing the forward's quantized x and w.
Master weights, optimizer state, norms, softmax, the output head and the loss stay as they are.

On Hopper, XLA compiles an einsum of FP8 operands as an FP8 GEMM (the compute-only H100 step's
optimized HLO: its dots take f8e4m3fn / f8e5m2 operands, `tests/test_fp8.py`); on CPUs it runs
as a float32 product of the FP8 values (the numerics, not the speed). Delayed scaling (an amax
history in the train state) is not here yet.
"""

from __future__ import annotations

from functools import partial
from typing import List

import jax
import jax.numpy as jnp

from spmdgpt.config import Config

E4M3, E5M2 = jnp.float8_e4m3fn, jnp.float8_e5m2
E4M3_MAX, E5M2_MAX = 448.0, 57344.0


def quantize(a: jax.Array, dtype, largest: float) -> tuple[jax.Array, jax.Array]:
    """(a / s in `dtype`, s): s = max|a| / largest (1 for an all-zero a), the values clipped to
    +-largest; float32 arithmetic."""
    a32 = a.astype(jnp.float32)
    amax = jnp.max(jnp.abs(a32))
    scale = jnp.where(amax > 0, amax / largest, 1.0)
    return jnp.clip(a32 / scale, -largest, largest).astype(dtype), scale


def _sharding(a: jax.Array):
    """a's PartitionSpec under a mesh (the backward products' layouts: their primals'), else None."""
    s = jax.typeof(a).sharding
    return s.spec if s.mesh.axis_names else None


@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def fp8_einsum(eq: str, out, dtype, x: jax.Array, w: jax.Array) -> jax.Array:
    """jnp.einsum(eq, x, w) (two operands, "xs,ws->outs", every index of x in w or the output)
    as an FP8 product scaled back, in `dtype`, laid out as `out` (a PartitionSpec)."""
    return _forward(eq, out, dtype, x, w)[0]


def _forward(eq, out, dtype, x, w):
    qx, sx = quantize(x, E4M3, E4M3_MAX)
    qw, sw = quantize(w, E4M3, E4M3_MAX)
    y = jnp.einsum(eq, qx, qw, preferred_element_type=jnp.float32, out_sharding=out) * (sx * sw)
    return y.astype(dtype), (qx, sx, qw, sw)


def _backward(eq, out, dtype, res, g):
    qx, sx, qw, sw = res
    ins, o = eq.split("->")
    a, b = ins.split(",")
    qg, sg = quantize(g, E5M2, E5M2_MAX)
    dx = jnp.einsum(f"{o},{b}->{a}", qg, qw, preferred_element_type=jnp.float32, out_sharding=_sharding(qx))
    dw = jnp.einsum(f"{a},{o}->{b}", qx, qg, preferred_element_type=jnp.float32, out_sharding=_sharding(qw))
    return (dx * (sg * sw)).astype(dtype), (dw * (sx * sg)).astype(dtype)


fp8_einsum.defvjp(_forward, _backward)


def einsum(rules, eq: str, x: jax.Array, w: jax.Array, out) -> jax.Array:
    """The model's projection einsum: FP8 under model.matmul_dtype=fp8 (`rules.fp8`), else plain."""
    if getattr(rules, "fp8", False):
        return fp8_einsum(eq, out, x.dtype, x, w)
    return jnp.einsum(eq, x, w, out_sharding=out)


def config_errors(cfg: Config) -> List[str]:
    """model.matmul_dtype=fp8 and what it cannot be combined with yet."""
    m = cfg.model
    if m.matmul_dtype.value != "fp8":
        return []
    errs = []
    for bad, what in ((m.collective_matmul.value != "none", f"model.collective_matmul={m.collective_matmul.value}"),
                      (m.mla.kv_rank > 0, "model.mla.kv_rank > 0 (multi-head latent attention)"),
                      (cfg.lora.rank > 0, f"lora.rank={cfg.lora.rank}")):
        if bad:
            errs.append(f"model.matmul_dtype=fp8 with {what}: not supported yet; set model.matmul_dtype=compute")
    return errs
