"""`spmdgpt train -m [--parallel N] optimizer.lr=1e-3,3e-3 optimizer.name=adamw,muon ...`: a
grid of training runs (Hydra's multirun syntax: `key=a,b,c`, `key=range(1,4)`, `key=glob(...)`
are sweeps; every other override is shared by all runs).

Each point of the grid is one `spmdgpt train` process with its own run directory under the
sweep folder (`run.dir=` names it; default `runs/sweep-<hash of the overrides>`, so the same
command names the same folder), its console output in `<sweep>/logs/<run>.log`. Runs go one
after another, or N at a time with `--parallel N`. On a machine with NVIDIA GPUs the runs at a
time get disjoint, equal groups of them through CUDA_VISIBLE_DEVICES (8 GPUs, --parallel 4: two
each; $CUDA_VISIBLE_DEVICES, when set, is the list that is split), and more runs at a time than
GPUs is refused; CPU runs share the machine. Rerunning the same sweep resumes it: finished runs
(a checkpoint at their last step) are skipped, interrupted ones resume from their newest
checkpoint. At the end: a table of the swept values, final train and validation loss and
tokens/s, also written as `<sweep>/summary.json` and `<sweep>/summary.md`. Every point's config is
checked before any run starts (a bad one is refused, exit 2, naming the point); a run that fails
all the same is reported with its error line and log. Exit code: 0, or the first failed run's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

from spmdgpt.config import SECTIONS, ConfigError, validate


def split_flags(items: List[str]) -> Tuple[int, List[str]]:
    """(--parallel N, the rest) of a multirun command line (-m / --multirun removed)."""
    parallel, rest, it = 1, [], iter(items)
    for item in it:
        if item in ("-m", "--multirun"):
            continue
        if item == "--parallel" or item.startswith("--parallel="):
            value = item.partition("=")[2] or next(it, "")
            try:
                parallel = int(value)
            except ValueError:
                raise ConfigError(
                    [f"--parallel {value!r}: give a number of runs at a time, e.g. --parallel 2"]
                ) from None
            if parallel < 1:
                raise ConfigError([f"--parallel {parallel} must be >= 1"])
            continue
        rest.append(item)
    return parallel, rest


def grid(overrides: List[str]) -> Tuple[List[str], List[List[Tuple[str, str]]]]:
    """(the shared overrides, the points: [(key, value), ...] per run, in product order)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as e:
        raise ConfigError([f"sweep overrides: {str(e).splitlines()[0]}"]) from None
    fixed, axes = [], []
    for item, o in zip(overrides, parsed, strict=True):
        if o.is_sweep_override():
            key = o.get_key_element()
            axes.append([(key, v) for v in o.sweep_string_iterator()])
        else:
            fixed.append(item)
    if not axes:
        raise ConfigError(["train -m needs at least one swept override, e.g. optimizer.lr=1e-3,3e-3"])
    return fixed, [list(p) for p in itertools.product(*axes)]


def run_name(i: int, point) -> str:
    """e.g. 000-lr-0.001_d_model-32 (no '=': the name goes into a run.dir=... override)."""
    text = "_".join(f"{k.rsplit('.', 1)[-1]}-{v}" for k, v in point)
    return f"{i:03d}-" + re.sub(r"[^A-Za-z0-9._+-]", "-", text)[:120]


def finished(run_dir: Path, steps: int) -> bool:
    ckpt = run_dir / "checkpoints"
    return ckpt.is_dir() and any(p.name == str(steps) for p in ckpt.iterdir())


