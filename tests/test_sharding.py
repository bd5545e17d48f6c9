"""dp / fsdp / tp / fsdp_tp on 8 simulated devices (one with context parallelism) match one device,
and really split params."""

import jax
import numpy as np
import pytest
from conftest import train_steps
from jax.sharding import PartitionSpec as P

from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import bytes_per_device

# (rule table, mesh overrides, largest per-device share of the parameter bytes allowed)
LAYOUTS = [
    ("dp", ["mesh.data=8"], 1.0),
    ("fsdp", ["mesh.data=8"], 1 / 8),
    ("tp", ["mesh.data=2", "mesh.model=4", "model.collective_matmul=bi"], 1 / 4),  # (the stream split over model too)
    ("fsdp_tp", ["mesh.data=2", "mesh.context=2", "mesh.model=2"], 1 / 8),  # (each sequence split in 2 too)
]
# 5 steps of float32 training; shards reduce in a different order than one device does, so
# the losses agree to float32 rounding, not bitwise. Stated tolerance: 2e-6 absolute on losses
# around 2.8, 1e-5 on parameters.
LOSS_ATOL = 2e-6
PARAM_ATOL = 1e-5


def cfg_for(*overrides):
    return load_config(
        ["+experiment=staircase", "model.d_model=64", "model.num_heads=4", "model.vocab_size=16",
         "data.batch_size=16", *overrides]
    )


@pytest.fixture(scope="module")
def single_device_run():
    losses, state, _ = train_steps(cfg_for("mesh.data=1"), jax.devices()[:1], 5)
    return losses, jax.device_get(state.params)


# (dp in `make test-all`: nearly every other test trains data-parallel on the 8 test devices)
@pytest.mark.parametrize("table,mesh,share", [
    pytest.param(*c, id=c[0], marks=[pytest.mark.slow] if c[0] == "dp" else []) for c in LAYOUTS])
def test_layout_matches_single_device(single_device_run, table, mesh, share):
    ref_losses, ref_params = single_device_run
    losses, state, rules = train_steps(cfg_for(f"sharding={table}", *mesh), jax.devices(), 5)
    assert len(jax.devices()) == 8
    np.testing.assert_allclose(losses, ref_losses, rtol=0, atol=LOSS_ATOL)
    assert losses[-1] < losses[0] - 0.3  # it trained
    got = jax.device_get(state.params)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref_params), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=PARAM_ATOL)

    # Parameters are really split: per-device bytes against the whole.
    total = sum(x.nbytes for x in jax.tree.leaves(got))
    per_device = bytes_per_device(state.params)
    assert len(per_device) == 8
    assert max(per_device.values()) <= share * total * 1.02  # 2%: tiny replicated leaves
    if share < 1:
        assert max(per_device.values()) < total / 2
    # and so is the optimizer state (AdamW moments follow the parameters)
    mu = state.opt_state[1][0].mu
    assert jax.typeof(mu.blocks.attn.w_qkv).sharding.spec == jax.typeof(state.params.blocks.attn.w_qkv).sharding.spec


def test_partition_specs_follow_the_rule_tables():
    specs = {}
    for table, mesh, _ in LAYOUTS:
        _, state, _ = train_steps(cfg_for(f"sharding={table}", *mesh), jax.devices(), 1)
        specs[table] = jax.typeof(state.params.blocks.attn.w_qkv).sharding.spec
        if table == "fsdp_tp":
            assert jax.typeof(state.params.embed).sharding.spec == P("model", ("data", "context"))
            assert jax.typeof(state.params.blocks.mlp.w_up).sharding.spec == P(None, ("data", "context"), "model")
    # w_qkv: [layers, embed, qkv, heads, head_dim]
    assert specs["dp"] == P(None, None, None, None, None)
    assert specs["fsdp"] == P(None, ("data", "context"), None, None, None)
    assert specs["tp"] == P(None, None, None, "model", None)
    assert specs["fsdp_tp"] == P(None, ("data", "context"), None, "model", None)


