"""FP8 matmuls (model.matmul_dtype=fp8, spmdgpt.model.fp8): the FP8 product against float64, its
gradients against float32's, outliers, the model's loss and gradients on one device and sharded,
delayed scaling (its product and history, a run's histories, microbatches, layouts, resume), the
H100 step's dots (compile-only), and the refusals."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compile_only_or_skip, read_jsonl

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import init_params
from spmdgpt.model.fp8 import E4M3, E5M2, delayed_einsum, fp8_einsum, quantize
from spmdgpt.model.loss import loss_fn


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


def test_product_and_gradients_within_fp8_rounding():
    """x [256, 512] @ w [512, 384] of unit normals: the FP8 product within e4m3's rounding of the
    float64 one (3 mantissa bits: ~2.6% RMS per operand, 3.75% norm-wise for the product of two,
    measured over seeds; bounded at 4.5%), and three times farther than bfloat16's; the gradients
    (the cotangent in e5m2, 2 mantissa bits: 5.9% measured) within 7%; an all-zero input gives
    zeros."""
    rng = np.random.default_rng(0)
    x, w, g = (rng.normal(0, 1, s).astype(np.float32) for s in ((256, 512), (512, 384), (256, 384)))
    f = lambda a, b: fp8_einsum("td,df->tf", None, jnp.float32, a, b)  # noqa: E731
    y, vjp = jax.vjp(f, jnp.asarray(x), jnp.asarray(w))
    dx, dw = vjp(jnp.asarray(g))
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    err = _rel(y, x64 @ w64)
    assert 0.03 < err < 0.045  # (not exact: it is FP8)
    assert _rel(jnp.asarray(x, jnp.bfloat16).astype(jnp.float32) @ jnp.asarray(w, jnp.bfloat16).astype(jnp.float32),
                x64 @ w64) < err / 3
    assert _rel(dx, g64 @ w64.T) < 0.07 and _rel(dw, x64.T @ g64) < 0.07
    zero = f(jnp.zeros((4, 512)), jnp.asarray(w))
    assert not np.any(np.asarray(zero))


def test_outliers_scale_without_overflow():
    """One input element 10,000 times the others: per-tensor scaling keeps every value finite (e4m3
    has no infinity: an overflowing cast would be NaN) and the outlier's row exact to e4m3's
    rounding; the quantized values stay within +-448."""
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (64, 128)).astype(np.float32)
    x[3, 7] = 1e4
    w = rng.normal(0, 1, (128, 32)).astype(np.float32)
    q, s = quantize(jnp.asarray(x), E4M3, 448.0)
    assert float(s) == pytest.approx(1e4 / 448) and float(jnp.max(jnp.abs(q.astype(jnp.float32)))) == 448.0
    y = np.asarray(fp8_einsum("td,df->tf", None, jnp.float32, jnp.asarray(x), jnp.asarray(w)))
    assert np.all(np.isfinite(y))
    assert _rel(y[3], x[3].astype(np.float64) @ w) < 0.05


def _loss_and_grads(overrides, n):
    cfg = load_config(["+experiment=staircase", "model.compute_dtype=bfloat16", "model.init_std=0.1", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:n])
    toks = np.random.default_rng(0).integers(0, 10, (8, 65)).astype(np.int32)
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = init_params(cfg.model, jax.random.key(0), rules)
        return jax.device_get(jax.jit(jax.value_and_grad(
            lambda p: loss_fn(cfg.model, rules, p, toks[:, :-1], toks[:, 1:])))(params))


def _cosine(a, b):
    a, b = np.ravel(a), np.ravel(np.asarray(b))
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


def _directions_within(grads, want, cosine: float):
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(want), strict=True):
        assert _cosine(a, b) > cosine


def _sharded_equals_one_device(overrides):
    """fsdp_tp 2 x 2 against one device: the loss to 1e-6, every gradient to 1% of its largest
    value (the backward's float32 accumulation order flips a few FP8 roundings)."""
    (one, one_grads), (sharded, sharded_grads) = (
        _loss_and_grads(overrides + ["mesh.data=1"], 1),
        _loss_and_grads(overrides + ["sharding=fsdp_tp", "mesh.data=2", "mesh.model=2"], 4))
    assert abs(sharded - one) <= 1e-6 * one
    for a, b in zip(jax.tree.leaves(sharded_grads), jax.tree.leaves(one_grads), strict=True):
        assert np.max(np.abs(a - b)) <= 1e-2 * np.max(np.abs(b))


def test_model_loss_and_gradients_close_to_bfloat16_and_equal_sharded():
    """The staircase model in bfloat16 with FP8 projections: loss within 0.5% of the bfloat16
    model's, every gradient's direction within cosine 0.98 of its (measured: 0.987 to 0.996); with
    the output head in FP8 too (model.fp8_head), within 1% and cosine 0.97. With
    float32 compute, fsdp_tp 2 x 2 (weights split along embed and by head, the scales' maxima reduced
    across them) gives one device's loss exactly and its gradients to 1% of their largest value (the
    backward's float32 accumulation order flips a few FP8 roundings; a per-shard scale would move
    the loss itself)."""
    (loss, grads), (want, want_grads), (head, head_grads) = (
        _loss_and_grads(["mesh.data=1", f"model.matmul_dtype={m}", *extra], 1)
        for m, extra in (("fp8", []), ("compute", []), ("fp8", ["model.fp8_head=true"])))
    assert abs(loss - want) < 0.005 * want and loss != want
    _directions_within(grads, want_grads, 0.98)
    assert abs(head - want) < 0.01 * want and head != loss  # (the output head in FP8 as well)
    _directions_within(head_grads, want_grads, 0.97)
    _sharded_equals_one_device(["model.matmul_dtype=fp8", "model.compute_dtype=float32"])


def test_delayed_product_uses_the_history_and_returns_it_updated():
    """delayed_einsum with a history whose largest amaxes are this step's own gives
    fp8_einsum's (current scaling's) product and gradients bitwise; its "gradient" for the
    history is the history shifted by one with this step's three amaxes (x, w, g) in front. A
    fresh (zero) history scales by 1: the operands cast as they are; a non-finite cotangent is
    recorded as 0."""
    rng = np.random.default_rng(2)
    x, w, g = (jnp.asarray(rng.normal(0, s, shape).astype(np.float32))
               for s, shape in ((3.0, (32, 64)), (0.05, (64, 16)), (1e-3, (32, 16))))
    seen = [float(jnp.max(jnp.abs(a))) for a in (x, w, g)]
    history = jnp.asarray([[m / 2, m, 0.0, m / 4] for m in seen], jnp.float32)  # the largest: this step's
    y, vjp = jax.vjp(lambda a, b, h: delayed_einsum("td,df->tf", None, jnp.float32, a, b, h), x, w, history)
    dx, dw, new = vjp(g)
    y0, vjp0 = jax.vjp(lambda a, b: fp8_einsum("td,df->tf", None, jnp.float32, a, b), x, w)
    for a, b in zip((y, dx, dw), (y0, *vjp0(g)), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(new, np.asarray([[m, m / 2, m, 0.0] for m in seen], np.float32))
    fresh = delayed_einsum("td,df->tf", None, jnp.float32, x, w, jnp.zeros((3, 4)))
    unscaled = jnp.clip(x, -448, 448).astype(E4M3).astype(jnp.float32) @ w.astype(E4M3).astype(jnp.float32)
    np.testing.assert_allclose(fresh, unscaled, rtol=1e-6, atol=1e-6)
    assert not np.array_equal(fresh, y)  # (w's 0.05 scale loses bits unscaled: the history matters)
    bad = vjp(g.at[0, 0].set(jnp.inf))[2]
    assert float(bad[2, 0]) == 0.0 and float(bad[0, 0]) == seen[0]
    assert E5M2 == jnp.float8_e5m2


DELAYED = ["model.matmul_dtype=fp8", "model.fp8_scaling=delayed", "model.fp8_history=3",
           "model.compute_dtype=bfloat16", "model.init_std=0.1"]


def _histories_after(overrides, n, steps=2):
    """(each step's (metrics, {name: history}), the weights before the first step) of staircase
    runs of `steps` steps on n devices."""
    from spmdgpt.model.info import by_name
    from spmdgpt.training.step import training_parts

    cfg = load_config(["+experiment=staircase", *DELAYED, *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:n])
    with jax.set_mesh(mesh):
        state, step, batcher, _ = training_parts(cfg, Rules(mesh, cfg.sharding, cfg.model))
        before = jax.device_get(by_name(state.params))
        out = []
        for i in range(steps):
            state, metrics = step(state, *batcher.train_batch(i))
            out.append((jax.device_get(metrics), {k: np.asarray(v) for k, v in by_name(state.params).items()
                                                  if k.endswith("fp8_amax")}))
    return out, before


def test_delayed_scaling_records_each_steps_amaxes_and_equals_across_layouts():
    """A staircase run with delayed scaling: each unit has an `fp8_amax` history per layer; after
    a step its newest column holds that step's amaxes (the weight's row: the largest |weight| in
    bfloat16 before the step, exactly) and after the next the older column is the previous newest.
    Two microbatches record the same x and w amaxes and the larger of the parts' gradient amaxes
    (each part's loss is scaled by 2: twice the whole batch's, to 6%: the fresh histories' unit
    scales round 2g and g differently); fsdp_tp 2 x 2 records one device's (the scales' maxima
    reduced across devices)."""
    (one, two), before = _histories_after(["mesh.data=1"], 1)
    assert set(two[1]) == {"blocks.attn.fp8_amax", "blocks.mlp.fp8_amax"}
    assert two[1]["blocks.mlp.fp8_amax"].shape[1:] == (2, 3, 3)  # [layers, (up, down), (x, w, g), history]
    w_up = np.abs(np.asarray(jnp.asarray(before["blocks.mlp.w_up"], jnp.bfloat16), np.float32))
    np.testing.assert_array_equal(one[1]["blocks.mlp.fp8_amax"][:, 0, 1, 0], w_up.max(axis=(1, 2)))
    for name, h in two[1].items():
        np.testing.assert_array_equal(h[..., 1], one[1][name][..., 0])
        assert np.all(h[..., :2] > 0) and np.all(h[..., 2] == 0)
    assert np.isfinite(float(two[0]["loss"])) and float(two[0]["loss"]) < float(one[0]["loss"])
    (micro,), _ = _histories_after(["mesh.data=1", "train.microbatches=2"], 1, steps=1)
    (shard,), _ = _histories_after(["mesh.data=2", "mesh.model=2", "sharding=fsdp_tp",
                                      "model.compute_dtype=float32"], 4, steps=1)
    (ref32,), _ = _histories_after(["mesh.data=1", "model.compute_dtype=float32"], 1, steps=1)
    for name, h in one[1].items():
        np.testing.assert_array_equal(micro[1][name][..., 1, 0], h[..., 1, 0])  # (w: the same weights' max)
        # (x: the activations' max, from two programs compiled apart: equal to bfloat16 rounding)
        np.testing.assert_allclose(micro[1][name][..., 0, 0], h[..., 0, 0], rtol=1e-2)
        np.testing.assert_allclose(micro[1][name][..., 2, 0], 2 * h[..., 2, 0], rtol=0.1)  # (not 4x: a sum's)
        np.testing.assert_allclose(shard[1][name], ref32[1][name], rtol=1e-5)


def test_delayed_scaling_resumes_bitwise_exports_and_inits_from_a_plain_run(tmp_path, capsys):
    """Delayed scaling's histories are checkpointed with the parameters: 4 steps, then a resumed
    run to 8, give the 8-step run's losses and histories bitwise. The export leaves them out (the
    same tensors as a plain run's); a delayed run started from a plain run's checkpoint
    (checkpoint.init_from) takes its weights and starts its histories at zero."""
    from spmdgpt import train

    common = ["+experiment=staircase", *DELAYED, "train.log_every=1", "train.progress=false", "train.eval_every=0",
              "checkpoint.every=4", "optimizer.schedule=constant", "optimizer.warmup_steps=2"]
    straight = train(load_config([*common, f"run.dir={tmp_path / 'a'}", "train.steps=8"]), argv=["pytest"])
    header = next(ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("run "))  # (the CPU emulates FP8)
    assert header.endswith("MFLOP/token | FP8 matmuls (emulated on the CPU: slower than bf16, for checking numerics)")
    train(load_config([*common, f"run.dir={tmp_path / 'b'}", "train.steps=4"]), argv=["pytest"])
    resumed = train(load_config([*common, f"run.dir={tmp_path / 'b'}", "train.steps=8"]), argv=["pytest"])
    assert resumed.resumed_from == 4
    rows = [[r["loss"] for r in read_jsonl(tmp_path / d / "metrics.jsonl") if "loss" in r] for d in "ab"]
    assert len(rows[0]) == 8 and rows[1] == rows[0]
    for a, b in zip(jax.tree.leaves(straight.state.params), jax.tree.leaves(resumed.state.params), strict=True):
        np.testing.assert_array_equal(a, b)
    assert float(np.max(resumed.state.params.blocks.attn.fp8_amax[..., -1])) > 0  # (the history filled up)
    from safetensors.numpy import load_file

    from spmdgpt.hf import expected_shapes

    assert main(["export", f"run.dir={tmp_path / 'b'}", f"out={tmp_path / 'hf'}"]) == 0
    plain = [c for c in common if "fp8" not in c and "matmul_dtype" not in c]
    assert set(load_file(tmp_path / "hf" / "model.safetensors")) == set(expected_shapes(load_config(plain).model))
    train(load_config([*plain, f"run.dir={tmp_path / 'c'}", "train.steps=1"]), argv=["pytest"])
    r = train(load_config([*common, f"run.dir={tmp_path / 'd'}", "train.steps=1", "optimizer.lr=1e-12",
                           f"checkpoint.init_from={tmp_path / 'c'}"]), argv=["pytest"])
    from spmdgpt.training.state import load_params

    c = load_config(plain)
    mesh = make_mesh(c.mesh, jax.devices())
    with jax.set_mesh(mesh):
        _, c_params = load_params(tmp_path / "c", c.model, Rules(mesh, c.sharding, c.model))
    np.testing.assert_array_equal(r.state.params.blocks.mlp.w_up, c_params.blocks.mlp.w_up)  # (lr 1e-12: unchanged)
    h = np.asarray(r.state.params.blocks.mlp.fp8_amax)
    assert np.all(h[..., 0] > 0) and np.all(h[..., 1:] == 0)


# (delayed scaling with the head in `make test`; current scaling in `make test-all`: the same projections, their
# scales computed in the step)
@pytest.mark.parametrize("scaling,head", [pytest.param("current", False, marks=pytest.mark.slow), ("delayed", True)])
def test_h100_step_runs_every_projection_as_an_fp8_gemm(scaling, head, capsys):
    """`spmdgpt plan topology=h100` of the staircase step (bfloat16, one scanned layer body),
    compile-only by XLA's GPU compiler: each layer's four projections (q/k/v, output, MLP up and
    down) are dots of two float8_e4m3fn operands, their eight backward products dots of an e5m2
    cotangent and an e4m3 operand; the other dots (attention's six, the output head's three) keep
    bfloat16 or float32 operands: nothing meant for FP8 fell back; with either scaling; with
    model.fp8_head the output head's three as well. The plan lists them."""
    compile_only_or_skip("h100")
    args = ["plan", "+experiment=staircase", "model.attention=xla", "model.attention_block=0", "model.vocab_size=128",
            "model.d_model=128", "model.num_heads=2", "data.seq_len=128", "model.max_seq_len=128", "data.batch_size=8",
            "model.compute_dtype=bfloat16", "model.scan_unroll=false", "model.matmul_dtype=fp8", "topology=h100",
            f"model.fp8_scaling={scaling}", f"model.fp8_head={str(head).lower()}"]
    assert main(args + ["format=json"]) == 0
    out, err = capsys.readouterr()  # (format=json: the JSON alone on stdout, the report on stderr)
    got = json.loads(out)
    dots = got["dots"]
    fwd, bwd = (5, 10) if head else (4, 8)  # (the head: one more forward product, two more backward)
    assert dots["f8e4m3fn x f8e4m3fn"] == fwd and dots["f8e4m3fn x f8e5m2"] == bwd
    rest = {k: n for k, n in dots.items() if "f8" not in k}
    assert sum(rest.values()) == 21 - fwd - bwd and set(rest) <= {"bf16 x bf16", "f32 x f32", "bf16 x f32"}
    assert (f"FP8 GEMMs        {fwd + bwd} of 21 dots ({fwd} f8e4m3fn x f8e4m3fn, {bwd} f8e4m3fn x f8e5m2)"
            in err)
    # XLA's GPU compiler counts nothing: FLOPs and bytes from the kernels, the FP8 GEMMs' exactly
    # (2 layers x 1,024 tokens x the projections' 2 x 12 d^2, the head's 2 d V, each x 3 with the
    # backward), and an estimate that runs them at twice the bf16 rate (no 100% MFU)
    d, tokens = 128, 8 * 128
    assert got["counted_by"] == "the HLO's kernels" and got["flops"] > got["fp8_flops"] > 0
    assert got["fp8_flops"] == 3 * tokens * (2 * 24 * d * d + (2 * d * 128 if head else 0))
    assert got["bytes_accessed"] > 0 and 0 < got["mfu"] < 1 and "(FP8 GEMMs' " in err


@pytest.mark.parametrize("overrides,expected", [
    (["model.collective_matmul=bi", "sharding=fsdp_tp", "mesh.model=2"],
     "model.matmul_dtype=fp8 with model.collective_matmul=bi: not supported yet"),
    (["model.mla.kv_rank=16"], "model.matmul_dtype=fp8 with model.mla.kv_rank > 0"),
    (["model.fp8_scaling=delayed", "model.fp8_history=0"], "model.fp8_history=0 must be >= 1"),
    (["model.fp8_scaling=delayed", "mesh.stage=2", "mesh.data=1"], "model.fp8_scaling=delayed with mesh.stage=2"),
    (["model.fp8_scaling=delayed", "model.matmul_dtype=compute"], "model.fp8_scaling=delayed is for FP8 matmuls"),
    (["model.fp8_head=true", "model.matmul_dtype=compute"], "model.fp8_head=true is for FP8 matmuls"),
])
def test_refusals_are_one_line(overrides, expected, capsys):
    assert main(["train", "+experiment=staircase", "model.matmul_dtype=fp8", *overrides]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") <= 2, err


def test_blocked_loss_with_an_fp8_head_is_close_and_equal_sharded():
    """model.fp8_head under the blocked cross-entropy (model.loss_block: the head's forward and both
    backward products per chunk of positions, written by hand): loss within 1% of the bfloat16
    blocked loss and every gradient within cosine 0.97; with float32 compute, fsdp_tp 2 x 2 (the
    head's weight split along embed and vocab, its gradient reduced once) gives one device's loss
    to 1e-6 and gradients to 1% of their largest value."""
    blocked = ["model.loss_block=16", "model.vocab_size=32"]
    head = ["model.matmul_dtype=fp8", "model.fp8_head=true"]
    (loss, grads), (want, want_grads) = (_loss_and_grads(["mesh.data=1", *blocked, *extra], 1)
                                         for extra in (head, []))
    assert abs(loss - want) < 0.01 * want and loss != want
    _directions_within(grads, want_grads, 0.97)
    _sharded_equals_one_device([*blocked, *head, "model.compute_dtype=float32"])
