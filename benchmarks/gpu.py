"""spmdgpt on one NVIDIA GPU: correctness checks, GPT-2 124M speed against PyTorch, decoding.

Run on the lent GPU machine after `source benchmarks/gpu_env.sh` (see that file):

    python3 benchmarks/gpu.py check  [--out DIR] [--only attention,model,blocked,logits,cache]  # exit 1 on failure
    python3 benchmarks/gpu.py curves [--out DIR] [--corpus gutenberg|shakespeare] [--f32-highest] [--only
    bf16,bf16-logits]
    python3 benchmarks/gpu.py speed  [--out DIR] [--only NAME,...]   # tokens/s, MFU, memory: JAX vs PyTorch
    python3 benchmarks/gpu.py speed --tiny --only jax-xla-1k       # the same on a CPU in seconds (a test)
    python3 benchmarks/gpu.py decode [--out DIR]   # KV-cache sampler tokens/s at batch 1 and 64
    python3 benchmarks/gpu.py profile [--out DIR] [--only NAME,...]  # 3 steps traced, GPU time by kernel kind
    python3 benchmarks/gpu.py loop   [--out DIR]   # jit vs compiled, random vs real tokens, the loop's pattern
    python3 benchmarks/gpu.py dispatch [--out DIR] # does the step call return before its step has run?
    python3 benchmarks/gpu.py target [--out DIR]   # the GPU's XLA target description (for CPU-side plans)

SPMDGPT_GPU_DATA=text makes speed and profile feed the corpus's own batches instead of random
tokens (real text repeats tokens, which scatter-adds feel).

check: (1) attention backends on random q/k/v [b, t, 12, 64] at t = 1024 and 4096, and at 1024
with document masks (3 random cuts per row): cuDNN in bfloat16 and XLA in bfloat16 against XLA in
float32 (highest matmul precision), forward outputs and the gradients of <o, g> for a random g;
pass when cuDNN's worst error is at most twice XLA's own bfloat16 error (plus 1e-3 absolute):
both differ from float32 by bfloat16 rounding only. (2) the whole 124M model, bfloat16: loss and
gradient norm with cuDNN vs XLA attention, within 1e-2 relative. (3) the blocked loss
(loss_block=128) against the whole one on the 124M model in bfloat16. (4) bfloat16 logits
(model.logits_dtype) against float32 ones, same model. (5) the KV-cache path (prefill + 8
one-token decode steps) against the full forward in float32 at highest precision, max |logit
difference| <= 2e-4.

curves: `python3 -m spmdgpt train` of GPT-2 124M for 300 steps (--steps) in bfloat16 (cuDNN) and
in float32 (XLA attention; JAX's default precision, TF32 matmuls, or --f32-highest), same seed
and data: by default on gutenberg_gpt2's mixture of 12 books and Tiny Shakespeare (~1.9M tokens,
which 300 steps of 16k tokens see ~2.5 times); pass when from step 50 on every logged loss
differs by at most 3% and the final validation loss by <= 0.05. Each run is given --run-timeout
seconds (its process is killed past them, so that it never holds the GPU after this one ends).

speed: each configuration in a fresh process (so that the peak memory is its own): GPT-2 124M
(+experiment=gpt2_124m shapes, AdamW), bfloat16 compute, at context 1024 (batch 16) and 4096
(batch 4), per attention backend and loss (whole or blocked); float32 compute as today's
default; and benchmarks/torch_gpt.py at the same shapes. Median tokens/s of 3 windows of 10
steps, MFU against the data-sheet dense bf16 peak (spmdgpt.plan.flops: 989 TFLOP/s for H100/H200
SXM), measured peak device memory against XLA's compile-time memory analysis (arguments +
outputs - aliased + temporaries). Tables go to stdout and DIR/speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
from torch_env import require_torch_python  # (this folder is on sys.path when a script here runs)

HERE = Path(__file__).resolve().parent
# one microbatch of 16 sequences per step (the experiment itself accumulates 32 of them)
GPT2 = [
    "+experiment=gpt2_124m",
    "mesh.data=1",
    "checkpoint.enabled=false",
    "data.batch_size=16",
    "train.microbatches=1",
]

# name -> (spmdgpt overrides | "torch", seq, batch)
WIDE_1B = ["model.d_model=2048", "model.num_layers=16", "model.num_heads=16"]  # (1.1B parameters)
SPEED = {
    "jax-cudnn-1k": (["model.attention=cudnn"], 1024, 16),
    "jax-xla-1k": (["model.attention=xla", "model.attention_block=0"], 1024, 16),
    "jax-xla-blocked256-1k": (["model.attention=xla", "model.attention_block=256"], 1024, 16),
    "jax-f32-1k": (["model.compute_dtype=float32", "model.attention=xla", "model.attention_block=0"], 1024, 16),
    "jax-f32-1k-twopass": (["model.compute_dtype=float32", "model.attention=xla", "model.attention_block=0"], 1024, 16),
    "torch-1k": ("torch", 1024, 16),
    "jax-cudnn-4k": (["model.attention=cudnn"], 4096, 4),
    "jax-xla-blocked1024-4k": (["model.attention=xla", "model.attention_block=1024"], 4096, 4),
    "torch-4k": ("torch", 4096, 4),
    # the same as jax-cudnn-1k with cuBLAS for every matmul instead of XLA's Triton GEMMs
    "jax-cudnn-1k-notriton": (["model.attention=cudnn"], 1024, 16),
    # the blocked cross-entropy (model.loss_block): [batch x block, vocab] float32 logits at a time
    "jax-cudnn-lb128-1k": (["model.attention=cudnn", "model.loss_block=128"], 1024, 16),
    "jax-cudnn-lb256-1k": (["model.attention=cudnn", "model.loss_block=256"], 1024, 16),
    "jax-cudnn-lb512-4k": (["model.attention=cudnn", "model.loss_block=512"], 4096, 4),
    # jax-cudnn-1k with the two-pass logsumexp of jax.nn (spmdgpt.model.loss.logsumexp's baseline)
    "jax-cudnn-1k-twopass": (["model.attention=cudnn"], 1024, 16),
    # bfloat16 logits from the unembedding GEMM (model.logits_dtype), as PyTorch's autocast makes them
    "jax-cudnn-bf16logits-1k": (["model.attention=cudnn", "model.logits_dtype=bfloat16"], 1024, 16),
    "jax-cudnn-bf16logits-4k": (["model.attention=cudnn", "model.logits_dtype=bfloat16"], 4096, 4),
    "jax-cudnn-bf16logits-lb256-1k": (["model.attention=cudnn", "model.logits_dtype=bfloat16",
                                       "model.loss_block=256"], 1024, 16),
    # the FP8 issue: the projections in FP8 (current, delayed scaling), the head too; and a 1.1B of
    # GPT-2's kind (d 2048, 16 layers, 16 heads of 128) in bf16 and in FP8, 8 x 1024 tokens a step
    "jax-cudnn-bf16logits-fp8-1k": (["model.attention=cudnn", "model.logits_dtype=bfloat16",
                                     "model.matmul_dtype=fp8"], 1024, 16),
    "jax-cudnn-bf16logits-fp8delayed-1k": (["model.attention=cudnn", "model.logits_dtype=bfloat16",
                                            "model.matmul_dtype=fp8", "model.fp8_scaling=delayed"], 1024, 16),
    "jax-cudnn-fp8delayedhead-1k": (["model.attention=cudnn", "model.matmul_dtype=fp8", "model.fp8_scaling=delayed",
                                     "model.fp8_head=true"], 1024, 16),
    "jax-1b-bf16logits-1k": (["model.attention=cudnn", "model.logits_dtype=bfloat16", *WIDE_1B], 1024, 8),
    "jax-1b-fp8delayedhead-1k": (["model.attention=cudnn", "model.matmul_dtype=fp8", "model.fp8_scaling=delayed",
                                  "model.fp8_head=true", *WIDE_1B], 1024, 8),
}
# the GPU issue's changes, each undone alone (cmd_one patches by suffix): the GELU by autodiff
# (before model/mlp.py's gelu_tanh), the logsumexp's combiner with two exponentials per element
for _name in ("jax-cudnn-bf16logits-1k", "jax-cudnn-bf16logits-4k"):
    for _suffix in ("-autodiffgelu", "-twoexp", "-nocmdbuf", "-lhs"):
        SPEED[_name + _suffix] = SPEED[_name]
ENV = {"jax-cudnn-1k-notriton": {"XLA_FLAGS": "--xla_gpu_enable_triton_gemm=false"},
       # XLA's settings from JAX-Toolbox's GPU performance guide, each on its own
       **{n: {"XLA_FLAGS": "--xla_gpu_enable_command_buffer="} for n in SPEED if n.endswith("-nocmdbuf")},
       **{n: {"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true"} for n in SPEED if n.endswith("-lhs")}}

# --tiny: the same commands on a CPU in seconds (a test runs `speed --tiny`): a 1-layer model of
# width 64 and vocabulary 512, sequences 8x shorter, batch 2, one window of 2 steps.
TINY_MODEL = ["model.num_layers=1", "model.d_model=64", "model.num_heads=2", "model.vocab_size=512"]
TINY_TORCH = ["--layers", "1", "--heads", "2", "--d", "64", "--vocab", "512", "--no-compile"]


def _tiny() -> bool:
    return os.environ.get("SPMDGPT_GPU_TINY") == "1"


def _speed_shape(name: str):
    """(overrides | "torch", seq, batch, steps, windows) of a SPEED entry, shrunk under --tiny."""
    spec, seq, batch = SPEED[name]
    return (spec, seq // 8, 2, 2, 1) if _tiny() else (spec, seq, batch, 10, 3)


def _setup(overrides, seq=None, batch=None):
    import jax

    from spmdgpt.config import load_config
    from spmdgpt.mesh.sharding import Rules, make_mesh

    shape = [f"data.seq_len={seq}", f"model.max_seq_len={seq}", f"data.batch_size={batch}"] if seq else []
    cfg = load_config([*GPT2, *shape, *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    return cfg, mesh, Rules(mesh, cfg.sharding, cfg.model)


def _max_err(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


# ----------------------------------------------------------------------------- check


def check_attention(results: list) -> bool:
    return all([_check_attention_at(t, b, results, docs) for t, b, docs in ((1024, 4, False), (4096, 1, False),
                                                                           (1024, 4, True))])


def _segments(b: int, t: int, rng) -> np.ndarray:
    """Document numbers [b, t]: each row cut at 3 random places (documents of any length)."""
    seg = np.zeros((b, t), np.int32)
    for r in range(b):
        for cut in np.sort(rng.choice(np.arange(1, t), 3, replace=False)):
            seg[r, cut:] += 1
    return seg


def _check_attention_at(t: int, b: int, results: list, docs: bool = False) -> bool:
    import jax
    import jax.numpy as jnp

    from spmdgpt.model.attention import blocked_causal_attention
    from spmdgpt.model.kernels import fused_causal_attention

    ok = True
    _, mesh, rules = _setup([], t, b)
    rng = np.random.default_rng(0)
    q, k, v, g = (jnp.asarray(rng.normal(size=(b, t, 12, 64)), jnp.float32) for _ in range(4))
    seg = jnp.asarray(_segments(b, t, rng)) if docs else None

    def xla(q, k, v):  # the xla backend, one block, head-major [b, n, t, h]
        s = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
        return s(blocked_causal_attention(s(q), s(k), s(v), 0, rules, seg))

    def cudnn(q, k, v):
        return fused_causal_attention(q, k, v, rules, "cudnn", seg)

    def run(attn, dtype):
        def f(q, k, v):
            o = attn(q.astype(dtype), k.astype(dtype), v.astype(dtype))
            return jnp.sum(o.astype(jnp.float32) * g), o

        with jax.set_mesh(mesh), jax.default_matmul_precision("highest"):
            (_, o), grads = jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2), has_aux=True))(q, k, v)
        return [o, *grads]

    ref, x16, c16 = run(xla, jnp.float32), run(xla, jnp.bfloat16), run(cudnn, jnp.bfloat16)
    for i, name in enumerate(("out", "dq", "dk", "dv")):
        ex, ec = _max_err(x16[i], ref[i]), _max_err(c16[i], ref[i])
        passed = ec <= 2 * ex + 1e-3
        ok &= passed
        tag = f"attention t={t}{' documents' if docs else ''}"
        results.append({"check": f"{tag} {name}", "xla_bf16_err": ex, "cudnn_bf16_err": ec, "pass": passed})
        print(f"{tag:25s} {name:3s}: max|err| vs float32  xla-bf16 {ex:.2e}  cudnn-bf16 {ec:.2e}"
              f"  {'PASS' if passed else 'FAIL'}")
    return ok


def _loss_and_grads(overrides, seed: int):
    """(loss, gradients on the host) of the 124M model (bf16) at init on one batch of 8 x 1024
    random tokens drawn from `seed`."""
    import jax

    from spmdgpt.model import init_params, loss_fn

    cfg, mesh, rules = _setup(overrides, 1024, 8)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        x, y = _random_batch(cfg, rules, 8, 1024, np.random.default_rng(seed))
        loss, grads = jax.jit(jax.value_and_grad(lambda p: loss_fn(cfg.model, rules, p, x, y)))(params)
        return float(loss), jax.device_get(grads)


def check_model(results: list) -> bool:
    import optax

    def loss_and_grad_norm(name):
        loss, grads = _loss_and_grads([f"model.attention={name}"], 1)
        return loss, float(optax.tree.norm(grads))

    vals = {name: loss_and_grad_norm(name) for name in ("cudnn", "xla")}
    rel_l = abs(vals["cudnn"][0] - vals["xla"][0]) / vals["xla"][0]
    rel_g = abs(vals["cudnn"][1] - vals["xla"][1]) / vals["xla"][1]
    passed = rel_l <= 1e-2 and rel_g <= 1e-2
    results.append({"check": "124M bf16 loss/grad-norm cudnn vs xla", "cudnn": vals["cudnn"], "xla": vals["xla"],
                    "rel_loss": rel_l, "rel_grad_norm": rel_g, "pass": passed})
    print(f"124M bf16 cudnn vs xla: loss {vals['cudnn'][0]:.5f} / {vals['xla'][0]:.5f} (rel {rel_l:.1e}), "
          f"grad norm {vals['cudnn'][1]:.5f} / {vals['xla'][1]:.5f} (rel {rel_g:.1e})  {'PASS' if passed else 'FAIL'}")
    return passed


def _check_variant(results: list, label: str, overrides: list, baseline: list, seed: int, loss_tol: float,
                   grad_tol: float) -> bool:
    """The 124M model in bfloat16 (cuDNN attention), batch 8 x 1024 of random tokens from `seed`,
    with `overrides` against `baseline`: loss within loss_tol relative, gradients within
    grad_tol (|g - g_baseline| / |g_baseline| over all parameters)."""
    import jax
    import optax

    (lb, gb), (lv, gv) = (_loss_and_grads(o, seed) for o in (baseline, overrides))
    diff = optax.tree.norm(jax.tree.map(lambda a, b: np.asarray(a, np.float32) - np.asarray(b, np.float32), gv, gb))
    rel_g = float(diff / optax.tree.norm(gb))
    rel_l = abs(lv - lb) / lb
    passed = rel_l <= loss_tol and rel_g <= grad_tol
    results.append({"check": f"124M bf16 {label}", "loss": [lv, lb], "rel_loss": rel_l, "rel_grad": rel_g,
                    "pass": passed})
    print(f"124M bf16 {label}: loss {lv:.6f} / {lb:.6f} (rel {rel_l:.1e}), gradients rel {rel_g:.1e}  "
          f"{'PASS' if passed else 'FAIL'}")
    return passed


def check_blocked_loss(results: list) -> bool:
    """The blocked cross-entropy (model.loss_block=128) against the whole one: loss within 1e-4,
    gradients within 1e-2 (both cast the logits' cotangent to bfloat16 before the unembedding's
    backward matmuls, in a different order of chunks)."""
    return _check_variant(results, "blocked loss (128) vs whole", ["model.loss_block=128"], ["model.loss_block=0"],
                          4, 1e-4, 1e-2)


def check_logits(results: list) -> bool:
    """bfloat16 logits (model.logits_dtype=bfloat16) against float32 ones: loss within 1e-3,
    gradients within 2e-2 (the logits rounded to 8 significant bits before the loss's float32
    reductions)."""
    return _check_variant(results, "logits_dtype=bfloat16 vs float32", ["model.logits_dtype=bfloat16"],
                          ["model.logits_dtype=float32"], 5, 1e-3, 2e-2)


def check_cache(results: list) -> bool:
    import jax
    import jax.numpy as jnp

    from spmdgpt.model import forward, init_cache, init_params

    cfg, mesh, rules = _setup(["model.compute_dtype=float32", "model.attention=xla"], 1024, 2)
    rng = np.random.default_rng(2)
    prompt, new = 100, 8
    toks = jnp.asarray(rng.integers(0, 50257, (2, prompt + new)), jnp.int32)
    with jax.set_mesh(mesh), jax.default_matmul_precision("highest"):
        params = init_params(cfg.model, jax.random.key(3), rules)
        full = jax.jit(lambda t: forward(cfg.model, rules, params, t)[0])(toks)
        step = jax.jit(lambda t, p, c: forward(cfg.model, rules, params, t, p, c))
        cache = init_cache(cfg.model, rules, 2, prompt + new)
        pos = jnp.broadcast_to(jnp.arange(prompt + new), (2, prompt + new))
        logits, cache = step(toks[:, :prompt], pos[:, :prompt], cache)
        errs = [_max_err(logits, full[:, :prompt])]
        for i in range(prompt, prompt + new):
            logits, cache = step(toks[:, i:i + 1], pos[:, i:i + 1], cache)
            errs.append(_max_err(logits[:, 0], full[:, i]))
    worst = max(errs)
    passed = worst <= 2e-4
    results.append({"check": "KV cache vs full forward (float32, highest)", "max_err": worst, "pass": passed})
    print(f"KV cache (prefill {prompt} + {new} decode steps) vs full forward, float32: max|err| {worst:.2e} "
          f"(<= 2e-4)  {'PASS' if passed else 'FAIL'}")
    return passed


CHECKS = {"attention": check_attention, "model": check_model, "blocked": check_blocked_loss,
          "logits": check_logits, "cache": check_cache}


def cmd_check(out: Path, names) -> int:
    results: list = []
    ok = True
    for name in names or CHECKS:
        ok &= CHECKS[name](results)
    (out / "check.json").write_text(json.dumps(results, indent=1))
    print("check:", "ALL PASS" if ok else "FAILED")
    return 0 if ok else 1


# ----------------------------------------------------------------------------- curves


# GPT-2 124M (gpt2_124m's model and AdamW recipe) on the Gutenberg mixture of gutenberg_gpt2
# (12 books, 1.5M tokens, 70%, and Tiny Shakespeare, 0.3M, 30%; document masks): 300 steps of
# 16 x 1024 tokens see the books ~2.3 times, where Tiny Shakespeare alone is seen 16 times.
GUTENBERG_124M = ["+experiment=gutenberg_gpt2", "mesh.data=1", "checkpoint.enabled=false", "data.batch_size=16",
                  "data.seq_len=1024", "model.max_seq_len=1024", "model.num_layers=12", "model.num_heads=12",
                  "model.d_model=768", "model.qk_norm=false", "model.compute_dtype=bfloat16",
                  "model.attention_block=0", "optimizer.name=adamw", "optimizer.lr=6e-4",
                  "optimizer.warmup_steps=100", "optimizer.b2=0.95"]
CORPORA = {"gutenberg": GUTENBERG_124M, "shakespeare": GPT2}


def _val_key(rows: list) -> str:
    keys = sorted({k for r in rows for k in r if k.startswith("val/") and k.endswith("loss")})
    return "val/heldout/loss" if "val/heldout/loss" in keys else keys[0]


CURVES = {  # run name -> overrides over the corpus's bfloat16 config
    "bf16": [],
    "fp8": ["model.matmul_dtype=fp8"],  # (the FP8 issue: within 0.02 of bf16's validation loss)
    "fp8-delayed-head": ["model.matmul_dtype=fp8", "model.fp8_scaling=delayed", "model.fp8_head=true"],
    "bf16-logits": ["model.logits_dtype=bfloat16"],  # bfloat16 logits (autocast's)
    "f32": ["model.compute_dtype=float32", "model.attention=xla"],
}


def cmd_curves(out: Path, steps: int, corpus: str = "gutenberg", f32_highest: bool = False,
               run_timeout: float = 900, names=None) -> int:
    """bf16 runs (cuDNN attention; float32 or bfloat16 logits) against float32 (XLA attention;
    TF32 matmuls, or with --f32-highest full float32 matmuls) through `python3 -m spmdgpt train`,
    same seed and data. The float32 run goes first, each bf16 run is compared with it."""
    runs = {}
    f32_env = {"JAX_DEFAULT_MATMUL_PRECISION": "highest"} if f32_highest else {}
    names = ["f32", *[n for n in (names or ["bf16"]) if n != "f32"]]
    for name in names:
        run_dir = Path(f"/tmp/spmdgpt-curve-{name}")
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
        cmd = [sys.executable, "-m", "spmdgpt", "train", *CORPORA[corpus], f"train.steps={steps}",
               "train.eval_every=100", "train.progress=false", "train.log_every=10", f"run.dir={run_dir}",
               *CURVES[name]]
        t0 = time.perf_counter()
        log = out / f"curve-{name}.log"
        with open(log, "w") as f:
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, **(f32_env if name == "f32" else {})})
            try:
                rc = p.wait(timeout=run_timeout)
            except subprocess.TimeoutExpired:  # keep what it logged: the curves up to there
                p.kill()
                p.wait()
                rc = "killed"
        lines = [ln for ln in log.read_text().splitlines() if not ln.startswith(("W0", "I0", "E0"))]
        print(f"{name}: exit {rc} in {time.perf_counter() - t0:.0f} s (--run-timeout={run_timeout})")
        print("\n".join(lines[:1] + lines[-4:]))
        metrics = run_dir / "metrics.jsonl"
        if rc not in (0, "killed") or not metrics.exists():
            return 1
        rows = [json.loads(line) for line in open(metrics)]
        vk = _val_key(rows)
        runs[name] = {
            "loss": {r["step"]: r["loss"] for r in rows if "loss" in r},
            "val": {r["step"]: r[vk] for r in rows if vk in r}, "val_key": vk,
            "tokens_per_sec": [r["tokens_per_sec"] for r in rows if r.get("tokens_per_sec")],
            "seconds": time.perf_counter() - t0, "killed": rc == "killed",
        }
    b = runs["f32"]
    passed = True
    report = {"runs": runs}
    for name in names[1:]:
        a = runs[name]  # over the steps both logged (a killed run's curve stops early)
        common = sorted(s for s in a["loss"] if s >= 50 and s in b["loss"])
        vsteps = sorted(set(a["val"]) & set(b["val"]))
        if not common or not vsteps:
            print(f"{name}: no step >= 50 with a loss and a validation loss in both runs")
            return 1
        rel = max(abs(a["loss"][s] - b["loss"][s]) / b["loss"][s] for s in common)
        last = vsteps[-1]
        dval = abs(a["val"][last] - b["val"][last])
        ok = rel <= 0.03 and dval <= 0.05 and not a["killed"] and not b["killed"]
        passed &= ok
        report[name] = {"max_rel": rel, "val_diff": dval, "pass": ok}
        print(f"corpus {corpus}; step  loss {name}  loss f32  ({a['val_key']}: {name} / f32)")
        for s in sorted(a["loss"]):
            if s % 50 == 0 and s in b["loss"]:
                v = f"   {a['val'][s]:.4f} / {b['val'][s]:.4f}" if s in a["val"] and s in b["val"] else ""
                print(f"{s:4d}  {a['loss'][s]:.4f}    {b['loss'][s]:.4f}{v}")
        print(f"{a['val_key']} at {last}: {name} {a['val'][last]:.4f}, f32 {b['val'][last]:.4f}; max rel loss "
              f"diff from step 50: {rel:.2%} (<= 3%), |val diff| {dval:.4f} (<= 0.05)  {'PASS' if ok else 'FAIL'}")
    (out / f"curves-{corpus}.json").write_text(json.dumps(report))
    return 0 if passed else 1


# ----------------------------------------------------------------------------- speed


def _batches(cfg, rules, batch: int, seq: int, n: int = 4) -> list:
    """n batches (inputs, targets) on the device: random tokens, or with SPMDGPT_GPU_DATA=text the
    training batches of the experiment's own corpus (Tiny Shakespeare, GPT-2 BPE). Real text
    repeats tokens ("the", newlines) that random tokens almost never do, which matters to the
    embedding gradient's scatter-add."""
    if os.environ.get("SPMDGPT_GPU_DATA", "random") == "text":
        from spmdgpt.data import Batcher, load_dataset

        data = load_dataset(cfg.data)
        b = Batcher(data.train, data.weights, seq, batch, cfg.train.seed, rules.batch_sharding())
        return [tuple(b.train_batch(i))[:2] for i in range(n)]
    rng = np.random.default_rng(0)
    return [_random_batch(cfg, rules, batch, seq, rng) for _ in range(n)]


