"""The MoE layer's dispatch modes against a dense MLP of equal active parameters, on one device.

    python benchmarks/moe.py [--tokens 4096] [--d 256] [--experts 8] [--top-k 2] [--rounds 5]

One MoE MLP unit (spmdgpt.model.moe; SwiGLU experts of width F = 2 d, top-k of E, softmax
router), forward + backward of sum(sin(out)) with respect to the parameters and the input, under
jit: dropless (copies sorted by expert, then `grouped=blocks` and `grouped=ragged`, i.e.
`jax.lax.ragged_dot`), capacity at factors 1.0 and 1.25 (fixed [E, C, d] buffers, batched
einsums) and the masked reference that runs every expert on every token (`moe.every_expert`:
what a dropless layer costs without grouping, E / k times the active FLOPs). The
baseline is the dense SwiGLU MLP of width k x F (the same active parameters per token). Prints
each one's time per call (median of --rounds), its ratio to the baseline and the temporaries
XLA's memory analysis gives for the compiled function.

    python benchmarks/moe.py --target h100 --tokens 16384 --d 1024 [--dtype bfloat16]

compiles the same rows for an H100 without one (`spmdgpt plan topology=h100`'s compile-only
device; `grouped=pallas`, the Pallas kernels, joins them) and reads each compiled function
instead of timing it: its GEMM FLOPs (benchmarks/roofline.py's kernels: dots, and the grouped
kernels by their rows and columns) against the dense MLP's (the active FLOPs), its temporaries,
and the roofline's time at 800 TFLOP/s (the grouped kernels at spmdgpt.plan.roofline.GROUPED_RATE of
it, as an H200 measured them) and 3.0 TB/s. On a GPU the timed rows include
`grouped=pallas` (and `grouped=tokamax`, tokamax's Mosaic GPU ragged_dot, where tokamax is
installed: the `gpu-kernels` extra; also compiled with --target and checked with --check);
`--only dense,pallas` keeps the rows whose names hold one of the words,
`--profile DIR` prints each timed row's device time by kernel (a trace of 3 more calls);
`--check` compares each dropless row's output and gradients with the masked reference instead of
timing: the rows on the device at hand, the reference on the host's CPU (float32 at highest matmul
precision: an H200's compiler had not compiled the reference at highest precision after 95 s).
`--tiles "64,128,64,64,4,3;128,256,128,128,8,3"` adds a pallas row for each choice of the kernels'
tiles (spmdgpt.model.grouped.Tiles: the rows kernel's K step and columns, the weight gradient's
K x N tile, warps, stages), to time or to check.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import sys
import time

from spmdgpt.mesh.runtime import set_default_xla_flags, use_retaining_malloc

if "--target" in sys.argv:  # (compile-only devices: JAX runs on the CPU; the CUDA plugin's library checks
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # for a GPU driver are skipped)
use_retaining_malloc()
set_default_xla_flags()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from spmdgpt.config import GroupedMatmul, MoeDispatch, load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model import init_params, is_info, param_info  # noqa: E402
from spmdgpt.model.grouped import Tiles, using_tiles  # noqa: E402
from spmdgpt.model.mlp import mlp  # noqa: E402
from spmdgpt.model.moe import every_expert, moe  # noqa: E402
from spmdgpt.plan.topology import target_default  # noqa: E402


def timed(fn, args, rounds, profile=None):
    """(median seconds per call, temporaries); with `profile` (a folder) 3 more calls traced and
    their device time printed by kernel (gpu.py's trace summary)."""
    compiled = jax.jit(fn).lower(*args).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    if profile:
        import shutil
        from pathlib import Path

        import gpu

        jax.profiler.start_trace(profile, create_perfetto_trace=True)
        for _ in range(3):
            jax.block_until_ready(compiled(*args))
        jax.profiler.stop_trace()
        for f in Path(profile).rglob("*perfetto_trace.json.gz"):
            gpu.print_summary("call", gpu.summarize_trace(f, 3))
        shutil.rmtree(profile)
    return statistics.median(times), temp


def compiled_on(target: str, fn, args):
    """(GEMM FLOPs, temporaries, the roofline's ms) of fn's step compiled for `target`'s devices."""
    import roofline

    compiled = jax.jit(fn).lower(*args).compile()
    totals = roofline.roofline(roofline.kernels(compiled.as_text()), 800.0, 3.0e12)
    flops = sum(totals[k]["flops"] for k in ("gemm", "gemm-grouped") if k in totals)
    return flops, compiled.memory_analysis().temp_size_in_bytes, totals["step"]["ms"]


def check(reference_on, rows, p, x, tiles) -> int:
    """Each dropless row's output and gradients against the masked reference's (relative to the
    largest value; the rows on this device, the reference on the host's CPU); 0 when all are
    within 1e-5 (float32) or 2e-2 (bfloat16). float32 runs every matmul at full float32 precision
    (`jax.default_matmul_precision("highest")`, which the Pallas kernels follow too): under GPUs'
    default TF32 each GEMM library rounds its inputs its own way, and an H200 measured the kernels
    4.25e-4 from the reference (cuBLAS's own rows 3.8e-5). Each row prints as it finishes.
    `reference_on(mesh)` is the reference on a mesh's devices (the host's CPU here: a jitted
    function takes its devices from the mesh in context, so the reference gets a mesh of its own)."""
    def readout(f):
        return lambda p, x: jnp.sum(jnp.sin(f(p, x).astype(jnp.float32)))

    full = x.dtype == jnp.float32
    bad = 0
    with jax.default_matmul_precision("highest" if full else None):
        cpu = jax.devices("cpu")[:1]
        with jax.set_mesh(cpu_mesh := make_mesh(load_config(["mesh.data=1"]).mesh, cpu)):
            want = jax.jit(jax.value_and_grad(readout(reference_on(cpu_mesh)), argnums=(0, 1)))(
                *jax.device_get((p, x)))  # (host copies: the arrays' own types name the GPU's mesh)
        want = jax.device_get(want)
        for name, f, _ in rows:
            t0 = time.perf_counter()
            try:
                with using_tiles(tiles.get(name)):
                    got = jax.jit(jax.value_and_grad(readout(f), argnums=(0, 1)))(p, x)
            except jax.errors.JaxRuntimeError as e:  # (tiles past the shared memory at this dtype: said)
                print(f"  {name:36s} does not compile: {str(e).splitlines()[0][:100]}", flush=True)
                continue
            err = max(float(np.max(np.abs(np.asarray(jax.device_get(a), np.float32) - np.asarray(b, np.float32)))
                            / max(float(np.max(np.abs(np.asarray(b, np.float32)))), 1e-30))
                      for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True))
            ok = err <= (1e-5 if full else 2e-2)
            bad += not ok
            print(f"  {name:36s} worst relative error of the output and gradients {err:.2e} "
                  f"{'PASS' if ok else 'FAIL'} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return int(bad > 0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dtype", default="float32", help="the compute dtype (float32 or bfloat16)")
    ap.add_argument("--check", action="store_true", help="the dropless rows against the masked reference, then exit")
    ap.add_argument("--target", default=None, help="compile for these compile-only devices (h100) instead of timing")
    ap.add_argument("--only", default=None, help="comma-separated words: the rows whose names hold one (dense,pallas)")
    ap.add_argument("--profile", default=None, help="a folder: trace each timed row, print its device time by kernel")
    ap.add_argument("--tiles", default="", help="';'-separated choices of the pallas kernels' tiles, each "
                    "rows_k,rows_n,weights_k,weights_n,warps,stages (spmdgpt.model.grouped.Tiles): a row each")
    args = ap.parse_args()
    if args.check and args.target:
        ap.error("--check runs on this machine's devices: drop --target")
    E, k, d = args.experts, args.top_k, args.d
    base = ["model.num_layers=1", f"model.d_model={d}", "model.num_heads=4", "model.mlp=swiglu", "mesh.data=1",
            f"model.compute_dtype={args.dtype}"]
    moe_cfg = load_config([*base, f"model.moe.num_experts={E}", f"model.moe.top_k={k}", "model.mlp_factor=2"]).model
    dense_cfg = load_config([*base, f"model.mlp_factor={2 * k}"]).model
    devices = jax.devices()[:1]
    if args.target:
        from spmdgpt.plan.topology import compile_only_devices

        devices = compile_only_devices(args.target)[:1]
    mesh = make_mesh(load_config(base).mesh, devices)
    dtype = jnp.dtype(args.dtype)
    with jax.set_mesh(mesh), target_default(mesh if args.target else None):  # (tokamax's kernels: the target's)
        rules = Rules(mesh, load_config(base).sharding, moe_cfg)

        def one_layer(cfg):  # (the first layer's MLP: arrays, or on a target their shapes)
            if not args.target:
                return jax.tree.map(lambda a: a[0].astype(dtype), init_params(cfg, jax.random.key(0), rules).blocks.mlp)
            return jax.tree.map(lambda i: jax.ShapeDtypeStruct(i.shape[1:], dtype, sharding=rules.param_sharding(
                (None,) * (len(i.shape) - 1))), param_info(cfg).blocks.mlp, is_leaf=is_info)

        p_moe, p_dense = one_layer(moe_cfg), one_layer(dense_cfg)
        x = (jax.ShapeDtypeStruct((args.tokens, d), dtype, sharding=rules.param_sharding((None, None)))
             if args.target else jax.random.normal(jax.random.key(1), (args.tokens, d), dtype))

        def grad_of(f):
            return jax.grad(lambda p, x: jnp.sum(jnp.sin(f(p, x).astype(jnp.float32))), argnums=(0, 1))

        def moe_with(**kw):
            c = dataclasses.replace(moe_cfg, moe=dataclasses.replace(moe_cfg.moe, **kw))
            return lambda p, x: moe(c, rules, p, x)[0]

        capacity = MoeDispatch.capacity
        rows = [("dense MLP, width k x F (baseline)", lambda p, x: mlp(dense_cfg, rules, p, x)[0], p_dense),
                ("MoE dropless, blocks", moe_with(grouped=GroupedMatmul.blocks), p_moe),
                ("MoE dropless, ragged_dot", moe_with(grouped=GroupedMatmul.ragged), p_moe),
                *([("MoE dropless, pallas kernels", moe_with(grouped=GroupedMatmul.pallas), p_moe)]
                  if args.target or args.check or devices[0].platform == "gpu" else []),  # (CPUs interpret it: slow)
                *([("MoE dropless, tokamax ragged_dot", moe_with(grouped=GroupedMatmul.tokamax), p_moe)]
                  if (args.target or devices[0].platform == "gpu") and importlib.util.find_spec("tokamax") else []),
                ("MoE capacity 1.0", moe_with(dispatch=capacity, capacity_factor=1.0), p_moe),
                ("MoE capacity 1.25", moe_with(dispatch=capacity, capacity_factor=1.25), p_moe),
                ("masked reference (every expert)", lambda p, x: every_expert(moe_cfg, rules, p, x), p_moe)]
        tiles = {f"pallas, {t.name()}": t for t in (Tiles(*map(int, c.split(","))) for c in args.tiles.split(";") if c)}
        at = next(i for i, r in enumerate(rows) if "capacity" in r[0])  # (after the dropless rows)
        rows[at:at] = [(name, moe_with(grouped=GroupedMatmul.pallas), p_moe) for name in tiles]
        if args.check:
            def reference_on(m):
                r = Rules(m, load_config(base).sharding, moe_cfg)
                return lambda p, x: every_expert(moe_cfg, r, p, x)

            sys.exit(check(reference_on, rows[1:-3], p_moe, x, tiles))
        if args.only:
            rows = [r for r in rows if any(w in r[0] for w in args.only.split(","))]
        print(f"{args.tokens} tokens x d {d}, {E} SwiGLU experts of {2 * d}, top-{k}; forward + backward; "
              f"{args.dtype}; {devices[0].device_kind}{' (compiled, not run)' if args.target else ''}")
        first = None
        for name, f, p in rows:
            if args.target:
                try:
                    with using_tiles(tiles.get(name)):
                        flops, temp, ms = compiled_on(args.target, grad_of(f), (p, x))
                except jax.errors.JaxRuntimeError as e:  # (tiles past the shared memory: said, the rest go on)
                    print(f"  {name:36s} does not compile: {str(e).splitlines()[0][:100]}")
                    continue
                first = first or flops
                print(f"  {name:36s} GEMMs {flops / 1e9:8.1f} GFLOP {flops / first:5.2f}x  temporaries "
                      f"{temp / 2**20:7.1f} MiB  roofline {ms:7.2f} ms")
                continue
            try:
                with using_tiles(tiles.get(name)):
                    t, temp = timed(grad_of(f), (p, x), args.rounds, args.profile)
            except Exception as e:  # (a row that does not fit the device: said, and the others still run)
                if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
                    raise
                print(f"  {name:36s} does not fit: {str(e).splitlines()[0][:100]}")
                continue
            first = first or t
            print(f"  {name:36s} {t * 1e3:8.1f} ms  {t / first:5.2f}x  temporaries {temp / 2**20:7.1f} MiB")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (roofline.py, beside this file)
    main()
