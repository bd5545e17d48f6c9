"""Gated DeltaNet (spmdgpt.model.delta_rule, spmdgpt.model.deltanet, model.deltanet): the chunkwise
parallel form against the token-by-token recurrence in float64 (with documents and a carried
state), packed documents against each document alone, bfloat16 inputs, gradients; the unit
against a float64 reference of its equations; a hybrid's layer order; a data x model mesh against
one device; the configuration's refusals; Qwen3.5's softmax layers (the output gate, partial RoPE).
The engine's decoding of a hybrid is checked against the full forward pass in tests/test_engine.py."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layouts import assert_close, cfg_for, reference, run

from spmdgpt.config import ConfigError, deltanet_dims, linear_layers, load_config, validate
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import delta_rule, forward, init_params
from spmdgpt.model.attention import UnitInputs
from spmdgpt.model.blocks import block
from spmdgpt.model.deltanet import deltanet_attention
from spmdgpt.model.head import embed, unembed
from spmdgpt.model.layers import norm

HYBRID = ("model.deltanet.full_attention_interval=2", "model.deltanet.key_heads=2", "model.deltanet.value_heads=4",
          "model.deltanet.key_dim=8", "model.deltanet.value_dim=6", "model.deltanet.chunk=16")


def _inputs(b=2, h=3, t=150, dk=8, dv=5, seed=0):
    """Random q, k (unit length), v, log decays g in (-1, 0), write strengths, 5 documents a row, a state."""
    r = np.random.default_rng(seed)
    unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)  # noqa: E731
    q, k = unit(r.normal(size=(b, h, t, dk))), unit(r.normal(size=(b, h, t, dk)))
    v, g, beta = r.normal(size=(b, h, t, dv)), -r.uniform(0, 1, size=(b, h, t)), r.uniform(size=(b, h, t))
    seg = np.sort(r.integers(0, 5, size=(b, t)), axis=1).astype(np.int32)
    return (q, k, v, g, beta), seg, r.normal(size=(b, h, dk, dv))


@pytest.mark.parametrize("chunk", [30, 64])
def test_chunked_equals_the_recurrence_in_float64(chunk):
    """Chunks that divide the sequence (30 of 150 tokens) and that do not (64: padded), with and
    without documents and a carried state: outputs and final states to 1e-10."""
    arrays, seg, state = _inputs()
    recurrent, chunked = jax.jit(delta_rule.recurrent), jax.jit(delta_rule.chunked, static_argnames="chunk")
    with jax.enable_x64(True):
        a = [jnp.asarray(x) for x in arrays]
        for segments in (None, jnp.asarray(seg)):
            for s0 in (None, jnp.asarray(state)):
                want, want_s = recurrent(*a, segments, s0)
                got, got_s = chunked(*a, segments, s0, chunk=chunk)
                assert got.dtype == jnp.float64
                assert float(jnp.max(jnp.abs(got - want))) < 1e-10
                assert float(jnp.max(jnp.abs(got_s - want_s))) < 1e-10
        # (the documents and the state change the answer: the comparison above is not vacuous)
        plain = chunked(*a, chunk=chunk)[0]
        assert float(jnp.max(jnp.abs(plain - chunked(*a, jnp.asarray(seg), chunk=chunk)[0]))) > 0.1
        assert float(jnp.max(jnp.abs(plain - chunked(*a, state=jnp.asarray(state), chunk=chunk)[0]))) > 0.1


def test_channel_gates_chunked_equal_the_recurrence():
    """Kimi Delta Attention's decay per key channel (g [b, h, t, dk], one rate per row of the state:
    2 rows, 2 heads, 40 tokens in chunks of 16, with documents and a carried state): the chunked
    form equals the token-by-token recurrence to 1e-10 in float64 and 2e-5 in float32, and so do
    its gradients (float64, 1e-9); transition's (M, B) carry any state to the chunked form's final
    one; the same rate in every channel is Gated DeltaNet's scalar gate."""
    arrays, seg, state = _inputs(b=2, h=2, t=40, dk=4, dv=3, seed=1)
    q, k, v, g, beta = arrays
    g = -np.random.default_rng(2).uniform(0, 1, size=g.shape + (4,)) ** 2 * 3  # (strong and weak channels)
    chunk = partial(delta_rule.chunked, chunk=16)
    with jax.enable_x64(True):
        a = [jnp.asarray(x) for x in (q, k, v, g, beta)]
        s, s0 = jnp.asarray(seg), jnp.asarray(state)
        want, want_s = jax.jit(delta_rule.recurrent)(*a, s, s0)
        got, got_s = jax.jit(chunk)(*a, s, s0)
        assert float(jnp.max(jnp.abs(got - want))) < 1e-10 and float(jnp.max(jnp.abs(got_s - want_s))) < 1e-10
        m, add = jax.jit(partial(delta_rule.transition, chunk=16))(a[1], a[2], a[3], a[4])
        carried = jax.jit(chunk)(*a, state=s0)[1]
        assert float(jnp.max(jnp.abs(jnp.einsum("bhkj,bhjv->bhkv", m, s0) + add - carried))) < 1e-10
        same = [*a[:3], jnp.broadcast_to(a[3][..., :1], a[3].shape), a[4]]
        scalar = jax.jit(chunk)(*a[:3], a[3][..., 0], a[4], s, s0)[0]
        assert float(jnp.max(jnp.abs(jax.jit(chunk)(*same, s, s0)[0] - scalar))) < 1e-10
        assert float(jnp.max(jnp.abs(scalar - got))) > 0.05  # (the channels' own rates matter)

        def loss(fn, *x):
            o, st = fn(*x, s, s0)
            return jnp.sum(o * jnp.cos(o)) + jnp.sum(st ** 2)

        g_chunk = jax.jit(jax.grad(lambda *x: loss(chunk, *x), argnums=(0, 1, 2, 3, 4)))(*a)
        g_rec = jax.jit(jax.grad(lambda *x: loss(delta_rule.recurrent, *x), argnums=(0, 1, 2, 3, 4)))(*a)
        for x, y in zip(g_chunk, g_rec, strict=True):
            assert float(jnp.max(jnp.abs(x - y))) < 1e-9 * max(1.0, float(jnp.max(jnp.abs(y))))
    a32 = [jnp.asarray(x, jnp.float32) for x in (q, k, v, g, beta)]
    got32 = jax.jit(chunk)(*a32, s, jnp.asarray(state, jnp.float32))[0]
    assert got32.dtype == jnp.float32
    assert float(jnp.max(jnp.abs(got32 - np.asarray(want)))) < 2e-5


