"""Ablations of the `make train` recipe at equal wall time (issue: the main job, better).

    python benchmarks/recipe.py [--seconds 150] [--seeds 0,1] [--only a,b] [--jobs 2] [--json out.json]
                                [--experiment shakespeare_char] [-- overrides]

Every variant is `spmdgpt train +experiment=EXPERIMENT` plus its overrides. Equal wall
time, in two phases:

1. Step times, measured first in this process (nothing else should run on the machine then):
   every variant's training step is compiled, then timed round-robin (6 rounds of 4 steps of
   each variant in turn; the median), so that the machine's slow and fast minutes are shared
   evenly between the variants.
2. Training: each variant gets train.steps = SECONDS / its step time (so a technique that slows
   a step pays for it with fewer steps), one fresh `spmdgpt train` process per variant and seed,
   `--jobs` at a time. With fixed step counts the results do not depend on what else runs, so
   this phase may share the machine. Evaluation only at the end (16 fixed batches), no
   rollouts, no checkpoints.

Prints, per variant, the final val/loss of each seed, their mean, spread (max - min) and delta
against the first variant (the baseline), the steps it got and its step time, as a Markdown table for
benchmarks/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def old(*overrides: str) -> list:
    """Overrides on top of the experiment's defaults before this issue changed them (AdamW, no
    QK-norm): rounds 1-3 were measured against that, and stay reproducible with it."""
    keys = {o.split("=")[0] for o in overrides}
    return [o for o in ("optimizer.name=adamw", "model.qk_norm=false") if o.split("=")[0] not in keys] + list(overrides)


WSD = ["optimizer.schedule=wsd", "optimizer.cooldown_fraction=0.4", "optimizer.min_lr_ratio=0.0"]

# name -> overrides added to the experiment (the first one named is the baseline)
VARIANTS = {
    # the first round: each technique alone, against the old default
    "baseline": old(),
    "muon": old("optimizer.name=muon"),
    "qk_norm": old("model.qk_norm=true"),
    "relu2": old("model.mlp=relu2"),
    "untied": old("model.tie_embeddings=false"),
    "untied+lrs": old("model.tie_embeddings=false", "optimizer.embed_lr=0.01", "optimizer.unembed_lr=0.002"),
    "zero_init": old("model.zero_init_out=true"),
    "softcap": old("model.logit_softcap=15"),
    "wsd": old(*WSD),
    "z_loss": old("model.z_loss=1e-4"),
    "dropout": old("model.dropout=0.1"),
    # the second and third rounds: what stacks with the biggest single win (Muon)
    "muon+relu2": old("optimizer.name=muon", "model.mlp=relu2"),
    "muon+relu2+qk_norm": old("optimizer.name=muon", "model.mlp=relu2", "model.qk_norm=true"),
    "muon+qk_norm": old("optimizer.name=muon", "model.qk_norm=true"),
    "muon+qk_norm+wsd": old("optimizer.name=muon", "model.qk_norm=true", *WSD),
    "muon+relu2+qk_norm+wsd": old("optimizer.name=muon", "model.mlp=relu2", "model.qk_norm=true", *WSD),
    # the fourth round: shape and learning rates at fixed wall time, on top of today's default
    # (Muon + QK-norm; `default` adds nothing; seq64/seq256 keep the tokens per step)
    "default": [],
    "batch16": ["data.batch_size=16"],
    "batch64": ["data.batch_size=64"],
    "seq64": ["data.seq_len=64", "data.batch_size=64"],
    "seq256": ["data.seq_len=256", "data.batch_size=16"],
    "d128": ["model.d_model=128"],
    "d256": ["model.d_model=256"],
    "layers3": ["model.num_layers=3"],
    "layers6": ["model.num_layers=6"],
    "d128+layers6": ["model.d_model=128", "model.num_layers=6"],
    "d128+muon_lr0.08": ["model.d_model=128", "optimizer.muon_lr=0.08"],
    "muon_lr0.03": ["optimizer.muon_lr=0.03"],
    "muon_lr0.08": ["optimizer.muon_lr=0.08"],
    "lr4e-3": ["optimizer.lr=4e-3"],
    # the fifth round (issue 35): Qwen3's layer kinds, so that the main job's model exports to
    # Hugging Face (RMSNorm + SwiGLU + QK-norm); the SwiGLU at 344 = 2.6875 x 128 has the GELU MLP's
    # parameters (3 x 344 ~ 2 x 512)
    "rmsnorm": ["model.norm=rmsnorm"],
    "rmsnorm+swiglu": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.mlp_factor=2.6875"],
    # issue 42: a mixture of 8 experts, top-2, each expert half the dense MLP's width (equal active
    # parameters, 4x the MLP's): gutenberg_gpt2's GELU MLP is 4 x d_model, shakespeare_char's SwiGLU 2.6875
    "moe8_top2": ["model.moe.num_experts=8", "model.moe.top_k=2", "model.moe.mlp_factor=2.0"],
    "moe8_top2_char": ["model.moe.num_experts=8", "model.moe.top_k=2", "model.moe.mlp_factor=1.34375",
                       "model.moe.router_z_loss=0.001"],
    # the models issue: DeepSeek-V3's multi-token prediction (one module, weight 0.3), and its
    # multi-head latent attention (the query/key/value projections through latents of 64)
    "mtp1": ["model.mtp_depth=1"],
    "mla64": ["model.mla.kv_rank=64", "model.mla.q_rank=64", "model.mla.rope_dim=16", "model.qk_norm=false",
              "model.qk_norm_scale=false"],
}


def step_seconds(experiment: str, variants: dict, rounds: int = 6, per_round: int = 4) -> dict:
    """{name: median wall time of one training step (after compilation)}, measured in this
    process round-robin (`rounds` rounds of `per_round` steps of each variant in turn), so that
    the machine's slow and fast minutes are shared evenly between the variants."""
    import jax

    from spmdgpt.config import load_config
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.training.step import training_parts

    parts, times = {}, {name: [] for name in variants}
    for name, overrides in variants.items():
        cfg = load_config([f"+experiment={experiment}", *overrides])
        mesh = make_mesh(cfg.mesh)
        with jax.set_mesh(mesh):
            state, step, batcher, _ = training_parts(cfg, Rules(mesh, cfg.sharding, cfg.model))
            state, m = step(state, *batcher.train_batch(0))  # compiles
            jax.block_until_ready(m)
        parts[name] = [mesh, state, step, batcher]
    for r in range(rounds):
        for name, p in parts.items():
            mesh, state, step, batcher = p
            with jax.set_mesh(mesh):
                for i in range(per_round):
                    t0 = time.perf_counter()
                    state, m = step(state, *batcher.train_batch(1 + r * per_round + i))
                    jax.block_until_ready(m)
                    times[name].append(time.perf_counter() - t0)
            p[1] = state
    return {name: statistics.median(t) for name, t in times.items()}


