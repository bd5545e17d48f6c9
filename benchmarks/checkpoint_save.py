"""Seconds a checkpoint save blocks for, on 8 simulated CPU devices (one process): orbax's default
replica-parallel save against one writer per shard (what spmdgpt's CheckpointManager uses in a
single process, `checkpoint._one_writer_per_shard`).

    python benchmarks/checkpoint_save.py [--saves 6] [--layers 4]

The state is a real one (`init_state`: parameters and AdamW's moments) of the staircase
experiment's model at --layers layers, data-parallel over the 8 devices (every array replicated:
the case replica-parallel slices). Each save is synchronous (`checkpoint.async_save=false`), to a
new folder; the two settings alternate. The first save of each is reported apart: replica-parallel
compiles one `slice` per shape of slice there, which a run pays at its first checkpoint (in every
new process).
Each checkpoint is read back and compared with the state: equal, bitwise, under both settings.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--saves", type=int, default=6)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    import orbax.checkpoint as ocp

    from spmdgpt import build_optimizer, init_state, load_config, make_mesh, param_info
    from spmdgpt.mesh.sharding import Rules
    from spmdgpt.training.checkpoint import CheckpointManager

    cfg = load_config(["+experiment=staircase", f"model.num_layers={args.layers}", "checkpoint.async_save=false"])
    mesh = make_mesh(cfg.mesh, jax.devices())
    handlers = {"replica-parallel (orbax's default)": ocp.type_handlers.ArrayHandler(),
                "one writer per shard": ocp.type_handlers.ArrayHandler(use_replica_parallel=False)}
    times, first = {k: [] for k in handlers}, {}
    with jax.set_mesh(mesh), tempfile.TemporaryDirectory() as tmp:
        rules = Rules(mesh, cfg.sharding, cfg.model)
        state = init_state(cfg, rules, build_optimizer(cfg.optimizer, param_info(cfg.model), 100))
        n = sum(x.size for x in jax.tree.leaves(state))
        for i in range(args.saves + 1):
            for name, handler in handlers.items():
                folder = Path(tmp) / f"{i}-{len(times[name])}-{name[:3]}"
                mngr = CheckpointManager(folder, cfg.checkpoint)  # (registers spmdgpt's handler)...
                ocp.type_handlers.register_type_handler(jax.Array, handler, override=True)  # (...replaced here)
                t0 = time.perf_counter()
                mngr.save(1, state, {})
                mngr.close()  # (waits for the save)
                (times[name].append if i else first.setdefault(name, []).append)(time.perf_counter() - t0)
                if i == 1:
                    params, opt_state, _ = CheckpointManager.reader(folder).restore(1, state.params, state.opt_state)
                    same = jax.tree.map(lambda a, b: bool((np.asarray(a) == np.asarray(b)).all()),
                                        (params, opt_state), (state.params, state.opt_state))
                    assert all(jax.tree.leaves(same)), f"{name}: the checkpoint reads back different values"
    print(f"{n:,} numbers (params + AdamW moments) on {len(jax.devices())} devices, {args.saves} saves each:")
    for name, t in times.items():
        print(f"  {name:36s} first save {first[name][0]:.3f} s; then median {np.median(t):.3f} s "
              f"(min {min(t):.3f}, max {max(t):.3f})")
    a, b = (np.median(t) for t in times.values())
    print(f"one writer per shard saves in {b / a:.2f}x the time")


if __name__ == "__main__":
    main()
