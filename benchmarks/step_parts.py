"""Where a training step's time goes: spmdgpt against the PyTorch reference, part by part.

    python benchmarks/step_parts.py [--config B1] [--rounds 5] [--compile]

spmdgpt in this process, PyTorch in a child in its own environment (torch_parts.py; the two take
turns, the other waiting, so they see the same moment of the machine), float32, the model of
benchmarks/peer.py (benchmarks/torch_gpt.py, eager or with `--compile`). Parts, each timed in
windows of 5 calls, the libraries and parts alternating, `--rounds` times; medians printed:
- forward: the loss only (PyTorch under no_grad);
- forward + backward: the loss and all gradients;
- step: forward, backward, clipping and AdamW (spmdgpt's jitted train step; PyTorch fused AdamW);
- attention: one layer's causal attention, forward and backward, [batch, heads, seq, 64]
  (spmdgpt's blocked attention, `model.attention_block` 64, differentiated by autodiff;
  PyTorch's scaled_dot_product_attention, its fused CPU flash-attention kernel).
The ratio column is PyTorch's time over spmdgpt's (above 1: spmdgpt is faster). Both models'
loss at initialization (near ln(vocab)) is printed as a check on the shapes; the last line is the
medians and losses as JSON. Issue 20's measurement of where B1's gap to PyTorch is (BENCHMARKS.md, "CPU").
"""

from __future__ import annotations

import argparse
import atexit
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from spmdgpt.mesh.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()  # the process settings of `spmdgpt train`
set_default_xla_flags()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from throughput import COMMON, CONFIGS, setup  # noqa: E402  (this folder is on sys.path when a script here runs)
from torch_env import require_torch_python  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.model import loss_fn  # noqa: E402
from spmdgpt.model.attention import blocked_causal_attention  # noqa: E402

CALLS = 5  # calls per timed window
HERE = Path(__file__).parent


def jax_parts(overrides: list) -> dict:
    """{part: f() -> something to wait on} for spmdgpt at the config's shapes."""
    cfg, rules, _, state, step, batches = setup(overrides)
    m, (x, y), state = cfg.model, batches[0], [state]
    shape = (cfg.data.batch_size, cfg.data.seq_len)
    with jax.set_mesh(rules.mesh):
        loss = jax.jit(lambda p: loss_fn(m, rules, p, x, y))
        grads = jax.jit(jax.value_and_grad(lambda p: loss_fn(m, rules, p, x, y)))
        q, k, v, w = (jax.random.normal(key, (shape[0], m.num_heads, shape[1], m.d_model // m.num_heads))
                      for key in jax.random.split(jax.random.key(0), 4))
        attention = jax.jit(
            jax.grad(
                lambda q, k, v: jnp.sum(w * blocked_causal_attention(q, k, v, m.attention_block, rules)),
                argnums=(0, 1, 2),
            )
        )

    def take_step():
        state[0], metrics = step(state[0], x, y)
        return metrics

    def run(f):  # the functions close over arrays on the one-device mesh; call them inside it
        def call():
            with jax.set_mesh(rules.mesh):
                return jax.block_until_ready(f())
        return call

    return {"forward": run(lambda: loss(state[0].params)), "forward + backward": run(lambda: grads(state[0].params)),
            "step": run(take_step), "attention": run(lambda: attention(q, k, v))}


def torch_parts(overrides: list, compile: bool) -> tuple[dict, dict]:
    """The same parts for the PyTorch reference (eager, or the model under torch.compile), at the
    same shapes, in a child process in the PyTorch environment (torch_parts.py): ({part: f() ->
    ms per call of a window}, the child's versions)."""
    cfg = load_config([*COMMON, *overrides])
    m = cfg.model
    shape = {"vocab": m.vocab_size, "d": m.d_model, "heads": m.num_heads, "layers": m.num_layers,
             "seq": cfg.data.seq_len, "batch": cfg.data.batch_size}
    child = subprocess.Popen([require_torch_python("step_parts.py"), str(HERE / "torch_parts.py"), json.dumps(shape),
                              *(["--compile"] if compile else [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    atexit.register(child.kill)

    def ask(**request) -> dict:
        child.stdin.write(json.dumps(request) + "\n")
        child.stdin.flush()
        line = child.stdout.readline()
        if not line:
            sys.exit(f"step_parts.py: torch_parts.py ended (exit {child.wait()}); its error is above")
        return json.loads(line)

    info = json.loads(child.stdout.readline() or "{}")
    if "parts" not in info:
        sys.exit(f"step_parts.py: torch_parts.py did not start (exit {child.wait()}); its error is above")
    fs = {part: (lambda part=part: ask(part=part, calls=CALLS)["ms"]) for part in info["parts"]}
    return fs, {"loss": ask(loss=True)["loss"], **info}


def window_ms(f) -> float:
    """ms per call over a window of CALLS calls of a spmdgpt part."""
    t0 = time.perf_counter()
    for _ in range(CALLS):
        f()
    return (time.perf_counter() - t0) / CALLS * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="B1", choices=sorted(CONFIGS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compile", action="store_true", help="PyTorch's model under torch.compile (default: eager)")
    ap.add_argument("overrides", nargs="*", help="extra config overrides (both libraries' shapes follow them)")
    args = ap.parse_args()
    overrides = [*CONFIGS[args.config], *args.overrides]
    ours = jax_parts(overrides)
    theirs, info = torch_parts(overrides, args.compile)
    losses = {"spmdgpt": float(ours["forward"]()), "pytorch": info["loss"]}  # before any step: near ln(vocab)
    for f in ours.values():  # compile and warm up
        f(), f()
    for f in theirs.values():
        f(), f()
    timers = {"spmdgpt": {part: (lambda f=f: window_ms(f)) for part, f in ours.items()}, "pytorch": theirs}
    times = {lib: {part: [] for part in ours} for lib in timers}
    for _ in range(args.rounds):
        for part in ours:
            for lib, parts in timers.items():
                times[lib][part].append(parts[part]())
    med = {lib: {part: statistics.median(ts) for part, ts in parts.items()} for lib, parts in times.items()}
    print(f"{args.config} {' '.join(args.overrides)}, float32, median ms of {args.rounds} alternating windows "
          f"of {CALLS} calls; PyTorch {'compiled' if args.compile else 'eager'} {info['torch']}, "
          f"{info['threads']} threads (its own process)")
    print(f"{'part':20s} {'spmdgpt':>9s} {'pytorch':>9s} {'pytorch/spmdgpt':>16s}")
    for part in med["spmdgpt"]:
        a, b = med["spmdgpt"][part], med["pytorch"][part]
        print(f"{part:20s} {a:9.1f} {b:9.1f} {b / a:15.2f}x")
    print(f"loss at init: spmdgpt {losses['spmdgpt']:.4f}, pytorch {losses['pytorch']:.4f}")
    print(json.dumps({**med, "loss": losses}))


if __name__ == "__main__":
    main()
