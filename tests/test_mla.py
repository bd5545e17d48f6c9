"""Multi-head latent attention (model.mla, spmdgpt.model.mla): the unit against a float64 reference
of its equations, its latent KV cache against the full forward, every mesh layout against one
device, the fused backends' glue, its bytes and FLOPs, and its errors. Parity with transformers'
DeepseekV3ForCausalLM both ways is in tests/test_hf.py."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layouts import assert_close, cfg_for, reference, run

from spmdgpt.config import load_config, mla_dims, validate
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward, init_cache, init_params
from spmdgpt.model.attention import UnitInputs
from spmdgpt.model.layers import rope_frequencies
from spmdgpt.model.mla import mla_attention, softmax_scale
from spmdgpt.plan.flops import flops_per_token

MLA = ("model.mla.kv_rank=16", "model.mla.q_rank=12", "model.mla.rope_dim=4", "model.mla.v_dim=6")


def one_device(*overrides):
    cfg = load_config(["+experiment=staircase", "model.init_std=0.2", "mesh.data=1", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
    return cfg, mesh, rules, params


def _rms(x, scale):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale


def _rope(x, pos, cfg, r):
    """The rotation of pairs (x_i, x_{i + r/2}) by pos x the frequencies, times the scale, float64
    (the frequencies and scale of `layers.rope_frequencies`, YaRN's checked against transformers in
    tests/test_hf.py)."""
    freq, scale = rope_frequencies(cfg, r)
    ang = pos[:, None] * np.asarray(freq, np.float64)  # [t, r/2]
    cos, sin = np.cos(ang)[:, None] * scale, np.sin(ang)[:, None] * scale  # [t, 1, r/2]
    a, b = x[..., : r // 2], x[..., r // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def reference_mla(cfg, p, x, pos, keep=None, probs=None):
    """MLA as DeepSeek-V2's section 2.1 writes it, one sequence, float64, head by head: x [t, D];
    keep [t, t]: the keys each query may attend to (default causal); probs: a list that gets each
    head's probabilities [t, t]."""
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), p)
    m = cfg.mla
    R, _, n, r, _ = mla_dims(cfg)
    q = (_rms(x @ p.w_dq, p.q_latent_norm) if m.q_rank else x) @ p.w_q.reshape(p.w_q.shape[0], -1)
    q = q.reshape(len(x), cfg.num_heads, -1)
    ckv = x @ p.w_dkv
    c, k_rope = _rms(ckv[:, :R], p.kv_latent_norm), _rope(ckv[:, None, R:], pos, cfg, r)
    out = np.zeros((len(x), cfg.d_model))
    for h in range(cfg.num_heads):
        k_nope, v = c @ p.w_ukv[:, h, :n], c @ p.w_ukv[:, h, n:]
        q_h = np.concatenate([q[:, h, :n], _rope(q[:, None, h, n:], pos, cfg, r)[:, 0]], axis=-1)
        k_h = np.concatenate([k_nope, k_rope[:, 0]], axis=-1)
        s = q_h @ k_h.T * softmax_scale(cfg)
        s = np.where(np.tril(np.ones((len(x), len(x)), bool)) if keep is None else keep, s, -np.inf)
        w = np.exp(s - s.max(-1, keepdims=True))
        out += (w / w.sum(-1, keepdims=True)) @ v @ p.w_o[h]
        if probs is not None:
            probs.append(w / w.sum(-1, keepdims=True))
    return out


