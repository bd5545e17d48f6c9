"""Model numerics: causality, RoPE, init loss, attention variants, metadata."""

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import ParamInfo, forward, init_params, loss_fn, num_params, param_info
from spmdgpt.model.attention import (
    blocked_causal_attention,
    causal_mask,
    dot_product_attention,
)
from spmdgpt.model.layers import rope
from spmdgpt.optim import weight_decay_mask
from spmdgpt.plan.flops import flops_per_token, matmul_params

ONE = jax.devices()[:1]


def setup(*overrides):
    cfg = load_config(["+experiment=staircase", "mesh.data=1", *overrides])
    mesh = make_mesh(cfg.mesh, ONE)
    rules = Rules(mesh, cfg.sharding)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
    return cfg, mesh, rules, params


def test_init_draws_jax_randoms_values_from_one_threefry():
    """A small model's leaves (normal, and Gated DeltaNet's uniform-drawn decays) take their random
    bits from one threefry over all of them (`params._bits`; its compile a fraction of one threefry
    per leaf): each leaf equals, bit for bit, jax.random.normal / uniform of its own key (the code
    before), and so does a larger model's path (a threefry per leaf; compiled unoptimised too)."""
    import zlib

    from spmdgpt.model.info import is_info
    from spmdgpt.model.params import _init_leaves, leaf_name

    cfg, mesh, rules, params = setup("model.deltanet.full_attention_interval=2", "model.deltanet.key_heads=2",
                                     "model.deltanet.value_heads=4", "model.deltanet.key_dim=8")
    info = param_info(cfg.model)

    def reference(key):
        def leaf(path, i):
            k = jax.random.fold_in(key, zlib.crc32(leaf_name(path).encode()))
            if i.init == "normal":
                return i.std * jax.random.normal(k, i.shape, jnp.float32)
            if i.init == "a_log":
                return jnp.log(jax.random.uniform(k, i.shape, jnp.float32, 1.0, 16.0))
            if i.init == "dt_bias":
                dt = jnp.exp(jax.random.uniform(k, i.shape, jnp.float32, jnp.log(1e-3), jnp.log(0.1)))
                return dt + jnp.log(-jnp.expm1(-dt))
            return (jnp.ones if i.init == "ones" else jnp.zeros)(i.shape, jnp.float32)

        return jax.tree_util.tree_map_with_path(leaf, info, is_leaf=is_info)

    inits = {i.init for i in jax.tree.leaves(info, is_leaf=is_info)}
    assert {"normal", "a_log", "dt_bias", "ones"} <= inits
    bits = lambda tree: [np.asarray(a).view(np.uint32) for a in jax.tree.leaves(tree)]  # noqa: E731
    quick = {"xla_backend_optimization_level": 0}
    key = jax.random.key(0)
    with jax.set_mesh(mesh):
        want = jax.jit(reference).lower(key).compile(compiler_options=quick)(key)
        each = jax.jit(lambda k: _init_leaves(info, jnp.float32, k, False)).lower(key).compile(
            compiler_options=quick)(key)
    for a, b, c in zip(bits(params), bits(each), bits(want), strict=True):  # (init_params: batched, unoptimised)
        assert np.array_equal(a, c) and np.array_equal(b, c)


def test_causality_future_tokens_do_not_change_earlier_logits():
    cfg, mesh, rules, params = setup("model.attention_block=16")
    rng = np.random.default_rng(0)
    a = rng.integers(0, 10, (2, 64)).astype(np.int32)
    b = a.copy()
    b[:, 40:] = rng.integers(0, 10, (2, 24))  # change every token from position 40 on
    fwd = jax.jit(lambda t: forward(cfg.model, rules, params, t)[0])  # one compile for both
    with jax.set_mesh(mesh):
        la, lb = np.asarray(fwd(jnp.asarray(a))), np.asarray(fwd(jnp.asarray(b)))
    np.testing.assert_allclose(la[:, :40], lb[:, :40], rtol=0, atol=1e-6)
    assert np.abs(la[:, 40:] - lb[:, 40:]).max() > 1e-3  # and the later ones do change