def _random_batch(cfg, rules, batch: int, seq: int, rng) -> tuple:
    """(inputs, targets) [batch, seq] of random tokens below GPT-2's 50,257 and the model's
    vocabulary, laid out like a batch."""
    import jax

    vocab = min(50257, cfg.model.vocab_size)
    return tuple(jax.device_put(rng.integers(0, vocab, (batch, seq)).astype(np.int32), rules.batch_sharding())
                 for _ in range(2))


def measure_jax(overrides, seq, batch, steps=10, windows=3, profile_dir=None) -> dict:
    import jax

    from spmdgpt.model import param_info
    from spmdgpt.model.attention import attention_backend
    from spmdgpt.optim import build_optimizer
    from spmdgpt.plan.flops import device_peak_flops, flops_per_token
    from spmdgpt.training.state import init_state
    from spmdgpt.training.step import make_train_step

    cfg, mesh, rules = _setup(overrides, seq, batch)
    dev = jax.devices()[0]
    with jax.set_mesh(mesh):
        opt = build_optimizer(cfg.optimizer, param_info(cfg.model), 1000)
        state = init_state(cfg, rules, opt)
        batches = _batches(cfg, rules, batch, seq)
        t0 = time.perf_counter()
        step = make_train_step(cfg, rules, opt).lower(state, *batches[0]).compile()
        compile_s = time.perf_counter() - t0
        if profile_dir:  # the optimized HLO, to read the profile's fusions by name
            import gzip

            Path(profile_dir).mkdir(parents=True, exist_ok=True)
            with gzip.open(Path(profile_dir) / "step.hlo.txt.gz", "wt") as f:
                f.write(step.as_text())
        mem = step.memory_analysis()
        planned = (mem.argument_size_in_bytes + mem.output_size_in_bytes - mem.alias_size_in_bytes
                   + mem.temp_size_in_bytes)
        for i in range(3):
            state, m = step(state, *batches[i % 4])
        jax.block_until_ready(m)
        rates = []
        for _ in range(windows):
            t0 = time.perf_counter()
            for i in range(steps):
                state, m = step(state, *batches[i % 4])
            jax.block_until_ready(m)
            rates.append(steps * batch * seq / (time.perf_counter() - t0))
        if profile_dir:
            jax.profiler.start_trace(str(profile_dir), create_perfetto_trace=True)
            for i in range(3):
                state, m = step(state, *batches[i % 4])
            jax.block_until_ready(m)
            jax.profiler.stop_trace()
    stats = dev.memory_stats() or {}
    fpt = flops_per_token(cfg.model, seq)
    tps = float(np.median(rates))
    peak = device_peak_flops(dev, cfg.model.compute_dtype, cfg.train.cpu_peak_flops, 1)
    return {"impl": "jax", "attention": attention_backend(cfg.model, dev.platform).value,
            "attention_block": cfg.model.attention_block, "compute": cfg.model.compute_dtype.value,
            "seq": seq, "batch": batch, "tokens_per_sec": tps, "rates": rates, "loss": float(m["loss"]),
            "compile_s": compile_s, "flops_per_token": fpt, "mfu": tps * fpt / peak if peak else None,
            "peak_bytes": stats.get("peak_bytes_in_use"), "planned_bytes": planned,
            "temp_bytes": mem.temp_size_in_bytes, "device": dev.device_kind, "jax": jax.__version__,
            "data": os.environ.get("SPMDGPT_GPU_DATA", "random")}


