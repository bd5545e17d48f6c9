"""Pipeline parallelism (model/pipeline.py): the layer stack split over mesh.stage, microbatches
flowing through the stages, equal to one device; the stages' parameters on their devices only."""

import jax
import numpy as np
import pytest
from conftest import train_steps
from jax.sharding import PartitionSpec as P
from layouts import RTOL, assert_close, batch, cfg_for

from spmdgpt.cli import main
from spmdgpt.config import validate
from spmdgpt.mesh.sharding import Rules, bytes_per_device, make_mesh
from spmdgpt.model import init_params
from spmdgpt.model import stages as T
from spmdgpt.training.step import step_gradients

B8 = 8  # sequences: 8 microbatches of one on the 4 stages


def gradients(*overrides):
    """(mean loss, gradients) of one step's batch (with documents and restarted positions) on the
    devices cfg.mesh names, through `step_gradients` (so train.microbatches as training has it),
    and the parameters' bytes per device."""
    cfg = cfg_for("model.num_layers=4", *overrides)
    n = cfg.mesh.data * cfg.mesh.stage * cfg.mesh.expert * cfg.mesh.context * cfg.mesh.model
    mesh = make_mesh(cfg.mesh, jax.devices()[:n])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        # (a circular pipeline holds the stack by stage, `stack_order`; the gradients back in layer order)
        params = T.to_stage_order(rules, init_params(cfg.model, jax.random.key(0), rules))
        inputs, targets, seg, pos = (jax.device_put(a, rules.batch_sharding()) for a in batch(cfg.model.vocab_size, B8))
        metrics, grads = jax.jit(step_gradients(cfg, rules))(params, 0, inputs, targets, seg, pos)
        grads = jax.device_get(T.to_layer_order(rules, grads))
        return float(metrics["loss"]), grads, bytes_per_device(params.blocks), params


# grouped-query heads and sliding windows in every case (one one-device reference for all)
MODEL = ("model.num_kv_heads=2", "model.sliding_window=12", "model.window_pattern=LG")
_REFERENCE: list = []


def reference():
    if not _REFERENCE:
        _REFERENCE.extend(gradients("mesh.data=1", *MODEL)[:2])
    return _REFERENCE


CASES = [  # (id, overrides)
    (
        "stage2-m4-fsdp_tp-d2m2",
        ("sharding=fsdp_tp", "mesh.data=2", "mesh.stage=2", "mesh.model=2", "train.microbatches=4"),
    ),
    (
        "stage4-m4-fsdp-d2-remat",
        ("sharding=fsdp", "mesh.data=2", "mesh.stage=4", "train.microbatches=4", "model.remat=full"),
    ),
    (
        "stage4-m8-d1-pipeline_remat",
        ("mesh.data=1", "mesh.stage=4", "train.microbatches=8", "model.pipeline_remat=true"),
    ),
    # the circular schedule: 2 passes through 2 stages of one layer each, with more microbatches
    # than stages, and with fewer (one: a slot idles)
    (
        "stage2-r2-m4-fsdp_tp-d2m2",
        (
            "sharding=fsdp_tp",
            "mesh.data=2",
            "mesh.stage=2",
            "mesh.model=2",
            "train.microbatches=4",
            "model.pipeline_repeats=2",
        ),
    ),
    (
        "stage2-r2-m1-fsdp-d2-remat",
        (
            "sharding=fsdp",
            "mesh.data=2",
            "mesh.stage=2",
            "train.microbatches=1",
            "model.pipeline_repeats=2",
            "model.remat=full",
        ),
    ),
]