def test_rope_depends_only_on_relative_position():
    rng = np.random.default_rng(1)
    q = jnp.asarray(rng.normal(size=(1, 1, 1, 32)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(1, 1, 1, 32)), jnp.float32)

    def score(m, n):
        qm = rope(q, jnp.array([m]), 10000.0)
        kn = rope(k, jnp.array([n]), 10000.0)
        return float(jnp.sum(qm * kn))

    base = score(7, 3)
    for shift in (1, 10, 100, 1000):
        assert score(7 + shift, 3 + shift) == pytest.approx(base, abs=1e-4)
    assert abs(score(7, 3) - score(7, 5)) > 1e-2  # a different offset gives a different score
    # rotation preserves the norm, and position 0 is the identity
    np.testing.assert_allclose(rope(q, jnp.array([0]), 1e4), q, atol=1e-7)
    np.testing.assert_allclose(
        jnp.linalg.norm(rope(q, jnp.array([123]), 1e4)), jnp.linalg.norm(q), rtol=1e-6
    )


def test_rope_scalings_keep_the_high_frequencies_and_stretch_the_low_ones():
    """Llama 3.1's and YaRN's frequencies for 128-wide heads at base 500,000: the highest frequency
    as trained, the lowest divided by the factor, a ramp in between; YaRN's q/k scale is
    0.1 ln(factor) + 1 (the values against transformers: tests/test_hf.py). Bad values: one line."""
    from spmdgpt.config import validate
    from spmdgpt.model.layers import rope_frequencies

    base = ["+experiment=staircase", "model.rope_theta=500000", "model.head_dim=128"]
    plain, scale = rope_frequencies(load_config(base).model, 128)
    assert scale == 1.0 and float(plain[1]) == pytest.approx(500000 ** (-1 / 64), rel=1e-6)
    for scaling, extra in (("llama3", ["model.rope_factor=8"]), ("yarn", ["model.rope_factor=8"])):
        cfg = load_config([*base, f"model.rope_scaling={scaling}", *extra]).model
        freq, scale = map(np.asarray, rope_frequencies(cfg, 128))
        assert freq[0] == plain[0] and freq[-1] == pytest.approx(float(plain[-1]) / 8, rel=1e-6)
        ratio = freq / np.asarray(plain)
        assert np.all(np.diff(ratio) <= 1e-7) and 0.2 < np.mean(ratio) < 0.9  # a monotone ramp from 1 to 1/8
        assert float(scale) == pytest.approx(1.0 if scaling == "llama3" else 0.1 * math.log(8) + 1)
    errs = validate(load_config([*base, "model.rope_scaling=llama3", "model.rope_high_freq_factor=0.5",
                                 "model.rope_factor=0"]), 1)
    assert errs == ["model.rope_factor=0.0 must be > 0",
                    "model.rope_high_freq_factor=0.5 must be >= model.rope_low_freq_factor=1.0 (Llama 3.1: 4 and 1; "
                    "Llama 4 Scout: 1 and 1, no smooth band)"]


def test_rope_with_per_row_positions():
    """positions [batch, seq] (cached decoding) rotate each row by its own positions."""
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.normal(size=(2, 3, 2, 4, 16)), jnp.float32)  # [b, t, q/k, heads, h]
    pos = jnp.array([[0, 1, 2], [5, 6, 7]])
    out = rope(x, pos, 1e4)
    np.testing.assert_allclose(out[0], rope(x[:1], pos[0], 1e4)[0], atol=1e-6)
    np.testing.assert_allclose(out[1], rope(x[1:], pos[1], 1e4)[0], atol=1e-6)


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["model.norm=rmsnorm", "model.mlp=swiglu", "model.mlp_factor=2.5"],
        ["model.bias=true", "model.tie_embeddings=false"],
        ["model.remat=full"],
        ["model.scan_unroll=false", "model.attention_block=0"],
    ],
)
def test_init_loss_is_log_vocab(overrides):
    cfg, mesh, rules, params = setup("model.vocab_size=64", *overrides)
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.integers(0, 64, (8, 64)), jnp.int32)
    y = jnp.asarray(rng.integers(0, 64, (8, 64)), jnp.int32)
    with jax.set_mesh(mesh):
        loss = float(jax.jit(lambda p: loss_fn(cfg.model, rules, p, x, y))(params))
    # With small random logits the expected loss is ln V + var(logits) / 2 + ...; at init std
    # 0.02 the excess is a few hundredths, so the stated tolerance is 0.05.
    assert loss == pytest.approx(math.log(64), abs=0.05)