def _run_one(name: str) -> dict:
    spec, seq, batch, steps, windows = _speed_shape(name)
    if spec == "torch":
        cmd = [require_torch_python("gpu.py"), str(HERE / "torch_gpt.py"), "--seq", str(seq), "--batch", str(batch),
               "--steps", str(steps), "--windows", str(windows), *(TINY_TORCH if _tiny() else [])]
    else:
        cmd = [sys.executable, __file__, "one", name, "--set", *os.environ.get("SPMDGPT_GPU_SET", "").split()]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ENV.get(name, {})})
    if p.returncode:  # the error line itself, not JAX's note on filtered tracebacks below it
        lines = [
            ln for ln in p.stderr.strip().splitlines() if ln.strip() and not ln.startswith(("For simplicity", "-----"))
        ]
        tail = (lines or ["?"])[-1]
        print(f"{name}: FAILED ({tail[:300]})")
        return {"name": name, "error": tail[:2000]}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["name"] = name
    return r


def cmd_speed(out: Path, only) -> int:
    from spmdgpt.config import load_config
    from spmdgpt.plan.flops import PEAK_FLOPS, flops_per_token

    names = only or list(SPEED)
    rows = []
    for name in names:
        r = _run_one(name)
        rows.append(r)
        if "error" in r:
            continue
        if r["impl"] == "pytorch":  # the same model: the same FLOPs per token
            cfg = load_config([*GPT2, f"data.seq_len={r['seq']}", f"model.max_seq_len={r['seq']}"])
            r["flops_per_token"] = flops_per_token(cfg.model, r["seq"])
            peak = next((p16 for k, (p16, _) in PEAK_FLOPS.items() if k in r["device"]), None)
            r["mfu"] = r["tokens_per_sec"] * r["flops_per_token"] / peak if peak else None
        peak, plan = r.get("peak_bytes"), r.get("planned_bytes")
        print(f"{name:24s} {r['tokens_per_sec']:10,.0f} tokens/s  MFU {100 * (r['mfu'] or 0):5.1f}%  "
              + (f"peak {peak / 2**30:6.2f} GiB" if peak else "peak -")
              + (f"  planned {plan / 2**30:6.2f} GiB ({plan / peak - 1:+.1%})" if plan and peak else "")
              + f"  compile {r['compile_s']:.0f} s  loss {r['loss']:.3f}", flush=True)
    by = {r["name"]: r for r in rows if "error" not in r}
    for ctx in ("1k", "4k"):
        if f"torch-{ctx}" in by:
            best = max((r for n, r in by.items() if n.endswith(ctx) and r["impl"] == "jax"),
                       key=lambda r: r["tokens_per_sec"], default=None)
            if best:
                ratio = best["tokens_per_sec"] / by[f"torch-{ctx}"]["tokens_per_sec"]
                print(f"context {ctx}: best JAX ({best['name']}) / PyTorch = {ratio:.3f}x (target >= 1.1x)")
    (out / "speed.json").write_text(json.dumps(rows, indent=1))
    return 0


