"""Where a training step's time goes: spmdgpt against the PyTorch reference, part by part.

    python benchmarks/step_parts.py [--config B1] [--rounds 5] [--compile]

Both libraries in this one process (so they see the same moment of the machine), float32, the
model of benchmarks/peer.py (benchmarks/torch_gpt.py, eager or with `--compile`). Parts, each timed in
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
import json
import statistics
import time

from spmdgpt.runtime import set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()  # the process settings of `spmdgpt train`
set_default_xla_flags()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.model import loss_fn  # noqa: E402
from spmdgpt.model.attention import blocked_causal_attention  # noqa: E402
from throughput import COMMON, CONFIGS, setup  # noqa: E402  (this folder is on sys.path when a script here runs)
from torch_gpt import GPT, adamw  # noqa: E402

CALLS = 5  # calls per timed window


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
        attention = jax.jit(jax.grad(
            lambda q, k, v: jnp.sum(w * blocked_causal_attention(q, k, v, m.attention_block, rules)), argnums=(0, 1, 2)))

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


def torch_parts(overrides: list, compile: bool) -> dict:
    """The same parts for the PyTorch reference (eager, or the model under torch.compile), at the
    same shapes."""
    cfg = load_config([*COMMON, *overrides])
    m, (b, t) = cfg.model, (cfg.data.batch_size, cfg.data.seq_len)
    torch.manual_seed(0)
    model = GPT(m.vocab_size, m.d_model, m.num_heads, m.num_layers, t)
    opt = adamw(model)
    run = torch.compile(model) if compile else model
    x, y = (torch.randint(0, m.vocab_size, (b, t)) for _ in range(2))
    q, k, v = (torch.randn(b, m.num_heads, t, m.d_model // m.num_heads, requires_grad=True) for _ in range(3))
    w = torch.randn(b, m.num_heads, t, m.d_model // m.num_heads)

    def forward():
        with torch.no_grad():
            return run(x, y)

    def backward(clip_and_update: bool):
        loss = run(x, y)
        loss.backward()
        if clip_and_update:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def attention():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(w)
        q.grad = k.grad = v.grad = None

    return {"forward": forward, "forward + backward": lambda: backward(False), "step": lambda: backward(True),
            "attention": attention}


def window_ms(f) -> float:
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
    libs = {"spmdgpt": jax_parts(overrides), "pytorch": torch_parts(overrides, args.compile)}
    losses = {lib: float(parts["forward"]()) for lib, parts in libs.items()}  # before any step: near ln(vocab)
    for parts in libs.values():  # compile and warm up
        for f in parts.values():
            f(), f()
    times = {lib: {part: [] for part in parts} for lib, parts in libs.items()}
    for _ in range(args.rounds):
        for part in libs["spmdgpt"]:
            for lib, parts in libs.items():
                times[lib][part].append(window_ms(parts[part]))
    med = {lib: {part: statistics.median(ts) for part, ts in parts.items()} for lib, parts in times.items()}
    print(f"{args.config} {' '.join(args.overrides)}, float32, median ms of {args.rounds} alternating windows "
          f"of {CALLS} calls; PyTorch {'compiled' if args.compile else 'eager'} {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'part':20s} {'spmdgpt':>9s} {'pytorch':>9s} {'pytorch/spmdgpt':>16s}")
    for part in med["spmdgpt"]:
        a, b = med["spmdgpt"][part], med["pytorch"][part]
        print(f"{part:20s} {a:9.1f} {b:9.1f} {b / a:15.2f}x")
    print(f"loss at init: spmdgpt {losses['spmdgpt']:.4f}, pytorch {losses['pytorch']:.4f}")
    print(json.dumps({**med, "loss": losses}))


if __name__ == "__main__":
    main()