def test_the_circular_stack_order():
    """4 stages x 2 passes of 2 layers: stage s holds layers 2s, 2s + 1 (pass 0) and 8 + 2s, 9 + 2s
    (pass 1) at its contiguous positions; GPipe or one stage keeps the layers in order."""
    from spmdgpt.model.pipeline import stack_order

    assert stack_order(16, 4, 2).tolist() == [0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15]
    assert stack_order(16, 4, 1) is None and stack_order(16, 1, 2) is None
    cfg = cfg_for("model.num_layers=8", "mesh.data=1", "mesh.stage=2", "model.pipeline_repeats=2")
    mesh = make_mesh(cfg.mesh, jax.devices()[:2])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = init_params(cfg.model, jax.random.key(0), rules)
        staged = T.to_stage_order(rules, params, donate=False)
        w, v = np.asarray(params.blocks.mlp.w_up), np.asarray(staged.blocks.mlp.w_up)
        np.testing.assert_array_equal(v, w[[0, 1, 4, 5, 2, 3, 6, 7]])
        assert jax.typeof(staged.blocks.mlp.w_up).sharding == jax.typeof(params.blocks.mlp.w_up).sharding
        back = T.to_layer_order(rules, staged)
        np.testing.assert_array_equal(np.asarray(back.blocks.mlp.w_up), w)
        # the passes that do not pipeline (statistics, cached decoding) see the layers in order
        whole = jax.jit(lambda p: T.whole_stack(rules, p))(staged)
        np.testing.assert_array_equal(np.asarray(whole.blocks.mlp.w_up), w)


# (4 stages with FSDP and full remat in `make test-all`: 4 stages run in stage4-m8-d1-pipeline_remat, FSDP with
# full remat in stage2-r2-m1-fsdp-d2-remat)
SLOW_CASES = {"stage4-m4-fsdp-d2-remat"}


@pytest.mark.parametrize("overrides", [pytest.param(o, id=i, marks=[pytest.mark.slow] if i in SLOW_CASES else [])
                                       for i, o in CASES])
def test_pipeline_equals_one_device(overrides):
    ref = reference()
    loss, grads, per_device, params = gradients(*MODEL, *overrides)
    assert abs(loss - ref[0]) <= RTOL * ref[0]
    assert_close(grads, ref[1])  # every gradient
    # each stage holds its quarter / half of the layer stack (and its share of the FSDP split)
    stages = dict(o.split("=") for o in overrides)["mesh.stage"]
    assert jax.typeof(params.blocks.ln1.scale).sharding.spec[0] == "stage"
    assert max(per_device.values()) <= sum(a.nbytes for a in jax.tree.leaves(ref[1].blocks)) / int(stages) * 1.001


def test_pipeline_remat_keeps_only_the_passes_inputs():
    """2 stages of 4 layers, 8 microbatches of 256 tokens (GPipe and circular): with
    model.pipeline_remat the backward keeps each iteration's stage input, not its layers'
    activations, and runs the stage's forward again. Attention in one block of 256
    (model.attention_block=0: a smaller program to compile than 4 query blocks). Measured
    (XLA:CPU): temporaries 112.0 -> 15.4 MiB (GPipe), 101.4 -> 10.3 (2 repeats); FLOPs x1.26."""
    from spmdgpt.plan.plan import plan_step

    plans = {}
    for repeats in (1, 2):
        for remat in (False, True):
            cfg = cfg_for("model.num_layers=8", "mesh.data=1", "mesh.stage=2", "train.microbatches=8",
                          "data.batch_size=8", "data.seq_len=256", "model.max_seq_len=256", "model.attention_block=0",
                          f"model.pipeline_repeats={repeats}", f"model.pipeline_remat={remat}")
            mesh = make_mesh(cfg.mesh, jax.devices()[:2])
            with jax.set_mesh(mesh):
                plans[repeats, remat] = plan_step(cfg, Rules(mesh, cfg.sharding, cfg.model))
    for repeats in (1, 2):
        kept, recomputed = plans[repeats, False], plans[repeats, True]
        assert recomputed.temp_bytes < 0.2 * kept.temp_bytes
        assert 1.1 < recomputed.flops / kept.flops < 1.4  # (one more forward of the layers, not of the loss)
        assert (kept.recompute, recomputed.recompute) == (1.0, pytest.approx(4 / 3))  # (the estimate's 8N)
    # the estimate's bubble: GPipe 9 iterations for 8 microbatches; circular 17 for 2 x 8
    assert plans[1, True].stretch == 9 / 8 and plans[2, True].stretch == 17 / 16


