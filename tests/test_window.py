"""Sliding-window attention (model.sliding_window, model.window_pattern) and Llama 4's chunked
attention, NoPE layers and attention temperature (model.attention_chunk, global_nope,
attn_temperature): what a query sees, the same through the KV cache, which backends take it, and
bad values. (Against transformers' Mistral, Qwen3 and Llama 4: tests/test_hf.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spmdgpt.config import ConfigError, layer_windows, load_config, validate
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward, init_cache, init_params
from spmdgpt.model.attention import attention_backend

BASE = ["+experiment=staircase", "model.num_layers=2", "model.sliding_window=4", "model.attention_block=8",
        "model.init_std=0.2", "mesh.data=1"]


def _model(*overrides):
    cfg = load_config([*BASE, *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
    return cfg, mesh, rules, params


@pytest.mark.parametrize("pattern,reach", [("L", 2 * 3), ("LG", None)])
def test_a_token_reaches_only_as_far_as_the_windows_allow(pattern, reach):
    """Windows of 4 (a query sees itself and 3 earlier positions) in both of 2 layers: a token
    changes the logits of the 2 x 3 positions after it and no later one; with the second layer
    global it reaches every later position. Blocks of 8 queries: the window crosses blocks."""
    cfg, mesh, rules, params = _model(f"model.window_pattern={pattern}")
    assert layer_windows(cfg.model) == ((4, 4) if pattern == "L" else (4, 0))
    toks = np.random.default_rng(0).integers(0, 10, (2, 32))
    other = toks.copy()
    other[:, 10] = (toks[:, 10] + 1) % 10  # change position 10
    with jax.set_mesh(mesh):
        fwd = jax.jit(lambda t: forward(cfg.model, rules, params, t)[0])
        diff = np.abs(np.asarray(fwd(jnp.asarray(toks))) - np.asarray(fwd(jnp.asarray(other)))).max(axis=(0, 2))
    assert np.all(diff[:10] == 0) and np.all(diff[10:17] > 1e-4)
    if reach is None:
        assert np.all(diff[17:] > 1e-6)
    else:
        assert np.all(diff[10 + reach + 1:] == 0)


@pytest.mark.parametrize("pattern", ["L", "GL"])
def test_cached_decoding_keeps_the_window(pattern):
    """Prefill of 24 tokens then decode steps, through the KV cache (grouped-query attention too):
    every step's logits equal the full forward pass's at that position."""
    cfg, mesh, rules, params = _model(f"model.window_pattern={pattern}", "model.num_kv_heads=2")
    toks = jnp.asarray(np.random.default_rng(1).integers(0, 10, (2, 32)), jnp.int32)
    pos = jnp.broadcast_to(jnp.arange(32, dtype=jnp.int32), (2, 32))
    with jax.set_mesh(mesh):
        full = np.asarray(jax.jit(lambda t: forward(cfg.model, rules, params, t)[0])(toks))
        got = _prefill_then_decode(cfg, rules, params, toks, pos, 24)
    np.testing.assert_allclose(got, full, rtol=0, atol=2e-5)


def _prefill_then_decode(cfg, rules, params, toks, pos, prompt: int) -> np.ndarray:
    """The logits of a prefill (prefill=True) of each row's first `prompt` tokens into the KV cache,
    then of one decode step a token for the rest: [b, t, vocab]."""
    fwd = jax.jit(lambda t, q, c, prefill: forward(cfg.model, rules, params, t, q, c, prefill=prefill),
                  static_argnums=3)
    logits, cache = fwd(toks[:, :prompt], pos[:, :prompt], init_cache(cfg.model, rules, *toks.shape), True)
    steps = [np.asarray(logits)]
    for i in range(prompt, toks.shape[1]):
        logits, cache = fwd(toks[:, i:i + 1], pos[:, i:i + 1], cache, False)
        steps.append(np.asarray(logits))
    return np.concatenate(steps, axis=1)


def test_only_the_xla_backend_has_windows_and_bad_values_are_one_line():
    cfg = load_config([*BASE, "model.compute_dtype=bfloat16"]).model
    assert attention_backend(cfg, "tpu").value == "xla" and attention_backend(cfg, "gpu").value == "xla"  # auto
    with pytest.raises(ConfigError) as e:
        attention_backend(load_config([*BASE, "model.compute_dtype=bfloat16", "model.attention=cudnn"]).model, "gpu")
    assert e.value.messages == ["model.sliding_window=4 needs model.attention=xla (the cudnn path has no sliding "
                                "window yet); set model.attention=xla or auto"]
    assert validate(load_config([*BASE, "model.sliding_window=-1", "model.window_pattern=LX"]), 1) == [
        "model.sliding_window=-1 must be >= 0 (0 = off)",
        "model.window_pattern='LX' must be letters L (local: sliding window) and G (global), e.g. L or LLLLLG"]


CHUNKS = ["model.sliding_window=0", "model.attention_chunk=8"]
LLAMA4 = [*CHUNKS, "model.window_pattern=LG", "model.global_nope=true", "model.qk_norm=true",
          "model.attn_temperature=0.5", "model.attn_temperature_floor=4"]


def test_a_token_reaches_only_its_chunk():
    """Chunks of 8 (model.attention_chunk) in both of 2 layers: a token changes the logits of the
    positions after it in its own chunk (10 -> 10..15) and none past it, through any number of
    layers (a global layer's reach: the decoding test below)."""
    cfg, mesh, rules, params = _model(*CHUNKS)
    assert layer_windows(cfg.model) == (-8, -8)
    toks = np.random.default_rng(0).integers(0, 10, (2, 32))
    other = toks.copy()
    other[:, 10] = (toks[:, 10] + 1) % 10
    with jax.set_mesh(mesh):
        fwd = jax.jit(lambda t: forward(cfg.model, rules, params, t)[0])
        diff = np.abs(np.asarray(fwd(jnp.asarray(toks))) - np.asarray(fwd(jnp.asarray(other)))).max(axis=(0, 2))
    assert np.all(diff[:10] == 0) and np.all(diff[10:16] > 1e-4)
    assert np.all(diff[16:] == 0)


def test_chunked_nope_layers_decode_as_the_full_pass_from_a_left_padded_prefill():
    """Llama 4's layers (chunks of 8, then a NoPE layer with the attention temperature at a floor
    of 4, the QK-norm on the chunked layer only) through the KV cache: a prefill of 20 tokens,
    one row left-padded by 3 (its chunks count from its first token, as its positions do), then
    decode steps across a chunk boundary: every step's logits equal the full forward pass's of
    the row's own tokens."""
    cfg, mesh, rules, params = _model(*LLAMA4, "model.num_kv_heads=2")
    toks = np.random.default_rng(1).integers(0, 10, (2, 32)).astype(np.int32)
    pad = 3
    padded = np.concatenate([np.zeros((1, pad), np.int32), toks[1:, :32 - pad]], axis=1)
    rows = jnp.asarray(np.concatenate([toks[:1], padded]))
    pos = jnp.asarray(np.stack([np.arange(32), np.arange(32) - pad]).clip(-1), jnp.int32)
    with jax.set_mesh(mesh):  # (row 1's own tokens then 3 more, which no earlier logit sees)
        want = np.asarray(jax.jit(lambda t: forward(cfg.model, rules, params, t)[0])(jnp.asarray(toks)))
        got = _prefill_then_decode(cfg, rules, params, rows, pos, 20)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=2e-5)
    np.testing.assert_allclose(got[1, pad:], want[1, :32 - pad], rtol=0, atol=2e-5)


