"""rl.rollout_devices = N: the rollouts' engine on devices of its own (the RL issue, item 4).

The process's devices are split: the LAST N (in jax.devices() order) hold the inference engine,
the others the trainer's mesh (mesh.* multiply to the count left: `config.validate`). The engine's
mesh has the trainer's axis names with `data` over its N devices and every other axis 1, under
the run's own rule table (sharding=...): each engine device samples its share of the batch's rows
(the engine's slots split over `data`), and the parameters' copy is placed as the table places
parameters on a data axis (dp: whole on each engine device; fsdp: split N ways and gathered per
layer). The engine has no tensor-parallel axis here: a model whose copy does not fit N-way FSDP
does not split.

After each update the trained parameters are copied to the engine's devices (`to_engine`:
jax.device_put to the engine's shardings) as the batch sampled from them begins (with
rl.max_staleness = K, as batch k begins, the copy batches up to k + K are sampled from,
`RolloutBatcher.source`); the engine samples from that copy, and the sampling policy's
log-probabilities (old_logp) are computed there from the same copy and put on the trainer's
devices (`Rollouts.batch`). The reference's log-probabilities (rl.kl_beta > 0) and a teacher's
(rl.objective=distill) are computed on the trainer's devices, where the reference and the teacher
live. What the split costs: one copy of the parameters across per sampled batch (and per
evaluation), and the trainer's devices idle while the engine samples at K = 0; it pays when the
rollouts run ahead (K >= 1): the update and the sampling then run on devices of their own at once.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

import jax

from spmdgpt.config import Config, ConfigError
from spmdgpt.mesh.sharding import Rules, make_mesh


def rollout_devices(cfg: Config) -> int:
    """N of rl.rollout_devices (0: the engine shares the trainer's devices)."""
    return max(cfg.rl.rollout_devices, 0)


def trainer_devices(cfg: Config, devices: Sequence) -> list:
    """The devices of the trainer's mesh: all but the last rl.rollout_devices of `devices`."""
    n = rollout_devices(cfg)
    return list(devices)[:len(devices) - n] if n else list(devices)


def engine_devices(cfg: Config, devices: Sequence) -> list:
    """The engine's devices: the last rl.rollout_devices of `devices` (none: unsplit)."""
    n = rollout_devices(cfg)
    return list(devices)[len(devices) - n:] if n else []


def engine_rules(cfg: Config, devices: Optional[Sequence] = None) -> Optional[Rules]:
    """The engine's Rules with rl.rollout_devices = N: a mesh of the trainer's axes, `data` over the last
    N of `devices` (default: jax.devices()) and every other axis 1, under the run's rule table; None
    without a split. One process only (a split across hosts is not built)."""
    if not rollout_devices(cfg):
        return None
    if devices is None:
        if jax.process_count() > 1:
            raise ConfigError([f"rl.rollout_devices={cfg.rl.rollout_devices}: the split runs in one process; "
                               f"this run has {jax.process_count()} (leave rl.rollout_devices out)"])
        devices = jax.devices()
    mine = engine_devices(cfg, devices)
    shape = {f.name: 1 for f in dataclasses.fields(cfg.mesh)}
    mesh = make_mesh(dataclasses.replace(cfg.mesh, **{**shape, "data": len(mine)}), mine)
    return Rules(mesh, cfg.sharding, cfg.model)


def engine_shardings(cfg: Config, rules: Rules):
    """The parameters' shardings on the engine's mesh (`rules`: `engine_rules`)."""
    from spmdgpt.model import abstract_params

    return jax.tree.map(lambda a: a.sharding, abstract_params(cfg.model, rules))


def split_errors(cfg: Config) -> List[str]:
    """What rl.rollout_devices does not work with (the device count's checks are `config.validate`'s)."""
    n = cfg.rl.rollout_devices
    if not n:
        return []
    errs = []
    if cfg.lora.rank:
        errs.append(f"rl.rollout_devices={n} does not work with LoRA (lora.rank={cfg.lora.rank}) yet: the engine "
                    "would need the frozen base beside the adapters' copy; leave one out")
    b = cfg.data.batch_size
    if n > 0 and isinstance(b, int) and b > 0 and b % n:  # (the engine's data axis splits the batch's rows)
        errs.append(f"data.batch_size={b} does not split over the engine's rl.rollout_devices={n} devices (its data "
                    f"axis takes the batch's rows); make the batch a multiple of {n} or give the engine a divisor "
                    f"of {b}")
    return errs
