"""spmdgpt/plan/roofline.py (and benchmarks/roofline.py's table of it): the kernels of a compiled step read from its HLO text (bytes, FLOPs, a
loop body's kernels once per trip), and on the H100 target (JAX's CUDA plugin, no GPU) the step's
GEMM FLOPs equal the 6N + attention formula exactly, unrolled, scanned and in microbatches."""

import functools
import re
import sys
from pathlib import Path

import pytest
from conftest import compile_only_or_skip

from spmdgpt.plan.roofline import type_bytes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import roofline  # noqa: E402

HLO = """HloModule m

%fused_slice (p0: f32[4,1024], p1: bf16[256]) -> f32[1024] {
  %p0 = f32[4,1024]{1,0} parameter(0)
  %s = f32[1,1024]{1,0} slice(%p0), slice={[1:2], [0:1024]}
  %b = f32[1024]{0} bitcast(%s)
  %p1 = bf16[256]{0} parameter(1)
  ROOT %r = f32[1024]{0} add(%b, %b)
}

%gemm_computation (p0: bf16[64,32], p1: bf16[32,16]) -> bf16[64,16] {
  %p0 = bf16[64,32]{1,0} parameter(0)
  %p1 = bf16[32,16]{1,0} parameter(1)
  ROOT %d = bf16[64,16]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%body (t: (s32[], bf16[64,32])) -> (s32[], bf16[64,32]) {
  %t = (s32[], bf16[64,32]{1,0}) parameter(0)
  %x = bf16[64,32]{1,0} get-tuple-element(%t), index=1
  %w = bf16[32,16]{1,0} constant({...})
  %g = bf16[64,16]{1,0} fusion(%x, %w), kind=kCustom, calls=%gemm_computation, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion"}}
  ROOT %o = (s32[], bf16[64,32]{1,0}) tuple(%i, %x)
}

ENTRY %main (a: f32[4,1024], b: bf16[256]) -> f32[1024] {
  %a = f32[4,1024]{1,0} parameter(0)
  %b = bf16[256]{0} parameter(1)
  %f = f32[1024]{0} fusion(%a, %b), kind=kLoop, calls=%fused_slice
  %w = (s32[], bf16[64,32]{1,0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"3"}}
  ROOT %c = f32[1024]{0} copy(%f)
}
"""


def test_kernels_are_read_from_hlo_text():
    ks = {k.name: k for k in roofline.kernels(HLO)}
    assert set(ks) == {"f", "g", "c"}
    # the loop fusion reads one sliced row of its f32[4,1024] parameter (4 KiB, not 16) and all of
    # the bf16[256] one, and writes f32[1024]
    assert (ks["f"].kind, ks["f"].read, ks["f"].written, ks["f"].runs) == ("fusion", 4096 + 512, 4096, 1)
    # the GEMM in the loop body: 2 x 64 x 16 x 32 FLOPs, bytes of its operands and result, 3 trips
    assert (ks["g"].kind, ks["g"].flops, ks["g"].runs) == ("gemm", 2 * 64 * 16 * 32, 3)
    assert (ks["g"].read, ks["g"].written) == (64 * 32 * 2 + 32 * 16 * 2, 64 * 16 * 2)
    totals = roofline.roofline(list(ks.values()), tflops=1e-6, bandwidth=1e9)  # (1 MFLOP/s, 1 GB/s)
    # the GEMM at the larger of 65,536 FLOPs / 1e6 FLOP/s (65.5 ms) and its 6 KiB / 1e9 B/s, x 3 trips
    assert totals["gemm"]["ms"] == pytest.approx(3 * 65.536)
    assert totals["fusion"]["ms"] == pytest.approx((4608 + 4096) / 1e9 * 1e3)
    assert totals["step"]["launches"] == 1 + 3 + 1 and totals["step"]["flops"] == 3 * 65536
    assert type_bytes("(bf16[2,3]{1,0}, f32[4]{0}, u8[0]{0})") == 12 + 16


