"""Structured outputs' cost: llguidance's token mask per token, and the engine's step with masks
against the same engine without (spmdgpt.engine.grammar; docs/serving.md "Structured outputs").

    python benchmarks/grammar_mask.py [--tokens 200] [--new 48] [--rounds 3]

1. The mask alone, GPT-2's vocabulary (50,257 ids): a JSON schema's matcher fed `--tokens` tokens,
   each drawn at random among the ids its mask allows (seeded); the time of each mask (median,
   p99, max) and of llguidance's view of the vocabulary (made once per server).
2. The engine (8 slots, 8 requests of a 16-token prompt and `--new` new tokens, greedy; random
   weights: 2 layers x 128, GPT-2's vocabulary padded to 50,304, 1 CPU device): tokens/s of
   (a) EngineConfig() (no masks in the step), (b) grammar=True with no request constrained (the
   all-ones rows: the step's own cost of the masks), (c) grammar=True with every request held
   to the schema (the masks computed on the host each step too). Best of `--rounds`, after a
   round that compiles.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age", "tags"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}


def mask_times(grammars, tokens: int, seed: int = 0) -> list:
    c = grammars.constraint(grammars.compile(FORMAT))
    row, rng, times = np.zeros(grammars.words, np.uint32), np.random.default_rng(seed), []
    for _ in range(tokens):
        t0 = time.perf_counter()
        c.fill(row)
        times.append(time.perf_counter() - t0)
        allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))
        if c.finished or not c.consume(int(rng.choice(allowed))):
            c = grammars.constraint(grammars.compile(FORMAT))  # (a complete answer: the next one)
    return times


def engine_rate(cfg, rules, params, grammars, grammar: bool, constrained: bool, new: int, rounds: int) -> float:
    from spmdgpt.engine import Engine, EngineConfig, Request

    engine = Engine(cfg.model, rules, params, 50257, EngineConfig(slots=8, grammar=grammar))
    best = 0.0
    for r in range(rounds + 1):
        requests = [Request(list(range(100 + i, 116 + i)), new, 0.0,
                            constraint=grammars.constraint(grammars.compile(FORMAT)) if constrained else None)
                    for i in range(8)]
        t0 = time.perf_counter()
        engine.run(requests)
        made = sum(len(q.tokens) for q in requests)
        if r:  # (round 0 compiles)
            best = max(best, made / (time.perf_counter() - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--new", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from spmdgpt.config import load_config
    from spmdgpt.data.tokenizers import GPT2Tokenizer, gpt2_cache_dir
    from spmdgpt.engine.grammar import Grammars
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import init_params

    cfg = load_config(["+experiment=shakespeare_gpt2", "model.num_layers=2", "model.d_model=128",
                       "model.num_heads=4", "model.max_seq_len=128", "mesh.data=1"])
    tok = GPT2Tokenizer(gpt2_cache_dir(cfg.data))
    t0 = time.perf_counter()
    grammars = Grammars(tok, [tok.eos_id], cfg.model.vocab_size)
    made = time.perf_counter() - t0
    times = np.asarray(mask_times(grammars, a.tokens)) * 1e3
    print(f"llguidance's vocabulary of GPT-2 ({tok.vocab_size} ids): {made:.2f} s, once")
    print(f"mask per token ({a.tokens} tokens of the schema): median {np.median(times):.3f} ms, "
          f"p99 {np.percentile(times, 99):.3f} ms, max {times.max():.3f} ms")
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = init_params(cfg.model, jax.random.key(0), rules)
        rates = {name: engine_rate(cfg, rules, params, grammars, g, c, a.new, a.rounds)
                 for name, g, c in (("no masks", False, False), ("masks, none constrained", True, False),
                                    ("masks, all constrained", True, True))}
    base = rates["no masks"]
    for name, rate in rates.items():
        print(f"engine, {name:24s} {rate:8.1f} tokens/s  ({rate / base:.3f}x)")


if __name__ == "__main__":
    main()
