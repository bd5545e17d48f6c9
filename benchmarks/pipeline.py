"""The pipeline's bubble, measured: a GPipe step on S simulated CPU devices (one stage each) against
the same step on one device, as the number of microbatches M grows.

    python benchmarks/pipeline.py [--stages 2] [--microbatches 1,2,4,8] [--layers 8] [--d 256]
                                  [--seq 256] [--rows 2] [--rounds 5]

Each microbatch is `--rows` sequences of `--seq` tokens through a `--layers`-layer model of width
`--d` (float32, xla attention); a step is the gradient of the loss over M microbatches
(`train_step.step_gradients`: the pipeline with mesh.stage=S, gradient accumulation of M parts on
one device). Per iteration of its loop every stage runs one microbatch through its L/S layers,
and the loop has M + S - 1 iterations, so with the stages truly in parallel

    pipeline time / one-device time = (M + S - 1) / (S M)

(1 / S when the bubble (S - 1) / (M + S - 1) vanishes). Prints, per M, the median step time of
both (over --rounds), the measured ratio, that prediction, and the bubble fraction the schedule
implies; a measured ratio above the prediction is time the stages do not overlap (on a CPU
with fewer free cores than stages, all of it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--microbatches", default="1,2,4,8")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--rows", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_force_host_platform_device_count={args.stages}").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from spmdgpt.runtime import set_default_xla_flags

    set_default_xla_flags()
    import jax
    import numpy as np

    from spmdgpt.config import load_config
    from spmdgpt.model import init_params
    from spmdgpt.sharding import Rules, make_mesh
    from spmdgpt.train_step import step_gradients

    def step_time(m: int, stages: int) -> float:
        cfg = load_config([f"model.num_layers={args.layers}", f"model.d_model={args.d}", "model.num_heads=4",
                           "model.vocab_size=256", f"data.seq_len={args.seq}", f"model.max_seq_len={args.seq}",
                           "model.attention=xla", f"data.batch_size={args.rows * m}", f"train.microbatches={m}",
                           "mesh.data=1", f"mesh.stage={stages}"])
        mesh = make_mesh(cfg.mesh, jax.devices()[:stages])
        with jax.set_mesh(mesh):
            rules = Rules(mesh, cfg.sharding, cfg.model)
            params = init_params(cfg.model, jax.random.key(0), rules)
            tokens = jax.device_put(np.random.default_rng(0).integers(0, 256, (args.rows * m, args.seq + 1)),
                                    rules.batch_sharding())
            f = jax.jit(step_gradients(cfg, rules)).lower(params, 0, tokens[:, :-1], tokens[:, 1:]).compile()
            jax.block_until_ready(f(params, 0, tokens[:, :-1], tokens[:, 1:]))
            times = []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                jax.block_until_ready(f(params, 0, tokens[:, :-1], tokens[:, 1:]))
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    s = args.stages
    print(f"# {s} stages of {args.layers // s} layers (d_model {args.d}, {args.rows} x {args.seq} tokens a microbatch), "
          f"{os.cpu_count()} CPUs; JAX {jax.__version__}", file=sys.stderr)
    print(f"{'M':>3}  {'one device':>11}  {'pipeline':>10}  {'ratio':>6}  {'(M+S-1)/(S M)':>13}  {'bubble':>6}")
    ms, piped_times = [int(v) for v in args.microbatches.split(",")], []
    for m in ms:
        one, piped = step_time(m, 1), step_time(m, s)
        piped_times.append(piped)
        print(f"{m:>3}  {one * 1e3:>8.1f} ms  {piped * 1e3:>7.1f} ms  {piped / one:>6.3f}  {(m + s - 1) / (s * m):>13.3f}  "
              f"{(s - 1) / (m + s - 1):>6.1%}")
    # the pipeline's time against its loop's length: a + b (M + S - 1) by least squares; the bubble
    # iterations' share of the measured time, b (S - 1) / time, against the schedule's
    its = np.array([m + s - 1 for m in ms], float)
    b, a = np.polyfit(its, np.array(piped_times), 1)
    print(f"fit: pipeline time = {a * 1e3:.1f} ms + {b * 1e3:.1f} ms x (M + S - 1) iterations "
          f"(largest residual {np.max(np.abs(a + b * its - piped_times)) * 1e3:.1f} ms)")
    for m, t in zip(ms, piped_times):
        print(f"  M={m}: the S - 1 bubble iterations {b * (s - 1) / t:.1%} of the measured step; schedule "
              f"{(s - 1) / (m + s - 1):.1%}")


if __name__ == "__main__":
    main()
