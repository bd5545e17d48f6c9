"""Scaling-law fits (the scaling issue's ladder): from runs' (parameters N, tokens D, final loss
L), the laws of Hoffmann et al. 2022 ("Chinchilla") and a forecast.

- **Approach 3** (`fit_law`): L(N, D) = E + A / N^alpha + B / D^beta, fitted as Hoffmann et al.
  did and Besiroglu et al. 2024 re-did: parameters (a, b, e, alpha, beta) with A = exp(a),
  B = exp(b), E = exp(e), the Huber loss (delta 1e-3) between log L and
  logsumexp(a - alpha log N, b - beta log D, e), summed over the runs, minimised by L-BFGS from
  the best points of a grid of initialisations, the lowest kept.
- **Compute-optimal** (`Law.optimal`): for a budget C = 6 N D, N_opt = G (C / 6)^(beta /
  (alpha + beta)) and D_opt = (C / 6) / N_opt, with G = (alpha A / (beta B))^(1 / (alpha + beta)).
- **Approach 2** (`isoflop_minima`): for each compute budget, a parabola of L against log N
  through that budget's runs, its vertex the budget's best size; then N_opt = k C^a by a line
  through the vertices in log-log space.
- **Intervals** (`bootstrap`): the runs resampled with replacement and refitted; percentiles of
  each fitted value and of a forecast. A forecast has two: the fitted mean's (where the law's
  curve lies: how well the runs pin it down), and the prediction interval of one run at that
  point (the mean's spread plus a run's own scatter around the law: each refit's forecast times
  exp of a residual drawn from the fit's log residuals, inflated by sqrt(n / (n - 5)) for the
  five fitted values). A measured run is checked against the second.

Pure NumPy and SciPy: no JAX, nothing trained here.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

HUBER_DELTA = 1e-3  # Hoffmann et al.'s
# the initialisations' grid (Hoffmann et al. searched alpha, beta in 0..2 by 0.5, e in -1..1.5 by 0.5,
# a, b in 0..25 by 5; a coarser grid of the same ranges: each start is refined by L-BFGS)
GRID = {"a": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0), "b": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
        "e": (-1.0, 0.0, 1.0), "alpha": (0.0, 0.5, 1.0, 1.5), "beta": (0.0, 0.5, 1.0, 1.5)}
MIN_POINTS = 5  # the law has 5 parameters


class LawError(ValueError):
    """Runs a fit cannot use (too few, a loss that is not positive, one size only): one line."""


@dataclasses.dataclass(frozen=True)
class Law:
    """L(N, D) = E + A / N^alpha + B / D^beta."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def loss(self, n, d):
        return self.E + self.A / np.power(n, self.alpha) + self.B / np.power(d, self.beta)

    def rule(self) -> Tuple[float, float]:
        """(G, a) of the compute-optimal size N_opt = G (C / 6)^a."""
        g = (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / (self.alpha + self.beta))
        return g, self.beta / (self.alpha + self.beta)

    def optimal(self, compute: float) -> Tuple[float, float]:
        """(N_opt, D_opt) for a budget of `compute` FLOPs (C = 6 N D)."""
        g, a = self.rule()
        n = g * (compute / 6.0) ** a
        return n, compute / (6.0 * n)

    def as_dict(self) -> Dict[str, float]:
        return dataclasses.asdict(self)


def _check(n, d, loss) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, d, loss = (np.asarray(v, np.float64) for v in (n, d, loss))
    if not (n.shape == d.shape == loss.shape and n.ndim == 1):
        raise LawError(f"N, D and L must be three lists of the same length (got {n.shape}, {d.shape}, {loss.shape})")
    if len(n) < MIN_POINTS:
        raise LawError(f"{len(n)} runs cannot fit L(N, D) = E + A/N^alpha + B/D^beta (5 parameters): "
                       f"give at least {MIN_POINTS}, of at least 2 sizes and 2 token counts")
    if len(np.unique(n)) < 2 or len(np.unique(d)) < 2:
        raise LawError("the runs must differ in size and in tokens (at least 2 of each) for the law's two exponents")
    bad = np.flatnonzero(~(np.isfinite(loss) & (loss > 0) & (n > 0) & (d > 0)))
    if len(bad):
        raise LawError(f"run {int(bad[0])} has N={n[bad[0]]:g}, D={d[bad[0]]:g}, L={loss[bad[0]]:g}: every value must "
                       "be finite and > 0 (a diverged run: leave it out)")
    return n, d, loss