FP8_HLO = """HloModule m

%gemm8 (p0: f8e4m3fn[64,32], p1: f8e5m2[32,16]) -> bf16[64,16] {
  %p0 = f8e4m3fn[64,32]{1,0} parameter(0)
  %p1 = f8e5m2[32,16]{1,0} parameter(1)
  ROOT %d = bf16[64,16]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main (a: f8e4m3fn[64,32], b: f8e5m2[32,16]) -> bf16[64,16] {
  %a = f8e4m3fn[64,32]{1,0} parameter(0)
  %b = f8e5m2[32,16]{1,0} parameter(1)
  ROOT %g = bf16[64,16]{1,0} fusion(%a, %b), kind=kCustom, calls=%gemm8
}
"""


def test_an_fp8_gemm_runs_at_the_fp8_rate():
    """A GEMM fusion of FP8 operands is kind gemm-fp8: 1-byte operands, its FLOPs at FP8_RATE (1.2)
    x the bf16 rate by default (what an H200's 1.1B step gave: BENCHMARKS, the GPU section's sixth
    visit), or at --fp8-tflops."""
    from spmdgpt.plan.roofline import FP8_RATE

    (k,) = roofline.kernels(FP8_HLO)
    assert (k.kind, k.flops, k.read, k.written) == ("gemm-fp8", 2 * 64 * 16 * 32, 64 * 32 + 32 * 16, 64 * 16 * 2)
    assert FP8_RATE == 1.2
    assert roofline.roofline([k], tflops=1e-6, bandwidth=1e9)["gemm-fp8"]["ms"] == pytest.approx(65.536 / 1.2)
    assert roofline.roofline([k], tflops=1e-6, bandwidth=1e9, fp8_tflops=4e-6)["step"]["ms"] == pytest.approx(65.536 / 4)


def test_grouped_kernels_run_at_their_measured_rates():
    """The MoE's grouped Pallas kernels (kind gemm-grouped) each at its GROUPED_RATE of the GEMM
    rate by default, what an H200 measured (BENCHMARKS, the GPU section's sixth and seventh visits:
    the row products at 0.64, the weight gradient at 0.54), or all at grouped_tflops."""
    from spmdgpt.plan.roofline import GROUPED_RATE, Kernel

    rows = Kernel("pallas_call", "gemm-grouped", read=1000, written=1000, flops=1e9, runs=2, op="grouped_rows")
    weights = Kernel("pallas_call.1", "gemm-grouped", read=1000, written=1000, flops=1e9, runs=1, op="grouped_weights")
    assert GROUPED_RATE == {"grouped_rows": 0.64, "grouped_weights": 0.54, "tokamax_ragged_dot": 0.64}
    got = roofline.roofline([rows, weights], tflops=1.0, bandwidth=1e12)["gemm-grouped"]
    assert got["ms"] == pytest.approx((2 * 1e9 / 0.64 + 1e9 / 0.54) / 1e12 * 1e3) and got["flops"] == 3e9
    assert roofline.roofline([rows], 1.0, 1e12, grouped_tflops=2.0)["step"]["ms"] == pytest.approx(2 * 1e9 / 2e12 * 1e3)


SCORES = ('"intermediate_tensor_shape": {"element_type": "BF16", "dimensions": ["16", "12", "1024", "1024"]}, '
          '"is_flash_attention": true, "mask_type": "CAUSAL"')
ATTENTION_HLO = f"""HloModule m

ENTRY %main (q: bf16[16,1024,12,64], k: bf16[16,1024,12,64], v: bf16[16,1024,12,64], do: bf16[16,1024,12,64]) -> bf16[16,12,1024,64] {{
  %q = bf16[16,1024,12,64]{{3,2,1,0}} parameter(0)
  %k = bf16[16,1024,12,64]{{3,2,1,0}} parameter(1)
  %v = bf16[16,1024,12,64]{{3,2,1,0}} parameter(2)
  %do = bf16[16,1024,12,64]{{3,2,1,0}} parameter(3)
  %fwd = (bf16[16,12,1024,64]{{3,1,2,0}}, f32[16,12,1024]{{2,1,0}}, u8[0]{{0}}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmax", backend_config={{"cudnn_fmha_backend_config": {{{SCORES}}}}}
  %o = bf16[16,12,1024,64]{{3,1,2,0}} get-tuple-element(%fwd), index=0
  %lse = f32[16,12,1024]{{2,1,0}} get-tuple-element(%fwd), index=1
  %bwd = (bf16[16,12,1024,64]{{3,1,2,0}}, bf16[16,12,1024,64]{{3,1,2,0}}, bf16[16,12,1024,64]{{3,1,2,0}}, u8[0]{{0}}) custom-call(%q, %k, %v, %lse, %do, %o), custom_call_target="__cudnn$fmhaSoftmaxBackward", backend_config={{"cudnn_fmha_backend_config": {{{SCORES}}}}}
  ROOT %dq = bf16[16,12,1024,64]{{3,1,2,0}} get-tuple-element(%bwd), index=0
}}
"""


