"""Blocks made of units: a new MLP kind is one NamedTuple, one info and one apply function, and
its auxiliary loss reaches the objective, the metrics and the statistics through the layers'
aux channel. Parameter init seeds are the names without the unit."""

import zlib
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import train_steps
from jax.sharding import PartitionSpec as P

from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import Unit, activation_stats, blocks, init_params, leaf_name, objective, param_info
from spmdgpt.model import params as model_params
from spmdgpt.model.info import matrix
from spmdgpt.model.layers import rms
from spmdgpt.optim import weight_decay_mask
from spmdgpt.optim.matrices import is_hidden_matrix

OVERRIDES = ("+experiment=staircase", "model.num_layers=2", "data.batch_size=8", "train.steps=3")


def test_init_seeds_are_the_parameter_names_without_their_unit():
    cfg = load_config([*OVERRIDES, "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(7), rules)
    flat, _ = jax.tree_util.tree_flatten_with_path(params)
    assert [leaf_name(p) for p, _ in flat] == [".embed", ".blocks.ln1.scale", ".blocks.w_qkv", ".blocks.w_o",
                                                ".blocks.ln2.scale", ".blocks.w_up", ".blocks.w_down", ".ln_f.scale"]
    assert jax.tree_util.keystr(flat[2][0]) == ".blocks.attn.w_qkv"
    # the value a seed gave before blocks had units: key folded with crc32 of the flat name (a
    # small model's init is compiled unoptimised on a CPU, init_params: so is this)
    k = jax.random.fold_in(jax.random.key(7), zlib.crc32(b".blocks.w_qkv"))
    want = jax.jit(lambda: cfg.model.init_std * jax.random.normal(k, params.blocks.attn.w_qkv.shape, jnp.float32),
                   compiler_options={"xla_backend_optimization_level": 0})()
    # (two programs: equal to float32 rounding, not bitwise on every CPU kind; another key would
    # differ everywhere by O(init_std))
    np.testing.assert_allclose(np.asarray(params.blocks.attn.w_qkv), np.asarray(want), rtol=1e-6, atol=1e-9)


class Toy(NamedTuple):
    w_in: jax.Array  # [embed, mlp]
    w_out: jax.Array  # [mlp, embed]


WEIGHT = 0.25


def toy_info(cfg):
    D, F = cfg.d_model, 2 * cfg.d_model
    return Toy(matrix((D, F), ("embed", "mlp"), ("embed",), ("mlp",), cfg.init_std),
               matrix((F, D), ("mlp", "embed"), ("mlp",), ("embed",), cfg.init_std))


def toy_apply(cfg, rules, p, x):
    """tanh MLP whose auxiliary loss is the mean square of its pre-activation."""
    h = jnp.einsum("td,df->tf", x, rules.gather(p.w_in.astype(x.dtype), ("embed", "mlp")),
                   out_sharding=rules.spec("tokens", "mlp"))
    out = jnp.einsum("tf,fd->td", jnp.tanh(h), rules.gather(p.w_out.astype(x.dtype), ("mlp", "embed")),
                     out_sharding=rules.spec("tokens", "embed"))
    return out, {"toy_square": jnp.mean(jnp.square(h.astype(jnp.float32)))}


def toy_stats(cfg, rules, p, x):
    return {"toy_input_rms": rms(x)}


TOY = Unit(toy_info, toy_apply, toy_stats, lambda cfg: {"toy_square": WEIGHT})


@pytest.fixture
def toy_mlp(monkeypatch):
    units = lambda cfg, stack="blocks": (model_params.ATTENTION, TOY)
    monkeypatch.setattr(model_params, "block_units", units)  # (the parameters' and the layers' lookups)
    monkeypatch.setattr(blocks, "block_units", units)


def test_an_mlp_kind_is_one_unit_and_its_aux_loss_is_trained(toy_mlp):
    cfg = load_config([*OVERRIDES, "mesh.data=2", "mesh.model=2", "sharding=fsdp_tp"])
    info = param_info(cfg.model)
    # metadata: stacked per layer, weight decay, Muon's matrices, sharding by the table
    assert isinstance(info.blocks.mlp, Toy) and info.blocks.mlp.w_in.shape == (2, 64, 128)
    assert info.blocks.mlp.w_in.logical == ("layers", "embed", "mlp")
    assert weight_decay_mask(info).blocks.mlp.w_out and is_hidden_matrix(info.blocks.mlp.w_out)
    losses, state, rules = train_steps(cfg, jax.devices()[:4], 3)
    assert state.params.blocks.mlp.w_in.sharding.spec == P(None, ("data", "context"), "model")

    # objective = cross-entropy + weight x the aux loss's mean over layers
    params = state.params
    x, y = (jnp.asarray(np.random.default_rng(0).integers(0, 10, (4, 32)), jnp.int32) for _ in range(2))
    with jax.set_mesh(rules.mesh):
        @jax.jit  # (one program for the four)
        def parts(params, x, y):
            obj = partial(objective, cfg.model, rules)
            return (obj(params, x, y), activation_stats(cfg.model, rules, params, x),
                    jax.grad(lambda p: obj(p, x, y)[0])(params), jax.grad(lambda p: obj(p, x, y)[1]["loss"])(params))

        (obj, metrics), stats, grads, ce_grads = parts(params, x, y)
    per_layer = np.asarray(stats["toy_square"])
    assert per_layer.shape == (2,) and per_layer.min() > 0 and per_layer[0] != per_layer[1]
    assert float(metrics["aux/toy_square"]) == pytest.approx(per_layer.mean(), rel=1e-6)
    assert float(obj) == pytest.approx(float(metrics["loss"]) + WEIGHT * per_layer.mean(), rel=1e-6)
    assert stats["toy_input_rms"].shape == (2,) and stats["resid_rms"].shape == (2,)
    # the aux loss has a gradient of its own (the first layer's w_in is pulled towards smaller h)
    assert not np.allclose(np.asarray(grads.blocks.mlp.w_in), np.asarray(ce_grads.blocks.mlp.w_in), atol=1e-6)


def test_aux_losses_are_logged_and_averaged_over_microbatches(toy_mlp):
    from spmdgpt.training.step import training_parts

    losses, _, rules = train_steps(load_config([*OVERRIDES, "mesh.data=1"]), jax.devices()[:1], 1)
    metrics = {}
    for k in (1, 2):
        cfg = load_config([*OVERRIDES, "mesh.data=1", f"train.microbatches={k}"])
        with jax.set_mesh(rules.mesh):
            state, step, batcher, _ = training_parts(cfg, rules)
            inputs, targets = batcher.train_batch(0)[:2]
            # the two parts of k=2: rows 0::2 and 1::2 (computed before the step takes the state)
            part = jax.jit(lambda p, x, y, cfg=cfg: objective(cfg.model, rules, p, x, y)[1])
            parts = [part(state.params, inputs[j::2], targets[j::2]) for j in (0, 1)]
            _, metrics[k] = step(state, inputs, targets)
    assert set(metrics[2]) == {"loss", "tokens", "aux/toy_square", "grad_norm", "lr"}
    assert float(metrics[1]["loss"]) == losses[0]
    assert float(metrics[2]["aux/toy_square"]) == pytest.approx(np.mean([float(p["aux/toy_square"]) for p in parts]),
                                                                rel=1e-5)
    assert float(metrics[2]["aux/toy_square"]) == pytest.approx(float(metrics[1]["aux/toy_square"]), rel=1e-5)


def test_aux_losses_reach_metrics_jsonl(toy_mlp, tmp_path):
    from conftest import read_jsonl

    from spmdgpt import train

    run = tmp_path / "run"
    train(load_config([*OVERRIDES, "train.log_every=1", "train.progress=false", f"run.dir={run}"]),
          argv=["pytest"])
    rows = [r for r in read_jsonl(run / "metrics.jsonl") if "loss" in r and "step" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(r["aux/toy_square"] > 0 for r in rows) and rows[0]["aux/toy_square"] != rows[2]["aux/toy_square"]



# (tolerances: vs autodiff, vs the float64 formula's central differences; in units of the derivative,
# whose size is about 1: float32 near the negative tail cancels 0.5 (1 + tanh u) against the
# second term, ~3e-6 either way; bfloat16 autodiff rounds every intermediate to 8 bits)
@pytest.mark.parametrize("dtype,auto_tol,exact_tol", [("float32", 4e-6, 4e-6), ("bfloat16", 2e-2, 8e-3)])
def test_gelu_with_its_own_derivative_equals_autodiff(dtype, auto_tol, exact_tol):
    """mlp.gelu_tanh: the values of jax.nn.gelu(approximate=True) bitwise, and gradients equal to
    autodiff's and to the formula's float64 central differences (the custom derivative is
    computed in float32, then rounded to the input's dtype), far out on both tails and at 0."""
    import jax.numpy as jnp

    from spmdgpt.model.mlp import gelu_tanh

    x = jnp.concatenate([jnp.linspace(-8.0, 8.0, 4001), jnp.array([0.0, -30.0, 30.0])]).astype(dtype)
    dy = jnp.cos(jnp.arange(x.size, dtype=jnp.float32)).astype(dtype)
    plain = lambda v: jax.nn.gelu(v, approximate=True)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(gelu_tanh(x), np.float32), np.asarray(plain(x), np.float32))
    ours = jax.vjp(gelu_tanh, x)[1](dy)[0]
    auto = jax.vjp(plain, x)[1](dy)[0]
    assert ours.dtype == auto.dtype == x.dtype
    np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(auto, np.float32), rtol=auto_tol, atol=auto_tol)
    # and against central differences of the float64 formula (independent of both)
    x64, h = np.asarray(x, np.float64), 1e-6
    f = lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))  # noqa: E731
    numeric = (f(x64 + h) - f(x64 - h)) / (2 * h) * np.asarray(dy, np.float64)
    np.testing.assert_allclose(np.asarray(ours, np.float64), numeric, rtol=exact_tol, atol=4e-6)


