"""Serving throughput: the engine (continuous batching over paged KV) against the padded sampler.

    python benchmarks/engine.py [--requests 128] [--rate 0] [--slots 16] [--page 16] [--chunk 128]
                                [--batch 16] [--only engine,sampler] [--set model.FIELD=VALUE ...]

A fixed, seeded workload (`workload`): `--requests` requests with prompts of 16-512 tokens and
outputs of 8-256 tokens (uniform; each runs to its length, no stop token), all at once
(--rate 0) or arriving as a Poisson process of `--rate` requests/s. The model: GPT-2's
vocabulary (50,257 padded to 50,304), 8 layers, d_model 512, 8 heads, context 1,024, float32,
random weights (speed does not depend on them): 50.9M parameters.
1 CPU device.

- engine: `spmdgpt.engine.Engine` (`--slots` sequences, pages of `--page` tokens, prefill
  chunks of `--chunk` tokens); requests enter as they arrive.
- sampler: the padded sampler (`padded_sampler.Sampler`, once `generate.Sampler`) as every path
  used it before the engine: batches of `--batch` requests in arrival order, each padded to its
  longest prompt and run for its longest output (both rounded up to a multiple of 64); a batch
  starts when its last request has arrived and the previous batch ended (`run_sampler`: the
  timeline from measured durations, compiles left out).

Printed per system: output tokens/s (all output tokens over the wall time from the first arrival to
the last token), time to first token and time per output token after it (p50, p99; the sampler
returns a batch's tokens at once, so its first token arrives with its last), and the compile
time, measured apart (a first run of a small workload, not counted).
"""

from __future__ import annotations

import argparse
import json
import time

from spmdgpt.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()
set_default_xla_flags()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from padded_sampler import Sampler, SamplingParams  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.engine import Engine, EngineConfig, Request  # noqa: E402
from spmdgpt.model import init_params, num_params  # noqa: E402
from spmdgpt.sharding import Rules, make_mesh  # noqa: E402

MODEL = ["model.vocab_size=50304", "model.num_layers=8", "model.d_model=512", "model.num_heads=8",
         "model.max_seq_len=1024", "mesh.data=1"]
VOCAB = 50257


