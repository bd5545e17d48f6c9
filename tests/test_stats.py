"""Model statistics (train.stats_every): equal to a direct computation on a tiny model, and
training with them on gives bitwise the same losses as with them off."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import read_jsonl

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import loss_fn
from spmdgpt.model.attention import UnitInputs, fused_qkv, self_attention
from spmdgpt.model.blocks import block
from spmdgpt.model.head import embed
from spmdgpt.model.layers import norm
from spmdgpt.model.mlp import mlp
from spmdgpt.training.stats import make_stats_fn, stats_row
from spmdgpt.training.step import training_parts


def rms(a):
    return float(np.sqrt(np.mean(np.square(np.asarray(a, np.float64)))))


def test_statistics_equal_a_direct_computation():
    # attention_block=16: the largest attention logit is taken over 4 query blocks of the 64
    cfg = load_config(["+experiment=staircase", "mesh.data=1", "model.init_std=0.2", "model.bias=true",
                       "model.attention_block=16"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding)
    m = cfg.model
    with jax.set_mesh(mesh):
        state, train_step, batcher, _ = training_parts(cfg, rules)
        for i in range(3):  # a few steps in, so that Adam's update is not its first-step sign
            state, _ = train_step(state, *batcher.train_batch(i))
        x, y = batcher.train_batch(3)[:2]
        from spmdgpt.model import param_info
        from spmdgpt.optim import build_optimizer

        optimizer = build_optimizer(cfg.optimizer, param_info(m), cfg.train.steps)
        row = stats_row(4, jax.device_get(make_stats_fn(cfg, rules, optimizer)(state, x, y)))
        params = jax.device_get(state.params)
        grads = jax.device_get(jax.jit(jax.grad(lambda p: loss_fn(m, rules, p, x, y)))(state.params))
        new_state, _ = train_step(state, x, y)  # the step these statistics describe
        new = jax.device_get(new_state.params)

        # activations, layer by layer, with the model's own pieces (not the statistics code)
        b, t = x.shape
        pos = jnp.arange(t, dtype=jnp.int32)

        @jax.jit
        def pieces(p, h):  # one layer, by the model's functions
            hn = norm(m, rules, p.ln1, h)
            attn, _, _ = self_attention(fused_qkv, m, rules, p.attn, hn, UnitInputs(pos, b))
            q, k, _ = fused_qkv(m, rules, p.attn, hn, pos, b)
            h2 = norm(m, rules, p.ln2, h + attn)
            return attn, q, k, h2, mlp(m, rules, p.mlp, h2)[0], block(m, rules, p, h, pos, b)[0]

        h = jax.jit(lambda p, x: embed(m, rules, p, x))(state.params, x)
        for layer in range(m.num_layers):
            p = jax.tree.map(lambda a: a[layer], state.params.blocks)
            attn, q, k, h2, mlp_out, out = pieces(p, h)
            scores = np.einsum("bnqh,bnkh->bnqk", np.asarray(q), np.asarray(k)) / np.sqrt(q.shape[-1])
            scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
            pre = np.asarray(h2) @ np.asarray(p.mlp.w_up) + np.asarray(p.mlp.b_up)
            assert row[f"stats/attn_rms/{layer}"] == pytest.approx(rms(attn), rel=1e-5)
            assert row[f"stats/mlp_rms/{layer}"] == pytest.approx(rms(mlp_out), rel=1e-5)
            assert row[f"stats/mlp_pre_rms/{layer}"] == pytest.approx(rms(pre), rel=1e-5)
            assert row[f"stats/resid_rms/{layer}"] == pytest.approx(rms(out), rel=1e-5)
            assert row[f"stats/max_attn_logit/{layer}"] == pytest.approx(float(scores.max()), rel=1e-5)
            h = out
    assert row["stats/grad_norm/embed"] == pytest.approx(float(np.linalg.norm(grads.embed)), rel=1e-5)
    assert row["stats/grad_norm/blocks.attn.w_qkv/1"] == pytest.approx(
        float(np.linalg.norm(grads.blocks.attn.w_qkv[1])), rel=1e-5
    )
    assert row["stats/param_norm/blocks.attn.w_o/0"] == pytest.approx(
        float(np.linalg.norm(params.blocks.attn.w_o[0])), rel=1e-6
    )
    for name, old, now in (("blocks.mlp.w_up/0", params.blocks.mlp.w_up[0], new.blocks.mlp.w_up[0]),
                           ("embed", params.embed, new.embed)):
        ratio = np.linalg.norm(now - old) / np.linalg.norm(old)  # the step's actual update
        assert row[f"stats/update_ratio/{name}"] == pytest.approx(float(ratio), rel=1e-3)
    assert row["stats/max_attn_logit/0"] > 0.1  # not a vacuous comparison


def test_statistics_on_leave_the_losses_bitwise_unchanged(tmp_path):
    common = ["train", "+experiment=staircase", "train.steps=12", "train.log_every=1", "train.eval_every=0",
              "train.progress=false"]
    assert main([*common, f"run.dir={tmp_path / 'off'}"]) == 0
    assert main([*common, f"run.dir={tmp_path / 'on'}", "train.stats_every=4"]) == 0
    off, on = (read_jsonl(tmp_path / name / "metrics.jsonl") for name in ("off", "on"))
    assert [r["loss"] for r in on if "loss" in r] == [r["loss"] for r in off if "loss" in r]
    stats = [r for r in on if any(k.startswith("stats/") for k in r)]
    assert [r["step"] for r in stats] == [4, 8, 12]
    assert len(stats[0]) > 40 and all(v is not None for k, v in stats[0].items() if "/b_" not in k)


def test_with_microbatches_the_gradients_are_the_steps_own():
    """train.microbatches=4: the statistics' gradients are accumulated as the step's are (the same
    norms as the whole batch's to float32 rounding), the activations are the first microbatch's."""
    from spmdgpt.model import param_info
    from spmdgpt.optim import build_optimizer

    rows = {}
    for k in (1, 4):
        cfg = load_config(["+experiment=staircase", "mesh.data=1", f"train.microbatches={k}"])
        mesh = make_mesh(cfg.mesh, jax.devices()[:1])
        rules = Rules(mesh, cfg.sharding)
        with jax.set_mesh(mesh):
            state, _, batcher, _ = training_parts(cfg, rules)
            fn = make_stats_fn(cfg, rules, build_optimizer(cfg.optimizer, param_info(cfg.model), cfg.train.steps))
            batch = batcher.train_batch(0)
            rows[k] = stats_row(1, jax.device_get(fn(state, *batch)))
            if k == 4:  # activations of rows 0, 4, 8, 12: the first microbatch
                from spmdgpt.model import activation_stats

                part = jax.jit(lambda p, x: activation_stats(cfg.model, rules, p, x))(state.params, batch.inputs[::4])
                assert rows[4]["stats/resid_rms/1"] == pytest.approx(float(part["resid_rms"][1]), rel=1e-6)
    for name in ("grad_norm/embed", "grad_norm/blocks.mlp.w_up/0", "update_ratio/blocks.attn.w_o/1"):
        assert rows[4][f"stats/{name}"] == pytest.approx(rows[1][f"stats/{name}"], rel=1e-5)
    assert rows[4]["stats/resid_rms/1"] != rows[1]["stats/resid_rms/1"]
