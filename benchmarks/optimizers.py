"""Manifold Muon's inner solvers on real gradients, optimizer step times, and a loss table.

    python benchmarks/optimizers.py [--part a,b,c] [--budget 200] [--out benchmarks/out]

(a) Inner loop on real gradients of the B1 model (vocab 65, 4 layers, d_model 256, seq 256,
    batch 16) after 30 manifold-Muon steps on Tiny Shakespeare: for every hidden matrix, the
    dual objective ||Ĝ + 2WΛ_k||_* (gap to the best value any solver reached) and the
    constraint violation ||A_kᵀW + WᵀA_k||_F / η of A_k = -η msign(Ĝ + 2WΛ_k), against the
    iteration k, for ADMM with ρ in {2, 4, 8, 16} and for dual ascent. Plot: out/inner_loop.png.
(b) ms per B1 training step: AdamW, Muon, manifold Muon (ADMM, 10 iterations) and manifold Muon
    (dual ascent, 100 iterations); the ratio dual ascent / ADMM, with both solvers' final
    objective gap and violation at those iteration counts from (a).
(c) Validation loss of shakespeare_char after --budget steps (warmup 10% of them, cosine) for
    the four optimizers, one table.
Needs the `bench` extra (matplotlib) for the plot.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from spmdgpt.runtime import set_default_xla_flags

set_default_xla_flags()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.data import load_dataset
from spmdgpt.data.loader import Batcher
from spmdgpt.model import loss_fn, param_info
from spmdgpt.model.transformer import ParamInfo
from spmdgpt.optim import build_optimizer
from spmdgpt.optim.manifold import direction_from_dual, dual_iterates, dual_objective, tangent_violation
from spmdgpt.optim.matrices import MatrixView, is_hidden_matrix
from spmdgpt.optim.muon import MomentumState, _momentum
from spmdgpt.sharding import Rules, make_mesh
from spmdgpt.train import init_state, make_train_step

B1 = [
    "+experiment=shakespeare_char", "model.vocab_size=65", "model.num_layers=4",
    "model.num_heads=4", "model.d_model=256", "model.max_seq_len=256", "data.seq_len=256",
    "data.batch_size=16", "mesh.data=1",
]  # fmt: skip
OPTIMIZERS = {
    "adamw": ["optimizer.name=adamw"],
    "muon": ["optimizer.name=muon"],
    "manifold_muon admm (10 it)": ["optimizer.name=manifold_muon", "optimizer.solver=admm", "optimizer.solver_steps=10"],
    "manifold_muon dual ascent (100 it)": ["optimizer.name=manifold_muon", "optimizer.solver=dual_ascent", "optimizer.solver_steps=100"],
}  # fmt: skip
RHOS = (2.0, 4.0, 8.0, 16.0)
INNER_STEPS = 100
KS = (0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100)  # iterations at which (a) evaluates


def setup(overrides):
    cfg = load_config([*B1, *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding)
    return cfg, mesh, rules


def real_problems(steps: int = 30):
    """(name, W [B, m, n] tall, G [B, m, n]) per hidden matrix of B1 after `steps` manifold-Muon
    steps; G is the Nesterov momentum direction the solver would see at the next step."""
    cfg, mesh, rules = setup(["optimizer.name=manifold_muon", "optimizer.warmup_steps=5"])
    data = load_dataset(cfg.data)
    with jax.set_mesh(mesh):
        info = param_info(cfg.model)
        opt = build_optimizer(cfg.optimizer, info, 1000)
        state = init_state(cfg, rules, opt)
        step = make_train_step(cfg, rules, opt)
        batcher = Batcher(data.train, cfg.data.seq_len, cfg.data.batch_size, 0, rules.batch_sharding())
        for i in range(steps):
            state, m = step(state, *batcher.train_batch(i))
        print(f"(a) B1 after {steps} manifold-Muon steps: loss {float(m['loss']):.3f}")
        grads = jax.grad(lambda p: loss_fn(cfg.model, rules, p, *batcher.train_batch(steps)))(state.params)
        mu = state.opt_state[1].inner_states["matrix"].inner_state.mu
        beta = cfg.optimizer.muon_momentum
    out = []
    for name in ("w_qkv", "w_o", "w_up", "w_down"):
        i: ParamInfo = getattr(info.blocks, name)
        assert is_hidden_matrix(i)
        view = MatrixView.of(i)
        w = view.to_matrices(jax.device_get(getattr(state.params.blocks, name)))
        _, d = _momentum(getattr(grads.blocks, name), MomentumState(0, getattr(mu.blocks, name)), beta, True)
        out.append((name, jnp.asarray(w), jnp.asarray(view.to_matrices(jax.device_get(d)))))
    return out


def stable_rank(g) -> float:
    s = np.linalg.svd(np.asarray(g, np.float64), compute_uv=False)
    return float(np.mean(np.sum(s**2, -1) / s[..., 0] ** 2))


def trace(w, g, solver, **kw):
    """Per iteration k = 0..INNER_STEPS: mean dual objective and mean violation over the batch."""
    lams = jax.jit(lambda w, g: dual_iterates(w, g, solver=solver, steps=INNER_STEPS, trace=True, **kw))(w, g)
    lams = lams[np.asarray(KS)]
    obj = jax.jit(jax.vmap(lambda lam: dual_objective(w, g, lam, 10)))(lams)
    viol = jax.jit(jax.vmap(lambda lam: tangent_violation(w, direction_from_dual(w, g, lam, 1.0, 10))))(lams)
    return np.asarray(obj, np.float64), np.asarray(viol, np.float64)  # [K+1, B]


def part_a(out: Path) -> dict:
    problems = real_problems()
    runs = {f"admm rho={r:g}": ("admm", dict(rho=r)) for r in RHOS}
    runs.update({f"dual ascent lr={lr:g}": ("dual_ascent", dict(lr=lr)) for lr in (0.001, 0.003, 0.01)})
    curves = {k: {} for k in runs}
    for name, w, g in problems:
        print(f"    {name}: {w.shape[0]} matrices {w.shape[1]}x{w.shape[2]}, stable rank of G {stable_rank(g):.1f}")
        for label, (solver, kw) in runs.items():
            curves[label][name] = trace(w, g, solver, **kw)
    # gap to the best dual objective any solver reached, per matrix, relative
    rows = {}
    best = {n: np.min([curves[k][n][0].min(0) for k in runs], axis=0) for n, _, _ in problems}
    for label in runs:
        gap = np.concatenate([(curves[label][n][0] - best[n]) / best[n] for n, _, _ in problems], axis=1)
        viol = np.concatenate([curves[label][n][1] for n, _, _ in problems], axis=1)
        rows[label] = (np.median(gap, 1), np.median(viol, 1), viol.max(1))
    print("(a) median over all 24 matrices: relative dual gap / violation ||AᵀW+WᵀA||_F/η (max)")
    print(f"    {'solver':16s} " + " ".join(f"{'k=' + str(k):>24s}" for k in (0, 10, 30, 100)))
    for label, (gap, viol, vmax) in rows.items():
        cells = " ".join(f"{gap[KS.index(k)]:8.1e} {viol[KS.index(k)]:7.1e} ({vmax[KS.index(k)]:5.0e})" for k in (0, 10, 30, 100))
        print(f"    {label:16s} {cells}")
    print("    per matrix kind, k=10 and k=100: relative gap / median violation (max)")
    for label in runs:
        cells = []
        for n, _, _ in problems:
            gap = (curves[label][n][0] - best[n]) / best[n]
            viol = curves[label][n][1]
            cells += [f"{n} " + " ".join(
                f"{np.median(gap[KS.index(k)]):.0e}/{np.median(viol[KS.index(k)]):.1e}({viol[KS.index(k)].max():.0e})"
                for k in (10, 100))]  # fmt: skip
        print(f"    {label:16s} " + " | ".join(cells))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("    (no plot: pip install -e '.[bench]' for matplotlib)")
        return rows
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ks = np.asarray(KS)
    for label, (gap, viol, vmax) in rows.items():
        (line,) = axes[0].semilogy(ks, np.maximum(gap, 1e-8), label=label)
        axes[1].semilogy(ks, viol, color=line.get_color(), label=label)
        axes[1].semilogy(ks, vmax, color=line.get_color(), linestyle="--")
    axes[0].set(xlabel="iteration", ylabel="relative dual gap (median)", title="||Ĝ+2WΛ||_* vs best")
    axes[1].set(xlabel="iteration", ylabel="||AᵀW+WᵀA||_F / η", title="tangent violation: median (solid), max (dashed)")
    axes[0].legend()
    fig.suptitle("manifold Muon inner solvers on real B1 gradients (24 matrices)")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "inner_loop.png", dpi=110)
    print(f"    plot: {out / 'inner_loop.png'}")
    return rows


def step_ms(overrides, steps: int = 10, warmup: int = 2) -> float:
    cfg, mesh, rules = setup(overrides)
    data = load_dataset(cfg.data)
    with jax.set_mesh(mesh):
        opt = build_optimizer(cfg.optimizer, param_info(cfg.model), 1000)
        state = init_state(cfg, rules, opt)
        step = make_train_step(cfg, rules, opt)
        batcher = Batcher(data.train, cfg.data.seq_len, cfg.data.batch_size, 0, rules.batch_sharding())
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
    ms = {}
    for label, ov in OPTIMIZERS.items():
        ms[label] = step_ms(ov, steps=10 if "dual" not in label else 4)
        print(f"    {label:36s} {ms[label]:8.0f} ms  ({ms[label] / ms['adamw']:.2f}x AdamW)")
    admm, dual = ms["manifold_muon admm (10 it)"], ms["manifold_muon dual ascent (100 it)"]
    print(f"    dual ascent / ADMM per step: {dual / admm:.2f}x (target >= 2)")
    if rows_a:
        g_a, v_a, _ = rows_a["admm rho=16"]
        g_d, v_d, _ = rows_a["dual ascent lr=0.003"]
        i10, i100 = KS.index(10), KS.index(100)
        print(f"    inner problem at those counts (from (a)): ADMM rho=16 @10 gap {g_a[i10]:.1e} viol "
              f"{v_a[i10]:.1e}; dual ascent @100 gap {g_d[i100]:.1e} viol {v_d[i100]:.1e}")
    return ms


def part_c(budget: int) -> dict:
    from spmdgpt.train import train

    print(f"(c) shakespeare_char, {budget} steps (warmup {budget // 10}), validation loss")
    results = {}
    for label, ov in OPTIMIZERS.items():
        cfg = load_config([
            "+experiment=shakespeare_char", *ov, f"train.steps={budget}", f"optimizer.warmup_steps={budget // 10}",
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