def _objective(theta, log_n, log_d, log_l, delta):
    """The Huber loss of the log-space residuals and its gradient (theta = a, b, e, alpha, beta)."""
    a, b, e, alpha, beta = theta
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
    top = terms.max(axis=0)
    weights = np.exp(terms - top)
    total = weights.sum(axis=0)
    r = top + np.log(total) - log_l
    p = weights / total  # d lse / d term
    small = np.abs(r) <= delta
    value = np.where(small, 0.5 * r ** 2, delta * (np.abs(r) - 0.5 * delta)).sum()
    dr = np.where(small, r, delta * np.sign(r))
    grad = np.array([(dr * p[0]).sum(), (dr * p[1]).sum(), (dr * p[2]).sum(),
                     -(dr * p[0] * log_n).sum(), -(dr * p[1] * log_d).sum()])
    return value, grad


def _scaled(theta, log_n, log_d, log_l, delta):
    """The objective in units of delta^2 per run (its values near 1e-8 otherwise: L-BFGS's
    tolerances would stop it at its first steps)."""
    value, grad = _objective(theta, log_n, log_d, log_l, delta)
    scale = 1.0 / (delta * delta * len(log_n))
    return value * scale, grad * scale


def _grid_values(starts: np.ndarray, log_n, log_d, log_l, delta) -> np.ndarray:
    """The Huber objective at each row of `starts` [S, 5], at once."""
    a, b, e, alpha, beta = (starts[:, i:i + 1] for i in range(5))
    terms = np.stack(np.broadcast_arrays(a - alpha * log_n, b - beta * log_d, e + 0 * log_n))
    top = terms.max(axis=0)
    r = top + np.log(np.exp(terms - top).sum(axis=0)) - log_l
    return np.where(np.abs(r) <= delta, 0.5 * r ** 2, delta * (np.abs(r) - 0.5 * delta)).sum(axis=1)