def cmd_one(name: str) -> int:
    overrides, seq, batch, steps, windows = _speed_shape(name)
    if name.endswith("-twopass"):
        import spmdgpt.model.loss

        spmdgpt.model.loss.ONE_PASS_LSE_PLATFORMS = ()
    if name.endswith("-autodiffgelu"):
        import jax

        import spmdgpt.model.mlp

        spmdgpt.model.mlp.gelu_tanh = partial(jax.nn.gelu, approximate=True)
    if name.endswith("-twoexp"):
        _two_exponentials()
    print(json.dumps(measure_jax(overrides, seq, batch, steps, windows)))
    return 0


def _two_exponentials() -> None:
    """The one-pass logsumexp as it was before the GPU issue: its combiner rescales both sides to
    the new max (two exponentials per element)."""
    import jax
    import jax.numpy as jnp

    import spmdgpt.model.loss as loss

    def lse(x):
        def combine(a, b):
            m = jnp.maximum(a[0], b[0])
            safe = jnp.where(jnp.isfinite(m), m, 0.0)
            return m, a[1] * jnp.exp(a[0] - safe) + b[1] * jnp.exp(b[0] - safe)

        init = (jnp.array(-jnp.inf, x.dtype), jnp.array(0.0, x.dtype))
        m, s = jax.lax.reduce((x, jnp.ones_like(x)), init, combine, (x.ndim - 1,))
        return m + jnp.log(s)

    loss._lse_one_pass = lse