def test_nope_temperature_is_its_formula():
    """model.attn_temperature: a NoPE layer's queries scale by 1 + a log1p(floor((p + 1) / floor)) at
    position p; a chunked layer's not at all. (NoPE itself, against transformers: tests/test_hf.py.)"""
    from spmdgpt.model.attention import nope_temperature

    cfg = load_config([*BASE, *LLAMA4]).model
    q, pos = jnp.ones((1, 16, 2, 4)), jnp.arange(16, dtype=jnp.int32)
    scaled = nope_temperature(cfg, q, pos, jnp.int32(0))[0, :, 0, 0]
    np.testing.assert_allclose(np.asarray(scaled), 1 + 0.5 * np.log1p(np.floor((np.arange(16) + 1) / 4)), rtol=1e-6)
    assert np.all(np.asarray(nope_temperature(cfg, q, pos, jnp.int32(-8))) == 1)


def test_chunks_only_on_the_xla_backend_and_bad_values_are_one_line(tmp_path, capsys):
    from spmdgpt.cli import main

    cfg = load_config([*BASE, *LLAMA4, "model.compute_dtype=bfloat16"]).model
    assert attention_backend(cfg, "tpu").value == "xla" and attention_backend(cfg, "gpu").value == "xla"  # auto
    assert validate(load_config([*BASE, *LLAMA4, "model.compute_dtype=bfloat16", "model.attention=cudnn"]), 1) == [
        "model.attention_chunk=8 needs model.attention=xla (the cudnn path has no chunked attention yet); set "
        "model.attention=xla or auto"]
    assert validate(load_config([*BASE, "model.attention_chunk=-2", "model.attn_temperature=0.1",
                                 "model.attn_temperature_floor=0"]), 1) == [
        "model.attention_chunk=-2 must be >= 0 (0 = off; Llama 4: 8192)",
        "model.attn_temperature=0.1 tunes the NoPE layers' attention, and there are none; set model.global_nope=true "
        "too (Llama 4), or model.attn_temperature=0",
        "model.attn_temperature_floor=0 must be >= 1 (positions per step of the temperature; Llama 4: 8192)"]
    code = main(["train", *BASE[:-1], f"run.dir={tmp_path / 'run'}", "model.attention_chunk=8"])  # (all devices)
    assert code == 2 and not (tmp_path / "run").exists()
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "spmdgpt: error: model.attention_chunk=8 and model.sliding_window=4 both make the L layers local; set one of "
        "them to 0 (chunks: Llama 4; windows: Mistral, Gemma, gpt-oss)")


