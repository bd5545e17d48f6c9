"""Speculative decoding from a model's multi-token-prediction modules: tokens/s with and without.

    python benchmarks/speculate.py --run RUN [--tokens 200] [--slots 1 8] [--repeats 3]

RUN: a trained run with model.mtp_depth >= 1 (e.g. `spmdgpt train +experiment=deepseek_v3_small
run.dir=RUN`). For each number of slots and each temperature (0: greedy; 0.8), the same 8
prompts (speakers' names of Tiny Shakespeare) each continued by --tokens tokens (no stop token)
on an engine with `--slots` slots, speculate=0 against speculate=mtp_depth, the two interleaved
--repeats times (each engine compiled and run once before it is timed). Printed: output
tokens/s (the best of the repeats), the engine's steps, the drafts' acceptance rate, tokens a
sequence gets per decode step, and whether the greedy tokens are plain decoding's.
"""

from __future__ import annotations

import argparse
import time

import jax

from spmdgpt.cli.runs import model_source, source_params, start_mesh
from spmdgpt.engine import Engine, EngineConfig, Request
from spmdgpt.mesh.sharding import Rules

PROMPTS = ["ROMEO:\n", "JULIET:\n", "KING RICHARD II:\n", "First Citizen:\n", "MENENIUS:\n", "DUKE VINCENTIO:\n",
           "LADY CAPULET:\n", "GLOUCESTER:\n"]


def timed(engine: Engine, requests: list) -> tuple:
    steps, drafted, accepted = engine.steps, engine.drafted, engine.accepted
    start = time.perf_counter()
    out = engine.run(requests)
    wall = time.perf_counter() - start
    return out, wall, engine.steps - steps, engine.drafted - drafted, engine.accepted - accepted


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--slots", type=int, nargs="*", default=[1, 8])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cfg, tok = model_source(args.run, [])
    mesh = start_mesh(cfg, data_errors=False)
    depth = cfg.model.mtp_depth
    assert depth >= 1, f"{args.run} has model.mtp_depth=0: nothing drafts"
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        _, params = source_params(args.run, cfg, rules, None, fix="use the run's config")
        print(f"{args.run}: {cfg.run.name}, mtp_depth {depth}, {jax.devices()[0].device_kind}")
        for slots in args.slots:
            for temp in (0.0, 0.8):
                make = lambda: [Request(tok.encode(p), args.tokens, temperature=temp, seed=i)  # noqa: E731
                                for i, p in enumerate(PROMPTS)]
                engines = {d: Engine(cfg.model, rules, params, tok.vocab_size, EngineConfig(slots=slots, speculate=d))
                           for d in (0, depth)}
                for e in engines.values():
                    e.run(make())  # (compiles every variant)
                best, outs = {}, {}
                for _ in range(args.repeats):
                    for d, e in engines.items():
                        out, wall, steps, drafted, accepted = timed(e, make())
                        tokens = sum(len(r.tokens) for r in out)
                        if d not in best or tokens / wall > best[d][0]:
                            best[d] = (tokens / wall, steps, accepted / max(drafted, 1), tokens)
                        outs[d] = [r.tokens for r in out]
                base = best[0][0]
                for d, (rate, steps, acc, tokens) in best.items():
                    per_step = tokens / (steps * min(slots, len(PROMPTS)))
                    print(f"slots {slots} temperature {temp} speculate {d}: {rate:8.1f} tok/s ({rate / base:.2f}x) | "
                          f"{steps} steps | acceptance {acc:.3f} | {per_step:.2f} tokens/sequence-step"
                          + (f" | greedy tokens equal: {outs[d] == outs[0]}" if temp == 0 and d else ""), flush=True)


if __name__ == "__main__":
    main()