def test_the_schedules_lengths():
    """GPipe's M + S - 1 iterations; the circular (R - 1) max(M, S) + M + S - 1 (a bubble of
    (S - 1) / (R M + S - 1) once M >= S)."""
    from spmdgpt.model.pipeline import schedule_iterations

    assert [schedule_iterations(4, m) for m in (1, 4, 8)] == [4, 7, 11]
    assert [schedule_iterations(4, m, 2) for m in (1, 4, 8)] == [8, 11, 19]
    assert schedule_iterations(4, 4, 5) == 23  # 20 busy: a bubble of 3 / 23, not GPipe's 3 / 7


def test_a_pipeline_trains_like_data_parallelism():
    """5 AdamW steps of the staircase model on data 2 x stage 2 (2 layers a stage, 4 microbatches)
    against data 4 with the same 4 microbatches accumulated (whose parts are then one row per
    device: their reshape once put a size-1 mesh axis on the part index, which scan refused)."""
    from spmdgpt.config import load_config

    common = ("+experiment=staircase", "model.num_layers=4", "model.d_model=64", "model.num_heads=4",
              "model.vocab_size=16", "data.batch_size=16", "train.microbatches=4")
    ref, ref_state, _ = train_steps(load_config([*common, "mesh.data=4"]), jax.devices()[:4], 5)
    losses, state, rules = train_steps(load_config([*common, "mesh.data=2", "mesh.stage=2"]), jax.devices()[:4], 5)
    np.testing.assert_allclose(losses, ref, rtol=0, atol=2e-6)
    assert losses[-1] < losses[0] - 0.3
    for a, b in zip(jax.tree.leaves(jax.device_get(state.params)), jax.tree.leaves(jax.device_get(ref_state.params)),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    assert jax.typeof(state.opt_state[1][0].mu.blocks.attn.w_qkv).sharding.spec == P("stage", None, None, None, None)


@pytest.mark.parametrize("overrides,message", [
    (("mesh.stage=4", "model.num_layers=6"),
     "model.num_layers=6 does not split into mesh.stage=4 equal stages; use a number of stages that divides the "
     "layers"),
    (("mesh.stage=2", "model.num_layers=6", "model.pipeline_repeats=2"),
     "model.num_layers=6 does not split into mesh.stage=2 x model.pipeline_repeats=2 equal chunks; choose stages and "
     "repeats whose product divides the layers"),
    (("mesh.stage=2", "model.pipeline_repeats=0"), "model.pipeline_repeats=0 must be > 0"),
    (("mesh.stage=2", "model.moe.num_experts=4", "model.moe.top_k=2"),
     "model.moe.num_experts=4: a mixture of experts does not run in a pipeline yet (mesh.stage=2); set mesh.stage=1"),
    (("mesh.stage=2", "model.dropout=0.1"),
     "dropout (model.dropout, model.attention_dropout) does not run in a pipeline yet (mesh.stage=2); set them to 0 "
     "or mesh.stage=1"),
    (("mesh.stage=2", "mesh.context=2"), "mesh.context=2 and mesh.stage=2 do not combine yet; set one of them to 1"),
    (("mesh.stage=2", "model.attention=splash", "data.seq_len=128", "model.max_seq_len=128"),
     "model.attention=splash does not run in a pipeline yet (mesh.stage=2: its kernel does not nest in the stages' "
     "vmap); use model.attention=auto or xla, or mesh.stage=1"),
])
def test_bad_pipeline_settings_are_one_line_each(overrides, message):
    assert validate(cfg_for("mesh.data=-1", *overrides), 8) == [message]


def test_a_bad_stage_count_exits_2(capsys):
    code = main(["train", "+experiment=staircase", "mesh.stage=4", "model.num_layers=6",
                 "run.dir=/nonexistent/never-written"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["spmdgpt: error: model.num_layers=6 does not split into mesh.stage=4 equal stages; use a number of "
                   "stages that divides the layers"]
