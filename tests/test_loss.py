"""The training loss: blocked cross-entropy (model.loss_block) against the whole one."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spmdgpt.config import ConfigError, load_config, validate
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import abstract_params, init_params, loss_fn


def _loss_and_grads(model_cfg, rules, params, x, y):
    return jax.jit(jax.value_and_grad(lambda p: loss_fn(model_cfg, rules, p, x, y)))(params)


@pytest.mark.parametrize("sharding,mesh,tie,dtype", [
    ("fsdp_tp", ["mesh.data=4", "mesh.model=2"], True, "float32"),
    ("dp", ["mesh.data=1"], False, "bfloat16"),
])
def test_blocked_cross_entropy_equals_the_whole_loss(sharding, mesh, tie, dtype):
    """Loss and every gradient of the blocked loss equal the whole one (float32: 1e-5 relative;
    bfloat16 compute: within its rounding), with the same gradient shardings, tied or not, on one
    device and on 8 (the unembedding gradient is reduced over the batch's devices)."""
    cfg = load_config(["+experiment=staircase", f"sharding={sharding}", *mesh, f"model.tie_embeddings={tie}",
                       "model.vocab_size=64", "model.num_layers=1", "data.seq_len=32", "data.batch_size=8",
                       f"model.compute_dtype={dtype}"])
    devices = jax.devices()[: 1 if sharding == "dp" else 8]
    m = make_mesh(cfg.mesh, devices)
    rules = Rules(m, cfg.sharding)
    blocked = dataclasses.replace(cfg.model, loss_block=8)  # 4 chunks of 8 x 8 tokens
    rng = np.random.default_rng(0)
    with jax.set_mesh(m):
        params = init_params(cfg.model, jax.random.key(0), rules)
        x, y = (jax.device_put(rng.integers(0, 64, (8, 32)), rules.batch_sharding()) for _ in range(2))
        l0, g0 = _loss_and_grads(cfg.model, rules, params, x, y)
        l1, g1 = _loss_and_grads(blocked, rules, params, x, y)
        eval_only = jax.jit(lambda p: loss_fn(blocked, rules, p, x, y))(params)  # the primal path
    tol = 1e-5 if dtype == "float32" else 2e-2
    assert float(l1) == pytest.approx(float(l0), rel=tol)
    assert float(eval_only) == pytest.approx(float(l1), rel=1e-6 if dtype == "float32" else 1e-4)
    for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1), strict=True):
        assert b.dtype == a.dtype == jnp.float32
        assert jax.typeof(b).sharding.spec == jax.typeof(a).sharding.spec
        err = float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(a)))
        assert err < tol, err


def test_blocked_cross_entropy_shrinks_the_loss_memory():
    """memory_analysis: the temporary bytes the loss adds to a training step (the step's temp
    minus the same step with a 64-token vocabulary) shrink >= 4x with 16 chunks."""
    def temp_bytes(vocab, block):
        cfg = load_config(["model.num_layers=1", "model.d_model=64", "model.num_heads=2", f"model.vocab_size={vocab}",
                           f"model.loss_block={block}", "model.max_seq_len=256", "model.attention_block=0"])
        m = make_mesh(cfg.mesh, jax.devices()[:1])
        rules = Rules(m, cfg.sharding)
        with jax.set_mesh(m):
            params = abstract_params(cfg.model, rules)
            tokens = jax.ShapeDtypeStruct((8, 256), jnp.int32, sharding=rules.batch_sharding())
            step = jax.jit(jax.grad(lambda p, x, y: loss_fn(cfg.model, rules, p, x, y)))
            return step.lower(params, tokens, tokens).compile().memory_analysis().temp_size_in_bytes

    base = temp_bytes(64, 0)
    whole, blocked = temp_bytes(8192, 0) - base, temp_bytes(8192, 16) - base
    assert whole > 0.9 * 2048 * 8192 * 4  # about the float32 logits of the 2,048 tokens
    assert whole / blocked >= 4, (whole, blocked)


def test_loss_block_must_divide_the_sequence():
    cfg = load_config(["+experiment=staircase", "model.loss_block=24"])
    errs = validate(cfg, 1)
    assert errs == [f"model.loss_block=24 does not divide data.seq_len={cfg.data.seq_len}; "
                    "choose a divisor of the sequence length (or 0 = off)"]
    with pytest.raises(ConfigError, match="model.loss_block=-1 must be >= 0"):
        raise ConfigError(validate(load_config(["+experiment=staircase", "model.loss_block=-1"]), 1))


