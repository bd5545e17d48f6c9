"""`spmdgpt plan`: the ahead-of-time memory, FLOPs and collectives of a training step."""

import functools

import jax
import pytest
from conftest import compile_only_or_skip, required

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.plan.hlo import collectives_of, group_size, overlapped_traffic, traffic_of
from spmdgpt.plan.plan import plan_step

COMMON = ["+experiment=staircase", "model.num_layers=2", "model.scan_unroll=false"]


@functools.cache
def _plan(*overrides):
    """plan_step of the staircase step with these overrides on the 8 devices (once per session:
    several tests read the same plan; none changes it)."""
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
  %collective-permute-start = (bf16[1,4,256,16]{2,3,1,0:T(8,128)(2,1)S(1)}, bf16[1,4,256,16]{2,3,1,0:T(8,128)(2,1)S(1)}, u32[]{:S(2)}, u32[]{:S(2)}) collective-permute-start(%e), channel_id=5, source_target_pairs={{0,1},{1,0}}
"""
    got = collectives_of(hlo)
    assert got["collective-permute"] == (1, 4 * 256 * 16 * 2)  # (libtpu's: two u32[] of context left out)
    assert got["all-gather"] == (2, 64 * 16 * 4 + 64 * 4)
    assert got["all-reduce"] == (1, 8 * 4 + 16 * 2)
    assert got["reduce-scatter"] == (1, 16 * 2)
    assert got["all-to-all"] == (0, 0)
    # the bytes a device sends on a ring of p (no groups named: all 8 devices): an all-gather
    # (p-1)/p of its result, an all-reduce twice that, a reduce-scatter p-1 of its (one-shard) result
    assert traffic_of(hlo, 8) == pytest.approx((64 * 16 * 4 + 64 * 4) * 7 / 8 + (8 * 4 + 16 * 2) * 2 * 7 / 8
                                               + 16 * 2 * 7 + 4 * 256 * 16 * 2)
    # the three ways compiled HLO names replica groups (libtpu, XLA:CPU, explicit lists)
    assert group_size("all-reduce(%a), replica_groups=[2,4]<=[8], use_global_device_ids=true", 8) == 4
    assert group_size("all-reduce(%a), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=%add", 8) == 2
    assert group_size("all-reduce(%a), replica_groups=mesh['data'=2,'expert'=1,'model'=4] {'model'}, x", 8) == 4
    assert group_size("all-reduce(%a), replica_groups=mesh['data'=2,'expert'=1,'model'=4] {'data','model'}", 8) == 8
    assert group_size("all-gather(%a), replica_groups={{0,1,2},{3,4,5}}, dimensions={0}", 6) == 3
    assert group_size("all-gather(%a), dimensions={0}", 6) == 6


def test_traffic_counts_a_loop_body_once_per_trip():
    """A collective in a while loop's body (the layer scan) sends its bytes once per trip: the
    trip count is the condition's `counter < constant(N)`, nested loops multiply."""
    hlo = """HloModule m

%inner_cond (p: (s32[])) -> pred[] {
  %c = s32[] constant(2)
  %i = s32[] get-tuple-element(%p), index=0
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

%inner_body (p: (s32[])) -> (s32[]) {
  %ar = f32[16]{0} all-reduce(%x), replica_groups=[1,4]<=[4], to_apply=%add
  ROOT %t = (s32[]) tuple(%i)
}

%outer_cond (p: (s32[])) -> pred[] {
  %c = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

%outer_body (p: (s32[])) -> (s32[]) {
  %ag = f32[64]{0} all-gather(%y), replica_groups=[1,4]<=[4], dimensions={0}
  %w = (s32[]) while(%p), condition=%inner_cond, body=%inner_body
  ROOT %t = (s32[]) tuple(%i)
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %w = (s32[]) while(%init), condition=%outer_cond, body=%outer_body
  ROOT %rs = f32[8]{0} reduce-scatter(%a), replica_groups=[1,4]<=[4], dimensions={0}
}
"""
    # entry: a reduce-scatter (3 shards of 32 bytes); 3 outer trips of an all-gather (3/4 of 256
    # bytes); 3 x 2 inner trips of an all-reduce (2 x 3/4 of 64 bytes)
    assert traffic_of(hlo, 4) == 3 * 32 + 3 * 256 * 3 / 4 + 6 * 64 * 2 * 3 / 4


