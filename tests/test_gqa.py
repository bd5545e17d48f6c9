"""Grouped-query attention (model.num_kv_heads): the same function as multi-head attention with
each key/value head repeated over its group, on one device and sharded, its cache, its FLOPs and
its errors."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from spmdgpt.config import ConfigError, MlpType, NormType, load_config, validate
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import Attention, GroupedAttention, forward, init_cache, init_params
from spmdgpt.plan.flops import flops_per_token

BASE = ["+experiment=staircase", "model.num_heads=4", "model.num_kv_heads=2", "model.bias=true",
        "model.qk_norm=true", "model.init_std=0.2"]


def _as_multi_head(params, groups: int):
    """The multi-head parameters that compute what GQA params do: w_qkv [L, D, 3, N, H] whose key
    and value heads are the K/V heads each repeated `groups` times in a row."""
    a = params.blocks.attn
    rep = lambda x: jnp.repeat(x, groups, axis=-2)  # noqa: E731  (the heads axis, before head_dim)
    attn = Attention(jnp.stack([a.w_q, rep(a.w_kv[:, :, 0]), rep(a.w_kv[:, :, 1])], axis=2),
                     jnp.stack([a.b_q, rep(a.b_kv[:, 0]), rep(a.b_kv[:, 1])], axis=1), a.w_o, a.b_o)
    return params._replace(blocks=params.blocks._replace(attn=attn))


@pytest.mark.parametrize("kv", [2, 1])
def test_grouped_attention_equals_multi_head_with_repeated_kv(kv):
    """Logits of a GQA model (K = 2, and multi-query K = 1, of 4 heads; biases on, QK-norm on)
    equal those of the multi-head model whose K/V weights repeat each K/V head over its group,
    to float32 rounding; and the parameters are [D, N, H] queries and [D, 2, K, H] keys/values."""
    cfg = load_config([*BASE, f"model.num_kv_heads={kv}", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding)
    toks = jnp.asarray(np.random.default_rng(0).integers(0, 10, (2, 32)), jnp.int32)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        a = params.blocks.attn
        assert isinstance(a, GroupedAttention)
        assert (a.w_q.shape, a.w_kv.shape, a.b_kv.shape) == ((2, 64, 4, 16), (2, 64, 2, kv, 16), (2, 2, kv, 16))
        a = a._replace(b_q=a.b_q + 0.3, b_kv=a.b_kv - 0.2)  # (biases start at zero)
        params = params._replace(blocks=params.blocks._replace(attn=a))
        got = forward(cfg.model, rules, params, toks)[0]
        want = forward(dataclasses.replace(cfg.model, num_kv_heads=None), rules, _as_multi_head(params, 4 // kv), toks)[
            0
        ]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=2e-5)
    assert float(jnp.max(jnp.abs(want))) > 1.0


@pytest.mark.parametrize("data,model,kv_spec", [(4, 2, "model"), (2, 4, None)])
def test_grouped_attention_sharded_equals_one_device(data, model, kv_spec):
    """fsdp_tp on data x model devices: logits (full-sequence and cached decode) equal one
    device's. 2 K/V heads over a model axis of 2: the K/V weights and the cache are split by K/V
    head; over a model axis of 4 (which 2 does not divide): replicated on it, the 4 query heads
    still split."""
    cfg1 = load_config([*BASE, "mesh.data=1"])
    cfg8 = load_config([*BASE, "sharding=fsdp_tp", f"mesh.data={data}", f"mesh.model={model}"])
    assert validate(cfg8, 8) == []
    toks = jnp.asarray(np.random.default_rng(1).integers(0, 10, (8, 32)), jnp.int32)
    out = []
    for cfg, devices in ((cfg1, jax.devices()[:1]), (cfg8, jax.devices()[:8])):
        mesh = make_mesh(cfg.mesh, devices)
        rules = Rules(mesh, cfg.sharding, cfg.model)
        with jax.set_mesh(mesh):
            params = init_params(cfg.model, jax.random.key(0), rules)
            full = jax.jit(lambda p, t: forward(cfg.model, rules, p, t)[0])(params, toks)
            pos = jnp.broadcast_to(jnp.arange(32, dtype=jnp.int32), (8, 32))
            cache = init_cache(cfg.model, rules, 8, 40)
            fwd = jax.jit(lambda p, t, q, c, prefill: forward(cfg.model, rules, p, t, q, c, prefill=prefill),
                          static_argnums=4)
            cache = fwd(params, toks[:, :31], pos[:, :31], cache, True)[1]
            step = fwd(params, toks[:, 31:], pos[:, 31:], cache, False)[0]
            out.append((np.asarray(full), np.asarray(step)))
            if len(devices) == 8:
                assert params.blocks.attn.w_kv.sharding.spec == P(None, ("data", "context"), None, kv_spec, None)
                assert params.blocks.attn.w_q.sharding.spec == P(None, ("data", "context"), "model", None)
                assert cache.layers["k"].shape == (2, 8, 2, 40, 16)
                assert cache.layers["k"].sharding.spec == P(
                    None, ("data", "expert"), kv_spec, None, None
                )  # (the batch: data x expert)
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=0, atol=2e-5)
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=0, atol=2e-5)
    np.testing.assert_allclose(out[0][1][:, -1], out[0][0][:, -1], rtol=0, atol=2e-5)  # decode == full


def test_grouped_attention_flops_cache_and_errors():
    """FLOPs per token drop by 6 x the K/V weights left out; the cache holds K heads; bad values
    are one line each."""
    mha, gqa, mqa = (load_config(["+experiment=staircase", "model.num_heads=4", *x]).model
                     for x in ([], ["model.num_kv_heads=2"], ["model.num_kv_heads=1"]))
    L, D, H = 2, 64, 16
    assert flops_per_token(mha, 128) - flops_per_token(gqa, 128) == 6 * L * D * 2 * 2 * H
    assert flops_per_token(mha, 128) - flops_per_token(mqa, 128) == 6 * L * D * 2 * 3 * H
    cfg = load_config(["+experiment=staircase", "model.num_kv_heads=1", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        assert init_cache(cfg.model, Rules(mesh, cfg.sharding), 2, 8).layers["k"].shape == (2, 2, 1, 8, 16)
    for kv, heads in ((3, 4), (8, 4), (0, 4)):
        errs = validate(
            load_config(["+experiment=staircase", f"model.num_heads={heads}", f"model.num_kv_heads={kv}"]), 1
        )
        assert errs == [f"model.num_kv_heads={kv} must divide model.num_heads={heads} (each key/value head serves as "
                        "many query heads); choose a divisor: 1 = multi-query, num_heads = multi-head"]
    # K/V heads that do not divide the model axis are replicated on it (not an error), the query heads
    # must still divide it
    mqa_tp = ["+experiment=staircase", "model.num_kv_heads=1", "sharding=tp", "mesh.data=4", "mesh.model=2"]
    assert validate(load_config(mqa_tp), 8) == []
    # the rule goes when either attention stack's heads do not divide (Gemma 4's G layers: model.global_kv_heads)
    for kv, global_kv, spec in ((2, None, "model"), (1, None, None), (2, 1, None), (2, 2, "model")):
        cfg = load_config([*mqa_tp, f"model.num_kv_heads={kv}", "model.window_pattern=LG", "model.sliding_window=8",
                           f"model.global_kv_heads={global_kv or 'null'}", "model.global_head_dim=32"])
        rules = Rules(make_mesh(cfg.mesh, jax.devices()), cfg.sharding, cfg.model)
        assert rules.spec("kv_heads") == P(spec), (kv, global_kv)
    assert validate(load_config([*mqa_tp, "model.num_heads=3", "model.d_model=48"]), 8) == [
        "model.num_heads=3 is not divisible by 2, the size of mesh axis model that sharding.params.heads shards it "
        "over; use a multiple of 2 or another sharding",
        "model.num_heads=3 is not divisible by 2, the size of mesh axis model that sharding.compute.heads shards it "
        "over; use a multiple of 2 or another sharding"]


def test_grouped_attention_exports_to_llama_and_is_refused_by_neox_and_the_page():
    """A GQA model exports as Llama with num_key_value_heads (the logits: tests/test_hf.py);
    GPT-NeoX and the web page have no grouped K/V heads: one line each naming model.num_kv_heads."""
    from spmdgpt import web
    from spmdgpt.hf import architecture, hf_config

    gqa = load_config(["+experiment=staircase", "model.num_kv_heads=2", "model.norm=rmsnorm", "model.mlp=swiglu"]).model
    config = hf_config(gqa, eos_id=0)
    assert (config["architectures"], config["num_attention_heads"], config["num_key_value_heads"]) == (
        ["LlamaForCausalLM"], 4, 2)
    with pytest.raises(ConfigError) as e:
        architecture(dataclasses.replace(gqa, norm=NormType.layernorm, mlp=MlpType.gelu))
    assert e.value.messages[0].startswith("model.num_kv_heads=2: GPTNeoXForCausalLM (the Hugging Face architecture")
    with pytest.raises(ConfigError, match=r"does not implement model.num_kv_heads; export format=hf instead"):
        web.check_supported(gqa)
    same = dataclasses.replace(gqa, num_kv_heads=4)
    assert hf_config(same, eos_id=0)["num_key_value_heads"] == 4
    web.check_supported(same)


@pytest.mark.parametrize("experiment,params,kv_bytes", [
    ("llama3_8b", 8_030_261_248, 32 * 2 * 8 * 128 * 2),  # Meta's 8.03B; 128 KiB of bfloat16 K/V per token
    ("llama3_2_1b", 1_235_814_400, 16 * 2 * 8 * 64 * 2),  # Meta's 1.24B; 32 KiB per token
    ("shakespeare_gpt2_gqa", None, 4 * 2 * 2 * 64 * 4),  # 2 of 4 heads: half shakespeare_gpt2's cache
])
def test_published_shapes_count_their_published_parameters(experiment, params, kv_bytes):
    """The packaged GQA experiments: Llama 3.1 8B's and Llama 3.2 1B's parameter counts (tied
    1B, untied 8B), and the KV cache's bytes per token (layers x K and V x K/V heads x head_dim x
    the compute dtype's bytes), read from the abstract cache."""
    import math

    from spmdgpt.model import is_info, param_info

    cfg = load_config([f"+experiment={experiment}", "mesh.data=1"])
    if params is not None:
        assert sum(math.prod(i.shape) for i in jax.tree.leaves(param_info(cfg.model), is_leaf=is_info)) == params
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        cache = jax.eval_shape(lambda: init_cache(cfg.model, Rules(mesh, cfg.sharding, cfg.model), 1, 16))
    k, v = cache.layers["k"], cache.layers["v"]
    assert (k.size + v.size) * k.dtype.itemsize // 16 == kv_bytes
