"""The chain walk: GRPO acting on the chain environment against SFT continued, at equal wall time
(the RL issue, item 2).

    python benchmarks/chain_walk.py [--out DIR] [--seeds 0,1] [--sft-steps 300] [--grpo-steps 150]

1. `chain_sft` for --sft-steps steps: the arithmetic walk's model learns to carry out a chain of
   one or two operations one environment call at a time from 2,000 demonstrations.
2. Per seed (train.seed), two arms from it, each a `spmdgpt train` process:
   - `grpo`: `chain_grpo` (rl.env=chain: episodes of up to four calls on chains of two to four
     operations, the reward the share done right) for --grpo-steps steps; its wall time T is the
     budget of
   - `sft_more`: `chain_sft` continued on the demonstrations, train.time_budget=T.
   Both score val/reward: greedy episodes on the same 64 held-out chains (the chain environment's
   reward).
Finished runs are kept (a rerun skips them). Prints a Markdown table of each arm's val/reward per
seed and writes DIR/summary.json; `spmdgpt plot` draws each seed's arms into DIR/plots-SEED.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from distill import QUIET, print_arms, rows, summarise_seed, train  # (`spmdgpt train` runs, kept once finished)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/chain_walk"))
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--sft-steps", type=int, default=300)
    ap.add_argument("--grpo-steps", type=int, default=150)
    a = ap.parse_args()
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    sft = out / "sft"
    train(sft, "+experiment=chain_sft", *QUIET, f"train.steps={a.sft_steps}")
    before = [r["val/reward"] for r in rows(sft) if "val/reward" in r][-1]
    summary: dict = {"sft": before}
    for seed in a.seeds.split(","):
        runs = {name: out / f"{name}-{seed}" for name in ("grpo", "sft_more")}
        common = [f"checkpoint.init_from={sft}", f"train.seed={seed}", *QUIET, "checkpoint.enabled=false"]
        wall = {"grpo": train(runs["grpo"], "+experiment=chain_grpo", *common, f"train.steps={a.grpo_steps}",
                              f"train.eval_every={max(a.grpo_steps // 5, 1)}")}
        wall["sft_more"] = train(runs["sft_more"], "+experiment=chain_sft", *common,
                                 f"train.time_budget={wall['grpo']:.0f}", "train.eval_every=100")
        summarise_seed(out, seed, runs, wall, summary)
    print(f"chain_sft ({a.sft_steps} steps): val/reward {before:.3f}")
    print_arms(summary, ["grpo", "sft_more"])
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
