"""DeepSeek-V4's units, each against transformers' module (5.24, float32) on the same inputs and
weights: the manifold-constrained hyper-connections (model.hyper_connections: DeepseekV4HyperConnection,
the decoder layer's merge, DeepseekV4HyperHead), and the model options working on their own, on one
device, on a mesh and in the inference engine."""

import jax
import jax.numpy as jnp
import numpy as np
from conftest import full_forward_samples
from layouts import assert_close, cfg_for, reference, run

from spmdgpt.config import load_config, validate
from spmdgpt.engine import Engine, EngineConfig, Request
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import hyper, init_params
from spmdgpt.model.hyper import Hyper

TOL = 1e-5  # float32: |ours - transformers'| <= TOL x max |transformers'|, per output


def _close(ours, theirs):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() <= TOL * np.abs(theirs).max(), np.abs(ours - theirs).max()


def _ask(torch_side, tmp_path, unit, config, weights, inputs):
    w, x, out = (str(tmp_path / f"{unit}-{name}.npz") for name in ("weights", "inputs", "out"))
    np.savez(w, **weights)
    np.savez(x, **inputs)
    torch_side.ask("deepseek_v4", unit=unit, config=config, weights=w, inputs=x, out=out)
    return dict(np.load(out))


def _one_device(*overrides):
    cfg = load_config(["+experiment=staircase", "mesh.data=1", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    return cfg.model, mesh, Rules(mesh, cfg.sharding, cfg.model)


N, D = 4, 16  # streams, width


def test_hyper_connections_equal_transformers(torch_side, tmp_path):
    """DeepseekV4HyperConnection's post, comb (Sinkhorn-Knopp, 20 iterations) and collapsed input,
    the decoder layer's merge of a branch output back into the streams, and DeepseekV4HyperHead's
    fold, on random streams [2, 5, 4, 16] with random weights (scales and biases far from their
    init), equal ours within 1e-5; comb's columns sum to 1 within 1e-5, its rows within 2%."""
    m, mesh, rules = _one_device("model.hyper_connections=4", f"model.d_model={D}", "model.norm=rmsnorm",
                                 "model.norm_eps=1e-6")
    rng = np.random.default_rng(0)
    f32 = lambda *s, scale=1.0: (scale * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    mixes = (2 + N) * N
    fn, base, scale = f32(mixes, N * D, scale=0.3), f32(mixes, scale=0.5), (0.5 + rng.random(3)).astype(np.float32)
    head_fn, head_base, head_scale = f32(N, N * D, scale=0.3), f32(N, scale=0.5), np.float32([1.3])
    streams, branch = f32(2, 5, N, D), f32(2, 5, D)
    config = {"hidden_size": D, "hc_mult": N, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
              "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 8, "vocab_size": 32}
    theirs = _ask(torch_side, tmp_path, "hyper", config, {"fn": fn, "base": base, "scale": scale},
                  {"streams": streams, "branch": branch})
    head = _ask(torch_side, tmp_path, "hyper_head", config, {"hc_fn": head_fn, "hc_base": head_base,
                                                             "hc_scale": head_scale}, {"streams": streams})
    as_ours = lambda w: jnp.asarray(w.T.reshape(N, D, -1))  # noqa: E731  ([m, n D] -> [n, D, m])
    p = Hyper(as_ours(fn), jnp.asarray(base), jnp.asarray(scale))
    x, out = jnp.asarray(streams.reshape(10, N, D)), jnp.asarray(branch.reshape(10, D))
    with jax.set_mesh(mesh):
        pre, post, comb = jax.jit(lambda x: hyper.weights(m, rules, p, x))(x)
        collapsed = hyper.collapse(rules, pre, x)
        merged = hyper.merge(rules, post, comb, out, x)
        folded = hyper.fold(m, rules, Hyper(as_ours(head_fn), jnp.asarray(head_base), jnp.asarray(head_scale)), x)
    _close(post, theirs["post"].reshape(10, N))
    _close(comb, theirs["comb"].reshape(10, N, N))
    _close(collapsed, theirs["collapsed"].reshape(10, D))
    _close(merged, theirs["merged"].reshape(10, N, D))
    _close(folded, head["folded"].reshape(10, D))
    # (columns are normalised last; 20 iterations leave the rows within 2% of 1 here)
    assert np.abs(np.asarray(comb).sum(-2) - 1).max() < 1e-5 and np.abs(np.asarray(comb).sum(-1) - 1).max() < 0.02
    assert np.asarray(comb).std() > 0.05  # (not the uniform matrix: the test's weights mix the streams unevenly)


HYPER = ("model.hyper_connections=4", "model.norm=rmsnorm", "model.mlp=swiglu")


def test_hyper_connections_on_a_mesh_equal_one_device():
    """A model with 4 streams: loss and every gradient (documents, restarted positions) under
    fsdp_tp on data 2 x model 2 equal one device's within 1e-5 (the hyper-connections' weights
    stored split over FSDP, the streams over the batch)."""
    loss, grads, _ = run(cfg_for(*HYPER, "sharding=fsdp_tp", "mesh.data=2", "mesh.model=2"))
    want_loss, want_grads, _ = reference(HYPER)
    assert abs(loss - want_loss) <= 1e-5 * abs(want_loss)
    assert_close(grads, want_grads)
    assert grads.blocks.hc_attn.w.shape == (2, 4, 32, 24) and grads.hc_head.w.shape == (4, 32, 4)
    assert np.abs(grads.blocks.hc_mlp.w).max() > 0 and np.abs(grads.hc_head.bias).max() > 0


def test_hyper_connections_decode_in_the_engine_as_the_full_forward():
    """The inference engine (paged cache, two slots for three prompts, a prompt of 10 in chunks of
    8) gives the greedy tokens of the model's full forward pass over each sequence so far."""
    m, mesh, rules = _one_device(*HYPER, "model.init_std=0.2", "model.num_layers=2")
    prompts = [[1, 2, 3], [5], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]]
    with jax.set_mesh(mesh):
        params = init_params(m, jax.random.key(0), rules)
        want = full_forward_samples(m, rules, params, prompts, 6)
        got = Engine(m, rules, params, m.vocab_size, EngineConfig(slots=2, page_size=4, chunk=8)).run(
            [Request(p, 6, temperature=0.0) for p in prompts])
    assert [r.tokens for r in got] == want


def test_bad_settings_are_one_line_each():
    for overrides, expected in [
        (["model.hyper_connections=-1"], "model.hyper_connections=-1 must be >= 0"),
        (["model.hyper_eps=1e-3"], "model.hyper_eps set without model.hyper_connections"),
        (["model.hyper_connections=4", "model.hyper_sinkhorn_iters=0"], "model.hyper_sinkhorn_iters=0 must be >= 1"),
        (["model.hyper_connections=4", "model.mtp_depth=1"], "model.hyper_connections=4 and model.mtp_depth do not"),
        (["model.hyper_connections=2", "sharding=fsdp", "mesh.stage=2", "mesh.data=4", "model.num_layers=4"],
         "mesh.stage=2 with model.hyper_connections=2: the pipeline's stages pass one residual stream"),
    ]:
        errs = validate(load_config(["+experiment=staircase", *overrides]), 8)
        assert any(e.startswith(expected) for e in errs), errs