def reference_indexer(cfg, p, x, pos):
    """The lightning indexer's scores [t, t] (causal, -inf above the diagonal), float64, as transformers
    5.24's DeepseekV32Indexer computes them: queries from the normalised query latent (wq_b), one key a token
    LayerNorm-ed (k_norm, eps 1e-6), both rotated on their first rope_dim dimensions by half-split pairs,
    sum_j weights_proj(x)_j / sqrt(I) ReLU(q_j . k / sqrt(d))."""
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), p)
    m, t = cfg.mla, len(x)
    r, I, d = m.rope_dim, m.index_heads, m.index_dim
    q = (_rms(x @ p.w_dq, p.q_latent_norm) @ p.w_iq.reshape(m.q_rank, -1)).reshape(t, I, d)
    k = x @ p.w_ik
    k = (k - k.mean(-1, keepdims=True)) / np.sqrt(k.var(-1, keepdims=True) + 1e-6) * p.ik_scale + p.ik_bias
    q = np.concatenate([_rope(q[..., :r], pos, cfg, r), q[..., r:]], axis=-1)
    k = np.concatenate([_rope(k[:, None, :r], pos, cfg, r)[:, 0], k[:, r:]], axis=-1)
    scores = np.einsum("th,ths->ts", x @ p.w_iw / np.sqrt(I), np.maximum(np.einsum("thd,sd->ths", q, k) / np.sqrt(d),
                                                                         0))
    return np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)


DSA = (*MLA, "model.mla.index_heads=8", "model.mla.index_dim=8", "model.mla.index_topk=5")


def test_sparse_attention_equals_its_equations_and_its_kl_a_hand_computation():
    """DeepSeek Sparse Attention (model.mla.index_heads): over 2 x 24 tokens (in query blocks of 8) each
    query attends to its 5 keys of highest index score (a float64 reference of transformers' indexer, rows past the 5th
    token losing keys), the unit's output equal to MLA's reference under that mask; the indexer's KL
    loss equal to its hand computation (the main attention's probabilities summed over heads and
    normalised, against softmax of the index scores over the selected keys; in the dense warm-up over
    every causal key, the attention then dense); the warm-up's gradients reach the indexer alone."""
    cfg, mesh, rules, params = one_device(*DSA, "model.attention_block=8")  # (in 3 query blocks)
    m = cfg.model
    rng = np.random.default_rng(0)
    p = jax.tree.map(lambda a: a[0] + rng.normal(0, 0.2, a[0].shape).astype(np.float32), params.blocks.attn)
    x = rng.normal(0, 1, (2 * 24, m.d_model)).astype(np.float32)
    dense = dataclasses.replace(m, mla=dataclasses.replace(m.mla, index_train="dense"))
    for c in (m, dense):
        with jax.set_mesh(mesh):
            got, _, aux = jax.jit(lambda p, x: mla_attention(c, rules, p, x, UnitInputs(jnp.arange(24), 2)))(
                p, jnp.asarray(x))
        want, kls = [], []
        for i in range(2):
            xi = x[i * 24:(i + 1) * 24].astype(np.float64)
            scores = reference_indexer(c, p, xi, np.arange(24.0))
            kth = -np.sort(-scores, axis=-1)[:, 4:5]  # (each row's 5th best; -inf in rows of fewer keys)
            keep = np.isfinite(scores) & ((scores >= kth) if c.mla.index_train == "sparse" else True)
            assert (keep.sum(-1) == (np.minimum(np.arange(24) + 1, 5) if c is m else np.arange(24) + 1)).all()
            probs = []
            want.append(reference_mla(c, p, xi, np.arange(24.0), keep, probs))
            target = np.sum(probs, axis=0) / c.num_heads
            log_q = np.where(keep, scores, -np.inf)
            log_q = log_q - log_q.max(-1, keepdims=True)
            log_q = np.where(keep, log_q - np.log(np.exp(log_q).sum(-1, keepdims=True)), 0)
            kls.append(np.sum(np.where(keep, target * (np.log(np.where(keep, target, 1)) - log_q), 0), axis=-1))
        want = np.concatenate(want)
        assert np.abs(np.asarray(got) - want).max() <= 2e-5 * np.abs(want).max()
        assert float(aux["indexer_kl"]) == pytest.approx(np.mean(kls), rel=1e-4) and np.mean(kls) > 1e-3
        if c is m:  # (the selection matters: dense attention differs)
            sparse_out = want
        else:
            assert np.abs(want - sparse_out).max() > 0.1 * np.abs(want).max()
    # the warm-up: the objective's other terms give no gradient, the indexer's KL loss gives the indexer one (a
    # multi-token prediction module's too: its block's KL, mtp/indexer_kl)
    from spmdgpt.model import init_params
    from spmdgpt.model.loss import objective

    dense = dataclasses.replace(dense, mtp_depth=1)
    toks = jnp.asarray(rng.integers(0, 10, (2, 24)), jnp.int32)
    with jax.set_mesh(mesh):
        params = init_params(dense, jax.random.key(0), rules)
        grads = jax.jit(jax.grad(lambda p: objective(dense, rules, p, toks, toks)[0]))(params)
    for attn in (grads.blocks.attn, grads.mtp.block.attn):
        assert all(np.abs(np.asarray(getattr(attn, f))).max() > 0 for f in ("w_iq", "w_ik", "ik_scale", "ik_bias",
                                                                              "w_iw"))
    others = [a for f, a in grads.blocks.attn._asdict().items() if f in ("w_dq", "w_q", "w_dkv", "w_ukv", "w_o")] + \
        [grads.embed, grads.blocks.mlp.w_up, grads.mtp.w_in, grads.mtp.block.attn.w_q]
    assert all(not np.any(np.asarray(a)) for a in others)