KERNEL_KINDS = (  # (kind, substrings of the kernel name), first match wins
    ("attention (cuDNN)", ("cudnn", "fmha", "flash", "sdpa")),
    ("GEMM", ("gemm", "nvjet", "cutlass", "xmma", "wgmma", "triton_gemm", "dot")),
    ("scatter", ("scatter",)),
    ("reduction", ("reduce", "reduction")),
    ("copy / transpose", ("copy", "transpose", "memcpy", "memset", "dynamic_update_slice")),
    ("other fusion", ("",)),
)


def summarize_trace(path: Path, steps: int) -> dict:
    """Per-step GPU time of a jax.profiler Perfetto trace, by kernel kind and by the 12 costliest
    kernels, with the GPU's busy time (the union of its kernels' intervals) against the wall time
    from the first kernel's start to the last one's end."""
    import gzip
    from collections import defaultdict

    events = json.load(gzip.open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    gpu_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                and "GPU" in str(e.get("args", {}).get("name", ""))}
    threads = {(e["pid"], e["tid"]): str(e.get("args", {}).get("name", "")) for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in gpu_pids}
    # kernels live on the stream rows; the device's other rows (XLA Ops, XLA Modules, Steps) repeat them
    streams = {k for k, v in threads.items() if "stream" in v.lower()} or None
    kernels = [e for e in events if e.get("ph") == "X" and e.get("pid") in gpu_pids and e.get("dur")
               and (streams is None or (e["pid"], e.get("tid")) in streams)]
    by_kind, by_name = defaultdict(float), defaultdict(float)
    for e in kernels:
        name = e["name"].lower()
        kind = next(k for k, subs in KERNEL_KINDS if any(x in name for x in subs))
        by_kind[kind] += e["dur"] / 1e3 / steps
        by_name[e["name"][:90]] += e["dur"] / 1e3 / steps
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels)
    busy, end = 0.0, -1e30
    for a, b in spans:  # union of the intervals
        if b > end:
            busy += b - max(a, end)
            end = b
    wall = (spans[-1][1] - spans[0][0]) if spans else 0.0
    return {"threads": sorted(set(threads.values()))[:20], "steps": steps, "wall_ms_per_step": wall / 1e3 / steps,
            "busy_ms_per_step": busy / 1e3 / steps,
            "kernel_ms_per_step": sum(by_kind.values()),
            "by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
            "top": dict(sorted(by_name.items(), key=lambda kv: -kv[1])[:80])}


