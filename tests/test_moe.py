"""Mixture-of-experts MLPs (model.moe): dropless and capacity dispatch equal a reference that
runs every expert on every token under a one-hot mask (forward and gradients), capacity mode
drops and counts exactly the copies past an expert's slots, the routing's auxiliary outputs are
their formulas, layouts (data, FSDP, tensor) give one device's loss and gradients, and bad
configs are one line."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compile_only_or_skip
from jax.sharding import PartitionSpec as P

from spmdgpt.config import ConfigError, MoeDispatch, load_config, validate
from spmdgpt.hf import architecture
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import init_params
from spmdgpt.model.loss import objective
from spmdgpt.model.moe import block_rows, capacity, every_expert, moe, route
from spmdgpt.plan.flops import matmul_params
from spmdgpt.plan.plan import compile_options
from spmdgpt.web import check_supported

BASE = ["+experiment=staircase", "model.moe.num_experts=4", "model.moe.top_k=2", "model.init_std=0.2"]


def one_layer(params):
    """The first layer's MoE parameters (the block stacks a layer axis)."""
    return jax.tree.map(lambda a: a[0], params.blocks.mlp)


def with_biases(p):
    """MoE parameters with model.bias's router and expert biases away from their zero init (a
    different value in every place)."""
    def bias(b):  # (in the parameter's own layout)
        if b is None:
            return None
        value = 0.3 * jnp.sin(1.0 + jnp.arange(b.size, dtype=b.dtype)).reshape(b.shape)
        return jax.sharding.reshard(value, jax.typeof(b).sharding.spec)

    return p._replace(b_router=bias(p.b_router), b_up=bias(p.b_up), b_gate=bias(p.b_gate), b_down=bias(p.b_down))