def test_target_rows_gradient_adds_in_float32():
    """The target rows of the loss are gathered from the float32 table: with bfloat16 compute,
    their gradient (a scatter-add over 2,048 rows of the same token) is summed in float32, equal
    to the exact sum of the bfloat16 cotangents to 1e-6 (a bfloat16 scatter-add was off by 5% here,
    and on GPUs slow: benchmarks/BENCHMARKS.md, GPU)."""
    from spmdgpt.model.head import unembedding_rows

    cfg = load_config(["+experiment=staircase", "model.vocab_size=64", "model.num_layers=1",
                       "model.compute_dtype=bfloat16"])
    m = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(m, cfg.sharding)
    ids = jnp.full((2048,), 3, jnp.int32).at[::7].set(5)
    c = jnp.asarray(np.random.default_rng(0).normal(size=(2048, cfg.model.d_model)), jnp.bfloat16)
    with jax.set_mesh(m):
        params = init_params(cfg.model, jax.random.key(0), rules)
        grad = jax.jit(jax.grad(lambda p: jnp.sum(
            unembedding_rows(cfg.model, rules, p, ids, jnp.bfloat16).astype(jnp.float32) * c)))(params)
    exact = np.zeros((64, cfg.model.d_model))
    np.add.at(exact, np.asarray(ids), np.asarray(c, np.float64))
    got = np.asarray(grad.embed, np.float64)
    assert grad.embed.dtype == jnp.float32
    assert np.max(np.abs(got - exact)) / np.max(np.abs(exact)) < 1e-6
    assert np.count_nonzero(np.abs(got).sum(1)) == 2  # rows 3 and 5 only


@pytest.mark.parametrize("block,sharding", [(0, "dp"), (8, "fsdp_tp")])
def test_one_pass_logsumexp_equals_two_passes(block, sharding, monkeypatch):
    """spmdgpt.model.loss.logsumexp's one-pass reduction (GPUs) against jax.nn.logsumexp:
    values and gradients within float32 rounding, -inf logits included; and the loss and
    gradients of a model, whole on one device and blocked with the vocabulary split over a
    4 x 2 mesh (fsdp_tp), within 1e-6 relative."""
    import spmdgpt.model.loss as L

    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(32, 500)) * 20, jnp.float32).at[3].set(-jnp.inf).at[3, 9].set(1.5)
    x = x.at[4, :250].set(-jnp.inf)
    g = jnp.asarray(rng.normal(size=(32,)), jnp.float32)
    np.testing.assert_allclose(L._lse_one_pass_diff(x), jax.nn.logsumexp(x, axis=-1), rtol=1e-6)
    two_pass = lambda x: jax.nn.logsumexp(x, axis=-1)  # noqa: E731
    grads = [jax.grad(lambda x: jnp.sum(f(x) * g))(x) for f in (L._lse_one_pass_diff, two_pass)]
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-7)
    assert float(L._lse_one_pass(jnp.full((1, 4), -jnp.inf))[0]) == -np.inf

    mesh = ["mesh.data=4", "mesh.model=2"] if sharding == "fsdp_tp" else ["mesh.data=1"]
    cfg = load_config(["+experiment=staircase", "model.vocab_size=64", "model.num_layers=1", "data.seq_len=32",
                       f"model.loss_block={block}", f"sharding={sharding}", *mesh])
    m = make_mesh(cfg.mesh, jax.devices()[: 8 if sharding == "fsdp_tp" else 1])
    rules = Rules(m, cfg.sharding)
    with jax.set_mesh(m):
        params = init_params(cfg.model, jax.random.key(0), rules)
        x, y = (jax.device_put(rng.integers(0, 64, (8, 32)), rules.batch_sharding()) for _ in range(2))
        l2, g2 = _loss_and_grads(cfg.model, rules, params, x, y)
        monkeypatch.setattr(L, "ONE_PASS_LSE_PLATFORMS", ("cpu",))
        l1, g1 = _loss_and_grads(cfg.model, rules, params, x, y)
    assert float(l1) == pytest.approx(float(l2), rel=1e-6)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2), strict=True):
        assert float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b))) < 1e-6


