"""`spmdgpt plot RUN [RUN ...] [out=DIR] [names=a,b]`: PNGs of runs' metrics.jsonl, the runs
overlaid (one colour each, named in the legend), written into out= (default: RUN/plots for one
run; for several, plots/A+B/ in the runs' common folder, named by their paths from there):

    loss.png       train loss (line) and validation loss (dots) against steps and against tokens
    lr.png         learning rate against steps
    grad_norm.png  gradient norm against steps (log scale)
    mfu.png        model FLOPs utilisation against steps (when the runs logged it)
    reward.png     reinforcement learning's reward: each step's rollouts (rl/reward, line) and the
                   greedy validation reward (val/reward, dots) against steps (GRPO runs)

Each figure is 1000 x 600 pixels (loss.png: 1400 x 600, two panels). Needs matplotlib (the
`plot` extra)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, EXIT_WRITE_FAILED, parse
from spmdgpt.config import ConfigError

DPI = 100
SIZES = {"loss": (14, 6), "lr": (10, 6), "grad_norm": (10, 6), "mfu": (10, 6), "reward": (10, 6)}  # inches at DPI


@dataclass
class PlotArgs:
    out: Optional[str] = None  # folder for the PNGs (default: RUN/plots; several: plots/A+B in their common folder,
    #   A and B their paths from it)
    names: Optional[str] = None  # comma-separated legend names (default: the run folders' names)


@dataclass
class Run:
    name: str
    rows: list  # metrics.jsonl rows with a loss (training rows)
    val: list  # rows with val/loss
    tokens_per_step: Optional[int]
    rewards: list  # rows with val/reward (GRPO)


def together(names: List[str], most: int = 80) -> str:
    """The folder name of several runs' plots: their names joined by "+" ("a+b"), or the first
    ones and how many more where that would be long; characters a file name cannot hold as "_"."""
    import re

    safe = [re.sub(r"[^\w.=-]", "_", n) or "_" for n in names]
    joined = "+".join(safe)
    if len(joined) <= most:
        return joined
    head = []
    for n in safe:
        if len("+".join([*head, n])) > most - 12:
            break
        head.append(n)
    return "+".join(head or [safe[0][:most - 12]]) + f"+{len(safe) - max(len(head), 1)}more"


def from_common(paths: List[Path]) -> tuple:
    """(the deepest folder holding every run, each run's path from it)."""
    import os

    common = Path(os.path.commonpath([p.resolve() for p in paths]))
    return common, [str(p.resolve().relative_to(common)) for p in paths]


def read_run(path: Path, name: str) -> Run:
    from spmdgpt.config import load_run_config
    from spmdgpt.run.files import jsonl_rows

    metrics = path / "metrics.jsonl"
    if not metrics.is_file():
        raise ConfigError([f"{path}: no metrics.jsonl there; give training run directories"])
    rows = jsonl_rows(metrics)  # (a killed run's torn last line skipped)
    try:
        cfg = load_run_config(path)
        tokens = cfg.data.batch_size * cfg.data.seq_len
    except ConfigError:
        tokens = None
    train = [r for r in rows if r.get("loss") is not None and "event" not in r]
    val = [r for r in rows if r.get("val/loss") is not None]
    rewards = [r for r in rows if r.get("val/reward") is not None]
    if not train and not val and not rewards:
        lines = sum(1 for line in metrics.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip())
        other = lines - len(rows)  # (what is there instead: lines that are not JSON rows)
        raise ConfigError([f"{metrics}: no training or validation rows yet"
                           + (f" ({other} line(s) that are not JSON rows of metrics)" if other else "")])
    return Run(name, train, val, tokens, rewards)


def series(rows: list, key: str):
    pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_runs(runs: List[Run], out: Path) -> List[Path]:
    import io

    import matplotlib

    from spmdgpt.run.files import write_atomic

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    written = []

    def save(fig, name):
        fig.tight_layout()
        path, png = out / f"{name}.png", io.BytesIO()
        fig.savefig(png, format="png", dpi=DPI)
        plt.close(fig)
        write_atomic(path, png.getvalue())  # (never a half-written PNG)
        written.append(path)

    fig, (by_step, by_tokens) = plt.subplots(1, 2, figsize=SIZES["loss"])
    for i, run in enumerate(runs):
        c = colours[i % len(colours)]
        for ax, scale in ((by_step, 1), (by_tokens, run.tokens_per_step)):
            if scale is None:
                continue
            x, y = series(run.rows, "loss")
            ax.plot([s * scale for s in x], y, color=c, lw=1.2, label=f"{run.name} train")
            x, y = series(run.val, "val/loss")
            ax.plot([s * scale for s in x], y, "o--", color=c, ms=5, lw=1, label=f"{run.name} val")
    by_step.set(xlabel="step", ylabel="loss (nats/token)", title="loss against steps")
    by_tokens.set(xlabel="tokens", ylabel="loss (nats/token)", title="loss against tokens")
    for ax in (by_step, by_tokens):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # (no tokens axis for runs without a config.yaml)
            ax.legend(fontsize=8)
    save(fig, "loss")

    for key, ylabel, log in (("lr", "learning rate", False), ("grad_norm", "gradient norm", True),
                             ("mfu", "MFU", False)):
        if not any(series(r.rows, key)[0] for r in runs):
            continue
        fig, ax = plt.subplots(figsize=SIZES[key])
        for i, run in enumerate(runs):
            x, y = series(run.rows, key)
            ax.plot(x, y, color=colours[i % len(colours)], lw=1.2, label=run.name)
        ax.set(xlabel="step", ylabel=ylabel, title=f"{ylabel} against steps")
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, key)

    if any(series(r.rows, "rl/reward")[0] or r.rewards for r in runs):
        fig, ax = plt.subplots(figsize=SIZES["reward"])
        for i, run in enumerate(runs):
            c = colours[i % len(colours)]
            x, y = series(run.rows, "rl/reward")
            ax.plot(x, y, color=c, lw=0.8, alpha=0.6, label=f"{run.name} rollouts")
            x, y = series(run.rewards, "val/reward")
            ax.plot(x, y, "o--", color=c, ms=5, lw=1, label=f"{run.name} val (greedy)")
        ax.set(xlabel="step", ylabel="reward", title="reward against steps")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "reward")
    return written


