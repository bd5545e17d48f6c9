"""μP's coordinate check, plotted: standard against mup across widths, standard against
completep across depths (spmdgpt.scaling.size.coordinate_check).

    python benchmarks/coord_check.py --out coord_check.png [--steps 4] [--widths 64,128,256,512,1024]
        [--depths 2,4,8,16] [--set model.mlp=swiglu ...]

The model is the staircase experiment's (2 layers, 4 heads, untied embeddings, AdamW at lr 3e-3
without warmup, 8 x 32 tokens; width 64 for the depth rows), `--set` adds overrides. One
figure: a row per check, a column per quantity (attention output, MLP output, residual stream:
means over the layers, the depth rows' residual the last layer's; logits), the RMS after each
step against the size on log-log axes, one line per step. Prints how many times each quantity
grows from the smallest size to the largest (`scaling.growth`: the layer furthest from 1; below
1 it shrinks) after the last step, and writes the numbers beside the figure (.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from spmdgpt.mesh.runtime import set_default_xla_flags  # noqa: E402

set_default_xla_flags()

from spmdgpt.scaling.size import QUANTITIES, coordinate_check, growth  # noqa: E402

BASE = ["+experiment=staircase", "model.tie_embeddings=false", "optimizer.warmup_steps=0", "optimizer.lr=3e-3",
        "data.batch_size=8", "data.seq_len=32", "model.scan_unroll=false"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="coord_check.png", help="the figure (PNG); its numbers go beside it (.json)")
    ap.add_argument("--steps", type=int, default=4, help="AdamW steps before the last reading")
    ap.add_argument("--widths", default="64,128,256,512,1024", help="d_model of the width rows (the first: base)")
    ap.add_argument("--depths", default="2,4,8,16", help="num_layers of the depth rows (the first: base)")
    ap.add_argument("--set", nargs="*", default=[], help="more config overrides for every model")
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    depths = [int(d) for d in args.depths.split(",")]
    rows = [("width", p, widths, [*BASE, *args.set, f"model.parametrization={p}"]) for p in ("standard", "mup")]
    rows += [("depth", p, depths, [*BASE, "model.d_model=64", *args.set, f"model.parametrization={p}"])
             for p in ("standard", "completep")]
    results = {}
    for axis, p, sizes, overrides in rows:
        check = coordinate_check(overrides, sizes, steps=args.steps, axis=axis)
        results[f"{axis}/{p}"] = check
        print(f"{axis:5s} {p:9s} {sizes[0]} -> {sizes[-1]} after {args.steps} steps, times: "
              + "  ".join(f"{q} {growth(check, q):7.3g}" for q in QUANTITIES), flush=True)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({k: {str(s): v for s, v in c.items()} for k, c in results.items()}, f)
    plot(results, args.steps, args.out)
    print(f"wrote {args.out}")


def plot(results, steps: int, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(len(results), len(QUANTITIES), figsize=(4 * len(QUANTITIES), 3 * len(results)),
                             squeeze=False)
    for r, (name, check) in enumerate(results.items()):
        sizes = sorted(check)
        for c, q in enumerate(QUANTITIES):
            ax = axes[r][c]
            for t in range(steps + 1):
                last = name.startswith("depth") and q == "resid"
                ys = [check[s][q][t][-1] if last else float(np.mean(check[s][q][t])) for s in sizes]
                ax.plot(sizes, ys, marker="o", color=plt.cm.viridis(t / max(steps, 1)), label=f"step {t}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{name}: {q}" + (" (last layer)" if name.startswith("depth") and q == "resid" else ""),
                         fontsize=9)
            ax.set_xlabel(name.split("/")[0])
            if c == 0:
                ax.set_ylabel("RMS")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    main()