def test_bfloat16_logits():
    """model.logits_dtype=bfloat16: the unembedding GEMM writes [tokens, vocab] bfloat16 logits
    (float32 ones without it), and the loss and gradients, whole and blocked, stay within
    bfloat16 rounding of the float32 logits' (on an H100: -1.5 GiB and +1.9% tokens/s for GPT-2
    124M, benchmarks/BENCHMARKS.md). Only float32 or the compute dtype is accepted."""
    base = ["+experiment=staircase", "model.vocab_size=512", "model.num_layers=1", "data.seq_len=32",
            "model.compute_dtype=bfloat16"]
    cfg = load_config(base)
    m = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(m, cfg.sharding)
    rng = np.random.default_rng(2)
    x, y = (jnp.asarray(rng.integers(0, 512, (8, 32)), jnp.int32) for _ in range(2))
    results = {}
    with jax.set_mesh(m):
        params = init_params(cfg.model, jax.random.key(0), rules)
        for dtype in ("float32", "bfloat16"):
            for block in (0, 8):
                mc = dataclasses.replace(cfg.model, logits_dtype=type(cfg.model.compute_dtype)(dtype),
                                         loss_block=block)
                results[dtype, block] = _loss_and_grads(mc, rules, params, x, y)
                if block == 0:
                    text = jax.jit(lambda p, mc=mc: loss_fn(mc, rules, p, x, y)).lower(params).as_text()
                    dots = [ln.rsplit("-> ", 1)[1] for ln in text.splitlines() if "dot_general" in ln
                            and "x512x" in ln]  # the unembedding's result type
                    assert dots == [f"tensor<256x512x{'bf16' if dtype == 'bfloat16' else 'f32'}>"], dots
    for block in (0, 8):
        (l0, g0), (l1, g1) = results["float32", block], results["bfloat16", block]
        assert float(l1) == pytest.approx(float(l0), rel=1e-3)
        for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1), strict=True):
            assert b.dtype == jnp.float32
            assert float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(a))) < 3e-2
    errs = validate(load_config(["+experiment=staircase", "model.logits_dtype=bfloat16"]), 1)
    assert errs == ["model.logits_dtype=bfloat16: the logits are written in float32 or in the compute dtype "
                    "(model.compute_dtype=float32); choose one of the two"]


@pytest.mark.parametrize("block,sharding,mesh", [(0, "dp", ["mesh.data=1"]),
                                                 (8, "fsdp_tp", ["mesh.data=4", "mesh.model=2"])])
def test_targets_below_zero_are_not_predicted(block, sharding, mesh):
    """Targets < 0 (a chat prompt's, padding) add no loss and no gradient: the loss is the mean of
    the counted targets' cross-entropy computed from the logits (float32, 1e-5), z-loss included,
    whole and blocked; the gradients do not depend on the values below 0, and the blocked loss's
    equal the whole loss's; objective's "tokens" is their count."""
    from spmdgpt.model import forward, objective

    cfg = load_config(["+experiment=staircase", f"sharding={sharding}", *mesh, "model.vocab_size=64",
                       "model.num_layers=1", "data.seq_len=32", "data.batch_size=8", "model.z_loss=1e-2",
                       f"model.loss_block={block}"])
    m = make_mesh(cfg.mesh, jax.devices()[: 1 if sharding == "dp" else 8])
    rules = Rules(m, cfg.sharding)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 64, (8, 32))
    y = rng.integers(0, 64, (8, 32))
    keep = rng.random((8, 32)) < 0.4
    keep[3] = False  # a row with nothing counted
    masked = np.where(keep, y, -1)
    with jax.set_mesh(m):
        params = init_params(cfg.model, jax.random.key(0), rules)
        put = lambda a: jax.device_put(a, rules.batch_sharding())  # noqa: E731
        logits = np.asarray(jax.jit(lambda p: forward(cfg.model, rules, p, put(x))[0])(params), np.float64)
        def obj(model_cfg):  # (the targets an argument: one program for both sets of targets)
            f = jax.jit(jax.value_and_grad(lambda p, t: objective(model_cfg, rules, p, put(x), t), has_aux=True))
            return lambda t: f(params, put(t))

        blocked = obj(cfg.model)
        (o, metrics), g = blocked(masked)
        (o2, _), g2 = blocked(np.where(keep, y, -1 - rng.integers(0, 5, (8, 32))))
        whole = blocked if block == 0 else obj(dataclasses.replace(cfg.model, loss_block=0))
        _, g_whole = whole(masked)
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    ce = lse - np.take_along_axis(logits, y[..., None], -1)[..., 0]
    n = keep.sum()
    assert float(metrics["tokens"]) == n
    assert float(metrics["loss"]) == pytest.approx(ce[keep].mean(), rel=1e-5)
    assert float(o) == pytest.approx(ce[keep].mean() + 1e-2 * (lse[keep] ** 2).mean(), rel=1e-5)
    assert float(o2) == float(o)
    for a, b, c in zip(jax.tree.leaves(g), jax.tree.leaves(g2), jax.tree.leaves(g_whole), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert float(jnp.max(jnp.abs(a - c)) / jnp.max(jnp.abs(c))) < 1e-5