def last_error(log: Path) -> str:
    """A failed run's reason: its log's last `spmdgpt: error:` line (else its last line), and
    where the whole log is."""
    lines = [ln.strip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    errors = [ln.removeprefix("spmdgpt: error: ") for ln in lines if ln.startswith("spmdgpt: error: ")]
    reason = errors[-1] if errors else (lines[-1] if lines else "no output")
    return f"{reason} (log: {log})"


def summarize(run_dir: Path) -> dict:
    from spmdgpt.run.files import jsonl_rows

    rows = jsonl_rows(run_dir / "metrics.jsonl")
    train = [r for r in rows if r.get("loss") is not None and "event" not in r]
    val = [r for r in rows if r.get("val/loss") is not None]
    rates = [r["tokens_per_sec"] for r in train if r.get("tokens_per_sec")]
    return {"step": train[-1]["step"] if train else 0, "train_loss": train[-1]["loss"] if train else None,
            "val_loss": val[-1]["val/loss"] if val else None,
            "tokens_per_sec": statistics.median(rates) if rates else None}


def table(keys: List[str], results: List[dict]) -> str:
    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    head = keys + ["status", "step", "train loss", "val loss", "tokens/s", "run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r["values"][k] for k in keys] + [r["status"], str(r["step"]), fmt(r["train_loss"], ".4f"),
                                                  fmt(r["val_loss"], ".4f"), fmt(r["tokens_per_sec"], ",.0f"), r["run"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def visible_gpus(env, proc: Path = Path("/proc/driver/nvidia/gpus")) -> List[str]:
    """The NVIDIA GPUs the runs may use: $CUDA_VISIBLE_DEVICES's list when it is set (empty: none),
    else indices 0..n-1 of the n GPUs the driver lists under /proc (none without the driver)."""
    if "CUDA_VISIBLE_DEVICES" in env:
        return [g.strip() for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    return [str(i) for i in range(len(list(proc.iterdir())))] if proc.is_dir() else []


def gpu_groups(parallel: int, gpus: List[str]) -> List[Optional[str]]:
    """The CUDA_VISIBLE_DEVICES value of each of the `parallel` run slots: the GPUs cut into
    disjoint groups of len(gpus) // parallel (left-over GPUs unused), or None for every slot (the
    runs inherit the environment) without GPUs or with one run at a time."""
    if parallel == 1 or not gpus:
        return [None] * parallel
    if len(gpus) < parallel:
        raise ConfigError([f"--parallel {parallel} with {len(gpus)} GPU(s) ({','.join(gpus)}): runs at a time "
                           f"do not share a GPU; use --parallel {len(gpus)} or fewer"])
    k = len(gpus) // parallel
    return [",".join(gpus[i * k:(i + 1) * k]) for i in range(parallel)]


def run(items: List[str]) -> int:
    parallel, overrides = split_flags(items)
    groups = gpu_groups(parallel, visible_gpus(os.environ))
    fixed, points = grid(overrides)
    keys = [k for k, _ in points[0]]
    sweep_dir: Optional[Path] = None
    shared = []
    for item in fixed:
        if item.startswith("run.dir="):
            sweep_dir = Path(item.partition("=")[2])
        else:
            shared.append(item)
    if sweep_dir is None:
        digest = hashlib.sha256("\0".join(overrides).encode()).hexdigest()[:8]
        sweep_dir = Path("runs") / f"sweep-{digest}"
    runs = []
    for i, point in enumerate(points):
        point_overrides = [f"{k}={v}" for k, v in point]
        cfg = checked_point(shared, point_overrides)  # a bad point is refused before anything runs
        runs.append((run_name(i, point), point_overrides, cfg.train.steps, dict(point)))
    sizes = [len(dict.fromkeys(p[i][1] for p in points)) for i in range(len(keys))]
    rows = execute(sweep_dir, shared, runs, groups, overrides,
                   f"({' x '.join(map(str, sizes))} over {', '.join(keys)})")
    print(table(keys, rows))
    return next((r["code"] for r in rows if r["code"]), 0)


def checked_point(shared: List[str], point_overrides: List[str]):
    """The Config of one point of a grid (the shared overrides, then the point's), or a ConfigError
    naming the point and its first problem (the mesh is left to each run: it needs the devices)."""
    from spmdgpt.config import load_config

    cfg = load_config([*shared, *point_overrides])
    errs = validate(cfg, 1, sections=tuple(s for s in SECTIONS if s != "layout"))
    if errs:
        raise ConfigError([f"sweep point {' '.join(point_overrides)}: {errs[0]}" if point_overrides else errs[0]])
    return cfg


def execute(sweep_dir: Path, shared: List[str], runs: list, groups: List[Optional[str]], overrides: List[str],
            what: str = "") -> List[dict]:
    """Run `runs` ((name, the point's overrides, its train.steps, {key: value}) each, checked
    already) as `spmdgpt train` processes under `sweep_dir`, len(groups) at a time (slot i with
    CUDA_VISIBLE_DEVICES groups[i], `gpu_groups`), skipping the finished ones; then each run's row ({"run",
    "values", "status", "code", "step", "train_loss", "val_loss", "tokens_per_sec"}), also written
    as summary.json (with `overrides`) and summary.md. `spmdgpt ladder` runs its grid through it."""
    (sweep_dir / "logs").mkdir(parents=True, exist_ok=True)
    print(f"sweep {sweep_dir}: {len(runs)} runs{' ' * bool(what)}{what}, {len(groups)} at a time"
          + (f" (GPUs {' | '.join(groups)})" if groups[0] else ""), file=sys.stderr)
    results: dict = {}
    pending = list(runs)
    active: list = []
    try:
        _run_all(sweep_dir, shared, groups, pending, active, results)
    finally:  # interrupted: the runs still going get SIGINT too (they checkpoint); wait for them
        for _, proc, log, _ in active:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
    rows = [{"run": name, "values": values, **results[name], **summarize(sweep_dir / name)}
            for name, _, _, values in runs]
    (sweep_dir / "summary.json").write_text(json.dumps({"overrides": overrides, "runs": rows}, indent=2) + "\n")
    (sweep_dir / "summary.md").write_text(table(list(runs[0][3]) if runs else [], rows) + "\n")
    return rows


def _run_all(sweep_dir: Path, shared: List[str], groups: List[Optional[str]], pending: list, active: list,
             results: dict) -> None:
    """Run `pending` with at most len(groups) at a time, each in a free slot (a run in slot i sees
    the GPUs groups[i]); `active` holds (name, process, log, slot) while they run."""
    while pending or active:
        while pending and len(active) < len(groups):
            name, point_overrides, steps, values = pending.pop(0)
            run_dir = sweep_dir / name
            if finished(run_dir, steps):
                results[name] = {"status": "skipped (finished)", "code": 0}
                print(f"  {name}: finished earlier, skipped", file=sys.stderr)
                continue
            log = open(sweep_dir / "logs" / f"{name}.log", "ab")
            cmd = [sys.executable, "-m", "spmdgpt", "train", *shared, *point_overrides, f"run.dir={run_dir}",
                   "train.progress=false"]
            slot = min(set(range(len(groups))) - {a[3] for a in active})
            env = None if groups[slot] is None else {**os.environ, "CUDA_VISIBLE_DEVICES": groups[slot]}
            print(f"  {name}: running{' (resuming)' if run_dir.exists() else ''}"
                  f"{'' if env is None else f' on GPUs {groups[slot]}'}", file=sys.stderr)
            active.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log, slot))
        time.sleep(0.2)
        for entry in list(active):
            name, proc, log, _ = entry
            code = proc.poll()
            if code is None:
                continue
            log.close()
            active.remove(entry)
            results[name] = {"status": "done" if code == 0 else f"failed ({code})", "code": code}
            why = "" if code == 0 else f": {last_error(sweep_dir / 'logs' / f'{name}.log')}"
            print(f"  {name}: {results[name]['status']}{why}", file=sys.stderr)
