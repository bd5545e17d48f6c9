"""Learning-rate transfer across widths: standard parametrization against μP (and Muon), the
picture that shows whether the best learning rate moves as the model widens.

    python benchmarks/mup_transfer.py [--widths 64,128,256,512] [--lrs 4.9e-4,...] [--steps 200]
        [--modes standard,mup,muon] [--jobs 2] [--out benchmarks/out/mup_transfer.png] [--set overrides]
        [--collect DIR]

Each point is one `spmdgpt train +experiment=shakespeare_char` run (character-level Tiny
Shakespeare, 2 layers of 4 heads, untied embeddings, 16 x 64 tokens a step, `--steps` steps of a
cosine schedule with 20 warmup steps, no weight decay), its final val/loss over 8 fixed batches:

    standard   AdamW, model.parametrization=standard: one learning rate for every parameter
    mup        AdamW, model.parametrization=mup, base width the first width
    muon       Muon for the hidden matrices (its lr the swept one; AdamW at 3e-3 for the rest),
               standard parametrization: Muon's update is orthogonalised and scaled by the
               matrix's shape, so it may transfer without μP

Prints a table (val/loss by width and learning rate, the best learning rate per width and how
far it moves from the narrowest to the widest) and draws loss against learning rate, a line per
width, a panel per mode.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

COMMON = ["+experiment=shakespeare_char", "model.num_layers=2", "model.tie_embeddings=false", "data.batch_size=16",
          "data.seq_len=64", "optimizer.warmup_steps=20", "optimizer.weight_decay=0.0", "train.time_budget=null",
          "train.eval_batches=8", "train.rollout_tokens=0", "checkpoint.enabled=false", "train.progress=false",
          "train.log_every=50"]
MODES = {
    "standard": ["optimizer.name=adamw", "model.parametrization=standard"],
    "mup": ["optimizer.name=adamw", "model.parametrization=mup"],
    "muon": ["optimizer.name=muon", "model.parametrization=standard", "optimizer.lr=3e-3"],
}


def run(mode: str, width: int, lr: float, steps: int, base: int, root: Path, extra=()) -> float:
    rd = root / f"{mode}-{width}-{lr:.3g}"
    lr_field = "optimizer.muon_lr" if mode == "muon" else "optimizer.lr"
    args = [*COMMON, *MODES[mode], f"model.d_model={width}", f"model.base_width={base}", f"{lr_field}={lr}",
            f"train.steps={steps}", f"train.eval_every={steps}", *extra, f"run.dir={rd}"]
    done = subprocess.run([sys.executable, "-m", "spmdgpt", "train", *args], capture_output=True, text=True)
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
        return math.nan
    return final_loss(rd)


def final_loss(rd: Path) -> float:
    """A run's last val/loss (NaN when it has none, or it is not finite)."""
    if not (rd / "metrics.jsonl").exists():
        return math.nan
    rows = [json.loads(line) for line in (rd / "metrics.jsonl").read_text().splitlines()]
    losses = [r["val/loss"] for r in rows if "val/loss" in r]
    return losses[-1] if losses and math.isfinite(losses[-1]) else math.nan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="64,128,256,512")
    ap.add_argument("--lrs", default=",".join(f"{2.0 ** e:.3g}" for e in range(-11, -4)))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--modes", default="standard,mup,muon")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/out/mup_transfer.png")
    ap.add_argument("--set", nargs="*", default=[], help="more overrides for every run (e.g. model.qk_norm=false)")
    ap.add_argument("--collect", default=None, help="a folder of an earlier sweep's runs (MODE-WIDTH-LR): report "
                    "them instead of training")
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    lrs = [float(v) for v in args.lrs.split(",")]
    modes = args.modes.split(",")
    points = [(m, w, lr) for m in modes for w in reversed(widths) for lr in lrs]  # (the slow widths first)
    if args.collect:  # (the runs of an earlier sweep, kept in a folder: MODE-WIDTH-LR each)
        losses = {p: final_loss(Path(args.collect) / f"{p[0]}-{p[1]}-{p[2]:.3g}") for p in points}
    else:
        with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
            losses = dict(zip(points, pool.map(lambda p: run(*p, args.steps, widths[0], Path(tmp), args.set),
                                               points)))
    for m in modes:
        print(f"\n{m}: val/loss after {args.steps} steps (rows: width; columns: learning rate)\n")
        print("| width | " + " | ".join(f"{lr:.3g}" for lr in lrs) + " | best lr |")
        print("| ---: |" + " ---: |" * (len(lrs) + 1))
        best = {}
        for w in widths:
            row = [losses[m, w, lr] for lr in lrs]
            best[w] = lrs[min(range(len(lrs)), key=lambda i: row[i] if math.isfinite(row[i]) else math.inf)]
            edge = " (the grid's edge)" if best[w] in (lrs[0], lrs[-1]) else ""
            print(f"| {w} | " + " | ".join(f"{v:.4f}" for v in row) + f" | {best[w]:.3g}{edge} |")
        print(f"\n{m}: the best learning rate moves {best[widths[-1]] / best[widths[0]]:.3g}x from width "
              f"{widths[0]} to {widths[-1]}; best loss by width: "
              + ", ".join(f"{w}: {min(v for v in (losses[m, w, lr] for lr in lrs) if math.isfinite(v)):.4f}"
                          for w in widths))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps([[m, w, lr, v] for (m, w, lr), v in losses.items()]))
    plot(losses, modes, widths, lrs, out)
    print(f"wrote {out}")


def plot(losses, modes, widths, lrs, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(modes), figsize=(4.5 * len(modes), 3.6), sharey=True, squeeze=False)
    for ax, m in zip(axes[0], modes):
        for i, w in enumerate(widths):
            color = plt.cm.viridis(i / max(len(widths) - 1, 1))
            ax.plot(lrs, [losses[m, w, lr] for lr in lrs], marker="o", color=color, label=f"width {w}")
        ax.set_xscale("log", base=2)
        ax.set_title(m)
        ax.set_xlabel("learning rate" + (" (Muon's)" if m == "muon" else ""))
    axes[0][0].set_ylabel("val/loss")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    main()