def test_overlap_is_read_from_the_compiled_schedule():
    """A collective counts as overlapped when the compiler scheduled a matmul while it is in
    flight: between an async -start and its -done (directly or in a fusion that computes one),
    or fused with one (TPU's async collective fusions); a fusion called from a loop body runs
    once per trip, its collectives too."""
    hlo = """HloModule m

%fused_dot (a: bf16[8,8], b: bf16[8,8]) -> bf16[8,8] {
  ROOT %c = bf16[8,8]{1,0} convolution(%a, %b), dim_labels=bf_io->bf
}

%async_collective_fusion.1 (a: bf16[8,8], b: bf16[8,8], w: bf16[16]) -> (bf16[8,8], bf16[32]) {
  %c = bf16[8,8]{1,0} convolution(%a, %b), dim_labels=bf_io->bf
  %g = bf16[32]{0} all-gather(%w), replica_groups=[1,2]<=[2], dimensions={0}
  ROOT %t = (bf16[8,8]{1,0}, bf16[32]{0}) tuple(%c, %g)
}

%cond (p: (s32[])) -> pred[] {
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (p: (s32[])) -> (s32[]) {
  %cp = (bf16[64]{0}, bf16[64]{0}, u32[], u32[]) collective-permute-start(%x), channel_id=1, source_target_pairs={{0,1},{1,0}}
  %f = bf16[8,8]{1,0} fusion(%a, %b), kind=kOutput, calls=%fused_dot
  %d = bf16[64]{0} collective-permute-done(%cp)
  %cp2 = (bf16[32]{0}, bf16[32]{0}, u32[], u32[]) collective-permute-start(%d), channel_id=2, source_target_pairs={{0,1},{1,0}}
  %d2 = bf16[32]{0} collective-permute-done(%cp2)
  %e = bf16[8,8]{1,0} fusion(%a, %b), kind=kOutput, calls=%fused_dot
  %acf = (bf16[8,8]{1,0}, bf16[32]{0}) fusion(%a, %b, %w), kind=kOutput, calls=%async_collective_fusion.1
  ROOT %t = (s32[]) tuple(%i)
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %w = (s32[]) while(%init), condition=%cond, body=%body
  ROOT %ar = f32[16]{0} all-reduce(%a), replica_groups=[1,2]<=[2], to_apply=%add
}
"""
    # 4 trips of: a permute of 128 bytes with a matmul fusion inside its flight (overlapped), one
    # of 64 bytes with none (waits), an all-gather of 64 bytes fused with a matmul (1/2 sent,
    # overlapped); and an all-reduce of 64 bytes (2 x 1/2 sent) in the entry (waits)
    assert traffic_of(hlo, 2) == 4 * (128 + 64 + 32) + 64
    assert overlapped_traffic(hlo, 2) == 4 * (128 + 32)


def test_estimate_takes_the_slowest_of_compute_memory_and_collectives():
    from spmdgpt.plan.plan import Plan, estimate

    plan = Plan(devices=4, mesh={"data": 4}, param_bytes=0, opt_bytes=0, batch_bytes=0, temp_bytes=0, flops=2e12,
                bytes_accessed=1e9, formula_flops=1e12, loops=False, traffic=3e9)
    est = estimate(plan, peak_flops=1e14, bandwidth=1e12, ici=1e11)  # 20 ms, 1 ms, 30 ms
    assert (est.compute_s, est.memory_s, est.collective_s) == pytest.approx((0.02, 0.001, 0.03))
    assert est.step_s == pytest.approx(0.03) and est.serial_s == pytest.approx(0.05)
    assert est.scheduled_s == pytest.approx(0.05)  # nothing scheduled beside a matmul: all of it waits
    plan.overlapped = 2.5e9  # 25 ms of it overlapped: 20 ms + the 5 ms that waits, but not under the links' 30 ms
    assert estimate(plan, 1e14, 1e12, 1e11).scheduled_s == pytest.approx(0.03)
    plan.overlapped = 1e9
    assert estimate(plan, 1e14, 1e12, 1e11).scheduled_s == pytest.approx(0.04)
    plan.overlapped = 0.0
    assert est.mfu == pytest.approx(1e12 / 0.03 / 1e14)
    assert estimate(plan, 1e14, 1e12).step_s == pytest.approx(0.02)  # (no interconnect given: not counted)
    # full remat: the formula's FLOPs and a second forward pass (4/3) when XLA's count is lower
    plan.flops, plan.recompute = 1e11, 4 / 3
    assert estimate(plan, 1e14, 1e12).compute_s == pytest.approx(1e12 * 4 / 3 / 1e14)
    # a pipeline's bubble: GPipe's 4 stages busy in 4 of 7 iterations stretch the compute by 7/4
    plan.stretch = 7 / 4
    assert estimate(plan, 1e14, 1e12).compute_s == pytest.approx(1e12 * 4 / 3 * 7 / 4 / 1e14)
    # FP8 GEMMs at twice the rate: 0.5e12 of the FLOPs in half the time
    plan.recompute, plan.stretch, plan.flops, plan.fp8_flops = 1.0, 1.0, 2e12, 0.5e12
    assert estimate(plan, 1e14, 1e12, fp8_speedup=2.0).compute_s == pytest.approx((2e12 - 0.25e12) / 1e14)
    assert estimate(plan, 1e14, 1e12).compute_s == pytest.approx(2e12 / 1e14)  # (no FP8 rate given: bf16's)
    plan.bytes_accessed = None  # no count of the bytes: no estimate (never a FLOPs-only 100% MFU)
    assert estimate(plan, 1e14, 1e12) is None


