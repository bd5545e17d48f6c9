"""A grouped matmul for the dropless MoE (`model.moe.grouped=pallas`): each block of B rows times
its own expert's weights, as Pallas kernels (Triton on GPUs; interpreted on CPUs, for the tests),
forward and both backward products, with no buffer larger than the rows themselves.

The rows arrive grouped by expert and padded so that every block of B rows belongs to one expert
(`moe._blocks`: each group padded to a multiple of B); `owner[i]` is block i's expert (-1 for the
blocks past the last group, up to the static bound on the padded rows: written as zeros, no
product), and expert e's blocks are the `count[e]` consecutive ones from `first[e]`. Then

    forward   y[block i]  = x[block i] @ w[owner[i]]          grid (blocks, N / bn), a K loop
    dx        dx[block i] = dy[block i] @ w[owner[i]]^T       the same kernel, w read transposed
    dw        dw[e]       = sum over e's blocks of x^T dy     grid (E, K / bk, N / bn), a loop
                                                              over the expert's blocks

each tile accumulated in float32 and written in the rows' dtype. Each program loads its expert's
weight tiles straight from the [E, K, N] array: nothing is gathered per block (the `blocks`
product's w[owner] is blocks x K x N), and nothing runs every expert over every row (XLA's GPU
lowering of `jax.lax.ragged_dot`, which multiplies the rows by all E experts' weights under a
mask: E times the FLOPs, benchmarks/BENCHMARKS.md). Padding rows are zeros: they add nothing
to dw, and their outputs are dropped by the caller.

Inside `shard_map` (the MoE's experts run there) the kernels need check_vma=False: Pallas
types neither their outputs' nor, interpreted, their refs' varying mesh axes.

Tiles are powers of two (Triton's): bk, bn the largest dividing K and N up to the bounds of
`tiles_for(dtype)`, at least 16 (`config_errors` refuses widths that have none; `moe.grouped_kind`'s
auto then keeps blocks). They are read when a step is traced; `benchmarks/moe.py --tiles` times
other choices.
JAX 0.12 marks Pallas's Triton backend deprecated in favour of Mosaic GPU. Written for the lent
GPUs' JAX 0.11 and for 0.12: run by 0.12's interpreter on CPUs, compiled by 0.12 for an H100
(`tests/test_moe.py`), and run by 0.11.2 on an H200 (2026-11-27, benchmarks/BENCHMARKS.md: equal to
the masked reference in bfloat16 as ragged_dot is; in float32 at TF32's precision, see `precision`).
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import partial
from typing import Iterator, List, NamedTuple, Optional

import jax
import jax.numpy as jnp

F32 = jnp.float32
LEAST = 16  # Triton's smallest dot tile


class Tiles(NamedTuple):
    """The kernels' largest tiles and Triton's launch settings (the defaults: `tiles_for`)."""
    rows_k: int = 64  # the rows kernel's K step (forward and dx); its rows are the block's B
    rows_n: int = 128  # its output columns
    weights_k: int = 64  # the weight gradient's output tile, K x N; its loop runs over B-row blocks
    weights_n: int = 64
    warps: int = 4
    stages: int = 3

    def name(self) -> str:
        return (f"rows {self.rows_k}x{self.rows_n}, dw {self.weights_k}x{self.weights_n}, "
                f"{self.warps} warps, {self.stages} stages")


# The default tiles by the rows' dtype. An H200 timed five choices at 16,384 x 1,024 (8 experts of
# 2,048, top-2, bf16; BENCHMARKS.md, the GPU section's seventh visit): 64 x 256 row tiles with 64 x
# 128 weight-gradient tiles, 8 warps and 4 stages took the layer from 4.9 to 4.0 ms (1.71x the dense
# MLP's time, was 2.09x; at 65,536 x 2,048: 52.5 against 67.4 ms), each choice equal to the masked
# reference. In float32 the same tiles ask for 288 KiB of shared memory (an H100's or H200's limit
# is 227 KiB) and so do all four others: float32 keeps `Tiles()`, which fits (it ran there too).
HALF_TILES = Tiles(rows_k=64, rows_n=256, weights_k=64, weights_n=128, warps=8, stages=4)
TILES: Optional[Tiles] = None  # a benchmark's choice for every dtype (`using_tiles`), else `tiles_for`'s


def tiles_for(dtype) -> Tiles:
    """The tiles for rows of `dtype`: `TILES` where a sweep set it, else HALF_TILES for 2-byte
    dtypes (bf16, fp16) and `Tiles()` for float32."""
    if TILES is not None:
        return TILES
    return HALF_TILES if jnp.dtype(dtype).itemsize <= 2 else Tiles()


@contextmanager
def using_tiles(tiles: Optional[Tiles]) -> Iterator[None]:
    """`TILES` set to `tiles` while steps are traced inside (a benchmark's sweep; None: the defaults)."""
    global TILES
    old, TILES = TILES, tiles
    try:
        yield
    finally:
        TILES = old


def precision(dtype):
    """The kernels' dot precision for rows of `dtype`: float32 rows at full float32 precision where
    JAX's default matmul precision asks for it (`jax.default_matmul_precision("highest")` or
    "float32"), else TF32, which is also what XLA's own float32 GEMMs use on GPUs by default
    (Pallas's Triton dots take TF32 for float32 unless told otherwise; an H200 measured the kernels
    4.25e-4 from the masked reference in float32 under the default, 7e-3 in bfloat16 like ragged_dot).
    bfloat16 rows are unaffected."""
    if jnp.dtype(dtype) == F32 and jax.config.jax_default_matmul_precision in ("highest", "float32"):
        return jax.lax.Precision.HIGHEST
    return None


def tile(n: int, most: int) -> int:
    """The largest power of two <= most that divides n (1 when n is odd)."""
    t = 1
    while t * 2 <= most and n % (t * 2) == 0:
        t *= 2
    return t


def _pallas():
    """(pallas, the Triton backend's compiler parameters: their name before JAX 0.7 and after)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    return pl, getattr(plgpu, "CompilerParams", None) or getattr(plgpu, "TritonCompilerParams")


def _rows_kernel(owner_ref, x_ref, w_ref, o_ref, *, B: int, bk: int, bn: int, K: int, transposed: bool, prec):
    pl, _ = _pallas()
    i, j = pl.program_id(0), pl.program_id(1)
    e = owner_ref[i]
    out = (pl.ds(i * B, B), pl.ds(j * bn, bn))

    def step(k, acc):
        a = x_ref[pl.ds(i * B, B), pl.ds(k * bk, bk)]
        if transposed:  # (w [E, N, K] read as [K, N])
            b = w_ref[e, pl.ds(j * bn, bn), pl.ds(k * bk, bk)].T
        else:
            b = w_ref[e, pl.ds(k * bk, bk), pl.ds(j * bn, bn)]
        return acc + jnp.dot(a, b, precision=prec, preferred_element_type=F32)

    @pl.when(e >= 0)
    def _():
        o_ref[out] = jax.lax.fori_loop(0, K // bk, step, jnp.zeros((B, bn), F32)).astype(o_ref.dtype)

    @pl.when(e < 0)  # (a block past the last group's: zeros, no product)
    def _():
        o_ref[out] = jnp.zeros((B, bn), o_ref.dtype)


def _rows(x, w, owner, B: int, transposed: bool, interpret: bool):
    """Block i of x [R, K] times w[owner[i]] ([E, K, N]; transposed: w [E, N, K] read as its
    transpose) -> [R, N]."""
    pl, params = _pallas()
    R, K = x.shape
    N = w.shape[1] if transposed else w.shape[2]
    t = tiles_for(x.dtype)
    bk, bn = tile(K, t.rows_k), tile(N, t.rows_n)
    kernel = partial(_rows_kernel, B=B, bk=bk, bn=bn, K=K, transposed=transposed, prec=precision(x.dtype))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((R, N), x.dtype), grid=(R // B, N // bn),
                          interpret=interpret, compiler_params=params(num_warps=t.warps, num_stages=t.stages),
                          name="grouped_rows")(owner, x, w)


def _weights_kernel(first_ref, count_ref, x_ref, g_ref, o_ref, *, B: int, bk: int, bn: int, prec):
    pl, _ = _pallas()
    e, a, c = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    start = first_ref[e]

    def step(t, acc):
        rows = pl.ds((start + t) * B, B)
        return acc + jnp.dot(x_ref[rows, pl.ds(a * bk, bk)].T, g_ref[rows, pl.ds(c * bn, bn)],
                             precision=prec, preferred_element_type=F32)

    acc = jax.lax.fori_loop(0, count_ref[e], step, jnp.zeros((bk, bn), F32))
    o_ref[e, pl.ds(a * bk, bk), pl.ds(c * bn, bn)] = acc.astype(o_ref.dtype)


def _weights(x, g, first, count, B: int, dtype, interpret: bool):
    """dw [E, K, N]: for each expert, x^T g over its blocks (x [R, K], g [R, N])."""
    pl, params = _pallas()
    E, K, N = first.shape[0], x.shape[1], g.shape[1]
    t = tiles_for(x.dtype)
    bk, bn = tile(K, t.weights_k), tile(N, t.weights_n)
    kernel = partial(_weights_kernel, B=B, bk=bk, bn=bn, prec=precision(x.dtype))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((E, K, N), dtype), grid=(E, K // bk, N // bn),
                          interpret=interpret, compiler_params=params(num_warps=t.warps, num_stages=t.stages),
                          name="grouped_weights")(first, count, x, g)


@partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def grouped_matmul(x, w, owner, first, count, B: int, interpret: bool):
    """x [R, K] (blocks of B rows, block i of expert owner[i]; expert e's blocks count[e] from
    first[e]) times w [E, K, N] block by block -> [R, N] in x's dtype."""
    return _rows(x, w, owner, B, False, interpret)


def _forward(x, w, owner, first, count, B, interpret):
    return _rows(x, w, owner, B, False, interpret), (x, w, owner, first, count)


def _backward(B, interpret, res, g):
    x, w, owner, first, count = res
    dx = _rows(g.astype(x.dtype), w, owner, B, True, interpret)
    dw = _weights(x, g.astype(x.dtype), first, count, B, w.dtype, interpret)
    return dx, dw, None, None, None


grouped_matmul.defvjp(_forward, _backward)


def unfit_widths(m) -> List[str]:
    """The model's widths (m: the model config) that the kernels' tiles do not divide: d_model and
    the experts' width must be multiples of 16."""
    from spmdgpt.config import expert_hidden

    return [f"{name}={n}" for name, n in (("model.d_model", m.d_model), ("the expert width", expert_hidden(m)))
            if tile(n, LEAST) < LEAST]


def config_errors(m) -> List[str]:
    """model.moe.grouped=pallas (m: the model config): the widths its tiles must divide."""
    if m.moe.grouped.value != "pallas":
        return []
    bad = unfit_widths(m)
    return [f"model.moe.grouped=pallas needs widths that are multiples of {LEAST} (its kernel's tiles); "
            f"{', '.join(bad)} is not; use model.moe.grouped=blocks"] if bad else []