def test_packed_documents_equal_each_document_alone():
    """A packed row's documents each start from a zero state: the chunked form over the packed
    row equals the recurrence over each document by itself (float64)."""
    arrays, seg, _ = _inputs(b=1, t=100)
    with jax.enable_x64(True):
        got = np.asarray(jax.jit(partial(delta_rule.chunked, chunk=16))(*map(jnp.asarray, arrays),
                                                                          jnp.asarray(seg))[0])
        recurrent = jax.jit(delta_rule.recurrent)
        for d in np.unique(seg[0]):
            cols = np.flatnonzero(seg[0] == d)
            alone = [jnp.asarray(x[:, :, cols]) for x in arrays]
            want = np.asarray(recurrent(*alone)[0])
            np.testing.assert_allclose(got[:, :, cols], want, atol=1e-10)


def test_bfloat16_inputs_and_the_gradients():
    """bfloat16 q, k, v (float32 inside) within 1e-2 of the float64 recurrence; the chunked form's
    gradients equal the recurrence's (float64, 1e-9), finite with documents."""
    arrays, seg, _ = _inputs(t=96)
    with jax.enable_x64(True):
        want = jax.jit(delta_rule.recurrent)(*map(jnp.asarray, arrays), jnp.asarray(seg))[0]
        half = [jnp.asarray(x, jnp.bfloat16) if i < 3 else jnp.asarray(x, jnp.float32) for i, x in enumerate(arrays)]
        got = jax.jit(partial(delta_rule.chunked, chunk=32))(*half, jnp.asarray(seg))[0]
        assert got.dtype == jnp.bfloat16
        assert float(jnp.max(jnp.abs(got.astype(jnp.float64) - want))) < 1e-2

        def loss(fn, *a):
            o, s = fn(*a, jnp.asarray(seg))
            return jnp.sum(o * jnp.cos(o)) + jnp.sum(s ** 2)

        a = [jnp.asarray(x) for x in arrays]
        every = (0, 1, 2, 3, 4)
        g_chunk = jax.jit(jax.grad(lambda *a: loss(lambda *x: delta_rule.chunked(*x, chunk=32), *a),
                                   argnums=every))(*a)
        g_rec = jax.jit(jax.grad(lambda *a: loss(delta_rule.recurrent, *a), argnums=every))(*a)
        for x, y in zip(g_chunk, g_rec, strict=True):
            assert bool(jnp.all(jnp.isfinite(x)))
            assert float(jnp.max(jnp.abs(x - y))) < 1e-9 * max(1.0, float(jnp.max(jnp.abs(y))))


