"""Fused causal attention kernels for NVIDIA GPUs side by side, at GPT-2 124M's attention shape.

    python benchmarks/attention_kernels.py --target h100     # this CPU, compile-only (no GPU)
    python benchmarks/attention_kernels.py                   # on a GPU: checked, then timed
    options: --batch 16 --seq 1024 --heads 12 --head-dim 64 --only NAME,... --json FILE

The kernels, each on q/k/v [batch, seq, heads, head_dim] in bfloat16, causal:

- `xla`: the model's `xla` backend (`blocked_causal_attention`, one block, head-major), what
  every platform can run; the reference's dtype aside, the same code as the float32 reference;
- `cudnn`: cuDNN's flash attention through `jax.nn.dot_product_attention`, exactly as
  `model.attention=cudnn` calls it (`kernels.fused_causal_attention`): the GPU default today;
- `tokamax-mosaic`: tokamax's flash attention kernels written in Mosaic GPU (forward, and a
  backward in two kernels, dK/dV and dQ), exactly as `model.attention=tokamax` calls them
  (`kernels.tokamax_attention`; tokamax is pinned by the `gpu-kernels` extra);
- `tokamax-triton`: tokamax's Pallas-Triton flash attention (`tokamax.dot_product_attention`,
  implementation triton), not a model backend;
- `jax-mosaic`: the Mosaic GPU flash attention that JAX ships as an example
  (`jax.experimental.pallas.ops.gpu.attention_mgpu`), forward only: its backward has no causal
  mask yet (NotImplementedError), so it cannot train a GPT.

`--target h100` compiles each kernel's forward and forward + backward (the gradients of <o, g>
for q, k, v) for the stored H100 description (`spmdgpt plan topology=h100`'s compile-only device;
JAX's CUDA plugin, and the cuDNN library for `cudnn`: the `gpu-plan-cudnn` extra) and prints, for
each: whether it compiles (else the first line of the reason), the custom calls it launches with
their operands' layouts, XLA's temporaries, and the other kernels of the program (transposes,
converts, the q/k/v cotangents' assembly) with their bytes and their time at 3 TB/s, read by the
roofline tool (`spmdgpt.plan.roofline`): what each kernel costs around itself, before a GPU times it.

On a GPU, each kernel is first checked against the `xla` backend in float32 at the highest matmul
precision (outputs and the three gradients, random q/k/v/g): it passes when its largest error is
at most twice the `xla` backend's own in bfloat16 plus 1e-3 (`gpu.py check`'s rule: both differ
from float32 by bfloat16 rounding only), then timed: the median of 5 windows of 10 calls, forward
and forward + backward, in ms and TFLOP/s (causal FLOPs: 2 x 2 x b x n x t^2 x h / 2 forward,
2.5x that backward, the convention of the FlashAttention papers). Results: a table on stdout and,
with --json, every row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional

from spmdgpt.mesh.runtime import set_default_xla_flags

if "--target" in sys.argv:  # (compile-only devices: JAX runs on the CPU)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
set_default_xla_flags()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from spmdgpt.config import load_config  # noqa: E402
from spmdgpt.mesh.sharding import Rules, make_mesh  # noqa: E402
from spmdgpt.model.attention import blocked_causal_attention  # noqa: E402
from spmdgpt.model.kernels import fused_causal_attention, load_tokamax  # noqa: E402
from spmdgpt.plan.roofline import kernels as read_kernels  # noqa: E402

KERNELS = ("xla", "cudnn", "tokamax-mosaic", "tokamax-triton", "jax-mosaic")
FORWARD_ONLY = {"jax-mosaic"}  # (its backward: NotImplementedError under a causal mask)
BANDWIDTH = 3.0e12  # bytes/s: the H100's measured copy bandwidth (the roofline tool's default)
CUSTOM_CALLS = ("__cudnn$fmha", "mosaic_gpu", "xla.gpu.triton")


class Missing(RuntimeError):
    """A kernel's package is not installed: its rows are skipped, saying so."""


def _tokamax():
    try:
        return load_tokamax()
    except ImportError as e:
        raise Missing(f"tokamax is not installed ({e}): pip install -e '.[gpu-kernels]'") from None


