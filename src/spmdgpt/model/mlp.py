"""The dense MLP unit: its parameters, its function and its statistics.

Shapes (D = d_model, F = MLP width; the block stacks a layer axis in front):

    w_up   [D, F], w_gate [D, F] (SwiGLU only), w_down [F, D] (residual), biases with model.bias

An MLP kind is a unit (`spmdgpt.model.params.Unit`): `info(cfg)` (one layer's ParamInfo
tree), `apply(cfg, rules, p, x) -> (out, aux)` with x and out [stream, embed] and aux a dict of
float32 scalars (auxiliary losses, e.g. an MoE's load balance), and `stats(cfg, rules, p, x)`.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import MlpType, ModelConfig, gated, mlp_hidden
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import lora
from spmdgpt.model.collective import matmul_out, matmuls_in
from spmdgpt.model.fp8 import INPUTS, history_info, sites
from spmdgpt.model.info import matrix, out_init, residual_std, vector
from spmdgpt.model.layers import rms


class Mlp(NamedTuple):
    # LoRA's targets in these parameters: {Hugging Face name: (field, index)} (`model.lora`)
    LORA = {"up": ("w_up", None), "gate": ("w_gate", None), "down": ("w_down", None)}

    w_up: jax.Array
    b_up: Optional[jax.Array]
    w_gate: Optional[jax.Array]
    w_down: jax.Array
    b_down: Optional[jax.Array]
    fp8_amax: Optional[jax.Array] = None  # [2 or 3 (up, gate, down), 3, history]: FP8's delayed scaling (`model.fp8`)


def mlp_info(cfg: ModelConfig, hidden: Optional[int] = None) -> Mlp:
    """One layer's MLP of width `hidden` (default model.mlp_factor x d_model)."""
    D, F = cfg.d_model, hidden or mlp_hidden(cfg)
    up = matrix((D, F), ("embed", "mlp"), ("embed",), ("mlp",), cfg.init_std)
    return Mlp(
        w_up=up,
        b_up=vector((F,), ("mlp",)) if cfg.bias else None,
        w_gate=up if gated(cfg) else None,
        w_down=matrix((F, D), ("mlp", "embed"), ("mlp",), ("embed",), residual_std(cfg), out_init(cfg)),
        b_down=vector((D,), ("embed",)) if cfg.bias else None,
        fp8_amax=history_info(cfg, 3 if gated(cfg) else 2),
    )


def mlp_inputs(cfg: ModelConfig, rules: Rules, p: Mlp, x: jax.Array):
    """The MLP's projections of x [stream, embed]: (up (+ bias), SwiGLU's gate or None), each
    [tokens, mlp] with hidden units sharded by the `mlp` rule (one gather of a split stream for
    both, `collective.matmuls_in`)."""
    dt = x.dtype
    weights = [p.w_up, p.w_gate] if gated(cfg) else [p.w_up]
    terms = [("td,df->tf", lora.weight(rules, w, dt, ("embed", "mlp")), ("embed", "mlp"), ("mlp",)) for w in weights]
    h, *gate = matmuls_in(rules, x, *terms, history=sites(p.fp8_amax, INPUTS))
    if p.b_up is not None:
        h = h + rules.gather(p.b_up.astype(dt), ("mlp",))
    return h, gate[0] if gate else None


_GELU_C = 0.7978845608028654  # sqrt(2 / pi)
_GELU_A = 0.044715


@jax.custom_vjp
def gelu_tanh(x: jax.Array) -> jax.Array:
    """The tanh GELU (`jax.nn.gelu(x, approximate=True)`, the same values) with its own
    derivative: the backward pass keeps only x and computes
    d gelu / dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 a x^2),
    u = sqrt(2/pi) (x + a x^3), in float32 in one elementwise pass (what torch.compile generates).
    Autodiff of the forward instead keeps its intermediates and sums the derivative's three paths
    in a three-way add of [tokens, F] arrays per layer (benchmarks/BENCHMARKS.md, GPU)."""
    return jax.nn.gelu(x, approximate=True)


def _gelu_fwd(x):
    return jax.nn.gelu(x, approximate=True), x


def _gelu_bwd(x, dy):
    x32 = x.astype(jnp.float32)
    t = jnp.tanh(_GELU_C * (x32 + _GELU_A * x32 * x32 * x32))
    d = 0.5 * (1 + t) + 0.5 * x32 * (1 - t * t) * _GELU_C * (1 + 3 * _GELU_A * x32 * x32)
    return ((dy.astype(jnp.float32) * d).astype(dy.dtype),)


gelu_tanh.defvjp(_gelu_fwd, _gelu_bwd)


def activation(cfg: ModelConfig, h: jax.Array, g: Optional[jax.Array]) -> jax.Array:
    """The hidden units of model.mlp's kind from the up projection h (and a gated kind's gate g); the
    GELU with a derivative of its own (`gelu_tanh`). (SwiGLU's own derivative would change
    nothing: XLA fuses autodiff's into one pass over the same bytes, benchmarks/roofline.py.)"""
    if cfg.mlp == MlpType.swiglu:
        return jax.nn.silu(g) * h
    if cfg.mlp == MlpType.geglu:
        return gelu_tanh(g) * h
    if cfg.mlp == MlpType.swiglu_clamped:  # gpt-oss's: clamped, a steeper sigmoid, and u + 1
        g = jnp.minimum(g, cfg.glu_limit)
        return g * jax.nn.sigmoid(cfg.glu_alpha * g) * (jnp.clip(h, -cfg.glu_limit, cfg.glu_limit) + 1)
    if cfg.mlp == MlpType.swiglu_clip:  # DeepSeek-V4's: the gate clamped above, the up projection both ways
        return jax.nn.silu(jnp.minimum(g, cfg.glu_limit)) * jnp.clip(h, -cfg.glu_limit, cfg.glu_limit)
    if cfg.mlp == MlpType.relu2:
        return jnp.square(jax.nn.relu(h))
    return gelu_tanh(h)


def mlp(cfg: ModelConfig, rules: Rules, p: Mlp, x: jax.Array) -> tuple[jax.Array, dict]:
    """x: [stream, embed] -> ([stream, embed], no auxiliary outputs); hidden units sharded by
    the `mlp` rule; activation by model.mlp (`activation`)."""
    dt = x.dtype
    h = activation(cfg, *mlp_inputs(cfg, rules, p, x))
    w_down = lora.weight(rules, p.w_down, dt, ("mlp", "embed"))
    out = matmul_out(rules, "tf,fd->td", h, w_down, ("mlp",), ("mlp", "embed"), history=sites(p.fp8_amax, -1))
    if p.b_down is not None:
        out = out + rules.gather(p.b_down.astype(dt), ("embed",))
    return out, {}


def mlp_stats(cfg: ModelConfig, rules: Rules, p: Mlp, x: jax.Array) -> dict:
    """The RMS of the nonlinearity's input (SwiGLU's gate, else the up projection), recomputed."""
    up, gate = mlp_inputs(cfg, rules, p, x)
    return {"mlp_pre_rms": rms(up if gate is None else gate)}