def test_cudnn_attention_runs_at_its_measured_rates():
    """cuDNN's fused attention (kind attention): FLOPs from its score shape (causal: half), each pass
    at its ATTENTION_RATE of the GEMM rate (what an H100's profiles of GPT-2 124M measured: BENCHMARKS,
    the GPU section's third and fourth visits), or at --attention-tflops."""
    from spmdgpt.plan.roofline import ATTENTION_RATE

    fwd, bwd = roofline.kernels(ATTENTION_HLO)
    forward = 4 * 16 * 12 * 1024 * 1024 * 64 * 0.5
    assert (fwd.kind, fwd.op, fwd.flops) == ("attention", "attention_forward", forward)
    assert (bwd.kind, bwd.op, bwd.flops) == ("attention", "attention_backward", forward * 10 / 4)
    assert (ATTENTION_RATE["attention_forward"], ATTENTION_RATE["attention_backward"]) == (0.375, 0.345)
    got = roofline.roofline([fwd, bwd], tflops=800, bandwidth=3e12)["attention"]
    # GPT-2 124M has 12 layers: 12 x each of these measured 1.03 ms and 2.80 ms on an H100
    assert 12 * fwd.seconds * 1e3 == pytest.approx(1.03, rel=0.01)
    assert 12 * bwd.seconds * 1e3 == pytest.approx(2.80, rel=0.01)
    assert got["ms"] == pytest.approx(forward / 300e12 * 1e3 + forward * 2.5 / 276e12 * 1e3)
    assert roofline.roofline([fwd, bwd], 800, 3e12, attention_tflops=700)["step"]["ms"] == \
        pytest.approx(forward * 3.5 / 700e12 * 1e3)


def _tokamax_call(name: str, result: str, vjp: bool) -> str:
    """A tokamax Mosaic GPU attention custom call as the H100 compiler writes it (its metadata payload
    trimmed to what the roofline reads)."""
    kind = "pallas_mosaic_gpu_vjp.PallasMosaicGpuFlashAttentionVjp" if vjp else \
        "pallas_mosaic_gpu.PallasMosaicGpuFlashAttention"
    payload = (rf'tokamax:{{\"op\":{{\"__type\":\"tokamax._src.ops.attention.{kind}\"}},\"arguments\":{{'
               r'\"k\":\"bf16[16,1024,4,64]\",\"mask\":{\"bool_mask\":null,\"causal_mask\":{\"offset\":0}},'
               r'\"q\":\"bf16[16,1024,12,64]\"}}')
    return (f'  %{name} = {result} custom-call(%q, %k, %v), custom_call_target="mosaic_gpu_v2", '
            f'metadata={{op_name="jit(step)/mpmd_map" metadata_payload="{payload}"}}')


TOKAMAX_HLO = "\n".join([
    "HloModule m", "", "ENTRY %main (q: bf16[16,1024,12,64], k: bf16[16,1024,4,64], v: bf16[16,1024,4,64]) "
    "-> bf16[16,1024,12,64] {",
    "  %q = bf16[16,1024,12,64]{3,2,1,0} parameter(0)", "  %k = bf16[16,1024,4,64]{3,2,1,0} parameter(1)",
    "  %v = bf16[16,1024,4,64]{3,2,1,0} parameter(2)",
    _tokamax_call("fwd", "(bf16[16,1024,12,64]{3,2,1,0}, f32[16,12,1024]{2,1,0})", False),
    _tokamax_call("dkv", "(bf16[16,1024,4,64]{3,2,1,0}, bf16[16,1024,4,64]{3,2,1,0})", True),
    _tokamax_call("dq", "bf16[16,1024,12,64]{3,2,1,0}", True),
    "  ROOT %r = bf16[16,1024,12,64]{3,2,1,0} copy(%dq)", "}", ""])


