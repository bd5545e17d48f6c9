"""Training throughput with model statistics every 100 steps (train.stats_every=100) vs. without.

    python benchmarks/stats_overhead.py [--steps 300] [--every 100] [--pairs 3]

Model B1 (vocab 65, 4 layers, d_model 256, seq 256, batch 16, 1 device) on Tiny Shakespeare,
float32, AdamW. Both the train step and the statistics function are compiled (and run once)
before timing, so this is the steady-state cost a long run pays: on a statistics step the loop
runs the statistics function on the state before the step, queues the step, and fetches the
statistics (what `spmdgpt.loop` does). Timed windows alternate (with, without, ...) to spread
the machine's noise (and which goes first). Target: with / without >= 0.97.
"""

from __future__ import annotations

import argparse
import time

from spmdgpt.mesh.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()  # as `spmdgpt train` does: glibc malloc settings (a restart), XLA flags
set_default_xla_flags()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model import param_info  # noqa: E402
from spmdgpt.optim import build_optimizer  # noqa: E402
from spmdgpt.training.stats import make_stats_fn, stats_row  # noqa: E402
from spmdgpt.training.step import training_parts  # noqa: E402

B1 = ["+experiment=shakespeare_char", "model.num_layers=4", "model.num_heads=4", "model.d_model=256",
      "model.max_seq_len=256", "data.seq_len=256", "data.batch_size=16", "mesh.data=1",
      # B1 is AdamW, no QK-norm, fixed steps (the experiment's recipe changed in issue 21)
      "optimizer.name=adamw", "model.qk_norm=false", "train.time_budget=null"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    cfg = load_config(B1)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        state, train_step, batcher, _ = training_parts(cfg, rules)
        stats_fn = make_stats_fn(cfg, rules, build_optimizer(cfg.optimizer, param_info(cfg.model), cfg.train.steps))
        batches = [batcher.train_batch(i) for i in range(args.steps)]
        stats_row(0, jax.device_get(stats_fn(state, *batches[0])))  # compile both
        state, m = train_step(state, *batches[0])
        jax.block_until_ready(m)

        def window(every: int) -> float:
            nonlocal state
            t0 = time.perf_counter()
            for i, batch in enumerate(batches, start=1):
                stats = stats_fn(state, *batch) if every and i % every == 0 else None
                state, m = train_step(state, *batch)
                if stats is not None:
                    stats_row(i, jax.device_get(stats))
                if i % 10 == 0:
                    float(m["loss"])  # the loop's metrics fetch (one step late there; a sync here)
            jax.block_until_ready(state)
            return args.steps * cfg.data.batch_size * cfg.data.seq_len / (time.perf_counter() - t0)

        with_s, without = [], []
        for k in range(args.pairs):  # the order alternates too: with first, then without first
            for every in ((args.every, 0) if k % 2 == 0 else (0, args.every)):
                (with_s if every else without).append(window(every))
            print(f"  with stats every {args.every}: {with_s[-1]:8,.0f} tokens/s | without: {without[-1]:8,.0f}",
                  flush=True)
    ratio = np.mean(with_s) / np.mean(without)
    print(f"stats every {args.every} steps: {np.mean(with_s):,.0f} tokens/s; without: {np.mean(without):,.0f} "
          f"tokens/s; ratio {ratio:.3f} (target >= 0.97: {'PASS' if ratio >= 0.97 else 'FAIL'})")


if __name__ == "__main__":
    main()
