"""Sliding-window attention (model.sliding_window, model.window_pattern): what a query sees, the
same through the KV cache, which backends take it, and bad values. (Against transformers'
Mistral and Qwen3: tests/test_hf.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spmdgpt.config import ConfigError, layer_windows, load_config, validate
from spmdgpt.model import forward, init_cache, init_params
from spmdgpt.model.attention import attention_backend
from spmdgpt.sharding import Rules, make_mesh

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
        fwd = jax.jit(lambda t, q, c, prefill: forward(cfg.model, rules, params, t, q, c, prefill=prefill),
                      static_argnums=3)
        logits, cache = fwd(toks[:, :24], pos[:, :24], init_cache(cfg.model, rules, 2, 32), True)
        steps = [np.asarray(logits)]
        for i in range(24, 32):
            logits, cache = fwd(toks[:, i:i + 1], pos[:, i:i + 1], cache, False)
            steps.append(np.asarray(logits))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=2e-5)


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
