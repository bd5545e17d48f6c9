"""Every program of a run planned and checked before step 1: `spmdgpt plan` lists the step, the
statistics, the evaluation and the rollouts with their memory; `spmdgpt train` compiles them
once (the run calls those executables) and refuses, before any step or write, a run one of whose
programs does not fit; the plan compilers' plugins stay quiet on a machine without their device."""

import json
import os
import subprocess
import sys

import jax
import pytest
from conftest import compile_only_or_skip

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.mesh.runtime import device_platforms
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.plan.plan import plan_step

# a vocabulary large enough that the logits dominate the evaluation's temporaries
WIDE = ["+experiment=staircase", "model.vocab_size=4096", "train.rollout_tokens=8", "train.stats_every=5"]


def _programs(*overrides, devices=2):
    cfg = load_config(WIDE + list(overrides))
    mesh = make_mesh(cfg.mesh, jax.devices()[:devices])
    with jax.set_mesh(mesh):
        return {p.name: p for p in plan_step(cfg, Rules(mesh, cfg.sharding, cfg.model), whole_run=True).programs}


def test_the_plan_lists_every_program_and_the_evaluation_runs_in_the_steps_parts():
    one, eight = _programs("mesh.data=2"), _programs("mesh.data=2", "train.microbatches=8")
    assert list(one) == ["train_step", "statistics", "evaluation", "rollout"]
    # per device: 8 rows of 64 tokens x 4,096 float32 logits (8 MiB) unsplit, an eighth in 8 parts
    logits = 8 * 64 * 4096 * 4
    assert one["evaluation"].temp_bytes >= logits > 4 * eight["evaluation"].temp_bytes
    assert one["train_step"].temp_bytes > 2 * eight["train_step"].temp_bytes
    for p in one.values():  # what the run holds meanwhile: the state (float32 Adam: 3 copies) + 4 batches
        assert p.resident_bytes == one["train_step"].resident_bytes > 3 * 4096 * 64 * 4
        assert p.total_bytes == p.resident_bytes + p.own_bytes + p.temp_bytes
        assert p.executable is not None and p.compile_s > 0


def test_plan_json_lists_the_programs_and_fits_only_when_all_fit(capsys):
    programs = _programs(devices=8)  # (the CLI plans on this process's 8 devices)
    names = ["train_step", "statistics", "evaluation", "rollout"]
    assert list(programs) == names
    largest = max(names, key=lambda n: programs[n].total_bytes)
    second = max(programs[n].total_bytes for n in names if n != largest)
    assert programs[largest].total_bytes > second
    between = (programs[largest].total_bytes + second) / 2  # (every program fits but the largest)
    args = ["plan", *WIDE, "format=json"]
    for memory, code in ((2 * programs[largest].total_bytes, 0), (between, 2)):
        assert main([*args, f"memory_gb={memory / 2**30:.9f}"]) == code
        out, err = capsys.readouterr()
        got = json.loads(out.strip().splitlines()[-1])
        assert [p["name"] for p in got["programs"]] == names
        assert [p["total_bytes"] for p in got["programs"]] == [programs[n].total_bytes for n in names]
        assert [p["fits"] for p in got["programs"]] == [code == 0 or n != largest for n in names]
        assert got["fits"] == (code == 0)
        assert "  evaluation       " in err  # (the report on stderr, the JSON alone on stdout)
        if code:
            refusal = err.strip().splitlines()[-1]
            assert refusal.startswith(f"spmdgpt: error: the {largest.replace('_', ' ')} needs ")
            assert [ln for ln in err.splitlines() if ln.startswith("spmdgpt: error: ")] == [refusal]


def _limited(gib: int, *command) -> list:
    """command under an address-space limit of `gib` GiB (ulimit -v): its host memory, as spmdgpt sees it."""
    return ["bash", "-c", f'ulimit -v {gib * 2**20} && exec "$@"', "bash", *command]


# GPT-2's vocabulary, a 1-layer 64-wide model: one batch of 512 x 256 tokens has 26 GB of float32 logits
BIG_LOGITS = ["+experiment=shakespeare_gpt2", "model.num_layers=1", "model.d_model=64", "model.num_heads=2",
              "data.batch_size=512", "data.seq_len=256", "model.max_seq_len=256", "train.progress=false"]