def command(experiment: str, overrides: list, steps: int, seed: int, run_dir: Path) -> list:
    return [sys.executable, "-m", "spmdgpt", "train", f"+experiment={experiment}", "train.progress=false",
            f"train.steps={steps}", "train.eval_every=0", "train.rollout_tokens=0", "checkpoint.enabled=false",
            f"train.seed={seed}", f"run.dir={run_dir}", *overrides]


def final_val(run_dir: Path) -> float:
    rows = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    return [r["val/loss"] for r in rows if "val/loss" in r][-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=150.0, help="training-step seconds every variant gets")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--only", default="", help="comma-separated variant names (the first is the one the "
                    "deltas are against; default: every variant, against baseline)")
    ap.add_argument("--jobs", type=int, default=1, help="training processes at a time (phase 2)")
    ap.add_argument("--json", default="", help="also write the results here")
    ap.add_argument("--experiment", default="shakespeare_char", help="the experiment every variant starts from")
    ap.add_argument("extra", nargs="*", help="overrides added to every variant (after --)")
    args = ap.parse_args()
    from spmdgpt.mesh.runtime import set_default_xla_flags, use_retaining_malloc

    use_retaining_malloc()  # the CLI's settings, so that the measured steps are the runs' steps
    set_default_xla_flags()
    seeds = [int(s) for s in args.seeds.split(",")]
    names = list(VARIANTS) if not args.only else args.only.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        sys.exit(f"--only: unknown variants {', '.join(unknown)}; the variants are {', '.join(VARIANTS)}")
    step_s = step_seconds(args.experiment, {name: VARIANTS[name] + args.extra for name in names})
    for name in names:
        print(f"{name}: {step_s[name] * 1e3:.1f} ms/step -> {int(args.seconds / step_s[name])} steps", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        queue = [(name, seed, Path(tmp) / f"{name}-{seed}") for name in names for seed in seeds]
        running, vals = [], {}
        while queue or running:
            while queue and len(running) < args.jobs:
                name, seed, run_dir = queue.pop(0)
                log = open(Path(tmp) / f"{name}-{seed}.log", "w+")  # (a pipe could fill up and block the run)
                steps = int(args.seconds / step_s[name])
                proc = subprocess.Popen(command(args.experiment, VARIANTS[name] + args.extra, steps, seed, run_dir),
                                        stdout=subprocess.DEVNULL, stderr=log, text=True)
                proc.log = log
                running.append((proc, (name, seed), run_dir))
            time.sleep(0.5)
            for proc, key, run_dir in [job for job in running if job[0].poll() is not None]:
                running.remove((proc, key, run_dir))
                proc.log.seek(0)
                err = proc.log.read()
                proc.log.close()
                if proc.returncode != 0:
                    sys.exit(f"{key} failed ({proc.returncode}):\n{err[-3000:]}")
                vals[key] = final_val(run_dir)
                print(f"{key[0]} seed {key[1]}: val/loss {vals[key]:.4f}", flush=True)
    base = statistics.mean(vals[names[0], s] for s in seeds)
    print(f"\n+experiment={args.experiment}, {args.seconds:g} s of training steps per run, seeds {args.seeds}, "
          f"extra overrides: "
          f"{' '.join(args.extra) or '-'}\n")
    print("| variant | overrides | val/loss per seed | mean | spread | delta | step | steps |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        v = [vals[name, s] for s in seeds]
        mean = statistics.mean(v)
        print(f"| {name} | `{' '.join(VARIANTS[name]) or '-'}` | {', '.join(f'{x:.4f}' for x in v)} | "
              f"{mean:.4f} | {max(v) - min(v):.4f} | {mean - base:+.4f} | {step_s[name] * 1e3:.0f} ms | "
              f"{int(args.seconds / step_s[name])} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"experiment": args.experiment, "seconds": args.seconds,
                                               "seeds": seeds, "extra": args.extra,
                                               "step_s": step_s, "val": {f"{n}/{s}": v for (n, s), v in vals.items()}},
                                              indent=1))


if __name__ == "__main__":
    main()
