"""`spmdgpt ladder [lr] [--parallel N] [out=DIR] +experiment=... ladder.budgets=[...] ladder.sizes=[...]`:
a scaling ladder, each point a training run through the sweep machinery (cli/sweep.py: a run
directory per point under out=, resumable, --parallel), then the fits and plots (spmdgpt.scaling.ladder).

    spmdgpt ladder +experiment=ladder_tiny out=runs/ladder
        -> runs/ladder/ladder.json (points, law E A B alpha beta, intervals, compute-optimal rule,
           forecast), ladder.md, isoflop.png, law.png, forecast.png
    spmdgpt ladder lr +experiment=... ladder.widths=[64,128,256] ladder.lrs=[1e-3,3e-3,1e-2] out=DIR
        -> DIR/ladder_lr.json (best learning rate per width, how far it moves), lr.md, lr.png

Every point's config is checked, and the grid against the corpus (ladder.epochs), before any
run starts; a rerun skips the finished points. Exit 0, 2 for bad input or a fit the points
cannot make, or the first failed run's code (the fit then uses the points that finished).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, EXIT_USAGE, parse
from spmdgpt.cli.sweep import checked_point, execute, gpu_groups, split_flags, visible_gpus
from spmdgpt.config import ConfigError


@dataclass
class LadderArgs:
    out: Optional[str] = None  # the ladder's folder (default runs/ladder-<hash of the overrides>)


def _folder(args: LadderArgs, overrides: List[str], mode: str) -> Path:
    if args.out:
        return Path(args.out)
    digest = hashlib.sha256("\0".join(overrides).encode()).hexdigest()[:8]
    return Path("runs") / f"ladder{'-lr' * (mode == 'lr')}-{digest}"


def _needs_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(["spmdgpt ladder draws its plots with matplotlib: pip install 'matplotlib==3.11.2' (or the "
                           "spmdgpt[plot] extra)"]) from None


def run(items: List[str]) -> int:
    import os

    from spmdgpt.scaling import ladder

    mode = "lr" if items[:1] == ["lr"] else "isoflop"
    parallel, rest = split_flags(items[1:] if mode == "lr" else items)
    args, overrides = parse(rest, LadderArgs)
    _needs_matplotlib()
    ladder.refuse_per_point(overrides, lr_mode=mode == "lr")
    groups = gpu_groups(parallel, visible_gpus(os.environ))
    from spmdgpt.config import load_config

    cfg = load_config(overrides)  # (the shape is each point's: checked below, not the experiment's own)
    ladder.check_metric(cfg)
    out = _folder(args, overrides, mode)
    if mode == "lr":
        return _lr(cfg, overrides, out, groups)
    points = ladder.plan_grid(cfg, overrides)
    for p in points:  # a bad point (a size the heads do not divide, ...) is refused before any run
        checked_point(overrides, p.overrides)
    ladder.check_epochs(cfg, points)
    runs = [(p.name, p.overrides, p.steps, {"budget": f"{p.budget:.3g}", "size": str(p.size)}) for p in points]
    rows = execute(out, overrides, runs, groups, overrides,
                   f"({len(cfg.ladder.budgets)} budgets x {len(cfg.ladder.sizes)} sizes)")
    for p, r in zip(points, rows, strict=True):
        p.loss, p.status = ladder.final_metric(out / p.name, cfg.ladder.metric), r["status"]
    code = next((r["code"] for r in rows if r["code"]), EXIT_OK)
    from spmdgpt.scaling.laws import LawError

    print(f"fitting the law to {sum(p.loss is not None for p in points)} points, {cfg.ladder.bootstrap} bootstrap "
          "refits (ladder.bootstrap) ...", file=sys.stderr)
    try:
        result = ladder.analyse(cfg, overrides, points)
    except LawError as e:
        have = sum(p.loss is not None for p in points)
        print(f"spmdgpt: error: the ladder cannot be fitted ({have} of {len(points)} points have a final "
              f"{cfg.ladder.metric}, ladder.metric): {e}", file=sys.stderr)
        return code or EXIT_USAGE
    if cfg.ladder.check:  # the forecast's own run, beside the grid's
        f = result["forecast"]
        point = ladder.Point(f["run"], f["budget"], f["size"], f["params"], f["steps"], f["tokens"], f["overrides"])
        checked_point(overrides, point.overrides)
        ladder.check_epochs(cfg, [point])
        row = execute(out / "check", overrides, [(point.name, point.overrides, point.steps,
                                                  {"budget": f"{point.budget:.3g}", "size": str(point.size)})],
                      groups, overrides, "(the forecast's check)")[0]
        code = code or row["code"]
        result = ladder.with_check(result, ladder.final_metric(out / "check" / point.name, cfg.ladder.metric))
    text = ladder.report(result)
    (out / "ladder.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "ladder.md").write_text(text + "\n")
    paths = ladder.plot_ladder(result, out)
    print(text)
    print(f"wrote {out / 'ladder.json'}, {out / 'ladder.md'}, " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return code


def _lr(cfg, overrides: List[str], out: Path, groups) -> int:
    from spmdgpt.scaling import ladder

    points = ladder.lr_grid(cfg, overrides)
    if cfg.optimizer.warmup_steps >= cfg.train.steps:
        print(f"note: optimizer.warmup_steps={cfg.optimizer.warmup_steps} is every point's whole run "
              f"(train.steps={cfg.train.steps}): set a smaller one", file=sys.stderr)
    steps = []
    for p in points:
        steps.append(checked_point(overrides, p["overrides"]).train.steps)
    runs = [(p["name"], p["overrides"], s, {"d_model": str(p["width"]), "lr": f"{p['lr']:.3g}"})
            for p, s in zip(points, steps, strict=True)]
    rows = execute(out, overrides, runs, groups, overrides,
                   f"({len(set(cfg.ladder.widths))} widths x {len(set(cfg.ladder.lrs))} learning rates)")
    for p, r in zip(points, rows, strict=True):
        p["loss"], p["status"] = ladder.final_metric(out / p["name"], cfg.ladder.metric), r["status"]
    result = ladder.analyse_lr(points, cfg.ladder.metric)
    text = ladder.report_lr(result)
    (out / "ladder_lr.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "lr.md").write_text(text + "\n")
    path = ladder.plot_lr(result, out)
    print(text)
    print(f"wrote {out / 'ladder_lr.json'}, {out / 'lr.md'}, {path}", file=sys.stderr)
    return next((r["code"] for r in rows if r["code"]), EXIT_OK)
