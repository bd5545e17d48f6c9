"""The pipeline's bubble, measured: a pipelined step on S simulated CPU devices (one stage each)
against the same step on one device, as the number of microbatches M grows; GPipe's schedule and,
with --repeats R > 1, the circular one (model.pipeline_repeats=R) beside it.

    python benchmarks/pipeline.py [--stages 2] [--repeats 1] [--microbatches 1,2,4,8] [--layers 8]
                                  [--d 256] [--seq 256] [--rows 2] [--rounds 5]

Each microbatch is `--rows` sequences of `--seq` tokens through a `--layers`-layer model of width
`--d` (float32, xla attention); a step is the gradient of the loss over M microbatches
(`training.step.step_gradients`: the pipeline with mesh.stage=S, gradient accumulation of M parts on
one device). Per iteration of its loop every stage runs one microbatch through its L / (S R)
layers, and the loop has (R - 1) P + M + S - 1 iterations (P = max(M, S) for R > 1; GPipe: M +
S - 1), so with the stages truly in parallel

    pipeline time / one-device time = ((R - 1) P + M + S - 1) / (R S M)

(1 / S when the bubble vanishes). Prints, per M, the median step time of each (over --rounds),
the measured ratios, the predictions, and the bubble fractions the schedules imply; a measured
ratio above the prediction is time the stages do not overlap (on a CPU with fewer free cores
than stages, all of it). Then fits each schedule's time to a + b x (its iterations / R): the
bubble iterations' share of the measured step against the schedule's.
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
    ap.add_argument("--repeats", type=int, default=1)
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
    from spmdgpt.mesh.runtime import set_default_xla_flags

    set_default_xla_flags()
    import jax
    import numpy as np

    from spmdgpt.config import load_config
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import init_params, to_stage_order
    from spmdgpt.model.pipeline import schedule_iterations
    from spmdgpt.training.step import step_gradients

    def step_time(m: int, stages: int, repeats: int = 1) -> float:
        cfg = load_config([f"model.num_layers={args.layers}", f"model.d_model={args.d}", "model.num_heads=4",
                           "model.vocab_size=256", f"data.seq_len={args.seq}", f"model.max_seq_len={args.seq}",
                           "model.attention=xla", f"data.batch_size={args.rows * m}", f"train.microbatches={m}",
                           "mesh.data=1", f"mesh.stage={stages}", f"model.pipeline_repeats={repeats}"])
        mesh = make_mesh(cfg.mesh, jax.devices()[:stages])
        with jax.set_mesh(mesh):
            rules = Rules(mesh, cfg.sharding, cfg.model)
            params = to_stage_order(rules, init_params(cfg.model, jax.random.key(0), rules))
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

    s, r = args.stages, args.repeats
    schedules = [1] + ([r] if r > 1 else [])

    def iterations(m: int, r: int) -> int:
        return schedule_iterations(s, m, r)

    print(
        f"# {s} stages of {args.layers // s} layers (d_model {args.d}, {args.rows} x {args.seq} tokens a microbatch), "
        f"{os.cpu_count()} CPUs; JAX {jax.__version__}",
        file=sys.stderr,
    )
    names = {1: "GPipe", r: f"circular R={r}"}
    print(f"{'M':>3}  {'one device':>11}" + "".join(f"  {names[q]:>14}  {'ratio':>6}  {'predicted':>9}  {'bubble':>6}"
                                                    for q in schedules))
    ms, times = [int(v) for v in args.microbatches.split(",")], {q: [] for q in schedules}
    for m in ms:
        one = step_time(m, 1)
        row = f"{m:>3}  {one * 1e3:>8.1f} ms"
        for q in schedules:
            piped = step_time(m, s, q)
            times[q].append(piped)
            n = iterations(m, q)
            row += (f"  {piped * 1e3:>11.1f} ms  {piped / one:>6.3f}  {n / (q * s * m):>9.3f}  "
                    f"{(s - 1) / n:>6.1%}")
        print(row)
    # each schedule's time against its loop's length in GPipe iterations (n / R): a + b n / R by
    # least squares; the bubble iterations' share of the measured time, b (S - 1) / R / time,
    # against the schedule's
    for q in schedules:
        its = np.array([iterations(m, q) / q for m in ms], float)
        b, a = np.polyfit(its, np.array(times[q]), 1)
        print(f"fit, {names[q]}: time = {a * 1e3:.1f} ms + {b * 1e3:.1f} ms x iterations / {q} "
              f"(largest residual {np.max(np.abs(a + b * its - times[q])) * 1e3:.1f} ms)")
        for m, t in zip(ms, times[q]):
            print(f"  M={m}: the S - 1 bubble iterations {b * (s - 1) / q / t:.1%} of the measured step; schedule "
                  f"{(s - 1) / iterations(m, q):.1%}")


if __name__ == "__main__":
    main()
