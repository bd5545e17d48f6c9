"""`spmdgpt plan <train overrides> [devices=N] [memory_gb=G]`: compile the config's training
step from abstract shapes (no data, no weights) and print, per device, the bytes of parameters,
optimizer state, batch and temporaries, the FLOPs per step and the collectives (see
spmdgpt.plan). devices=N plans on N simulated CPU devices; memory_gb=G (default: what the device
reports, if it does) turns a plan that does not fit into exit code 2."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import List

from spmdgpt.cli.args import EXIT_OK, EXIT_USAGE, parse
from spmdgpt.config import ConfigError


@dataclass
class PlanArgs:
    devices: int = 0  # plan on this many simulated CPU devices (0 = this machine's devices)
    memory_gb: float = 0.0  # per-device memory the plan must fit (0 = the device's own, if known)


def _simulate_devices(n: int) -> None:
    """Ask for n CPU devices; possible only before JAX starts its backend."""
    if "jax" in sys.modules:
        import jax

        if jax.device_count() != n or jax.devices()[0].platform != "cpu":
            raise ConfigError([f"devices={n}: JAX already started with {jax.device_count()} "
                               f"{jax.devices()[0].platform} device(s) in this process; run spmdgpt plan "
                               "in a fresh process"])
        return
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={n}".strip()
    os.environ["JAX_PLATFORMS"] = "cpu"


def run(items: List[str]) -> int:
    args, overrides = parse(items, PlanArgs)
    if args.devices < 0:
        raise ConfigError([f"devices={args.devices} must be >= 0 (0 = this machine's devices)"])
    if args.memory_gb < 0:
        raise ConfigError([f"memory_gb={args.memory_gb} must be >= 0 (0 = the device's own memory)"])
    from spmdgpt.config import load_config, validate
    from spmdgpt.runtime import set_default_xla_flags

    cfg = load_config(overrides)
    if args.devices:
        _simulate_devices(args.devices)
    set_default_xla_flags()
    import jax

    from spmdgpt.model import attention_backend
    from spmdgpt.plan import plan_step, report, size
    from spmdgpt.sharding import Rules, make_mesh

    # the step's shapes matter here; where the tokens come from does not (no data is read)
    errs = [e for e in validate(cfg, jax.device_count())
            if not e.startswith("data.") or e.startswith(("data.batch_size", "data.seq_len"))]
    if errs:
        raise ConfigError(errs)
    attention_backend(cfg.model)  # a backend this platform can run
    mesh = make_mesh(cfg.mesh)
    with jax.set_mesh(mesh):
        plan = plan_step(cfg, Rules(mesh, cfg.sharding))
    capacity = int(args.memory_gb * 2**30) if args.memory_gb else None
    if capacity is None:
        stats = jax.devices()[0].memory_stats() or {}
        capacity = stats.get("bytes_limit")
    print(report(cfg, plan, capacity))
    if capacity is not None and plan.total_bytes > capacity:
        print(f"spmdgpt: error: the step needs {size(plan.total_bytes)} per device but a device has "
              f"{size(capacity)}; shard more (sharding=fsdp, more devices), set model.remat=full, "
              "train.microbatches=k or model.loss_block=c, or lower data.batch_size", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