def test_gpt_oss_clamped_swiglu_in_the_dense_mlp_and_the_experts():
    """mlp=swiglu_clamped (gpt-oss): g = min(gate, L), u = clip(up, -L, L), g sigmoid(alpha g) (u + 1),
    against the formula in float64 with values past both clamps; the experts of an MoE layer use it
    too (the dropless layer equals its masked every-expert reference), and a model with it trains."""
    from spmdgpt.model.mlp import activation
    from spmdgpt.model.moe import every_expert, moe

    cfg = load_config([*OVERRIDES, "mesh.data=1", "model.mlp=swiglu_clamped", "model.glu_limit=3",
                       "model.glu_alpha=1.5"]).model
    g = np.array([-9.0, -1.0, 0.0, 0.5, 2.9, 3.1, 12.0])
    h = np.array([-7.0, -3.5, 0.2, 2.0, 3.0, -0.4, 5.0])
    gc, hc = np.minimum(g, 3.0), np.clip(h, -3.0, 3.0)
    want = gc / (1 + np.exp(-1.5 * gc)) * (hc + 1)
    np.testing.assert_allclose(np.asarray(activation(cfg, jnp.asarray(h, jnp.float32), jnp.asarray(g, jnp.float32))),
                               want, rtol=1e-6)
    moe_cfg = load_config([*OVERRIDES, "mesh.data=1", "model.mlp=swiglu_clamped", "model.glu_limit=0.5",
                           "model.moe.num_experts=4", "model.init_std=0.5"])
    mesh = make_mesh(moe_cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, moe_cfg.sharding, moe_cfg.model)
    with jax.set_mesh(mesh):
        params = init_params(moe_cfg.model, jax.random.key(0), rules)
        p = jax.tree.map(lambda a: a[0], params.blocks.mlp)
        x = jax.random.normal(jax.random.key(1), (32, moe_cfg.model.d_model))
        got = jax.jit(lambda p, x: moe(moe_cfg.model, rules, p, x)[0])(p, x)
        want = jax.jit(lambda p, x: every_expert(moe_cfg.model, rules, p, x))(p, x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
    assert float(jnp.max(jnp.abs(got))) > 1e-2
    losses = train_steps(load_config([*OVERRIDES, "mesh.data=1", "model.mlp=swiglu_clamped"]), jax.devices()[:1], 3)[0]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
