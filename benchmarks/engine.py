"""Serving throughput: the engine (continuous batching over paged KV) against the padded sampler.

    python benchmarks/engine.py [--requests 128] [--rate 0] [--slots 16] [--page 16] [--chunk 128]
                                [--batch 16] [--buckets 4] [--only engine,engine-gather,sampler,hf-cb,hf-padded]
                                [--set model.FIELD=VALUE ...]

A fixed, seeded workload (`workload`): `--requests` requests with prompts of 16-512 tokens and
outputs of 8-256 tokens (uniform; each runs to its length, no stop token), all at once
(--rate 0) or arriving as a Poisson process of `--rate` requests/s. The model: GPT-2's
vocabulary (50,257 padded to 50,304), 8 layers, d_model 512, 8 heads, context 1,024, float32,
random weights (speed does not depend on them): 50.9M parameters.
1 CPU device.

- engine: `spmdgpt.engine.Engine` (`--slots` sequences, pages of `--page` tokens, prefill
  chunks of `--chunk` tokens, `--buckets` sizes of its decode-only step as `spmdgpt serve`'s);
  requests enter as they arrive.
- engine-gather: the same with decode_attention=gather (on a GPU or a TPU, `engine` decodes by the
  platform's paged-attention kernel: this is the gather it replaces; on a CPU both gather).
- sampler: the padded sampler (`padded_sampler.Sampler`, once `generate.Sampler`) as every path
  used it before the engine: batches of `--batch` requests in arrival order, each padded to its
  longest prompt and run for its longest output (both rounded up to a multiple of 64); a batch
  starts when its last request has arrived and the previous batch ended (`run_sampler`: the
  timeline from measured durations, compiles left out).
- hf-cb, hf-padded: transformers' generation on the same model exported (`spmdgpt.hf.export`:
  GPTNeoXForCausalLM with these weights) in the PyTorch side environment (`benchmarks/engine_hf.py`,
  a child process; `make torch-env`): its continuous batching with the engine's budget (slots,
  pages, tokens a pass), and `model.generate` on padded batches as the sampler runs them.

`--mbu`: decode at batch 1 instead (one request, a 16-token prompt, 256 new tokens, greedy), engine and
sampler: the time per output token and the memory-bandwidth utilisation, the bytes a decode step
must read (every parameter, and the keys and values of the tokens so far: at the mean context)
per token time over this machine's copy bandwidth (numpy copying 512 MiB, read + write counted,
the best of 5).

Printed per system: output tokens/s (all output tokens over the wall time from the first arrival to
the last token), time to first token and time per output token after it (p50, p99; the sampler
returns a batch's tokens at once, so its first token arrives with its last), and the compile
time, measured apart (a first run of a small workload, not counted).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from spmdgpt.mesh.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()
set_default_xla_flags()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from padded_sampler import Sampler, SamplingParams  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.engine import Engine, EngineConfig, Request, pool_bytes  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model import init_params, num_params  # noqa: E402

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


def run_transformers(cfg, params, work: list, systems: list, args) -> list:
    """(wall, firsts, lasts, outs, compile s) per transformers system, from engine_hf.py's JSON lines."""
    import os
    import subprocess
    import tempfile
    from pathlib import Path

    from torch_env import require_torch_python

    from spmdgpt.hf.export import hf_config, to_hf
    from spmdgpt.hf.files import write_folder

    with tempfile.TemporaryDirectory() as tmp:
        config = hf_config(cfg.model, VOCAB - 1)
        write_folder(tmp, to_hf(cfg.model, jax.device_get(params)), {"config.json": json.dumps(config)}, 1 << 40)
        Path(tmp, "work.json").write_text(json.dumps(work))
        here = Path(__file__).parent
        cmd = [require_torch_python("engine.py"), str(here / "engine_hf.py"), "--model", tmp, "--work",
               f"{tmp}/work.json", "--only", ",".join(s.removeprefix("hf-") for s in systems), "--slots",
               str(args.slots), "--page", str(args.page), "--chunk", str(args.chunk), "--batch", str(args.batch),
               "--threads", str(os.cpu_count())]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    print(out.splitlines()[0], flush=True)
    return [(r["system"], r["wall"], r["firsts"], r["lasts"], r["outs"], r["compile_s"]) for r in rows]


