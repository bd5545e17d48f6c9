"""DeepSeek-V4's units, each against transformers' module (5.24, float32) on the same inputs and
weights: the manifold-constrained hyper-connections (model.hyper_connections: DeepseekV4HyperConnection,
the decoder layer's merge, DeepseekV4HyperHead), the MoE block's routers (model.moe.router=sqrtsoftplus,
the hash router of model.moe.hash_layers) and clipped experts (model.mlp=swiglu_clip:
DeepseekV4SparseMoeBlock), the attention's sliding branch (model.csa: DeepseekV4Attention), and the
model options working on their own, on one device, on a mesh and in
the inference engine."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layouts import assert_close, cfg_for, reference, run

from spmdgpt.cli import main
from spmdgpt.config import load_config, validate
from spmdgpt.engine import Engine, EngineConfig, Request
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward, hyper, init_params
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
    head_p = Hyper(as_ours(head_fn), jnp.asarray(head_base), jnp.asarray(head_scale))

    def ours(x, out):
        pre, post, comb = hyper.weights(m, rules, p, x)
        return post, comb, hyper.collapse(rules, pre, x), hyper.merge(rules, post, comb, out, x), hyper.fold(
            m, rules, head_p, x)

    with jax.set_mesh(mesh):
        post, comb, collapsed, merged, folded = jax.jit(ours)(x, out)
    _close(post, theirs["post"].reshape(10, N))
    _close(comb, theirs["comb"].reshape(10, N, N))
    _close(collapsed, theirs["collapsed"].reshape(10, D))
    _close(merged, theirs["merged"].reshape(10, N, D))
    _close(folded, head["folded"].reshape(10, D))
    # (columns are normalised last; 20 iterations leave the rows within 2% of 1 here)
    assert np.abs(np.asarray(comb).sum(-2) - 1).max() < 1e-5 and np.abs(np.asarray(comb).sum(-1) - 1).max() < 0.02
    assert np.asarray(comb).std() > 0.05  # (not the uniform matrix: the test's weights mix the streams unevenly)


E, K, F, V = 4, 2, 8, 32  # experts, top k, each expert's width, vocabulary
MOE = ("model.num_layers=2", "model.num_heads=2", f"model.d_model={D}", f"model.vocab_size={V}", "model.norm=rmsnorm",
       f"model.moe.num_experts={E}", f"model.moe.top_k={K}", "model.moe.mlp_factor=0.5", "model.moe.shared_experts=1",
       "model.moe.router=sqrtsoftplus", "model.moe.route_scale=1.5", "model.mlp=swiglu_clip", "model.glu_limit=0.5",
       "model.moe.hash_layers=1", "model.moe.bias_update_rate=0.001")


def test_hash_and_top_k_routed_experts_equal_transformers(torch_side, tmp_path):
    """DeepseekV4SparseMoeBlock (sqrt(softplus) scores, weights x 1.5, gate and up clipped at 0.5,
    a shared expert) in a hash layer (a random tid2eid) and in a top-k layer (a random
    e_score_correction_bias) equals our MoE unit with the table's routes / the balancing bias, on
    the same 12 tokens, within 1e-5; the routes are the hash layers' only (-1 in the other layer)."""
    m, mesh, rules = _one_device(*MOE)
    rng = np.random.default_rng(1)
    f32 = lambda *s, scale=1.0: (scale * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    gate_up, down, router, bias = f32(E, 2 * F, D, scale=0.5), f32(E, D, F, scale=0.5), f32(E, D), f32(E, scale=0.3)
    shared = {n: f32(*s, scale=0.5) for n, s in (("gate_proj", (F, D)), ("up_proj", (F, D)), ("down_proj", (D, F)))}
    tid2eid = np.stack([rng.permutation(E)[:K] for _ in range(V)]).astype(np.int64)
    ids, hidden = rng.integers(0, V, (2, 6)), f32(2, 6, D)
    config = {"hidden_size": D, "num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 8, "vocab_size": V,
              "n_routed_experts": E, "num_experts_per_tok": K, "moe_intermediate_size": F, "n_shared_experts": 1,
              "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5, "swiglu_limit": 0.5,
              "mlp_layer_types": ["hash_moe", "moe"]}
    common = {"experts.gate_up_proj": gate_up, "experts.down_proj": down, "gate.weight": router,
              **{f"shared_experts.{n}.weight": w for n, w in shared.items()}}
    theirs = [_ask(torch_side, tmp_path, "moe", config, {**common, **extra}, {"hidden": hidden, "ids": ids,
                                                                               "layer": np.int64(layer)})["out"]
              for layer, extra in ((0, {"gate.tid2eid": tid2eid}), (1, {"gate.e_score_correction_bias": bias}))]
    from spmdgpt.model.mlp import Mlp
    from spmdgpt.model.moe import Moe, hash_routes, moe

    t = lambda a: jnp.asarray(np.swapaxes(a, -1, -2))  # noqa: E731
    p = Moe(router=t(router), w_up=t(gate_up[:, F:]), w_gate=t(gate_up[:, :F]), w_down=t(down),
            shared=Mlp(t(shared["up_proj"]), None, t(shared["gate_proj"]), t(shared["down_proj"]), None),
            router_bias=jnp.asarray(bias))
    with jax.set_mesh(mesh):
        routes = hash_routes(m, rules, jnp.asarray(tid2eid[None], jnp.float32), jnp.asarray(ids.reshape(-1)))
        assert (np.asarray(routes[0]) == tid2eid[ids.reshape(-1)]).all() and (np.asarray(routes[1]) == -1).all()
        unit = jax.jit(lambda x, r: moe(m, rules, p, x, r)[0])
        ours = [unit(jnp.asarray(hidden.reshape(12, D)), routes[i]) for i in range(2)]
    for o, th in zip(ours, theirs, strict=True):
        _close(o, th.reshape(12, D))
    assert np.abs(theirs[0] - theirs[1]).max() > 0.1  # (the two routings differ on these tokens)


N_HEADS, H, R, G, O, W = 4, 16, 12, 2, 6, 5  # heads of H, query latent, output groups of rank O, window


def _attention_weights(rng):
    """Random weights of a DeepseekV4Attention without its compressor, transformers' names -> arrays."""
    f32 = lambda *s, scale=1.0: (scale * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    return {"q_a_proj.weight": f32(R, D, scale=0.4), "q_a_norm.weight": 1 + f32(R, scale=0.2),
            "q_b_proj.weight": f32(N_HEADS * H, R, scale=0.4), "kv_proj.weight": f32(H, D, scale=0.4),
            "kv_norm.weight": 1 + f32(H, scale=0.2), "o_a_proj.weight": f32(G * O, N_HEADS * H // G, scale=0.3),
            "o_b_proj.weight": f32(D, G * O, scale=0.3), "sinks": f32(N_HEADS)}


def _as_attention(w) -> dict:
    """Our Csa fields (the compressors' aside) of those weights."""
    j = jnp.asarray
    return dict(w_qa=j(w["q_a_proj.weight"].T), q_norm=j(w["q_a_norm.weight"]),
                w_qb=j(w["q_b_proj.weight"].T.reshape(R, N_HEADS, H)), w_kv=j(w["kv_proj.weight"].T),
                kv_norm=j(w["kv_norm.weight"]), sinks=j(w["sinks"]),
                w_oa=j(w["o_a_proj.weight"].reshape(G, O, N_HEADS // G, H).transpose(0, 2, 3, 1)),
                w_ob=j(w["o_b_proj.weight"].T.reshape(G, O, D)))


def test_shared_kv_attention_equals_transformers(torch_side, tmp_path):
    """A sliding DeepseekV4Attention (4 heads of 16 over one shared key/value head, its last 8
    dimensions rotated, sinks, 2 output groups of rank 6, a window of 5 over 11 tokens) equals
    our model.csa unit on the same weights and inputs within 1e-5 (with the output rotated forward
    instead of back: 1.8 off)."""
    m, mesh, rules = _one_device(f"model.d_model={D}", f"model.num_heads={N_HEADS}", f"model.head_dim={H}",
                                 "model.num_kv_heads=1", f"model.csa.q_rank={R}", "model.csa.rope_dim=8",
                                 f"model.csa.out_groups={G}", f"model.csa.out_rank={O}", "model.norm_eps=1e-6",
                                 "model.rope_theta=100")
    rng = np.random.default_rng(2)
    w = _attention_weights(rng)
    hidden = rng.standard_normal((2, 11, D)).astype(np.float32)
    config = {"hidden_size": D, "num_hidden_layers": 1, "num_attention_heads": N_HEADS, "num_key_value_heads": 1,
              "head_dim": H, "q_lora_rank": R, "partial_rotary_factor": 0.5, "o_groups": G, "o_lora_rank": O,
              "sliding_window": W, "rope_theta": 100.0, "layer_types": ["sliding_attention"], "rms_norm_eps": 1e-6,
              "vocab_size": V}
    theirs = _ask(torch_side, tmp_path, "attention", config, w, {"hidden": hidden})["out"]
    from spmdgpt.model.attention import UnitInputs
    from spmdgpt.model.csa import Csa, csa_attention

    j = jnp.asarray
    p = Csa(**_as_attention(w))
    with jax.set_mesh(mesh):
        ours = jax.jit(lambda x: csa_attention(m, rules, p, x, UnitInputs(jnp.arange(11), 2, window=jnp.int32(W)))[0])(
            j(hidden.reshape(22, D)))
    _close(ours, theirs.reshape(22, D))


T, RATES, IH, ID, TOPK = 16, {"C": 2, "H": 4}, 4, 12, 3  # tokens; compress rates; the indexer's heads, width, top-k
KIND = {"C": "compressed_sparse_attention", "H": "heavily_compressed_attention"}
COMPRESSED = (f"model.d_model={D}", f"model.num_heads={N_HEADS}", f"model.head_dim={H}", "model.num_kv_heads=1",
              f"model.csa.q_rank={R}", "model.csa.rope_dim=8", f"model.csa.out_groups={G}", f"model.csa.out_rank={O}",
              "model.norm_eps=1e-6", "model.rope_theta=100", f"model.csa.sparse_rate={RATES['C']}",
              f"model.csa.heavy_rate={RATES['H']}", "model.csa.compress_theta=1000", f"model.csa.index_heads={IH}",
              f"model.csa.index_dim={ID}", f"model.csa.index_topk={TOPK}", "model.rope_scaling=yarn",
              "model.rope_factor=4", "model.rope_original_max_len=4", "model.rope_attention_factor=1")


def _compressed_config(kind):
    """transformers' config of one layer of `kind` ("C" or "H") as COMPRESSED's, its YaRN on the compressed RoPE."""
    return {"hidden_size": D, "num_hidden_layers": 1, "num_attention_heads": N_HEADS, "num_key_value_heads": 1,
            "head_dim": H, "q_lora_rank": R, "partial_rotary_factor": 0.5, "o_groups": G, "o_lora_rank": O,
            "sliding_window": W, "rope_theta": 100.0, "layer_types": [KIND[kind]], "rms_norm_eps": 1e-6,
            "vocab_size": V, "compress_rates": {KIND[k]: r for k, r in RATES.items()}, "compress_rope_theta": 1000.0,
            "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4},
            "index_n_heads": IH, "index_head_dim": ID, "index_topk": TOPK}


def _compressor_weights(rng, kind):
    """Random weights of a `kind` layer's compressor (and indexer), transformers' names -> arrays."""
    f32 = lambda *s, scale=1.0: (scale * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    c = 2 if kind == "C" else 1
    w = {"kv_proj.weight": f32(c * H, D, scale=0.4), "gate_proj.weight": f32(c * H, D, scale=0.4),
         "position_bias": f32(RATES[kind], c * H, scale=0.5), "kv_norm.weight": 1 + f32(H, scale=0.2)}
    if kind == "C":
        w.update({"indexer.kv_proj.weight": f32(2 * ID, D, scale=0.4), "indexer.gate_proj.weight": f32(2 * ID, D,
                                                                                                       scale=0.4),
                  "indexer.position_bias": f32(RATES[kind], 2 * ID, scale=0.5),
                  "indexer.kv_norm.weight": 1 + f32(ID, scale=0.2), "indexer.q_b_proj.weight": f32(IH * ID, R),
                  "indexer.scorer.weights_proj.weight": f32(IH, D)})
    return w


def _as_compressor(w, prefix, h, c):
    from spmdgpt.model.csa import Compressor

    j = jnp.asarray
    return Compressor(w_kv=j(w[prefix + "kv_proj.weight"].T.reshape(D, c, h)),
                      w_gate=j(w[prefix + "gate_proj.weight"].T.reshape(D, c, h)),
                      bias=j(w[prefix + "position_bias"].reshape(-1, c, h)), norm=j(w[prefix + "kv_norm.weight"]))


def _as_compressors(w, prefix=""):
    """Our Csa fields (heavy, or sparse and index) of transformers' compressor weights."""
    from spmdgpt.model.csa import Indexer

    if prefix + "indexer.kv_proj.weight" not in w:
        return {"heavy": _as_compressor(w, prefix, H, 1)}
    i = prefix + "indexer."
    return {"sparse": _as_compressor(w, prefix, H, 2),
            "index": Indexer(keys=_as_compressor(w, i, ID, 2), w_q=jnp.asarray(w[i + "q_b_proj.weight"].T.reshape(
                R, IH, ID)), w_w=jnp.asarray(w[i + "scorer.weights_proj.weight"].T))}


def test_compressors_equal_transformers(torch_side, tmp_path):
    """DeepseekV4HCACompressor (windows of 4) and DeepseekV4CSACompressor (overlapping windows of 2 x 2)
    with its DeepseekV4Indexer (4 heads of 12, top 3), without a cache, on 16 random tokens of 2
    sequences (random position biases, norms, YaRN on the compressed RoPE base 1000), equal our
    `csa.compress` within 1e-5 (4 and 8 entries); which entries each query sees (whole windows only)
    and the indexer's picks (3 of them once 3 are whole) are the same."""
    from spmdgpt.model.attention import UnitInputs
    from spmdgpt.model.csa import compress, index_select, tail_frequencies

    m, mesh, rules = _one_device(*COMPRESSED, "model.csa.pattern=CH")
    rng = np.random.default_rng(3)
    hidden, cq = rng.standard_normal((2, T, D)).astype(np.float32), rng.standard_normal((2, T, R)).astype(np.float32)
    for kind in "HC":
        w = _compressor_weights(rng, kind)
        theirs = _ask(torch_side, tmp_path, "compressor", _compressed_config(kind), w,
                      {"hidden": hidden, "q_residual": cq})
        p = _as_compressors(w)
        u = UnitInputs(jnp.arange(T), 2)

        def ours(x, cq):
            inv = tail_frequencies(m, True)
            entries, visible = compress(m, rules, p["heavy"] if kind == "H" else p["sparse"], x, u, RATES[kind], inv)
            picked = visible if kind == "H" else index_select(m, rules, p["index"], x, cq, u, visible, inv)
            return entries, visible, picked

        with jax.set_mesh(mesh):
            entries, visible, picked = jax.jit(ours)(jnp.asarray(hidden.reshape(2 * T, D)),
                                                     jnp.asarray(cq.reshape(2 * T, R)))
        _close(entries, theirs["entries"])
        assert entries.shape == (2, T // RATES[kind], H)
        assert (np.asarray(picked) == (theirs["visible"] > 0)).all()
        if kind == "C":
            their_picks = np.zeros_like(np.asarray(picked))
            idx = theirs["picked"].astype(int)
            for b, t, k in np.argwhere(idx >= 0):
                their_picks[b, t, idx[b, t, k]] = True
            assert (their_picks == np.asarray(picked)).all()
            assert np.asarray(picked).sum(-1).max() == TOPK and (np.asarray(visible).sum(-1) > TOPK).any()


def test_compressed_attention_equals_transformers(torch_side, tmp_path):
    """A heavily compressed DeepseekV4Attention (entries of 4 tokens) and a compressed sparse one (of 2 x 2
    tokens, the indexer's top 3), both with the sliding branch's window of 5, the compressed RoPE (base 1000,
    YaRN x 4) on queries, keys, entries and the output's back-rotation, equal our model.csa unit with
    model.csa.pattern=H / C on 16 random tokens within 1e-5 (and each differs from the sliding layer's output
    on the same weights by more than 0.1). (Index scores tie where every head's ReLU is 0: torch.topk keeps one
    of the tied entries, `mla.top_keys` all of them; seed 4 had such a tie at the third place, 0.099 off at that
    token, and is not used.)"""
    from spmdgpt.model.attention import UnitInputs
    from spmdgpt.model.csa import Csa, csa_attention

    rng = np.random.default_rng(5)
    w = _attention_weights(rng)
    hidden = rng.standard_normal((2, T, D)).astype(np.float32)
    j, base = jnp.asarray, _as_attention(w)
    outs = {}
    for kind in "SHC":
        m, mesh, rules = _one_device(*COMPRESSED, f"model.csa.pattern={kind}", f"model.sliding_window={W}")
        extra = {} if kind == "S" else _compressor_weights(rng, kind)
        with jax.set_mesh(mesh):
            p = Csa(**base, **(_as_compressors(extra) if extra else {}))
            outs[kind] = np.asarray(jax.jit(lambda x: csa_attention(  # noqa: B023
                m, rules, p, x, UnitInputs(jnp.arange(T), 2, window=jnp.int32(W)))[0])(j(hidden.reshape(2 * T, D))))
        if kind != "S":
            config = _compressed_config(kind)
            theirs = _ask(torch_side, tmp_path, "attention", config,
                          {**w, **{f"compressor.{k}": v for k, v in extra.items()}}, {"hidden": hidden})["out"]
            _close(outs[kind], theirs.reshape(2 * T, D))
            assert np.abs(outs[kind] - outs["S"]).max() > 0.1


def test_the_c_layers_indexer_learns_by_its_kl_against_the_attention(monkeypatch):
    """model.csa.index_train / index_kl: DeepSeek-V3.2's training of the indexer on DeepSeek-V4's C layers. A C
    layer (COMPRESSED's, 16 tokens of 2 sequences, a window of 5) reports the KL from its attention's
    probabilities of the entries (summed over heads, L1-normalised) to softmax of the indexer's scores: the same
    with the softmax in query blocks (banded) as dense (1e-6); 0 with a top 1 (one entry: both distributions
    1 there; within 1e-6, rounding); with a top-k past the 8 entries the dense warm-up's (the same support and
    attention); > 0 otherwise. In the objective of a C and an S layer (one stack, the kinds by lax.switch)
    the indexer gets a gradient (from its KL: the cross-entropy gives it none); the warm-up
    (index_train=dense) gives the indexer alone a gradient (every other exactly 0: the KL reaches no other
    parameter) and leaves the MoE's balancing bias, which training moves, and 30 steps of Adam on it at least
    halve the KL."""
    import dataclasses

    import optax

    import spmdgpt.model.csa as csa
    from spmdgpt.model.attention import UnitInputs
    from spmdgpt.model.loss import objective
    from spmdgpt.model.params import between_steps

    rng = np.random.default_rng(5)
    w, extra = _attention_weights(rng), _compressor_weights(rng, "C")
    hidden = jnp.asarray(rng.standard_normal((2 * T, D)).astype(np.float32))

    def kl_of(*overrides):
        m, mesh, rules = _one_device(*COMPRESSED, "model.csa.pattern=C", f"model.sliding_window={W}", *overrides)
        with jax.set_mesh(mesh):
            p = csa.Csa(**_as_attention(w), **_as_compressors(extra))
            u = UnitInputs(jnp.arange(T), 2, window=jnp.int32(W))
            return float(jax.jit(lambda x: csa.csa_attention(m, rules, p, x, u)[2]["indexer_kl"])(hidden))

    banded = kl_of()
    with monkeypatch.context() as patch:
        patch.setattr(csa, "band_block", lambda cfg, t: 0)
        dense_form = kl_of()
    assert banded > 0.01 and abs(banded - dense_form) <= 1e-6 * banded, (banded, dense_form)
    assert abs(kl_of("model.csa.index_topk=1")) <= 1e-6 * banded  # (0 but for rounding: -7.5e-9 seen)
    every = kl_of("model.csa.index_topk=8")
    assert abs(every - kl_of("model.csa.index_train=dense")) <= 1e-7 * every and every > banded

    m, mesh, rules = _one_device(*COMPRESSED, "model.csa.pattern=CS", "model.num_layers=2", f"model.sliding_window={W}",
                                 "model.moe.num_experts=4", "model.moe.top_k=2", "model.moe.mlp_factor=0.5",
                                 "model.moe.router=sqrtsoftplus", "model.moe.bias_update_rate=0.01")
    toks = jnp.asarray(np.random.default_rng(0).integers(0, m.vocab_size, (2, T + 1)), jnp.int32)
    with_csa = lambda **kw: dataclasses.replace(m, csa=dataclasses.replace(m.csa, **kw))  # noqa: E731
    grad_of = lambda model: jax.grad(  # noqa: E731
        lambda p: objective(model, rules, p, toks[:, :-1], toks[:, 1:]), has_aux=True)
    warm_model = with_csa(index_train="dense")
    warm, opt = grad_of(warm_model), optax.adam(3e-2)

    @jax.jit
    def step(p, state):  # (the warm-up: Adam on its gradient, which only the indexer's parameters get; then the
        # state set between steps, which it leaves: the balancing bias)
        g, metrics = warm(p)
        updates, state = opt.update(g, state, p)
        new = between_steps(warm_model, p, optax.apply_updates(p, updates), metrics["between_steps"])
        return new, state, metrics["aux/indexer_kl"], g

    with jax.set_mesh(mesh):
        params = init_params(m, jax.random.key(0), rules)
        on, metrics = jax.jit(grad_of(m))(params)
        moved = between_steps(m, params, params, metrics["between_steps"]).blocks.mlp.router_bias
        state, kls, first = opt.init(params), [], None
        for _ in range(31):
            params, state, kl, g = step(params, state)
            kls.append(float(kl))
            first = g if first is None else first
    index = lambda g: jax.tree.leaves(g.blocks.attn.index)  # noqa: E731
    rest = lambda g: jax.tree.leaves(  # noqa: E731
        g._replace(blocks=g.blocks._replace(attn=g.blocks.attn._replace(index=None))))
    # (the cross-entropy gives the indexer no gradient: test_the_units_on_a_mesh_equal_one_device; its KL gives
    # the other parameters none: in the warm-up they get exactly 0, the KL alone being differentiated)
    assert all(np.asarray(a).any() for a in index(on)) and any(np.asarray(a).any() for a in rest(on))
    assert all(np.asarray(a).any() for a in index(first)) and not any(np.asarray(a).any() for a in rest(first))
    assert float(metrics["aux/indexer_kl"]) > 0.01  # (the C layer's: the S layer's 0 is not in the mean)
    assert kls[-1] <= 0.5 * kls[0], kls
    # (the balancing bias moves in training, not in the warm-up: every other parameter stays as it is)
    assert np.abs(np.asarray(moved)).max() > 0 and not np.asarray(params.blocks.mlp.router_bias).any()


# the units that decode, on their own options: 4 streams, a dense layer, then a hash-routed MoE layer and a top-k one
ALL = (*MOE[2:], "model.num_layers=3", "model.moe.first_dense_layers=1", "model.hyper_connections=4")
# ... and DeepSeek-V4's attention (a window of 5)
ALL_CSA = (*ALL, "model.num_kv_heads=1", f"model.head_dim={H}", f"model.csa.q_rank={R}", "model.csa.rope_dim=8",
           f"model.csa.out_groups={G}", f"model.csa.out_rank={O}", f"model.sliding_window={W}")


# ... and its compressed layers: the dense layer compressed sparse attention, the hash-routed one heavily compressed,
# the top-k one sliding alone
ALL_COMPRESSED = (*ALL_CSA, "model.csa.pattern=CHS", "model.csa.sparse_rate=2", "model.csa.heavy_rate=4",
                  "model.csa.index_heads=2", "model.csa.index_dim=8", "model.csa.index_topk=2",
                  "model.csa.compress_theta=1000")


def test_the_units_on_a_mesh_equal_one_device():
    """Every unit at once (DeepSeek-V4's attention too, a C, an H and an S layer: entries of 2 x 2 and 4
    tokens over sequences of 64, their documents'): loss and every gradient (documents, restarted
    positions) on data 2 x expert 2 x model 2 with collective matmuls (the experts split over `expert`, the
    hyper-connections' weights over FSDP, the query heads over `model`, the streams over the batch and,
    split, over `model`; the routes' select failed there before they were resharded) equal one device's
    within 1e-5; the hash table gets no gradient, the streams' weights do, the compressors theirs in
    their own layers alone (the dense stack has the C layer's alone, the MoE stack the H layer's, its S layer
    picked by lax.switch), the indexer none (its top-k is not differentiable). (data 2 x context 2,
    without compressed layers, gave one device's loss exactly and its gradients within 2.7e-6: checked once,
    not kept.)"""
    loss, grads, _ = run(cfg_for(*ALL_COMPRESSED, "sharding=fsdp_tp", "mesh.data=2", "mesh.expert=2", "mesh.model=2",
                                 "model.collective_matmul=bi"))
    want_loss, want_grads, _ = reference(ALL_COMPRESSED)
    assert abs(loss - want_loss) <= 1e-5 * abs(want_loss)
    assert_close(grads, want_grads)
    assert grads.hash_experts.shape == (1, V, K) and not np.asarray(grads.hash_experts).any()
    assert grads.blocks.hc_attn.w.shape == (2, 4, D, 24) and grads.hc_head.w.shape == (4, D, 4)
    assert np.abs(grads.blocks.hc_mlp.w).max() > 0 and np.abs(grads.hc_head.bias).max() > 0
    dense, moe = grads.dense_blocks.attn, grads.blocks.attn  # (layer 0: C; layers 1, 2: H, S)
    assert np.abs(dense.sparse.w_kv).max() > 0 and np.abs(dense.sparse.bias).max() > 0
    assert np.abs(moe.heavy.w_gate[0]).max() > 0 and not np.asarray(moe.heavy.w_gate[1]).any()
    assert dense.heavy is None and moe.sparse is None and moe.index is None  # (each stack its own kinds')
    assert not any(np.asarray(g).any() for g in jax.tree.leaves(dense.index))


def test_the_units_decode_in_the_engine_as_the_full_forward():
    """Every unit at once in the inference engine, DeepSeek-V4's compressed layers too (ALL_COMPRESSED: a C
    layer, entries of 2 x 2 tokens, the indexer's top 2; an H layer, entries of 4; an S layer; each with its
    window of 5 over one key/value row a token), pages of 4 tokens (2 C entries and 1 H entry a page), prompts
    read in chunks of 3 (windows split between chunks and steps), two slots and two prefill rows: prompts of 7
    and 47 tokens start together, the 7's decodes 6 tokens while the 47's is read, then one of 5 takes its slot
    (its window states start again) and decodes 6 beside the 47's last chunks, which sample 1 token (so every
    step reads a prompt: two programs, not three), each step's rows routed by their own tokens (a random
    table). The greedy tokens are the full forward pass's argmax at every place (teacher-forced, one pass over
    the padded sequences) and their log-probabilities within 1e-4. The pool's bytes (`pool_bytes`) are its
    arrays', the entries' and the window states' with them. (Checked once on these weights, not kept: the
    forward with index_topk above the entries moves a log-probability by 1.47, the compressors' w_kv zeroed
    by 2.5: the selection and the entries count.)"""
    m, mesh, rules = _one_device(*ALL_COMPRESSED, "model.init_std=0.2")
    rng = np.random.default_rng(7)
    prompts = [[1, 2, 3, 4, 5, 6, 7], rng.integers(0, V, 47).tolist(), [9, 8, 7, 6, 5]]
    new = [6, 1, 6]
    table = np.stack([np.random.default_rng(v).permutation(E)[:K] for v in range(V)])[None].astype(np.float32)
    with jax.set_mesh(mesh):
        params = init_params(m, jax.random.key(0), rules)
        params = params._replace(hash_experts=jax.device_put(table, params.hash_experts.sharding))
        engine = Engine(m, rules, params, m.vocab_size, EngineConfig(slots=2, page_size=4, chunk=3, prefills=2))
        got = engine.run([Request(p, n, temperature=0.0) for p, n in zip(prompts, new, strict=True)])
        width = max(len(p) + n for p, n in zip(prompts, new, strict=True))
        seqs = np.asarray([p + r.tokens + [0] * (width - len(p) - len(r.tokens)) for p, r in zip(prompts, got,
                                                                                                 strict=True)])
        logp = np.asarray(jax.nn.log_softmax(jax.jit(lambda p, t: forward(m, rules, p, t)[0])(params, seqs)))
        pool = {k: (a.shape, a.nbytes) for k, a in engine.pool.items()}
    assert {groups for groups, *_ in engine.step_sizes} == {(False, True), (True, True)}
    for p, r, n, lp in zip(prompts, got, new, logp, strict=True):
        want = lp[len(p) - 1:len(p) - 1 + n]  # (the predictions of each new token)
        assert len(r.tokens) == n and (want.argmax(-1) == r.tokens).all()
        assert np.abs(np.asarray(r.logprobs) - want[np.arange(n), r.tokens]).max() < 1e-4
    pages = engine.num_pages
    assert pool["entries.C"][0] == (1, pages, 2, H) and pool["entries.I"][0] == (1, pages, 2, 8)
    assert pool["entries.H"][0] == (1, pages, 1, H) and pool["window.H.gate"][0] == (1, 3, 4, 1, H)
    assert pool["window.C.kv"][0] == (1, 3, 4, 2, H) and pool["window.I.gate"][0] == (1, 3, 4, 2, 8)
    assert engine.pool_bytes == sum(b for _, b in pool.values())


def test_bad_settings_are_one_line_each():
    for overrides, expected in [
        (["model.hyper_connections=-1"], "model.hyper_connections=-1 must be >= 0"),
        (["model.hyper_eps=1e-3"], "model.hyper_eps set without model.hyper_connections"),
        (["model.hyper_connections=4", "model.hyper_sinkhorn_iters=0"], "model.hyper_sinkhorn_iters=0 must be >= 1"),
        (["model.hyper_connections=4", "model.hyper_eps=1e300"], "model.hyper_eps=1e+300 must be in [0, 1)"),
        (["model.moe.num_experts=4", "model.moe.hash_layers=5"], "model.moe.hash_layers=5 must be between 0 and"),
        (["model.moe.num_experts=300", "model.moe.top_k=2", "model.moe.hash_layers=1", "model.param_dtype=bfloat16"],
         "model.moe.hash_layers=1 with model.param_dtype=bfloat16 and 300 experts"),
        (["model.mlp=swiglu_clip", "model.glu_limit=0"], "model.glu_limit=0"),
        # (set where nothing reads them: one line naming them, never ignored)
        (["model.moe.hash_layers=2", "model.moe.dense_mlp=true"], "model.moe.hash_layers=2, model.moe.dense_mlp=true "
         "set without experts (model.moe.num_experts=0); set model.moe.num_experts > 0"),
        (["model.glu_limit=3"], "model.glu_limit=3.0 is read only by model.mlp=swiglu_clamped (gpt-oss) or swiglu_clip "
                                "(DeepSeek-V4), not gelu; change model.mlp or leave model.glu_limit at 7.0"),
        (["model.mlp=swiglu_clip", "model.glu_alpha=2"], "model.glu_alpha=2.0 is read only by "
                                                         "model.mlp=swiglu_clamped (gpt-oss), not swiglu_clip"),
        (["model.csa.q_rank=8", "model.csa.out_groups=3"], "model.csa.out_groups=3 must divide model.num_heads=4"),
        (["model.csa.q_rank=8", "model.num_kv_heads=2"], "model.csa.q_rank=8 (DeepSeek-V4's attention) and "
                                                        "model.num_kv_heads do not combine"),
        (["model.csa.q_rank=8", "sharding=fsdp", "mesh.data=4", "mesh.context=2"],
         "mesh.context=2 with model.csa.q_rank=8: DeepSeek-V4's attention does not run on a context ring yet"),
        (["model.hyper_connections=4", "model.mtp_depth=1"], "model.hyper_connections=4 and model.mtp_depth do not"),
        (["model.hyper_connections=4", "model.per_layer_dim=8"],
         "model.hyper_connections=4 and model.per_layer_dim do not combine yet"),  # (Gemma 4's: one stream)
        (["model.hyper_connections=2", "sharding=fsdp", "mesh.stage=2", "mesh.data=4", "model.num_layers=4"],
         "mesh.stage=2 with model.hyper_connections=2: the pipeline's stages pass one residual stream"),
        ([*CSA_ON, "model.csa.pattern=SX"], "model.csa.pattern='SX' must be letters S (sliding), C"),
        ([*CSA_ON, "model.csa.pattern=H", "model.csa.heavy_rate=1"], "model.csa.heavy_rate=1 must be >= 2"),
        ([*CSA_ON, "model.csa.pattern=C", "model.csa.sparse_rate=0"], "model.csa.sparse_rate=0 must be >= 2"),
        ([*CSA_ON, "model.csa.pattern=H", "model.sliding_window=8", "model.csa.heavy_rate=10000000"],
         "model.csa.heavy_rate=10000000 is longer than model.max_seq_len=64: no window of it would ever be whole"),
        ([*CSA_ON, "model.csa.pattern=HS"], "model.sliding_window=0: DeepSeek-V4's compressed layers"),
        ([*CSA_ON, "model.csa.pattern=C", "model.csa.rope_dim=8", "model.csa.index_dim=6"],
         "model.csa.index_dim=6 must be even and >= model.csa.rope_dim=8"),
        ([*CSA_ON, "model.csa.pattern=C", "model.csa.index_heads=0"], "model.csa.index_heads=0 must be >= 1"),
        ([*CSA_ON, "model.csa.pattern=C", "model.csa.index_train=warm"],
         "model.csa.index_train='warm' must be sparse or dense"),
        ([*CSA_ON, "model.csa.pattern=C", "model.csa.index_kl=-1"], "model.csa.index_kl=-1.0 must be a finite number"),
        ([*CSA_ON, "model.csa.pattern=CS", "model.sliding_window=8", "model.csa.index_train=dense",
          "optimizer.weight_decay=0.1"], "model.csa.index_train=dense with optimizer.weight_decay=0.1: the warm-up"),
        ([*CSA_ON, "model.csa.pattern=C", "model.csa.index_train=dense", "model.csa.index_kl=0"],
         "model.csa.index_train=dense with model.csa.index_kl=0: the warm-up trains the indexer by its KL loss alone"),
        ([*CSA_ON, "model.csa.pattern=HS", "model.sliding_window=8", "model.csa.index_train=dense"],
         "model.csa.index_train / index_kl with model.csa.pattern='HS': they train the C layers' indexer"),
        (["model.mla.kv_rank=16", "model.mla.rope_dim=8", "model.mla.index_train=dense"],
         "model.mla.index_train / index_kl without model.mla.index_heads: they train the lightning indexer"),
        ([*CSA_ON, "model.csa.pattern=H", "model.csa.compress_theta=0"], "model.csa.compress_theta=0.0 must be > 0"),
        ([*CSA_ON, "model.rope_scaling=yarn", "model.rope_factor=4"],
         "model.rope_scaling=yarn with model.csa.pattern='S': DeepSeek-V4 scales only its compressed layers' RoPE"),
        ([*CSA_ON, "model.csa.pattern=H", "model.rope_scaling=yarn", "model.rope_factor=4",
          "model.rope_attention_factor=2"], "model.rope_attention_factor=2.0: DeepSeek-V4's compressed layers"),
        ([*CSA_ON, "model.csa.pattern=H", "model.mtp_depth=1"],
         "model.csa.pattern='H' (compressed layers) and model.mtp_depth do not combine yet"),
        ([*CSA_ON, "model.csa.pattern=CH", "sharding=fsdp", "mesh.stage=2", "mesh.data=4", "model.num_layers=4"],
         "mesh.stage=2 with model.csa.pattern='CH': the pipeline's stages do not run DeepSeek-V4's compressed"),
    ]:
        errs = validate(load_config(["+experiment=staircase", *overrides]), 8)
        assert any(e.startswith(expected) for e in errs), errs



CSA_ON = ("model.csa.q_rank=8", "model.csa.out_groups=2", "model.csa.rope_dim=8")


def test_csa_fields_refused_by_name_through_the_cli(capsys, tmp_path):
    """model.csa's fields set without q_rank, and q_rank with the default out_groups (8) that does not divide
    the heads: exit 2, one line naming the field to set (config validation only: nothing compiles); an engine
    page size that is not a multiple of the compress rates (a page holds page_size / rate entries) is one line
    naming both and the size to set, from `serve` (exit 2, before any checkpoint: the run has none) and
    `plan serve=true`, and from the engine itself."""
    for overrides, expected in [
        (["model.csa.out_groups=2"], "model.csa.out_groups set without model.csa.q_rank; set model.csa.q_rank=R"),
        (["model.csa.out_rank=8", "model.csa.rope_dim=8"],
         "model.csa.rope_dim, model.csa.out_rank set without model.csa.q_rank"),
        (["model.csa.pattern=CH", "model.csa.index_topk=4"],
         "model.csa.pattern, model.csa.index_topk set without model.csa.q_rank"),
        (["model.csa.q_rank=8", "model.csa.rope_dim=8"],
         "model.csa.out_groups=8 must divide model.num_heads=4; set model.csa.out_groups to one of 1, 2, 4"),
        (["model.csa.q_rank=8", "model.csa.out_groups=2"],
         "model.csa.rope_dim=64 must be even, > 0 and at most the head width 16; set model.csa.rope_dim to an even "
         "number up to 16"),
    ]:
        code = main(["train", "+experiment=staircase", *overrides, f"run.dir={tmp_path / 'r'}"])
        err = capsys.readouterr().err
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    from spmdgpt.config.load import to_yaml
    from spmdgpt.data.tokenizers import DigitTokenizer, save_tokenizer

    rates = (*CSA_ON, "model.num_layers=3", "model.csa.pattern=SCH", "model.csa.sparse_rate=2",
             "model.csa.heavy_rate=4", "model.sliding_window=8")
    expected = ("engine page_size=6 must be a multiple of every compress rate of model.csa.pattern='SCH' "
                "(model.csa.sparse_rate=2, model.csa.heavy_rate=4): a page holds page_size / rate compressed "
                "entries; set page_size=4 or a multiple of it (the nearest above: 8)")
    run_dir = tmp_path / "v4"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(to_yaml(load_config(["+experiment=staircase", *rates])))
    save_tokenizer(DigitTokenizer(), run_dir / "tokenizer.json")
    for args in (["serve", f"run.dir={run_dir}", "page_size=6"], ["plan", f"run.dir={run_dir}", "serve=true",
                 "page_size=6"], ["plan", "+experiment=staircase", *rates, "serve=true", "page_size=6"]):
        code = main(args)
        err = capsys.readouterr().err
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    m, _, rules = _one_device(*rates)
    with pytest.raises(ValueError, match=r"engine page_size=6 must be a multiple of every compress rate"):
        Engine(m, rules, None, m.vocab_size, EngineConfig(slots=2, page_size=6))


# A DeepseekV4ForCausalLM of the three kinds of layer (sliding; compressed sparse: entries of 2 x 2 tokens, the
# indexer's top 3; heavily compressed: of 4), 4 hyper-connected streams, a hash-routed MoE layer then two top-k ones
# (4 experts of 8, top 2, clipped at 0.5, a shared expert), YaRN on the compressed RoPE (base 1000)
V4_CONFIG = {**_compressed_config("C"), "num_hidden_layers": 3, "vocab_size": 64, "max_position_embeddings": 64,
             "layer_types": ["sliding_attention", KIND["C"], KIND["H"]], "n_routed_experts": E,
             "num_experts_per_tok": K, "moe_intermediate_size": F, "n_shared_experts": 1, "swiglu_limit": 0.5,
             "mlp_layer_types": ["hash_moe", "moe", "moe"], "tie_word_embeddings": False, "bos_token_id": 0,
             "eos_token_id": 1}


def test_deepseek_v4_imports_and_exports(torch_side, tmp_path, capsys):
    """checkpoint.init_from=hf:DIR of a random DeepseekV4ForCausalLM (V4_CONFIG; every weight perturbed, a random
    tid2eid and e_score_correction_bias) gives transformers' logits of 2 x 16 tokens within 1e-4 (float32, one
    device), its export of the imported parameters is byte-identical tensor by tensor, and that export with its
    config.json loads in transformers with the same logits (1e-5). A config.json field spmdgpt cannot compute is one
    line naming it (exit 2)."""
    import json

    from safetensors.numpy import load_file, save_file

    from spmdgpt.hf import hf_config, load_params, to_hf, with_hf_model

    toks = np.random.default_rng(6).integers(0, 64, (2, T)).astype(np.int32)
    theirs = torch_side.ask_array("make_model", toks, kind="deepseek_v4", folder=str(tmp_path), config=V4_CONFIG)[1]
    original = load_file(str(tmp_path / "model.safetensors"))
    cfg, changes = with_hf_model(load_config(["+experiment=staircase", f"checkpoint.init_from=hf:{tmp_path}",
                                              "mesh.data=1"]))
    m = cfg.model
    assert "model.vocab_size=64" in changes and (m.csa.pattern, m.hyper_connections, m.moe.hash_layers) == ("SCH", 4, 1)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, m)
        params = load_params(m, tmp_path, rules, "test")
        ours = np.asarray(jax.jit(lambda p, t: forward(m, rules, p, t)[0])(params, toks))
    assert np.abs(ours - theirs).max() <= 1e-4 and np.abs(theirs).max() > 1.0, np.abs(ours - theirs).max()
    again = to_hf(m, jax.tree.map(np.asarray, jax.device_get(params)))
    assert sorted(again) == sorted(original)
    assert all(again[k].dtype == original[k].dtype and again[k].tobytes() == original[k].tobytes() for k in original)
    folder = tmp_path / "exported"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(hf_config(m, eos_id=1, bos_id=0)))
    save_file(again, str(folder / "model.safetensors"))
    assert np.abs(torch_side.logits(folder, toks) - theirs).max() <= 1e-5
    hf = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**hf, "scoring_func": "softmax"}))
    code = main(["train", "+experiment=staircase", f"checkpoint.init_from=hf:{tmp_path}", f"run.dir={tmp_path / 'r'}"])
    err = capsys.readouterr().err
    assert code == 2 and "config.json has scoring_func='softmax'; spmdgpt needs sqrtsoftplus" in err, err
    assert len(err.strip().splitlines()) == 1