def attention_of(name: str, rules: Rules) -> Callable:
    """The kernel `name` (KERNELS) as a function of q, k, v [b, t, n, h] -> o [b, t, n, h]."""
    if name == "xla":
        s = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731  ([b, t, n, h] <-> head-major [b, n, t, h])
        return lambda q, k, v: s(blocked_causal_attention(s(q), s(k), s(v), 0, rules))
    if name == "cudnn":
        return lambda q, k, v: fused_causal_attention(q, k, v, rules, "cudnn")
    if name == "tokamax-mosaic":
        _tokamax()
        return lambda q, k, v: fused_causal_attention(q, k, v, rules, "tokamax")
    if name == "tokamax-triton":
        tokamax = _tokamax()
        return lambda q, k, v: tokamax.dot_product_attention(q, k, v, is_causal=True, implementation="triton")
    if name == "jax-mosaic":
        from jax.experimental.pallas.ops.gpu import attention_mgpu

        config = attention_mgpu.TuningConfig(block_q=64, block_kv=128, max_concurrent_steps=2, causal=True)
        return lambda q, k, v: attention_mgpu.attention(q, k, v, config)
    raise ValueError(f"unknown kernel {name!r}: one of {', '.join(KERNELS)}")


def passes(attend: Callable, forward_only: bool) -> Dict[str, Callable]:
    """{"forward": q, k, v -> o, "forward+backward": q, k, v, g -> (dq, dk, dv) of <o, g>}."""
    def grads(q, k, v, g):
        return jax.grad(lambda q, k, v: jnp.sum(attend(q, k, v).astype(jnp.float32) * g.astype(jnp.float32)),
                        argnums=(0, 1, 2))(q, k, v)

    return {"forward": attend} if forward_only else {"forward": attend, "forward+backward": grads}


def causal_flops(b: int, t: int, n: int, h: int, backward: bool) -> float:
    forward = 2 * 2 * b * n * t * t * h / 2
    return forward * (3.5 if backward else 1.0)


def _one_line(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:150]}"


def _grouped(items: str) -> str:
    """'a, a, a, b' -> '3 x a, b' (a custom call's operand or result types, split at top-level commas)."""
    parts, depth, cur = [], 0, ""
    for ch in items:
        depth += ch in "[{(" and 1 or (-1 if ch in "]})" else 0)
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    out = []
    for p in parts:
        if out and out[-1][1] == p:
            out[-1][0] += 1
        else:
            out.append([1, p])
    return ", ".join(p if n == 1 else f"{n} x {p}" for n, p in out if p)


def _call_lines(text: str) -> List[str]:
    """The lines of a compiled module's attention custom calls."""
    return [line for line in text.splitlines()
            if "custom-call(" in line and " = " in line and any(c in line for c in CUSTOM_CALLS)]


def _custom_calls(text: str) -> List[str]:
    """Each attention custom call of a compiled module: its target, results and operands' layouts."""
    out = []
    for line in _call_lines(text):
        target = line.split('custom_call_target="')[1].split('"')[0]
        result = line.split(" = ", 1)[1].split(" custom-call(")[0].strip("()")
        operands = line.split("operand_layout_constraints={")[1].split("}}, ")[0] + "}" \
            if "operand_layout_constraints" in line else "-"
        out.append(f"{target}: ({_grouped(operands)}) -> ({_grouped(result)})")
    return out


def one_device(devices) -> tuple:
    """(mesh, rules) of the default config on one device."""
    cfg = load_config(["mesh.data=1"])
    mesh = make_mesh(cfg.mesh, devices)
    return mesh, Rules(mesh, cfg.sharding)


def compile_only(names: List[str], target: str, shape: tuple) -> List[dict]:
    """Each kernel's passes compiled for `target`'s compile-only devices (see the module docstring)."""
    from spmdgpt.plan.topology import compile_only_devices, target_default

    b, t, n, h = shape
    mesh, rules = one_device(compile_only_devices(target)[:1])
    array = jax.ShapeDtypeStruct((b, t, n, h), jnp.bfloat16, sharding=jax.sharding.NamedSharding(mesh, jax.P()))
    rows = []
    for name in names:
        try:
            fns = passes(attention_of(name, rules), name in FORWARD_ONLY)
        except Missing as e:
            rows.append({"kernel": name, "pass": "-", "skipped": str(e)})
            continue
        for label, fn in fns.items():
            row = {"kernel": name, "pass": label}
            try:  # (tokamax picks its kernels for the default device: the target's, `topology.target_default`)
                with jax.set_mesh(mesh), target_default(mesh):
                    compiled = jax.jit(fn).lower(*([array] * (3 if label == "forward" else 4))).compile()
            except Exception as e:  # (a kernel that does not lower here: its reason is the finding)
                row["error"] = _one_line(e)
                rows.append(row)
                continue
            text = compiled.as_text()
            calls = _call_names(text)
            around = [k for k in read_kernels(text) if k.name not in calls]
            row.update(custom_calls=_custom_calls(text), temp_bytes=compiled.memory_analysis().temp_size_in_bytes,
                       kernels_around=sum(k.runs for k in around),
                       bytes_around=sum(k.runs * (k.read + k.written) for k in around))
            row["ms_around"] = row["bytes_around"] / BANDWIDTH * 1e3
            rows.append(row)
    return rows


