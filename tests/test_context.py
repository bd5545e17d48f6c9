"""Context parallelism (model/context.py): sequences split over mesh.context, attention on a ring
(or all-gathered), equal to one device: losses, gradients, per-token losses, statistics."""

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from layouts import assert_matches, cfg_for, reference, run

from spmdgpt.cli import main
from spmdgpt.config import ShardingConfig, validate
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model.context import context_order, from_context_order, to_context_order

CASES = [  # (id, model overrides, layout overrides, check the per-token losses and statistics too)
    # (model.attention_block=4: the ring takes its queries and keys 4 at a time; one device all at once)
    ("ring-blocks-d2c4", (), ("mesh.data=2", "mesh.context=4", "model.attention_block=4"), False),
    ("allgather-c8", (), ("model.context_attention=allgather", "mesh.data=1", "mesh.context=8"), False),
    (
        "gqa-window-lossblock-fsdp_tp-d2c2m2",
        ("model.num_kv_heads=2", "model.sliding_window=12", "model.window_pattern=LG", "model.loss_block=8"),
        ("sharding=fsdp_tp", "mesh.data=2", "mesh.context=2", "mesh.model=2"),
        True,
    ),
    (  # (Llama 4's layers: chunks of 16 on the ring, NoPE layers with the temperature at positions in the ring's order)
        "llama4-moe-d2e2c2",
        ("model.moe.num_experts=4", "model.moe.top_k=2", "model.moe.router=sigmoid", "model.moe.normalize_top_k=false",
         "model.moe.weight_input=true", "model.moe.shared_experts=1", "model.attention_chunk=16",
         "model.window_pattern=LG", "model.global_nope=true", "model.qk_norm=true", "model.attn_temperature=0.5",
         "model.attn_temperature_floor=4"),
        ("mesh.data=2", "mesh.expert=2", "mesh.context=2"),
        False,
    ),
]


@pytest.mark.parametrize("model,layout,full", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_context_parallel_equals_one_device(model, layout, full):
    ref = reference(model, full)
    got = run(cfg_for(*model, *layout), full)
    assert_matches(got, ref, full)  # (per-token losses back in sequence order)
    if full:
        assert abs(ref[0] - ref[3]) > 0.02  # the document mask and the restarted positions matter here
        assert abs(ref[0] - ref[6]) > 1e-3  # and so do the sliding windows
    # the compiled step: keys and values move around the ring by collective permutes (the
    # forward's C - 1 hops and the backward's, once more for their gradients), or are gathered
    permutes = got[2].count("collective-permute-start(") + got[2].count("collective-permute(")
    if not any("moe" in o for o in model):  # (tokens reach their experts by all-to-all)
        assert "all-to-all" not in got[2]  # the [tokens] <-> [batch, seq] reshapes move nothing between devices
    if "model.context_attention=allgather" in layout:
        assert permutes == 0 and "all-gather" in got[2]
    else:
        assert permutes >= 3 and "collective-permute" not in ref[2]


def test_context_order_puts_an_early_and_a_late_chunk_on_each_device():
    assert context_order(16, 2).tolist() == [0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 8, 9, 10, 11]
    assert context_order(8, 1).tolist() == list(range(8))
    cfg = cfg_for("mesh.data=2", "mesh.context=4")
    mesh = make_mesh(cfg.mesh, jax.devices())
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        assert rules.spec("tokens", "embed") == P(("data", "expert", "context"), None)
        assert rules.batch_sharding().spec == P(("data", "expert"), None)  # token ids: whole sequences
        a = jax.device_put(np.arange(2 * 16).reshape(2, 16), rules.batch_sharding())
        ordered = jax.jit(lambda a: to_context_order(rules, a))(a)
        assert ordered.sharding.spec == P(("data", "expert"), "context")
        assert np.asarray(ordered)[1].tolist() == (16 + context_order(16, 4)).tolist()
        # device (data 0, context 1) holds chunks 1 and 6 of the first sequence
        shard = [s for s in ordered.addressable_shards if s.index == (slice(0, 1), slice(4, 8))][0]
        assert np.asarray(shard.data).tolist() == [[2, 3, 12, 13]]
        back = jax.jit(lambda a: from_context_order(rules, a))(ordered)
        assert np.asarray(back).tolist() == np.arange(32).reshape(2, 16).tolist()


def test_the_plans_activation_bytes_fall_as_one_over_the_ring():
    """One 2,048-token sequence on rings of 2 and 4 devices: the plan's temporaries are mostly
    activations / C, plus a little that does not shrink (the optimizer's update, score blocks,
    the ring's buffers): measured 20.0 and 11.4 MiB (and 7.7 on 8)."""
    from spmdgpt.plan.plan import plan_step

    temps = {}
    for c in (2, 4):
        cfg = cfg_for("data.seq_len=2048", "model.max_seq_len=2048", "data.batch_size=1", "mesh.data=1",
                      f"mesh.context={c}", "model.attention_block=128")
        mesh = make_mesh(cfg.mesh, jax.devices()[:c])
        with jax.set_mesh(mesh):
            temps[c] = plan_step(cfg, Rules(mesh, cfg.sharding, cfg.model)).temp_bytes
    assert 0.5 < temps[4] / temps[2] < 0.65


@pytest.mark.parametrize("overrides,message", [
    (("mesh.context=4", "data.seq_len=60", "model.max_seq_len=64"),
     "data.seq_len=60 does not split into 2 x 4 equal chunks (two per device of the context ring, mesh.context=4); "
     "use a multiple of 8"),
    (("mesh.context=2", "model.attention=splash", "data.seq_len=128", "model.max_seq_len=128"),
     "model.attention=splash does not run on a context ring (mesh.context=2): ring attention computes its blocks "
     "itself; use model.attention=auto or xla, or mesh.context=1"),
    (("mesh.context=2", "model.dropout=0.1"),
     "attention dropout (model.attention_dropout, default model.dropout) has no context-parallel version "
     "(mesh.context=2); set model.attention_dropout=0 or mesh.context=1"),
    (("mesh.context=4", "model.loss_block=32"),
     "model.loss_block=32 does not divide the 16 positions each device of the context ring holds "
     "(data.seq_len=64 / mesh.context=4); choose a divisor"),
])
def test_bad_context_settings_are_one_line_each(overrides, message):
    assert validate(cfg_for("mesh.data=-1", *overrides), 8) == [message]


def test_a_table_without_a_seq_rule_is_refused_on_a_context_mesh(capsys):
    cfg = cfg_for("mesh.data=2", "mesh.context=4")
    cfg.sharding = ShardingConfig(name="mine", params={}, compute={"batch": "data"})
    assert validate(cfg, 8) == ["mesh.context=4 but sharding.compute.seq=None does not split sequences over it "
                                "(sharding=mine); add seq: context to the table's compute rules or set mesh.context=1"]
    code = main(["train", "+experiment=staircase", "mesh.data=2", "mesh.context=4", "data.seq_len=60",
                 "model.max_seq_len=64", "run.dir=/nonexistent/never-written"])
    assert code == 2
    assert "data.seq_len=60 does not split into 2 x 4 equal chunks" in capsys.readouterr().err
