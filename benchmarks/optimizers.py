"""Manifold Muon's inner solvers on real gradients, optimizer step times, and a loss table.

    python benchmarks/optimizers.py [--part a,b,c] [--budget 200] [--out benchmarks/out]

(a) Inner loop on real gradients of the B1 model (vocab 65, 4 layers, d_model 256, seq 256,
    batch 16) after 30 manifold-Muon steps on Tiny Shakespeare, for every hidden matrix, against
    the iteration k, for ADMM with ρ in {2, 4, 8, 16, 32} and dual ascent (steps 0.001-0.01):
    the dual objective ||Ĝ + 2WΛ_k||_* (relative gap to the best value any solver reached, D*),
    and the objective of the direction the optimizer really uses, the feasible A_k of
    `manifold.feasible_direction`: (D* + <A_k, Ĝ>/η) / D*, an upper bound on how far it is from
    optimal (its tangency violation is printed too). Also the violation of the raw
    -η msign(Ĝ + 2WΛ_k) the write-up returns. Plot: out/inner_loop.png.
(b) ms per B1 training step: AdamW, Muon, manifold Muon (ADMM, 10 and 20 iterations) and
    manifold Muon (dual ascent, 100 iterations); the ratios dual ascent / ADMM, with the primal
    gap of each solver's step at those iteration counts from (a) (default ρ and dual step).
(c) Validation loss of shakespeare_char after --budget steps (warmup 10% of them, cosine) for
    the four optimizers, one table.
Needs the `bench` extra (matplotlib) for the plot.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path

from spmdgpt.mesh.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()  # the process settings of `spmdgpt train` (spmdgpt.mesh.runtime)
set_default_xla_flags()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from spmdgpt.config import OptimizerConfig, load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import ParamInfo, loss_fn, param_info
from spmdgpt.optim.manifold import (
    dual_iterates,
    dual_objective,
    feasible_direction,
    normalize,
    tangent_violation,
)
from spmdgpt.optim.matrices import MatrixView, is_hidden_matrix
from spmdgpt.optim.msign import msign
from spmdgpt.optim.muon import MomentumState, _momentum
from spmdgpt.training.step import training_parts

B1 = [
    "+experiment=shakespeare_char", "model.vocab_size=66", "model.num_layers=4",
    "model.num_heads=4", "model.d_model=256", "model.max_seq_len=256", "data.seq_len=256",
    "data.batch_size=16", "mesh.data=1", "model.qk_norm=false", "train.time_budget=null",
]  # fmt: skip
OPTIMIZERS = {
    "adamw": ["optimizer.name=adamw"],
    "muon": ["optimizer.name=muon"],
    "manifold_muon admm (10 it)": ["optimizer.name=manifold_muon", "optimizer.solver=admm",
                                   "optimizer.solver_steps=10"],
    "manifold_muon dual ascent (100 it)": ["optimizer.name=manifold_muon", "optimizer.solver=dual_ascent",
                                           "optimizer.solver_steps=100"],
}  # fmt: skip
RHOS = (2.0, 4.0, 8.0, 16.0, 32.0)
INNER_STEPS = 100
KS = (0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100)  # iterations at which (a) evaluates


def setup(overrides):
    cfg = load_config([*B1, *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    return cfg, mesh, rules


def real_problems(steps: int = 30):
    """(name, W [B, m, n] tall, G [B, m, n]) per hidden matrix of B1 after `steps` manifold-Muon
    steps; G is the Nesterov momentum direction the solver would see at the next step."""
    cfg, mesh, rules = setup(["optimizer.name=manifold_muon", "optimizer.warmup_steps=5"])
    with jax.set_mesh(mesh):
        info = param_info(cfg.model)
        state, step, batcher, _ = training_parts(cfg, rules, schedule_steps=1000)
        for i in range(steps):
            state, m = step(state, *batcher.train_batch(i))
        print(f"(a) B1 after {steps} manifold-Muon steps: loss {float(m['loss']):.3f}")
        grads = jax.grad(lambda p: loss_fn(cfg.model, rules, p, *batcher.train_batch(steps)))(state.params)
        mu = state.opt_state[1].inner_states["matrix"].inner_state.mu
        beta = cfg.optimizer.muon_momentum
    out = []
    for unit, name in (("attn", "w_qkv"), ("attn", "w_o"), ("mlp", "w_up"), ("mlp", "w_down")):
        leaf = lambda tree: getattr(getattr(tree.blocks, unit), name)  # noqa: E731
        i: ParamInfo = leaf(info)
        assert is_hidden_matrix(i)
        view = MatrixView.of(i)
        w = view.to_matrices(jax.device_get(leaf(state.params)))
        _, d = _momentum(leaf(grads), MomentumState(0, leaf(mu)), beta, True)
        out.append((name, jnp.asarray(w), jnp.asarray(view.to_matrices(jax.device_get(d)))))
    return out


def stable_rank(g) -> float:
    s = np.linalg.svd(np.asarray(g, np.float64), compute_uv=False)
    return float(np.mean(np.sum(s**2, -1) / s[..., 0] ** 2))


def trace(w, g, solver, **kw):
    """Per iteration k in KS: dual objective, <A_k, Ĝ>/η of the feasible direction, its tangency
    violation / η, and the violation of the raw -msign(Ĝ + 2WΛ_k); each [len(KS), B]."""
    dual = jax.jit(lambda w, g: dual_iterates(w, g, solver=solver, steps=INNER_STEPS, trace=True, **kw))(w, g)
    dual = jax.tree.map(lambda x: x[np.asarray(KS)], dual)

    @jax.jit  # w and g are arguments, not closed-over constants XLA would try to fold
    @partial(jax.vmap, in_axes=(None, None, 0))
    def measure(w, g, d):
        gn = normalize(g)
        a = feasible_direction(w, g, d, 1.0, 10)
        raw = -msign(gn + 2 * w @ d.lam, 10)
        return (
            dual_objective(w, g, d.lam, 10),
            jnp.sum(a * gn, (-2, -1)),
            tangent_violation(w, a),
            tangent_violation(w, raw),
        )

    return tuple(np.asarray(x, np.float64) for x in measure(w, g, dual))


def part_a(out: Path) -> dict:
    problems = real_problems()
    runs = {f"admm rho={r:g}": ("admm", dict(rho=r)) for r in RHOS}
    runs.update({f"dual ascent lr={lr:g}": ("dual_ascent", dict(lr=lr)) for lr in (0.001, 0.003, 0.01)})
    curves = {k: {} for k in runs}
    for name, w, g in problems:
        print(f"    {name}: {w.shape[0]} matrices {w.shape[1]}x{w.shape[2]}, stable rank of G {stable_rank(g):.1f}")
        for label, (solver, kw) in runs.items():
            curves[label][name] = trace(w, g, solver, **kw)
    # D*: the best (lowest) dual objective any solver reached, per matrix; it bounds the optimum
    best = {n: np.min([curves[k][n][0].min(0) for k in runs], axis=0) for n, _, _ in problems}
    rows = {}
    for label in runs:
        per_kind = {}
        for n, _, _ in problems:
            dual, primal, viol, raw = curves[label][n]
            per_kind[n] = ((dual - best[n]) / best[n], (best[n] + primal) / best[n], viol, raw)
        rows[label] = per_kind
    cols = (0, 5, 10, 20, 30, 100)
    kinds = [n for n, _, _ in problems]
    print("(a) primal gap (D* + <A_k,Ĝ>/η)/D* of the feasible direction, median over matrices, per kind")
    print(f"    {'solver':20s} {'kind':7s} " + " ".join(f"{'k=' + str(k):>8s}" for k in cols))
    for label in runs:
        for n in kinds:
            gap = np.median(rows[label][n][1], 1)
            print(f"    {label:20s} {n:7s} " + " ".join(f"{gap[KS.index(k)]:8.1e}" for k in cols))
    viol = max(rows[label][n][2].max() for label in runs for n in kinds)
    print(f"    feasible directions: max ||AᵀW+WᵀA||_F/η = {viol:.1e} over all solvers, k, matrices")
    print("    raw -msign(Ĝ+2WΛ_k) (the write-up's recovery): median violation/η at k=10 and k=100")
    for label in runs:
        print(f"    {label:20s} " + " ".join(
            f"{n} {np.median(rows[label][n][3][KS.index(10)]):.1e}/{np.median(rows[label][n][3][KS.index(100)]):.1e}"
            for n in kinds))  # fmt: skip
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("    (no plot: pip install -e '.[plot]' for matplotlib)")
        return rows
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    ks = np.asarray(KS)
    for label in runs:
        square = np.concatenate([rows[label][n][1] for n in ("w_qkv", "w_o")], 1)
        tall = np.concatenate([rows[label][n][1] for n in ("w_up", "w_down")], 1)
        dual = np.concatenate([rows[label][n][0] for n in kinds], 1)
        (line,) = axes[0].semilogy(ks, np.maximum(np.median(dual, 1), 1e-7), label=label)
        axes[1].semilogy(ks, np.maximum(np.median(square, 1), 1e-7), color=line.get_color())
        axes[2].semilogy(ks, np.maximum(np.median(tall, 1), 1e-7), color=line.get_color())
    axes[0].set(xlabel="iteration k", ylabel="(||Ĝ+2WΛ_k||_* - D*) / D*", title="dual gap, all 24 matrices")
    axes[1].set(xlabel="iteration k", ylabel="(D* + <A_k,Ĝ>/η) / D*", title="feasible step: attention 256x256 (16)")
    axes[2].set(xlabel="iteration k", ylabel="(D* + <A_k,Ĝ>/η) / D*", title="feasible step: MLP 1024x256 (8)")
    axes[0].legend(fontsize=8)
    fig.suptitle("manifold Muon inner solvers on real B1 gradients (medians over matrices)")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "inner_loop.png", dpi=110)
    print(f"    plot: {out / 'inner_loop.png'}")
    return rows


def step_ms(overrides, steps: int = 10, warmup: int = 2) -> float:
    cfg, mesh, rules = setup(overrides)
    with jax.set_mesh(mesh):
        state, step, batcher, _ = training_parts(cfg, rules, schedule_steps=1000)
        batches = [batcher.train_batch(i) for i in range(4)]
        for i in range(warmup):
            state, m = step(state, *batches[i % 4])
        jax.block_until_ready(state)
        t0 = time.perf_counter()
        for i in range(steps):
            state, m = step(state, *batches[i % 4])
        jax.block_until_ready(state)
    return 1e3 * (time.perf_counter() - t0) / steps


def part_b(rows_a) -> dict:
    print("(b) ms per B1 training step (1 device, float32)")
    runs = {
        **OPTIMIZERS,
        "manifold_muon admm (20 it)": [*OPTIMIZERS["manifold_muon admm (10 it)"][:2], "optimizer.solver_steps=20"],
    }
    ms = {}
    for label, ov in runs.items():
        ms[label] = step_ms(ov, steps=10 if "dual" not in label else 4)
        print(f"    {label:36s} {ms[label]:8.0f} ms  ({ms[label] / ms['adamw']:.2f}x AdamW)")
    dual = ms["manifold_muon dual ascent (100 it)"]
    for k in (10, 20):
        print(f"    dual ascent (100 it) / ADMM ({k} it) per step: {dual / ms[f'manifold_muon admm ({k} it)']:.2f}x")
    if rows_a:
        defaults = OptimizerConfig()
        admm, da = rows_a[f"admm rho={defaults.rho:g}"], rows_a[f"dual ascent lr={defaults.dual_lr:g}"]
        print(f"    primal gap of the step at those counts (from (a); defaults rho={defaults.rho:g}, "
              f"dual_lr={defaults.dual_lr:g}):")
        for n in admm:
            gap = {k: np.median(admm[n][1][KS.index(k)]) for k in (10, 20)}
            dual = np.median(da[n][1][KS.index(100)])
            print(f"    {n:7s} ADMM @10 {gap[10]:.1e}  ADMM @20 {gap[20]:.1e}  dual ascent @100 {dual:.1e}")
    return ms


def part_c(budget: int) -> dict:
    from spmdgpt.loop import train

    print(f"(c) shakespeare_char, {budget} steps (warmup {budget // 10}), validation loss")
    results = {}
    for label, ov in OPTIMIZERS.items():
        cfg = load_config([
            # (the pre-issue-21 model)
            "+experiment=shakespeare_char", "model.qk_norm=false", *ov, f"train.steps={budget}",
            f"optimizer.warmup_steps={budget // 10}",
            "train.eval_every=0", "train.rollout_tokens=0", "train.progress=false", "checkpoint.enabled=false",
            f"run.dir=runs/bench-optimizers-{time.strftime('%Y%m%d-%H%M%S')}-{label.split()[0]}-{len(results)}",
        ])  # fmt: skip
        t0 = time.perf_counter()
        res = train(cfg)
        results[label] = (res.val_loss, time.perf_counter() - t0)
    print(f"    {'optimizer':36s} {'val/loss':>9s} {'wall s':>8s}")
    for label, (val, wall) in results.items():
        print(f"    {label:36s} {val:9.4f} {wall:8.0f}")
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", default="a,b,c")
    ap.add_argument("--budget", type=int, default=200, help="(c): training steps per optimizer")
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args()
    parts = set(args.part.split(","))
    rows = part_a(Path(args.out)) if "a" in parts else None
    summary = {}
    if "b" in parts:
        summary["ms_per_step"] = part_b(rows)
    if "c" in parts:
        summary["val_loss"] = {k: v[0] for k, v in part_c(args.budget).items()}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