def setup(*overrides, tokens=48):
    cfg = load_config([*BASE, "mesh.data=1", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        p = with_biases(one_layer(init_params(cfg.model, jax.random.key(0), rules)))
    x = jax.random.normal(jax.random.key(1), (tokens, cfg.model.d_model), jnp.float32)
    return cfg.model, mesh, rules, p, x


@pytest.mark.parametrize("overrides", [
    ["model.moe.weight_input=true"],
    ["model.mlp=swiglu", "model.moe.router=sigmoid", "model.moe.shared_experts=1", "model.moe.shared_gate=true",
     "model.moe.grouped=ragged", "model.bias=true"],
    ["model.moe.dispatch=capacity", "model.moe.capacity_factor=2.0", "model.moe.top_k=1",
     "model.moe.normalize_top_k=false", "model.moe.mlp_factor=2.0", "model.bias=true", "model.moe.weight_input=true"],
    ["model.mlp=swiglu", "model.moe.grouped=pallas", "model.bias=true"],
], ids=["dropless-blocks-gelu-softmax-weighted-inputs", "dropless-ragged-swiglu-sigmoid-gated-shared-biased",
        "capacity-top1-biased-weighted-inputs", "dropless-pallas-swiglu-biased"])
def test_dispatch_equals_the_masked_reference(overrides):
    cfg, mesh, rules, p, x = setup(*overrides)
    if cfg.moe.dispatch.value == "capacity":  # enough slots for every copy: nothing dropped
        assert capacity(cfg, x.shape[0]) == x.shape[0] // 2
    with jax.set_mesh(mesh):
        got, aux = jax.jit(lambda p, x: moe(cfg, rules, p, x))(p, x)
        want = jax.jit(lambda p, x: every_expert(cfg, rules, p, x))(p, x)
        loss = lambda f: lambda p, x: jnp.sum(jnp.sin(f(p, x)))  # noqa: E731  (a nonlinear readout)
        g_got = jax.jit(jax.grad(loss(lambda p, x: moe(cfg, rules, p, x)[0]), argnums=(0, 1)))(p, x)
        g_want = jax.jit(jax.grad(loss(lambda p, x: every_expert(cfg, rules, p, x)), argnums=(0, 1)))(p, x)
        ids = route(cfg, rules, p.router, x)[0]
    if cfg.moe.dispatch.value == "capacity":
        assert max(np.bincount(np.asarray(ids).ravel(), minlength=4)) <= 24  # (the premise: no expert overflows)
    assert float(aux["dropped"]) == 0.0
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=2e-5)
    assert float(jnp.max(jnp.abs(want))) > 0.5
    for a, b in zip(jax.tree.leaves(g_got), jax.tree.leaves(g_want), strict=True):  # (float32 sums in other orders)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=max(5e-5, 5e-6 * np.max(np.abs(b))))
    assert float(jnp.max(jnp.abs(g_want[0].router))) > 0.1  # the router learns through the weights


def test_grouped_kernels_follow_jaxs_matmul_precision():
    """The Pallas kernels' float32 dots take JAX's matmul precision (Triton's default for float32
    is TF32, which an H200 measured 4.25e-4 from the masked reference): full precision under
    highest / float32, the default (TF32 on GPUs, as XLA's own GEMMs) otherwise; bf16 rows as is."""
    from spmdgpt.model.grouped import precision

    assert precision(jnp.float32) is None and precision(jnp.bfloat16) is None
    for setting in ("highest", "float32"):
        with jax.default_matmul_precision(setting):
            assert precision(jnp.float32) == jax.lax.Precision.HIGHEST and precision(jnp.bfloat16) is None
    with jax.default_matmul_precision("tensorfloat32"):
        assert precision(jnp.float32) is None


def test_grouped_kernels_tiles_change_the_grid_not_the_numbers():
    """`grouped.using_tiles` (benchmarks/moe.py --tiles) sets the kernels' tiles while a step is
    traced: smaller tiles launch more programs and give the same product and gradients
    (interpreted on the CPU), and the default comes back after the block: by the rows' dtype,
    HALF_TILES for bf16 (the H200's fastest of five) and Tiles() for float32 (HALF_TILES asks for
    more shared memory than Hopper has in float32)."""
    from spmdgpt.model import grouped
    from spmdgpt.model.grouped import HALF_TILES, Tiles, grouped_matmul, tiles_for, using_tiles

    B, E, K, N = 16, 2, 64, 128
    x = jax.random.normal(jax.random.key(0), (4 * B, K))
    w = jax.random.normal(jax.random.key(1), (E, K, N))
    owner = jnp.array([0, 0, 1, -1], jnp.int32)  # (blocks 0-1 expert 0's, 2 expert 1's, 3 unused)
    first, count = jnp.array([0, 2], jnp.int32), jnp.array([2, 1], jnp.int32)

    def f(x, w):
        return jnp.sum(jnp.sin(grouped_matmul(x, w, owner, first, count, B, True)))

    def grids(jaxpr):
        return sorted(tuple(e.params["grid_mapping"].grid) for e in jaxpr.eqns if e.primitive.name == "pallas_call")

    small = Tiles(rows_k=16, rows_n=32, weights_k=16, weights_n=32)
    got = {}
    for tiles in (Tiles(), small):
        with using_tiles(tiles):
            got[tiles] = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))(x, w)
            got[tiles, "grids"] = grids(jax.make_jaxpr(jax.grad(f, argnums=(0, 1)))(x, w).jaxpr)
    assert grouped.TILES is None and tiles_for(jnp.float32) == Tiles() and tiles_for(jnp.bfloat16) == HALF_TILES
    assert grids(jax.make_jaxpr(jax.grad(f, argnums=(0, 1)))(x, w).jaxpr) == [(2, 1, 2), (4, 1), (4, 1)]
    bf16 = jax.make_jaxpr(jax.grad(f, argnums=(0, 1)))(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)).jaxpr
    assert grids(bf16) == [(2, 1, 1), (4, 1), (4, 1)]  # (dw's 64 x 128 tile: one program per expert)
    # (forward [blocks, N / rows_n], dx [blocks, K / rows_n], dw [E, K / weights_k, N / weights_n])
    assert got[Tiles(), "grids"] == [(2, 1, 2), (4, 1), (4, 1)] and got[small, "grids"] == [(2, 4, 4), (4, 2), (4, 4)]
    for a, b in zip(jax.tree.leaves(got[Tiles()]), jax.tree.leaves(got[small]), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-4)
    want = x[:2 * B] @ w[0]  # (the product itself, block by block, against plain matmuls)
    np.testing.assert_allclose(np.asarray(grouped_matmul(x, w, owner, first, count, B, True)[:2 * B]), np.asarray(want),
                               rtol=1e-5, atol=1e-4)


def test_capacity_drops_and_counts_the_copies_past_an_experts_slots():
    """48 tokens, top-1 of 4 experts, factor 1: 12 slots each. A router that sends every token
    to expert 2 keeps the first 12 tokens and drops 36 (3/4 of the copies): their rows are 0."""
    cfg, mesh, rules, p, x = setup("model.moe.dispatch=capacity", "model.moe.capacity_factor=1.0",
                                   "model.moe.top_k=1")
    p = p._replace(router=jnp.zeros_like(p.router).at[:, 2].set(1.0))
    x = jnp.abs(x)  # (positive inputs: every token's logit for expert 2 is the largest)
    dropless = dataclasses.replace(cfg, moe=dataclasses.replace(cfg.moe, dispatch=MoeDispatch.dropless))
    with jax.set_mesh(mesh):  # (jitted: one program each, not one per operation)
        ids = jax.jit(lambda p, x: route(cfg, rules, p.router, x)[0])(p, x)
        out, aux = jax.jit(lambda p, x: moe(cfg, rules, p, x))(p, x)
        want = jax.jit(lambda p, x: every_expert(cfg, rules, p, x))(p, x)
        every = jax.jit(lambda p, x: moe(dropless, rules, p, x))(p, x)  # (the blocks product with three empty groups)
    assert capacity(cfg, 48) == 12 and set(np.asarray(ids).ravel()) == {2}
    for factor, slots in ((2.0, 24), (4.0, 48), (1e308, 48), (float("inf"), 48)):  # (past E / k: every token;
        # 1e308 x tokens overflowed to inf and crashed the run with a traceback)
        assert capacity(dataclasses.replace(cfg, moe=dataclasses.replace(cfg.moe, capacity_factor=factor)), 48) == slots
    assert float(aux["dropped"]) == 36 / 48 and float(aux["expert_load"]) == 4.0
    np.testing.assert_allclose(np.asarray(out[:12]), np.asarray(want[:12]), rtol=0, atol=2e-5)
    assert not np.any(np.asarray(out[12:])) and np.all(np.any(np.asarray(want[12:]), axis=1))
    np.testing.assert_allclose(np.asarray(every[0]), np.asarray(want), rtol=0, atol=2e-5)
    assert float(every[1]["dropped"]) == 0.0 and block_rows(48, 4) == 8


