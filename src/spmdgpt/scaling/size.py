"""Scaling a model: a run's length in tokens per parameter (`train.tokens_per_param`: the steps
it sets, `with_token_budget`; `model.size`'s shape is the config load's, `config.load.sized`),
and μP's coordinate check (`model.parametrization`), the test that a parametrization keeps
every layer's activations the same size as the model widens.

    coordinate_check(["+experiment=staircase", "model.parametrization=mup", ...],
                     sizes=(64, 128, 256, 512, 1024), steps=4)

trains the same model at each width (d_model = width, everything else as configured; under μP the
base width is the configured model.base_width, default the first width) for `steps` AdamW steps
on the same batches, and after each step reads, on a fixed batch, the RMS of each layer's
attention and MLP outputs (the branches `blocks.block` adds to the residual stream), of the
residual stream, and of the logits. Under standard parametrization with Adam, a step moves each
weight by about the learning rate per entry whatever the width, so the branches' outputs change by
~width x lr and grow with width; under μP they stay the same size (Yang et al. 2022, "Tensor
Programs V", the coordinate check of their figure 5). With axis="depth" the sizes are depths: under
standard parametrization the residual stream, a sum of L branches, grows with L; under CompleteP
(branches x base_depth / L) it does not. `benchmarks/coord_check.py` plots both.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward
from spmdgpt.model.transformer import activation_stats

QUANTITIES = ("attn", "mlp", "resid", "logits")  # what a coordinate check reads (RMS), in plot order


def with_token_budget(cfg):
    """cfg with train.steps from train.tokens_per_param (unset: cfg itself): T x the model's matmul
    parameters (`flops.matmul_params`: the blocks' matrices and the unembedding) / tokens per
    step, rounded up; with optimizer.warmup_share, warmup_steps the share of them it gives. The
    config's load has already refused it beside train.steps or train.time_budget and turned an
    experiment's budget off (`config.load.sized`)."""
    from spmdgpt.optim import warmup_steps
    from spmdgpt.plan.flops import matmul_params

    t = cfg.train
    per_step = cfg.data.batch_size * cfg.data.seq_len
    if t.tokens_per_param is None or not per_step > 0:
        return cfg
    steps = max(1, math.ceil(t.tokens_per_param * matmul_params(cfg.model) / per_step))
    o = cfg.optimizer  # (a warmup share's steps recorded too, so that config.yaml shows the warmup it takes)
    if o.warmup_share is not None:
        o = dataclasses.replace(o, warmup_steps=warmup_steps(o, steps))
    return dataclasses.replace(cfg, train=dataclasses.replace(t, steps=steps, time_budget=None), optimizer=o)


def size_line(cfg) -> str:
    """One line naming what model.size and train.tokens_per_param set ('' when neither is on)."""
    from spmdgpt.optim import warmup_steps
    from spmdgpt.plan.flops import matmul_params

    m, t = cfg.model, cfg.train
    parts = []
    if m.size is not None:
        base = ""
        if m.parametrization.value != "standard":
            base = f", {m.parametrization.value} against base width {m.base_width}" + (
                f" and depth {m.base_depth}" if m.parametrization.value == "completep" else "")
        parts.append(f"model.size={m.size}: num_layers {m.num_layers}, d_model {m.d_model}, num_heads {m.num_heads}"
                     + base)
    if t.tokens_per_param is not None:
        n = matmul_params(m)
        parts.append(f"train.tokens_per_param={t.tokens_per_param:g}: {t.steps} step{'s' * (t.steps != 1)} of "
                     f"{cfg.data.batch_size * cfg.data.seq_len} tokens for {n / 1e6:.2f}M matmul parameters "
                     f"({t.steps * cfg.data.batch_size * cfg.data.seq_len / n:.1f} tokens each)")
        o = cfg.optimizer
        warm = warmup_steps(o, t.steps)
        if o.warmup_share is not None:
            parts.append(f"warmup {warm} step{'s' * (warm != 1)} (optimizer.warmup_share={o.warmup_share:g})")
        elif o.warmup_steps >= t.steps:
            parts.append(f"note: optimizer.warmup_steps={o.warmup_steps} is the whole run (not scaled with it): set "
                         "a smaller one, or optimizer.warmup_share")
    return "; ".join(parts)


def coordinate_check(overrides: Sequence[str], sizes: Sequence[int], steps: int = 4, axis: str = "width",
                     devices=None) -> Dict[int, Dict[str, List[List[float]]]]:
    """{size: {quantity: [after 0, 1, ..., steps steps: [one RMS per layer]]}} (logits: one value)
    for the model at each width (axis="width": d_model = size; the base width the configured
    model.base_width, default the first size) or depth (axis="depth": num_layers = size; the base
    depth likewise), trained on the same batches and read on one batch no step trains on."""
    from spmdgpt.training.step import training_parts

    field, base_field = {"width": ("d_model", "base_width"), "depth": ("num_layers", "base_depth")}[axis]
    overrides = list(overrides)
    given = any(o.startswith(f"model.{base_field}=") for o in overrides)
    out = {}
    for size in sizes:
        extra = [f"model.{field}={size}"] + ([] if given else [f"model.{base_field}={sizes[0]}"])
        cfg = load_config([*overrides, *extra, "train.eval_every=0", "checkpoint.enabled=false"])
        mesh = make_mesh(cfg.mesh, devices or jax.devices()[:1])
        rules = Rules(mesh, cfg.sharding, cfg.model)
        with jax.set_mesh(mesh):
            state, step_fn, batcher, _ = training_parts(cfg, rules, schedule_steps=max(steps, 1))
            probe = batcher.train_batch(10**6)[0]  # (a batch no step trains on)

            @jax.jit
            def read(params, tokens):
                stats = activation_stats(cfg.model, rules, params, tokens)
                logits = forward(cfg.model, rules, params, tokens)[0]
                return {"attn": stats["attn_rms"], "mlp": stats["mlp_rms"], "resid": stats["resid_rms"],
                        "logits": jnp.sqrt(jnp.mean(jnp.square(logits)))[None]}

            rows = [read(state.params, probe)]
            for i in range(steps):
                state, _ = step_fn(state, *batcher.train_batch(i))
                rows.append(read(state.params, probe))
        out[size] = {q: [np.asarray(r[q], np.float64).tolist() for r in rows] for q in QUANTITIES}
    return out


def growth(check: Dict[int, Dict[str, List[List[float]]]], quantity: str, step: int = -1) -> float:
    """How many times larger `quantity` is at the largest size than at the smallest after `step`
    steps (default the last; below 1: smaller), the layer furthest from 1 when the sizes are
    widths (layers matched by number), the last layer's (the stream the head reads) when they
    are depths. Near 1 under μP (widths) and CompleteP (depths: the residual stream and the
    logits; each branch is multiplied by base_depth / L, so it shrinks by design), growing with
    the size under standard parametrization."""
    sizes = sorted(check)
    small, large = check[sizes[0]][quantity][step], check[sizes[-1]][quantity][step]
    pairs = list(zip(small, large)) if len(small) == len(large) else [(small[-1], large[-1])]
    return max((b / a for a, b in pairs), key=lambda g: max(g, 1 / g))