def test_train_refuses_a_program_too_large_before_step_1(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(_limited(12, sys.executable, "-m", "spmdgpt", "train", *BIG_LOGITS, "train.microbatches=1",
                                   f"run.dir={run_dir}"), capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip().splitlines()[-1]  # (8 devices: 64 rows x 256 x 50,304 float32 logits, 3.1 GiB, each)
    assert err.startswith("spmdgpt: error: the train step needs ") and " GiB per device " in err
    assert "but a CPU device (this host's 12.00 GiB over 8 devices) holds 1.50 GiB" in err
    assert "train.microbatches=k" in err and "Traceback" not in proc.stderr
    assert not run_dir.exists()  # nothing written: no metrics, no config, no lock file


def test_train_refuses_a_state_too_large_before_building_it(tmp_path, capsys, monkeypatch):
    """Parameters and AdamW's two moments (12 bytes a parameter, replicated under data
    parallelism) that alone exceed a device: refused in one line before the state is built or
    anything compiled or written (here a device of 1 MiB: the staircase model holds about 0.1M
    parameters)."""
    import re

    from spmdgpt.model import num_params
    from spmdgpt.training import state

    monkeypatch.setattr("spmdgpt.plan.plan.local_capacity", lambda: (2**20, "test device"))
    monkeypatch.setattr(state, "init_state", lambda *a, **k: pytest.fail("the state was built"))
    run_dir = tmp_path / "run"
    assert main(["train", "+experiment=staircase", f"run.dir={run_dir}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    need = float(re.match(r"spmdgpt: error: the parameters and optimizer state need ([\d.]+) MiB per device but a "
                          r"test device holds 1.0 MiB \(the largest: blocks.mlp.w_up \[2, 64, 256\], 33% of the "
                          r"parameters\); shard them \(sharding=fsdp", err).group(1))
    assert need == pytest.approx(12 * num_params(load_config(["+experiment=staircase"]).model) / 2**20, abs=0.05)
    assert not run_dir.exists()
    # a field whose arrays alone pass a device every step (here 64 MiB of per-layer inputs on each of 8 devices, a
    # state of 5 MiB): refused the same way, naming it (it was the preflight's, after minutes of compiling)
    monkeypatch.setattr("spmdgpt.plan.plan.local_capacity", lambda: (32 * 2**20, "test device"))
    assert main(["train", "+experiment=staircase", f"run.dir={run_dir}", "model.per_layer_dim=1024",
                 "data.batch_size=1024"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "spmdgpt: error: model.per_layer_dim=1024: the per-layer inputs alone ([2 layers, 8,192 tokens a device, "
        "1024] float32) need 64.0 MiB per device but a test device holds 32.0 MiB; choose a smaller "
        "model.per_layer_dim (Gemma 4 E2B / E4B: 256) or fewer tokens a step per device (data.batch_size, "
        "train.microbatches=k, more devices)")
    assert not run_dir.exists()
    from spmdgpt.plan.preflight import activation_floors  # (the streams in the compute dtype, bfloat16's 2 bytes)

    assert activation_floors(load_config(["+experiment=staircase", "model.hyper_connections=4",
                                          "model.compute_dtype=bfloat16"])) == [
        (16 * 64 / 8 * 4 * 64 * 2, "model.hyper_connections=4: the residual streams alone ([128 tokens a device, 4 "
         "streams, 64])", "choose fewer streams (DeepSeek-V4: 4) or fewer tokens a step per device (data.batch_size, "
         "train.microbatches=k, more devices)")]


def test_no_plugin_tracebacks_without_jax_platforms(tmp_path):
    """With the plan extras installed (CI installs them) and JAX_PLATFORMS unset, a command that
    starts JAX prints no plugin traceback or warning: only this machine's backends start."""
    assert device_platforms() == "cpu"  # (this machine: no NVIDIA driver, no TPU)
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    proc = subprocess.run([sys.executable, "-m", "spmdgpt", "plan", "+experiment=staircase", "train.steps=2"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for noise in ("Traceback", "cuDNN", "TPU", "WARNING"):
        assert noise not in proc.stderr
    assert "programs of the run" in proc.stdout


def test_the_engine_runs_its_step_compiled_ahead_of_time():
    """Engine.lower + use (the preflight's and the plan's rollout program): steps with both row
    groups run that executable (the jitted step is not called for them) and sample what the
    jitted path samples; the other groups still compile on demand."""
    from spmdgpt.engine import Engine, EngineConfig, Request
    from spmdgpt.model import params as T

    cfg = load_config(["+experiment=staircase", "mesh.data=2"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:2])
    # (a third request is read while the second still decodes: steps of both groups)
    requests = lambda: [Request([1, 2, 3, 4], 3, temperature=0.8, seed=3), Request([5, 6, 7, 8], 6, seed=3, stream=1),  # noqa: E731
                        Request([2, 4], 6, seed=3, stream=2)]
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = T.init_params(cfg.model, jax.random.key(0), rules)
        config = EngineConfig(slots=2, page_size=8, chunk=8)
        expected = [r.tokens for r in Engine(cfg.model, rules, params, config=config).run(requests())]
        ahead = Engine(cfg.model, rules, params, config=config)
        compiled, ran = ahead.lower(params).compile(), []
        ahead.use(lambda *a: ran.append(1) or compiled(*a))
        jitted, calls = ahead.step_fn.run, []
        ahead.step_fn.run = lambda *a, **k: calls.append(k["groups"]) or jitted(*a, **k)
        assert [r.tokens for r in ahead.run(requests())] == expected and [len(t) for t in expected] == [3, 6, 6]
        assert len(ran) >= 1 and (True, True) not in calls and set(calls) == {(False, True), (True, False)}

def test_platforms_follow_the_machines_devices(monkeypatch):
    """JAX_PLATFORMS: the accelerator this machine has when its JAX plugin is installed (a
    platform named but not installed would be an error), "cpu" without any, unset (JAX's own
    choice) for a device without its plugin; the user's own setting stays."""
    import glob

    from spmdgpt.mesh import runtime

    present, plugins = set(), ["xla_cuda13 libtpu"]
    monkeypatch.setattr(runtime.os.path, "exists", lambda p: p in present)
    monkeypatch.setattr(glob, "glob", lambda pattern: [p for p in present if p.startswith(pattern[:9])])
    monkeypatch.setattr(runtime, "_installed_plugins", lambda: plugins[0])
    assert device_platforms() == "cpu"
    present.add("/dev/accel0")
    assert device_platforms() == "tpu,cpu"
    present.add("/dev/kfd")  # (AMD's GPU, and no ROCm plugin: the TPU's)
    assert device_platforms() == "tpu,cpu"
    plugins[0] = "xla_rocm7"
    assert device_platforms() == "rocm,cpu"
    present.add("/proc/driver/nvidia/version")
    plugins[0] = "xla_cuda13"
    assert device_platforms() == "cuda,cpu"
    plugins[0] = ""  # (an NVIDIA driver, CPU-only JAX: left to JAX)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    runtime.choose_platforms()
    assert "JAX_PLATFORMS" not in os.environ
    plugins[0] = "xla_cuda13"
    runtime.choose_platforms()
    assert os.environ["JAX_PLATFORMS"] == "cuda,cpu"
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # (the user's choice stays)
    runtime.choose_platforms()
    assert os.environ["JAX_PLATFORMS"] == "cpu"


def test_the_compilation_cache_folder(monkeypatch, tmp_path):
    """The default folder, the user's, off; and none by default on simulated CPU devices (an
    executable of 8 of them loaded from the cache deadlocked: `use_compilation_cache`)."""
    from spmdgpt.mesh.runtime import COMPILE_CACHE_MAX_BYTES, use_compilation_cache

    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_COMPILATION_CACHE_MAX_SIZE", "SPMDGPT_COMPILE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPMDGPT_CACHE", str(tmp_path))
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    for flags, cached in (("--xla_force_host_platform_device_count=8", False),
                          ("--xla_force_host_platform_device_count=8 --xla_force_host_platform_device_count=1", True),
                          ("--xla_force_host_platform_device_count=1", True), ("", True)):
        monkeypatch.setenv("XLA_FLAGS", flags)
        assert (use_compilation_cache() == str(tmp_path / "xla")) is cached, flags
        assert ("JAX_COMPILATION_CACHE_DIR" in os.environ) is cached
        monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")  # (the flag makes CPU devices; the run's are GPUs)
    assert use_compilation_cache() == str(tmp_path / "xla")
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("SPMDGPT_COMPILE_CACHE", str(tmp_path / "mine"))  # (spmdgpt's folder: none here either)
    assert use_compilation_cache() is None and "JAX_COMPILATION_CACHE_DIR" not in os.environ
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/jax-own")  # (JAX's own variable: used as given)
    assert use_compilation_cache() == "/jax-own"
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.delenv("SPMDGPT_COMPILE_CACHE")
    monkeypatch.setenv("XLA_FLAGS", "")
    assert use_compilation_cache() == str(tmp_path / "xla") == os.environ["JAX_COMPILATION_CACHE_DIR"]
    assert os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] == str(COMPILE_CACHE_MAX_BYTES) == str(8 * 2**30)
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/elsewhere")  # (the user's own folder stays)
    assert use_compilation_cache() == "/elsewhere"
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.setenv("SPMDGPT_COMPILE_CACHE", "off")
    assert use_compilation_cache() is None and "JAX_COMPILATION_CACHE_DIR" not in os.environ
    monkeypatch.setenv("SPMDGPT_COMPILE_CACHE", str(tmp_path / "mine"))
    assert use_compilation_cache() == str(tmp_path / "mine")


def test_plans_for_compile_only_devices_leave_the_compilation_cache_alone(capsys):
    """A topology's compile-only devices cannot load executables: plan compiles for them with the
    persistent compilation cache off (the suite's is on), so planning twice warns of nothing."""
    import warnings


    compile_only_or_skip("h100")
    assert jax.config.jax_enable_compilation_cache
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(2):
            assert main(["plan", "+experiment=staircase", "topology=h100", "model.attention=xla", "model.num_layers=1",
                         "data.seq_len=16", "model.max_seq_len=16", "data.batch_size=8"]) == 0
    assert [str(w.message) for w in seen if "compilation cache" in str(w.message)] == []
    assert jax.config.jax_enable_compilation_cache  # (restored for the rest of the process)
    capsys.readouterr()