def test_attention_sinks_take_weight_from_no_key():
    """model.attention_sinks (gpt-oss): each head's sink logit joins its softmax's denominator and
    reads no value. Hand numbers for one row; grouped heads read the same sinks as their repeated
    twins; a sink far below every score is no sink (the model without them, to 1e-6, windows and
    all); the sinks train (their gradient is a finite difference's)."""
    from spmdgpt.model.attention import dot_product_attention, grouped_attention, probabilities

    got = probabilities(jnp.array([[1.0, 2.0, 3.0]]), jnp.array([True, True, False]), 1.0, 0.0, None, jnp.float32,
                        jnp.array(0.5))
    e = np.exp([1.0, 2.0, 0.5])
    np.testing.assert_allclose(np.asarray(got), [[e[0] / e.sum(), e[1] / e.sum(), 0.0]], rtol=1e-6)

    cfg, mesh, rules, params = _model("model.attention_sinks=true", "model.window_pattern=LG")
    r = np.random.default_rng(0)
    q, k, v = (jnp.asarray(r.normal(size=s), jnp.float32) for s in ((2, 4, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8)))
    sinks, mask = jnp.asarray(r.normal(size=4), jnp.float32), jnp.tril(jnp.ones((6, 6), bool))
    with jax.set_mesh(mesh):
        grouped = grouped_attention(q, k, v, mask, rules, sinks=sinks)
        repeated = dot_product_attention(q, jnp.repeat(k, 2, axis=1), jnp.repeat(v, 2, axis=1), mask, rules,
                                         sinks=sinks)
    np.testing.assert_allclose(np.asarray(grouped), np.asarray(repeated), atol=1e-6)

    assert params.blocks.attn.sinks.shape == (2, cfg.model.num_heads)
    plain = load_config([*BASE, "model.window_pattern=LG"]).model
    toks = jnp.asarray(r.integers(0, 10, (2, 16)))
    with jax.set_mesh(mesh):
        def logits(sinks, model=cfg.model):
            attn = params.blocks.attn._replace(sinks=sinks)
            return forward(model, rules, params._replace(blocks=params.blocks._replace(attn=attn)), toks)[0]

        far = logits(jnp.full((2, 4), -1e4))
        none = logits(None, plain)
        zero = logits(jnp.zeros((2, 4)))
        loss = lambda s: jnp.mean(jax.nn.log_softmax(logits(s))[..., 3])  # noqa: E731
        s0 = jnp.asarray(r.normal(size=(2, 4)), jnp.float32)
        grad = jax.grad(loss)(s0)
        step = jnp.zeros((2, 4)).at[1, 2].set(1e-2)
        fd = (loss(s0 + step) - loss(s0 - step)) / 2e-2
    np.testing.assert_allclose(np.asarray(far), np.asarray(none), atol=1e-6)
    assert float(jnp.max(jnp.abs(zero - none))) > 1e-2  # (a sink at 0 weighs as a key of score 0)
    assert abs(float(grad[1, 2])) > 1e-5 and float(grad[1, 2]) == pytest.approx(float(fd), rel=2e-2)