def test_document_mask_keeps_documents_apart():
    """With segment ids, the logits of a document's tokens do not change when the previous
    document's text changes (they do without the mask), and equal the logits of the document
    on its own, with or without positions restarting at the document start."""
    cfg, mesh, rules, params = setup("model.attention_block=16", "model.init_std=0.2")
    rng = np.random.default_rng(5)
    a = rng.integers(0, 10, (2, 64)).astype(np.int32)
    b = a.copy()
    b[:, :20] = rng.integers(0, 10, (2, 20))  # another first document, same length
    seg = np.repeat([[0] * 20 + [1] * 44], 2, axis=0).astype(np.int32)
    pos = np.concatenate([np.arange(20), np.arange(44)])[None].repeat(2, 0).astype(np.int32)
    with jax.set_mesh(mesh):
        fwd = jax.jit(lambda tokens, seg=None, pos=None: forward(cfg.model, rules, params, tokens, pos,
                                                                 segment_ids=seg)[0])

        def logits(*args):
            return np.asarray(fwd(*(jnp.asarray(x) for x in args)))

        masked_a, masked_b = logits(a, seg), logits(b, seg)
        np.testing.assert_array_equal(masked_a[:, 20:], masked_b[:, 20:])
        assert np.abs(logits(a)[:, 20:] - logits(b)[:, 20:]).max() > 1e-3  # unmasked: it leaks
        alone = logits(a[:, 20:])
        reset = logits(a, seg, pos)
        np.testing.assert_allclose(reset[:, 20:], alone, rtol=0, atol=2e-5)
        # RoPE scores depend on position differences only: under the mask, shifted positions
        # give the same logits up to rounding (reset_positions changes rounding, not the model)
        np.testing.assert_allclose(masked_a[:, 20:], alone, rtol=0, atol=2e-5)
        # the loss takes the batch's segment ids and positions: the cross-entropy of those logits
        t = np.roll(a, -1, axis=1)
        loss = float(jax.jit(lambda p, *b: loss_fn(cfg.model, rules, p, *b))(
            params, *(jnp.asarray(x) for x in (a, t, seg, pos))))
    lp = reset.astype(np.float64) - np.log(np.exp(reset.astype(np.float64)).sum(-1, keepdims=True))
    assert loss == pytest.approx(-np.take_along_axis(lp, t[..., None], -1).mean(), abs=2e-5)


