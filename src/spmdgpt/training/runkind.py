"""What a kind of run is (`RunKind`) and what it builds (`RunParts`): the values `spmdgpt.kinds`
and each kind's own module (spmdgpt.rl.kind) define, and the trainer, the preflight and the plan
call without knowing the kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List


@dataclass
class RunParts:
    """What a run of some kind trains and evaluates with, built by `RunKind.parts` once the mesh,
    the optimizer and the starting state exist."""

    batcher: Any  # .train_batch(step) -> the step's batch (and .epochs, .names, .packed)
    evaluation: List  # the hooks (spmdgpt.training.hooks) that evaluate the run
    evaluator: Any = None  # the validation loss (train.time_budget times it), or None
    sampler: Any = None  # text samples at each evaluation (train.rollout_tokens), or None


@dataclass(frozen=True)
class RunKind:
    """A kind of run (see the module docstring): each field a function of the run's config and
    parts, so that the trainer, the preflight and the plan call them without knowing the kind."""

    name: str
    load: Callable  # (cfg, check) -> the run's data (check: sees the tokenizer first)
    batcher: Callable  # (cfg, rules, data, is_main) -> the training batches (made before the run starts:
    # their refusals come before anything is written)
    parts: Callable  # (cfg, rules, data, batcher, samples: Optional[Path], reference) -> RunParts
    keeps_reference: Callable  # (cfg) -> whether the run holds a frozen copy of its starting parameters
    preflight: Callable  # (cfg, rules, optimizer, begin, parts, base, reference) -> {name: executable}
    batch_shapes: Callable  # (cfg, rules) -> one training batch's ShapeDtypeStructs (the plan's)
    step_only: bool = False  # the plan compiles the step alone (the kind's other programs: its preflight)
    loss_spike_guard: bool = True  # the divergence guard's spike test applies to its loss
    bind: Callable = lambda loop, parts, reference: None  # (once the loop exists)
    devices: Callable = lambda cfg, devices: list(devices)  # -> the trainer's mesh's devices of these (GRPO's
    # rl.rollout_devices keeps the last ones for its engine)
    side_programs: Callable = lambda cfg, devices: []  # -> plan.Programs compiled on `devices` outside the
    # trainer's (rl.rollout_devices' engine), for the plan
    frozen: Callable = lambda cfg, rules: None  # -> the shapes of frozen parameters the run holds beside its
    # state and reference (on-policy distillation's teacher), for the plan