def workload(n: int, rate: float, seed: int = 0) -> list:
    """[(arrival s, prompt ids, output tokens)] in arrival order."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / rate, n) if rate > 0 else np.zeros(n)
    arrivals = np.cumsum(gaps) - gaps[0]
    return [(float(a), rng.integers(0, VOCAB, int(rng.integers(16, 513))).tolist(), int(rng.integers(8, 257)))
            for a in arrivals]


def summary(name: str, wall: float, firsts: list, lasts: list, outs: list, arrivals: list) -> dict:
    ttft = np.array([f - a for f, a in zip(firsts, arrivals, strict=True)])
    tpot = np.array([(la - f) / max(n - 1, 1) for f, la, n in zip(firsts, lasts, outs, strict=True)])
    row = {"system": name, "tokens_per_s": sum(outs) / wall, "wall_s": wall, "output_tokens": sum(outs),
           "ttft_p50_s": float(np.percentile(ttft, 50)), "ttft_p99_s": float(np.percentile(ttft, 99)),
           "tpot_p50_ms": 1e3 * float(np.percentile(tpot, 50)), "tpot_p99_ms": 1e3 * float(np.percentile(tpot, 99))}
    print(f"{name:8s} {row['tokens_per_s']:8.1f} tokens/s | wall {wall:6.1f} s | TTFT p50 {row['ttft_p50_s']:6.2f} s "
          f"p99 {row['ttft_p99_s']:6.2f} s | TPOT p50 {row['tpot_p50_ms']:7.1f} ms p99 {row['tpot_p99_ms']:7.1f} ms",
          flush=True)
    return row


def run_engine(engine: Engine, work: list) -> tuple:
    start = time.perf_counter()
    firsts, lasts, reqs, pending = {}, {}, [], list(enumerate(work))

    def seen(r, _):
        now = time.perf_counter() - start
        firsts.setdefault(r.ident, now)
        lasts[r.ident] = now

    while pending or engine.busy:
        now = time.perf_counter() - start
        while pending and pending[0][1][0] <= now:
            _, (_, prompt, n) = pending.pop(0)
            reqs.append(engine.add(Request(prompt, n, temperature=1.0, seed=len(reqs), on_token=seen)))
        if not engine.busy:
            time.sleep(max(0.0, pending[0][1][0] - now))
            continue
        engine.step()
    wall = time.perf_counter() - start
    return wall, [firsts[r.ident] for r in reqs], [lasts[r.ident] for r in reqs], [len(r.tokens) for r in reqs]


def run_sampler(sampler: Sampler, params, work: list, batch: int) -> tuple:
    """Batches in arrival order; a batch starts when the previous one ended and its last request
    arrived. Each batch's prompt and output lengths are padded to multiples of 64 (few programs);
    a shape's first batch is run once untimed (its compile) and then timed, so the timeline is
    built from measured durations without compiles."""
    clock, seen, firsts, outs = 0.0, set(), [], []
    for b in range(0, len(work), batch):
        group = work[b: b + batch]
        new = -(-max(n for *_, n in group) // 64) * 64
        sp = SamplingParams(new, temperature=1.0, seed=b)
        prompts = [p for _, p, _ in group]
        shape = (len(group), -(-max(len(p) for p in prompts) // 64), new)
        if shape not in seen:
            sampler.generate(params, prompts, sp, pad_to=64)
            seen.add(shape)
        t = time.perf_counter()
        rows = sampler.generate(params, prompts, sp, pad_to=64)
        clock = max(clock, group[-1][0]) + time.perf_counter() - t
        for (_, _, n), row in zip(group, rows, strict=True):
            assert len(row) >= n
            firsts.append(clock)
            outs.append(n)
    return clock, firsts, firsts, outs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--rate", type=float, default=0.0, help="Poisson arrivals per second (0: all at once)")
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16, help="the sampler's batch")
    ap.add_argument("--only", default="engine,sampler")
    ap.add_argument("--set", nargs="*", default=[])
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args()
    cfg = load_config(MODEL + args.set)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding)
    work = workload(args.requests, args.rate)
    warm = [(0.0, p[:40], 4) for _, p, _ in workload(4, 0.0, seed=1)]
    rows = []
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        print(f"model: {num_params(cfg.model) / 1e6:.1f}M parameters; {len(work)} requests, "
              f"{sum(len(p) for _, p, _ in work)} prompt and {sum(n for *_, n in work)} output tokens, "
              f"rate {args.rate or 'all at once'}", flush=True)
        for system in args.only.split(","):
            t = time.perf_counter()
            if system == "engine":
                engine = Engine(cfg.model, rules, params, VOCAB,
                                EngineConfig(slots=args.slots, page_size=args.page, chunk=args.chunk))
                run_engine(engine, warm)  # (compiles its one step)
                print(f"engine: compiled in {time.perf_counter() - t:.1f} s; pool {engine.num_pages} pages, "
                      f"{engine.pool_bytes / 2**20:.0f} MiB", flush=True)
                wall, *rest = run_engine(engine, work)
                row = summary("engine", wall, *rest, [a for a, *_ in work])
                row.update(steps=engine.steps, preemptions=engine.preemptions)
            else:
                sampler = Sampler(cfg.model, rules, vocab_limit=VOCAB)
                wall, *rest = run_sampler(sampler, params, work, args.batch)
                row = summary("sampler", wall, *rest, [a for a, *_ in work])
            rows.append(row)
    if len(rows) == 2:
        print(f"engine / sampler: {rows[0]['tokens_per_s'] / rows[1]['tokens_per_s']:.2f}x output tokens/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