def print_summary(name: str, summ: dict) -> None:
    busy, wall = summ["busy_ms_per_step"], summ["wall_ms_per_step"]
    print(f"profile {name}: {wall:.2f} ms/step wall, GPU busy {busy:.2f} ms ({busy / max(wall, 1e-9):.1%}), "
          f"kernels {summ['kernel_ms_per_step']:.2f} ms"
          f" | rows {summ['threads']}")
    for k, v in summ["by_kind"].items():
        print(f"  {k:20s} {v:7.2f} ms")
    for k, v in list(summ["top"].items())[:12]:
        print(f"    {v:7.2f} ms  {k}")


def cmd_profile(out: Path, only) -> int:
    names = only or ["jax-cudnn-1k"]
    for name in names:
        overrides, seq, batch = SPEED[name]
        tag = name + ("-text" if os.environ.get("SPMDGPT_GPU_DATA") == "text" else "")
        r = measure_jax(overrides, seq, batch, windows=1, profile_dir=out / "trace")
        print(json.dumps({k: v for k, v in r.items() if k != "rates"}))
        # jax.profiler writes trace/plugins/profile/<run>/<host>.*: summarise the Perfetto trace and
        # bring it up to out/ (the device tool returns files at most two folders down)
        for f in (out / "trace").rglob("*perfetto_trace.json.gz"):
            summ = summarize_trace(f, 3)
            print_summary(tag, summ)
            (out / f"{tag}.profile.json").write_text(json.dumps(summ, indent=1))
            if os.environ.get("SPMDGPT_GPU_KEEP_TRACE"):
                shutil.copy(f, out / f"{tag}.perfetto_trace.json.gz")
        shutil.copy(out / "trace" / "step.hlo.txt.gz", out / f"{tag}.hlo.txt.gz")
        shutil.rmtree(out / "trace")
    return 0