def naive_attention(q, k, v, mask):
    """float64 numpy reference: softmax(q k^T / sqrt(h), masked) v; q/k/v [b, n, t, h], mask [b, t, t]."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = np.einsum("bnqh,bnkh->bnqk", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bnqk,bnkh->bnqh", p / p.sum(-1, keepdims=True), v)


def test_blocked_attention_equals_full_causal_attention():
    cfg, mesh, rules, _ = setup()
    rng = np.random.default_rng(3)
    q, k, v = (jnp.asarray(rng.normal(size=(2, 4, 64, 16)), jnp.float32) for _ in range(3))
    pos = jnp.arange(64)
    causal = np.tril(np.ones((64, 64), bool))[None].repeat(2, 0)
    # document masks: row 0 has documents [0, 10), [10, 40), [40, 64); row 1 one document
    seg = np.stack([np.searchsorted([10, 40], np.arange(64), side="right"), np.zeros(64)]).astype(np.int32)
    naive = naive_attention(q, k, v, causal & (seg[:, :, None] == seg[:, None, :]))
    with jax.set_mesh(mesh):
        full = dot_product_attention(q, k, v, causal_mask(pos, pos), rules)
        np.testing.assert_allclose(full, naive_attention(q, k, v, causal), rtol=0, atol=2e-6)
        for block in (0, 8, 16):
            attn = jax.jit(lambda q, k, v, s, block=block: blocked_causal_attention(q, k, v, block, rules, s))
            np.testing.assert_allclose(attn(q, k, v, None), full, rtol=0, atol=2e-6)
            np.testing.assert_allclose(attn(q, k, v, jnp.asarray(seg)), naive, rtol=0, atol=2e-6)
    # the first query sees only the first key: its output is v[0] (and so does a document's first)
    np.testing.assert_allclose(full[:, :, 0], v[:, :, 0], atol=1e-6)
    np.testing.assert_allclose(naive[0, :, 40], v[0, :, 40], atol=1e-6)


def test_param_metadata_and_counts():
    cfg = load_config(["model.num_layers=4", "model.d_model=256", "model.vocab_size=65"]).model
    info = param_info(cfg)
    # 4 layers x (QKV 256x768 + out 256x256 + MLP 2x256x1024 + 2 LayerNorm scales) + embed + ln_f
    assert num_params(cfg) == 4 * (196608 + 65536 + 524288 + 512) + 65 * 256 + 256
    assert info.blocks.attn.w_qkv.logical == ("layers", "embed", "qkv", "heads", "head_dim")
    assert info.blocks.attn.w_qkv.fan_in == ("embed",) and info.blocks.attn.w_qkv.fan_out == ("heads", "head_dim")
    qkv = info.blocks.attn.w_qkv
    assert qkv.axes(qkv.fan_in) == (1,) and qkv.axes(qkv.fan_out) == (3, 4)  # q/k/v stay a batch axis
    mask = weight_decay_mask(info)
    decayed = {
        jax.tree_util.keystr(p)
        for p, m in jax.tree_util.tree_leaves_with_path(mask)
        if m
    }
    assert decayed == {".blocks.attn.w_qkv", ".blocks.attn.w_o", ".blocks.mlp.w_up", ".blocks.mlp.w_down"}
    assert all(isinstance(i, ParamInfo) for i in jax.tree.leaves(info, is_leaf=lambda x: isinstance(x, ParamInfo)))


def test_flops_per_token_of_deepseek_v4s_compressed_layers():
    """An H and a C layer against two S layers of the same unit: their compressors counted in their own
    layers only (each kind's matrices are in both layers of the stack), the attention over T + E (E = T / 2
    entries in the C layer, T / 4 in the H one) and the C layer's indexer scores, forward only."""
    base = ["model.num_layers=2", "model.d_model=32", "model.num_heads=2", "model.head_dim=16", "model.num_kv_heads=1",
            "model.vocab_size=16", "model.qk_norm=false", "model.csa.q_rank=8", "model.csa.rope_dim=4",
            "model.csa.out_groups=1", "model.csa.out_rank=8", "model.csa.sparse_rate=2", "model.csa.heavy_rate=4",
            "model.csa.index_heads=2", "model.csa.index_dim=4", "model.csa.index_topk=2"]
    sliding, both = (load_config([*base, f"model.csa.pattern={p}"]).model for p in ("SS", "HC"))
    # heavy: w_kv, w_gate [32, 1, 16]; sparse: [32, 2, 16] each; the indexer: its keys [32, 2, 4] x 2, w_q [8, 2, 4],
    # w_w [32, 2]: one layer's worth each
    compressors = 2 * 32 * 16 + 2 * 32 * 2 * 16 + 2 * 32 * 2 * 4 + 8 * 2 * 4 + 32 * 2
    assert matmul_params(both) - matmul_params(sliding) == compressors == 3712
    # T = 16: 8 entries in the C layer, 4 in the H one, 2 heads of 16 + 16; the indexer: 2 heads of 4 + 1
    assert flops_per_token(both, 16) - flops_per_token(sliding, 16) == 6 * compressors + 6 * 2 * 32 * (8 + 4) + \
        2 * 8 * 2 * 5 == 27040


