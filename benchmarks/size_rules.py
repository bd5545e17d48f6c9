"""What the size knob's batch and warmup rules rest on: at fixed compute, does the best batch
(and the best warmup share) move as the budget and the compute-optimal size grow?

    python benchmarks/size_rules.py [--points 2e12:2,8e12:3] [--batches 8,16,32,64]
        [--lrs 0.025,0.05] [--warmups 0.02,0.1,0.3] [--parallel 2] [--out runs/size_rules]

Every point is one `spmdgpt train +experiment=ladder_gutenberg` run (the scaling ladder's recipe:
character-level Gutenberg selection, 128-token sequences, Muon, the final val/loss) through the
sweep machinery (a run directory each under --out, resumable, --parallel). For each budget C and
model.size s of --points, each batch B of --batches and each Muon rate of --lrs: C / (6 N B x 128)
steps (N the size's matmul parameters, as the ladder counts them), warmup 10% of the steps (the
ladder's `ladder.warmup`). Then, at batch 16 (when among --batches, else the second) and the
first rate, the warmup shares of --warmups. Prints val/loss by batch and rate per
point, the best batch per point, and the warmup table; writes --out/size_rules.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spmdgpt.cli.sweep import checked_point, execute
from spmdgpt.scaling.ladder import budget_name, final_metric, sized_params

SHARED = ["+experiment=ladder_gutenberg", "checkpoint.keep=1"]
METRIC = "val/loss"


def plan(args) -> list:
    cfg = checked_point(SHARED, [])
    runs = []
    for item in args.points.split(","):
        c, s = float(item.split(":")[0]), int(item.split(":")[1])
        n = sized_params(cfg, s, SHARED)
        batches = [int(b) for b in args.batches.split(",")]
        lrs = [float(x) for x in args.lrs.split(",")]
        mid = 16 if 16 in batches else batches[min(1, len(batches) - 1)]
        grid = [(b, lr, 0.1) for b in batches for lr in lrs]
        grid += [(mid, lrs[0], w) for w in (float(x) for x in args.warmups.split(",")) if w != 0.1]
        for b, lr, w in grid:
            steps = int(round(c / (6.0 * n * b * cfg.data.seq_len)))
            name = f"C{budget_name(c)}-size{s}-b{b}-lr{lr:g}-w{w:g}"
            over = [f"model.size={s}", f"data.batch_size={b}", f"optimizer.muon_lr={lr}", f"train.steps={steps}",
                    f"optimizer.warmup_steps={int(round(w * steps))}"]
            runs.append((name, over, steps, {"C": f"{c:.3g}", "size": str(s), "N": f"{n:.3g}", "batch": str(b),
                                             "muon_lr": f"{lr:g}", "warmup": f"{w:g}", "steps": str(steps)}))
    return runs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", default="2e12:2,8e12:3", help="budget:model.size pairs")
    p.add_argument("--batches", default="8,16,32,64")
    p.add_argument("--lrs", default="0.025,0.05", help="optimizer.muon_lr values")
    p.add_argument("--warmups", default="0.02,0.1,0.3", help="warmup shares at batch 16 and the first rate")
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--out", default="runs/size_rules")
    args = p.parse_args()
    out = Path(args.out)
    runs = plan(args)
    for _, over, _, _ in runs:
        checked_point(SHARED, over)
    rows = execute(out, SHARED, runs, [None] * args.parallel, SHARED, "(size rules: batch x rate, warmup)")
    result = []
    for (name, _, _, values), r in zip(runs, rows, strict=True):
        result.append({"run": name, **values, "loss": final_metric(out / name, METRIC), "status": r["status"]})
    (out / "size_rules.json").write_text(json.dumps(result, indent=2) + "\n")
    for key in dict.fromkeys((r["C"], r["size"]) for r in result):
        mine = [r for r in result if (r["C"], r["size"]) == key]
        print(f"\nC {key[0]}, model.size {key[1]} (N {mine[0]['N']}): {METRIC} by batch (rows) and muon_lr, warmup 0.1")
        lrs = list(dict.fromkeys(r["muon_lr"] for r in mine if r["warmup"] == "0.1"))
        print("| batch | steps | " + " | ".join(lrs) + " |")
        best = None
        for b in dict.fromkeys(r["batch"] for r in mine if r["warmup"] == "0.1"):
            cells = {r["muon_lr"]: r for r in mine if r["batch"] == b and r["warmup"] == "0.1"}
            steps = next(iter(cells.values()))["steps"]
            print(f"| {b} | {steps} | " + " | ".join(f"{cells[x]['loss']:.4f}" if cells[x]["loss"] else "-"
                                                    for x in lrs) + " |")
            for x in lrs:
                if cells[x]["loss"] and (best is None or cells[x]["loss"] < best[0]):
                    best = (cells[x]["loss"], b, x)
        if best:
            print(f"best: batch {best[1]} at muon_lr {best[2]} ({best[0]:.4f})")
        at = (mine[-1]["batch"], mine[-1]["muon_lr"])  # (the warmup runs' batch and rate: the point's last runs)
        warm = sorted((r for r in mine if (r["batch"], r["muon_lr"]) == at), key=lambda r: float(r["warmup"]))
        print("warmup share: " + ", ".join(f"{r['warmup']}: {r['loss']:.4f}" for r in warm if r["loss"]))
    print(f"wrote {out / 'size_rules.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