def test_routing_outputs_are_their_formulas():
    cfg, mesh, rules, p, x = setup("model.moe.top_k=2")
    with jax.set_mesh(mesh):
        ids, weights, aux = route(cfg, rules, p.router, x)
    logits = np.asarray(x, np.float64) @ np.asarray(p.router, np.float64)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    top = np.argsort(-probs, axis=1)[:, :2]
    np.testing.assert_array_equal(np.sort(np.asarray(ids), 1), np.sort(top, 1))
    picked = np.take_along_axis(probs, np.asarray(ids), 1)
    np.testing.assert_allclose(np.asarray(weights), picked / picked.sum(1, keepdims=True), rtol=1e-5)
    share = np.bincount(np.asarray(ids).ravel(), minlength=4) / ids.size  # f_e
    assert np.isclose(float(aux["load_balance"]), 4 * np.sum(share * probs.mean(0)), rtol=1e-5)
    assert np.isclose(float(aux["expert_load"]), 4 * share.max(), rtol=1e-6)
    lse = np.log(np.exp(logits).sum(1))
    assert np.isclose(float(aux["router_z"]), np.mean(lse ** 2), rtol=1e-5)
    assert np.isclose(float(aux["router_entropy"]), -np.mean(np.sum(probs * np.log(probs), 1)), rtol=1e-5)
    assert 1.0 < float(aux["load_balance"]) < 1.5 and 0.5 < float(aux["router_entropy"]) < np.log(4)
    # one token, one expert (the engine's decode row of a top-1 model, Llama 4's): the chosen score, with and without
    # a balancing bias (whose weights are the scores alone)
    cfg, mesh, rules, p, x = setup("model.moe.top_k=1", "model.moe.router=sigmoid", "model.moe.normalize_top_k=false",
                                   tokens=1)
    with jax.set_mesh(mesh):
        for bias in (None, jnp.asarray([0.0, 5.0, 0.0, 0.0])):
            ids, weights, _ = jax.jit(lambda p, x, b: route(cfg, rules, p.router, x, b))(p, x, bias)
            scores = 1 / (1 + np.exp(-(np.asarray(x, np.float64) @ np.asarray(p.router, np.float64))))
            assert int(ids[0, 0]) == (1 if bias is not None else int(np.argmax(scores)))
            np.testing.assert_allclose(np.asarray(weights), scores[:, np.asarray(ids)[0]], rtol=1e-5)