def fit_law(n: Sequence[float], d: Sequence[float], loss: Sequence[float], delta: float = HUBER_DELTA,
            grid: Optional[Dict[str, Sequence[float]]] = None, refine: int = 8, start: Optional[Law] = None) -> Law:
    """Approach 3: the law through the runs (N parameters, D tokens, final loss L each). The
    objective is evaluated at every point of the initialisations' grid at once and L-BFGS refines
    the `refine` best of them (and `start`, a law to begin from, when given); the lowest result
    is kept."""
    from scipy.optimize import minimize

    n, d, loss = _check(n, d, loss)
    log_n, log_d, log_l = np.log(n), np.log(d), np.log(loss)
    g = grid or GRID
    starts = np.array(list(itertools.product(g["a"], g["b"], g["e"], g["alpha"], g["beta"])))
    starts = starts[np.argsort(_grid_values(starts, log_n, log_d, log_l, delta), kind="stable")[:refine]]
    if start is not None:
        starts = np.concatenate([[[math.log(start.A), math.log(start.B), math.log(start.E), start.alpha,
                                   start.beta]], starts])
    best = None
    for start in starts:
        res = minimize(_scaled, start, args=(log_n, log_d, log_l, delta), jac=True, method="L-BFGS-B",
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
        if best is None or res.fun < best.fun:
            best = res
    a, b, e, alpha, beta = best.x
    return Law(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=float(alpha), beta=float(beta))


def isoflop_minima(n: Sequence[float], d: Sequence[float], loss: Sequence[float],
                   budgets: Optional[Sequence[float]] = None) -> Dict[str, object]:
    """Approach 2: {"minima": [(C, N at the vertex, L at the vertex)] by budget (C = 6 N D of the
    runs, grouped to 1e-6 relative; or `budgets`, each run's nominal one, where the runs' steps were
    rounded), "exponent": a and "coefficient": k of N_opt = k C^a}. Each budget needs 3 runs of
    different sizes, and 2 budgets the line."""
    n, d, loss = (np.asarray(v, np.float64) for v in (n, d, loss))
    by_budget: Dict[float, List[int]] = {}
    for i, c in enumerate(6.0 * n * d if budgets is None else np.asarray(budgets, np.float64)):
        key = next((k for k in by_budget if abs(k - c) <= 1e-6 * c), c)
        by_budget.setdefault(key, []).append(i)
    minima = []
    for c, rows in sorted(by_budget.items()):
        if len(np.unique(n[rows])) < 3:
            raise LawError(f"the budget C={c:.3g} has runs of {len(np.unique(n[rows]))} sizes: an isoFLOP parabola "
                           "needs 3 or more")
        x = np.log(n[rows])
        k2, k1, k0 = np.polyfit(x, np.log(loss[rows]), 2)
        if k2 <= 0:
            raise LawError(f"the budget C={c:.3g}'s losses do not curve upward in log N (no minimum inside its "
                           "sizes): add smaller and larger sizes")
        xv = -k1 / (2 * k2)
        minima.append((c, math.exp(xv), math.exp(k0 + k1 * xv + k2 * xv ** 2)))
    if len(minima) < 2:
        raise LawError("approach 2 needs at least 2 compute budgets")
    slope, intercept = np.polyfit(np.log([m[0] for m in minima]), np.log([m[1] for m in minima]), 1)
    return {"minima": minima, "exponent": float(slope), "coefficient": float(math.exp(intercept))}


def bootstrap(n: Sequence[float], d: Sequence[float], loss: Sequence[float], samples: int = 100, seed: int = 0,
              quantiles: Tuple[float, float] = (0.05, 0.95), forecast: Optional[Tuple[float, float]] = None,
              refine: int = 0) -> Dict[str, Tuple[float, float]]:
    """{field: (low, high)} of each fitted value over `samples` refits on the runs resampled with
    replacement (quantiles of them; default a 90% interval), and at `forecast` = (N, D) when
    given: "forecast", the interval of the law's L(N, D) (the fitted mean's), and
    "forecast_prediction", where one run there should land (the module's docstring). Each refit
    starts from the law fitted to all the runs (a warm start; and from the `refine` best points
    of the grid when > 0): 0.1-0.3 s each on a 2-core CPU for a dozen runs, about 3x longer with
    refine=2. Resamples that cannot be fitted (too few distinct runs) are drawn again."""
    n, d, loss = _check(n, d, loss)
    whole = fit_law(n, d, loss)
    rng = np.random.default_rng(seed)
    laws: List[Law] = []
    while len(laws) < samples:
        idx = rng.integers(0, len(n), len(n))
        try:
            laws.append(fit_law(n[idx], d[idx], loss[idx], refine=refine, start=whole))
        except LawError:
            continue
    out = {f: tuple(float(q) for q in np.quantile([getattr(law, f) for law in laws], quantiles))
           for f in ("E", "A", "B", "alpha", "beta")}
    if forecast is not None:
        means = np.array([law.loss(*forecast) for law in laws])
        out["forecast"] = tuple(float(q) for q in np.quantile(means, quantiles))
        resid = np.log(loss) - np.log(whole.loss(n, d))
        resid = (resid - resid.mean()) * math.sqrt(len(n) / max(len(n) - 5, 1))
        runs = means[:, None] * np.exp(resid[None, :])  # (every refit with every residual: samples x runs draws)
        out["forecast_prediction"] = tuple(float(q) for q in np.quantile(runs, quantiles))
    return out
