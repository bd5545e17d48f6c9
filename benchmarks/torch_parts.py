"""The PyTorch half of benchmarks/step_parts.py, run in the PyTorch environment (torch_env.py).

    python benchmarks/torch_parts.py '{"vocab": 65, "d": 256, "heads": 4, "layers": 4, "seq": 256, "batch": 16}'
    [--compile]

Builds the parts of a training step of the reference model (torch_gpt.py) at those shapes, then
answers one JSON request per line on stdin: {"loss": true} gives the loss at initialization,
{"part": NAME, "calls": N} the milliseconds per call of a window of N calls. The first line it
writes names the parts and the versions. step_parts.py alternates these windows with its own.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.nn.functional as F
from torch_gpt import GPT, adamw  # (this folder is on sys.path when a script here runs)


def parts(vocab: int, d: int, heads: int, layers: int, seq: int, batch: int, compile: bool) -> dict:
    """{part: f()}: forward (no_grad), forward + backward, step (clipping and fused AdamW too),
    attention (one layer's scaled_dot_product_attention, forward and backward)."""
    torch.manual_seed(0)
    model = GPT(vocab, d, heads, layers, seq)
    opt = adamw(model)
    run = torch.compile(model) if compile else model
    x, y = (torch.randint(0, vocab, (batch, seq)) for _ in range(2))
    q, k, v = (torch.randn(batch, heads, seq, d // heads, requires_grad=True) for _ in range(3))
    w = torch.randn(batch, heads, seq, d // heads)

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


def main() -> None:
    shape, compile = json.loads(sys.argv[1]), "--compile" in sys.argv[2:]
    fs = parts(**shape, compile=compile)
    print(json.dumps({"parts": list(fs), "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("loss"):
            answer = {"loss": float(fs["forward"]())}
        else:
            f, calls = fs[request["part"]], request["calls"]
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            answer = {"ms": (time.perf_counter() - t0) / calls * 1e3}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