def _one_device(*overrides):
    cfg = load_config(["+experiment=staircase", "mesh.data=1", "model.init_std=0.2", *HYBRID, *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
    return cfg, mesh, rules, params


def _silu(x):
    return x / (1 + np.exp(-x))


def reference_unit(cfg, p, x, seg):
    """The unit as the paper and Qwen3.5 write it, one sequence, float64, token by token: x [t, D]."""
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), p)
    Hk, Hv, dk, dv = deltanet_dims(cfg)
    K, t = cfg.deltanet.conv, len(x)
    proj = np.concatenate([np.einsum("td,dcnh->tcnh", x, p.w_qk).reshape(t, -1),
                           np.einsum("td,dnh->tnh", x, p.w_v).reshape(t, -1)], axis=1)  # [t, channels]
    w = np.concatenate([p.conv_qk.reshape(K, -1), p.conv_v.reshape(K, -1)], axis=1)
    conv = np.zeros_like(proj)
    for i in range(t):
        for j in range(K):  # tap j reads token i - (K - 1) + j, if in the same document
            src = i - (K - 1) + j
            if src >= 0 and seg[src] == seg[i]:
                conv[i] += w[j] * proj[src]
    conv = _silu(conv)
    qk, v = conv[:, :2 * Hk * dk].reshape(t, 2, Hk, dk), conv[:, 2 * Hk * dk:].reshape(t, Hv, dv)
    l2 = lambda a: a / np.sqrt(np.sum(a * a, axis=-1, keepdims=True) + 1e-6)  # noqa: E731
    q, k = l2(qk[:, 0]) / np.sqrt(dk), l2(qk[:, 1])
    channel = cfg.deltanet.gate == "channel"  # (Kimi Delta Attention: a decay per key channel, a sigmoid gate)
    if channel:
        beta = 1 / (1 + np.exp(-x @ p.w_b))
        g = -np.exp(p.a_log)[:, None] * np.log1p(np.exp(np.einsum("td,dr,rnh->tnh", x, p.w_fa, p.w_fb) + p.dt_bias))
        z = np.einsum("td,dr,rnh->tnh", x, p.w_ga, p.w_gb)
    else:
        ab = np.einsum("td,dcn->tcn", x, p.w_ab)
        beta = 1 / (1 + np.exp(-ab[:, 1]))
        g = -np.exp(p.a_log) * np.log1p(np.exp(ab[:, 0] + p.dt_bias))
        z = np.einsum("td,dnh->tnh", x, p.w_z)
    out = np.zeros((t, Hv, dv))
    for h in range(Hv):
        kh = h // (Hv // Hk)
        S = np.zeros((dk, dv))
        for i in range(t):
            if i > 0 and seg[i] != seg[i - 1]:
                S = np.zeros((dk, dv))
            S = (np.exp(g[i, h])[:, None] if channel else np.exp(g[i, h])) * S
            S = S + np.outer(k[i, kh], beta[i, h] * (v[i, h] - S.T @ k[i, kh]))
            out[i, h] = S.T @ q[i, kh]
    o = out / np.sqrt(np.mean(out * out, axis=-1, keepdims=True) + cfg.norm_eps) * p.norm * (
        1 / (1 + np.exp(-z)) if channel else _silu(z))
    return np.einsum("tnh,nhd->td", o, p.w_o)