def copy_bandwidth(mib: int = 512) -> float:
    """Bytes/s of a numpy copy of `mib` MiB (read + write), the best of 5."""
    a = np.ones(mib << 18, np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best


def decode_bytes(cfg, new: int, prompt: int) -> float:
    """Bytes one decode step must read at the mean context: float32 parameters and what every
    layer caches per token (the engine's pool of one page of one token)."""
    return num_params(cfg.model) * 4 + pool_bytes(cfg.model, 1, 1) * (prompt + new / 2)


def run_mbu(cfg, rules, params, args) -> list:
    prompt = workload(1, 0.0, seed=3)[0][1][:16]
    new = 256
    need, bandwidth = decode_bytes(cfg, new, len(prompt)), copy_bandwidth()
    print(f"copy bandwidth {bandwidth / 1e9:.1f} GB/s; a decode step reads {need / 2**20:.1f} MiB", flush=True)
    rows = []
    for system in args.only.split(","):
        if system == "engine":
            engine = Engine(cfg.model, rules, params, VOCAB, EngineConfig(slots=1, page_size=args.page,
                                                                          chunk=args.chunk, buckets=args.buckets))
            engine.warm()  # (compiles every program of its step ahead: the runs reuse them)
            run_engine(engine, [(0.0, prompt, 4)])
            times = []
            for _ in range(3):
                _, firsts, lasts, outs = run_engine(engine, [(0.0, prompt, new)])
                times.append((lasts[0] - firsts[0]) / (outs[0] - 1))
            per_token = statistics.median(times)
        elif system == "sampler":
            sampler = Sampler(cfg.model, rules, vocab_limit=VOCAB)
            spans = {}
            for n in (1, new):
                sp = SamplingParams(n, temperature=0.0)
                sampler.generate(params, [prompt], sp)
                runs = []
                for _ in range(3):
                    t = time.perf_counter()
                    sampler.generate(params, [prompt], sp)
                    runs.append(time.perf_counter() - t)
                spans[n] = statistics.median(runs)
            per_token = (spans[new] - spans[1]) / (new - 1)
        else:
            continue
        row = {"system": system, "tpot_ms": 1e3 * per_token, "bytes_per_token": need,
               "gb_per_s": need / per_token / 1e9, "mbu": need / per_token / bandwidth,
               "copy_gb_per_s": bandwidth / 1e9}
        print(f"{system:8s} batch 1: {row['tpot_ms']:.2f} ms a token, {row['gb_per_s']:.2f} GB/s read = "
              f"{100 * row['mbu']:.1f}% of the copy bandwidth", flush=True)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--rate", type=float, default=0.0, help="Poisson arrivals per second (0: all at once)")
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16, help="the sampler's batch")
    ap.add_argument("--buckets", type=int, default=4, help="the engine's sizes of a decode-only step "
                    "(EngineConfig.buckets; serve's default 4; 1: one size, the engine before 2026-11-30)")
    ap.add_argument("--only", default="engine,sampler")
    ap.add_argument("--set", nargs="*", default=[])
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--mbu", action="store_true", help="decode at batch 1: time per token, bandwidth use")
    args = ap.parse_args()
    cfg = load_config(MODEL + args.set)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding)
    work = workload(args.requests, args.rate)
    warm = [(0.0, p[:40], 4) for _, p, _ in workload(4, 0.0, seed=1)]
    rows = []
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        print(f"model: {num_params(cfg.model) / 1e6:.1f}M parameters" + ("" if args.mbu else
              f"; {len(work)} requests, {sum(len(p) for _, p, _ in work)} prompt and "
              f"{sum(n for *_, n in work)} output tokens, rate {args.rate or 'all at once'}"), flush=True)
        if args.mbu:
            rows = run_mbu(cfg, rules, params, args)
        systems = [] if args.mbu else args.only.split(",")
        hf = [s for s in systems if s.startswith("hf-")]
        for system in [s for s in systems if not s.startswith("hf-")]:
            t = time.perf_counter()
            if system in ("engine", "engine-gather"):  # (engine: the paged kernel where the platform has one)
                engine = Engine(cfg.model, rules, params, VOCAB,
                                EngineConfig(slots=args.slots, page_size=args.page, chunk=args.chunk,
                                             decode_attention="gather" if system == "engine-gather" else "auto",
                                             buckets=args.buckets))
                engine.warm()  # (every program of its step, `Engine.programs`, compiled ahead: the runs reuse them)
                run_engine(engine, warm)
                print(f"{system}: compiled in {time.perf_counter() - t:.1f} s; pool {engine.num_pages} pages, "
                      f"{engine.pool_bytes / 2**20:.0f} MiB; decode rows by {engine.attention_name()}", flush=True)
                wall, *rest = run_engine(engine, work)
                row = summary(system, wall, *rest, [a for a, *_ in work])
                row.update(steps=engine.steps, preemptions=engine.preemptions)
            else:
                sampler = Sampler(cfg.model, rules, vocab_limit=VOCAB)
                wall, *rest = run_sampler(sampler, params, work, args.batch)
                row = summary("sampler", wall, *rest, [a for a, *_ in work])
            rows.append(row)
        if hf:
            for name, wall, firsts, lasts, outs, compile_s in run_transformers(cfg, params, work, hf, args):
                print(f"{name}: first calls {compile_s:.1f} s (untimed)", flush=True)
                rows.append(summary(name, wall, firsts, lasts, outs, [a for a, *_ in work]))
    base = next((r for r in rows if r["system"] == "engine" and not args.mbu), None)
    for r in rows:
        if base and r is not base:
            print(f"engine / {r['system']}: {base['tokens_per_s'] / r['tokens_per_s']:.2f}x output tokens/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