@pytest.mark.parametrize("overrides", [MLA, ("model.mla.kv_rank=16", "model.mla.nope_dim=6", "model.mla.rope_dim=8"),
                                       (*MLA, "model.rope_scaling=yarn", "model.rope_factor=4",
                                        "model.rope_original_max_len=8", "model.rope_mscale_all_dim=1.0")],
                         ids=["query-latent", "full-query", "yarn-mscale"])
def test_the_unit_equals_its_equations(overrides):
    """The unit's output for 2 x 24 tokens (float32) against a float64 reference written head by
    head from the paper's equations (a query latent or a full query projection; YaRN's softmax
    mscale: scores x (0.1 ln 4 + 1)^2); the shapes of the parameters."""
    cfg, mesh, rules, params = one_device(*overrides)
    m = cfg.model
    p = jax.tree.map(lambda a: a[0], params.blocks.attn)
    rng = np.random.default_rng(0)
    p = jax.tree.map(lambda a: a + rng.normal(0, 0.2, a.shape).astype(np.float32), p)  # (norm scales off one)
    x = rng.normal(0, 1, (2 * 24, m.d_model)).astype(np.float32)
    with jax.set_mesh(mesh):
        got = np.asarray(jax.jit(lambda p, x: mla_attention(m, rules, p, x, UnitInputs(jnp.arange(24), 2))[0])(
            p, jnp.asarray(x)))
    want = np.concatenate([reference_mla(m, p, x[i * 24:(i + 1) * 24], np.arange(24.0)) for i in range(2)])
    assert np.abs(got - want).max() <= 2e-5 * np.abs(want).max() and np.abs(want).max() > 0.5
    if "yarn" in str(overrides):
        assert softmax_scale(m) == pytest.approx((0.1 * np.log(4) + 1) ** 2 / np.sqrt(16 + 4))
    shapes = {k: v.shape for k, v in p._asdict().items() if v is not None}
    if m.mla.q_rank:
        assert shapes == {"w_dq": (64, 12), "q_latent_norm": (12,), "w_q": (12, 4, 20), "w_dkv": (64, 20),
                          "kv_latent_norm": (16,), "w_ukv": (16, 4, 22), "w_o": (4, 6, 64)}


@pytest.mark.parametrize("overrides", [MLA, (*MLA, "model.num_layers=3", "model.sliding_window=6",
                                             "model.window_pattern=LG", "model.compute_dtype=bfloat16")],
                         ids=["mla", "windows-bf16"])