@pytest.mark.parametrize("gate", ["head", "channel"])
def test_the_unit_equals_its_equations_in_float64(gate):
    """Grouped value heads (4 values on 2 keys), a convolution across a document boundary, chunks of
    16 over 40 tokens: the unit in float64 equals the token-by-token reference to 1e-10; with
    gate=channel (Kimi Delta Attention) its decay per key channel and sigmoid output gate too."""
    cfg, mesh, rules, params = _one_device(f"model.deltanet.gate={gate}")
    assert (params.linear_blocks.attn.w_fb is None) == (gate == "head")
    t = 40
    seg = np.repeat([0, 1, 2], [11, 17, 12]).astype(np.int32)
    with jax.enable_x64(True), jax.set_mesh(mesh):
        p = jax.tree.map(lambda a: jnp.asarray(a[0], jnp.float64), params.linear_blocks.attn)
        x = jax.random.normal(jax.random.key(3), (t, cfg.model.d_model), jnp.float64)
        inputs = UnitInputs(jnp.arange(t), 1, jnp.asarray(seg)[None])
        got, cache, aux = jax.jit(lambda p, x: deltanet_attention(cfg.model, rules, p, x, inputs))(p, x)
        assert cache is None and aux == {}
        want = reference_unit(cfg.model, p, np.asarray(x), seg)
        assert float(np.max(np.abs(np.asarray(got) - want))) < 1e-10 * max(1.0, float(np.max(np.abs(want))))