def test_flops_per_token_b1():
    cfg = load_config(
        ["model.num_layers=4", "model.num_heads=4", "model.d_model=256", "model.vocab_size=65"]
    ).model
    assert matmul_params(cfg) == 4 * (196608 + 65536 + 524288) + 256 * 65 == 3_162_368
    # 6 N + 12 L T D at T = 256
    assert flops_per_token(cfg, 256) == 6 * 3_162_368 + 12 * 4 * 256 * 256 == 22_119_936
    # SwiGLU (three MLP matrices), an untied unembedding and biases (not matmul weights)
    cfg = load_config(["model.num_layers=4", "model.num_heads=4", "model.d_model=256", "model.vocab_size=65",
                       "model.mlp=swiglu", "model.mlp_factor=2.5", "model.tie_embeddings=false",
                       "model.bias=true"]).model
    assert matmul_params(cfg) == 4 * (4 * 256 * 256 + 3 * 256 * 640) + 256 * 65 == 3_031_296


def test_residual_projections_are_depth_scaled():
    cfg, mesh, rules, params = setup("model.num_layers=8", "model.d_model=128", "model.vocab_size=16")
    w_o = np.asarray(params.blocks.attn.w_o)
    w_up = np.asarray(params.blocks.mlp.w_up)
    assert w_up.std() == pytest.approx(0.02, rel=0.02)
    assert w_o.std() == pytest.approx(0.02 / math.sqrt(2 * 8), rel=0.02)
    np.testing.assert_array_equal(np.asarray(params.blocks.ln1.scale), 1.0)


