"""Scaling ladders (`spmdgpt ladder`, the command in cli/ladder.py): the grid of training runs,
what they measured, the fits and the plots.

- **The isoFLOP grid** (`plan_grid`): every `ladder.sizes` value of the size knob (`model.size`)
  at every compute budget in `ladder.budgets`, C = 6 N D with N the model's matmul parameters
  (`flops.matmul_params`, the count `train.tokens_per_param` uses) and D its training tokens: a
  point trains round(C / (6 N T)) steps of T = batch_size x seq_len tokens, its warmup
  `ladder.warmup` of them, and its own run directory. Refused before anything runs (one line
  each): fewer points than the law's 5 parameters, a point of fewer than MIN_STEPS steps, a
  point that would read a training dataset more than `ladder.epochs` times.
- **The fits** (`analyse`, spmdgpt.scaling.laws): Chinchilla's approach 3 on every finished point's
  final `ladder.metric` (val/loss), approach 2 where each budget has 3 sizes or more, bootstrap
  intervals, the compute-optimal split, and the forecast at `ladder.forecast_budget` (default 4x
  the largest budget) for `ladder.forecast_size` (default the size whose N is nearest the
  compute-optimal one). With `ladder.check=true` the forecast's point is trained too and its
  measured loss is set beside the forecast.
- **The plots** (`plot_ladder`): isoflop.png (loss against N per budget, approach 2's parabolas
  and minima, the law's curves), law.png (loss against D per size with the law's curves),
  forecast.png (the compute-optimal frontier L(N_opt(C), D_opt(C)) out to the forecast, the
  forecast with its interval, the check's measured loss).
- **Learning-rate transfer** (`lr_grid`, `analyse_lr`, `plot_lr`): `ladder.lrs` at each of
  `ladder.widths` (d_model); the best rate per width and how far it moves.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from spmdgpt.config import Config, ConfigError, override_key
from spmdgpt.config.schema import Parametrization
from spmdgpt.run.files import jsonl_rows

MIN_STEPS = 10  # a point's fewest steps (below, warmup and the schedule are noise)
SHORT_STEPS = 100  # fewer than this: reported as likely off the law (the Gutenberg ladder's shortest three were)
FORECAST_FACTOR = 4  # the default forecast budget, x the largest of the grid's
CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}  # Hoffmann et al. 2022, approach 3
# fields the ladder sets for each point: given on the command line they would be overridden or
# make every size the same model
SET_PER_POINT = ("model.size", "model.d_model", "model.num_layers", "model.num_heads", "train.steps",
                 "train.tokens_per_param", "train.time_budget", "optimizer.warmup_steps", "optimizer.warmup_share",
                 "run.dir")


@dataclasses.dataclass
class Point:
    """One run of the grid: its budget (nominal C), size, N, steps and D, and what it measured."""

    name: str
    budget: float
    size: int
    params: float
    steps: int
    tokens: float
    overrides: List[str]
    loss: Optional[float] = None
    status: str = "planned"

    def row(self) -> dict:
        return {"run": self.name, "budget": self.budget, "size": self.size, "params": self.params,
                "steps": self.steps, "tokens": self.tokens, "tokens_per_param": self.tokens / self.params,
                "flops": 6.0 * self.params * self.tokens, "loss": self.loss, "status": self.status}


def refuse_per_point(overrides: Sequence[str], lr_mode: bool = False) -> None:
    """ConfigError when the command line sets a field the ladder sets per point."""
    own = ("model.d_model", "run.dir") if lr_mode else SET_PER_POINT
    for item in overrides:
        key = override_key(item)
        if key in own:
            if key.startswith("optimizer.warmup"):
                raise ConfigError([f"{item}: spmdgpt ladder sets each point's optimizer.warmup_steps to ladder.warmup "
                                   "(a share) of its steps; set ladder.warmup instead"])
            why = " (out=DIR names the ladder's folder)" if key == "run.dir" else ""
            raise ConfigError([f"{item}: spmdgpt ladder sets {key} for each point; leave it out{why}"])


def check_metric(cfg: Config) -> None:
    """ConfigError, before any run, for a ladder.metric no run logs: loss (the last training
    loss), val/loss (the validation sets' mean) or val/NAME/loss for one of data.datasets."""
    allowed = ["val/loss", "loss", *(f"val/{name}/loss" for name in cfg.data.datasets)]
    if cfg.ladder.metric not in allowed:
        raise ConfigError([f"ladder.metric={cfg.ladder.metric} is not a metric the runs log; choose "
                           f"{', '.join(allowed)}"])


def tokens_per_step(cfg: Config) -> int:
    return cfg.data.batch_size * cfg.data.seq_len


def sized_params(cfg: Config, size: int, overrides: Sequence[str]) -> float:
    """N (matmul parameters) of `cfg`'s model at model.size=`size` (the knob's rules as loading
    applies them, `config.load.sized`), without composing the config again."""
    from spmdgpt.config.load import sized
    from spmdgpt.plan.flops import matmul_params

    model = dataclasses.replace(cfg.model, size=size)
    return matmul_params(sized(dataclasses.replace(cfg, model=model), overrides).model)


def point_overrides(cfg: Config, size: int, steps: int) -> List[str]:
    return [f"model.size={size}", f"train.steps={steps}",
            f"optimizer.warmup_steps={int(round(cfg.ladder.warmup * steps))}"]


def budget_name(c: float) -> str:
    return f"{c:.3g}".replace("e+", "e")


def plan_grid(cfg: Config, overrides: Sequence[str]) -> List[Point]:
    """The grid's points, checked (not the corpus's epochs: `check_epochs`)."""
    lad = cfg.ladder
    if not lad.budgets or not lad.sizes:
        raise ConfigError(["spmdgpt ladder needs ladder.budgets=[...] (FLOPs) and ladder.sizes=[...] (model.size "
                           "values), e.g. +experiment=ladder_tiny"])
    bad = [c for c in lad.budgets if not c > 0] + [s for s in lad.sizes if not s > 0]
    if bad:
        raise ConfigError([f"ladder: {bad[0]} is not > 0 (budgets are FLOPs, sizes model.size depths)"])
    budgets, sizes = len(set(lad.budgets)), len(set(lad.sizes))
    if budgets < 2 or sizes < 2 or budgets * sizes < 5:
        raise ConfigError([f"ladder: {budgets} budget(s) x {sizes} size(s) cannot fit L(N, D) = "
                           "E + A/N^alpha + B/D^beta (5 parameters): give at least 2 budgets and 2 sizes, 5 runs "
                           "or more (3 sizes a budget for the isoFLOP minima)"])
    if not 0 <= lad.warmup < 1:
        raise ConfigError([f"ladder.warmup={lad.warmup} must be a share of each run's steps in [0, 1)"])
    per_step = tokens_per_step(cfg)
    points = []
    for c in sorted(set(lad.budgets)):
        for s in sorted(set(lad.sizes)):
            n = sized_params(cfg, s, overrides)
            steps = int(round(c / (6.0 * n * per_step)))
            if steps < MIN_STEPS:
                raise ConfigError([f"ladder: budget {c:.3g} FLOPs at model.size={s} (N = {n:,.0f} matmul parameters) "
                                   f"is {steps} step(s) of {per_step:,} tokens; a point needs {MIN_STEPS} or more: "
                                   f"raise the budget to {6.0 * n * per_step * MIN_STEPS:.3g} or drop the size"])
            points.append(Point(f"C{budget_name(c)}-size{s}", c, s, n, steps, float(steps * per_step),
                                point_overrides(cfg, s, steps)))
    return points


def corpus_epochs(cfg: Config, steps: int) -> Dict[str, float]:
    """Epochs of each training dataset that `steps` steps of `cfg` read (the run's own batcher's
    count; {} for a generated source), preparing the corpus's token stores where missing."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from spmdgpt.config import DataSource, document_batches
    from spmdgpt.data import Batcher, load_dataset

    d = cfg.data
    if d.source == DataSource.staircase:
        return {}
    data = load_dataset(d)
    sharding = NamedSharding(jax.make_mesh((1,), ("data",), devices=jax.devices()[:1]), PartitionSpec())
    batcher = Batcher(data.train, data.weights, d.seq_len, d.batch_size, cfg.train.seed, sharding,
                      *document_batches(d), pad_id=data.tokenizer.eos_id or 0)
    return batcher.epochs(steps)


def check_epochs(cfg: Config, points: Sequence[Point]) -> None:
    """ConfigError when the longest point reads a dataset more than ladder.epochs times."""
    longest = max(points, key=lambda p: p.steps)
    over = {n: e for n, e in corpus_epochs(cfg, longest.steps).items() if e > cfg.ladder.epochs}
    if over:
        name, e = max(over.items(), key=lambda kv: kv[1])
        raise ConfigError([f"ladder: {longest.name} trains {longest.tokens:,.0f} tokens, {e:.2f} epochs of dataset "
                           f"{name!r} (ladder.epochs={cfg.ladder.epochs:g}): allow them with "
                           f"ladder.epochs={math.ceil(e * 10) / 10:g}, or lower the budgets"])


def final_metric(run_dir: Path, metric: str) -> Optional[float]:
    """A run's last logged value of `metric` (None when it has none, or it is not finite)."""
    values = [float(r[metric]) for r in jsonl_rows(run_dir / "metrics.jsonl")
              if isinstance(r.get(metric), (int, float))]
    return values[-1] if values and math.isfinite(values[-1]) else None


def forecast_point(cfg: Config, overrides: Sequence[str], law, budget: float, size: Optional[int]) -> Point:
    """The forecast's run: `size` (default: the model.size whose N is nearest, in log, the law's
    compute-optimal N at `budget`; sizes 1 .. 4x the grid's largest) at `budget`."""
    if size is None:
        n_opt = law.optimal(budget)[0]
        sizes = range(1, 4 * max(cfg.ladder.sizes) + 1)
        size = min(sizes, key=lambda s: abs(math.log(sized_params(cfg, s, overrides) / n_opt)))
    n = sized_params(cfg, size, overrides)
    per_step = tokens_per_step(cfg)
    steps = max(1, int(round(budget / (6.0 * n * per_step))))
    return Point(f"forecast-C{budget_name(budget)}-size{size}", budget, size, n, steps, float(steps * per_step),
                 point_overrides(cfg, size, steps))


def analyse(cfg: Config, overrides: Sequence[str], points: Sequence[Point]) -> dict:
    """The fits of the finished points (see the module's docstring) and the forecast, as
    ladder.json holds them; laws.LawError when they cannot be fitted."""
    from spmdgpt.scaling.laws import LawError, bootstrap, fit_law, isoflop_minima

    lad = cfg.ladder
    done = [p for p in points if p.loss is not None]
    n, d, loss = (np.array([getattr(p, f) for p in done]) for f in ("params", "tokens", "loss"))
    law = fit_law(n, d, loss)
    out: dict = {"metric": lad.metric, "points": [p.row() for p in points], "law": law.as_dict()}
    try:  # approach 2 (its budgets: the nominal ones, the runs' rounded steps aside)
        iso = isoflop_minima(n, d, loss, budgets=[p.budget for p in done])
        out["isoflop"] = {"minima": [{"budget": c, "params": m, "loss": v} for c, m, v in iso["minima"]],
                          "exponent": iso["exponent"], "coefficient": iso["coefficient"]}
    except LawError as e:
        out["isoflop"] = {"error": str(e)}
    g, a = law.rule()
    out["compute_optimal"] = {
        "rule": "N_opt = G (C / 6)^a, D_opt = (C / 6) / N_opt", "G": g, "a": a, "b": 1.0 - a,
        "tokens_per_param": {budget_name(c): law.optimal(c)[1] / law.optimal(c)[0] for c in sorted(set(lad.budgets))}}
    budget = lad.forecast_budget or FORECAST_FACTOR * max(lad.budgets)
    f = forecast_point(cfg, overrides, law, budget, lad.forecast_size)
    n_opt, d_opt = law.optimal(budget)
    out["forecast"] = {"run": f.name, "overrides": f.overrides, "budget": budget, "size": f.size, "params": f.params,
                       "tokens": f.tokens, "steps": f.steps, "loss": float(law.loss(f.params, f.tokens)),
                       "optimal_params": n_opt, "optimal_tokens": d_opt, "optimal_loss": float(law.loss(n_opt, d_opt))}
    if lad.bootstrap > 0:
        out["intervals"] = bootstrap(n, d, loss, samples=lad.bootstrap, forecast=(f.params, f.tokens))
        out["forecast"]["mean_interval"] = out["intervals"].pop("forecast")
        out["forecast"]["prediction_interval"] = out["intervals"].pop("forecast_prediction")
    out["chinchilla"] = CHINCHILLA
    return out


def with_check(result: dict, measured: Optional[float]) -> dict:
    """ladder.json's forecast with the check run's measured loss, its error and whether the
    prediction interval (one run's, not the fitted mean's) holds it."""
    f = result["forecast"]
    f["measured"] = measured
    if measured is not None:
        f["error"] = (measured - f["loss"]) / measured
        if "prediction_interval" in f:
            lo, hi = f["prediction_interval"]
            f["within_prediction_interval"] = bool(lo <= measured <= hi)
    return result


def report(result: dict) -> str:
    """The points and the fits as text (the console's, and ladder.md)."""
    lines = [f"| budget (FLOPs) | model.size | N | D | tokens/param | steps | {result['metric']} | status |",
             "|---|---|---|---|---|---|---|---|"]
    for p in result["points"]:
        loss = "-" if p["loss"] is None else f"{p['loss']:.4f}"
        lines.append(f"| {p['budget']:.3g} | {p['size']} | {p['params']:,.0f} | {p['tokens']:,.0f} | "
                     f"{p['tokens_per_param']:.3g} | {p['steps']} | {loss} | {p['status']} |")
    law = result["law"]
    iv = result.get("intervals", {})

    def span(k):
        return f" (90%: {iv[k][0]:.3g} .. {iv[k][1]:.3g})" if k in iv else ""

    lines += ["", f"L(N, D) = {law['E']:.4g} + {law['A']:.4g} / N^{law['alpha']:.4f} + {law['B']:.4g} / "
                  f"D^{law['beta']:.4f}",
              f"  alpha {law['alpha']:.4f}{span('alpha')}, beta {law['beta']:.4f}{span('beta')}, E {law['E']:.4g}"
              f"{span('E')}  (Chinchilla: alpha 0.34, beta 0.28, E 1.69, in nats of its own tokenizer)"]
    co = result["compute_optimal"]
    lines.append(f"compute-optimal: N_opt = {co['G']:.4g} (C/6)^{co['a']:.3f}, D_opt = (C/6) / N_opt; tokens per "
                 "parameter " + ", ".join(f"{v:.3g} at {k}" for k, v in co["tokens_per_param"].items()))
    iso = result["isoflop"]
    lines.append("isoFLOP minima: " + (iso["error"] if "error" in iso else
                 ", ".join(f"N {m['params']:,.0f} at {m['budget']:.3g}" for m in iso["minima"])
                 + f"; N_opt ~ C^{iso['exponent']:.3f}"))
    f = result["forecast"]
    interval = "" if "prediction_interval" not in f else (
        f" (90% for a run: {f['prediction_interval'][0]:.4f} .. {f['prediction_interval'][1]:.4f}; the law's mean: "
        f"{f['mean_interval'][0]:.4f} .. {f['mean_interval'][1]:.4f})")
    lines.append(f"forecast: model.size={f['size']} (N {f['params']:,.0f}) at {f['budget']:.3g} FLOPs, {f['steps']} "
                 f"steps ({f['tokens']:,.0f} tokens): {result['metric']} {f['loss']:.4f}{interval}; the law's "
                 f"optimum there: N {f['optimal_params']:,.0f}, D {f['optimal_tokens']:,.0f}, {f['optimal_loss']:.4f}")
    short = [p["run"] for p in result["points"] if p["steps"] < SHORT_STEPS]
    if short:
        lines.append(f"note: {len(short)} point(s) train fewer than {SHORT_STEPS} steps ({', '.join(short)}): warmup "
                     "and the schedule dominate such runs and they tend to lie off the law (BENCHMARKS.md, 'Scaling "
                     "ladder'); raise their budgets or drop those sizes")
    if f.get("measured") is not None:
        lines.append(f"check: measured {f['measured']:.4f}, the forecast {f['loss']:.4f} ({f['error']:+.2%})"
                     + ("" if "within_prediction_interval" not in f else
                        ", inside the prediction interval" if f["within_prediction_interval"]
                        else ", outside the prediction interval"))
    return "\n".join(lines)


def _figure(w: float = 8, h: float = 5.5):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(figsize=(w, h), dpi=100)


def _finish(plt, fig, ax, path: Path, **labels) -> Path:
    """A figure's log-x axes labelled (`labels`: xlabel, ylabel, title), its legend, written to path."""
    ax.set(xscale="log", **labels)
    ax.legend()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_ladder(result: dict, out: Path) -> List[Path]:
    """isoflop.png, law.png and forecast.png in `out` (see the module's docstring)."""
    from spmdgpt.scaling.laws import Law

    law = Law(**result["law"])
    pts = [p for p in result["points"] if p["loss"] is not None]
    budgets = sorted({p["budget"] for p in pts})
    sizes = sorted({p["size"] for p in pts})
    colours = {c: f"C{i}" for i, c in enumerate(budgets)}
    paths = []

    plt, fig, ax = _figure()
    for c in budgets:
        mine = sorted((p for p in pts if p["budget"] == c), key=lambda p: p["params"])
        ax.plot([p["params"] for p in mine], [p["loss"] for p in mine], "o", color=colours[c], label=f"C = {c:.2g}")
        grid = np.geomspace(mine[0]["params"] / 1.5, mine[-1]["params"] * 1.5, 100)
        ax.plot(grid, law.loss(grid, c / (6 * grid)), "--", color=colours[c], lw=1)
    for m in result["isoflop"].get("minima", []):
        ax.plot(m["params"], m["loss"], "*", ms=14, color=colours.get(m["budget"], "k"), mec="k")
    paths.append(_finish(plt, fig, ax, out / "isoflop.png", xlabel="N (matmul parameters)", ylabel=result["metric"],
                         title="isoFLOP curves: runs (dots), the law (dashed), approach 2's minima (stars)"))

    plt, fig, ax = _figure()
    for i, s in enumerate(sizes):
        mine = sorted((p for p in pts if p["size"] == s), key=lambda p: p["tokens"])
        ax.plot([p["tokens"] for p in mine], [p["loss"] for p in mine], "o", color=f"C{i}",
                label=f"model.size={s} (N {mine[0]['params']:,.0f})")
        grid = np.geomspace(mine[0]["tokens"] / 1.5, mine[-1]["tokens"] * 1.5, 100)
        ax.plot(grid, law.loss(mine[0]["params"], grid), "-", color=f"C{i}", lw=1)
    paths.append(_finish(plt, fig, ax, out / "law.png", xlabel="D (training tokens)", ylabel=result["metric"],
                         title=f"the law against every run: L = {law.E:.3g} + {law.A:.3g}/N^{law.alpha:.3f} + "
                               f"{law.B:.3g}/D^{law.beta:.3f}"))

    f = result["forecast"]
    plt, fig, ax = _figure()
    cs = np.geomspace(min(budgets) / 2, f["budget"] * 2, 100)
    ax.plot(cs, [law.loss(*law.optimal(c)) for c in cs], "k-", lw=1, label="compute-optimal frontier (the law)")
    for c in budgets:
        mine = [p for p in pts if p["budget"] == c]
        ax.plot([p["flops"] for p in mine], [p["loss"] for p in mine], "o", color=colours[c], alpha=0.7)
    lo, hi = f.get("prediction_interval", (f["loss"], f["loss"]))
    ax.errorbar([f["budget"]], [f["loss"]], yerr=[[max(0.0, f["loss"] - lo)], [max(0.0, hi - f["loss"])]], fmt="s",
                color="C3", capsize=6, label=f"forecast, model.size={f['size']} ({f['loss']:.4f})")
    if f.get("measured") is not None:
        ax.plot([6 * f["params"] * f["tokens"]], [f["measured"]], "x", ms=12, mew=3, color="k",
                label=f"measured ({f['measured']:.4f}, {f['error']:+.2%})")
    paths.append(_finish(plt, fig, ax, out / "forecast.png", xlabel="compute C = 6 N D (FLOPs)",
                         ylabel=result["metric"], title="the forecast and its 90% prediction interval"))
    return paths


# ----------------------------------------------------------------------------- learning-rate transfer


def lr_grid(cfg: Config, overrides: Sequence[str]) -> List[dict]:
    """The learning-rate sweep's points: {"name", "width", "lr", "overrides"} for each of
    ladder.widths x ladder.lrs (under μP / CompleteP without model.base_width given: the first
    width is the base)."""
    lad = cfg.ladder
    if len(set(lad.widths)) < 2 or len(set(lad.lrs)) < 2:
        raise ConfigError(["spmdgpt ladder lr needs ladder.widths=[...] (d_model values) and ladder.lrs=[...], two "
                           "or more of each"])
    bad = [v for v in [*lad.widths, *lad.lrs] if not v > 0]
    if bad:
        raise ConfigError([f"ladder: {bad[0]} is not > 0 (widths are d_model values, lrs learning rates)"])
    given = [o for o in overrides if override_key(o) == lad.lr_field]
    if given:
        raise ConfigError([f"{given[0]}: spmdgpt ladder lr sets {lad.lr_field} for each point (ladder.lrs); leave it "
                           "out"])
    if cfg.train.time_budget is not None:
        raise ConfigError([f"train.time_budget={cfg.train.time_budget:g}: the learning-rate sweep's points must train "
                           "the same steps at every width; give train.steps=N"])
    widths = sorted(set(lad.widths))
    base = ([] if cfg.model.parametrization == Parametrization.standard
            or any(override_key(o) == "model.base_width" for o in overrides) else [f"model.base_width={widths[0]}"])
    return [{"name": f"w{w}-lr{lr:.3g}", "width": w, "lr": lr,
             "overrides": [f"model.d_model={w}", f"{lad.lr_field}={lr}", *base]}
            for w in widths for lr in sorted(set(lad.lrs))]


def analyse_lr(points: Sequence[dict], metric: str) -> dict:
    """{"metric", "points", "best": {width: {"lr", "loss"}}, "shift": largest best rate / smallest,
    "monotone": whether the best loss improves with every wider model}."""
    best = {}
    for w in sorted({p["width"] for p in points}):
        done = [p for p in points if p["width"] == w and p.get("loss") is not None]
        if done:
            b = min(done, key=lambda p: p["loss"])
            best[w] = {"lr": b["lr"], "loss": b["loss"]}
    rates = [b["lr"] for b in best.values()]
    losses = [b["loss"] for b in best.values()]
    lrs = sorted({p["lr"] for p in points})
    return {"metric": metric, "points": [{k: v for k, v in p.items() if k != "overrides"} for p in points],
            "best": best, "shift": max(rates) / min(rates) if rates else None,
            "monotone": all(b < a for a, b in zip(losses, losses[1:])),
            "at_edge": sorted(w for w, b in best.items() if b["lr"] in (lrs[0], lrs[-1]))}


def report_lr(result: dict) -> str:
    widths = sorted({p["width"] for p in result["points"]})
    lrs = sorted({p["lr"] for p in result["points"]})
    loss = {(p["width"], p["lr"]): p.get("loss") for p in result["points"]}
    lines = ["| lr | " + " | ".join(f"d_model {w}" for w in widths) + " |", "|---|" + "---|" * len(widths)]
    for lr in lrs:
        lines.append(f"| {lr:.3g} | " + " | ".join("-" if loss[w, lr] is None else f"{loss[w, lr]:.4f}"
                                                  for w in widths) + " |")
    best = result["best"]
    lines.append("best: " + ", ".join(f"d_model {w}: lr {b['lr']:.3g} ({b['loss']:.4f})" for w, b in best.items()))
    if result["shift"] is not None:
        moves = "does not move" if result["shift"] == 1 else f"moves {result['shift']:.3g}x"
        lines.append(f"the best learning rate {moves} across the widths; the best loss "
                     + ("improves with every wider model" if result["monotone"] else "does not improve with every "
                        "wider model"))
    if result["at_edge"]:
        lines.append(f"note: at d_model {', '.join(map(str, result['at_edge']))} the best rate is at the grid's edge "
                     "(the optimum may lie beyond it): widen ladder.lrs")
    return "\n".join(lines)


def plot_lr(result: dict, out: Path) -> Path:
    plt, fig, ax = _figure()
    for i, w in enumerate(sorted({p["width"] for p in result["points"]})):
        mine = sorted((p for p in result["points"] if p["width"] == w and p.get("loss") is not None),
                      key=lambda p: p["lr"])
        ax.plot([p["lr"] for p in mine], [p["loss"] for p in mine], "o-", color=f"C{i}", label=f"d_model {w}")
        b = result["best"].get(w)
        if b:
            ax.plot(b["lr"], b["loss"], "*", ms=14, color=f"C{i}", mec="k")
    return _finish(plt, fig, ax, out / "lr.png", xlabel="learning rate", ylabel=result["metric"],
                   title=f"loss against learning rate by width (best moves {result['shift'] or 0:.3g}x)")

