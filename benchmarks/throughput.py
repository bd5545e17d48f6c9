"""Training throughput and MFU on this machine, against its matmul peak measured in the same run.

    python benchmarks/throughput.py [--steps 20] [--configs B1,B2] [extra hydra overrides]
    SPMDGPT_MALLOC=system python benchmarks/throughput.py   # with glibc's default malloc settings

B1: vocab 65, 4 layers, 4 heads, d_model 256, seq 256, batch 16, float32, AdamW, 1 device.
B2: the same with the GPT-2 vocabulary (50257) and batch 8.
The peak is the best float32 matmul rate (N x N @ N x N) over a few sizes; MFU = achieved
model FLOP/s (6N + attention, see spmdgpt.plan.flops) / that peak. Each config runs several timed
windows; the best window is compared with the (best-of) peak, and the median is printed too
(this shared 2-core machine shows about +-10% run-to-run noise). Like `spmdgpt train`, the
script restarts itself with spmdgpt's glibc malloc settings (spmdgpt.mesh.runtime); it also prints
the kernel (sys) time and minor page faults per step. The last line is the results as JSON.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from spmdgpt.mesh.runtime import malloc_in_use, set_default_xla_flags, use_retaining_malloc

use_retaining_malloc()  # the same process settings as `spmdgpt train`
set_default_xla_flags()  # and XLA flags, set before JAX starts

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import param_info
from spmdgpt.optim import build_optimizer
from spmdgpt.plan.flops import flops_per_token
from spmdgpt.training.state import init_state
from spmdgpt.training.step import make_train_step

CONFIGS = {
    "B1": ["model.vocab_size=65", "data.batch_size=16"],
    "B2": ["model.vocab_size=50257", "data.batch_size=8"],
}
COMMON = [
    "model.num_layers=4",
    "model.num_heads=4",
    "model.d_model=256",
    "model.max_seq_len=256",
    "data.seq_len=256",
    "optimizer.name=adamw",
]


def matmul_peak(sizes=(1024, 2048, 3072), reps=5) -> float:
    best = 0.0
    for n in sizes:
        a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
        b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
        f = jax.jit(lambda a, b: a @ b)
        f(a, b).block_until_ready()
        for _ in range(reps):
            t0 = time.perf_counter()
            f(a, b).block_until_ready()
            best = max(best, 2 * n**3 / (time.perf_counter() - t0))
    return best


def setup(overrides: list):
    """spmdgpt at COMMON + overrides on one CPU device: (config, rules, optimizer, fresh state,
    jitted train step, 4 batches of random (inputs, targets)). Call the step inside
    jax.set_mesh(rules.mesh)."""
    cfg = load_config([*COMMON, "mesh.data=1", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        opt = build_optimizer(cfg.optimizer, param_info(cfg.model), 1000)
        state = init_state(cfg, rules, opt)
        rng = np.random.default_rng(0)
        shape = (cfg.data.batch_size, cfg.data.seq_len)
        batches = [tuple(jax.device_put(rng.integers(0, cfg.model.vocab_size, shape, dtype=np.int32),
                                        rules.batch_sharding()) for _ in range(2)) for _ in range(4)]
    return cfg, rules, opt, state, make_train_step(cfg, rules, opt), batches


def measure(name: str, overrides: list, steps: int, windows: int, warmup: int = 3):
    """Tokens/s of `windows` timed windows of `steps` steps each (after warmup and compile), and
    the process's kernel time (ms) and minor page faults per step over all of them."""
    cfg, rules, _, state, step, batches = setup([*CONFIGS[name], *overrides])
    shape = (cfg.data.batch_size, cfg.data.seq_len)
    with jax.set_mesh(rules.mesh):
        for i in range(warmup):
            state, m = step(state, *batches[i % 4])
        jax.block_until_ready(m)
        rates = []
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(windows):
            t0 = time.perf_counter()
            for i in range(steps):
                state, m = step(state, *batches[i % 4])
            jax.block_until_ready(m)
            rates.append(steps * shape[0] * shape[1] / (time.perf_counter() - t0))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    n = steps * windows
    kernel = {
        "sys_ms_per_step": 1e3 * (r1.ru_stime - r0.ru_stime) / n,
        "faults_per_step": (r1.ru_minflt - r0.ru_minflt) / n,
    }
    return rates, flops_per_token(cfg.model, cfg.data.seq_len), kernel


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10, help="steps per timed window")
    ap.add_argument("--windows", type=int, default=5, help="timed windows per config (best and median reported)")
    ap.add_argument("--configs", default="B1,B2")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    peak = matmul_peak()
    print(
        f"device: {jax.devices()[0].device_kind} x{jax.device_count()} | float32 matmul peak {peak / 1e9:.1f} GFLOP/s"
    )
    print(f"allocator: {malloc_in_use()}")
    targets = {"B1": 0.50, "B2": 0.45}
    results = {"peak_gflops": peak / 1e9, "malloc": malloc_in_use()}
    for name in args.configs.split(","):
        rates, fpt, kernel = measure(name, args.overrides, args.steps, args.windows)
        best, median = max(rates), float(np.median(rates))
        ratio = best * fpt / peak
        print(
            f"{name}: {best:,.0f} tokens/s (median {median:,.0f}) | {best * fpt / 1e9:.1f} GFLOP/s | "
            f"MFU {100 * ratio:.1f}% of measured peak (median {100 * median * fpt / peak:.1f}%; "
            f"target {100 * targets[name]:.0f}%: {'PASS' if ratio >= targets[name] else 'FAIL'}) | "
            f"per step: {kernel['sys_ms_per_step']:.0f} ms in the kernel, {kernel['faults_per_step']:,.0f} page faults"
        )
        results[name] = {"tokens_per_sec": best, "median_tokens_per_sec": median, "mfu": ratio,
                         "median_mfu": median * fpt / peak, **kernel}  # fmt: skip
    print(json.dumps(results))


if __name__ == "__main__":
    main()