def test_latent_cache_decoding_equals_the_full_forward(overrides):
    """Prefill 10 tokens, then decode 14 one at a time through the latent cache (the up-projections
    absorbed into the query and the output): the logits of the full forward at every position;
    the cache holds kv_rank + rope_dim = 20 numbers a token per layer (multi-head attention's
    would be 2 x 4 x 16 = 128)."""
    cfg, mesh, rules, params = one_device(*overrides)
    toks = np.random.default_rng(0).integers(0, 10, (2, 24)).astype(np.int32)
    fwd = jax.jit(lambda *a: forward(cfg.model, rules, params, *a))
    with jax.set_mesh(mesh):
        full = np.asarray(fwd(jnp.asarray(toks))[0])
        cache = init_cache(cfg.model, rules, 2, 32)
        assert {k: v.shape for k, v in cache.layers.items()} == {"latent": (cfg.model.num_layers, 2, 32, 16),
                                                                "k_rope": (cfg.model.num_layers, 2, 32, 4)}
        prefill = jax.jit(lambda t, q, c: forward(cfg.model, rules, params, t, q, c, prefill=True))
        logits, cache = prefill(jnp.asarray(toks[:, :10]), jnp.broadcast_to(jnp.arange(10), (2, 10)), cache)
        got = [np.asarray(logits)]
        for i in range(10, 24):
            logits, cache = fwd(jnp.asarray(toks[:, i:i + 1]), jnp.full((2, 1), i, jnp.int32), cache)
            got.append(np.asarray(logits))
    # float32: rounding of another summation order; bfloat16: of the latent path's own roundings
    tol = 2e-5 if cfg.model.compute_dtype.value == "float32" else 0.1
    assert np.abs(np.concatenate(got, axis=1) - full).max() <= tol * np.abs(full).max()
    assert np.abs(full).max() > 0.5


LAYOUT_MODEL = ("model.mla.kv_rank=16", "model.mla.q_rank=8", "model.mla.rope_dim=4", "model.mla.v_dim=6")


@pytest.mark.parametrize("layout", [
    ("sharding=fsdp_tp", "mesh.data=2", "mesh.model=2"),
    ("sharding=fsdp_tp", "mesh.data=2", "mesh.model=2", "model.collective_matmul=bi"),
    ("sharding=fsdp", "mesh.data=2", "mesh.context=2", "model.context_attention=ring"),
    ("sharding=fsdp", "mesh.data=2", "mesh.context=2", "model.context_attention=allgather"),
], ids=["fsdp-tp", "collective-matmul", "context-ring", "context-allgather"])
def test_every_layout_equals_one_device(layout):
    """Loss and gradients with documents and restarted positions on 4 devices equal one device's to
    1e-5: heads split over `model` (the latent whole on each), the latent axes over FSDP, the
    stream split for collective matmuls, sequences over a context ring (values narrower than the
    keys) or gathered."""
    loss, grads, _ = run(cfg_for(*LAYOUT_MODEL, *layout))
    want_loss, want_grads, _ = reference(LAYOUT_MODEL)
    assert abs(loss - want_loss) <= 1e-5 * abs(want_loss)
    assert_close(grads, want_grads)
    if "mesh.model=2" in layout:  # the latent's up-projection stored split by latent and head
        assert grads.blocks.attn.w_ukv.shape == (2, 16, 4, 14)


@pytest.mark.parametrize("backend", ["cudnn", "splash"])
def test_fused_backends_get_values_padded_to_the_query_width(backend, monkeypatch):
    """The fused kernels take one head width: MLA's values (6 wide) reach them zero-padded to the
    query/key width (16 + 4) and the output is cut back; the logits equal the xla path's (cudnn:
    its glue with JAX's XLA kernel in place of cuDNN; splash: the Pallas kernels interpreted, t = 128)."""
    from spmdgpt.config import AttentionImpl
    from spmdgpt.model import attention

    t = 128 if backend == "splash" else 24
    cfg, mesh, rules, params = one_device(*MLA, "model.num_layers=1", f"model.max_seq_len={t}")
    toks = jnp.asarray(np.random.default_rng(1).integers(0, 10, (2, t)), jnp.int32)
    with jax.set_mesh(mesh):
        want = np.asarray(jax.jit(lambda p, x: forward(cfg.model, rules, p, x)[0])(params, toks))
    widths = []
    monkeypatch.setattr(attention, "attention_backend", lambda cfg, platform=None: AttentionImpl(backend))
    if backend == "cudnn":
        kernel = attention.fused_causal_attention
        monkeypatch.setattr(attention, "fused_causal_attention", lambda q, k, v, rules, impl, seg: widths.append(
            (q.shape[-1], v.shape[-1])) or kernel(q, k, v, rules, "xla", seg))
    else:
        kernel = attention.splash_causal_attention
        monkeypatch.setattr(attention, "splash_causal_attention",
                            lambda q, k, v, *a: widths.append((q.shape[-1], v.shape[-1])) or kernel(q, k, v, *a))
    with jax.set_mesh(mesh):
        got = np.asarray(jax.jit(lambda p, x: forward(cfg.model, rules, p, x)[0])(params, toks))
    assert widths == [(20, 20)]
    assert np.abs(got - want).max() <= 2e-5 * np.abs(want).max()