def _call_names(text: str) -> set:
    """The instruction names of a module's attention custom calls."""
    return {line.split("%", 1)[1].split(" ", 1)[0] for line in _call_lines(text)}


def _max_err(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


def on_device(names: List[str], shape: tuple, windows: int = 5, calls: int = 10) -> List[dict]:
    """Each kernel checked against float32 and timed on this process's first device."""
    b, t, n, h = shape
    mesh, rules = one_device(jax.devices()[:1])
    rng = np.random.default_rng(0)
    q, k, v, g = (jnp.asarray(rng.normal(size=(b, t, n, h)), jnp.float32) for _ in range(4))

    def run(fns, dtype):
        args = [x.astype(dtype) for x in (q, k, v, g)]
        with jax.set_mesh(mesh), jax.default_matmul_precision("highest" if dtype == jnp.float32 else None):
            outs = [jax.jit(fns["forward"])(*args[:3])]
            if "forward+backward" in fns:
                outs += list(jax.jit(fns["forward+backward"])(*args))
        return outs

    reference = run(passes(attention_of("xla", rules), False), jnp.float32)
    own = [_max_err(a, r) for a, r in zip(run(passes(attention_of("xla", rules), False), jnp.bfloat16), reference)]
    rows = []
    for name in names:
        try:
            fns = passes(attention_of(name, rules), name in FORWARD_ONLY)
            errs = [_max_err(a, r) for a, r in zip(run(fns, jnp.bfloat16), reference)]
        except Missing as e:
            rows.append({"kernel": name, "pass": "-", "skipped": str(e)})
            continue
        except Exception as e:
            rows.append({"kernel": name, "pass": "-", "error": _one_line(e)})
            continue
        ok = all(e <= 2 * o + 1e-3 for e, o in zip(errs, own))
        args = [x.astype(jnp.bfloat16) for x in (q, k, v, g)]
        for label, fn in fns.items():
            with jax.set_mesh(mesh):
                step = jax.jit(fn)
                call_args = args[:3] if label == "forward" else args
                jax.block_until_ready(step(*call_args))
                times = []
                for _ in range(windows):
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        out = step(*call_args)
                    jax.block_until_ready(out)
                    times.append((time.perf_counter() - t0) / calls)
            ms = statistics.median(times) * 1e3
            rows.append({"kernel": name, "pass": label, "ms": ms,
                         "tflops": causal_flops(b, t, n, h, label != "forward") / ms / 1e9,
                         "max_err": dict(zip(("out", "dq", "dk", "dv"), errs)),
                         "xla_bf16_err": dict(zip(("out", "dq", "dk", "dv"), own)), "pass_check": ok})
    return rows


def report(rows: List[dict], compiled: bool) -> str:
    lines = []
    for r in rows:
        head = f"{r['kernel']:15s} {r['pass']:17s}"
        if "skipped" in r:
            lines.append(f"{head} skipped: {r['skipped']}")
        elif "error" in r:
            lines.append(f"{head} does not {'compile' if compiled else 'run'}: {r['error']}")
        elif compiled:
            lines.append(f"{head} temporaries {r['temp_bytes'] / 2**20:8.2f} MiB; other kernels "
                         f"{r['kernels_around']:3d}, {r['bytes_around'] / 1e9:6.3f} GB = {r['ms_around']:.3f} ms "
                         "at 3 TB/s")
            lines += [f"{'':34s}{c}" for c in r["custom_calls"]] or [f"{'':34s}(no custom call: XLA's own kernels)"]
        else:
            worst = max(r["max_err"].values())
            lines.append(f"{head} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s   max|err| {worst:.2e} "
                         f"({'PASS' if r['pass_check'] else 'FAIL'} against xla-bf16's "
                         f"{max(r['xla_bf16_err'].values()):.2e})")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default=None, help="compile for these compile-only devices (h100) instead of running")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--only", default=",".join(KERNELS), help=f"comma-separated, of {', '.join(KERNELS)}")
    ap.add_argument("--json", default=None, help="write every row here")
    args = ap.parse_args(argv)
    names = [x for x in args.only.split(",") if x]
    if unknown := [x for x in names if x not in KERNELS]:
        ap.error(f"--only: unknown kernel(s) {', '.join(unknown)}; the kernels: {', '.join(KERNELS)}")
    shape = (args.batch, args.seq, args.heads, args.head_dim)
    where = f"{args.target} (compiled, not run)" if args.target else jax.devices()[0].device_kind
    print(f"causal attention, bfloat16, [batch, seq, heads, head_dim] = {list(shape)}; {where}", flush=True)
    rows = compile_only(names, args.target, shape) if args.target else on_device(names, shape)
    print(report(rows, bool(args.target)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": shape, "target": args.target, "device": where, "rows": rows}, f, indent=1)
    return 1 if any(r.get("pass_check") is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