def test_plan_cli_prints_the_plan_and_refuses_one_that_does_not_fit(capsys, monkeypatch):
    code = main(["plan", *COMMON, "devices=8", "memory_gb=0.001"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "sharding dp on mesh {'data': 8, 'stage': 1, 'expert': 1, 'context': 1, 'model': 1} (8 device(s))" in out
    assert "parameters       0.4 MiB" in out and "collectives      all-reduce" in out
    assert err.startswith("spmdgpt: error: the train step needs ") and "a device holds 1.0 MiB" in err
    assert err.count("\n") == 1

    # without memory_gb, this host's CPU devices get its memory, shared (here a made-up 8 MiB)
    monkeypatch.setattr("spmdgpt.cli.plan.host_memory", lambda: 8 * 2**20)
    code = main(["plan", *COMMON, "devices=8"])
    out, err = capsys.readouterr()
    assert code == 2 and ("(the 1.0 MiB above: this host's 8.0 MiB of memory shared by 8 CPU device(s); "
                          "memory_gb=G or topology=NAME plans for other devices)") in out
    assert err.startswith("spmdgpt: error: the train step needs ") and "a device holds 1.0 MiB" in err
    monkeypatch.setattr("spmdgpt.cli.plan.host_memory", lambda: 64 * 2**30)
    assert main(["plan", *COMMON, "devices=8"]) == 0
    assert "(the 8.00 GiB above: this host's 64.00 GiB of memory shared by 8 CPU device(s)" in capsys.readouterr().out

    assert main(["plan", *COMMON, "devices=3"]) == 2
    assert "devices=3: JAX already started with 8 cpu device(s)" in capsys.readouterr().err


def test_plan_for_this_machine_refuses_a_state_that_cannot_fit_before_compiling(capsys, monkeypatch):
    """Planned for this machine's own devices (no topology=, devices= or memory_gb=), a run whose
    parameters, optimizer state and batches alone exceed a device is one line before anything
    compiles (llama2_7b on the 8 CPU devices of a made-up 8 GiB host: 6.74B float32 parameters and
    AdamW's moments, FSDP over 8: 9.41 GiB a device of 1 GiB; such a plan compiled for minutes);
    with memory_gb= the whole plan is printed, fitting or not (test_plan_cli_prints_...)."""
    import spmdgpt.plan.plan as plan

    monkeypatch.setattr("spmdgpt.cli.plan.host_memory", lambda: 8 * 2**30)
    monkeypatch.setattr(plan, "run_programs", lambda *a, **k: pytest.fail("compiled"))
    assert main(["plan", "+experiment=llama2_7b"]) == 2
    err = capsys.readouterr().err
    assert err == ("spmdgpt: error: the parameters, optimizer state and batches alone need 9.41 GiB per device (of "
                   "3.14 GiB parameters) but a device holds 1.00 GiB, before any temporaries: plan for the devices "
                   "it is meant for (topology=NAME, e.g. h100-8 or v5p-64; memory_gb=G) or split it over more "
                   "(sharding=fsdp)\n")


def test_plan_format_json_is_json_alone_on_stdout(capsys):
    """format=json: the plan as one JSON object, alone on stdout (`| jq` reads it); the report on
    stderr."""
    import json

    assert main(["plan", *COMMON, "sharding=fsdp", "devices=8", "memory_gb=0.001", "format=json"]) == 2
    out, err = capsys.readouterr()
    got = json.loads(out)
    fsdp = _plan("sharding=fsdp")
    assert (got["devices"], got["mesh"], got["sharding"], got["attention"]) == (
        8, {"data": 8, "stage": 1, "expert": 1, "context": 1, "model": 1}, "fsdp", "xla")
    assert (got["param_bytes"], got["opt_bytes"], got["temp_bytes"]) == (fsdp.param_bytes, fsdp.opt_bytes,
                                                                         fsdp.temp_bytes)
    assert got["total_bytes"] == fsdp.total_bytes and got["fits"] is False
    assert got["capacity_bytes"] == int(0.001 * 2**30)
    assert got["collectives"]["all-gather"] == list(fsdp.collectives["all-gather"])
    assert got["step_seconds"] is None and got["mfu"] is None and got["topology"] is None
    assert any(line.startswith("  total ") for line in err.splitlines()) and got["counted_by"] == "XLA"
    assert main(["plan", *COMMON, "format=yaml"]) == 2
    assert capsys.readouterr().err == "spmdgpt: error: format=yaml: expected text or json\n"


@pytest.mark.slow
def test_llama2_7b_plans_on_8_devices(capsys):
    """The 7B shape compiles from abstract shapes on 8 simulated devices (FSDP) and its
    parameters are 1/8 of 6.7B float32 values per device."""
    assert main(["plan", "+experiment=llama2_7b", "devices=8", "memory_gb=80"]) == 0
    out = capsys.readouterr().out
    assert "parameters       3.14 GiB" in out


# ----------------------------------------------------------------------------- topologies


def test_topology_names_map_to_xla_topologies():
    """Cloud names: v5p-N counts TensorCores (2 per chip), v5e/v5litepod/v6e-N chips; GPUs 1-8
    per host, more in hosts of 8."""
    from spmdgpt.config import ConfigError
    from spmdgpt.plan.topology import capacity, parse_topology, target_config

    got = {n: (parse_topology(n).devices, parse_topology(n).xla_name) for n in
           ("h100", "h100-8", "h100-32", "v5p-8", "v5p-128", "v5p-1024", "v5e-4", "v5litepod-8", "v5e-16", "v6e-256")}
    assert got == {"h100": (1, "1x1x1"), "h100-8": (8, "1x1x8"), "h100-32": (32, "1x4x8"),
                   "v5p-8": (4, "v5p:2x2x1"), "v5p-128": (64, "v5p:4x4x4"), "v5p-1024": (512, "v5p:8x8x8"),
                   "v5e-4": (4, "v5e:2x2"), "v5litepod-8": (8, "v5e:2x4"), "v5e-16": (16, "v5e:4x4"),
                   "v6e-256": (256, "v6e:16x16")}
    for bad, why in (("a100-8", "unknown device kind 'a100'"), ("h100-12", "N=12 GPUs must be 1-8"),
                     ("h100-x", "expected h100-N"), ("h100-0", "N=0 GPUs must be"),
                     ("v5p-12", r"v5p-12: N counts TensorCores \(2 per chip\) and must be 8, 16, 32"),
                     ("v5e-2", "v5e-2: N counts chips and must be 4, 8, 16"), ("v6e-24", "must be 4, 8, 16")):
        with pytest.raises(ConfigError, match=why):
            parse_topology(bad)
    # a GPU offers what JAX's allocator takes of the memory it reported; a TPU chip its HBM
    assert capacity(parse_topology("h100-8"))[0] == int(85017493504 * 0.75)
    assert capacity(parse_topology("v5p-8"))[0] == 95 * 2**30
    assert "core_count: 132" in target_config("h100")
    # multislice: K slices of the named shape
    two = parse_topology("v5e-16", slices=2)
    assert (two.devices, two.xla_name, two.slices) == (32, "v5e:4x4", 2)
    for name, slices, why in (("v5e-16", 0, r"slices=0 must be >= 1"),
                              ("h100-8", 2, r"slices=2 joins TPU pod slices; GPUs count every host in the name "
                                            r"\(e.g. h100-16 for 2 hosts of 8\)")):
        with pytest.raises(ConfigError, match=why):
            parse_topology(name, slices)


def test_fields_an_older_xla_does_not_know_are_dropped(capfd):
    """XLA's parser names an unknown field only in its log (file descriptor 2): the field is
    dropped and the description tried again; that log does not reach the terminal. A missing
    compiler is one error naming the extra to install."""
    import os

    from spmdgpt.config import ConfigError
    from spmdgpt.plan.topology import compile_only_devices

    seen = []

    def make(top, text):
        seen.append((text, top.xla_name))
        if "mem_clock_ghz" in text:
            os.write(2, b'E text_format.cc:378] Error parsing: 221:16: has no field named "mem_clock_ghz".\n')
            raise RuntimeError("FAILED_PRECONDITION: Failed to parse GpuTargetConfigProto")
        return ["gpu0", "gpu1"]

    assert compile_only_devices("h100-2", make) == ["gpu0", "gpu1"]
    assert [t for _, t in seen] == ["1x1x2", "1x1x2"]
    assert "mem_clock_ghz" in seen[0][0] and "mem_clock_ghz" not in seen[1][0]
    assert seen[0][0].replace("  mem_clock_ghz: 2.619\n", "") == seen[1][0]
    assert "has no field" not in capfd.readouterr().err

    def no_plugin(top, text):
        raise NotImplementedError("topology not implemented for cuda")

    def no_libtpu(top, text):
        raise RuntimeError("JAX TPU support not installed; cannot generate TPU topology.")

    with pytest.raises(ConfigError, match=r"topology=h100-8 compiles with the GPU compiler, which is not "
                                          r"installed: pip install 'spmdgpt\[gpu-plan-cudnn\]'"):
        compile_only_devices("h100-8", no_plugin)
    with pytest.raises(ConfigError, match=r"topology=v5e-16 compiles with the TPU compiler, which is not "
                                          r"installed: pip install 'spmdgpt\[tpu-plan\]'"):
        compile_only_devices("v5e-16", no_libtpu)


def _can_compile_for(name: str) -> bool:
    from spmdgpt.config import ConfigError
    from spmdgpt.plan.topology import compile_only_devices

    try:
        compile_only_devices(name)
    except ConfigError:
        return False
    return True


def test_a_missing_plan_compiler_skips_or_fails_where_ci_requires_it(monkeypatch):
    """Without a plan compiler the compile-only tests skip, saying which extra to install; under
    SPMDGPT_REQUIRE_PLANS=1 (.ci/run) they fail instead."""
    from spmdgpt.config import ConfigError

    def absent(name):
        raise ConfigError([f"topology={name} compiles with the GPU compiler, which is not installed"])

    monkeypatch.setattr("spmdgpt.plan.topology.compile_only_devices", absent)
    monkeypatch.delenv("SPMDGPT_REQUIRE_PLANS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="which is not installed"):
        compile_only_or_skip("h100")
    monkeypatch.setenv("SPMDGPT_REQUIRE_PLANS", "1")
    with pytest.raises(pytest.fail.Exception, match="^SPMDGPT_REQUIRE_PLANS=1 but topology=h100 compiles"):
        compile_only_or_skip("h100")


def test_plan_topology_errors_are_one_line(capsys):
    assert main(["plan", *COMMON, "topology=a100-8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spmdgpt: error: topology=a100-8: unknown device kind 'a100'; known: h100-N") and \
        err.count("\n") == 1
    assert main(["plan", *COMMON, "topology=h100-8", "devices=8"]) == 2
    assert "devices=8 and topology=h100-8: give one" in capsys.readouterr().err
    assert main(["plan", *COMMON, "slices=2"]) == 2
    assert capsys.readouterr().err == "spmdgpt: error: slices=2 needs topology=NAME (the pod slice to take 2 of)\n"
    for name, platform in (("h100-8", "GPU"), ("v5e-16", "TPU")):
        if not _can_compile_for(name):
            assert main(["plan", *COMMON, f"topology={name}"]) == 2
            err = capsys.readouterr().err
            assert err.startswith(f"spmdgpt: error: topology={name} compiles with the {platform} compiler")
            assert err.count("\n") == 1


@pytest.mark.skipif(not _can_compile_for("h100") and not required("SPMDGPT_REQUIRE_PLANS"),
                    reason="needs JAX's CUDA plugin (the gpu-plan extra)")
def test_plan_compiles_for_h100s_without_a_gpu(capsys):
    """With the gpu-plan extra: the staircase model's step compiled for 2 H100s by XLA's GPU
    compiler on this CPU: FSDP's reduce-scatters (which XLA:CPU does not emit) are there; the
    rollouts' sampler compiles for them too (its key and scalars as shapes: no array exists on a
    compile-only target)."""
    assert main(["plan", *COMMON, "sharding=fsdp", "model.attention=xla", "topology=h100-2",
                 "train.rollout_tokens=8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("compiled for h100-2 (1x1x2): 2 x NVIDIA H100 80GB HBM3")
    assert "reduce-scatter x" in out and "of 59.38 GiB" in out and "-bound: at most" in out
    assert "\n  rollout " in out


TPU = [*COMMON, "data.seq_len=128", "model.max_seq_len=128", "data.batch_size=16"]


@pytest.mark.skipif(not _can_compile_for("v5e-4") and not required("SPMDGPT_REQUIRE_PLANS"),
                    reason="needs libtpu (the tpu-plan extra)")
def test_plan_compiles_for_tpu_slices(capsys):
    """With the tpu-plan extra: the staircase model's step (splash attention, the TPU's own) for
    a v5e-4 slice under dp and fsdp and a v5p-16 one under fsdp_tp: per-chip parameter bytes
    divide as the rule table says; a model too large for a v5e chip's HBM exits 2."""
    import json

    plans = {}
    for table, topology in (("dp", "v5e-4"), ("fsdp", "v5e-4"), ("fsdp_tp", "v5p-16")):
        assert main(["plan", *TPU, f"sharding={table}", f"topology={topology}", "format=json"]
                    + (["mesh.data=4", "mesh.model=2"] if table == "fsdp_tp" else [])) == 0
        out, plans[table] = capsys.readouterr()  # (the JSON on stdout, the report on stderr)
        if table == "fsdp":
            got = json.loads(out)
    assert (got["topology"], got["devices"], got["attention"], got["fits"]) == ("v5e-4", 4, "splash", True)
    assert got["capacity_bytes"] == 16 * 2**30 and 0 < got["mfu"] <= 1 and got["step_seconds"] > 0
    # FSDP's collectives at a v5e link's 100 GB/s (400 GB/s per chip over 4 ports)
    assert got["traffic_bytes"] > 0 and got["collective_seconds"] == pytest.approx(got["traffic_bytes"] / 100e9)
    assert got["serial_step_seconds"] >= got["step_seconds"] >= got["collective_seconds"]
    assert "sent per device (ring) at 100 GB/s" in plans["fsdp"]
    assert plans["dp"].startswith("compiled for v5e-4 (v5e:2x2): 4 x TPU v5 lite (libtpu's compiler; no TPU used)")
    assert plans["fsdp_tp"].startswith("compiled for v5p-16 (v5p:2x2x2): 8 x TPU v5")

    def param_bytes(out):  # "parameters       0.1 MiB" -> bytes
        value, unit = next(ln for ln in out.splitlines() if "parameters" in ln).split()[1:3]
        return float(value) * (2**30 if unit == "GiB" else 2**20)

    assert param_bytes(plans["fsdp"]) == pytest.approx(param_bytes(plans["dp"]) / 4, rel=0.1)
    assert "all-gather x" in plans["fsdp"] and "all-gather x" not in plans["dp"]
    assert "of 16.00 GiB" in plans["dp"] and "a TPU v5e chip's HBM" in plans["dp"]
    big = ["model.d_model=2048", "model.num_heads=16", "model.num_layers=32", "model.vocab_size=32000"]
    assert main(["plan", *TPU, *big, "sharding=dp", "topology=v5e-4"]) == 2
    err = capsys.readouterr().err  # (libtpu refuses to compile it: the HBM it would need is in its message)
    assert err.startswith("spmdgpt: error: the train step does not fit a TPU v5 lite: Ran out of memory on HBM")
    assert err.count("\n") == 1 and "shard more (sharding=fsdp" in err


@pytest.mark.skipif(not _can_compile_for("v5e-4") and not required("SPMDGPT_REQUIRE_PLANS"),
                    reason="needs libtpu (the tpu-plan extra)")
def test_plan_compiles_for_several_tpu_slices(capsys):
    """slices=2: two v5e-4 slices (8 chips) in one plan; the data axis spans the slices (its
    first half of rows in slice 0), the model axis stays inside one; a data axis the slices do
    not divide is one line, exit 2."""
    import json

    from spmdgpt.config import MeshConfig
    from spmdgpt.mesh.sharding import make_mesh
    from spmdgpt.plan.topology import compile_only_devices

    devices = compile_only_devices("v5e-4", slices=2)
    mesh = make_mesh(MeshConfig(data=4, model=2), devices)
    assert [[d.slice_index for d in row] for row in mesh.devices.reshape(4, 2)] == [[0, 0], [0, 0], [1, 1], [1, 1]]
    assert main(["plan", *TPU, "sharding=fsdp_tp", "mesh.data=4", "mesh.model=2", "topology=v5e-4", "slices=2",
                 "format=json"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("compiled for v5e-4 x 2 slices (v5e:2x2 x 2 slices): 8 x TPU v5 lite")
    got = json.loads(out)
    assert (got["devices"], got["mesh"], got["slices"]) == (
        8,
        {"data": 4, "stage": 1, "expert": 1, "context": 1, "model": 2},
        2,
    )
    assert main(["plan", *TPU, "mesh.data=1", "mesh.model=8", "topology=v5e-4", "slices=2"]) == 2
    assert capsys.readouterr().err == ("spmdgpt: error: mesh.data=1 must be a multiple of the 2 pod slices it "
                                       "spans (the other axes stay inside a slice)\n")



def test_search_candidates_and_ranking(capsys):
    """The layouts search=true tries and how it ranks them (no compiler needed): every mesh
    shape of a table that uses the model axis, savers cheapest first, microbatches only where
    they divide the batch; a layout that fits beats a faster one that does not."""
    from spmdgpt.plan.search import Layout, chain, meshes, own_layout, ranked

    def mesh(data, model, **held):  # every MeshConfig axis, in mesh order
        return {"data": data, "stage": held.get("stage", 1), "expert": held.get("expert", 1),
                "context": held.get("context", 1), "model": model}

    assert meshes("fsdp", 8) == [mesh(8, 1)]
    assert meshes("tp", 8) == [mesh(4, 2), mesh(2, 4), mesh(1, 8)]
    assert meshes("fsdp_tp", 8, {"expert": 2}) == [mesh(2, 2, expert=2), mesh(1, 4, expert=2)]
    # the axes it does not choose come from the config's MeshConfig fields (-1 or 1: 1)
    from spmdgpt.config import load_config
    from spmdgpt.plan.search import held_axes

    held = held_axes(load_config(["mesh.stage=2", "mesh.context=2", "mesh.model=4"]).mesh)
    assert held == {"stage": 2, "expert": 1, "context": 2}
    assert meshes("fsdp_tp", 16, held) == [mesh(2, 2, stage=2, context=2), mesh(1, 4, stage=2, context=2)]
    steps = [(lay.remat, lay.microbatches) for lay in chain("dp", mesh(4, 1), 16)]
    assert steps == [("none", 1), ("dots", 1), ("dots", 2), ("dots", 4), ("full", 1), ("full", 2),
                     ("full", 4)]  # (8 microbatches x 4 data-parallel devices do not divide 16)
    assert [own_layout(o) for o in ("sharding=tp", "mesh.data=2", "model.remat=full", "train.microbatches=2",
                                    "model.d_model=64", "data.batch_size=8")] == [True] * 4 + [False] * 2

    def layout(table, step, fits):
        return Layout(table, {"data": 4, "expert": 1, "model": 1},
                      result={"fits": fits, "step_seconds": step, "serial_step_seconds": step, "total_bytes": 1})

    fast_too_big, slow, fast = layout("dp", 0.1, False), layout("fsdp", 0.3, True), layout("tp", 0.2, True)
    assert ranked([fast_too_big, slow, fast, Layout("x", {}, error="bad")]) == [fast, slow]
    # a compiler's own refusal for memory is "did not fit" (the chain goes on), anything else refused
    assert fast_too_big.too_big and Layout("dp", {}, error="the train step does not fit a TPU v5 lite: ...").too_big
    assert not Layout("tp", {}, error="model.num_heads=4 is not divisible by 8").too_big and not fast.too_big
    for items, message in ((["search=true"], "search=true needs topology=NAME: the layouts are ranked by the "
                                             "target's compiler and data sheet (e.g. topology=v5p-64)"),
                           (["search=true", "topology=v5e-4", "tables=dp,zero"],
                            "tables=dp,zero: zero is not a packaged rule table (dp, fsdp, fsdp_tp, tp)")):
        assert main(["plan", "+experiment=staircase", *items]) == 2
        assert capsys.readouterr().err == f"spmdgpt: error: {message}\n"


@pytest.mark.skipif(not _can_compile_for("v5e-4") and not required("SPMDGPT_REQUIRE_PLANS"),
                    reason="needs libtpu (the tpu-plan extra)")
def test_search_compiles_the_layouts_and_names_the_best(capsys):
    """search=true on a v5e-4 slice over dp and fsdp: both compiled by libtpu (each fits with
    remat none), ranked by the estimated step time, the winner's overrides on the report's last line."""
    import json

    assert main(["plan", *TPU, "sharding=tp", "topology=v5e-4", "search=true", "tables=dp,fsdp", "jobs=2",
                 "format=json"]) == 0
    out, err = capsys.readouterr()  # (the JSON alone on stdout, the report on stderr)
    got, out = json.loads(out), err.strip().splitlines()
    plans = {lay["overrides"][0]: lay["plan"] for lay in got["layouts"]}
    assert sorted(plans) == ["sharding=dp", "sharding=fsdp"] and all(p["fits"] for p in plans.values())
    best = min(plans, key=lambda k: (plans[k]["step_seconds"], plans[k]["serial_step_seconds"]))
    assert got["best"][0] == best and got["best"][1:] == ["mesh.data=4", "mesh.stage=1", "mesh.expert=1",
                                                         "mesh.context=1", "mesh.model=1", "model.remat=none",
                                                         "train.microbatches=1"]
    assert out[-1] == "best: spmdgpt train " + " ".join([*TPU, *got["best"]])  # (sharding=tp: replaced)
    assert "2 layouts compiled: 2 fit, 0 did not fit, 0 refused" in out
    assert plans["sharding=fsdp"]["param_bytes"] * 4 == pytest.approx(plans["sharding=dp"]["param_bytes"], rel=0.1)


def test_plan_serve_counts_the_pages_that_fit(capsys):
    """`spmdgpt plan serve=true`: every program the server compiles (the engine's step with decode
    rows, prefill rows and both; the scorer of a full-context prompt for logprobs, the pool
    resident beside it), a page's bytes (2 layers x 16 tokens x k and v of 4 heads x 16, float32:
    16 KiB), and the pages that fit: a pool of that many fits the device beside the largest
    program's rest, one more does not; a pool that does not fit is exit 2 in one line; engine
    arguments without serve=true are refused."""
    from spmdgpt.engine import EngineConfig
    from spmdgpt.plan.plan import plan_serving

    cfg = load_config(["+experiment=staircase", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    capacity = 2**21
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        plan = plan_serving(cfg, rules, EngineConfig(), capacity)
        assert plan.page_bytes == 2 * 16 * 2 * 4 * 16 * 4 and plan.pages == 8 * 4 + 1
        names = [q.name for q in plan.programs]
        assert names == ["serving_step", "decode_step", "prefill_step", "logprobs"]
        assert plan.program.total_bytes == max(q.total_bytes for q in plan.programs)
        pool = plan.pages * plan.page_bytes  # (the scorer's resident bytes: the parameters and the pool)
        assert plan.programs[3].resident_bytes == plan.param_bytes + pool
        assert plan.fit == (capacity - (plan.program.total_bytes - plan.pages * plan.page_bytes)) // plan.page_bytes
        at = [plan_serving(cfg, rules, EngineConfig(pages=n), capacity).program.total_bytes for n in (plan.fit,
                                                                                                    plan.fit + 1)]
    assert plan.fit > plan.pages and at[0] <= capacity < at[1]
    assert main(["plan", "+experiment=staircase", "serve=true", "memory_gb=1"]) == 0
    out = capsys.readouterr().out
    assert "32 pages of 16 tokens (+ the null page), 16.0 KiB a page" in out and "pages that fit" in out
    assert "4 programs compiled in" in out and "\n  logprobs " in out and "\n  decode_step " in out
    # (serve's buckets=4: 8 slots on the 8 devices' data axis, one row each; a context of 4 pages)
    assert "\n  step sizes       9 programs: decoding at 8 rows x 1, 2, 4 pages, prefill and both at each " in out
    assert main(["plan", "+experiment=staircase", "serve=true", "memory_gb=0.0005"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["spmdgpt: error: the page pool of 32 pages does not fit a cpu beside the model: a device with "
                   "more memory, or lower slots="]
    assert main(["plan", "+experiment=staircase", "slots=4"]) == 2
    assert capsys.readouterr().err == "spmdgpt: error: slots: the engine's arguments plan serving; add serve=true\n"
