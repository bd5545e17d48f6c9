"""`spmdgpt plan`: the ahead-of-time memory, FLOPs and collectives of a training step."""

import jax
import pytest

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.plan import collectives_of, plan_step
from spmdgpt.sharding import Rules, make_mesh

COMMON = ["+experiment=staircase", "model.num_layers=2", "model.scan_unroll=false"]


def _plan(*overrides):
    cfg = load_config(COMMON + list(overrides))
    mesh = make_mesh(cfg.mesh)
    with jax.set_mesh(mesh):
        return plan_step(cfg, Rules(mesh, cfg.sharding))


def test_fsdp_holds_an_eighth_and_gathers_what_dp_does_not():
    """On 8 simulated devices: FSDP's parameter and optimizer-state bytes per device are exactly
    1/8 of DP's; an FSDP step all-gathers parameters and DP's has no all-gather (only the
    gradient all-reduce); XLA's FLOPs are those of the formula within 2x (the layer loop's body
    is counted once)."""
    dp, fsdp = _plan("sharding=dp"), _plan("sharding=fsdp")
    assert dp.devices == fsdp.devices == 8
    assert fsdp.param_bytes * 8 == dp.param_bytes
    assert 0 <= 8 * fsdp.opt_bytes - dp.opt_bytes <= 7 * 16  # (scalar step counters are not sharded)
    assert dp.collectives["all-gather"][0] == 0 and dp.collectives["all-reduce"][0] >= 1
    gathered, nbytes = fsdp.collectives["all-gather"]
    assert gathered >= 2 and nbytes > 0
    assert dp.loops and 0.25 < dp.flops / dp.formula_flops < 2


def test_collectives_are_read_from_hlo_text():
    hlo = """
  %all-gather.1 = f32[64,16]{1,0} all-gather(%p), channel_id=1, dimensions={0}
  %all-reduce.2 = (f32[8]{0}, bf16[4,4]{1,0}) all-reduce(%a, %b), channel_id=2
  %all-gather-start.3 = (f32[8]{0}, f32[64]{0}) all-gather-start(%c), channel_id=3
  %all-gather-done.3 = f32[64]{0} all-gather-done(%all-gather-start.3)
  ROOT %reduce-scatter.4 = bf16[2,8]{1,0} reduce-scatter(%d), channel_id=4
"""
    got = collectives_of(hlo)
    assert got["all-gather"] == (2, 64 * 16 * 4 + 64 * 4)
    assert got["all-reduce"] == (1, 8 * 4 + 16 * 2)
    assert got["reduce-scatter"] == (1, 16 * 2)
    assert got["all-to-all"] == (0, 0)


def test_plan_cli_prints_the_plan_and_refuses_one_that_does_not_fit(capsys):
    code = main(["plan", *COMMON, "devices=8", "memory_gb=0.001"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "sharding dp on mesh {'data': 8, 'model': 1} (8 device(s))" in out
    assert "parameters       0.4 MiB" in out and "collectives      all-reduce" in out
    assert err.startswith("spmdgpt: error: the step needs ") and "a device has 1.0 MiB" in err
    assert err.count("\n") == 1

    assert main(["plan", *COMMON, "devices=3"]) == 2
    assert "devices=3: JAX already started with 8 cpu device(s)" in capsys.readouterr().err


@pytest.mark.slow
def test_llama2_7b_plans_on_8_devices(capsys):
    """The 7B shape compiles from abstract shapes on 8 simulated devices (FSDP) and its
    parameters are 1/8 of 6.7B float32 values per device."""
    assert main(["plan", "+experiment=llama2_7b", "devices=8"]) == 0
    out = capsys.readouterr().out
    assert "parameters       3.14 GiB" in out