def cmd_loop(out: Path) -> int:
    """Where the CLI's steps lose time against the bare step. The same train step, 30 steps per
    variant, called as the `jax.jit` function (as spmdgpt train does) or as the AOT-compiled
    executable (`.lower().compile()`, as `speed` does), fed fixed device batches of random
    tokens or of the corpus's text, or a fresh Batcher batch per step with the metrics read one
    step late (spmdgpt train's loop). On the first H100 visit the loop ran 17% below `speed`:
    the first two variants separate dispatch from the data."""
    import jax

    from spmdgpt.training.step import training_parts

    cfg, mesh, rules = _setup(os.environ.get("SPMDGPT_GPU_LOOP", "").split())
    n, tok = 30, cfg.data.batch_size * cfg.data.seq_len
    rows = {}
    with jax.set_mesh(mesh):
        state, step, batcher, _ = training_parts(cfg, rules, schedule_steps=1000)
        text = [tuple(batcher.train_batch(i))[:2] for i in range(4)]
        rng = np.random.default_rng(0)
        rand = [_random_batch(cfg, rules, *x.shape, rng) for x, _ in text]
        for i in range(3):
            state, m = step(state, *text[i])
        jax.block_until_ready(m)
        compiled = step.lower(state, *text[0]).compile()
        variants = ("jit random", "compiled random", "jit text", "compiled text", "jit batcher+metrics",
                    "compiled batcher+metrics")
        for variant in variants:
            fn = compiled if variant.startswith("compiled") else step
            for rep in range(2):  # the first repeat warms up
                t0 = time.perf_counter()
                pending = None
                for i in range(n):
                    if variant.endswith("metrics"):
                        state, m = fn(state, *batcher.train_batch(i)[:2])
                        if pending is not None:
                            jax.device_get(pending)
                        pending = m
                    else:
                        state, m = fn(state, *(rand if "random" in variant else text)[i % 4])
                jax.block_until_ready(m)
            rows[variant] = n * tok / (time.perf_counter() - t0)
            print(f"loop {variant:26s} {rows[variant]:10,.0f} tokens/s")
    (out / "loop.json").write_text(json.dumps(rows))
    return 0


def cmd_dispatch(out: Path) -> int:
    """Whether the step call returns before its step has run (asynchronous dispatch, which lets
    the host prepare the next batch meanwhile): for 1 and 8 microbatches of 16 x 1024 (GPT-2
    124M, bf16, cuDNN, bf16 logits), the time until each of 10 calls returns against the time
    until its step is done. On the fourth H100 visit the trainer's rows said the call waits."""
    import jax

    from spmdgpt.model import param_info
    from spmdgpt.optim import build_optimizer
    from spmdgpt.training.state import init_state
    from spmdgpt.training.step import make_train_step

    rows = {}
    for mb in (1, 8):
        cfg, mesh, rules = _setup(["model.attention=cudnn", "model.logits_dtype=bfloat16",
                                   f"train.microbatches={mb}"], 1024, 16 * mb)
        with jax.set_mesh(mesh):
            opt = build_optimizer(cfg.optimizer, param_info(cfg.model), 1000)
            state = init_state(cfg, rules, opt)
            batches = _batches(cfg, rules, 16 * mb, 1024)
            step = make_train_step(cfg, rules, opt).lower(state, *batches[0]).compile()
            for i in range(3):
                state, m = step(state, *batches[i % 4])
            jax.block_until_ready(m)
            returned, done = [], []
            for i in range(10):
                t0 = time.perf_counter()
                state, m = step(state, *batches[i % 4])
                returned.append(time.perf_counter() - t0)
                jax.block_until_ready(m)
                done.append(time.perf_counter() - t0)
        rows[mb] = {"returned_ms": 1e3 * float(np.median(returned)), "done_ms": 1e3 * float(np.median(done))}
        print(f"dispatch microbatches={mb}: the call returns after {rows[mb]['returned_ms']:.2f} ms, "
              f"the step is done after {rows[mb]['done_ms']:.2f} ms", flush=True)
    (out / "dispatch.json").write_text(json.dumps(rows))
    return 0


# ----------------------------------------------------------------------------- target