def test_balancing_bias_chooses_by_score_plus_bias_and_moves_toward_even_loads():
    """moe.bias_update_rate (DeepSeek-V3's auxiliary-loss-free balancing): the top k are chosen
    by score + bias but weighted by the scores alone, and each train step moves every layer's
    bias by rate x sign(1/E - the expert's share of the step's copies), whatever the optimizer
    does (AdamW, weight decay 0.1)."""
    from spmdgpt.training.step import training_parts

    cfg = load_config([*BASE, "mesh.data=1", "model.moe.bias_update_rate=0.01", "optimizer.weight_decay=0.1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    x = jax.random.normal(jax.random.key(1), (48, cfg.model.d_model), jnp.float32)
    with jax.set_mesh(mesh):
        state, train_step, batcher, _ = training_parts(cfg, rules)
        p = one_layer(state.params)
        assert p.router_bias.shape == (4,) and not np.any(np.asarray(p.router_bias))
        ids, weights, aux = route(cfg.model, rules, p.router, x, jnp.array([0.0, 0.0, 0.0, 10.0]))
        probs = np.asarray(jax.nn.softmax(x @ np.asarray(p.router), axis=-1))
        assert np.all(np.asarray(ids)[:, 0] == 3)  # expert 3 first for every token
        picked = np.take_along_axis(probs, np.asarray(ids), 1)  # (weights: the probabilities, renormalised)
        np.testing.assert_allclose(np.asarray(weights), picked / picked.sum(1, keepdims=True), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(aux["expert_share"])[3], 0.5)  # (half of the copies: every first one)

        shares = jax.jit(lambda p, x, y: objective(cfg.model, rules, p, x, y)[1]["between_steps"]["expert_share"])
        for i in range(3):
            x, y = batcher.train_batch(i)[:2]
            before = np.asarray(state.params.blocks.mlp.router_bias)
            share = np.asarray(shares(state.params, x, y))  # [layers, experts]
            state, metrics = train_step(state, x, y)
            assert "between_steps" not in metrics and float(metrics["aux/expert_load"]) > 1
            step = np.asarray(state.params.blocks.mlp.router_bias) - before
            np.testing.assert_allclose(step, 0.01 * np.sign(0.25 - share), atol=1e-7)
            assert np.count_nonzero(step) >= step.size - 2  # (an expert at exactly 1/4 keeps its bias)


def test_a_hybrids_balancing_bias_moves_each_stack_by_its_own_layers():
    """A hybrid with experts in both stacks (Kimi Linear's: Kimi Delta Attention layers 0 and 2,
    softmax layers 1 and 3; layer 0's MLP dense, as Kimi-Linear-48B-A3B's, model.moe.first_dense_layers=1):
    between steps each stack's router_bias moves by rate x sign(1/E - the shares of its own layers, rows
    of the step's [MoE layers, E] in layer order); the dense layer has no router."""
    from spmdgpt.config import linear_layers
    from spmdgpt.model import between_steps

    cfg = load_config([*BASE, "mesh.data=1", "model.moe.bias_update_rate=0.01", "model.num_layers=4",
                       "model.deltanet.full_attention_interval=2", "model.deltanet.gate=channel",
                       "model.moe.first_dense_layers=1"]).model
    assert linear_layers(cfg) == (True, False, True, False)
    mesh = make_mesh(load_config(BASE + ["mesh.data=1"]).mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        params = init_params(cfg, jax.random.key(0), Rules(mesh, load_config(BASE).sharding, cfg))
    assert not hasattr(params.dense_blocks.mlp, "router_bias") and params.linear_blocks.mlp.router_bias.shape == (1, 4)
    share = np.array([[0.4, 0.3, 0.2, 0.1], [0.25, 0.5, 0.25, 0.0], [0.0, 0.0, 0.5, 0.5]])  # (layers 1, 2, 3)
    after = between_steps(cfg, params, params, {"expert_share": jnp.asarray(share, jnp.float32)})
    for stack, rows in (("linear_blocks", [1]), ("blocks", [0, 2])):
        step = np.asarray(getattr(after, stack).mlp.router_bias) - np.asarray(getattr(params, stack).mlp.router_bias)
        np.testing.assert_allclose(step, 0.01 * np.sign(0.25 - share[rows]), atol=1e-7)


def test_dense_layers_run_in_their_places():
    """model.moe.first_dense_layers=1, interleave_step=2 on 5 layers: dense, dense, MoE, dense,
    MoE. The two scans (`scan_layers`) equal the layers run one by one in that order; each
    kind's outputs land at its layers; dense layers have the dense MLP's width."""
    from spmdgpt.config import moe_layers
    from spmdgpt.model.blocks import block
    from spmdgpt.model.head import embed
    from spmdgpt.model.layers import norm
    from spmdgpt.model.transformer import activation_stats, hidden_states

    cfg = load_config([*BASE, "mesh.data=1", "model.num_layers=5", "model.moe.first_dense_layers=1",
                       "model.moe.interleave_step=2", "model.moe.mlp_factor=2.0"]).model
    assert moe_layers(cfg) == (False, False, True, False, True)
    mesh = make_mesh(load_config(BASE + ["mesh.data=1"]).mesh, jax.devices()[:1])
    rules = Rules(mesh, load_config(BASE).sharding, cfg)
    toks = jnp.asarray(np.random.default_rng(0).integers(0, 10, (2, 16)), jnp.int32)
    with jax.set_mesh(mesh):
        p = init_params(cfg, jax.random.key(0), rules)
        x, _, aux = jax.jit(lambda p, t: hidden_states(cfg, rules, p, t))(p, toks)
        stats = jax.jit(lambda p, t: activation_stats(cfg, rules, p, t))(p, toks)
        h, want_resid, want_balance = embed(cfg, rules, p, toks), [], []
        one = jax.jit(lambda lp, h, stack: block(cfg, rules, lp, h, jnp.arange(16), 2, stack=stack), static_argnums=2)
        for i, kind in enumerate(moe_layers(cfg)):  # the reference: one layer after another
            stack, j = (p.blocks, sum(moe_layers(cfg)[:i])) if kind else (p.dense_blocks, i - sum(moe_layers(cfg)[:i]))
            h, _, a = one(jax.tree.map(lambda a: a[j], stack), h, "blocks" if kind else "dense_blocks")
            want_resid.append(float(jnp.sqrt(jnp.mean(h * h))))
            want_balance += [float(a["load_balance"])] if kind else []
        want = norm(cfg, rules, p.ln_f, h)
    assert p.dense_blocks.mlp.w_up.shape == (3, 64, 256) and p.blocks.mlp.w_up.shape == (2, 4, 64, 128)
    np.testing.assert_allclose(x, want, atol=2e-5)
    np.testing.assert_allclose(aux["load_balance"], want_balance, rtol=1e-5)  # (the MoE layers' only)
    np.testing.assert_allclose(stats["resid_rms"], want_resid, rtol=1e-5)
    assert np.isnan(stats["expert_load"]).tolist() == [True, True, False, True, False]
    assert np.isnan(stats["mlp_pre_rms"]).tolist() == [False, False, True, False, True]
    # active: 5 attentions, 3 dense MLPs, 2 routers and 2 of 4 experts in 2 layers, the unembedding
    assert matmul_params(cfg) == 5 * 4 * 64 * 64 + 3 * 2 * 64 * 256 + 2 * (64 * 4 + 2 * 2 * 64 * 128) + 16 * 64


def _loss_and_grads(*overrides, devices):
    cfg = load_config([*BASE, "model.mlp=swiglu", "model.moe.router_z_loss=0.01", "model.moe.num_experts=8",
                       "model.scan_unroll=false", "model.num_layers=3", "model.moe.first_dense_layers=1",
                       "model.moe.interleave_step=2", "model.bias=true", *overrides])  # (dense, dense, MoE; gpt-oss's
    # biases: attention, router, experts)
    mesh = make_mesh(cfg.mesh, devices)
    rules = Rules(mesh, cfg.sharding, cfg.model)
    toks = jnp.asarray(np.random.default_rng(0).integers(0, 10, (8, 32)), jnp.int32)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        params = params._replace(blocks=params.blocks._replace(mlp=with_biases(params.blocks.mlp)))
        toks = jax.sharding.reshard(toks, rules.spec("batch", None))
        (obj, metrics), grads = jax.jit(jax.value_and_grad(
            lambda p: objective(cfg.model, rules, p, toks[:, :-1], toks[:, 1:]), has_aux=True))(params)
    return float(obj), jax.device_get(metrics), jax.device_get(grads), params


@pytest.fixture(scope="module")
def one_device():
    return _loss_and_grads("mesh.data=1", devices=jax.devices()[:1])


@pytest.mark.parametrize("table,mesh", [
    ("fsdp", ["mesh.data=2", "mesh.expert=4"]),
    ("fsdp_tp", ["mesh.data=2", "mesh.expert=2", "mesh.model=2", "model.moe.grouped=ragged"]),
    ("dp", ["mesh.data=1", "mesh.expert=8", "model.moe.grouped=pallas"]),
], ids=["fsdp2-ep4", "fsdp2-ep2-tp2-ragged", "ep8-pallas-ragged-exchange"])
def test_layouts_give_one_devices_loss_and_gradients(one_device, table, mesh, monkeypatch):
    """Dropless: the objective (cross-entropy + load balance + router z-loss) and every gradient
    on 8 devices equal one device's (float32 rounding: 1e-5 relative), expert parallelism
    (mesh.expert: the experts split, tokens exchanged by all-to-all) included; 8 experts, two
    dense layers before the MoE one (their MLPs sharded like a dense model's). Each grouped product
    once under expert parallelism: blocks (fsdp2-ep4), ragged (fsdp_tp) and the Pallas kernels (ep8,
    with the exchange GPUs and TPUs run: ragged_all_to_all, here by its documented semantics)."""
    from spmdgpt.model import moe as moe_module

    if table == "dp":
        monkeypatch.setattr(moe_module, "ragged_exchange", lambda: moe_module.ragged_by_all_to_all)
    obj1, m1, g1, _ = one_device
    obj8, m8, g8, params = _loss_and_grads(f"sharding={table}", *mesh, devices=jax.devices())
    assert abs(obj8 - obj1) <= 1e-5 * abs(obj1)
    assert set(m1) == {"loss", "tokens", "aux/load_balance", "aux/router_z", "aux/expert_load",
                       "aux/router_entropy", "aux/dropped"}
    for name in m1:
        np.testing.assert_allclose(m8[name], m1[name], rtol=1e-5, atol=1e-7)
    for a, b in zip(jax.tree.leaves(g8), jax.tree.leaves(g1), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(b))))
    spec = jax.typeof(params.blocks.mlp.w_up).sharding.spec  # [layers, experts, embed, mlp]
    assert spec == {"dp": P(None, "expert", None, None), "fsdp": P(None, "expert", ("data", "context"), None),
                    "fsdp_tp": P(None, "expert", ("data", "context"), "model")}[table]
    spec = jax.typeof(params.dense_blocks.mlp.w_up).sharding.spec  # [layers, embed, mlp]
    assert spec == {"dp": P(None, None, None), "fsdp": P(None, ("data", "context"), None),
                    "fsdp_tp": P(None, ("data", "context"), "model")}[table]


def test_capacity_mode_under_expert_parallelism_equals_data_parallelism():
    """Capacity mode gives each device's tokens C slots per expert, wherever the expert lives:
    data=2 x expert=4 equals data=8 (the same 8 batch shards), drops included (factor 0.5)."""
    capacity = ["model.moe.dispatch=capacity", "model.moe.capacity_factor=0.5"]
    obj_dp, m_dp, g_dp, _ = _loss_and_grads("mesh.data=8", *capacity, devices=jax.devices())
    obj_ep, m_ep, g_ep, _ = _loss_and_grads("mesh.data=2", "mesh.expert=4", *capacity, devices=jax.devices())
    assert abs(obj_ep - obj_dp) <= 1e-5 * abs(obj_dp)
    assert float(m_dp["aux/dropped"]) == float(m_ep["aux/dropped"]) > 0.3  # (about half the copies)
    for a, b in zip(jax.tree.leaves(g_ep), jax.tree.leaves(g_dp), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(b))))