@pytest.mark.parametrize("tied", ["true", "false"])
def test_loss_equals_reference_cross_entropy(tied):
    """loss_fn (target logit via the unembedding rows) == log-softmax cross-entropy of forward."""
    cfg, mesh, rules, params = setup("model.vocab_size=64", f"model.tie_embeddings={tied}",
                                     "model.init_std=0.3")
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.integers(0, 64, (4, 64)), jnp.int32)
    y = jnp.asarray(rng.integers(0, 64, (4, 64)), jnp.int32)
    with jax.set_mesh(mesh):
        loss = float(jax.jit(lambda p: loss_fn(cfg.model, rules, p, x, y))(params))
        logits = np.asarray(jax.jit(lambda p: forward(cfg.model, rules, p, x)[0])(params), np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    ref = -np.take_along_axis(logp, np.asarray(y)[..., None], -1).mean()
    assert ref > math.log(64) + 0.1  # large init: far from uniform, so the check has teeth
    assert loss == pytest.approx(ref, rel=2e-6)


def test_attention_backend_resolution_and_errors(monkeypatch):
    """auto picks cuDNN only on a GPU with 16-bit compute and splash on a TPU; an explicit cudnn
    or splash that cannot run is a one-line ConfigError naming the field (never a silent
    fallback)."""
    from spmdgpt.config import AttentionImpl, ConfigError
    from spmdgpt.model.attention import attention_backend

    def model(*o):
        return load_config(list(o)).model

    assert attention_backend(model(), "cpu") == AttentionImpl.xla  # default: auto
    assert attention_backend(model(), "gpu") == AttentionImpl.xla  # float32 compute
    assert attention_backend(model("model.compute_dtype=bfloat16"), "gpu") == AttentionImpl.cudnn
    assert attention_backend(model("model.compute_dtype=bfloat16"), "tpu") == AttentionImpl.splash
    assert attention_backend(model(), "tpu") == AttentionImpl.splash
    with pytest.raises(ConfigError, match=r"^model.attention=splash needs a TPU \(this run's devices are gpu\)"):
        attention_backend(model("model.attention=splash"), "gpu")
    assert attention_backend(model("model.attention=xla", "model.compute_dtype=bfloat16"), "gpu") == AttentionImpl.xla
    with pytest.raises(ConfigError, match=r"model.attention=cudnn needs an NVIDIA GPU"):
        attention_backend(model("model.attention=cudnn", "model.compute_dtype=bfloat16"), "cpu")
    with pytest.raises(ConfigError, match=r"model.attention=cudnn needs model.compute_dtype=bfloat16"):
        attention_backend(model("model.attention=cudnn"), "gpu")
    # tokamax's Mosaic GPU kernels: the same rules as cudnn's, and the package (the gpu-kernels extra)
    with pytest.raises(ConfigError, match=r"^model.attention=tokamax needs an NVIDIA GPU \(this run's devices are cpu"):
        attention_backend(model("model.attention=tokamax", "model.compute_dtype=bfloat16"), "cpu")
    with pytest.raises(ConfigError, match=r"model.attention=tokamax needs model.compute_dtype=bfloat16 or float16"):
        attention_backend(model("model.attention=tokamax"), "gpu")
    with pytest.raises(ConfigError) as both:  # (every fix at once: the platform's and the dtype's)
        attention_backend(model("model.attention=tokamax"), "cpu")
    assert [m.split(" (")[0] for m in both.value.messages] == ["model.attention=tokamax needs an NVIDIA GPU",
                                                               "model.attention=tokamax needs model.compute_dtype="
                                                               "bfloat16 or float16"]
    import importlib.util

    real = importlib.util.find_spec
    with monkeypatch.context() as m:
        m.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tokamax" else real(name, *a))
        with pytest.raises(ConfigError, match=r"^model.attention=tokamax needs the tokamax package, which is not "
                                              r"installed: pip install -e '.\[gpu-kernels\]'"):
            attention_backend(model("model.attention=tokamax", "model.compute_dtype=bfloat16"), "gpu")
    # the platform-free rules are one list (validation collects it with data.seq_len, all at once)
    from spmdgpt.model.kernels import config_errors

    errs = config_errors(model("model.attention=splash", "model.dropout=0.1", "model.sliding_window=8"), 64)
    assert [e.split(" needs ")[0] for e in errs] == ["model.sliding_window=8", "model.attention_dropout=0.1",
                                                     "model.attention=splash"]
    splash = model("model.attention=splash")
    assert config_errors(splash, 128) == [] and config_errors(splash) == []


def test_splash_attention_in_interpret_mode_equals_xla():
    """Pallas splash attention (the TPU kernels, run by Pallas' interpreter on this CPU) equals
    the xla backend, causal and with document segment ids, forward and gradients (float32, 2e-5),
    per device under a batch x heads sharded layout (fsdp_tp on 2 x 4 devices)."""
    from spmdgpt.model.kernels import splash_causal_attention

    cfg = load_config(["sharding=fsdp_tp", "mesh.data=2", "mesh.model=4"])
    mesh = make_mesh(cfg.mesh)
    rules = Rules(mesh, cfg.sharding)
    rng = np.random.default_rng(7)
    q, k, v, g = (jnp.asarray(rng.normal(size=(2, 4, 256, 32)), jnp.float32) for _ in range(4))
    seg = jnp.asarray(np.stack([np.searchsorted([100, 130], np.arange(256), side="right"),
                                np.zeros(256)]), jnp.int32)

    def run(attn):
        def f(q, k, v):
            o = attn(q, k, v)
            return jnp.sum(o * g), o

        with jax.set_mesh(mesh):
            (_, o), grads = jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2), has_aux=True))(q, k, v)
        return [o, *grads]

    for s in (None, seg):
        want = run(lambda q, k, v, s=s: blocked_causal_attention(q, k, v, 0, rules, s))
        got = run(lambda q, k, v, s=s: splash_causal_attention(q, k, v, rules, s, interpret=True))
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=2e-5)