def cmd_target(out: Path) -> int:
    """The GPU's XLA target description, and whether a step compiles for it with no GPU in sight.

    (1) XLA writes the target description it compiles for (a GpuTargetConfigProto, text) beside
    the HLO it dumps: a tiny jitted function is compiled with --xla_dump_to and that file kept as
    DIR/gpu_target_config.txtpb. (2) In a process that sees no GPU (CUDA_VISIBLE_DEVICES="",
    JAX_PLATFORMS=cpu), `jax.experimental.topologies.get_topology_desc(platform="cuda",
    target_config=..., topology="1x1x1")` makes compile-only devices from it and the GPT-2 124M
    step is planned on them (`target-plan`)."""
    import glob
    import tempfile

    dump = tempfile.mkdtemp()
    code = ("import jax, jax.numpy as jnp; f = jax.jit(lambda a: jnp.tanh(a @ a.T)); "
            "print(f.lower(jnp.ones((256, 256), jnp.bfloat16)).compile().cost_analysis() is not None)")
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump}"}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    print("dump run: exit", p.returncode, p.stderr.strip().splitlines()[-1:] if p.returncode else "")
    found = sorted(glob.glob(f"{dump}/**/*target_config*", recursive=True))
    print("target config files:", [Path(f).name for f in found][:5])
    if not found:
        print("no target config in the dump; files:", sorted(os.listdir(dump))[:20])
        return 1
    text = Path(found[0]).read_text()
    (out / "gpu_target_config.txtpb").write_text(text)
    print(text[:3000])
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    p = subprocess.run([sys.executable, __file__, "target-plan", "--out", str(out)], env=env,
                       capture_output=True, text=True, timeout=400)
    print(p.stdout[-6000:])
    print("target-plan: exit", p.returncode, "\n".join(p.stderr.strip().splitlines()[-8:]))
    return p.returncode


def cmd_target_plan(out: Path) -> int:
    """(Called by `target` in a process without a GPU.) The GPT-2 124M step (bf16, cuDNN attention,
    batch 16 x 1024) planned on compile-only CUDA devices made from DIR/gpu_target_config.txtpb."""
    import jax
    from jax.experimental import topologies

    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.plan.plan import plan_step, report

    text = (out / "gpu_target_config.txtpb").read_text()
    print("local devices:", jax.devices())
    topo = topologies.get_topology_desc(platform="cuda", target_config=text, topology="1x1x1")
    print("compile-only devices:", topo.devices)
    rows = {}
    for name in ("jax-cudnn-1k", "jax-cudnn-lb128-1k"):
        overrides, seq, batch = SPEED[name]
        from spmdgpt.config import load_config

        cfg = load_config([*GPT2, f"data.seq_len={seq}", f"model.max_seq_len={seq}", f"data.batch_size={batch}",
                           *overrides])
        mesh = make_mesh(cfg.mesh, topo.devices[:1])
        with jax.set_mesh(mesh):
            plan = plan_step(cfg, Rules(mesh, cfg.sharding, cfg.model))
        print(name, "\n" + report(cfg, plan, 80 * 10**9))
        rows[name] = {"total_bytes": plan.total_bytes, "temp_bytes": plan.temp_bytes, "flops": plan.flops,
                      "compile_s": plan.compile_s}
    (out / "target_plan.json").write_text(json.dumps(rows, indent=1))
    return 0


# ----------------------------------------------------------------------------- decode


def cmd_decode(out: Path) -> int:
    import jax
    from padded_sampler import Sampler, SamplingParams

    from spmdgpt.model import init_params

    cfg, mesh, rules = _setup([])
    rows = []
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        sampler = Sampler(cfg.model, rules, vocab_limit=50257)
        rng = np.random.default_rng(0)
        for batch in (1, 64):
            prompts = rng.integers(0, 50257, (batch, 64)).tolist()
            sp = SamplingParams(max_new_tokens=256, temperature=0.8, top_k=50, seed=0)
            t0 = time.perf_counter()
            sampler.generate(params, prompts, sp)
            first = time.perf_counter() - t0
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                sampler.generate(params, prompts, sp)
                times.append(time.perf_counter() - t0)
            t = float(np.median(times))
            rows.append({"batch": batch, "prompt": 64, "new": 256, "tokens_per_sec": batch * 256 / t,
                         "ms_per_step": 1e3 * t / 256, "first_call_s": first})
            print(f"decode batch {batch:3d}: {batch * 256 / t:10,.0f} tokens/s ({1e3 * t / 256:.2f} ms per step, "
                  f"prefill included) | first call with compile {first:.1f} s")
    (out / "decode.json").write_text(json.dumps(rows, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["check", "curves", "speed", "decode", "profile", "loop", "dispatch", "one",
                                    "target", "target-plan"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--only", default=None, help="comma-separated names from SPEED (check: CHECKS, curves: CURVES)")
    ap.add_argument("--steps", type=int, default=300, help="curves: training steps")
    ap.add_argument("--corpus", default="gutenberg", choices=sorted(CORPORA), help="curves: the training data")
    ap.add_argument("--run-timeout", type=float, default=900, help="curves: seconds per training run")
    ap.add_argument("--f32-highest", action="store_true", help="curves: float32 matmuls at full precision (no TF32)")
    ap.add_argument("--set", nargs="*", default=[], help="extra overrides for every run (smoke tests)")
    ap.add_argument("--tiny", action="store_true", help="a tiny model and shapes: runs on a CPU in seconds")
    args = ap.parse_args()
    if args.cmd != "one" and os.environ.get("SPMDGPT_GPU_SET"):  # (it would be overwritten below)
        print("gpu.py: error: SPMDGPT_GPU_SET is how gpu.py hands --set to its own subprocesses; pass the "
              "overrides as --set instead", file=sys.stderr)
        return 2
    if args.tiny:
        os.environ["SPMDGPT_GPU_TINY"] = "1"  # (read by the `one` subprocesses too)
        args.set = TINY_MODEL + args.set
    GPT2.extend(args.set)
    GUTENBERG_124M.extend(args.set)
    os.environ["SPMDGPT_GPU_SET"] = " ".join(args.set)  # for the `one` subprocesses
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = args.only.split(",") if args.only else None
    if args.cmd == "one":
        return cmd_one(args.name)
    curves = partial(cmd_curves, out, args.steps, args.corpus, args.f32_highest, args.run_timeout, only)
    return {"check": lambda: cmd_check(out, only), "curves": curves,
            "speed": lambda: cmd_speed(out, only), "decode": lambda: cmd_decode(out),
            "profile": lambda: cmd_profile(out, only), "loop": lambda: cmd_loop(out),
            "dispatch": lambda: cmd_dispatch(out),
            "target": lambda: cmd_target(out), "target-plan": lambda: cmd_target_plan(out)}[args.cmd]()


if __name__ == "__main__":
    sys.exit(main())
