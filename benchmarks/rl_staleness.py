"""Rollouts that run ahead (rl.max_staleness) against on-policy GRPO: the step time (the RL issue).

    python benchmarks/rl_staleness.py [--out DIR] [--steps 40] [--ks 0,1,2] [--sft-steps 100] [--splits 0]
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python benchmarks/rl_staleness.py --ks 0,1 --splits 0,1

1. The student: `arithmetic_sft` trained --sft-steps steps (its answers have the walk's length).
2. Per K in --ks: `arithmetic_grpo` from it for --steps steps with rl.max_staleness=K
   (train.log_every=1, no checkpoint or evaluation inside the timed steps), each a `spmdgpt train`
   process on this machine's CPU devices (one, unless XLA_FLAGS forces more); per N in --splits,
   with rl.rollout_devices=N (the engine on the last N devices, the update on the others: mesh.data
   is the device count less N; N = 0: every device both samples and trains, mesh.data=-1).
The step time is each row's batch tokens over its tokens_per_sec (the loop's window: the batch's
sampling, or the wait for it, and the update); the table gives the median over the steps after the
first five (compiles, the pipeline filling), the mean rl/sample_seconds and rl/wait_seconds, and the
last rows' rl/reward, and each run's ratio to the first one (K and N first in their lists). Finished
runs are kept (a rerun skips them); DIR/summary.json holds the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from distill import QUIET, train  # (a `spmdgpt train` process, kept once finished)


def rows(run: Path) -> list:
    """The run's step rows with a throughput."""
    return [r for r in (json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines())
            if "loss" in r and r.get("tokens_per_sec")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/out/rl_staleness")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ks", default="0,1,2")
    ap.add_argument("--sft-steps", type=int, default=100)
    ap.add_argument("--splits", default="0", help="rl.rollout_devices values, e.g. 0,1")
    a = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # (as the runs: no TPU plugin's start-up warnings)
    import jax  # (the device count the runs see: this process's, under the same XLA_FLAGS)

    devices = jax.device_count()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    sft = out / "sft"
    train(sft, "+experiment=arithmetic_sft", f"train.steps={a.sft_steps}", "train.eval_every=0", *QUIET)
    table = []
    for n, k in ((int(n), int(k)) for n in a.splits.split(",") for k in a.ks.split(",")):
        run = out / (f"k{k}" if not n else f"k{k}-split{n}")
        split = [f"rl.rollout_devices={n}", f"mesh.data={devices - n}"] if n else []
        train(run, "+experiment=arithmetic_grpo", f"checkpoint.init_from={sft}", f"train.steps={a.steps}",
              f"rl.max_staleness={k}", "train.log_every=1", f"train.eval_every={a.steps}",
              f"checkpoint.every={a.steps}", *split, *QUIET)
        rs = rows(run)
        tokens = 64 * 24  # (arithmetic_grpo's data.batch_size x data.seq_len)
        timed = rs[5:]
        step = statistics.median(tokens / r["tokens_per_sec"] for r in timed)
        table.append({"k": k, "rollout_devices": n, "devices": devices, "step_s": step,
                      "sample_s": statistics.mean(r["rl/sample_seconds"] for r in timed),
                      "wait_s": statistics.mean(r.get("rl/wait_seconds", 0.0) for r in timed),
                      "reward_last5": statistics.mean(r["rl/reward"] for r in rs[-5:])})
    base = table[0]["step_s"]
    print(f"| rl.max_staleness | rl.rollout_devices (of {devices}) | step (median, s) | vs the first | "
          "sampling (mean, s) | wait (mean, s) | rl/reward, last 5 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for t in table:
        print(f"| {t['k']} | {t['rollout_devices']} | {t['step_s']:.3f} | {base / t['step_s']:.2f}x | "
              f"{t['sample_s']:.3f} | {t['wait_s']:.3f} | {t['reward_last5']:.3f} |")
    (out / "summary.json").write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