def test_plan_shows_the_all_to_alls(capsys):
    import json

    from spmdgpt.cli import main

    def collectives(*overrides):
        assert main(["plan", *BASE, "model.num_layers=1", "devices=8", "format=json", *overrides]) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])["collectives"]

    # (one layer) dropless: tokens out and back and each device's group sizes, forward, and the
    # two transposes backward
    assert collectives("mesh.data=2", "mesh.expert=4")["all-to-all"][0] == 3 + 2
    assert collectives("mesh.data=8")["all-to-all"][0] == 0


def test_mixtral_8x7b_has_the_published_shape():
    from spmdgpt.model import num_params

    cfg = load_config(["+experiment=mixtral_8x7b"]).model
    assert num_params(cfg) == 46_702_792_704  # Mistral AI's 46.7B
    assert matmul_params(cfg) == 12_748_587_008  # active: 2 of 8 experts (+ the unembedding; 12.9B with the embedding)


def test_active_parameters_and_bad_configs():
    cfg = load_config([*BASE, "model.mlp=swiglu", "model.norm=rmsnorm", "model.moe.shared_experts=1",
                       "model.moe.mlp_factor=1.0"]).model
    D, V, L = 64, 16, 2
    # per layer: attention 4 D^2, router D x 4, experts 3 x D x 64 each (2 of 4 active), shared 3 x D x 64
    assert matmul_params(cfg) == L * (4 * D * D + D * 4 + 2 / 4 * 4 * 3 * D * 64 + 3 * D * 64) + V * D
    with pytest.raises(ConfigError) as e:  # (Mixtral and Qwen3-MoE have no shared experts; nor has the web page)
        architecture(cfg)
    assert e.value.messages == [
        "model.moe.shared_experts=1: MixtralForCausalLM (the Hugging Face architecture of this model.norm and "
        "model.mlp) does not compute that, so the model cannot be exported (train without it to export)"]
    with pytest.raises(ConfigError, match=r"does not implement model.moe.num_experts, model.moe.mlp_factor, "
                                          r"model.moe.shared_experts; export format=hf instead"):
        check_supported(cfg)
    for overrides, message in [
        (["model.moe.top_k=5"], "model.moe.top_k=5 must be between 1 and model.moe.num_experts=4 (each token goes "
                                "to top_k different experts)"),
        (["model.moe.dispatch=capacity"], "model.moe.dispatch=capacity needs model.moe.capacity_factor > 0 (got None), "
                                          "e.g. 1.25: each expert then takes 1.25x its even share of the tokens"),
        (["model.moe.mlp_factor=1.01"], "model.moe.mlp_factor=1.01 * model.d_model=64 is not a whole number; choose "
                                         "a factor that gives an integer expert width"),
        (["sharding=fsdp_tp", "mesh.data=4", "mesh.model=2", "model.moe.mlp_factor=1.515625"],
         "model.moe.mlp_factor*model.d_model=97 is not divisible by 2, the size of mesh axis model that "
         "sharding.params.mlp shards it over; use a multiple of 2 or another sharding"),
        (["model.moe.first_dense_layers=2"],  # (2 layers: no MoE layer left)
         "model.moe.first_dense_layers=2 and model.moe.interleave_step=1 must leave model.num_layers=2 minus the "
         "first a positive multiple of the step (the layers after the dense ones run as groups of step - 1 dense + "
         "1 MoE)"),
        (["model.moe.interleave_step=0"], "model.moe.interleave_step=0 must be >= 1 (1 = every layer after "
                                          "model.moe.first_dense_layers is MoE)"),
        (["model.moe.shared_gate=true"], "model.moe.shared_gate=true gates the shared experts' output: set "
                                         "model.moe.shared_experts >= 1 (Qwen3-Next: 1), or shared_gate=false"),
        (["model.moe.dense_mlp=true", "model.moe.interleave_step=2"],
         "model.moe.dense_mlp=true runs a dense MLP beside the experts in every layer on the block's MLP norm: set "
         "model.moe.first_dense_layers=0, interleave_step=1 and model.pre_norms=true (now 0, 2, True)"),
        (["model.moe.capacity_factor=1.25"], "model.moe.capacity_factor=1.25 sizes capacity mode's slots; with "
         "model.moe.dispatch=dropless nothing reads it: set dispatch=capacity or leave capacity_factor null"),
        (["model.moe.dispatch=capacity", "model.moe.capacity_factor=1.25", "model.moe.grouped=blocks"],
         "model.moe.grouped=blocks is the dropless dispatch's grouped product; with model.moe.dispatch=capacity "
         "nothing reads it: leave it at auto"),
        (["model.moe.num_experts=0", "model.moe.router_scales=true"], "model.moe.router_scales=true set without "
         "experts (model.moe.num_experts=0); set model.moe.num_experts > 0 (Gemma 4 26B-A4B: 128; DeepSeek-V4: 256) or "
         "leave them at 0 / false"),
        (["mesh.data=2", "mesh.expert=4", "model.moe.num_experts=6"],
         "model.moe.num_experts=6 is not divisible by 4, the size of mesh axis expert that sharding.params.experts "
         "shards it over; use a multiple of 4 or another sharding"),
    ]:
        assert validate(load_config([*BASE, *overrides]), 8)[0] == message


