"""The preflight: every program of a run compiled for its real state and batches before step 1,
and refused there, in one line, if one does not fit a device (spmdgpt.plan.plan measures them);
before that, `state_refusal`: a state that alone cannot fit is refused before it is allocated."""

from __future__ import annotations

import sys
from typing import Optional

import jax

from spmdgpt.config import Config, ConfigError
from spmdgpt.data import Batcher
from spmdgpt.eval.evaluate import LossEvaluator, TextSampler
from spmdgpt.mesh.sharding import Rules
from spmdgpt.training.state import Start


def preflight(cfg: Config, rules: Rules, optimizer, begin: Start, batcher: Batcher, evaluator: LossEvaluator,
              rollouts: Optional[TextSampler], base=None, reference=None) -> dict:
    """{name: executable} of every program the run executes (`plan.run_programs`: the step, the
    statistics, the evaluation, the rollouts), compiled ahead of time for the run's own state and
    batches before step 1; the run then calls these executables (nothing compiles twice). A
    program that does not fit a device's memory (on CPUs: this host's, shared by its devices)
    stops the run here, before any step or write: ConfigError naming the program, its size, the
    capacity and the settings that shrink it."""
    from spmdgpt.plan.plan import run_programs

    programs = run_programs(cfg, rules, optimizer, begin.state, tuple(batcher.train_batch(begin.step)),
                            evaluator.first_batch(), base=base, reference=reference, held_bytes=evaluator.held_bytes(),
                            engine=None if rollouts is None else rollouts.engine)
    checked(programs)
    evaluator.sums = next(p.executable for p in programs if p.name == "evaluation")
    return {p.name: p.executable for p in programs}


def state_refusal(cfg: Config, rules: Rules, optimizer) -> Optional[str]:
    """train's check before its state is built: the one-line refusal when the parameters and the
    optimizer state alone (their shapes and shardings, nothing allocated) exceed a device of this
    process (`plan.local_capacity`), else None. (The programs' own memory is the preflight's.)"""
    from spmdgpt.mesh.sharding import shard_bytes
    from spmdgpt.plan.plan import local_capacity, size
    from spmdgpt.training.state import abstract_state

    capacity, device = local_capacity()
    if capacity is None:
        return None
    need = shard_bytes(abstract_state(cfg, rules, optimizer))
    if need > capacity:
        return (f"the parameters and optimizer state need {size(need)} per device but a {device} holds "
                f"{size(capacity)}{_largest(cfg.model)}; shard them (sharding=fsdp, mesh.model, more devices) or "
                "train a smaller model (spmdgpt plan lists every program's memory)")
    for bytes_, what, fix in activation_floors(cfg):
        if bytes_ > capacity:
            return f"{what} need {size(bytes_)} per device but a {device} holds {size(capacity)}; {fix}"
    return None


def _largest(m) -> str:
    """" (the largest: LEAF [shape], N% of the parameters)" of model config m: what shows a runaway
    field, say model.hyper_connections=100000 (blocks.hc_mlp.w)."""
    import math

    from spmdgpt.model import is_info, param_info

    leaves = jax.tree_util.tree_flatten_with_path(param_info(m), is_leaf=is_info)[0]
    sizes = [(math.prod(i.shape), jax.tree_util.keystr(path, simple=True, separator="."), i.shape)
             for path, i in leaves]
    n, name, shape = max(sizes)
    return f" (the largest: {name} {list(shape)}, {n / sum(s[0] for s in sizes):.0%} of the parameters)"


def activation_floors(cfg: Config) -> list:
    """[(bytes, what, fix)]: arrays one model field makes a training step hold on every device, at the
    least (each microbatch's tokens spread over every device, one copy, the narrowest dtype they
    can have), said naming the field and the fix; a floor past a device is refused before any
    compile (the preflight's compile of such a step took minutes)."""
    import jax.numpy as jnp

    m, d = cfg.model, cfg.data
    tokens = d.batch_size * d.seq_len // max(1, cfg.train.microbatches) / max(1, len(jax.devices()))
    fewer = "or fewer tokens a step per device (data.batch_size, train.microbatches=k, more devices)"
    out = []
    if m.per_layer_dim:  # ([layers, tokens, P] float32: per_layer.layer_inputs)
        out.append((tokens * m.num_layers * m.per_layer_dim * 4,
                    f"model.per_layer_dim={m.per_layer_dim}: the per-layer inputs alone ([{m.num_layers} layers, "
                    f"{tokens:,.0f} tokens a device, {m.per_layer_dim}] float32)",
                    f"choose a smaller model.per_layer_dim (Gemma 4 E2B / E4B: 256) {fewer}"))
    if m.hyper_connections:  # (the streams [tokens, n, D] between layers)
        out.append((tokens * m.hyper_connections * m.d_model * jnp.dtype(m.compute_dtype.value).itemsize,
                    f"model.hyper_connections={m.hyper_connections}: the residual streams alone ([{tokens:,.0f} "
                    f"tokens a device, {m.hyper_connections} streams, {m.d_model}])",
                    f"choose fewer streams (DeepSeek-V4: 4) {fewer}"))
    return out


def checked(programs: list) -> list:
    """`programs` (plan.Program), refused in one line if one does not fit a device's memory,
    else said in one line (process 0)."""
    from spmdgpt.plan.plan import local_capacity, size, too_large

    capacity, device = local_capacity()
    refusal = too_large(programs, capacity, device)
    if refusal:
        raise ConfigError([f"{refusal} (spmdgpt plan lists every program's memory)"])
    if jax.process_index() == 0:
        largest = max(programs, key=lambda p: p.total_bytes)
        room = "" if capacity is None else f" of {size(capacity)}"
        print(f"preflight: {', '.join(p.name for p in programs)} compiled in "
              f"{sum(p.compile_s for p in programs):.1f} s; the largest, {largest.name}, needs "
              f"{size(largest.total_bytes)}{room} per device", file=sys.stderr)
    return programs