def test_the_packaged_tables_are_one_base_and_their_own_rules():
    """configs/sharding/_base.yaml holds the rules every table shares (the batch over data, stage
    and expert; the layer stack over stage; experts over expert; sequences over context); each
    table adds its own, the same whether Hydra composes it (train) or `apply_overrides` loads it
    (a run's config with sharding=NAME); `_base` itself is not a table."""
    from spmdgpt.config import apply_overrides
    from spmdgpt.config.load import packaged_names

    assert packaged_names("sharding") == ["dp", "fsdp", "fsdp_tp", "tp"]
    base = load_config([])
    for table in packaged_names("sharding"):
        composed = load_config([f"sharding={table}"]).sharding
        assert composed.compute["batch"] == ["data", "stage", "expert"] and composed.compute["seq"] == "context"
        assert composed.params["layers"] == "stage" and composed.params["experts"] == "expert"
        assert apply_overrides(base, [f"sharding={table}"]).sharding == composed
    fsdp_tp = load_config(["sharding=fsdp_tp"]).sharding
    assert fsdp_tp.params["embed"] == ["data", "context", "stage"] and fsdp_tp.compute["mlp"] == "model"
    assert "embed" not in load_config(["sharding=tp"]).sharding.params


def test_a_new_mesh_axis_is_a_schema_line_and_a_rule_table(single_device_run):
    """Adding a mesh axis: MeshConfig with one more field ('toy', between data and model) and a
    rule table that uses it (the MLP over 'toy', heads over 'model', FSDP over 'data'), nothing
    else. Validation resolves the sizes from the device count and checks the table against the
    new axis names; the mesh has three axes; parameters are placed as the table says; training
    matches one device."""
    import dataclasses

    from spmdgpt.config import MeshConfig, ShardingConfig, mesh_axes, validate
    from spmdgpt.mesh.sharding import make_mesh

    # MeshConfig as it would be written with the new field (field order = mesh order)
    ToyMesh = dataclasses.make_dataclass("ToyMesh", [("data", int, -1), ("toy", int, 1), ("model", int, 1)])
    assert mesh_axes(MeshConfig) == ("data", "stage", "expert", "context", "model")
    cfg = cfg_for()
    cfg.mesh = ToyMesh(data=-1, toy=2, model=2)
    cfg.sharding = ShardingConfig(name="toy", params={"embed": "data", "mlp": "toy", "heads": "model"},
                                  compute={"batch": "data", "mlp": "toy", "heads": "model"})
    assert mesh_axes(cfg.mesh) == ("data", "toy", "model") and validate(cfg, 8) == []
    assert dict(make_mesh(cfg.mesh, jax.devices()).shape) == {"data": 2, "toy": 2, "model": 2}
    losses, state, _ = train_steps(cfg, jax.devices(), 5)
    np.testing.assert_allclose(losses, single_device_run[0], rtol=0, atol=LOSS_ATOL)
    blocks = state.params.blocks
    assert blocks.mlp.w_up.sharding.spec == P(None, "data", "toy")  # [layers, embed, mlp]
    assert blocks.mlp.w_up.addressable_shards[0].data.shape == (2, 64 // 2, 4 * 64 // 2)
    assert blocks.attn.w_qkv.sharding.spec == P(
        None, "data", None, "model", None
    )  # [layers, embed, 3, heads, head_dim]

    # the generic checks speak of the new axis by name
    cfg.mesh = ToyMesh(data=-1, toy=-1, model=1)
    assert validate(cfg, 8) == ["mesh.data=-1 and mesh.toy=-1: only one axis can take the remaining devices; "
                                "give the others a size (e.g. mesh.data=1)"]
    cfg.mesh = ToyMesh(data=2, toy=3, model=1)
    assert validate(cfg, 8) == ["mesh.data=2 x mesh.toy=3 x mesh.model=1 does not fit 8 device(s); the product of "
                                "the fixed sizes must divide the device count (use -1 for one axis)"]
    cfg.mesh = ToyMesh(data=-1, toy=2, model=1)
    cfg.sharding = ShardingConfig(name="toy", params={"mlp": "expert"}, compute={"batch": "data"})
    assert validate(cfg, 8) == ["sharding.params.mlp=expert: unknown mesh axis 'expert'; "
                                "use one of ['data', 'toy', 'model'] or null"]