def test_a_bad_moe_config_is_one_line_exit_2(tmp_path, capsys):
    from spmdgpt.cli import main

    code = main(["train", *BASE, f"run.dir={tmp_path / 'run'}", "model.moe.top_k=5"])
    assert code == 2 and not (tmp_path / "run").exists()
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "spmdgpt: error: model.moe.top_k=5 must be between 1 and model.moe.num_experts=4 (each token goes to top_k "
        "different experts)")


def test_tokamax_grouped_matmul_is_refused_off_a_gpu_and_compiles_for_an_h100(monkeypatch):
    """model.moe.grouped=tokamax (tokamax's Mosaic GPU ragged_dot, the gpu-kernels extra): off a GPU,
    or without the package, a one-line ConfigError naming the field; compiled for an H100 on this
    CPU (where tokamax is installed), the layer's grouped products are tokamax's kernels with
    exactly the active FLOPs (the dense MLP of width k x F's: no padding) and no cuDNN or Triton."""
    import importlib.util
    import sys
    from pathlib import Path

    from conftest import missing

    from spmdgpt.model import is_info, param_info
    from spmdgpt.model.moe import grouped_kind

    common = ["model.num_layers=1", "model.d_model=256", "model.num_heads=4", "model.mlp=swiglu", "mesh.data=1",
              "model.compute_dtype=bfloat16", "model.moe.num_experts=8", "model.moe.top_k=2", "model.mlp_factor=2",
              "model.moe.grouped=tokamax"]
    cfg = load_config(common).model
    with pytest.raises(ConfigError, match=r"^model.moe.grouped=tokamax needs an NVIDIA GPU \(this run's devices are "
                                          r"cpu\); use model.moe.grouped=auto$"):
        grouped_kind(cfg, "cpu")
    real = importlib.util.find_spec
    with monkeypatch.context() as m:
        m.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tokamax" else real(name, *a))
        with pytest.raises(ConfigError, match=r"^model.moe.grouped=tokamax needs the tokamax package"):
            grouped_kind(cfg, "gpu")
    if real("tokamax") is None:
        missing("SPMDGPT_REQUIRE_KERNELS", "needs tokamax: pip install -e '.[gpu-kernels]'")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import roofline

    from spmdgpt.plan.topology import target_default

    devices = compile_only_or_skip("h100")[:1]
    mesh = make_mesh(load_config(common).mesh, devices)
    T = 2048
    with jax.set_mesh(mesh), target_default(mesh):
        rules = Rules(mesh, load_config(common).sharding, cfg)
        p = jax.tree.map(lambda i: jax.ShapeDtypeStruct(i.shape[1:], jnp.bfloat16, sharding=rules.param_sharding(
            (None,) * (len(i.shape) - 1))), param_info(cfg).blocks.mlp, is_leaf=is_info)
        x = jax.ShapeDtypeStruct((T, 256), jnp.bfloat16, sharding=rules.param_sharding((None, None)))
        g = jax.grad(lambda p, x: jnp.sum(jnp.sin(moe(cfg, rules, p, x)[0].astype(jnp.float32))), argnums=(0, 1))
        text = jax.jit(g).lower(p, x).compile(compiler_options=compile_options(devices[0])).as_text()
    ks = [k for k in roofline.kernels(text) if k.kind == "gemm-grouped"]
    assert {k.op for k in ks} == {"tokamax_ragged_dot"} and len(ks) == 9  # (up, gate, down: forward, dx, dw)
    # 2 T copies through experts of width 512 = T tokens through a dense MLP of width 1024, x 3 passes
    assert sum(k.flops * k.runs for k in ks) == 9 * 2 * T * 256 * 1024
    assert "mosaic_gpu_v2" in text and "__cudnn" not in text and "xla.gpu.triton" not in text


