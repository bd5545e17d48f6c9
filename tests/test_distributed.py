"""Multi-process training with jax.distributed: real processes over 127.0.0.1 (gloo)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import read_jsonl, wait_until

from spmdgpt.cli import main

# (a constant learning rate after the warmup: the step's program does not depend on train.steps, so
# the 14-step resume below loads the 10-step run's program from the compilation cache)
STAIR = ["+experiment=staircase", "sharding=fsdp", "train.log_every=1", "train.progress=false",
         "train.eval_every=0", "optimizer.schedule=constant"]


def env_with_devices(n):
    return {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={n}",
            "PYTHONUNBUFFERED": "1"}


def launch(nproc, per_proc, args, **kw):
    cmd = [sys.executable, "-m", "spmdgpt", "launch", "--nproc", str(nproc),
           "--devices-per-proc", str(per_proc), "--", "train", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env_with_devices(1), **kw)


def single(args, devices):
    cmd = [sys.executable, "-m", "spmdgpt", "train", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env_with_devices(devices))


def losses(run_dir):
    return [r["loss"] for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if "loss" in r]


@pytest.fixture(scope="module")
def two_by_two(tmp_path_factory):
    """10 steps on 2 processes x 2 devices, on a two-dataset mixture of staircase documents of
    random lengths (char tokenizer, document masks): both processes find the token stores
    missing, one prepares them while the other waits on the store's lock."""
    base = tmp_path_factory.mktemp("dist")
    rng = np.random.default_rng(0)
    period = "012345678987654321"
    for name in ("a", "b"):
        docs = [(period * 40)[rng.integers(18):][: rng.integers(40, 400)] for _ in range(200)]
        (base / f"{name}.jsonl").write_text("".join(f'{{"text": "{d}"}}\n' for d in docs))
    args = [*STAIR, "data.source=text", "data.tokenizer=char", "data.document_mask=true",
                f"data.cache_dir={base / 'cache'}",
                f"+data.datasets.a={{paths:[{base / 'a.jsonl'}],weight:0.75,val_fraction:0.2}}",
                f"+data.datasets.b={{paths:[{base / 'b.jsonl'}],weight:0.25,val_fraction:0.2}}"]
    run_dir = base / "2x2"
    out = launch(2, 2, [*args, "train.steps=10", f"run.dir={run_dir}"])
    assert out.returncode == 0, out.stdout[-3000:]
    return run_dir, out.stdout, args


def test_two_processes_match_one_process_with_four_devices(two_by_two, tmp_path):
    run_dir, stdout, args = two_by_two
    ref = tmp_path / "1x4"
    out = single([*args, "train.steps=10", f"run.dir={ref}"], devices=4)
    assert out.returncode == 0, out.stderr
    a, b = losses(run_dir), losses(ref)
    assert len(a) == len(b) == 10
    # the same global batches and the same 4-device mesh; collectives over gloo instead of
    # in-process reductions: stated tolerance 2e-6 absolute
    np.testing.assert_allclose(a, b, rtol=0, atol=2e-6)
    assert a[-1] < a[0] - 0.5
    # both ranks ran, only rank 0 wrote logs: one metrics row per step, rank 1 printed none
    assert "[0] done: 10 steps" in stdout
    assert not any(line.startswith("[1] step") for line in stdout.splitlines())
    rows = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows if "loss" in r] == list(range(1, 11))
    assert [r["step"] for r in rows if "val/loss" in r] == [10]


def test_two_process_checkpoint_resumes_in_one_process(two_by_two, tmp_path):
    run_dir, _, args = two_by_two
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    out = single([*args, "train.steps=14", f"run.dir={copy}"], devices=4)
    assert out.returncode == 0, out.stderr
    assert "resumed from the checkpoint at step 10" in out.stderr
    rows = [r["step"] for r in read_jsonl(copy / "metrics.jsonl") if "loss" in r]
    assert rows == list(range(1, 15))


def _procs_with(text):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmd and int(pid) != os.getpid():
                found.append((int(pid), cmd))
    return found


def test_killing_one_process_stops_the_launcher(tmp_path):
    run_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "spmdgpt", "launch", "--nproc", "2", "--devices-per-proc", "2", "--grace-s", "1",
           "--", "train", *STAIR, "train.steps=100000", "checkpoint.enabled=false", f"run.dir={run_dir}"]
    launcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env_with_devices(1))
    try:
        wait_until(lambda: (run_dir / "metrics.jsonl").exists() and losses(run_dir), launcher, "the first loss",
                   poll=0.1)
        rank1 = [pid for pid, c in _procs_with(str(run_dir)) if "dist.process_id=1" in c]
        assert len(rank1) == 1
        os.kill(rank1[0], signal.SIGKILL)
        t0 = time.time()
        launcher.wait(timeout=60)
        elapsed = time.time() - t0
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        for pid, _ in _procs_with(str(run_dir)):
            os.kill(pid, signal.SIGKILL)
    assert launcher.returncode != 0
    assert elapsed < 30  # (the survivor, blocked in a collective, is killed 1 s after its SIGTERM)
    assert _procs_with(str(run_dir)) == []  # no process left behind


def test_launch_refuses_bad_input(capsys):
    def err(*items):
        capsys.readouterr()
        assert main(["launch", *items]) == 2
        return capsys.readouterr().err.strip().splitlines()[-1]

    assert err("nproc=2", "grace_s=-1", "--", "train") == (
        "spmdgpt: error: launch: grace_s=-1 must be >= 0 (seconds from SIGTERM to SIGKILL)")
    example = "e.g. spmdgpt launch nproc=2 -- train +experiment=staircase (the -- is optional)"
    assert err("nproc=0", "--", "train") == f"spmdgpt: error: launch: nproc=0 must be >= 1; {example}"
    assert err("nproc=2", "devices_per_proc=0", "train") == (
        f"spmdgpt: error: launch: devices_per_proc=0 must be >= 1; {example}")
    assert err("nproc=2") == f"spmdgpt: error: launch: no command to run; {example}"
    assert err("nproc=2", "--", "trian") == (
        "spmdgpt: error: launch: trian is not a spmdgpt command (train, sample, chat, lm-eval, prepare, tokenizer, "
        f"eval, viz, plot, export, launch, serve, ladder, config, plan); {example}")
    assert err("nproc=2", "+experiment=staircase", "train") == (
        "spmdgpt: error: launch: +experiment=staircase is not one of launch's own keys (nproc, devices_per_proc, "
        f"grace_s), and the command comes after them; {example}")
    assert "grace_s=soon is not a valid float" in err("nproc=2", "--grace-s", "soon", "--", "train")


def test_partial_dist_settings_are_an_error(capsys, tmp_path):
    code = main(["train", "+experiment=staircase", "dist.coordinator=127.0.0.1:1234",
                 f"run.dir={tmp_path / 'r'}"])
    assert code == 2
    assert "dist.coordinator, dist.num_processes and dist.process_id go together" in capsys.readouterr().err


@pytest.mark.parametrize("env,kind", [
    ({}, None),
    ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4"}, "slurm"),
    ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1"}, None),  # a one-task SLURM job is single-process
    ({"OMPI_COMM_WORLD_SIZE": "2"}, "openmpi"),
    ({"TPU_WORKER_HOSTNAMES": "w0,w1,w2,w3"}, "tpu"),
    ({"TPU_WORKER_HOSTNAMES": "w0"}, None),
])
def test_cluster_detection(monkeypatch, env, kind):
    from spmdgpt.mesh.distributed import detected_cluster

    for var in ("SLURM_JOB_ID", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "TPU_WORKER_HOSTNAMES"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert detected_cluster() == kind