def test_flops_and_bad_settings():
    """FLOPs count QK^T over nope + rope and AV over v_dim; bad settings are one line each."""
    cfg = load_config(["+experiment=staircase", *MLA])
    m = cfg.model
    plain = dataclasses.replace(m, mla=dataclasses.replace(m.mla, kv_rank=0))
    from spmdgpt.plan.flops import matmul_params

    attention_terms = lambda c: flops_per_token(c, 32) - 6 * matmul_params(c)  # noqa: E731
    assert attention_terms(m) == pytest.approx(6 * 2 * 32 * 4 * (20 + 6))
    assert attention_terms(plain) == pytest.approx(12 * 2 * 32 * 4 * 16)
    indexed = dataclasses.replace(m, mla=dataclasses.replace(m.mla, index_heads=2, index_dim=8))  # (+ its scores)
    assert attention_terms(indexed) == pytest.approx(6 * 2 * 32 * (4 * (20 + 6) + 2 * (8 + 1)))
    for overrides, expected in [
        (["model.num_kv_heads=2"], "model.num_kv_heads=2 with model.mla.kv_rank=16: MLA shares one latent"),
        (["model.qk_norm=true"], "model.qk_norm=true with model.mla.kv_rank > 0"),
        (["model.mla.rope_dim=3"], "model.mla.rope_dim=3 must be even"),
        (["model.mla.v_dim=40"], "model.mla.v_dim=40 is wider than the query/key heads"),
        (["model.mla.kv_rank=-1"], "model.mla.kv_rank=-1 and q_rank=12 must be >= 0"),
        (["model.bias=true"], "model.bias=true with model.mla.kv_rank > 0"),
        (["model.mla.index_heads=4", "model.mla.q_rank=0"], "model.mla.index_heads > 0 with model.mla.q_rank=0"),
        (["model.mla.index_heads=4", "model.mla.index_dim=2"], "model.mla.index_dim=2 must be even and >= "),
        (["model.mla.index_heads=4", "model.mla.index_train=later"], "model.mla.index_train='later' must be sparse"),
        (["model.mla.index_heads=4", "model.mla.index_dim=8", "model.mla.index_kl=inf"],
         "model.mla.index_kl=inf must be a finite number >= 0"),
        (["model.mla.index_heads=4", "model.mla.kv_rank=0"],
         "model.mla.index_heads=4: DeepSeek Sparse Attention's indexer is a unit of multi-head latent attention"),
        (["model.mla.index_heads=4", "model.mla.index_dim=8", "sharding=fsdp", "mesh.data=4", "mesh.context=2"],
         "mesh.context=2 with model.mla.index_heads=4: DeepSeek Sparse Attention does not run there yet"),
        (["model.mla.index_heads=4", "model.mla.index_dim=8", "model.mla.index_train=dense",
          "optimizer.weight_decay=0.1"],
         "model.mla.index_train=dense with optimizer.weight_decay=0.1: the warm-up trains the indexer alone"),
        (["sharding=fsdp", "mesh.data=8", "model.mla.kv_rank=12"],
         "model.mla.kv_rank=12 is not divisible by 8, the size of mesh axis"),
    ]:
        errs = validate(load_config(["+experiment=staircase", *MLA, *overrides]), 8)
        assert any(e.startswith(expected) for e in errs), errs