def test_tokamax_attention_kernels_are_read_from_their_payload():
    """tokamax's Mosaic GPU flash attention (model.attention=tokamax): kind attention, FLOPs from the
    q and k of the payload (scores b n t s x head size x 2 per matmul, halved under its causal mask):
    forward 2 matmuls, the backward's dK/dV kernel (two results) 4 and its dQ kernel 3; each priced
    at cuDNN's measured rate for its pass until a GPU times them."""
    from spmdgpt.plan.roofline import ATTENTION_RATE

    ks = {k.name: k for k in roofline.kernels(TOKAMAX_HLO)}
    unit = 2 * 16 * 12 * 1024 * 1024 * 64 * 0.5  # one causal matmul of 12 query heads (GQA: k has 4)
    assert {n: (k.kind, k.op, k.flops) for n, k in ks.items() if n != "r"} == {
        "fwd": ("attention", "tokamax_forward", 2 * unit), "dkv": ("attention", "tokamax_dkv", 4 * unit),
        "dq": ("attention", "tokamax_dq", 3 * unit)}
    assert ATTENTION_RATE["tokamax_forward"] == ATTENTION_RATE["attention_forward"]
    assert ATTENTION_RATE["tokamax_dkv"] == ATTENTION_RATE["tokamax_dq"] == ATTENTION_RATE["attention_backward"]
    got = roofline.roofline(list(ks.values()), tflops=800, bandwidth=3e12)["attention"]
    assert got["ms"] == pytest.approx((2 * unit / 0.375 + 7 * unit / 0.345) / 800e12 * 1e3)


def test_tokamax_attention_compiles_for_an_h100():
    """model.attention=tokamax: the step compiled for an H100 on this CPU launches tokamax's Mosaic GPU
    kernels (forward, dK/dV, dQ: one each per layer, their FLOPs the formula's), no cuDNN's, and
    no other attention: the kernels were chosen for the target's GPU, not this CPU."""
    import importlib.util

    from conftest import missing

    if importlib.util.find_spec("tokamax") is None:
        missing("SPMDGPT_REQUIRE_KERNELS", "needs tokamax: pip install -e '.[gpu-kernels]'")
    _compiler()
    cfg, text = roofline.compile_step([*SMALL, "model.attention=tokamax"])
    ks = [k for k in roofline.kernels(text) if k.kind == "attention"]
    layers = cfg.model.num_layers
    assert sorted(k.op for k in ks) == sorted(["tokamax_dkv", "tokamax_dq", "tokamax_forward"] * layers)
    unit = 2 * cfg.data.batch_size * cfg.model.num_heads * cfg.data.seq_len ** 2 * 64 * 0.5
    assert sum(k.flops * k.runs for k in ks) == pytest.approx(9 * unit * layers)
    assert "__cudnn$fmha" not in text and "mosaic_gpu_v2" in text


def _compiler():

    compile_only_or_skip("h100")


@functools.cache
def _compiled(*overrides: str) -> tuple:
    """roofline.compile_step of these overrides, compiled once per session (several tests read the
    same step's HLO: the GEMM FLOPs and the logsumexp's combiner)."""
    return roofline.compile_step(list(overrides))


SMALL = ["+experiment=staircase", "mesh.data=1", "model.attention=xla", "model.attention_block=0",
         "model.vocab_size=128", "model.d_model=128", "model.num_heads=2", "data.seq_len=128",
         "model.max_seq_len=128", "data.batch_size=8", "model.compute_dtype=bfloat16"]


@pytest.mark.parametrize("extra", [[], ["model.scan_unroll=false"], ["model.scan_unroll=false", "train.microbatches=2"]],
                         ids=["unrolled", "scanned", "scanned-microbatches"])  # (the last: a loop in a loop)