def run(items: List[str]) -> int:
    paths = [Path(it) for it in items if "=" not in it]
    args, overrides = parse([it for it in items if "=" in it], PlotArgs)
    errs = []
    if overrides:
        errs.append(f"plot takes run directories and out=, names=; not {' '.join(overrides)}")
    if not paths:
        errs.append("give one or more run directories: spmdgpt plot runs/a runs/b [out=DIR]")
    names = args.names.split(",") if args.names else [p.name for p in paths]
    if not args.names and len(set(names)) < len(names) and all(p.is_dir() for p in paths):
        names = from_common(paths)[1]  # (runs of the same name in different folders: each by its path)
    if len(names) != len(paths):
        errs.append(f"names= gives {len(names)} names for {len(paths)} runs")
    errs += [f"{p}: no such directory" for p in paths if not p.is_dir()]
    seen = set()
    for p in paths:
        if p.is_dir() and p.resolve() in seen:
            errs.append(f"{p} is given twice; give each run once")
        seen.add(p.resolve())
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        errs.append(f"out={args.out} is a file, not a folder; give a folder for the PNGs")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        errs.append("spmdgpt plot needs matplotlib: pip install 'matplotlib==3.11.2' (or the spmdgpt[plot] extra)")
    if errs:
        raise ConfigError(errs)
    runs = [read_run(p, n) for p, n in zip(paths, names, strict=True)]
    if args.out:
        out = Path(args.out)
    elif len(paths) == 1:
        out = paths[0] / "plots"
    else:  # (a folder per set of runs, named by their paths, so another set's plots stay: a/r and b/r ->
        # plots/a_r+b_r)
        common, relative = from_common(paths)
        out = common / "plots" / together(relative)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = plot_runs(runs, out)
    except OSError as e:
        from spmdgpt.run.files import os_reason

        print(f"spmdgpt: error: writing plots into {out} failed ({os_reason(e)})", file=sys.stderr)
        return EXIT_WRITE_FAILED
    for path in written:
        print(path)
    return EXIT_OK
