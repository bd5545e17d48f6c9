"""On-policy distillation against SFT at equal wall time, on the arithmetic walk (the RL issue).

    python benchmarks/distill.py [--out DIR] [--seeds 0,1] [--distill-steps 1200] [--teacher-steps 800]
                                 [--lr 1e-4] [--more-lrs 1e-3]

1. The teacher: `arithmetic_sft` at 256 wide (4 layers, 8 heads: 3.3M parameters, 4x the
   student's 0.84M), trained --teacher-steps steps on the 20,000 worked problems.
2. The student: `arithmetic_sft` as shipped (200 steps: right on about a quarter of the held-out
   prompts).
3. The teacher's own answers, greedy, to GRPO's 3,800 training prompts (`arithmetic_grpo`'s file),
   written as conversations: the data of off-policy distillation (sequence-level KD).
4. Per seed (train.seed), three arms from the student, each a `spmdgpt train` process:
   - `distill`: `arithmetic_grpo` with rl.objective=distill rl.teacher=TEACHER rl.group_size=1 (64
     prompts a step, one answer each) for --distill-steps steps; its wall time T is the budget of
   - `sft_teacher`: `arithmetic_sft` on the teacher's answers, train.time_budget=T;
   - `sft_more`: `arithmetic_sft` continued on the worked problems, train.time_budget=T;
   - `distill_lrX` for each of --more-lrs: the distillation arm at another learning rate (its own
     wall time reported beside T).
   All score val/reward: greedy answers to the same 64 held-out prompts, rewarded 1 when the last
   number is right (numeric).

Finished runs are kept (a rerun skips them). Prints a Markdown table of each arm's val/reward per
seed (first and last evaluation, the run's steps and wall seconds) and writes DIR/summary.json;
`spmdgpt plot` draws the arms of each seed into DIR/plots-SEED.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TEACHER = ["+experiment=arithmetic_sft", "model.d_model=256", "model.num_heads=8"]
STUDENT = ["+experiment=arithmetic_sft"]
QUIET = ["train.progress=false"]


def train(run: Path, *args: str) -> float:
    """`spmdgpt train ARGS run.dir=RUN` (its output into RUN.log) unless an earlier call finished it;
    its wall seconds, recorded in RUN/wall.json (SystemExit on failure)."""
    done = run / "wall.json"
    if done.is_file():
        return json.loads(done.read_text())
    t0 = time.perf_counter()
    log = run.with_suffix(".log")
    with open(log, "w") as f:
        code = subprocess.call([sys.executable, "-m", "spmdgpt", "train", *args, f"run.dir={run}"], stdout=f,
                               stderr=subprocess.STDOUT,
                               env={**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")})
    if code:
        raise SystemExit(f"spmdgpt train {' '.join(args)} failed (exit {code}); see {log}")
    wall = time.perf_counter() - t0
    done.write_text(json.dumps(wall))
    return wall


def rows(run: Path) -> list:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def teacher_answers(teacher: Path, out: Path) -> float:
    """The teacher's greedy answers to arithmetic_grpo's training prompts as conversations in
    `out`; returns their mean reward (numeric)."""
    import jax

    from spmdgpt.config import load_config
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.rl.loop import load_prompts
    from spmdgpt.rl.rewards import reward_function
    from spmdgpt.rl.rollouts import Rollouts
    from spmdgpt.training.state import starting_params

    cfg = load_config(["+experiment=arithmetic_grpo", *TEACHER[1:], f"checkpoint.init_from={teacher}", "mesh.data=1"])
    corpus = load_prompts(cfg)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        params = starting_params(cfg, rules)
        ro = Rollouts(cfg, rules, corpus.tokenizer, reward_function("numeric"),
                      longest=max(len(p.tokens) for p in corpus.train))
        done = ro.complete(params, corpus.train, ro.sampling(0, greedy=True))
    with open(out, "w") as f:
        for p, text in zip(corpus.train, done.texts, strict=True):
            f.write(json.dumps({"messages": [*p.prompt, {"role": "assistant", "content": text}]}) + "\n")
    return float(done.rewards.mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/distill"))
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--teacher-steps", type=int, default=800)
    ap.add_argument("--distill-steps", type=int, default=1200)
    ap.add_argument("--lr", type=float, default=1e-4, help="the distillation arm's learning rate (AdamW)")
    ap.add_argument("--more-lrs", default="", help="more distillation arms at these learning rates (comma-separated)")
    a = ap.parse_args()
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    teacher, student = out / "teacher", out / "student"
    train(teacher, *TEACHER, *QUIET, f"train.steps={a.teacher_steps}", "train.eval_every=200")
    train(student, *STUDENT, *QUIET)
    answers = out / "teacher_answers.jsonl"
    if not answers.is_file():
        print(f"teacher's answers to the training prompts: mean reward {teacher_answers(teacher, answers):.3f}",
              file=sys.stderr)
    summary = {"teacher": rows(teacher)[-1], "student": [r for r in rows(student) if "val/reward" in r][-1]}
    for seed in a.seeds.split(","):
        more = [f"distill_lr{lr}" for lr in a.more_lrs.split(",") if lr]
        runs = {name: out / f"{name}-{seed}" for name in ("distill", "sft_teacher", "sft_more", *more)}
        common = [f"checkpoint.init_from={student}", f"train.seed={seed}", *QUIET, "checkpoint.enabled=false"]

        def distill(run: Path, lr: float) -> float:
            return train(run, "+experiment=arithmetic_grpo", *common, "rl.objective=distill", f"rl.teacher={teacher}",
                         "rl.group_size=1", f"optimizer.lr={lr}", f"train.steps={a.distill_steps}",
                         f"train.eval_every={a.distill_steps // 6}")

        wall = {"distill": distill(runs["distill"], a.lr)}
        for name, data in (("sft_teacher", [f"data.datasets.sums.paths=[{answers}]"]), ("sft_more", [])):
            wall[name] = train(runs[name], *STUDENT, *common, *data, f"train.time_budget={wall['distill']:.0f}",
                               "train.eval_every=100")
        for name in more:
            wall[name] = distill(runs[name], float(name[len("distill_lr"):]))
        summarise_seed(out, seed, runs, wall, summary)
    print(f"student before: val/reward {summary['student']['val/reward']:.3f}; teacher: "
          f"{[x['val/reward'] for x in rows(teacher) if 'val/reward' in x][-1]:.3f}")
    print_arms(summary, [name for name in summary if name not in ("teacher", "student")])
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


def summarise_seed(out: Path, seed: str, runs: dict, wall: dict, summary: dict) -> None:
    """One seed's arms (name -> run) plotted into OUT/plots-SEED, and each one's val/reward (first,
    last, best), steps and wall seconds appended to summary[name]."""
    subprocess.call([sys.executable, "-m", "spmdgpt", "plot", *map(str, runs.values()),
                     f"out={out / f'plots-{seed}'}"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    for name, run in runs.items():
        r = rows(run)
        evals = [x["val/reward"] for x in r if "val/reward" in x]
        steps = max(x["step"] for x in r if "loss" in x)
        summary.setdefault(name, []).append({"seed": int(seed), "first": evals[0], "last": evals[-1],
                                             "best": max(evals), "steps": steps, "wall_s": wall.get(name)})


def print_arms(summary: dict, names: list) -> None:
    """The Markdown table of the named arms: val/reward at the end per seed, their mean, steps, wall s."""
    print("| arm | val/reward at the end, per seed | mean | steps | wall s |")
    print("| --- | --- | --- | --- | --- |")
    for name in names:
        got = summary[name]
        print(f"| {name} | {', '.join(f'{g['last']:.3f}' for g in got)} | "
              f"{statistics.mean(g['last'] for g in got):.3f} | {', '.join(str(g['steps']) for g in got)} | "
              f"{', '.join(f'{g['wall_s']:.0f}' for g in got)} |")


if __name__ == "__main__":
    main()