def test_the_h100_steps_gemm_flops_are_the_formulas(extra):
    from spmdgpt.plan.flops import flops_per_token

    _compiler()
    cfg, text = _compiled(*SMALL, *extra)
    ks = roofline.kernels(text)
    totals = roofline.roofline(ks, tflops=800, bandwidth=3e12)
    tokens = cfg.data.batch_size * cfg.data.seq_len
    # every matmul of the step, the whole (unmasked) attention's included: 6 N + 12 L s h d per token
    assert totals["gemm"]["flops"] == pytest.approx(flops_per_token(cfg.model, cfg.data.seq_len) * tokens, rel=1e-9)
    assert totals["fusion"]["flops"] == 0 and totals["fusion"]["bytes"] > 0
    # the step reads the parameters and the Adam moments and writes them back, at least once each
    import jax

    from spmdgpt.mesh.sharding import Rules, make_mesh, shard_bytes
    from spmdgpt.training.state import abstract_state
    from spmdgpt.training.step import optimizer_of

    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        state = shard_bytes(abstract_state(cfg, Rules(mesh, cfg.sharding, cfg.model), optimizer_of(cfg)))
    assert totals["step"]["bytes"] > 2 * state > 0
    assert totals["step"]["ms"] == pytest.approx(sum(k.seconds for k in ks) * 1e3)


def test_the_h100_logsumexp_takes_one_exponential_per_element():
    """model.loss's one-pass logsumexp (GPUs) as the H100 compiler builds it: the reduction's
    combiner (a variadic reduce of (max, sum) pairs) computes one exponential, not two."""
    from spmdgpt.plan.hlo import computations

    _compiler()
    _, text = _compiled(*SMALL)  # (the unrolled step test_the_h100_steps_gemm_flops_are_the_formulas reads)
    comps = computations(text)
    combiners = [lines for lines in comps.values()
                 if sum(" parameter(" in ln for ln in lines) == 4 and any(" exponential(" in ln for ln in lines)]
    assert combiners, "no (max, sum) combiner with an exponential in the step"
    assert [sum(" exponential(" in ln for ln in lines) for lines in combiners] == [1] * len(combiners)


def test_attention_kernels_reads_custom_calls_and_checks_on_cpu(capsys):
    """benchmarks/attention_kernels.py: the custom calls' operands and results read from HLO text,
    grouped; the FLOPs convention (causal forward 2 x 2 b n t^2 h / 2, backward 2.5x); and on this
    CPU the xla kernel checked against float32 and timed, a kernel that cannot run here (tokamax's,
    whether or not tokamax is installed) reported in one line, exit 0."""
    import attention_kernels as ak

    calls = ak._custom_calls(ATTENTION_HLO.replace("custom-call(%q, %k, %v)", "custom-call(%q, %k, %v), "
                             "operand_layout_constraints={bf16[16,1024,12,64]{3,2,1,0}, bf16[16,1024,12,64]{3,2,1,0}, "
                             "bf16[16,1024,12,64]{3,2,1,0}}"))
    assert calls[0] == ("__cudnn$fmhaSoftmax: (3 x bf16[16,1024,12,64]{3,2,1,0}) -> (bf16[16,12,1024,64]{3,1,2,0}, "
                        "f32[16,12,1024]{2,1,0}, u8[0]{0})")
    assert calls[1].startswith("__cudnn$fmhaSoftmaxBackward: (-) -> (3 x bf16[16,12,1024,64]{3,1,2,0}, u8[0]{0})")
    assert ak._call_names(ATTENTION_HLO) == {"fwd", "bwd"}
    assert ak.causal_flops(16, 1024, 12, 64, False) == 4 * 16 * 12 * 1024 * 1024 * 64 / 2
    assert ak.causal_flops(16, 1024, 12, 64, True) == 3.5 * ak.causal_flops(16, 1024, 12, 64, False)
    assert ak.main(["--only", "xla,tokamax-mosaic", "--batch", "1", "--seq", "64", "--heads", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("causal attention, bfloat16, [batch, seq, heads, head_dim] = [1, 64, 2, 64]; cpu")
    assert [line.split()[:2] for line in lines[1:3]] == [["xla", "forward"], ["xla", "forward+backward"]]
    assert all("PASS against xla-bf16's" in line for line in lines[1:3])
    # (skipped without tokamax, the gpu-kernels extra; with it, its Mosaic GPU kernels refuse this CPU)
    assert re.match(r"tokamax-mosaic  -                 (skipped: tokamax is not installed|does not run: )", lines[3])
    assert len(lines) == 4