def test_attention_sinks_are_refused_where_they_cannot_run():
    sinks = ["+experiment=staircase", "model.attention_sinks=true"]
    errs = validate(load_config([*sinks, "model.attention=cudnn", "model.compute_dtype=bfloat16"]), 1)
    assert ("model.attention_sinks=true needs model.attention=xla (the cudnn kernel has no sink logit); set "
            "model.attention=xla or auto") in errs
    assert attention_backend(load_config(sinks).model, "gpu") == attention_backend(load_config(sinks).model, "tpu")
    errs = validate(load_config([*sinks, "mesh.context=2", "mesh.data=1", "sharding=fsdp"]), 2)
    assert any("model.attention_sinks=true: ring attention has no sink logit yet (mesh.context=2)" in e for e in errs)
    errs = validate(load_config([*sinks, "model.mla.kv_rank=16", "model.mla.rope_dim=8"]), 1)
    assert any(e.startswith("model.attention_sinks=true with model.mla.kv_rank > 0") for e in errs)
    from spmdgpt.hf.convert import architecture

    with pytest.raises(ConfigError, match=r"model.attention_sinks=True: .* cannot be exported \(train without it"):
        architecture(load_config([*sinks, "model.norm=rmsnorm", "model.mlp=swiglu"]).model)


def test_deepseek_v4s_compressed_layers_in_query_blocks_equal_the_dense_form(monkeypatch):
    """DeepSeek-V4's C and H layers (`csa.banded_attention`: query blocks of 4 against their own rows, the
    block before's and every entry) and its S layer (the same without entries: the key blocks its window cannot
    reach skipped) give the dense form's loss and gradients (every query against every row and entry; the S
    layer's `blocked_causal_attention`, which masks them) over 32 tokens in two documents each, windows of 4
    reaching across blocks, within float32 rounding; the blocks are the smallest divisor of t that holds the
    window (8 of 32 at a window of 5), and a sequence shorter than two of them stays dense."""
    from spmdgpt.model import csa
    from spmdgpt.model.loss import objective

    cfg, mesh, rules, params = _model(
        "model.num_kv_heads=1", "model.head_dim=16", "model.qk_norm=false", "model.csa.q_rank=16",
        "model.csa.rope_dim=4", "model.csa.out_groups=1", "model.csa.out_rank=16", "model.csa.pattern=CHS",
        "model.num_layers=3",
        "model.csa.sparse_rate=2", "model.csa.heavy_rate=4", "model.csa.index_heads=2", "model.csa.index_dim=8",
        "model.csa.index_topk=3")
    assert csa.band_block(cfg.model, 32) == 4 and csa.band_block(cfg.model, 6) == 0
    assert csa.band_block(load_config([*BASE, "model.sliding_window=5"]).model, 32) == 8
    toks = np.random.default_rng(3).integers(0, 10, (2, 33)).astype(np.int32)
    segments = np.asarray([[0] * 13 + [1] * 19, [0] * 21 + [1] * 11], np.int32)
    positions = (np.arange(32)[None] - np.where(segments == 0, 0, np.asarray([[13], [21]]))).astype(np.int32)
    loss = lambda p: objective(cfg.model, rules, p, toks[:, :-1], toks[:, 1:], segments, positions)[0]  # noqa: E731
    with jax.set_mesh(mesh):
        banded = jax.device_get(jax.jit(jax.value_and_grad(loss))(params))
        monkeypatch.setattr(csa, "band_block", lambda m, t: 0)
        dense = jax.device_get(jax.jit(jax.value_and_grad(loss))(params))
    assert abs(banded[0] - dense[0]) <= 1e-6 * abs(dense[0]) and dense[0] > 1.0
    for a, b in zip(jax.tree.leaves(banded[1]), jax.tree.leaves(dense[1]), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * max(np.abs(b).max(), 1e-3))
