"""The PyTorch reference for benchmarks/gpu.py: spmdgpt's GPT, written compactly in PyTorch.

    python benchmarks/torch_gpt.py --seq 1024 --batch 16 [--layers 12 --heads 12 --d 768 --vocab 50304]

The same model as `spmdgpt` with its GPT-2 defaults (pre-norm LayerNorm without bias, RoPE on
q/k rotating the pairs (x[i], x[i + h/2]), causal attention, tanh-GELU MLP 4x, no biases,
tied embedding/unembedding, GPT-2 init), trained the way a PyTorch user would make it fast:
float32 parameters, bfloat16 autocast, `F.scaled_dot_product_attention` (flash attention on an
H100), `torch.compile` of the whole model + loss, fused AdamW (lr 6e-4, betas 0.9/0.95, weight
decay 0.1 on matrices), gradient clipping at 1.0 and TF32 matmuls enabled for what runs in
float32. Random tokens (speed does not depend on them). The last line is JSON: tokens/s (median
of the timed windows), peak memory (torch.cuda.max_memory_allocated) and the versions.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int, layers: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, bias=False)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d, bias=False)
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)
        for m in (self.qkv, self.up):
            nn.init.normal_(m.weight, std=0.02)
        for m in (self.proj, self.down):  # residual projections scaled by depth, as in GPT-2
            nn.init.normal_(m.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


def rope(x, cos, sin):
    """x [b, t, n, h]: rotate the pairs (x[i], x[i + h/2]) by position * theta^(-2i/h)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return out.to(x.dtype)


class GPT(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int, theta: float = 10000.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(d, heads, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, bias=False)
        half = d // heads // 2
        inv_freq = theta ** (-torch.arange(half, dtype=torch.float32) / half)
        angles = torch.arange(seq, dtype=torch.float32)[:, None] * inv_freq  # [t, half]
        self.register_buffer("cos", angles.cos()[:, None, :], persistent=False)  # [t, 1, half]
        self.register_buffer("sin", angles.sin()[:, None, :], persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        logits = F.linear(self.ln_f(x), self.embed.weight)  # tied unembedding
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def adamw(model: GPT) -> torch.optim.AdamW:
    """Fused AdamW as nanoGPT sets it up: lr 6e-4, betas 0.9/0.95, weight decay 0.1 on the
    matrices (not on the tied embedding or the norms)."""
    decay = [p for p in model.parameters() if p.dim() >= 2 and p is not model.embed.weight]
    rest = [p for p in model.parameters() if not any(p is q for q in decay)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                             lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--steps", type=int, default=10, help="steps per timed window")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", help="eager mode")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16",
                    help="compute dtype: bfloat16 autocast, or plain float32 (no autocast)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    model = GPT(args.vocab, args.d, args.heads, args.layers, args.seq).to(dev)
    opt = adamw(model)
    loss_fn = model if args.no_compile else torch.compile(model)

    def step(x, y):
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=args.dtype == "bfloat16"):
            loss = loss_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    g = torch.Generator().manual_seed(0)
    batches = [tuple(torch.randint(0, 50257 if args.vocab > 50257 else args.vocab, (args.batch, args.seq),
                                   generator=g).to(dev) for _ in range(2)) for _ in range(4)]
    t0 = time.perf_counter()
    for i in range(3):  # compile + warm-up
        loss = step(*batches[i % 4])
    float(loss)
    compile_s = time.perf_counter() - t0
    if cuda:
        torch.cuda.synchronize()
    rates = []
    for _ in range(args.windows):
        t0 = time.perf_counter()
        for i in range(args.steps):
            loss = step(*batches[i % 4])
        if cuda:
            torch.cuda.synchronize()
        rates.append(args.steps * args.batch * args.seq / (time.perf_counter() - t0))
    out = {
        "impl": "pytorch", "compile": not args.no_compile, "dtype": args.dtype, "seq": args.seq, "batch": args.batch,
        "tokens_per_sec": statistics.median(rates),
        "rates": rates, "loss": float(loss), "compile_s": compile_s,
        "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "torch": torch.__version__, "device": torch.cuda.get_device_name() if cuda else "cpu",
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
