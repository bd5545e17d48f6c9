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
    need = shard_bytes(abstract_state(cfg, rules, optimizer))
    if capacity is None or need <= capacity:
        return None
    return (f"the parameters and optimizer state need {size(need)} per device but a {device} holds "
            f"{size(capacity)}; shard them (sharding=fsdp, mesh.model, more devices) or train a smaller model "
            "(spmdgpt plan lists every program's memory)")


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