def test_a_hybrid_runs_its_layers_in_order():
    """model.deltanet.full_attention_interval=2 over 4 layers: layers 0 and 2 are Gated DeltaNet
    (linear_blocks), 1 and 3 softmax attention (blocks); the model's scanned forward equals the
    blocks applied one by one in that order."""
    cfg, mesh, rules, params = _one_device("model.num_layers=4")
    m = cfg.model
    assert linear_layers(m) == (True, False, True, False)
    assert jax.tree.leaves(params.linear_blocks)[0].shape[0] == 2 and jax.tree.leaves(params.blocks)[0].shape[0] == 2
    tokens = jax.random.randint(jax.random.key(1), (2, 24), 0, m.vocab_size)
    with jax.set_mesh(mesh):
        whole = jax.jit(lambda p, t: forward(m, rules, p, t)[0])
        got = whole(params, tokens)

        @jax.jit
        def one_by_one(params, tokens):
            x = embed(m, rules, params, tokens)
            pos = jnp.arange(24)
            for i, linear in enumerate(linear_layers(m)):
                stack = "linear_blocks" if linear else "blocks"
                p = jax.tree.map(lambda a, i=i: a[i // 2], getattr(params, stack))
                x = block(m, rules, p, x, pos, 2, stack=stack)[0]
            return unembed(m, rules, params, norm(m, rules, params.ln_f, x)).reshape(got.shape)

        want = one_by_one(params, tokens)
        # causal: a later token changes nothing before it
        later = whole(params, tokens.at[:, 12].set((tokens[:, 12] + 1) % m.vocab_size))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
    assert float(jnp.max(jnp.abs(later - got)[:, :12])) == 0.0 and float(jnp.max(jnp.abs(later - got)[:, 12:])) > 1e-3


def test_data_model_and_context_parallel_equal_one_device():
    """A hybrid on data 2 x context 2 x model 2 (the DeltaNet heads split like attention heads; on
    the context ring of 2 the sequence's 4 chunks of 16 pass the state 0 -> 1 -> 2 -> 3 between and
    within devices, documents starting inside chunks and at their first token), its first layer's MLP
    dense and experts in the other three (Kimi-Linear-48B-A3B's model.moe.first_dense_layers=1: the
    dense stack, then the first group's softmax layer, then a group): the loss and every gradient, with
    documents and restarted positions, equal one device's. (A ring of 4, 8 chunks, agreed too when it
    was written; zeroing the carried state, the document starts at chunk boundaries or the
    convolution's inputs before a chunk each broke it; Kimi Delta Attention's per-channel decay,
    model.deltanet.gate=channel, agreed too when it was added: 20 s, not kept.)"""
    model = ("model.deltanet.full_attention_interval=2", "model.deltanet.key_heads=2", "model.deltanet.value_heads=4",
             "model.deltanet.key_dim=8", "model.deltanet.chunk=16", "model.moe.num_experts=4",
             "model.moe.first_dense_layers=1")
    want = reference(model)
    got = run(cfg_for("sharding=fsdp_tp", "mesh.data=2", "mesh.context=2", "mesh.model=2", *model))
    assert abs(got[0] - want[0]) <= 1e-5 * abs(want[0])
    assert_close(got[1], want[1])


@pytest.mark.parametrize("overrides, message", [
    (("model.deltanet.full_attention_interval=5",), "model.num_layers=4 is fewer than model.deltanet."
                                                    "full_attention_interval=5"),
    (("model.deltanet.full_attention_interval=1",), "every layer would be softmax attention"),
    (("model.deltanet.full_attention_interval=2", "model.deltanet.key_heads=3", "model.deltanet.value_heads=4"),
     "must be a multiple of model.deltanet.key_heads=3"),
    (("model.deltanet.full_attention_interval=2", "model.deltanet.gate=row"), "model.deltanet.gate=row is not a gate"),
    (("model.deltanet.gate=channel",), "model.deltanet.gate=channel without linear-attention layers"),
])
def test_refusals_name_the_field(overrides, message):
    cfg = load_config(["+experiment=staircase", "model.num_layers=4", *overrides])
    errors = validate(cfg, 2)
    assert any(message in e for e in errors), errors


@pytest.mark.parametrize("overrides, message", [
    (("model.moe.first_dense_layers=2",), "model.moe.first_dense_layers=2 in a hybrid: its dense layers are Gated "
     "DeltaNet layers of the first group of model.deltanet.full_attention_interval=2 (Kimi-Linear-48B-A3B: 1); "
     "choose 0 to 1"),
    (("model.moe.interleave_step=2",), "model.moe.interleave_step=2 in a hybrid (model.deltanet): its MoE layers are "
     "every layer after model.moe.first_dense_layers (Qwen3-Next, Kimi Linear); set interleave_step=1"),
])
def test_dense_layers_past_the_first_group_are_one_line_exit_2(overrides, message, tmp_path, capsys):
    """A hybrid's dense first layers (model.moe.first_dense_layers) are Gated DeltaNet layers of its first group
    (0 to k - 1 of them); more, or MoE layers interleaved with dense ones, are one line naming the field: exit 2,
    before anything is built."""
    from spmdgpt.cli import main

    model = ["+experiment=staircase", "model.num_layers=4", "model.deltanet.full_attention_interval=2",
             "model.moe.num_experts=4", *overrides]
    assert validate(load_config(model), 2) == [message]
    assert main(["train", *model, f"run.dir={tmp_path / 'run'}"]) == 2 and not (tmp_path / "run").exists()
    assert capsys.readouterr().err.strip().splitlines() == [f"spmdgpt: error: {message}"]


@pytest.mark.parametrize("overrides, message", [
    (("mesh.stage=2",), "model.deltanet.full_attention_interval=2: a hybrid's two layer stacks do not run in a "
                        "pipeline yet (mesh.stage=2); set mesh.stage=1"),
    (("mesh.context=4", "data.seq_len=16", "model.max_seq_len=16"),
     "data.seq_len=16 over 2 x 4 chunks (mesh.context=4) leaves chunks shorter than Gated DeltaNet's convolution "
     "reaches back (model.deltanet.conv - 1 = 3 tokens); use a longer data.seq_len or a smaller mesh.context"),
])
def test_pipelines_and_too_short_context_chunks_are_refused(overrides, message):
    assert validate(cfg_for("mesh.data=-1", "model.deltanet.full_attention_interval=2", *overrides), 8) == [message]


def test_an_unknown_field_is_refused():
    with pytest.raises(ConfigError, match="model.deltanet.heads"):
        load_config(["+experiment=staircase", "model.deltanet.heads=2"])


def test_the_output_gate_and_partial_rope():
    """model.attention_gate: with its projection at zero every gate is sigmoid(0) = 1/2, so the unit's
    output is half the ungated one's (the same other weights); model.rope_fraction=0.25 of a head of
    16: the first 4 dimensions rotate with a 4-wide head's frequencies, the other 12 pass unchanged."""
    from spmdgpt.model.attention import rotate
    from spmdgpt.model.layers import rope

    for extra in ([], ["model.num_kv_heads=2"]):
        cfg, mesh, rules, params = _one_device("model.attention_gate=true", "model.rope_fraction=0.25",
                                               "model.head_dim=16", "model.deltanet.full_attention_interval=0", *extra)
        plain = load_config(["+experiment=staircase", "mesh.data=1", "model.head_dim=16", "model.rope_fraction=0.25",
                             *extra]).model
        from spmdgpt.model.params import block_units

        with jax.set_mesh(mesh):
            p = jax.tree.map(lambda a: a[0], params.blocks.attn)
            assert p.w_gate.shape == (cfg.model.d_model, 4, 16)
            x = jax.random.normal(jax.random.key(2), (2 * 12, cfg.model.d_model))
            inputs = UnitInputs(jnp.arange(12), 2)
            unit = block_units(cfg.model)[0]
            gated = jax.jit(lambda p: unit.apply(cfg.model, rules, p, x, inputs)[0])
            closed = gated(p._replace(w_gate=jnp.zeros_like(p.w_gate)))
            ungated = jax.jit(lambda p: block_units(plain)[0].apply(plain, rules, p, x, inputs)[0])(
                p._replace(w_gate=None))
            opened = gated(p)
        np.testing.assert_allclose(np.asarray(closed), 0.5 * np.asarray(ungated), atol=1e-6)
        assert float(jnp.max(jnp.abs(opened - closed))) > 1e-3
    q = jax.random.normal(jax.random.key(4), (1, 12, 2, 16))
    pos = jnp.arange(12)
    with jax.set_mesh(mesh):
        got = jax.jit(lambda q: rotate(cfg.model, q, pos))(q)
    np.testing.assert_array_equal(np.asarray(got[..., 4:]), np.asarray(q[..., 4:]))
    want = rope(q[..., :4], pos, cfg.model.rope_theta)  # (a 4-wide head: theta^(-2i/4))
    np.testing.assert_allclose(np.asarray(got[..., :4]), np.asarray(want), atol=1e-6)
    assert any("model.rope_fraction=1.5 must be in (0, 1]" in e
               for e in validate(load_config(["+experiment=staircase", "model.rope_fraction=1.5"]), 1))