def test_h100_dropless_layer_is_grouped_kernels_not_e_times_the_flops():
    """The dropless layer (forward + backward) compiled for an H100 without one (JAX's CUDA plugin,
    `topology=h100`'s device), read by benchmarks/roofline.py: with grouped=pallas (what auto picks
    on GPUs, unless a width is no multiple of 16: then blocks) its GEMM FLOPs are the dense MLP's
    of equal active width times the padded rows' bound (each expert's rows padded to whole blocks
    of 128: (n + E x 127) / n = 1.06 for n = 16,384 copies; blocks past the last group's are
    skipped at run time) and its temporaries within 2x the dense MLP's; with grouped=ragged they
    are 8x (E = 8: XLA's GPU ragged_dot multiplies the rows by every expert under a mask) and the
    temporaries more than 6x: if a JAX upgrade changes that lowering, this says so."""
    import sys
    from pathlib import Path

    from spmdgpt.config import GroupedMatmul
    from spmdgpt.model import is_info, param_info
    from spmdgpt.model.mlp import mlp
    from spmdgpt.model.moe import grouped_kind

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import roofline

    devices = compile_only_or_skip("h100")[:1]
    common = ["model.num_layers=1", "model.d_model=256", "model.num_heads=4", "model.mlp=swiglu", "mesh.data=1",
              "model.compute_dtype=bfloat16"]
    moe_cfg = load_config([*common, "model.moe.num_experts=8", "model.moe.top_k=2", "model.mlp_factor=2"]).model
    dense = load_config([*common, "model.mlp_factor=4"]).model
    mesh = make_mesh(load_config(common).mesh, devices)
    T, results, times = 8192, {}, {}
    with jax.set_mesh(mesh):
        rules = Rules(mesh, load_config(common).sharding, moe_cfg)
        assert grouped_kind(moe_cfg, "gpu") == GroupedMatmul.pallas and block_rows(2 * T, 8) == 128
        odd = dataclasses.replace(moe_cfg, moe=dataclasses.replace(moe_cfg.moe, mlp_factor=0.75))  # (192 = 3 x 64)
        assert grouped_kind(dataclasses.replace(odd, d_model=200), "gpu") == GroupedMatmul.blocks  # (200 = 8 x 25:
        # no tile of 16; auto keeps blocks)
        assert grouped_kind(odd, "gpu") == GroupedMatmul.pallas

        def shapes(cfg):
            return jax.tree.map(lambda i: jax.ShapeDtypeStruct(i.shape[1:], jnp.bfloat16, sharding=rules.param_sharding(
                (None,) * (len(i.shape) - 1))), param_info(cfg).blocks.mlp, is_leaf=is_info)

        def grouped(kind):
            return dataclasses.replace(moe_cfg, moe=dataclasses.replace(moe_cfg.moe, grouped=GroupedMatmul(kind)))

        x = jax.ShapeDtypeStruct((T, 256), jnp.bfloat16, sharding=rules.param_sharding((None, None)))
        kinds = [(k, lambda p, x, c=grouped(k): moe(c, rules, p, x)[0], moe_cfg) for k in ("pallas", "ragged")]
        for name, f, cfg in [("dense", lambda p, x: mlp(dense, rules, p, x)[0], dense), *kinds]:
            g = jax.grad(lambda p, x: jnp.sum(jnp.sin(f(p, x).astype(jnp.float32))), argnums=(0, 1))
            compiled = jax.jit(g).lower(shapes(cfg), x).compile(compiler_options=compile_options(devices[0]))
            totals = roofline.roofline(roofline.kernels(compiled.as_text()), 800.0, 3.0e12)
            grouped = totals.get("gemm-grouped", {"flops": 0.0, "ms": 0.0})
            results[name] = (totals["gemm"]["flops"] + grouped["flops"], compiled.memory_analysis().temp_size_in_bytes)
            times[name] = (totals["step"]["ms"], grouped["ms"], grouped["flops"])
    (dense_flops, dense_temp), (flops, temp), (ragged_flops, ragged_temp) = (results[n] for n in
                                                                             ("dense", "pallas", "ragged"))
    router = 3 * 2 * T * 256 * 8  # (the router's [D, E] product, forward and both backward)
    padded = (2 * T + 8 * 127 + 127) // 128 * 128
    assert flops - router == pytest.approx(dense_flops * padded / (2 * T), rel=1e-9) and temp <= 2 * dense_temp
    assert ragged_flops - router == pytest.approx(8 * dense_flops, rel=1e-9) and ragged_temp > 6 * dense_temp
    # the grouped kernels are their own kind (timed at the rate an H200 measured them: test_roofline)
    _, grouped_ms, grouped_flops = times["pallas"]
    assert grouped_flops == pytest.approx(flops - router, rel=1e-9) and times["ragged"][2] == 0.0
    # (between the row products' rate and the weight gradient's)
    assert grouped_flops / (0.64 * 800e12) * 1e3 < grouped_ms < grouped_flops / (0.54 * 800e12) * 1e3