def test_the_model_runs_through_splash(monkeypatch):
    """The model's splash branch (as a TPU would resolve `auto`; the kernels interpreted here):
    the loss and gradients of a document-masked batch equal the xla backend's (float32)."""
    from spmdgpt.config import AttentionImpl
    from spmdgpt.model import attention

    cfg, mesh, rules, params = setup("model.num_layers=1", "model.max_seq_len=128", "model.vocab_size=16")
    rng = np.random.default_rng(8)
    x, y = (jnp.asarray(rng.integers(0, 10, (2, 128)), jnp.int32) for _ in range(2))
    seg = jnp.asarray(np.repeat(np.searchsorted([50], np.arange(128), side="right")[None], 2, 0), jnp.int32)

    def loss_and_grads():
        with jax.set_mesh(mesh):
            return jax.jit(jax.value_and_grad(lambda p: loss_fn(cfg.model, rules, p, x, y, seg)))(params)

    want = loss_and_grads()
    calls = []
    kernel = attention.splash_causal_attention
    monkeypatch.setattr(attention, "attention_backend", lambda cfg, platform=None: AttentionImpl.splash)
    monkeypatch.setattr(attention, "splash_causal_attention", lambda *a: calls.append(1) or kernel(*a))
    got = loss_and_grads()
    assert calls  # the splash branch ran
    assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-6)
    for a, b in zip(jax.tree.leaves(got[1]), jax.tree.leaves(want[1]), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


@pytest.mark.parametrize("table,mesh_args", [("dp", ["mesh.data=8"]), ("fsdp_tp", ["mesh.data=2", "mesh.model=4"])])
def test_fused_attention_glue_per_device(table, mesh_args):
    """The fused-kernel glue (shard_map over batch and heads) with JAX's own XLA kernel equals the
    xla backend, forward and gradients, on 8 devices: what cuDNN runs through on a GPU."""
    from spmdgpt.model.kernels import fused_causal_attention

    cfg = load_config(["+experiment=staircase", f"sharding={table}", *mesh_args, "model.num_heads=4"])
    mesh = make_mesh(cfg.mesh, jax.devices())
    rules = Rules(mesh, cfg.sharding)
    rng = np.random.default_rng(4)
    spec = rules.spec("batch", "seq", "heads", "head_dim")
    with jax.set_mesh(mesh):
        q, k, v, g = (jax.device_put(jnp.asarray(rng.normal(size=(8, 32, 4, 16)), jnp.float32), spec)
                      for _ in range(4))

        def loss(attn):
            return jax.jit(jax.value_and_grad(lambda q, k, v: jnp.sum(attn(q, k, v) * g), argnums=(0, 1, 2)))

        # document numbers: a boundary at a different place in every row
        seg = jax.device_put(jnp.asarray((np.arange(32)[None] >= np.arange(3, 35, 4)[:, None]).astype(np.int32)),
                             rules.spec("batch", None))
        def xla(q, k, v, segment_ids):  # the xla backend works head-major: [b, n, t, h]
            t = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
            return t(blocked_causal_attention(t(q), t(k), t(v), 8, rules, segment_ids))

        for segment_ids in (None, seg):
            ref, ref_grads = loss(partial(xla, segment_ids=segment_ids))(q, k, v)
            fused = partial(fused_causal_attention, rules=rules, implementation="xla", segment_ids=segment_ids)
            got, got_grads = loss(fused)(q, k, v)
            assert jax.typeof(got_grads[0]).sharding.spec == spec
            assert float(got) == pytest.approx(float(ref), rel=1e-5)
            for a, b in zip(got_grads, ref_grads, strict=True):
                np.testing.assert_allclose(a, b, rtol=0, atol=2e-5)


def test_bfloat16_compute_keeps_residual_and_logit_gradients_right():
    """bfloat16 compute: the residual stream is float32, norms hand bfloat16 to the matmuls, the
    loss is within bfloat16 rounding of the float32 one, and the unembedding's backward matmuls
    take a bfloat16 cotangent (no float32 GEMM in the gradient)."""
    from spmdgpt.model.head import embed, float32_matmul
    from spmdgpt.model.layers import norm

    cfg32, mesh, rules, params = setup("model.vocab_size=64")
    cfg16 = load_config(["+experiment=staircase", "mesh.data=1", "model.vocab_size=64",
                         "model.compute_dtype=bfloat16"])
    rng = np.random.default_rng(6)
    x = jnp.asarray(rng.integers(0, 64, (4, 64)), jnp.int32)
    y = jnp.asarray(rng.integers(0, 64, (4, 64)), jnp.int32)
    with jax.set_mesh(mesh):
        h = jax.jit(lambda p: embed(cfg16.model, rules, p, x))(params)
        assert h.dtype == jnp.float32
        assert jax.jit(lambda p, h: norm(cfg16.model, rules, p.ln_f, h))(params, h).dtype == jnp.bfloat16
        l32 = float(jax.jit(lambda p: loss_fn(cfg32.model, rules, p, x, y))(params))
        l16, g16 = jax.jit(jax.value_and_grad(lambda p: loss_fn(cfg16.model, rules, p, x, y)))(params)
    assert float(l16) == pytest.approx(l32, abs=5e-3)  # measured difference ~1e-3
    assert g16.embed.dtype == jnp.float32  # parameters (and their gradients) stay float32

    a = jnp.asarray(rng.normal(size=(8, 16)), jnp.bfloat16)
    w = jnp.asarray(rng.normal(size=(32, 16)), jnp.bfloat16)
    spec = jax.sharding.PartitionSpec()
    with jax.set_mesh(mesh):
        out = float32_matmul("td,vd->tv", spec, a, w)
        ref = jnp.einsum("td,vd->tv", a, w, preferred_element_type=jnp.float32)
        grad = jax.jit(jax.grad(lambda a, w: jnp.sum(float32_matmul("td,vd->tv", spec, a, w) ** 2), argnums=(0, 1)))
        text = grad.lower(a, w).as_text()
    assert out.dtype == jnp.float32
    np.testing.assert_array_equal(out, ref)
    # operand types of every matmul: the forward one and the two backward ones, all bfloat16
    operands = [line.rsplit(": (", 1)[1].split(")")[0] for line in text.splitlines() if "dot_general" in line]
    assert len(operands) == 3 and all("f32" not in o and o.count("bf16") == 2 for o in operands), operands


def test_remat_gives_the_gradients_of_none_in_less_memory():
    """model.remat=full and =dots recompute activations in the backward pass: the same loss and
    gradients as none (to float32 rounding of a different fusion), and XLA's plan of the
    gradient holds fewer temporary bytes, full fewest (only the layer inputs are kept)."""
    rng = np.random.default_rng(3)
    x, y = (jnp.asarray(rng.integers(0, 10, (8, 64)), jnp.int32) for _ in range(2))
    grads, temp = {}, {}
    for remat in ("none", "full", "dots"):
        cfg, mesh, rules, params = setup(f"model.remat={remat}", "model.num_layers=2", "model.attention_block=16")
        with jax.set_mesh(mesh):
            f = jax.jit(jax.value_and_grad(lambda p: loss_fn(cfg.model, rules, p, x, y)))
            compiled = f.lower(params).compile()
            grads[remat] = jax.device_get(compiled(params))
        temp[remat] = compiled.memory_analysis().temp_size_in_bytes
    for remat in ("full", "dots"):
        assert abs(float(grads[remat][0]) - float(grads["none"][0])) < 1e-6
        for a, b in zip(jax.tree.leaves(grads[remat][1]), jax.tree.leaves(grads["none"][1]), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    # (measured on XLA:CPU, JAX 0.12: none 8.2 MB, dots 5.9 MB, full 4.6 MB)
    assert temp["full"] < temp["dots"] < temp["none"] and temp["full"] < 0.7 * temp["none"], temp
